-- glsb.providers.e2b.interpreter: the code-interpreter channel (port 49999, docs/protocols/e2b.md §3):
--   POST /execute {code, language?, env_vars?} -> NDJSON lines: number_of_executions, stdout, stderr,
--   result {is_main_result, text, html, png, ...}, error {name, value, traceback}, keepalive every 5 s,
--   and last the literal {"type": "end_of_execution"}.
-- run_code never raises for what the code or the wire did: it returns an ExecutionResult.

local http = require "glsb.http"
local models = require "glsb.models"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local loop = require "glsb.loop"
local sandbox = require "glsb.sandbox"
local api = require "glsb.providers.e2b.api"
local codec = require "glsb.codec"
local results = require "glsb.results"
local errors = require "glsb.errors"

local Status = models.ExecutionStatus
local Type = models.FailureType
local result = models.ExecutionResult.new

local M = {}

-- The interpreter sends a keepalive line every 5 s: a stream silent for longer is dead even when the
-- caller set no deadline.
M.IDLE = 30
-- A stdout message carries one chunk of what the kernel printed, JSON-escaped (the server's json.dumps
-- keeps ensure_ascii: up to 6 bytes per byte printed, "\u0001"). A line up to this size is read whole;
-- a longer one (one huge sys.stdout.write) is cut by the framer (oversized = "cut"): its first MAX_FRAME
-- bytes arrive, the rest is only counted as it streams past, so the host never buffers it. The head is
-- enough to fill an empty stream's cap (6 x CAP escaped bytes and the envelope); see cut_stream_line.
M.MAX_FRAME = 8 * output.CAP

local clean, decode = api.clean, api.decode

---------------------------------------------------------------------------
-- Env vars: the server pastes them into code, unescaped
---------------------------------------------------------------------------

