-- glsb.providers.opensandbox.execd: the sandbox's execd (port 44772), reached at the endpoint the
-- lifecycle API hands out (docs/protocols/opensandbox.md §1.5, §2):
--   GET /ping                                   readiness
--   POST /command {command, cwd?, envs?, timeout(ms)?}     event stream (§2.2)
--   POST /code {code, context: {language}}      event stream, the language's default context (§2.4)
--   DELETE /code?id= , DELETE /command?id=      interrupt
-- Executions never raise for what the code or the wire did: they return an ExecutionResult.
--
-- The stream: one JSON event per line ("\n\n" between events; a "data:" prefix tolerated, as the SDKs
-- do): init, stdout/stderr, execution_count, result, status, error, execution_complete, ping.
-- A command's exit code is inferred as the official SDK does (inferForegroundExitCode): the error
-- event's evalue when there is one, else 0 when execution_complete came, else unknown.

local http = require "glsb.http"
local models = require "glsb.models"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local loop = require "glsb.loop"
local retry = require "glsb.retry"
local sandbox = require "glsb.sandbox"
local constants = require "glsb.constants"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"
local results = require "glsb.results"
local codec = require "glsb.codec"
local errors = require "glsb.errors"

local Status = models.ExecutionStatus
local Type = models.FailureType
local result = models.ExecutionResult.new
local json_null = http.json_null

local M = {}

-- execd sends a ping event every 3 s: a stream silent for much longer is dead even without a deadline.
M.IDLE = 30
-- Our transfer deadline for a command runs this long past the command's own timeout, which execd
-- enforces and reports (evalue "-1", "signal: killed"): the server's verdict arrives first. glsb's one
-- grace past a deadline (constants.DEADLINE_GRACE), within the contract's margin.
M.COMMAND_GRACE = constants.DEADLINE_GRACE
-- One stdout event carries one line, JSON-escaped (up to 6 bytes per byte).
M.MAX_FRAME = 8 * output.CAP
-- How long a run waits, at most, for a context still busy with an interrupted run (execd refuses a
-- busy context with 500 "session is busy" before running anything, so trying again is safe).
M.BUSY_WAIT = 10
-- Readiness, as the official SDKs poll it: GET /ping every 200 ms, up to 30 s.
M.READY_TIMEOUT = 30
M.READY_INTERVAL = 0.2

local function clean(v)
  if v == json_null then return nil end
  return v
end

local function decode(s)
  local ok, v = pcall(http.decode_json, s)
  if ok and type(v) == "table" then return v end
  return nil
end

---------------------------------------------------------------------------
-- The connection: base URL + the endpoint's headers
---------------------------------------------------------------------------

local Conn = {}
Conn.__index = Conn

-- connect(cfg, sandbox_id) -> conn, or raises (an error from lifecycle.check with the given class/stage).
-- GET /sandboxes/{id}/endpoints/44772?use_server_proxy=...; every header of the answer goes on every
-- execd call (a gateway routes by them). The API key does not: execd runs inside the sandbox.
function M.connect(cfg, sandbox_id, class, stage)
  local j = M.endpoint(cfg, sandbox_id, M.PORT, cfg.use_server_proxy, class, stage)
  local headers = { ["User-Agent"] = lifecycle.USER_AGENT }
  for k, v in pairs(j.headers or {}) do headers[k] = v end
  local base = j.endpoint:match("^https?://") and j.endpoint or (cfg.protocol .. "://" .. j.endpoint)
  return setmetatable({ base = base:gsub("/+$", ""), headers = headers, cfg = cfg, sandbox_id = sandbox_id,
    endpoint = j.endpoint }, Conn)
end

