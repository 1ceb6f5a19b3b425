-- glsb.providers.e2b.envd: the sandbox's own daemon (port 49983), as E2B's SDK splits it into Commands
-- and Filesystem on one connection (docs/protocols/e2b.md §2.1 - §2.4):
--   process.Process/Start    Connect server stream: start{pid}, data{stdout|stderr}, end{exitCode}
--   process.Process/SendSignal, List    unary Connect (JSON)
--   filesystem.Filesystem/ListDir, Stat, MakeDir, Remove    unary Connect (JSON)
--   GET/POST /files?path=    file bytes (raw octet-stream upload on envd >= 0.5.7, multipart before)
-- Every function takes the sandbox's connection (api.connection). Executions never raise for what the
-- process or the wire did: they return an ExecutionResult.

local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local codec = require "glsb.codec"
local loop = require "glsb.loop"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local sandbox = require "glsb.sandbox"
local constants = require "glsb.constants"
local answer = require "glsb.answer"
local api = require "glsb.providers.e2b.api"

local Stage = models.Stage
local Status = models.ExecutionStatus
local Type = models.FailureType
local result = models.ExecutionResult.new

local M = {}

-- envd sends a keepalive event every Keepalive-Ping-Interval (we ask for 50 s, as the SDK does): a
-- stream silent for longer than IDLE is dead even when the caller set no deadline.
M.KEEPALIVE = 50
M.IDLE = 120
-- envd's Connect-Timeout-Ms kills the process at the deadline and tells us so; our own transfer
-- deadline is a little later so that the server's verdict arrives first: glsb's one grace past a
-- deadline (constants.DEADLINE_GRACE), within the contract's margin.
M.COMMAND_GRACE = constants.DEADLINE_GRACE

local clean, decode = api.clean, api.decode

local function auth(conn, headers)
  if conn.user then headers["Authorization"] = "Basic " .. codec.b64encode(conn.user .. ":") end
  return headers
end

---------------------------------------------------------------------------
-- process.Process/Start: one process streamed to its end
---------------------------------------------------------------------------