-- The server turns env vars into a line of code per variable in front of the cell, without escaping
-- (code-interpreter template/server/messaging.py _set_env_var_snippet): python and javascript
-- `os.environ['K'] = 'V'` / `process.env['K'] = 'V'`, r `Sys.setenv(K = "V")`, java
-- `System.setProperty("K", "V");`, bash `export K='V'`. It does so for the call's env_vars, and on a
-- context's first execution for the sandbox's own env (envd GET /envs: create's env and the
-- template's). A quote, a backslash or a line break there is a SyntaxError or a changed value: such
-- a variable is refused before anything is sent.
local QUOTE = { python = "'", javascript = "'", typescript = "'", bash = "'", r = '"', java = '"' }
local NAME_RULE = {
  r = { "^[%a.][%w._]*$", "an R name" },
  bash = { "^[%a_][%w_]*$", "a shell variable name" },
}

local function unsafe_char(s, quote)
  for _, c in ipairs({ quote, "\\", "\n", "\r" }) do
    if s:find(c, 1, true) then return c end
  end
  return nil
end

-- M.env_problem(language, env, where) -> nil | message: why the server could not set these variables.
function M.env_problem(language, env, where)
  local quote = QUOTE[language or "python"] or "'"
  local keys = {}
  for k in pairs(env or {}) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = tostring(env[k])
    local rule = NAME_RULE[language]
    if rule and not k:match(rule[1]) then
      return string.format("%s env var %q is not %s", where, k, rule[2])
    end
    local c = unsafe_char(k, quote) or unsafe_char(v, quote)
    if c then
      return string.format("%s env var %q holds %s: E2B's code interpreter pastes env vars into %s code "
        .. "unescaped, so it would not run as written (pass it in a file, or set it in the code)", where, k,
        ({ ["'"] = "a single quote", ['"'] = "a double quote", ["\\"] = "a backslash", ["\n"] = "a line break",
          ["\r"] = "a carriage return" })[c], language or "python")
    end
  end
  return nil
end

---------------------------------------------------------------------------
-- One cell at a time per context
---------------------------------------------------------------------------

-- The server runs a context's executions one at a time behind a lock and writes nothing, not even a
-- keepalive, to a request waiting for it (messaging.py ContextWebSocket.execute, _wait_for_result):
-- a cell queued there behind a long one would be cut by our idle limit. So the cells a connection
-- sends to one context (the language's default context) wait their turn here instead, where no
-- idle limit runs, and go out only when the context is free.
local function context_lock(conn, language, context_id)
  conn.context_locks = conn.context_locks or {}
  local key = context_id or language or "python"
  local lock = conn.context_locks[key]
  if not lock then
    lock = loop.lock()
    conn.context_locks[key] = lock
  end
  return lock
end

-- Rich result of one `result` line (code-interpreter template/server/api/models/result.py): the MIME
-- forms under short names (png, jpeg and pdf are base64 text there: decoded here, once), is_main_result,
-- and what is not a form under extra: `chart` (e2b/chart, the figure's structure), `data` (e2b/data, a
-- DataFrame's columns) and the server's own `extra` (every MIME type it has no field for, by MIME type).
local function parse_result(msg)
  local r = { is_main_result = msg.is_main_result == true, extra = {} }
  for _, k in ipairs(results.FORMS) do
    local v = clean(msg[k])
    if v ~= nil and results.BINARY[k] then
      v = type(v) == "string" and codec.b64decode(v) or nil -- not base64: the form is left out
    end
    r[k] = v
  end
  if type(msg.extra) == "table" then
    for k, v in pairs(msg.extra) do r.extra[k] = clean(v) end
  end
  r.extra.chart, r.extra.data = clean(msg.chart), clean(msg.data)
  return results.new(results.clean(r))
end

---------------------------------------------------------------------------
-- A line over MAX_FRAME: its head, its length
---------------------------------------------------------------------------

local BACKSLASH, LETTER_U = 92, 117

-- Whether the "\" at p starts an escape (it is not the second half of a "\\"): an even number of
-- backslashes before it.
local function escape_starts_at(t, p)
  local k = p - 1
  while k >= 1 and t:byte(k) == BACKSLASH do k = k - 1 end
  return (p - 1 - k) % 2 == 0
end

-- t: the start of a JSON string's body, cut anywhere. Drops an escape the cut split ("\", "\u00") and
-- a high surrogate whose low half it cut off ("\ud83d"), so that t decodes as a string.
local function whole_escapes(t)
  for p = #t, math.max(1, #t - 5), -1 do
    if t:byte(p) == BACKSLASH then
      if escape_starts_at(t, p) then
        local need = t:byte(p + 1) == LETTER_U and 6 or 2
        if #t - p + 1 < need then t = t:sub(1, p - 1) end
      end
      break
    end
  end
  local p = #t - 5
  if p >= 1 and t:find("^\\u[dD][89abAB]%x%x$", p) and escape_starts_at(t, p) then t = t:sub(1, p - 1) end
  return t
end

-- The start of a stdout/stderr line, in the server's field order (pydantic's, messaging.py):
-- {"type": "stdout", "text": "<the text, JSON-escaped>", "timestamp": "..."}.
local STREAM_HEAD = '^%s*{%s*"type"%s*:%s*"(%a+)"%s*,%s*"text"%s*:%s*"()'

-- A cut stdout/stderr line: as much of its text as the stream's cap still takes is decoded from the
-- head, a piece at a time (DECODE_PIECE escaped bytes, cut where no escape is split), so that only
-- the cap's worth of text is ever decoded; pushed like any text (the capture keeps what fits and counts
-- the rest). The bytes never decoded are counted as dropped as they were sent: JSON-escaped, so the
-- note's count is an upper bound of the bytes printed. Returns false when the head is not a stream line.
M.DECODE_PIECE = 1024 * 1024 -- at least 12: a surrogate pair's two escapes must fit in one piece

local function cut_stream_line(st, out, frame)
  local head = frame.head
  local kind, at = head:match(STREAM_HEAD)
  if kind ~= "stdout" and kind ~= "stderr" then return false end
  local pos = at
  while st.kept[kind] < output.CAP and pos <= #head do
    local t = whole_escapes(head:sub(pos, math.min(pos + M.DECODE_PIECE, #head + 1) - 1))
    local text = t ~= "" and decode('"' .. t .. '"')
    -- nothing whole left, or the text's end (a closing quote) is inside: what is left is counted
    if type(text) ~= "string" then break end
    st.kept[kind] = st.kept[kind] + #text
    out:push(kind, text)
    pos = pos + #t
  end
  out:dropped(kind, frame.length - (pos - 1))
  return true
end

local function line_reader(st, out)
  return function(line)
    if st.status_code ~= 200 then
      -- another status that is no error (3xx, a 2xx other than 200): its body, capped too
      st.body = st.body or http.body_reader()
      return st.body.add((type(line) == "table" and line.head or line) .. "\n")
    end
    if type(line) == "table" then
      if cut_stream_line(st, out, line) then return end
      local kind = line.head:match('^%s*{%s*"type"%s*:%s*"([%w_]+)"') or "unknown"
      if kind == "result" then
        -- a result too large for a frame is larger than the results' cap too: dropped, counted, noted
        st.results:drop(line.length)
        return
      end
      -- an error cut short would change what the call reports: the call's outcome is unknown
      st.oversized = { kind = kind, length = line.length }
      return false
    end
    local msg = line ~= "" and decode(line)
    if type(msg) ~= "table" then
      if line == "" then return end
      -- refused by the decoder (a line whose tables would cost more than its budget, or no JSON): a result
      -- is counted as dropped (results_truncated, the note says why); an error the call cannot read leaves
      -- its outcome unknown, as one cut short does
      local kind = line:match('^%s*{%s*"type"%s*:%s*"([%w_]+)"')
      if kind == "result" then
        st.results:drop(#line, "decode")
      elseif kind == "error" then
        st.undecoded = #line
      end
      return
    end
    local t = msg.type
    if (t == "stdout" or t == "stderr") and type(msg.text) == "string" then
      st.kept[t] = st.kept[t] + #msg.text
      out:push(t, msg.text)
    elseif t == "result" then
      -- the main result's text is r.text even when the bundle does not fit in the results' cap
      if msg.is_main_result == true then st.main_text = clean(msg.text) end
      if st.results:room() > 0 then st.results:add(parse_result(msg)) else st.results:drop(#line) end
    elseif t == "error" then
      st.exception = { name = clean(msg.name), value = clean(msg.value), traceback = clean(msg.traceback) }
      -- the server's own failures come as error lines too, with an empty traceback (messaging.py)
      local tb = st.exception.traceback
      if M.SERVER_ERRORS[st.exception.name] and (tb == nil or tb == "") then st.server_error = st.exception end
    elseif t == "number_of_executions" then
      st.execution_count = clean(msg.execution_count)
    elseif t == "end_of_execution" then
      st.done = true
    end
  end
end

-- Error lines of the server's own, not the code's (messaging.py): the websocket to the kernel was
-- lost, the kernel restarted, the execution was aborted or its connection closed. The code may or may
-- not have run: UNKNOWN, never an ERROR of the user's code.
M.SERVER_ERRORS = { WebSocketError = true, ContextRestarting = true, ExecutionAborted = true,
  UnexpectedEndOfExecution = true }

-- The result of a cell the server said ended: its exception, or success.
local function cell_result(ex, server_error)
  if server_error then
    return result { status = Status.UNKNOWN,
      error = string.format("execute_code: the code interpreter lost the execution (%s: %s); the code may have run",
        tostring(server_error.name), tostring(server_error.value or "")),
      failure = { exception_type = Type.SERVER, provider_type = server_error.name, retry_safe = false } }
  end
  if not ex then return result { status = Status.SUCCESS, code = 0 } end
  local head = tostring(ex.name or "Error") .. ": " .. tostring(ex.value or "")
  -- error = the traceback without IPython's colour codes (r.traceback keeps them)
  local tb = type(ex.traceback) == "string" and ex.traceback:gsub("\27%[[%d;]*m", "") or ""
  if not tb:find(head, 1, true) then tb = tb ~= "" and (tb .. "\n" .. head) or head end
  local r = result { status = Status.ERROR, code = 1, error = tb }
  r.error_name, r.error_value, r.traceback = ex.name, ex.value, ex.traceback
  return r
end

local function refused(message)
  return result { status = Status.ERROR, error = "execute_code: " .. message,
    failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
end

local function execute(conn, code, opts, timeout)
  local body = { code = code }
  -- a context of its own (sb:context) is named by id; the server takes one of context_id or language
  if opts.context then body.context_id = opts.context.id
  elseif opts.language and opts.language ~= "python" then body.language = opts.language end
  if opts.env and next(opts.env) then
    local env = {}
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
    body.env_vars = env
  end
  local out = output.capture(opts)
  local st = { results = results.collector(), done = false, kept = { stdout = 0, stderr = 0 } }
  local res = conn:http {
    method = "POST", url = conn:url(api.JUPYTER_PORT, "/execute"),
    headers = conn:headers(api.JUPYTER_PORT, { ["Content-Type"] = "application/json" }),
    body = http.encode_json(body),
    connect_timeout = math.min(api.CONNECT_TIMEOUT, timeout or api.CONNECT_TIMEOUT),
    timeout = timeout or 0,
    idle_timeout = M.IDLE,
    framer = "lines",
    max_frame = M.MAX_FRAME,
    oversized = "cut",
    error_body = http.ERROR_BODY, -- an error answer is buffered (capped), not framed
    on_headers = function(status) st.status_code = status end,
    on_frame = line_reader(st, out),
  }
  local r
  if st.undecoded then
    -- read on to its end, but an error the call could not read leaves the outcome unknown, ended or not
    r = result { status = Status.UNKNOWN,
      error = string.format("execute_code: the code interpreter sent an error line of %d bytes the decoder refused "
        .. "(too costly to decode, or not JSON); what the code raised is unknown", st.undecoded),
      failure = { exception_type = Type.PROTOCOL, retry_safe = false } }
  elseif st.done then
    -- the server said the cell ended: whatever the transport did afterwards, the outcome is known
    r = cell_result(st.exception, st.server_error)
  elseif st.oversized then
    r = result { status = Status.UNKNOWN,
      error = string.format("execute_code: the code interpreter sent a %s line of %d bytes, over the %d-byte limit "
        .. "(FRAME_TOO_LARGE); the call was abandoned there and the code may still have run", st.oversized.kind,
        st.oversized.length, M.MAX_FRAME),
      failure = { exception_type = Type.PROTOCOL, retry_safe = false } }
  elseif res.error then
    r = outcome.from_failure(res.error, { what = "execute_code", alive = function() return conn:alive() end })
  elseif res.status ~= 200 then
    res.body = res.body or (st.body and st.body.text())
    r = api.classify_status(res, "execute_code", conn)
  else
    r = result { status = Status.UNKNOWN,
      error = "execute_code: the stream ended without end_of_execution; the code may have run",
      failure = { exception_type = Type.PROTOCOL, retry_safe = false } }
  end
  out:finish(r)
  st.results:finish(r)
  r.text = type(st.main_text) == "string" and st.main_text or nil
  -- E2B-specific extra: the kernel's execution counter
  r.execution_count = st.execution_count
  return r
end

-- run_code(conn, code, opts) -> ExecutionResult. opts: timeout (s or nil), language, env, on_stdout,
-- on_stderr, sandbox_env (create's env: the server pastes it into a context's first cell). The value
-- of the cell's last expression is r.text (E2B's main result), r.results every rich result (glsb.results
-- bundles, capped at glsb.results.CAP), r.execution_count the kernel's counter.
function M.run_code(conn, code, opts)
  local problem = M.env_problem(opts.language, opts.env, "execute_code's")
    or M.env_problem(opts.language, opts.sandbox_env, "the sandbox's (create's env)")
  if problem then return refused(problem) end
  -- one deadline (the base's): the wait for the cells before it in this context draws from it too
  local deadline = sandbox.deadline(opts)
  local lock = context_lock(conn, opts.language, opts.context and opts.context.id)
  if not lock:acquire(deadline) then
    return result { status = Status.TIMEOUT,
      error = string.format("execute_code: timed out after %gs waiting for the cells before it in this context "
        .. "(never sent)", opts.timeout),
      failure = { exception_type = Type.TIMEOUT, retry_safe = true } }
  end
  local ok, r = pcall(execute, conn, code, opts, loop.remaining(deadline))
  lock:release()
  if not ok then error(r, 0) end
  return r
end

---------------------------------------------------------------------------
-- Contexts: POST /contexts {language, cwd} -> {id, language, cwd}; DELETE /contexts/{id}
---------------------------------------------------------------------------

local function context_request(conn, method, path, body, what)
  local res = conn:http {
    method = method, url = conn:url(api.JUPYTER_PORT, path),
    headers = conn:headers(api.JUPYTER_PORT, body and { ["Content-Type"] = "application/json" } or nil),
    body = body and http.encode_json(body) or nil,
    connect_timeout = api.CONNECT_TIMEOUT, timeout = api.API_TIMEOUT,
  }
  local e = errors.from_response(errors.SandboxExecutionError, models.Stage.CONTEXT, res, what)
  if e then error(e, 0) end
  return res
end

-- M.create_context(conn, {language, cwd}) -> {id, language, cwd} (code-interpreter template/server/
-- main.py post_contexts; a language without a kernel is the server's 500 with Jupyter's words).
function M.create_context(conn, spec)
  local res = context_request(conn, "POST", "/contexts", { language = spec.language, cwd = spec.cwd },
    "E2B create context failed")
  local j = decode(res.body)
  if type(j) ~= "table" or type(j.id) ~= "string" then
    errors.raise(errors.SandboxExecutionError, models.Stage.CONTEXT, "E2B create context: the answer has no id")
  end
  return { id = j.id, language = clean(j.language), cwd = clean(j.cwd) }
end

function M.close_context(conn, ctx)
  local res = conn:http {
    method = "DELETE", url = conn:url(api.JUPYTER_PORT, "/contexts/" .. http.escape(ctx.id)),
    headers = conn:headers(api.JUPYTER_PORT), connect_timeout = api.CONNECT_TIMEOUT, timeout = api.API_TIMEOUT,
  }
  if not res.error and res.status == 404 then return end -- already gone
  local e = errors.from_response(errors.SandboxExecutionError, models.Stage.CONTEXT, res, "E2B remove context failed")
  if e then error(e, 0) end
end

return M
