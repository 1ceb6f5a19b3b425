-- glsb.providers.e2b.interpreter: the code-interpreter channel (port 49999, shared/protocols/e2b.md §3):
--   POST /execute {code, language?, env_vars?} -> NDJSON lines: number_of_executions, stdout, stderr,
--   result {is_main_result, text, html, png, ...}, error {name, value, traceback}, keepalive every 5 s,
--   and last the literal {"type": "end_of_execution"}.
-- run_code never raises for what the code or the wire did: it returns an ExecutionResult.

local http = require "glsb.http"
local models = require "glsb.models"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local api = require "glsb.providers.e2b.api"

local Status = models.ExecutionStatus
local result = models.ExecutionResult.new

local M = {}

-- The interpreter sends a keepalive line every 5 s: a stream silent for longer is dead even when the
-- caller set no deadline.
M.IDLE = 30
-- A stdout message carries one chunk of what the kernel printed, JSON-escaped (up to 6 bytes per
-- byte): a frame this large still fits a capped stream; past it the line is refused as FRAME_TOO_LARGE.
M.MAX_FRAME = 8 * output.CAP

local clean, decode = api.clean, api.decode

-- Rich result of one `result` line: every MIME field E2B sends (png/jpeg/pdf are base64 text, kept as
-- is), plus is_main_result and extra.
local RESULT_FIELDS = { "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
  "javascript", "data", "chart", "extra" }

local function parse_result(msg)
  local r = { is_main_result = msg.is_main_result == true }
  for _, k in ipairs(RESULT_FIELDS) do r[k] = clean(msg[k]) end
  return r
end

local function line_reader(st, out)
  return function(line)
    if st.status_code ~= 200 then
      st.error_body = (st.error_body or "") .. line .. "\n"
      return
    end
    local msg = line ~= "" and decode(line)
    if type(msg) ~= "table" then return end
    local t = msg.type
    if t == "stdout" and type(msg.text) == "string" then
      out:push("stdout", msg.text)
    elseif t == "stderr" and type(msg.text) == "string" then
      out:push("stderr", msg.text)
    elseif t == "result" then
      st.results[#st.results + 1] = parse_result(msg)
    elseif t == "error" then
      st.exception = { name = clean(msg.name), value = clean(msg.value), traceback = clean(msg.traceback) }
    elseif t == "number_of_executions" then
      st.execution_count = clean(msg.execution_count)
    elseif t == "end_of_execution" then
      st.done = true
    end
  end
end

-- The result of a cell the server said ended: its exception, or success.
local function cell_result(ex)
  if not ex then return result { status = Status.SUCCESS, code = 0 } end
  local head = tostring(ex.name or "Error") .. ": " .. tostring(ex.value or "")
  -- error = the traceback without IPython's colour codes (r.traceback keeps them)
  local tb = type(ex.traceback) == "string" and ex.traceback:gsub("\27%[[%d;]*m", "") or ""
  if not tb:find(head, 1, true) then tb = tb ~= "" and (tb .. "\n" .. head) or head end
  local r = result { status = Status.ERROR, code = 1, error = tb }
  r.error_name, r.error_value, r.traceback = ex.name, ex.value, ex.traceback
  return r
end

-- run_code(conn, code, opts) -> ExecutionResult. opts: timeout (s or nil), language, env, on_stdout,
-- on_stderr. The value of the cell's last expression is r.text (E2B's main result), also r.results
-- (every rich result) and r.execution_count.
function M.run_code(conn, code, opts)
  local body = { code = code }
  if opts.language and opts.language ~= "python" then body.language = opts.language end
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    body.env_vars = env
  end
  local out = output.capture(opts)
  local st = { results = {}, done = false }
  local res = conn:http {
    method = "POST", url = conn:url(api.JUPYTER_PORT, "/execute"),
    headers = conn:headers(api.JUPYTER_PORT, { ["Content-Type"] = "application/json" }),
    body = http.encode_json(body),
    connect_timeout = math.min(api.CONNECT_TIMEOUT, opts.timeout or api.CONNECT_TIMEOUT),
    timeout = opts.timeout or 0,
    idle_timeout = M.IDLE,
    framer = "lines",
    max_frame = M.MAX_FRAME,
    on_headers = function(status) st.status_code = status end,
    on_frame = line_reader(st, out),
  }
  local r
  if st.done then
    -- the server said the cell ended: whatever the transport did afterwards, the outcome is known
    r = cell_result(st.exception)
  elseif res.error then
    r = outcome.from_failure(res.error, { what = "execute_code", alive = function() return conn:alive() end })
  elseif res.status ~= 200 then
    res.body = res.body or st.error_body
    r = api.classify_status(res, "execute_code")
  else
    r = result { status = Status.UNKNOWN,
      error = "execute_code: the stream ended without end_of_execution; the code may have run",
      failure = { exception_type = "ProtocolError", retry_safe = false } }
  end
  out:finish(r)
  -- E2B-specific extras (the contract's fields are above): rich results, the main result's text.
  r.results = st.results
  r.execution_count = st.execution_count
  for _, x in ipairs(st.results) do
    if x.is_main_result then r.text = x.text end
  end
  return r
end

return M
