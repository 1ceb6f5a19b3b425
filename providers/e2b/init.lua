-- glsb.providers.e2b: the E2B sandbox adapter (a CodeInterpreterSandbox).
--
-- Reads top-down like the wire (shared/protocols/e2b.md):
--   control plane  POST /v2/sandboxes, POST /sandboxes/{id}/timeout, DELETE /sandboxes/{id}
--   envd (49983)   GET /health, Connect process.Process/Start (server stream), GET/POST /files
--   interpreter    POST /execute (NDJSON, last line {"type": "end_of_execution"})
-- then the outcome classification, then the hooks glsb.sandbox calls.
--
-- The base class (glsb.sandbox) owns the contract rules (argument checks, create retries of
-- transient failures with backoff + jitter honouring Retry-After, terminate retries that keep
-- the handle, download_file's nil-on-failure). This file decides, for every E2B answer, which
-- ExecutionStatus or error (and Stage) it means.

local sandbox = require "glsb.sandbox"
local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local core = require "glsb.core"
local log = require "glsb.log"
local api = require "glsb.providers.e2b.api"

local Stage = models.Stage
local Status = models.ExecutionStatus
local ExecutionResult = models.ExecutionResult
local json_null = http.json_null

local M = { name = "e2b" }

M.DEFAULT_TEMPLATE = "code-interpreter-v1"
-- The interpreter sends a keepalive line every 5 s and envd a keepalive event every
-- Keepalive-Ping-Interval (we ask for 50 s, as the SDK does): a stream silent for longer than
-- these is dead even when the caller set no deadline.
local JUPYTER_IDLE = 30
local ENVD_KEEPALIVE = 50
local ENVD_IDLE = 120
local PROBE_TIMEOUT = 5
-- envd's Connect-Timeout-Ms kills the process at the deadline and tells us so; our own
-- transfer deadline is a little later so that the server's verdict arrives first.
local COMMAND_GRACE = 5

local Sandbox = sandbox.CodeInterpreterSandbox:extend("e2b", {
  languages = { python = true, javascript = true, typescript = true, r = true, java = true, bash = true },
})
M.Sandbox = Sandbox

---------------------------------------------------------------------------
-- Small helpers
---------------------------------------------------------------------------

local function clean(v)
  if v == json_null then return nil end
  return v
end

local function decode(s)
  local ok, v = pcall(http.decode_json, s)
  if ok then return v end
  return nil
end

local function body_message(res)
  local j = res.json
  if type(j) == "table" and type(j.message) == "string" then return j.message end
  if type(res.body) == "string" and res.body ~= "" then return (res.body:gsub("%s+", " "):sub(1, 300)) end
  return errors.REASON[res.status] or ""
end

-- Calls a user streaming callback; a failing callback is logged, never breaks the run.
local function call_back(fn, line)
  local ok, err = pcall(fn, line)
  if not ok then log.warn("streaming callback failed: " .. tostring(err), { provider = "e2b" }) end
end

-- Line splitter for best-effort streaming: one callback per complete line (without "\n"),
-- the rest flushed at the end.
local function line_stream(fn)
  if not fn then return { push = function() end, flush = function() end } end
  local pending = ""
  return {
    push = function(text)
      pending = pending .. text
      while true do
        local nl = pending:find("\n", 1, true)
        if not nl then break end
        call_back(fn, pending:sub(1, nl - 1))
        pending = pending:sub(nl + 1)
      end
    end,
    flush = function()
      if pending ~= "" then call_back(fn, pending) end
      pending = ""
    end,
  }
end

---------------------------------------------------------------------------
-- Requests
---------------------------------------------------------------------------

-- Headers of every data-plane request. X-Access-Token goes everywhere: envd requires it except
-- on /health and /files (where it is accepted), the interpreter wants it on /execute.
-- Connections are kept alive; the transport never replays a POST (execute, create) on its own when a
-- reused connection dies before any response byte: it reports the failure (glsb.core http
-- `idempotent`, spec "is not replayed by the transport").
function Sandbox:_data_headers(port, extra)
  local h = {
    ["E2b-Sandbox-Id"] = self.sandbox_id,
    ["E2b-Sandbox-Port"] = tostring(port),
    ["User-Agent"] = api.USER_AGENT,
  }
  if self._envd_token then h["X-Access-Token"] = self._envd_token end
  if self._traffic_token then h["E2B-Traffic-Access-Token"] = self._traffic_token end
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

function Sandbox:_data_url(port, path)
  return api.data_url(self._cfg, self.sandbox_id, port, path, self._domain)
end

function Sandbox:_api(method, path, body, timeout)
  return api.request(self._cfg, method, path, body, { timeout = timeout })
end

-- Is the sandbox still there? envd GET /health: 2xx -> true; 502 from the edge proxy ("The
-- sandbox was not found") -> false; anything else (a transport failure too) -> nil, unknown.
-- This is the SDK's own probe after a dropped connection (protocol §2, §3).
function Sandbox:_alive()
  local res = api.http(self._cfg, {
    method = "GET", url = self:_data_url(api.ENVD_PORT, "/health"),
    headers = self:_data_headers(api.ENVD_PORT),
    connect_timeout = PROBE_TIMEOUT, timeout = PROBE_TIMEOUT,
  })
  if res.error then return nil end
  if res.status >= 200 and res.status < 300 then return true end
  if res.status == 502 then return false end
  return nil
end

---------------------------------------------------------------------------
-- Outcome classification (shared by code and commands)
---------------------------------------------------------------------------

local function result(t) return ExecutionResult.new(t) end

-- A transport failure (glsb.http's res.error) after nothing definite came back.
--   connect / send: the request was provably never fully written -> ERROR, retry_safe.
--   our deadline (OPERATION_TIMEDOUT once the request was sent) -> TIMEOUT.
--   anything else after delivery: if the sandbox is gone it was killed mid-request -> TIMEOUT,
--   else the outcome is unknown -> UNKNOWN (never ERROR).
function Sandbox:_classify_transport(tf, acc, what)
  local text = errors.describe(tf)
  if (tf.phase == "connect" or tf.phase == "send") and tf.retry_safe then
    return result { status = Status.ERROR, stdout = acc.stdout, stderr = acc.stderr,
      error = what .. " was not delivered: " .. text,
      failure = { exception_type = "TransportError", retry_safe = true } }
  end
  if tf.timeout or tf.code == "OPERATION_TIMEDOUT" then
    return result { status = Status.TIMEOUT, stdout = acc.stdout, stderr = acc.stderr,
      error = what .. " timed out: " .. text,
      failure = { exception_type = "TimeoutError", retry_safe = false } }
  end
  if self:_alive() == false then
    return result { status = Status.TIMEOUT, stdout = acc.stdout, stderr = acc.stderr,
      error = what .. ": the sandbox was killed or reached its end of life (" .. text .. ")",
      failure = { exception_type = "SandboxGoneError", retry_safe = false } }
  end
  return result { status = Status.UNKNOWN, stdout = acc.stdout, stderr = acc.stderr,
    error = what .. ": the connection broke after the request was delivered; it may have run (" .. text .. ")",
    failure = { exception_type = "TransportError", retry_safe = false } }
end

-- A non-2xx answer. The proxy's 502 means the sandbox is gone (the SDK's TimeoutError, "sandbox
-- timeout"): TIMEOUT. Any other status is a refusal before the code ran: ERROR.
local function classify_status(res, what)
  local msg = string.format("%s: HTTP %d: %s", what, res.status, body_message(res))
  if res.status == 502 then
    return result { status = Status.TIMEOUT, error = msg .. " (the sandbox was killed or reached its end of life)",
      failure = { exception_type = "SandboxGoneError", retry_safe = false } }
  end
  return result { status = Status.ERROR, error = msg,
    failure = { exception_type = "HTTPError", retry_safe = false } }
end

---------------------------------------------------------------------------
-- Code interpreter: POST /execute
---------------------------------------------------------------------------

-- Rich result of one `result` line: every MIME field E2B sends (png/jpeg/pdf are base64 text,
-- kept as is), plus is_main_result and extra.
local RESULT_FIELDS = { "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
  "javascript", "data", "chart", "extra" }

local function parse_result(msg)
  local r = { is_main_result = msg.is_main_result == true }
  for _, k in ipairs(RESULT_FIELDS) do r[k] = clean(msg[k]) end
  return r
end

-- Runs code; returns an ExecutionResult. Never raises for what the code or the wire did.
function Sandbox:_run_code(code, opts)
  local body = { code = code }
  if opts.language and opts.language ~= "python" then body.language = opts.language end
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    body.env_vars = env
  end
  local out, err = {}, {}
  local st = { results = {}, done = false }
  local so, se = line_stream(opts.on_stdout), line_stream(opts.on_stderr)
  local status_code
  local res = api.http(self._cfg, {
    method = "POST", url = self:_data_url(api.JUPYTER_PORT, "/execute"),
    headers = self:_data_headers(api.JUPYTER_PORT, { ["Content-Type"] = "application/json" }),
    body = http.encode_json(body),
    connect_timeout = math.min(api.CONNECT_TIMEOUT, opts.timeout or api.CONNECT_TIMEOUT),
    timeout = opts.timeout or 0,
    idle_timeout = JUPYTER_IDLE,
    framer = "lines",
    on_headers = function(status) status_code = status end,
    on_frame = function(line)
      if status_code ~= 200 then
        st.error_body = (st.error_body or "") .. line .. "\n"
        return
      end
      local msg = line ~= "" and decode(line)
      if type(msg) ~= "table" then return end
      local t = msg.type
      if t == "stdout" and type(msg.text) == "string" then
        out[#out + 1] = msg.text
        so.push(msg.text)
      elseif t == "stderr" and type(msg.text) == "string" then
        err[#err + 1] = msg.text
        se.push(msg.text)
      elseif t == "result" then
        st.results[#st.results + 1] = parse_result(msg)
      elseif t == "error" then
        st.exception = { name = clean(msg.name), value = clean(msg.value), traceback = clean(msg.traceback) }
      elseif t == "number_of_executions" then
        st.execution_count = clean(msg.execution_count)
      elseif t == "end_of_execution" then
        st.done = true
      end
    end,
  })
  so.flush()
  se.flush()
  local acc = { stdout = table.concat(out), stderr = table.concat(err) }
  local r
  if st.done then
    -- the server said the cell ended: whatever the transport did afterwards, the outcome is known
    r = nil
  elseif res.error then
    r = self:_classify_transport(res.error, acc, "execute_code")
  elseif res.status ~= 200 then
    res.body = res.body or st.error_body
    r = classify_status(res, "execute_code")
  else
    r = result { status = Status.UNKNOWN, stdout = acc.stdout, stderr = acc.stderr,
      error = "execute_code: the stream ended without end_of_execution; the code may have run",
      failure = { exception_type = "ProtocolError", retry_safe = false } }
  end
  if not r then
    local ex = st.exception
    if ex then
      local head = tostring(ex.name or "Error") .. ": " .. tostring(ex.value or "")
      -- error = the traceback without IPython's colour codes (r.traceback keeps them)
      local tb = type(ex.traceback) == "string" and ex.traceback:gsub("\27%[[%d;]*m", "") or ""
      if not tb:find(head, 1, true) then tb = tb ~= "" and (tb .. "\n" .. head) or head end
      r = result { status = Status.ERROR, code = 1, stdout = acc.stdout, stderr = acc.stderr, error = tb }
      r.error_name, r.error_value, r.traceback = ex.name, ex.value, ex.traceback
    else
      r = result { status = Status.SUCCESS, code = 0, stdout = acc.stdout, stderr = acc.stderr }
    end
  end
  -- E2B-specific extras (the contract's fields are above): rich results, the main result's text.
  r.results = st.results
  r.execution_count = st.execution_count
  for _, x in ipairs(st.results) do
    if x.is_main_result then r.text = x.text end
  end
  return r
end

---------------------------------------------------------------------------
-- envd: process.Process/Start (Connect server stream, JSON codec)
---------------------------------------------------------------------------

function Sandbox:_envd_auth(headers)
  if self._user then headers["Authorization"] = "Basic " .. core.b64encode(self._user .. ":") end
  return headers
end

function Sandbox:_run_command(command, opts)
  return self:_start_process({ cmd = "/bin/bash", args = { "-l", "-c", command } }, opts)
end

-- Starts one process (ProcessConfig: cmd, args; opts.env, opts.cwd added) and streams it to
-- its end. Returns an ExecutionResult; never raises for what the process or the wire did.
function Sandbox:_start_process(process, opts)
  -- envd takes the process as proto3 JSON, whose strings are UTF-8: other bytes would arrive altered,
  -- so refuse them here (nothing was sent) rather than run something else.
  local texts = { process.cmd, process.cwd or opts.cwd }
  for _, a in ipairs(process.args or {}) do texts[#texts + 1] = a end
  for k, v in pairs(opts.env or {}) do texts[#texts + 1] = k texts[#texts + 1] = tostring(v) end
  for _, t in ipairs(texts) do
    if type(t) == "string" and not utf8.len(t) then
      return result { status = Status.ERROR,
        error = "E2B carries commands as JSON text: not valid UTF-8: " .. ("%q"):format(t:sub(1, 80)),
        failure = { exception_type = "SandboxExecutionError", retry_safe = true } }
    end
  end
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    process.envs = env
  end
  if opts.cwd then process.cwd = opts.cwd end
  local headers = self:_envd_auth(self:_data_headers(api.ENVD_PORT, {
    ["Content-Type"] = "application/connect+json",
    ["Connect-Protocol-Version"] = "1",
    ["Keepalive-Ping-Interval"] = tostring(ENVD_KEEPALIVE),
  }))
  if opts.timeout then
    headers["Connect-Timeout-Ms"] = string.format("%d", math.ceil(opts.timeout * 1000))
  end
  local out, err = {}, {}
  local so, se = line_stream(opts.on_stdout), line_stream(opts.on_stderr)
  local st = {}
  local started = core.now()
  local res = api.http(self._cfg, {
    method = "POST", url = self:_data_url(api.ENVD_PORT, "/process.Process/Start"),
    headers = headers,
    body = api.envelope(http.encode_json { process = process, stdin = false }),
    connect_timeout = math.min(api.CONNECT_TIMEOUT, opts.timeout or api.CONNECT_TIMEOUT),
    timeout = opts.timeout and (opts.timeout + COMMAND_GRACE) or 0,
    idle_timeout = ENVD_IDLE,
    framer = "connect",
    on_frame = function(frame)
      local msg = decode(frame.data)
      if frame.flags & 2 ~= 0 then
        st.end_stream = true
        if type(msg) == "table" and type(msg.error) == "table" then
          st.end_error = { code = clean(msg.error.code), message = clean(msg.error.message) }
        end
        return
      end
      if frame.flags & 1 ~= 0 or type(msg) ~= "table" or type(msg.event) ~= "table" then
        st.bad_frame = true
        return
      end
      local ev = msg.event
      if ev.start then
        st.pid = clean(ev.start.pid)
      elseif type(ev.data) == "table" then
        local o, e = clean(ev.data.stdout), clean(ev.data.stderr)
        if o then
          local text = core.b64decode(o) or ""
          out[#out + 1] = text
          so.push(text)
        end
        if e then
          local text = core.b64decode(e) or ""
          err[#err + 1] = text
          se.push(text)
        end
      elseif type(ev["end"]) == "table" then
        local x = ev["end"]
        local code = tonumber(clean(x.exitCode)) or 0
        st.ended = { exit_code = math.tointeger(code) or code, exited = clean(x.exited) == true,
          status = clean(x.status), error = clean(x.error) }
      end
    end,
  })
  so.flush()
  se.flush()
  local acc = { stdout = table.concat(out), stderr = table.concat(err) }
  local elapsed = core.now() - started
  local function with_output(r)
    r.stdout, r.stderr = acc.stdout, acc.stderr
    return r
  end
  local ee = st.end_error
  -- Our deadline: envd kills the process at Connect-Timeout-Ms and ends the stream with
  -- deadline_exceeded (after an end event "signal: killed").
  if (ee and ee.code == "deadline_exceeded")
      or (st.ended and not st.ended.exited and opts.timeout and elapsed >= opts.timeout) then
    return with_output(result { status = Status.TIMEOUT, code = st.ended and st.ended.exit_code or nil,
      error = string.format("execute_command timed out after %gs", opts.timeout or elapsed),
      failure = { exception_type = "TimeoutError", retry_safe = false } })
  end
  if st.ended then
    local e = st.ended
    if e.exited and e.exit_code == 0 then
      return with_output(result { status = Status.SUCCESS, code = 0 })
    end
    return with_output(result { status = Status.ERROR, code = e.exit_code,
      error = e.error or e.status or ("exit status " .. tostring(e.exit_code)) })
  end
  if res.status and res.status ~= 0 and res.status ~= 200 then
    -- a non-200 stream answer: envd (or the proxy) refused it. Its body is JSON, not Connect
    -- envelopes, so the framer may also have complained: the status decides (protocol §2.1).
    return with_output(classify_status(res, "execute_command"))
  end
  if res.error then return self:_classify_transport(res.error, acc, "execute_command") end
  if ee then
    local msg = string.format("execute_command: [%s] %s", tostring(ee.code), tostring(ee.message or ""))
    if not st.pid and api.CONNECT_REFUSALS[ee.code] then
      return with_output(result { status = Status.ERROR, error = msg,
        failure = { exception_type = "ConnectError", retry_safe = false } })
    end
    if ee.code == "unavailable" and self:_alive() == false then
      return with_output(result { status = Status.TIMEOUT, error = msg .. " (the sandbox is gone)",
        failure = { exception_type = "SandboxGoneError", retry_safe = false } })
    end
    return with_output(result { status = Status.UNKNOWN, error = msg,
      failure = { exception_type = "ConnectError", retry_safe = false } })
  end
  return with_output(result { status = Status.UNKNOWN,
    error = "execute_command: the process stream ended without an end event; it may have run",
    failure = { exception_type = "ProtocolError", retry_safe = false } })
end

---------------------------------------------------------------------------
-- envd: files (REST /files, octet-stream upload: envd >= 0.5.7)
---------------------------------------------------------------------------

function Sandbox:_files_url(path)
  local q = "/files?path=" .. http.escape(path)
  if self._user then q = q .. "&username=" .. http.escape(self._user) end
  return self:_data_url(api.ENVD_PORT, q)
end

-- version_at_least("0.6.13", "0.5.7") -> true. Missing or unparsable versions count as new.
local function version_at_least(v, want)
  if type(v) ~= "string" then return true end
  local a = { v:match("^v?(%d+)%.(%d+)%.(%d+)") }
  if #a ~= 3 then return true end
  local b = { want:match("^(%d+)%.(%d+)%.(%d+)") }
  for i = 1, 3 do
    local x, y = tonumber(a[i]), tonumber(b[i])
    if x ~= y then return x > y end
  end
  return true
end
M.version_at_least = version_at_least

-- multipart/form-data with one part "file" whose filename is the target path: the only upload
-- format of envd < 0.5.7 (protocol §2.4).
local function multipart(path, data)
  local boundary = "glsb" .. core.sha256(path .. #data .. tostring(core.now())):sub(1, 32)
  local body = table.concat {
    "--", boundary, "\r\n",
    'Content-Disposition: form-data; name="file"; filename="', path:gsub('[\r\n"]', "_"), '"\r\n',
    "Content-Type: application/octet-stream\r\n\r\n",
    data, "\r\n--", boundary, "--\r\n",
  }
  return body, "multipart/form-data; boundary=" .. boundary
end

-- Writes one file; raises SandboxExecutionError(stage) on failure. Raw octet-stream body on
-- envd >= 0.5.7, multipart before.
function Sandbox:_write_file(path, data, timeout, stage)
  local body, ctype = data, "application/octet-stream"
  if not version_at_least(self.envd_version, "0.5.7") then body, ctype = multipart(path, data) end
  local res = api.http(self._cfg, {
    method = "POST", url = self:_files_url(path),
    headers = self:_data_headers(api.ENVD_PORT, { ["Content-Type"] = ctype }),
    body = body, connect_timeout = api.CONNECT_TIMEOUT, timeout = timeout or 60,
  })
  local e = errors.from_response(errors.SandboxExecutionError, stage or Stage.UPLOAD, res,
    "upload of " .. path .. " failed")
  if e then error(e, 0) end
end

function Sandbox:_upload(files, opts)
  for _, f in ipairs(files) do self:_write_file(f.path, f.data, opts.timeout, Stage.UPLOAD) end
end

function Sandbox:_download(path, opts)
  local res = api.http(self._cfg, {
    method = "GET", url = self:_files_url(path), headers = self:_data_headers(api.ENVD_PORT),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = opts.timeout or 0,
  })
  local e = errors.from_response(errors.SandboxExecutionError, Stage.DOWNLOAD, res,
    "download of " .. path .. " failed")
  if e then error(e, 0) end
  return res.body or ""
end

---------------------------------------------------------------------------
-- Workspace primitives hook (issue 4): glsb-confine inside the sandbox
---------------------------------------------------------------------------

local HELPER_DIR = "/tmp/.glsb"

local function require_running(self, what)
  if not self:is_running() then
    errors.raise(errors.SandboxNotInitializedError, Stage.NOT_INITIALIZED, what .. ": the sandbox is not running")
  end
end

local function random_name()
  return core.sha256(string.format("%.9f:%d:%s", core.now(), math.random(0, 2 ^ 30), tostring({}))):sub(1, 24)
end

-- sb:ensure_helper(local_path) -> the helper's path inside the sandbox. Uploads the static
-- glsb-confine binary through envd's /files once per sandbox (the name carries its sha256, so
-- a rebuilt helper is uploaded again) and makes it executable. Raises SandboxExecutionError
-- with stage workspace on failure.
function Sandbox:ensure_helper(local_path)
  require_running(self, "ensure_helper")
  local f, err = io.open(local_path, "rb")
  if not f then
    errors.raise(errors.SandboxExecutionError, Stage.WORKSPACE, "cannot read the helper: " .. tostring(err))
  end
  local data = f:read("a")
  f:close()
  local remote = HELPER_DIR .. "/glsb-confine-" .. core.sha256(data):sub(1, 16)
  self._helpers = self._helpers or {}
  if self._helpers[remote] then return remote end
  return sandbox.guarded(self, function()
    self:_write_file(remote, data, 120, Stage.WORKSPACE)
    local r = self:_start_process({ cmd = "/bin/chmod", args = { "0755", remote } }, { timeout = 30 })
    if r.status ~= Status.SUCCESS then
      errors.raise(errors.SandboxExecutionError, Stage.WORKSPACE,
        "cannot make the helper executable: " .. tostring(r.error or r.stderr))
    end
    self._helpers[remote] = true
    return remote
  end)
end

-- sb:run_helper(argv, opts) -> ExecutionResult of the exact argv (no shell around it), run
-- through envd's process channel. opts: timeout (s, nil = none), stdin (string: staged as a
-- file through /files, opened as the process's stdin and unlinked before the exec).
function Sandbox:run_helper(argv, opts)
  opts = opts or {}
  if type(argv) ~= "table" or type(argv[1]) ~= "string" then
    error("run_helper: argv must be an array of strings", 2)
  end
  require_running(self, "run_helper")
  local args = {}
  for i = 2, #argv do args[i - 1] = tostring(argv[i]) end
  return sandbox.guarded(self, function()
    if opts.stdin == nil then
      return self:_start_process({ cmd = argv[1], args = args }, { timeout = opts.timeout })
    end
    local staged = HELPER_DIR .. "/stdin-" .. random_name()
    local ok, err = pcall(self._write_file, self, staged, opts.stdin, 120, Stage.WORKSPACE)
    if not ok then
      return result { status = Status.ERROR, error = "staging stdin failed: " .. tostring(err),
        failure = { exception_type = "SandboxExecutionError", retry_safe = true } }
    end
    -- sh only opens and unlinks the staged file; argv reaches the program through "$@" untouched
    local sh_args = { "-c", 'f=$1; shift; exec 0<"$f" || exit 127; rm -f -- "$f"; exec "$@"', "glsb-stdin", staged,
      argv[1] }
    for _, a in ipairs(args) do sh_args[#sh_args + 1] = a end
    return self:_start_process({ cmd = "/bin/sh", args = sh_args }, { timeout = opts.timeout })
  end)
end

-- glsb.workspace hooks: the helper is this machine's static glsb-confine, uploaded once; argv runs
-- through run_helper. The workspace root is the sandbox user's home.
Sandbox.workspace_root = "/home/user"

function Sandbox:_workspace_helper()
  local path, err = require("glsb.workspace").local_helper_path()
  if not path then errors.raise(errors.WorkspaceError, Stage.WORKSPACE, err) end
  return self:ensure_helper(path)
end

function Sandbox:_exec_argv(argv, opts)
  local r = self:run_helper(argv, { stdin = opts.stdin, timeout = opts.timeout })
  return { exit_code = r.code, stdout = r.stdout, stderr = r.stderr, status = r.status, error = r.error }
end

---------------------------------------------------------------------------
-- Life cycle: create, set_timeout, terminate
---------------------------------------------------------------------------

local function string_map(t, what)
  if t == nil then return nil end
  if type(t) ~= "table" then
    errors.raise(errors.SandboxStartError, Stage.CREATE, "create: opts." .. what .. " must be a table")
  end
  local out = {}
  for k, v in pairs(t) do out[tostring(k)] = tostring(v) end
  if next(out) == nil then return nil end
  return out
end

local CREATE_TOKEN = "glsb_create_token"

-- After a create whose answer was lost: GET /v2/sandboxes?metadata=<token> and, when the
-- sandbox is there, its detail (GET /sandboxes/{id} carries envdAccessToken), shaped like a
-- create answer. nil when not found or when the lookup itself fails.
function Sandbox:_find_created(token)
  local q = http.escape(CREATE_TOKEN .. "=" .. token)
  local res = self:_api("GET", "/v2/sandboxes?metadata=" .. q, nil, 15)
  if res.error or res.status ~= 200 or type(res.json) ~= "table" or type(res.json[1]) ~= "table" then return nil end
  local id = res.json[1].sandboxID
  if type(id) ~= "string" then return nil end
  local d = self:_api("GET", "/sandboxes/" .. http.escape(id), nil, 15)
  if d.error or d.status ~= 200 or type(d.json) ~= "table" then
    -- found but unusable: kill it rather than leak it
    self:_api("DELETE", "/sandboxes/" .. http.escape(id), nil, 10)
    return nil
  end
  log.info("E2B create: the answer was lost; adopted the sandbox it created", { sandbox_id = id })
  return d
end

function Sandbox:_start(opts)
  local cfg = api.config(opts)
  self._cfg = cfg
  self._user = opts.user
  if not cfg.api_key then
    errors.raise(errors.SandboxStartError, Stage.CREATE,
      "E2B needs an API key: pass api_key or set E2B_API_KEY")
  end
  local body = {
    templateID = opts.template or M.DEFAULT_TEMPLATE,
    metadata = string_map(opts.metadata, "metadata"),
    envVars = string_map(opts.env, "env"),
  }
  -- E2B has no unbounded lease; nil leaves the server default (300 s).
  if opts.timeout then body.timeout = math.max(1, math.ceil(opts.timeout)) end
  -- A create token in the metadata: when the answer is lost after the request was delivered,
  -- the sandbox may exist; we find it by its token and adopt it instead of leaking it (and a
  -- retry would otherwise create a second one).
  local token = core.sha256(string.format("%.9f:%d:%s", core.now(), math.random(0, 2 ^ 30), tostring(self)))
    :sub(1, 32)
  body.metadata = body.metadata or {}
  body.metadata[CREATE_TOKEN] = token
  local res = self:_api("POST", "/v2/sandboxes", body, opts.create_timeout)
  if res.error and not res.error.retry_safe then
    local adopted = self:_find_created(token)
    if adopted then res = adopted end
  end
  local e = errors.from_response(errors.SandboxStartError, Stage.CREATE, res, "E2B create failed")
  if e then error(e, 0) end
  local j = res.json
  if type(j) ~= "table" or type(j.sandboxID) ~= "string" then
    errors.raise(errors.SandboxStartError, Stage.CREATE, "E2B create: the response has no sandboxID",
      errors.http_failure(res.status, res.headers, res.body))
  end
  self.sandbox_id = j.sandboxID
  self.template_id = clean(j.templateID)
  self.envd_version = clean(j.envdVersion)
  self._envd_token = clean(j.envdAccessToken)
  self._traffic_token = clean(j.trafficAccessToken)
  self._domain = clean(j.domain)
  -- envd answers before we hand the sandbox out (the base tears it down if this fails).
  local h = api.http(self._cfg, {
    method = "GET", url = self:_data_url(api.ENVD_PORT, "/health"),
    headers = self:_data_headers(api.ENVD_PORT),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = opts.health_timeout or 30,
  })
  local he = errors.from_response(errors.SandboxStartError, Stage.HEALTH_CHECK, h, "envd health check failed")
  if he then error(he, 0) end
end

function Sandbox:_set_timeout(seconds)
  local res = self:_api("POST", "/sandboxes/" .. http.escape(self.sandbox_id) .. "/timeout",
    { timeout = math.max(1, math.ceil(seconds)) })
  local e = errors.from_response(errors.SandboxExecutionError, Stage.EXECUTE, res, "E2B set_timeout failed")
  if e then error(e, 0) end
end

-- DELETE /sandboxes/{id}: 204, or 404 (already gone) both mean "not running any more".
function Sandbox:_terminate(opts)
  local res = self:_api("DELETE", "/sandboxes/" .. http.escape(self.sandbox_id), nil, opts.timeout)
  if not res.error and res.status == 404 then return end
  local e = errors.from_response(errors.SandboxTerminateError, Stage.TERMINATE, res, "E2B kill failed")
  if e then error(e, 0) end
end

---------------------------------------------------------------------------
-- Module
---------------------------------------------------------------------------

-- M.Template is the template builder (glsb.providers.e2b.template), loaded on first use.
return setmetatable(M, {
  __index = function(t, k)
    if k == "Template" then
      local T = require("glsb.providers.e2b.template").Template
      rawset(t, "Template", T)
      return T
    end
    return nil
  end,
})