-- envd takes the process as proto3 JSON, whose strings are UTF-8: other bytes would arrive altered, so
-- refuse them (nothing was sent) rather than run something else. -> nil, or an ERROR result.
local function refuse_non_utf8(process, opts)
  local texts = { process.cmd, process.cwd or opts.cwd }
  for _, a in ipairs(process.args or {}) do texts[#texts + 1] = a end
  for k, v in pairs(opts.env or {}) do texts[#texts + 1] = k texts[#texts + 1] = tostring(v) end
  for _, t in ipairs(texts) do
    if type(t) == "string" and not utf8.len(t) then
      return result { status = Status.ERROR,
        error = "E2B carries commands as JSON text: not valid UTF-8: " .. ("%q"):format(t:sub(1, 80)),
        failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
    end
  end
  return nil
end

-- The Start request of a process that must end by `deadline` (nil: none): envd gets what is left of it.
local function start_request(conn, process, opts, deadline)
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    process.envs = env
  end
  if opts.cwd then process.cwd = opts.cwd end
  local headers = auth(conn, conn:headers(api.ENVD_PORT, {
    ["Content-Type"] = "application/connect+json",
    ["Connect-Protocol-Version"] = "1",
    ["Keepalive-Ping-Interval"] = tostring(M.KEEPALIVE),
  }))
  local left = loop.remaining(deadline)
  if left then
    headers["Connect-Timeout-Ms"] = string.format("%d", math.ceil(left * 1000))
  end
  return {
    method = "POST", url = conn:url(api.ENVD_PORT, "/process.Process/Start"),
    headers = headers,
    body = api.envelope(http.encode_json { process = process, stdin = false }),
    connect_timeout = math.min(api.CONNECT_TIMEOUT, left or api.CONNECT_TIMEOUT),
    timeout = left and (left + M.COMMAND_GRACE) or 0,
    idle_timeout = M.IDLE,
    framer = "connect",
  }
end

-- A frame handler that feeds st (pid, ended, end_error, bad_frame) and the output capture; on_start()
-- is called once the pid is known.
local function event_reader(st, out, on_start)
  return function(frame)
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
      if on_start then on_start() end
    elseif type(ev.data) == "table" then
      local o, e = clean(ev.data.stdout), clean(ev.data.stderr)
      if o then out:push("stdout", codec.b64decode(o) or "") end
      if e then out:push("stderr", codec.b64decode(e) or "") end
    elseif type(ev["end"]) == "table" then
      local x = ev["end"]
      local code = tonumber(clean(x.exitCode)) or 0
      st.ended = { exit_code = math.tointeger(code) or code, exited = clean(x.exited) == true,
        status = clean(x.status), error = clean(x.error) }
    end
  end
end

-- The outcome of a finished Start stream, from what arrived (st) and how the transfer ended (res).
local function process_outcome(conn, st, res, opts, elapsed, deadline)
  local ee = st.end_error
  -- Our deadline: envd kills the process at Connect-Timeout-Ms and ends the stream with
  -- deadline_exceeded (after an end event "signal: killed").
  if (ee and ee.code == "deadline_exceeded")
      or (st.ended and not st.ended.exited and loop.expired(deadline)) then
    return result { status = Status.TIMEOUT, code = st.ended and st.ended.exit_code or nil,
      error = string.format("execute_command timed out after %gs", opts.timeout or elapsed),
      failure = { exception_type = Type.TIMEOUT, retry_safe = false } }
  end
  if st.ended then
    local e = st.ended
    if e.exited and e.exit_code == 0 then return result { status = Status.SUCCESS, code = 0 } end
    return result { status = Status.ERROR, code = e.exit_code, error = M.exit_message(e.exit_code, e.status) }
  end
  if res.status and res.status ~= 0 and res.status ~= 200 then
    -- a non-200 stream answer: envd (or the proxy) refused it. Its body is JSON, not Connect
    -- envelopes, so the framer may also have complained: the status decides (docs/protocols/e2b.md §2.1).
    return api.classify_status(res, "execute_command", conn, true)
  end
  if res.error then
    return (outcome.from_failure(res.error, { what = "execute_command", alive = function() return conn:alive() end }))
  end
  if ee then
    local msg = string.format("execute_command: [%s] %s", tostring(ee.code), tostring(ee.message or ""))
    if not st.pid and api.CONNECT_REFUSALS[ee.code] then
      return result { status = Status.ERROR, error = msg,
        failure = { exception_type = Type.REFUSED, provider_type = ee.code, retry_safe = false } }
    end
    if ee.code == "unavailable" and conn:alive() == false then
      return result { status = Status.TIMEOUT, error = msg .. " (the sandbox is gone)",
        failure = { exception_type = outcome.GONE, retry_safe = false } }
    end
    return result { status = Status.UNKNOWN, error = msg,
      failure = { exception_type = Type.SERVER, provider_type = ee.code, retry_safe = false } }
  end
  return result { status = Status.UNKNOWN,
    error = "execute_command: the process stream ended without an end event; it may have run",
    failure = { exception_type = Type.PROTOCOL, retry_safe = false } }
end

-- The words of a failed command, the same on every provider (glsb.sandbox.exit_message).
function M.exit_message(code, status)
  if type(status) == "string" and status:match("^signal: ") then return "command ended by " .. status end
  return "command exited with code " .. tostring(code)
end

-- run(conn, process, opts) -> ExecutionResult. process: {cmd, args}; opts: deadline and/or timeout
-- (sandbox.deadline), env, cwd, on_stdout, on_stderr.
function M.run(conn, process, opts)
  local deadline = sandbox.deadline(opts)
  local refused = refuse_non_utf8(process, opts)
  if refused then return refused end
  local out = output.capture(opts)
  local st = {}
  local req = start_request(conn, process, opts, deadline)
  req.on_frame = event_reader(st, out)
  local started = loop.now()
  local res = conn:http(req)
  local r = process_outcome(conn, st, res, opts, loop.now() - started, deadline)
  out:finish(r)
  return r
end

---------------------------------------------------------------------------
-- Background processes: Start kept streaming in a task; SendSignal to kill
---------------------------------------------------------------------------

local Handle = {}
Handle.__index = Handle

-- start(conn, process, opts) -> handle. The stream runs in its own loop task; the handle reads what
-- arrived so far (output), waits for the end (wait) and kills the process (kill).
function M.start(conn, process, opts)
  local deadline = sandbox.deadline(opts)
  -- started: broadcast when the pid arrives and when the stream ends (kill waits on it, never polls)
  local h = setmetatable({ conn = conn, st = {}, out = output.capture(opts), started = loop.condition() }, Handle)
  local refused = refuse_non_utf8(process, opts)
  if refused then
    h.task = loop.spawn(function() return refused end)
    return h
  end
  local req = start_request(conn, process, opts, deadline)
  req.on_frame = event_reader(h.st, h.out, function() h.started:broadcast() end)
  h.task = loop.spawn(function()
    local started = loop.now()
    local ok, res = pcall(conn.http, conn, req)
    h.started:broadcast()
    if not ok then error(res, 0) end
    local r = process_outcome(conn, h.st, res, opts, loop.now() - started, deadline)
    h.out:finish(r)
    return r
  end)
  return h
end

function Handle:pid() return self.st.pid end
function Handle:output() return self.out:text("stdout"), self.out:text("stderr") end
function Handle:done() return self.task:done() end

-- wait(deadline) -> ExecutionResult | nil, "timeout"
function Handle:wait(timeout) return self.task:wait(timeout) end

-- kill() -> true when envd took the signal (the stream then ends with the process), false when the
-- process had ended already.
function Handle:kill()
  if self.task:done() then return false end
  local deadline = loop.now() + api.CONNECT_TIMEOUT
  while not self.st.pid and not self.task:done() do
    if self.started:wait(deadline) == "timeout" then break end
  end
  if self.task:done() then return false end
  if not self.st.pid then
    self.task:cancel()
    return true
  end
  local ok = M.rpc(self.conn, "process.Process/SendSignal",
    { process = { pid = self.st.pid }, signal = "SIGNAL_SIGKILL" }, 30)
  return ok ~= nil
end

---------------------------------------------------------------------------
-- Unary Connect calls (JSON codec): process.List, filesystem.*
---------------------------------------------------------------------------

-- The most of a unary answer kept: a directory's listing (ListDir) is the largest, some 200 bytes an entry.
M.RPC_ANSWER_CAP = 32 * 1024 * 1024

-- rpc(conn, method, body, timeout) -> decoded answer | nil, error (a glsb.http failure table or an HTTP
-- failure with `connect_code`, the Connect error code). timeout: seconds, nil for none. Raises nothing.
function M.rpc(conn, method, body, timeout)
  local res = conn:http {
    method = "POST", url = conn:url(api.ENVD_PORT, "/" .. method),
    headers = auth(conn, conn:headers(api.ENVD_PORT, {
      ["Content-Type"] = "application/json", ["Connect-Protocol-Version"] = "1" })),
    body = http.encode_json(body or {}),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = timeout or 0,
    max_body = M.RPC_ANSWER_CAP,
  }
  if res.error then return nil, res.error end
  if res.status ~= 200 then
    local f = errors.http_failure(res.status, res.headers, res.body)
    local j = decode(res.body or "")
    if type(j) == "table" then
      f.connect_code = clean(j.code)
      local m = clean(j.message)
      if type(m) == "string" then f.message = string.format("%d %s: %s", res.status, tostring(f.connect_code), m) end
    end
    return nil, f
  end
  if res.body == nil or res.body == "" then return {} end
  local j, why = http.decode_json(res.body)
  if j == nil then
    return nil, { message = method .. ": the answer is not JSON (" .. tostring(why) .. ")", code = "BAD_ANSWER" }
  end
  return j
end

---------------------------------------------------------------------------
-- Files: REST /files (bytes)
---------------------------------------------------------------------------

local function files_url(conn, path)
  local q = "/files?path=" .. http.escape(path)
  if conn.user then q = q .. "&username=" .. http.escape(conn.user) end
  return conn:url(api.ENVD_PORT, q)
end

-- version_at_least("0.6.13", "0.5.7") -> true. Missing or unparsable versions count as new.
function M.version_at_least(v, want)
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

-- multipart/form-data with one part "file" whose filename is the target path: the only upload
-- format of envd < 0.5.7 (docs/protocols/e2b.md §2.4).
local function multipart(path, data)
  local boundary = "glsb" .. codec.sha256(path .. #data .. tostring(loop.now())):sub(1, 32)
  local body = table.concat {
    "--", boundary, "\r\n",
    'Content-Disposition: form-data; name="file"; filename="', path:gsub('[\r\n"]', "_"), '"\r\n',
    "Content-Type: application/octet-stream\r\n\r\n",
    data, "\r\n--", boundary, "--\r\n",
  }
  return body, "multipart/form-data; boundary=" .. boundary
end

-- write_file(conn, path, data, timeout, stage[, on_progress]): raises SandboxExecutionError(stage) on
-- failure. timeout: seconds, nil for none. on_progress(done, total) as the body goes out.
function M.write_file(conn, path, data, timeout, stage, on_progress)
  local body, ctype = data, "application/octet-stream"
  if not M.version_at_least(conn.envd_version, "0.5.7") then body, ctype = multipart(path, data) end
  local res = conn:http {
    method = "POST", url = files_url(conn, path),
    headers = conn:headers(api.ENVD_PORT, { ["Content-Type"] = ctype }),
    body = body, connect_timeout = api.CONNECT_TIMEOUT, timeout = timeout or 0,
    on_progress = http.sent_progress(on_progress, #data),
  }
  local e = errors.from_response(errors.SandboxExecutionError, stage or Stage.UPLOAD, res,
    "upload of " .. path .. " failed")
  if e then error(e, 0) end
end

-- read_file(conn, path, timeout, stage[, on_progress]) -> bytes; raises SandboxExecutionError(stage)
-- naming the reason (404 "path does not exist", BODY_TOO_LARGE, a timeout).
function M.read_file(conn, path, timeout, stage, on_progress)
  local res = conn:http {
    method = "GET", url = files_url(conn, path), headers = conn:headers(api.ENVD_PORT),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = timeout or 0,
    on_progress = http.received_progress(on_progress),
  }
  local e = errors.from_response(errors.SandboxExecutionError, stage or Stage.DOWNLOAD, res,
    "download of " .. path .. " failed")
  if e then error(e, 0) end
  local body = res.body or ""
  if http.delimited_by_close(res) then
    -- nothing but the connection's end said where the file ended: envd's Stat says how long it is
    local st = M.stat(conn, path, timeout)
    if not st or st.size ~= #body then
      errors.raise(errors.SandboxExecutionError, stage or Stage.DOWNLOAD, string.format("download of %s failed: the "
        .. "answer ended with the connection after %d bytes and the file is %s: cut short, refused", path, #body,
        st and (st.size .. " bytes") or "gone"), { code = "PARTIAL_FILE", got = #body, size = st and st.size })
    end
  end
  return body
end

---------------------------------------------------------------------------
-- Files: filesystem.Filesystem RPCs
---------------------------------------------------------------------------

local FILE_TYPES = { FILE_TYPE_FILE = "file", FILE_TYPE_DIRECTORY = "dir", FILE_TYPE_SYMLINK = "symlink",
  [1] = "file", [2] = "dir", [3] = "symlink" }

-- One EntryInfo (proto3 JSON: int64 size as a string, the type as its enum name), each field checked.
local function entry(a, e, f)
  a:object(e, f)
  local size, mode = e.size, e.mode
  if type(size) == "string" then size = tonumber(size) or a:fail(f .. ".size", size, "a number") end
  if type(mode) == "string" then mode = tonumber(mode) or a:fail(f .. ".mode", mode, "a number") end
  local t = clean(e.type)
  if t ~= nil and type(t) ~= "string" and math.type(t) ~= "integer" then a:fail(f .. ".type", t, "a file type") end
  return { name = a:string(e.name, f .. ".name"), path = a:string(e.path, f .. ".path"),
    type = FILE_TYPES[t] or "other", size = a:number(size, f .. ".size", true) or 0,
    mode = a:number(mode, f .. ".mode", true), modified = a:string(e.modifiedTime, f .. ".modifiedTime", true) }
end

local function reader(what, path)
  return answer.reader(string.format("files:%s %s", what, path), errors.SandboxExecutionError, Stage.FILES)
end

local function fs_fail(what, path, err)
  errors.raise(errors.SandboxExecutionError, Stage.FILES, string.format("files:%s %s failed: %s", what, path,
    errors.describe(err)), err)
end

function M.list_dir(conn, path, depth, timeout)
  local j, err = M.rpc(conn, "filesystem.Filesystem/ListDir", { path = path, depth = depth or 1 }, timeout)
  if not j then fs_fail("list", path, err) end
  local r = reader("list", path)
  r:object(j, "body")
  local out = {}
  for i, e in ipairs(r:list(j.entries, "entries", true) or {}) do
    out[#out + 1] = entry(r, e, "entries[" .. i .. "]")
  end
  table.sort(out, function(a, b) return a.path < b.path end)
  return out
end

-- stat(conn, path) -> entry | nil when it does not exist
function M.stat(conn, path, timeout)
  local j, err = M.rpc(conn, "filesystem.Filesystem/Stat", { path = path }, timeout)
  if not j then
    if type(err) == "table" and err.connect_code == "not_found" then return nil end
    fs_fail("stat", path, err)
  end
  local a = reader("stat", path)
  a:object(j, "body")
  local e = a:object(j.entry, "entry", true)
  return e and entry(a, e, "entry") or nil
end

-- make_dir(conn, path) -> true when created, false when it existed (envd's already_exists)
function M.make_dir(conn, path, timeout)
  local j, err = M.rpc(conn, "filesystem.Filesystem/MakeDir", { path = path }, timeout)
  if not j then
    if type(err) == "table" and err.connect_code == "already_exists" then return false end
    fs_fail("make_dir", path, err)
  end
  return true
end

-- remove(conn, path): RemoveAll semantics (a missing path is fine)
function M.remove(conn, path, timeout)
  local j, err = M.rpc(conn, "filesystem.Filesystem/Remove", { path = path }, timeout)
  if not j then fs_fail("remove", path, err) end
end

return M
