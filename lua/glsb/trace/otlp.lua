-- glsb.trace.otlp: the OTLP/HTTP span exporter (JSON encoding) on the glsb loop.
--
-- Facts relied on (OTLP specification, "OTLP/HTTP"): POST the ExportTraceServiceRequest to the traces
-- URL with Content-Type application/json; 200 means accepted, possibly with
-- partialSuccess{rejectedSpans, errorMessage} (logged, never retried); only 429, 502, 503 and 504 (and
-- a failed connection) are retryable, with exponential backoff, honouring Retry-After (seconds or an
-- HTTP-date); any other status is final. The whole export, retries included, stays within the batch
-- processor's export deadline.
local http = require "glsb.http"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local retry = require "glsb.retry"
local otlp_json = require "glsb.trace.otlp_json"

local M = {}

local RETRYABLE = { [429] = true, [502] = true, [503] = true, [504] = true }

-- Backoff between attempts of one export: the JS SDK's shape (1 s, x1.5, at most 5 s, +/-20 % jitter,
-- 5 attempts), every wait cut to what is left of the deadline.
M.DEFAULT_RETRY = { attempts = 5, base_delay = 1, factor = 1.5, max_delay = 5, jitter = 0.2 }


local Exporter = {}
Exporter.__index = Exporter

-- new{url, headers, timeout, resource, scope, retry, warn} -> exporter. timeout: seconds per request, nil
-- for none (resolved by the caller: glsb.trace.config).
function M.new(opts)
  local policy = {}
  for k, v in pairs(M.DEFAULT_RETRY) do policy[k] = v end
  for k, v in pairs(opts.retry or {}) do policy[k] = v end
  local headers = { ["Content-Type"] = "application/json" }
  for k, v in pairs(opts.headers or {}) do
    headers[k] = v
    -- a collector's headers are its credentials (an API key under any name): registered (glsb.secrets)
    if k ~= "Content-Type" then require("glsb.secrets").register(v) end
  end
  return setmetatable({ url = opts.url, headers = headers, timeout = opts.timeout,
    resource = opts.resource, scope = opts.scope, retry = policy, warn = opts.warn,
    random = opts.random, stats = { requests = 0, retries = 0 } }, Exporter)
end

-- The clock glsb waits on (monotonic seconds).
local function now() return loop.now() end

-- One POST. -> "ok" | "retry" | "fail", reason, retry_after
function Exporter:_post(body, deadline)
  if loop.expired(deadline) then return "fail", "export deadline passed" end
  -- the request's own timeout within what is left of the export (either may be none)
  local budget = math.min(self.timeout or math.huge, loop.remaining(deadline) or math.huge)
  self.stats.requests = self.stats.requests + 1
  local res = http.request { method = "POST", url = self.url, headers = self.headers, body = body,
    timeout = budget < math.huge and budget or 0, connect_timeout = math.min(budget, 5), trace = false }
  if res.error then
    return "retry", (res.error.code or "transport") .. ": " .. tostring(res.error.message)
  end
  local status = res.status
  if status >= 200 and status < 300 then
    local doc = res.body and res.body ~= "" and http.decode_json(res.body)
    local ps = type(doc) == "table" and doc.partialSuccess
    if type(ps) == "table" and (tonumber(ps.rejectedSpans) or 0) > 0 then
      return "ok", string.format("collector rejected %s span(s): %s", tostring(ps.rejectedSpans),
        tostring(ps.errorMessage or ""))
    end
    return "ok"
  end
  local reason = "HTTP " .. status
  if RETRYABLE[status] then
    return "retry", reason, errors.retry_after_of(res.headers)
  end
  return "fail", reason
end

-- export(spans, deadline[, attempts]) -> true, note | false, reason. deadline: absolute loop.now()
-- seconds (nil: none); attempts overrides the retry policy's count (the batch processor's single attempt
-- while the collector keeps failing, and at shutdown). The retries are glsb.retry's, within the deadline.
function Exporter:export(spans, deadline, attempts)
  -- what leaves the process: scrubbed of the secrets glsb knows (glsb.secrets), whatever set the attributes
  local body = require("glsb.secrets").scrub(otlp_json.encode(spans, self.resource, self.scope))
  local policy = {}
  for k, v in pairs(self.retry) do policy[k] = v end
  policy.attempts = attempts or policy.attempts
  policy.deadline, policy.random = deadline, self.random
  policy.max_retry_after = math.huge -- a collector's Retry-After is waited out or the export given up
  policy.retryable = function(f) return type(f) == "table" and f.verdict == "retry" end
  policy.on_retry = function() self.stats.retries = self.stats.retries + 1 end
  local ok, a = pcall(retry.call, function()
    local verdict, reason, retry_after = self:_post(body, deadline)
    if verdict == "ok" then return reason end
    error({ verdict = verdict, reason = reason, retry_after = retry_after }, 0)
  end, policy)
  if ok then return true, a end
  if type(a) ~= "table" or not a.reason then error(a, 0) end -- a cancellation, or a bug
  local ra = a.retry_after
  if ra and deadline and now() + ra >= deadline then
    return false, a.reason .. string.format(" (Retry-After %ds is past the export deadline)", ra)
  end
  return false, a.reason
end

function Exporter:describe() return self.url end

return M