-- endpoint(cfg, sandbox_id, port, use_server_proxy, class, stage) -> {endpoint, headers}: GET
-- /sandboxes/{id}/endpoints/{port}?use_server_proxy=...; raises class/stage.
function M.endpoint(cfg, sandbox_id, port, use_server_proxy, class, stage)
  local res = lifecycle.request(cfg, "GET", lifecycle.sandbox_path(sandbox_id, "/endpoints/" .. tostring(port)),
    nil, { query = "use_server_proxy=" .. (use_server_proxy and "true" or "false") })
  lifecycle.raise_if(class, stage, res, "OpenSandbox endpoint lookup failed")
  local j = res.json
  if type(j) ~= "table" or type(j.endpoint) ~= "string" or j.endpoint == "" then
    require("glsb.errors").raise(class, stage, "OpenSandbox endpoint lookup: the answer has no endpoint",
      lifecycle.failure(res))
  end
  local headers = {}
  if type(j.headers) == "table" then
    for k, v in pairs(j.headers) do headers[k] = tostring(v) end
  end
  return { endpoint = j.endpoint, headers = next(headers) and headers or nil }
end
M.PORT = lifecycle.EXECD_PORT

function Conn:url(path) return self.base .. path end

function Conn:hdrs(extra)
  local h = {}
  for k, v in pairs(self.headers) do h[k] = v end
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

-- conn:http(req) -> glsb.http result, with the connection's transport options.
function Conn:http(req)
  req.cainfo = req.cainfo or self.cfg.cainfo
  req.connect_timeout = req.connect_timeout or lifecycle.CONNECT_TIMEOUT
  return http.request(req)
end

-- conn:ping(timeout) -> true, or false, what went wrong (a transport failure or an HTTP status).
function Conn:ping(timeout)
  local res = self:http { method = "GET", url = self:url("/ping"), headers = self:hdrs(),
    connect_timeout = math.min(lifecycle.CONNECT_TIMEOUT, timeout), timeout = timeout }
  if res.error then return false, res.error end
  if res.status == 200 then return true end
  return false, lifecycle.failure(res)
end

-- wait_ready(conn, timeout, interval) -> true, or false, last failure: /ping until 200, first at once.
-- timeout: seconds, nil for none (resolved by the caller).
function M.wait_ready(conn, timeout, interval)
  local deadline = loop.deadline(timeout)
  local last
  while true do
    local ok, why = conn:ping(math.max(0.5, math.min(5, loop.remaining(deadline) or 5)))
    if ok then return true end
    last = why
    if deadline and loop.now() + (interval or M.READY_INTERVAL) > deadline then return false, last end
    loop.sleep(interval or M.READY_INTERVAL)
  end
end

---------------------------------------------------------------------------
-- The event stream
---------------------------------------------------------------------------

