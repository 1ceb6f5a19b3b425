-- glsb.providers.bedrock.api: the AgentCore wire, shared by the sandbox adapter and the template
-- builder (docs/protocols/bedrock.md): where the two planes live, SigV4-signed restJson1
-- requests, AWS error answers, retries of the operations that may be retried, and the
-- InvokeCodeInterpreter event stream.
--
-- Facts relied on:
-- - data plane https://bedrock-agentcore.<region>.amazonaws.com, control plane
--   https://bedrock-agentcore-control.<region>.amazonaws.com (".amazonaws.com.cn" in China); AWS's
--   Python wrapper reads BEDROCK_AGENTCORE_DP_ENDPOINT / _CP_ENDPOINT; both planes sign with the
--   service name "bedrock-agentcore" (§1, §2, §4).
-- - errors: the HTTP status and x-amzn-errortype (cut at ":", anything before "#" dropped), body
--   {"message"} (§1.4).
-- - Start, Stop, Create and Delete carry a clientToken: one token across the retries of one
--   logical call makes the service do it once (§6).
-- - Invoke answers 200 and an event stream; after the 200 any failure may follow execution, so
--   only a request provably never written is sent again (§6, policy 2).
local http = require "glsb.http"
local errors = require "glsb.errors"
local retry = require "glsb.retry"
local loop = require "glsb.loop"
local outcome = require "glsb.outcome"
local log = require "glsb.log"
local sigv4 = require "glsb.aws.sigv4"
local credentials = require "glsb.aws.credentials"
local secrets = require "glsb.secrets"
local answer = require "glsb.answer"

local M = {}

M.SERVICE = "bedrock-agentcore"
M.DEFAULT_IDENTIFIER = "aws.codeinterpreter.v1"