-- One parsed event of a line, or nil for blank/comment/SSE field lines.
local function event_of(line)
  line = line:gsub("^%s+", ""):gsub("%s+$", "")
  if line == "" or line:sub(1, 1) == ":" then return nil end
  if line:match("^event:") or line:match("^id:") or line:match("^retry:") then return nil end
  if line:sub(1, 5) == "data:" then line = line:sub(6):gsub("^%s+", "") end
  local ev = decode(line)
  -- a result the decoder refused (its tables would cost more than the budget): counted as dropped, not lost
  if type(ev) ~= "table" and line:sub(1, 80):find('"type"%s*:%s*"result"') then
    return { type = "result", undecoded = #line }
  end
  return ev
end

-- stream(conn, path, body, opts, on_event) -> res, st. POSTs body (JSON) and feeds every event to
-- on_event(ev); on_event returns true for the last event that matters (the transfer then stops: execd
-- holds a command stream open for its grace period after its last event). st.status is the HTTP
-- status, st.error_body the body of a non-200 answer.
function M.stream(conn, path, body, opts, on_event)
  local st = {}
  local res = conn:http {
    method = "POST", url = conn:url(path),
    headers = conn:hdrs { ["Content-Type"] = "application/json", Accept = "text/event-stream" },
    body = http.encode_json(body),
    connect_timeout = math.min(lifecycle.CONNECT_TIMEOUT, opts.timeout or lifecycle.CONNECT_TIMEOUT),
    timeout = opts.timeout or 0,
    idle_timeout = M.IDLE,
    framer = "lines",
    max_frame = M.MAX_FRAME,
    error_body = http.ERROR_BODY, -- an error answer is buffered (capped), not framed
    on_headers = function(status) st.status = status end,
    on_frame = function(line)
      if st.status ~= 200 then
        -- another status that is no error (3xx, a 2xx other than 200): its body, capped too
        st.body = st.body or http.body_reader()
        return st.body.add(line .. "\n")
      end
      local ev = event_of(line)
      if ev and on_event(ev) then
        st.finished = true
        return false
      end
    end,
  }
  if res.aborted and (st.finished or st.body) then res.aborted = nil end
  if st.body then st.error_body = st.body.text() end
  return res, st
end

-- The result of a non-200 answer to a run. execd refuses synchronously (the run did not start): 400 bad
-- request, 500 runtime error. In front of execd, 404 means the sandbox is gone and 502/503 that the
-- proxy could not reach it; a 504 may have come after the run started.
local function refused(res, st, what, alive)
  res.body = res.body or st.error_body
  local f = lifecycle.failure(res)
  local rid = f.request_id and (" (request id " .. f.request_id .. ")") or ""
  local msg = string.format("%s: %s%s", what, f.message, rid)
  local s = res.status
  if (s == 404 or s == 502 or s == 503 or s == 504) and alive and alive() == false then
    return result { status = Status.TIMEOUT, error = msg .. " (the sandbox was killed or reached its end of life)",
      failure = { exception_type = outcome.GONE, retry_safe = false } }
  end
  if s == 504 then
    return result { status = Status.UNKNOWN, error = msg .. "; it may have run",
      failure = { exception_type = Type.TIMEOUT, provider_type = "GatewayTimeout", retry_safe = false } }
  end
  if f.message:find("language runtime server not configured", 1, true) then
    -- execd without Jupyter: the image is not a code interpreter (issue 27: say which one is)
    msg = msg .. ". execute_code needs an image with a code interpreter: " .. lifecycle.CODE_IMAGE
      .. " (the default image) has one; execute_command and files work in any image"
  end
  local r = result { status = Status.ERROR, error = msg,
    failure = { exception_type = Type.REFUSED, provider_type = "SandboxApiException", retry_safe = false } }
  r.request_id, r.server_code = f.request_id, f.server_code
  return r
end

-- The result of a run whose stream gave no verdict: the transport broke (glsb.outcome with what arrived),
-- the answer was not a 200 (refused), or the stream ended without `missing` ("execution_complete; the
-- code"): gone when the sandbox is, else UNKNOWN.
local function unfinished(res, st, out, opts, what, missing)
  if res.error then
    return outcome.from_failure(res.error, { what = what, stdout = out:text("stdout"), stderr = out:text("stderr"),
      alive = opts.alive })
  end
  if st.status ~= 200 then return refused(res, st, what, opts.alive) end
  local gone = opts.alive and opts.alive() == false
  return result { status = gone and Status.TIMEOUT or Status.UNKNOWN,
    error = gone and (what .. ": the sandbox was killed or reached its end of life")
      or string.format("%s: the stream ended without %s may have run", what, missing),
    failure = { exception_type = gone and outcome.GONE or Type.PROTOCOL, retry_safe = false } }
end

---------------------------------------------------------------------------
-- Commands: POST /command
---------------------------------------------------------------------------

-- Commands travel as JSON text: bytes that are not UTF-8 would arrive altered (Go replaces them), so
-- refuse them here, before anything is sent. -> nil, or an ERROR result.
function M.refuse_non_utf8(texts)
  for _, t in ipairs(texts) do
    if type(t) == "string" and not utf8.len(t) then
      return result { status = Status.ERROR,
        error = "OpenSandbox carries commands as JSON text: not valid UTF-8: " .. ("%q"):format(t:sub(1, 80)),
        failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
    end
  end
  return nil
end

-- execd streams output as lines without their terminators, so whether the output ended with a newline
-- is lost. The command runs in a subshell followed by one "\n" on each stream: the output is then the
-- lines joined by "\n", exactly (but for "\r", which execd also takes for a line end). Without that
-- last newline (the command was killed, the stream cut) the last line's own newline may be missing.
function M.wrap(command)
  return "(\n" .. command .. "\n); __glsb_rc=$?; printf '\\n'; printf '\\n' >&2; exit $__glsb_rc"
end

-- Rebuilds both streams from execd's line events (see M.wrap). Two views of the same lines:
--   the capture (on_stdout/on_stderr, a background command's output so far) gets each line with its
--   "\n" as soon as it arrives; blank lines wait for the next line, since the last one is the wrapper's;
--   the exact bytes (the result) join the lines with "\n": they are right once the wrapper's newline
--   came, i.e. when the command ended with execution_complete or an exit code.
local function line_feed(out)
  local exact, pending, started = { stdout = output.pieces(), stderr = output.pieces() }, { stdout = 0, stderr = 0 }, {}
  local lf = {}
  function lf.push(name, text)
    local blank = text == "\n"
    local line = blank and "" or text
    local kept = exact[name]
    if kept.size <= output.CAP then
      if started[name] then kept:add("\n") end
      kept:add(line)
    end
    started[name] = true
    if blank then
      pending[name] = pending[name] + 1
    else
      if pending[name] > 0 then out:push(name, string.rep("\n", pending[name])) end
      pending[name] = 0
      out:push(name, line .. "\n")
    end
  end
  -- finish(r, ended): r gets stdout/stderr (exact when the command ended, else what the capture holds)
  function lf.finish(r, ended)
    for name, n in pairs(pending) do
      if n > 1 then out:push(name, string.rep("\n", n - 1)) end
    end
    out:finish(r)
    if not ended then return end
    for name, kept in pairs(exact) do
      if kept.size <= output.CAP and not r[name .. "_truncated"] then r[name] = kept:text() end
    end
  end
  return lf
end

-- The signal a killed command died of, from execd's traceback ("signal: killed").
local SIGNALS = { killed = "SIGKILL", terminated = "SIGTERM", interrupt = "SIGINT", hangup = "SIGHUP",
  quit = "SIGQUIT", aborted = "SIGABRT", ["segmentation fault"] = "SIGSEGV", ["broken pipe"] = "SIGPIPE" }

-- run_command(conn, command, opts) -> ExecutionResult. opts: deadline and/or timeout (sandbox.deadline),
-- env, cwd, on_stdout, on_stderr, alive (fn); out (a glsb.output capture to use), on_init(id) (execd's
-- command id, as soon as the stream says it).
function M.run_command(conn, command, opts)
  local deadline = sandbox.deadline(opts)
  local texts = { command, opts.cwd }
  for k, v in pairs(opts.env or {}) do texts[#texts + 1] = k texts[#texts + 1] = tostring(v) end
  local bad = M.refuse_non_utf8(texts)
  if bad then return bad end
  local body = { command = M.wrap(command), background = false }
  if opts.cwd then body.cwd = opts.cwd end
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    body.envs = env
  end
  local left = loop.remaining(deadline)
  if left then body.timeout = math.max(1, math.ceil(left * 1000)) end
  local out = opts.out or output.capture(opts)
  local lf = line_feed(out)
  local ev_state = {}
  local res, st = M.stream(conn, "/command", body,
    { timeout = left and (left + M.COMMAND_GRACE) or nil },
    function(ev)
      local t = ev.type
      if (t == "stdout" or t == "stderr") and type(ev.text) == "string" then
        lf.push(t, ev.text)
      elseif t == "init" then
        ev_state.id = clean(ev.text)
        if opts.on_init then opts.on_init(ev_state.id) end
      elseif t == "error" then
        ev_state.error = type(ev.error) == "table" and ev.error or {}
        return true
      elseif t == "execution_complete" then
        ev_state.complete = true
        return true
      end
      return false
    end)
  local r
  if ev_state.error then
    local e = ev_state.error
    local value = tostring(clean(e.evalue) or "")
    local code = value:match("^%s*(-?%d+)%s*$") and math.tointeger(tonumber(value)) or nil
    local tb = type(e.traceback) == "table" and table.concat(e.traceback, "\n") or ""
    if code == -1 and deadline and tb:find("signal: killed", 1, true) then
      r = result { status = Status.TIMEOUT, code = code,
        error = string.format("execute_command: timed out after %gs (the process group was killed)", opts.timeout),
        failure = { exception_type = Type.TIMEOUT, retry_safe = false } }
    elseif code == -1 and tb:match("^signal: ") then
      local sig = tb:match("^signal: ([%w ]+)")
      r = result { status = Status.ERROR, code = code,
        error = "command ended by signal: " .. (SIGNALS[sig] or sig) } -- the contract's words
    elseif code then
      r = result { status = code == 0 and Status.SUCCESS or Status.ERROR, code = code,
        error = code ~= 0 and ("command exited with code " .. code) or nil } -- the contract's words
    else
      -- execd could not start it (the OS said why): it did not run
      r = result { status = Status.ERROR, error = "execute_command: " .. value,
        failure = { exception_type = Type.REFUSED, provider_type = clean(e.ename) or "CommandExecError",
          retry_safe = false } }
    end
  elseif ev_state.complete then
    r = result { status = Status.SUCCESS, code = 0 }
  else
    r = unfinished(res, st, out, opts, "execute_command", "a completion or an exit code; the command")
  end
  lf.finish(r, ev_state.complete or ev_state.error ~= nil)
  r.command_id = ev_state.id
  return r
end

-- A command running in the background (sb:start_command): the same /command stream, read by a task.
local Handle = {}
Handle.__index = Handle

-- start_command(conn, command, opts) -> handle {pid(), output(), done(), wait(timeout), kill()}. opts as
-- run_command's.
function M.start_command(conn, command, opts)
  local h = setmetatable({ conn = conn, out = output.capture(opts), started = loop.condition() }, Handle)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.out = h.out
  o.on_init = function(id)
    h.id = id
    h.started:broadcast()
  end
  h.task = loop.spawn(function()
    local r = M.run_command(conn, command, o)
    h.started:broadcast()
    return r
  end)
  return h
end

function Handle:pid() return self.id end
function Handle:output() return self.out:text("stdout"), self.out:text("stderr") end
function Handle:done() return self.task:done() end
function Handle:wait(timeout) return self.task:wait(timeout) end

-- kill() -> true when execd took the interrupt (SIGTERM to the group, SIGKILL 3 s later; the stream then
-- ends with the command), false when it had ended already.
function Handle:kill()
  if self.task:done() then return false end
  local deadline = loop.now() + lifecycle.CONNECT_TIMEOUT
  while not self.id and not self.task:done() do
    if self.started:wait(deadline) == "timeout" then break end
  end
  if self.task:done() then return false end
  if not self.id then
    self.task:cancel()
    return true
  end
  return (M.interrupt(self.conn, "/command", self.id, 30))
end

---------------------------------------------------------------------------
-- Code: POST /code
---------------------------------------------------------------------------

local function strip_ansi(s) return (s:gsub("\27%[[%d;]*m", "")) end

-- The ERROR result of an exception the kernel reported.
local function exception_result(e)
  local name, value = tostring(clean(e.ename) or "Error"), tostring(clean(e.evalue) or "")
  local head = name .. ": " .. value
  local lines = {}
  for _, l in ipairs(type(e.traceback) == "table" and e.traceback or {}) do
    lines[#lines + 1] = strip_ansi(tostring(l))
  end
  local tb = table.concat(lines, "\n")
  if not tb:find(head, 1, true) then tb = tb ~= "" and (tb .. "\n" .. head) or head end
  local r = result { status = Status.ERROR, code = 1, error = tb }
  -- r.traceback is one string on every provider (docs/contract.md §4); execd sends IPython's lines
  local raw = {}
  for i, l in ipairs(type(e.traceback) == "table" and e.traceback or {}) do raw[i] = tostring(l) end
  r.error_name, r.error_value, r.traceback = name, value, table.concat(raw, "\n")
  return r
end

local function is_busy(res, st)
  if res.error or st.status ~= 500 then return false end
  local body = res.body or st.error_body or ""
  return body:find("busy", 1, true) ~= nil
end

-- One `result` event (execd controller/sse.go OnExecuteResult): the kernel's execute_result MIME bundle,
-- text/plain renamed "text". Forms under glsb's names (png, jpeg, pdf are base64 there: decoded here,
-- once; text as r.text shows it), other MIME types under extra. Only execute_result reaches the client
-- (the stream registers no display_data handler: components/execd/pkg/jupyter/execute/execute.go
-- registerExecuteCodeStreamHandlers), so every bundle is the cell's main result.
local function bundle_of(mimes)
  local b = { is_main_result = true, extra = {} }
  for k, v in pairs(mimes) do
    v = clean(v)
    local form = k == "text" and "text" or results.FORM_OF_MIME[k]
    if form and results.BINARY[form] then
      b[form] = type(v) == "string" and codec.b64decode(v) or nil -- not base64: the form is left out
    elseif form == "text" then
      b.text = models.ExecutionResult.text_of(v)
    elseif form then
      b[form] = v
    elseif type(k) == "string" then
      b.extra[k] = v
    end
  end
  return results.new(results.clean(b))
end

-- What display() and figures show never comes back (above): a Python cell that looks like it shows
-- something gets a note saying so, rather than silence. The patterns are a cheap reading of the code,
-- not a parse: a note too many is harmless, a missing one is the silence it avoids.
M.DISPLAY_PATTERNS = { "display%s*%(", "%.show%s*%(", "pyplot", "plt%." }
M.DISPLAY_NOTE = "[glsb: OpenSandbox returns only the value of the cell's last expression (execd forwards the "
  .. "kernel's execute_result, not its display_data): what display(), plt.show() or a figure left open at the "
  .. "end of the cell showed is not returned; end the cell with the object (e.g. the figure) to get it]"

local function may_display(code)
  for _, p in ipairs(M.DISPLAY_PATTERNS) do
    if code:find(p) then return true end
  end
  return false
end

-- run_cell(conn, code, opts, deadline[, note]) -> ExecutionResult of one cell in the language's default
-- context, ended by the deadline (nil: none) of the whole execution it is part of; note: the user's cell
-- (not glsb's env cells), which may get the display note.
local function run_cell(conn, code, opts, deadline, note)
  -- a context of its own (sb:context) by id; else the language's default context
  local ctx = opts.context
  local body = { code = code, context = ctx and { id = ctx.id, language = ctx.language }
    or { language = opts.language or "python" } }
  local function once()
    local out = output.capture(opts)
    local st_ev = { results = results.collector() }
    local res, st = M.stream(conn, "/code", body, { timeout = loop.remaining(deadline) },
      function(ev)
        local t = ev.type
        if (t == "stdout" or t == "stderr") and type(ev.text) == "string" then
          out:push(t, ev.text)
        elseif t == "init" then
          st_ev.context_id = clean(ev.text)
        elseif t == "execution_count" then
          st_ev.execution_count = clean(ev.execution_count)
        elseif t == "result" and ev.undecoded then
          st_ev.results:drop(ev.undecoded, "decode")
        elseif t == "result" and type(ev.results) == "table" then
          -- execd renames the MIME key text/plain to text (the SDKs read either)
          local text = clean(ev.results.text or ev.results["text/plain"])
          if type(text) == "string" then st_ev.main_text = text end
          if st_ev.results:room() > 0 then st_ev.results:add(bundle_of(ev.results)) else st_ev.results:drop(0) end
        elseif t == "error" then
          st_ev.error = type(ev.error) == "table" and ev.error or {}
        elseif t == "execution_complete" then
          st_ev.complete = true
          return true
        end
        return false
      end)
    local function outcome_of()
      local r
      if st_ev.complete or st_ev.error then
        -- the kernel said how the cell ended (execd may send execution_complete after an error)
        r = st_ev.error and exception_result(st_ev.error) or result { status = Status.SUCCESS, code = 0 }
      else
        r = unfinished(res, st, out, opts, "execute_code", "execution_complete; the code")
      end
      out:finish(r)
      if note and (opts.language or "python") == "python" and may_display(code) then
        st_ev.results:note(M.DISPLAY_NOTE)
      end
      st_ev.results:finish(r)
      r.execution_count = st_ev.execution_count
      r.context_id = st_ev.context_id
      if st_ev.main_text and r.status == Status.SUCCESS then
        r.text = models.ExecutionResult.text_of(st_ev.main_text)
      end
      return r
    end
    -- refused before it ran: the context is still finishing an interrupted run; sent again a little later
    if is_busy(res, st) then error({ busy = true, outcome = outcome_of }, 0) end
    return outcome_of()
  end
  local ok, r = pcall(retry.call, once, { attempts = math.huge, base_delay = 0.05, factor = 2, max_delay = 0.5,
    jitter = 0, deadline = math.min(loop.now() + M.BUSY_WAIT, deadline or math.huge),
    retryable = function(e) return type(e) == "table" and e.busy == true end })
  if ok then return r end
  if type(r) == "table" and r.busy == true then return r.outcome() end -- still busy at BUSY_WAIT: refused
  error(r, 0)
end

-- Env cells, per language: /code has no env field and execute_code's env lasts one execution, so a cell
-- in the kernel's own language sets the variables (saving what they replace) and a restore cell puts
-- them back. A restore is idempotent: it may run again after a cut (a cell given too little of its
-- budget) without harm.
local ENV_CELLS = {}

ENV_CELLS.python = {
  restore = table.concat({
    "if '_glsb_saved_env' in globals():",
    "    import os as _glsb_os",
    "    for _glsb_k, _glsb_v in _glsb_saved_env.items():",
    "        if _glsb_v is None: _glsb_os.environ.pop(_glsb_k, None)",
    "        else: _glsb_os.environ[_glsb_k] = _glsb_v",
    "    del _glsb_saved_env",
  }, "\n"),
  set = function(keys, env)
    local packages = require "glsb.packages"
    local items = {}
    for _, k in ipairs(keys) do
      items[#items + 1] = packages.python_string(k) .. ": " .. packages.python_string(tostring(env[k]))
    end
    return table.concat({
      "import os as _glsb_os",
      "_glsb_env = {" .. table.concat(items, ", ") .. "}",
      "_glsb_saved_env = {k: _glsb_os.environ.get(k) for k in _glsb_env}",
      "_glsb_os.environ.update(_glsb_env)",
      "del _glsb_env",
    }, "\n")
  end,
}

ENV_CELLS.javascript = {
  restore = "if (globalThis._glsbSavedEnv) { for (const [k, v] of Object.entries(globalThis._glsbSavedEnv)) "
    .. "{ if (v === null) delete process.env[k]; else process.env[k] = v; } delete globalThis._glsbSavedEnv; }",
  set = function(keys, env)
    local items = {}
    for _, k in ipairs(keys) do
      items[#items + 1] = http.encode_json(k) .. ": " .. http.encode_json(tostring(env[k]))
    end
    return "{ const e = {" .. table.concat(items, ", ") .. "}; globalThis._glsbSavedEnv = {}; "
      .. "for (const k of Object.keys(e)) { globalThis._glsbSavedEnv[k] = k in process.env ? process.env[k] : null; "
      .. "process.env[k] = e[k]; } }"
  end,
}
ENV_CELLS.typescript = ENV_CELLS.javascript

ENV_CELLS.bash = {
  restore = 'for _glsb_k in ${_glsb_env_keys-}; do _glsb_o="_glsb_old_$_glsb_k"; '
    .. 'if [ "${!_glsb_o-}" = _glsb_unset_ ]; then unset "$_glsb_k"; else export "$_glsb_k=${!_glsb_o}"; fi; '
    .. 'unset "$_glsb_o"; done; unset _glsb_env_keys _glsb_k _glsb_o',
  set = function(keys, env)
    local shell = require "glsb.shell"
    local out = { "_glsb_env_keys=" .. shell.quote(table.concat(keys, " ")) }
    for _, k in ipairs(keys) do
      out[#out + 1] = string.format("_glsb_old_%s=${%s-_glsb_unset_}; export %s=%s", k, k, k,
        shell.quote(tostring(env[k])))
    end
    return table.concat(out, "\n")
  end,
}

local function env_cell(language, env)
  local cells = ENV_CELLS[language]
  local keys = {}
  for k in pairs(env) do keys[#keys + 1] = k end
  table.sort(keys)
  -- what an earlier run left is restored first, then the values this one replaces are saved
  return cells.restore .. "\n" .. cells.set(keys, env)
end

-- run_code(conn, code, opts) -> ExecutionResult. opts: deadline and/or timeout (sandbox.deadline),
-- language, env, on_stdout, on_stderr, alive (fn). r.text is the value of the cell's last expression
-- (text/plain, the repr), r.results the main result's bundle (and the note above), r.execution_count the
-- kernel's counter.
-- With env, three cells (set, the code, restore) share the one deadline: a restore the budget has no room
-- for is left pending on the connection (conn.env_pending) and done first by the next run.
function M.run_code(conn, code, opts)
  local deadline = sandbox.deadline(opts)
  local language = opts.context and opts.context.language or opts.language or "python"
  local with_env = opts.env and next(opts.env)
  if with_env and not ENV_CELLS[language] then
    return result { status = Status.ERROR, error = string.format("execute_code: OpenSandbox: env is set by a %s "
      .. "cell, and the adapter writes those for python, javascript, typescript and bash only; pass the values "
      .. "in the code", language),
      failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
  end
  -- env restores pending, per kernel: the language's default context, or a context of its own
  local key = opts.context and opts.context.id or language
  conn.env_pending = conn.env_pending or {}
  if not with_env and not conn.env_pending[key] then return run_cell(conn, code, opts, deadline, true) end
  local copts = { language = opts.language, context = opts.context, alive = opts.alive }
  -- pending from the moment a set cell may have run (even cut) until a restore is seen to end
  if with_env then conn.env_pending[key] = true end
  local pre = run_cell(conn, with_env and env_cell(language, opts.env) or ENV_CELLS[language].restore, copts, deadline)
  if pre.status ~= Status.SUCCESS then
    pre.error = (with_env and "execute_code: setting env failed: " or
      "execute_code: restoring the env an earlier call set failed: ") .. tostring(pre.error)
    return pre
  end
  if not with_env then conn.env_pending[key] = nil end
  local r = run_cell(conn, code, opts, deadline, true)
  if with_env and r.status ~= Status.TIMEOUT and r.status ~= Status.UNKNOWN and not loop.expired(deadline) then
    local back = run_cell(conn, ENV_CELLS[language].restore, copts, deadline)
    if back.status == Status.SUCCESS then conn.env_pending[key] = nil end
  end
  return r
end

-- create_context(conn, {language, cwd}) -> {id, language}: POST /code/context (execd
-- controller/codeinterpreting.go; a language without a kernel spec is its 500 "no kernel specs found").
function M.create_context(conn, spec)
  local res = conn:http { method = "POST", url = conn:url("/code/context"),
    headers = conn:hdrs { ["Content-Type"] = "application/json" },
    body = http.encode_json({ language = spec.language, cwd = spec.cwd }), timeout = 60 }
  local e = lifecycle.check(errors.SandboxExecutionError, models.Stage.CONTEXT, res,
    "OpenSandbox create context failed")
  if e then error(e, 0) end
  local ok, j = pcall(http.decode_json, res.body or "")
  if not ok or type(j) ~= "table" or type(j.id) ~= "string" then
    errors.raise(errors.SandboxExecutionError, models.Stage.CONTEXT, "OpenSandbox create context: the answer has no id")
  end
  return { id = j.id, language = spec.language }
end

-- close_context(conn, ctx): DELETE /code/contexts/{id} (404: already gone).
function M.close_context(conn, ctx)
  local res = conn:http { method = "DELETE", url = conn:url("/code/contexts/" .. http.escape(ctx.id)),
    headers = conn:hdrs(), timeout = 30 }
  if not res.error and res.status == 404 then return end
  local e = lifecycle.check(errors.SandboxExecutionError, models.Stage.CONTEXT, res,
    "OpenSandbox remove context failed")
  if e then error(e, 0) end
end

-- interrupt(conn, id[, timeout]) -> true, or false, why: DELETE /command?id= (SIGTERM, then SIGKILL
-- after 3 s) or DELETE /code?id= (a kernel interrupt).
function M.interrupt(conn, path, id, timeout)
  local res = conn:http { method = "DELETE", url = conn:url(path .. "?id=" .. http.escape(id)),
    headers = conn:hdrs(), timeout = timeout or 10 }
  if res.error then return false, res.error end
  if res.status == 200 then return true end
  return false, lifecycle.failure(res)
end

return M