-- The grammars of AgentCore's ids, from the service models' patterns (docs/protocols/bedrock.md §7), checked
-- where an id arrives: a Start or List answer, a ref, the `identifier` option, a template builder's answer.
-- A code interpreter id: the system one, or "<name>-<10 letters and digits>" with a name of at most 48
-- (CodeInterpreterId); an identifier may be its ARN too (the data plane's codeInterpreterIdentifier).
local function interpreter_id(s)
  if s == M.DEFAULT_IDENTIFIER then return true end
  local name, suffix = s:match("^([A-Za-z][A-Za-z0-9_]*)%-([A-Za-z0-9]+)$")
  return name ~= nil and #name <= 48 and #suffix == 10
end
local function interpreter(s)
  if interpreter_id(s) then return true end
  local partition, account, kind, id = s:match("^arn:(aws[a-z0-9-]*):bedrock%-agentcore:[a-z0-9-]+:([a-z0-9]+):"
    .. "(code%-interpreter[a-z-]*)/(.*)$")
  if not partition or (partition ~= "aws" and not partition:match("^aws%-[a-z0-9-]+$")) then return false end
  if account ~= "aws" and not account:match("^" .. ("%d"):rep(12) .. "$") then return false end
  return (kind == "code-interpreter" or kind == "code-interpreter-custom") and interpreter_id(id)
end
M.IDS = {
  session = answer.grammar { what = "an AgentCore session id", says = "letters and digits", max = 40,
    pattern = "^[0-9A-Za-z]+$", source = "docs/protocols/bedrock.md §7" },
  interpreter_id = answer.grammar { what = "an AgentCore code interpreter id", max = 59, test = interpreter_id,
    says = "aws.codeinterpreter.v1, or <a letter, then letters, digits, '_'>-<10 letters and digits>",
    source = "docs/protocols/bedrock.md §7" },
  interpreter = answer.grammar { what = "an AgentCore code interpreter (id or ARN)", max = 200, test = interpreter,
    says = "aws.codeinterpreter.v1, <name>-<10 letters and digits>, or arn:aws:...:code-interpreter[-custom]/<id>",
    source = "docs/protocols/bedrock.md §7" },
}
M.USER_AGENT = "glsb-lua/0.1.0"
M.CONNECT_TIMEOUT = 10
M.API_TIMEOUT = 60
-- AWS's standard retry mode: 3 attempts, exponential backoff with full jitter (§6).
M.RETRY = { attempts = 3, base_delay = 0.1, factor = 2, max_delay = 20, jitter = 1, max_retry_after = 5 }

local function nonempty(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil
end

local function strip_slash(s) return (s:gsub("/+$", "")) end

---------------------------------------------------------------------------
-- Configuration
---------------------------------------------------------------------------

local function default_host(kind, region)
  local suffix = region:match("^cn%-") and "amazonaws.com.cn" or "amazonaws.com"
  return string.format("https://%s.%s.%s", kind, region, suffix)
end

-- config(opts) -> cfg, or nil, message (no region). cfg: region, endpoint, control_endpoint,
-- credentials (a provider: cfg.credentials:get()), transport options, attempts.
-- AgentCore's provider options, declared once (glsb.options: checked strictly by the base class; the
-- README's tables come from these): create, connect, list and the template builder take them.
M.OPTIONS = {
  region = { "string|boolean", "none found: `SandboxStartError`, nothing sent (false: ignore the options')",
    default = "$AWS_REGION, $AWS_DEFAULT_REGION, the profile's" },
  access_key_id = { "string", "with `secret_access_key` (and `session_token`): explicit credentials",
    default = "the AWS chain" },
  secret_access_key = { "string", "see `access_key_id`" },
  session_token = { "string", "temporary credentials' token" },
  profile = { "string", "shared-files profile", default = "$AWS_PROFILE or default" },
  endpoint = { "string", "data plane", default = "$BEDROCK_AGENTCORE_DP_ENDPOINT or https://bedrock-agentcore.<region>"
    .. ".amazonaws.com" },
  control_endpoint = { "string", "control plane (templates)", default = "$BEDROCK_AGENTCORE_CP_ENDPOINT or "
    .. "https://bedrock-agentcore-control.<region>.amazonaws.com" },
  identifier = { "string", "the code interpreter (id or ARN): sessions start on it, list and connect look there",
    default = "aws.codeinterpreter.v1" },
  cainfo = { "string", "a CA bundle to check the endpoints' certificates with" },
  connect_to = { "string_list", "curl `HOST:PORT:TO_HOST:TO_PORT` entries (split horizon)" },
  getenv = { "function", "where environment variables are read (tests)", default = "os.getenv" },
}

function M.config(opts)
  opts = opts or {}
  local region = credentials.region(opts)
  if not region then
    return nil, "AWS Bedrock AgentCore needs a region: pass region, or set AWS_REGION / AWS_DEFAULT_REGION, "
      .. "or give the profile one"
  end
  if not region:match("^[a-z][a-z0-9-]+[0-9]$") then return nil, "not an AWS region: " .. ("%q"):format(region) end
  local getenv = opts.getenv or os.getenv
  return {
    region = region,
    endpoint = strip_slash(nonempty(opts.endpoint) or nonempty(getenv("BEDROCK_AGENTCORE_DP_ENDPOINT"))
      or default_host("bedrock-agentcore", region)),
    control_endpoint = strip_slash(nonempty(opts.control_endpoint) or nonempty(getenv("BEDROCK_AGENTCORE_CP_ENDPOINT"))
      or default_host("bedrock-agentcore-control", region)),
    credentials = credentials.chain(opts),
    cainfo = nonempty(opts.cainfo),
    connect_to = opts.connect_to,
    attempts = opts.retry == false and 1 or M.RETRY.attempts,
  }
end

---------------------------------------------------------------------------
-- Errors
---------------------------------------------------------------------------

-- error_name(headers, json) -> the AWS error name, as the SDKs read it.
function M.error_name(headers, json)
  local t = headers and headers["x-amzn-errortype"]
  if type(t) ~= "string" or t == "" then
    t = type(json) == "table" and (json.code or json.__type) or nil
  end
  if type(t) ~= "string" then return nil end
  t = t:match("^([^:]*)") or t
  t = t:match("#(.*)$") or t
  return t
end

-- aws_failure(res, creds) -> a cause table for a non-2xx answer: http_status, aws_error (the name),
-- message "<Name>: <message>" (secrets of creds redacted: AWS's signature errors quote the
-- canonical request, which holds the session token), reason/field_list of a ValidationException,
-- retry_after.
function M.aws_failure(res, creds)
  local json = type(res.json) == "table" and res.json or nil
  local name = M.error_name(res.headers, json) or ("HTTP" .. tostring(res.status))
  local text = json and (json.message or json.Message) or nil
  if type(text) ~= "string" then
    text = type(res.body) == "string" and res.body:gsub("%s+", " "):sub(1, 300) or ""
  end
  text = credentials.redact(text, creds)
  local f = errors.http_failure(res.status, res.headers, nil)
  f.aws_error = name
  f.message = name .. ": " .. text:sub(1, 2000) .. " (HTTP " .. tostring(res.status) .. ")"
  if json then
    f.reason = json.reason
    f.field_list = json.fieldList
  end
  -- x-amz-retry-after is whole milliseconds (smithy-rs aws-runtime/src/retries/classifiers.rs,
  -- AmzRetryAfterHeaderClassifier); Retry-After, which errors.http_failure read, is seconds or a date
  local ms = math.tointeger(tonumber(res.headers and res.headers["x-amz-retry-after"]))
  if ms and ms >= 0 then f.retry_after = ms / 1000 end
  return f
end

-- The AWS SDKs' retryable classes: throttling (429 or a throttling name) and transient (500, 502,
-- 503, 504, timeouts and connection failures).
local THROTTLING = { ThrottlingException = true, Throttling = true, ThrottledException = true,
  TooManyRequestsException = true, RequestLimitExceeded = true, SlowDown = true, LimitExceededException = true,
  RequestThrottled = true, RequestThrottledException = true, ProvisionedThroughputExceededException = true,
  TransactionInProgressException = true, BandwidthLimitExceeded = true, PriorRequestNotComplete = true,
  EC2ThrottledException = true }
local TRANSIENT_STATUS = { [500] = true, [502] = true, [503] = true, [504] = true }

function M.retryable(cause)
  if type(cause) ~= "table" then return false end
  if cause.http_status then
    return cause.http_status == 429 or TRANSIENT_STATUS[cause.http_status] == true
      or THROTTLING[cause.aws_error] == true
  end
  return cause.phase ~= nil and cause.phase ~= "framing" -- a transport failure: connection, reset, timeout
end

---------------------------------------------------------------------------
-- Signed requests
---------------------------------------------------------------------------

local function authority(base)
  return base:match("^https?://([^/]+)")
end

-- signed(cfg, plane, method, path, query, body, extra, creds) -> the glsb.http request table.
--   path: already percent-encoded; query: decoded {{k, v}} pairs; body: a string or nil;
--   extra: more headers {{name, value}}.
-- The request is signed by glsb.http right before it goes out (opts.sign), after any header a seam
-- adds (tracing's traceparent: a modeled, signed header of AgentCore's operations), so every header
-- sent is signed. curl's own defaults (Accept, Content-Type) are suppressed ("Name:" with no value)
-- and its Expect never sent (glsb.core), so nothing unsigned is added on the way.
function M.signed(cfg, plane, method, path, query, body, extra, creds)
  local base = plane == "control" and cfg.control_endpoint or cfg.endpoint
  local headers = { "Host: " .. authority(base), "X-Amz-User-Agent: " .. M.USER_AGENT }
  if body ~= nil then headers[#headers + 1] = "Content-Type: application/json" end
  if body ~= nil or method == "POST" or method == "PUT" then
    headers[#headers + 1] = "Content-Length: " .. tostring(#(body or ""))
  end
  for _, h in ipairs(extra or {}) do headers[#headers + 1] = h[1] .. ": " .. h[2] end
  local qs = query and #query > 0 and ("?" .. sigv4.encode_query(query)) or ""
  return {
    method = method, url = base .. path .. qs, headers = headers, body = body,
    connect_timeout = M.CONNECT_TIMEOUT, cainfo = cfg.cainfo, connect_to = cfg.connect_to,
    sign = function(o)
      local pairs_ = {}
      for _, line in ipairs(o.headers) do
        local name, value = line:match("^([^:]+):%s*(.-)%s*$")
        if name and value ~= "" then pairs_[#pairs_ + 1] = { name, value } end
      end
      local s = sigv4.sign({ method = method, path = path, query = query, headers = pairs_, body = body or "" },
        creds, { region = cfg.region, service = M.SERVICE, content_sha256 = true })
      local wire = {}
      for _, h in ipairs(s.headers) do wire[#wire + 1] = h[1] .. ": " .. h[2] end
      wire[#wire + 1] = "Accept:"
      if body == nil then wire[#wire + 1] = "Content-Type:" end
      local copy = {}
      for k, v in pairs(o) do copy[k] = v end
      copy.headers, copy.sign = wire, nil
      return copy
    end,
  }
end

local function creds_of(cfg)
  local ok, c = pcall(cfg.credentials.get, cfg.credentials)
  if ok then
    -- the chain's credentials, wherever they came from (options, environment, files, IMDS): known to
    -- glsb.secrets, so no error, log line or span shows them
    if type(c) == "table" then
      secrets.register(c.secret_access_key)
      secrets.register(c.session_token)
    end
    return c
  end
  if loop.is_cancelled(c) then error(c, 0) end
  -- no credentials: a permanent failure of the configuration, not of the network
  error({ message = errors.describe(c), credentials = true, cause = c }, 0)
end
M.credentials_of = creds_of

-- call(cfg, plane, method, path, {query, json, timeout, attempts, expect}) -> decoded JSON answer.
-- Raises a cause table (aws_failure, or the transport failure) after the retries the operation
-- allows: `attempts` (default cfg.attempts) tries on throttling and transient failures. An
-- operation with a clientToken keeps it in `json` across those tries.
function M.call(cfg, plane, method, path, o)
  o = o or {}
  local body = o.json ~= nil and http.encode_json(o.json) or nil
  local function once()
    local creds = creds_of(cfg)
    local req = M.signed(cfg, plane, method, path, o.query, body, nil, creds)
    req.timeout = o.timeout or M.API_TIMEOUT
    req.max_body = http.ANSWER_CAP
    local res = http.request(req)
    if res.error then error(res.error, 0) end
    local why
    if res.body and res.body ~= "" then res.json, why = http.decode_json(res.body) end
    if res.status < 200 or res.status >= 300 then error(M.aws_failure(res, creds), 0) end
    -- restJson1: a 2xx answer is a JSON object, or no body at all
    if res.body and res.body ~= "" and type(res.json) ~= "table" then
      error({ message = string.format("%s %s: the answer is not a JSON object (%s)", method, path,
        why or require("glsb.answer").shown(res.json)), code = "BAD_ANSWER" }, 0)
    end
    return res.json or {}, res
  end
  local policy = {}
  for k, v in pairs(M.RETRY) do policy[k] = v end
  policy.attempts = o.attempts or cfg.attempts
  policy.retryable = function(err) return M.retryable(err) end
  policy.sleep = o.sleep
  -- retries are visible at the default level, as the base class's create/terminate retries are
  policy.on_retry = function(err, attempt, delay)
    log.warn(string.format("bedrock %s %s attempt %d failed (transient), retrying in %.2fs: %s", method, path,
      attempt, delay, errors.describe(err)), { provider = "bedrock" })
  end
  return retry.call(once, policy)
end

---------------------------------------------------------------------------
-- InvokeCodeInterpreter
---------------------------------------------------------------------------

local function frame_json(frame)
  local ok, v = pcall(http.decode_json, frame.payload or "")
  if ok and type(v) == "table" then return v end
  return nil
end

-- Reads one frame of a 200 answer into out.result / out.exception.
local function read_frame(out, frame, creds)
  local h = frame.headers or {}
  local kind = h[":message-type"]
  if kind == "event" and h[":event-type"] == "result" then
    -- the wrappers take the first result event; unknown event types are skipped (§1.2)
    if not out.result then out.result = frame_json(frame) or { content = {}, malformed = true } end
  elseif kind == "exception" then
    local doc = frame_json(frame) or {}
    local member = tostring(h[":exception-type"] or "unknownException")
    out.exception = out.exception or { name = member:sub(1, 1):upper() .. member:sub(2), modeled = true,
      message = credentials.redact(tostring(doc.message or ""), creds), fields = doc }
  elseif kind == "error" then
    out.exception = out.exception or { name = tostring(h[":error-code"] or "UnknownError"), modeled = false,
      message = credentials.redact(tostring(h[":error-message"] or ""), creds) }
  end
end

-- The largest event accepted: one result holds up to two capped streams JSON-escaped (glsb.output.CAP
-- each), so an oversized output is capped by the base class rather than lost as FRAME_TOO_LARGE.
M.MAX_EVENT = 16 * require("glsb.output").CAP

-- An outcome that proves the request never left (glsb.outcome.unsent): what glsb.retry sends again.
local UNSENT = {}

-- invoke(cfg, identifier, session_id, tool, arguments, {deadline | timeout, on_progress}) -> outcome table:
--   result      the CodeInterpreterResult of the first `result` event (nil when none came)
--   exception   {name, message, fields, modeled} of an exception frame (name: the Smithy error name,
--               e.g. ThrottlingException) or of an unmodeled `error` frame (modeled = false)
--   http_error  the aws_failure of a non-200 answer (refused before any stream)
--   transport   the transport failure when the connection broke, or {phase = "framing", code} when
--               the stream's framing did (a bad CRC, a cut frame)
--   status      the HTTP status (0 when none arrived)
-- Only a request provably never written (connect/send phase) is sent again, up to cfg.attempts, and only
-- while the deadline (the execution's one budget: every attempt and every pause between them draw from
-- it; nil: none) leaves room for the pause.
-- The stream is framed as it arrives and nothing of it is kept but the first result and the first
-- exception: the transfer stops at the first result (nothing after it counts), so a server that sends
-- events without end costs one event at a time. A refusal's body is buffered, capped (http.ERROR_BODY).
function M.invoke(cfg, identifier, session_id, tool, arguments, o)
  o = o or {}
  local body = http.encode_json { name = tool, arguments = arguments }
  local path = "/code-interpreters/" .. sigv4.uri_encode(identifier) .. "/tools/invoke"
  local deadline = o.deadline or loop.deadline(o.timeout)
  local function once()
    local creds = creds_of(cfg)
    local req = M.signed(cfg, "data", "POST", path, nil, body,
      { { "X-Amzn-Code-Interpreter-Session-Id", session_id } }, creds)
    local left = loop.remaining(deadline)
    req.timeout = left or 0
    if left then req.connect_timeout = math.min(M.CONNECT_TIMEOUT, left) end
    req.framer = "eventstream"
    req.max_frame = M.MAX_EVENT
    req.error_body = http.ERROR_BODY
    req.on_progress = o.on_progress
    local out = {}
    req.on_frame = function(frame)
      read_frame(out, frame, creds)
      if out.result then return false end
    end
    local res = http.request(req)
    out.status, out.headers = res.status or 0, res.headers
    local e = res.error
    if e and e.phase == "framing" then
      out.transport = { phase = "framing", code = e.code, retry_safe = false,
        message = "the event stream broke its framing (" .. tostring(e.code) .. ")" }
    end
    if out.status ~= 200 and out.status ~= 0 and (not e or e.phase == "framing") then
      local got = { status = out.status, headers = res.headers, body = res.body }
      local ok, j = pcall(http.decode_json, res.body or "")
      if ok then got.json = j end
      out.http_error = M.aws_failure(got, creds)
      out.transport = nil
    end
    out.transport = out.transport or res.error
    if outcome.unsent(out.transport) then error(setmetatable(out, UNSENT), 0) end
    return out
  end
  local policy = {}
  for k, v in pairs(M.RETRY) do policy[k] = v end
  policy.attempts = o.attempts or cfg.attempts
  policy.retryable = function(out) return getmetatable(out) == UNSENT end
  policy.deadline = deadline -- no pause past the execution's budget: the never-sent outcome is then the last
  policy.on_retry = function(out, _, delay)
    log.warn(string.format("bedrock %s %s: the request never left (%s), sending it again in %.2fs", tool, path,
      errors.describe(out.transport), delay), { provider = "bedrock" })
  end
  local ok, out = pcall(retry.call, once, policy)
  if ok then return out end
  if getmetatable(out) ~= UNSENT then error(out, 0) end -- a cancellation, no credentials, a bug
  return setmetatable(out, nil) -- never sent, after every attempt: the caller names the outcome
end

return M
