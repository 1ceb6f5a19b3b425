-- glsb.providers.bedrock: AWS Bedrock AgentCore Code Interpreter as a glsb sandbox.
--
-- A sandbox is one code-interpreter session (docs/protocols/bedrock.md):
--   create        StartCodeInterpreterSession (clientToken kept across retries: one session)
--   execute_code  InvokeCodeInterpreter executeCode (python through glsb.providers.bedrock.cell, for the
--                 last expression's value; javascript, typescript as they are)
--   execute_command, files, download_file, workspace   executeCommand, writeFiles, readFiles
--   terminate     StopCodeInterpreterSession (clientToken kept across retries)
-- then the outcome classification of an Invoke, then the hooks glsb.sandbox calls. AgentCore does
-- not stream output: on_stdout/on_stderr get the lines when the call ends. Sessions have a hard TTL:
-- set_timeout cannot renew it (a documented no-op).
local sandbox = require "glsb.sandbox"
local options = require "glsb.options"
local errors = require "glsb.errors"
local models = require "glsb.models"
local outcome = require "glsb.outcome"
local packages = require "glsb.packages"
local http = require "glsb.http"
local time = require "glsb.time"
local ids = require "glsb.ids"
local paging = require "glsb.paging"
local answer = require "glsb.answer"
local shell = require "glsb.shell"
local workspace = require "glsb.workspace"
local results = require "glsb.results"
local output = require "glsb.output"
local codec = require "glsb.codec"
local api = require "glsb.providers.bedrock.api"
local cell = require "glsb.providers.bedrock.cell"

local Stage = models.Stage
local Status = models.ExecutionStatus
local Type = models.FailureType
local ExecutionResult = models.ExecutionResult

local M = { name = "bedrock" }

M.DEFAULT_IDENTIFIER = api.DEFAULT_IDENTIFIER
M.DEFAULT_SESSION_TIMEOUT = 900      -- AgentCore's own default (§1.1)
M.MAX_SESSION_TIMEOUT = 28800        -- 8 h, the hard maximum; also what "no lease" becomes
-- The session user's working directory on AgentCore (the file tools' relative paths land there).
M.WORKDIR = "/opt/amazon/genesis1p-tools/var"
M.LIST_PAGE = 100                   -- ListCodeInterpreterSessions maxResults (1..100)

local Sandbox = sandbox.CodeInterpreterSandbox:extend("bedrock", {
  -- executeCode's languages (service model ProgrammingLanguage); also execute_code{language=...}
  languages = { python = true, javascript = true, typescript = true },
  -- what AgentCore's code interpreter has no call for (service model bedrock-agentcore: Start, Invoke, Stop,
  -- Get and List CodeInterpreterSession only)
  pause_unsupported = "AgentCore code interpreter sessions cannot be paused (StopCodeInterpreterSession ends one)",
  pause_on_timeout_unsupported = "an AgentCore session ends at its sessionTimeoutSeconds",
  snapshot_unsupported = "AgentCore has no snapshot of a code interpreter session",
  context_unsupported = "an AgentCore session has one interpreter (executeCode's clearContext resets it)",
  default_sandbox_timeout = M.DEFAULT_SESSION_TIMEOUT,
  -- Start and Stop are retried inside the adapter (AWS's standard policy: throttling, 5xx and
  -- connection failures, one clientToken), so the base makes one attempt of each.
  create_retry = { attempts = 1 },
  terminate_retry = { attempts = 1 },
  -- its options, declared once (glsb.options; kit's commit: strict options landed in the base class)
  options = {
    provider = api.OPTIONS,
    create = {
      session_timeout = { "seconds", "the session's TTL (1..28800), as `timeout`", default = "900" },
      name = { "string", "session name", default = "glsb-<8 hex>" },
      create_timeout = { "seconds", "seconds per Start request; `<= 0`: none", default = "60" },
    },
  },
})
M.Sandbox = Sandbox
Sandbox.workspace_root = M.WORKDIR
-- refs given to connect and kill: an AgentCore session id (docs/protocols/bedrock.md §7)
Sandbox.id_grammar = api.IDS.session
local IDS = api.IDS

-- The interpreter sessions start on: a template (a builder's ref or an id), else `identifier`.
local function interpreter_of(opts)
  local tpl = opts.template
  if type(tpl) == "table" then return tpl.template_id or opts.identifier or M.DEFAULT_IDENTIFIER end
  if type(tpl) == "string" then return tpl end
  return opts.identifier or M.DEFAULT_IDENTIFIER
end

-- An interpreter that is no AgentCore interpreter id or ARN is an argument error at the caller's line.
function Sandbox._prepare_create(sopts)
  sandbox.CodeInterpreterSandbox._prepare_create(sopts)
  answer.given(IDS.interpreter, interpreter_of(sopts), "create: the code interpreter (template or identifier)")
end

---------------------------------------------------------------------------
-- Small helpers
---------------------------------------------------------------------------

local function result(t) return ExecutionResult.new(t) end

-- AgentCore answers a call whole: its output reaches on_stdout / on_stderr, a line per call as the
-- contract has it, when the answer came (a caller that streams still sees every line).
local function deliver(r, opts)
  for _, which in ipairs({ "stdout", "stderr" }) do
    local fn = opts["on_" .. which]
    if fn and type(r[which]) == "string" and r[which] ~= "" then
      local sp = output.splitter(fn)
      sp.push(r[which])
      sp.flush()
    end
  end
  return r
end


-- Strings of a CodeInterpreterResult's text blocks, joined.
local function text_of(res)
  local parts = {}
  for _, block in ipairs(type(res.content) == "table" and res.content or {}) do
    if type(block) == "table" and block.type == "text" and type(block.text) == "string" then
      parts[#parts + 1] = block.text
    end
  end
  return table.concat(parts)
end

local function str(v) return type(v) == "string" and v or nil end

---------------------------------------------------------------------------
-- Invoke: one tool call and what its answer means
---------------------------------------------------------------------------

-- The sandbox is still there? GetCodeInterpreterSession: READY -> true; TERMINATED or not found ->
-- false; anything else -> nil (cannot tell).
function Sandbox:_alive()
  local ok, j = pcall(api.call, self._cfg, "data", "GET",
    "/code-interpreters/" .. http.segment(self.identifier) .. "/sessions/get",
    { query = { { "sessionId", self.sandbox_id } }, timeout = 10, attempts = 1 })
  if ok then
    if j.status == "TERMINATED" then return false end
    if j.status == "READY" then return true end
    return nil
  end
  if require("glsb.loop").is_cancelled(j) then error(j, 0) end
  if type(j) == "table" and j.http_status == 404 then return false end
  return nil
end

-- Errors AgentCore raises before running anything: the call was refused, the tool did not run.
local REFUSALS = {
  ThrottlingException = true, ValidationException = true, AccessDeniedException = true,
  ConflictException = true, ServiceQuotaExceededException = true, ResourceNotFoundException = true,
}

-- invoke(tool, arguments, {deadline | timeout, what, on_progress}) -> the CodeInterpreterResult, or nil,
-- ExecutionResult naming the outcome of a call that gave no result.
function Sandbox:_invoke(tool, arguments, o)
  local what = o.what or tool
  local out = api.invoke(self._cfg, self.identifier, self.sandbox_id, tool, arguments,
    { deadline = sandbox.deadline(o), on_progress = o.on_progress })
  if out.result then return out.result end
  local ex = out.exception
  if ex then
    -- After the 200: an exception frame in place of the result. A modeled refusal (throttling,
    -- validation, a session that is gone...) means the tool did not run; an internal error or an
    -- unmodeled error frame says nothing about that.
    local msg = string.format("%s: %s: %s", what, ex.name, ex.message)
    if ex.modeled and REFUSALS[ex.name] then
      local gone = ex.name == "ResourceNotFoundException"
      return nil, result { status = Status.ERROR, error = msg,
        failure = { exception_type = gone and outcome.GONE or Type.REFUSED, provider_type = ex.name,
          retry_safe = true } }
    end
    return nil, result { status = Status.UNKNOWN, error = msg .. " (the call may have run)",
      failure = { exception_type = Type.SERVER, provider_type = ex.name, retry_safe = false } }
  end
  if out.http_error then
    local f = out.http_error
    local msg = what .. ": " .. f.message
    if f.http_status >= 400 and f.http_status < 500 then
      -- refused before the stream opened: nothing ran
      local gone = f.http_status == 404 or f.aws_error == "ResourceNotFoundException"
      return nil, result { status = Status.ERROR, error = msg,
        failure = { exception_type = gone and outcome.GONE or Type.REFUSED, provider_type = f.aws_error,
          retry_safe = true } }
    end
    return nil, result { status = Status.UNKNOWN, error = msg .. " (the call may have run)",
      failure = { exception_type = Type.SERVER, provider_type = f.aws_error, retry_safe = false } }
  end
  if out.transport then
    return nil, (outcome.from_failure(out.transport, { what = what, alive = function() return self:_alive() end }))
  end
  return nil, result { status = Status.UNKNOWN,
    error = what .. ": the stream ended without a result; the call may have run",
    failure = { exception_type = Type.PROTOCOL, retry_safe = false } }
end

-- A tool's own failure (isError) as a message.
local function tool_failure(res, what)
  local t = text_of(res)
  return what .. " failed: " .. (t ~= "" and t or "isError without a message")
end

---------------------------------------------------------------------------
-- executeCode / executeCommand
---------------------------------------------------------------------------

-- The exception a traceback ends with ("ValueError: bad value 7"), or the whole text.
local function exception_line(stderr)
  local last
  for line in stderr:gmatch("[^\n]+") do
    if line:match("^[%a_][%w_%.]*: ") or line:match("^[%a_][%w_%.]*$") then last = line end
  end
  return last
end

-- Rich results of one executeCode: the bundles the wrapper's verdict carries (display() and the last
-- value, binary forms base64 there, decoded here once), then the content blocks that are not text
-- (service model ContentBlock: image {data, mimeType}, resource {resource = {type, uri, mimeType, text,
-- blob}}, resource_link {uri, name, description, mimeType, size}), in their order. Figures the wrapper
-- saw open at the end that came back as no image block get a note saying so.
M.NO_IMAGE_NOTE = "[glsb: %d matplotlib figure%s open at the end of the cell came back from AgentCore as no "
  .. "image; save it in the code (fig.savefig('/tmp/fig.png')) and read it with download_file]"

local function binary_form(mime)
  local form = results.FORM_OF_MIME[mime]
  return form, form ~= nil and (results.BINARY[form] or form == "svg")
end

local function block_bundle(block)
  local t = block.type
  if t == "image" then
    local data = type(block.data) == "string" and codec.b64decode(block.data)
    if not data then return nil end
    local mime = str(block.mimeType) or "image/png"
    local form = results.FORM_OF_MIME[mime]
    if form then return { [form] = data } end
    return { extra = { [mime] = data } }
  elseif t == "resource" and type(block.resource) == "table" then
    local r = block.resource
    local data = str(r.text)
    if not data and type(r.blob) == "string" then data = codec.b64decode(r.blob) end
    local b = { extra = { uri = str(r.uri) } }
    local form = binary_form(str(r.mimeType))
    if form then b[form] = data elseif data then b.extra[str(r.mimeType) or "application/octet-stream"] = data end
    return b
  elseif t == "resource_link" then
    return { text = str(block.name) or str(block.uri), extra = { resource_link = {
      uri = str(block.uri), name = str(block.name), description = str(block.description),
      mime_type = str(block.mimeType), size = math.tointeger(block.size) } } }
  end
  return nil
end

local function code_results(res, verdict)
  local c = results.collector()
  for _, item in ipairs(verdict and type(verdict.results) == "table" and verdict.results or {}) do
    local forms = type(item) == "table" and type(item.forms) == "table" and item.forms
    if forms then
      local b = { is_main_result = item.main == true, extra = type(item.extra) == "table" and item.extra or nil }
      for form, v in pairs(forms) do
        if results.BINARY[form] then v = type(v) == "string" and codec.b64decode(v) or nil end
        b[form] = v
      end
      c:add(results.clean(b))
    end
  end
  local dropped = verdict and type(verdict.dropped) == "table" and verdict.dropped or {}
  c:drops(dropped[1], dropped[2])
  local images = 0
  for _, block in ipairs(type(res.content) == "table" and res.content or {}) do
    local b = type(block) == "table" and block_bundle(block)
    if b then
      if block.type == "image" then images = images + 1 end
      c:add(results.clean(b))
    end
  end
  local figures = verdict and math.tointeger(verdict.figures) or 0
  if figures > images then
    local n = figures - images
    c:note(M.NO_IMAGE_NOTE:format(n, n == 1 and " that was" or "s that were"))
  end
  return c
end

-- executeCode takes a language per call (service model: python | javascript | typescript). Python
-- runs inside glsb.providers.bedrock.cell (the last expression's value, env); JavaScript and
-- TypeScript are sent as they are: r.text stays nil there, and a per-call env cannot be applied
-- (executeCode has none, and no wrapper of ours runs in those runtimes).
function Sandbox:_run_code(code, opts)
  local language = opts.language or self.language or "python"
  if language ~= "python" and opts.env and next(opts.env) then
    return result { status = Status.ERROR,
      error = ("execute_code: env is not supported for language '%s' on bedrock (AgentCore's executeCode has "
        .. "no environment; set it in the code); nothing ran"):format(language),
      failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
  end
  local res, failed, mark, stdout, stderr, exit, verdict
  for _ = 1, 2 do
    local sent, runner_id = code, nil
    if language == "python" then
      mark = "[glsb-verdict-" .. ids.hex(32) .. "]"
      sent, runner_id = cell.encode(code, opts.env, mark, self._runner_id)
    end
    res, failed = self:_invoke("executeCode", { code = sent, language = language },
      { deadline = sandbox.deadline(opts), what = "execute_code" })
    if not res then return failed end
    local sc = type(res.structuredContent) == "table" and res.structuredContent or {}
    stdout = str(sc.stdout) or (res.isError and "" or text_of(res))
    stderr = str(sc.stderr) or ""
    exit = math.tointeger(sc.exitCode)
    if mark then stdout, verdict = cell.decode(stdout, mark) end
    -- a verdict came from the runner: the session has it. "missing": the stub found no runner (the
    -- interpreter started again) and ran nothing; the same code goes again with the runner.
    if not (verdict and verdict.display == "missing") then
      if verdict then self._runner_id = runner_id end
      break
    end
    self._runner_id, verdict = nil, nil
  end
  local rich = code_results(res, verdict)
  local r
  if verdict then
    -- the wrapper saw the code end: its word decides (the service only saw the wrapper succeed)
    local e = type(verdict.error) == "table" and verdict.error or nil
    if e then
      r = result { status = Status.ERROR, code = 1, stdout = stdout, stderr = stderr,
        error = (str(e.traceback) or str(e.name) or "the code raised"):gsub("%s+$", "") }
      r.error_name, r.error_value, r.traceback = str(e.name), str(e.value), str(e.traceback)
    else
      r = result { status = Status.SUCCESS, code = 0, stdout = stdout, stderr = stderr, text = str(verdict.text) }
    end
  elseif res.isError or (exit and exit ~= 0) then
    local tb = stderr ~= "" and stderr or text_of(res)
    r = result { status = Status.ERROR, code = exit or 1, stdout = stdout, stderr = stderr,
      error = tb:gsub("%s+$", "") }
    r.error_name = exception_line(tb) and exception_line(tb):match("^([%a_][%w_%.]*)")
  else
    r = result { status = Status.SUCCESS, code = 0, stdout = stdout, stderr = stderr }
  end
  rich:finish(r)
  return deliver(r, opts)
end

-- The command line AgentCore runs: executeCommand takes one shell string, so env and cwd are set
-- in it (quoted).
local function command_line(command, opts)
  local pre = {}
  if opts.env then
    local keys = {}
    for k in pairs(opts.env) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do pre[#pre + 1] = "export " .. k .. "=" .. shell.quote(opts.env[k]) .. ";" end
  end
  if opts.cwd then pre[#pre + 1] = "cd " .. shell.quote(opts.cwd) .. " &&" end
  if #pre == 0 then return command end
  return table.concat(pre, " ") .. " " .. command
end

-- The JSON text of the request must be UTF-8; other bytes would arrive altered, so they are refused
-- before anything is sent.
local function not_utf8(what, s)
  if utf8.len(s) then return nil end
  return result { status = Status.ERROR,
    error = what .. ": AgentCore carries commands as JSON text: not valid UTF-8: " .. ("%q"):format(s:sub(1, 80)),
    failure = { exception_type = Type.UNSUPPORTED, retry_safe = true } }
end

function Sandbox:_run_command(command, opts)
  local line = command_line(command, opts)
  local bad = not_utf8("execute_command", line)
  if bad then return bad end
  local res, failed = self:_invoke("executeCommand", { command = line },
    { deadline = sandbox.deadline(opts), what = "execute_command" })
  if not res then return failed end
  local sc = type(res.structuredContent) == "table" and res.structuredContent or {}
  local exit = math.tointeger(sc.exitCode)
  local stdout, stderr = str(sc.stdout) or text_of(res), str(sc.stderr) or ""
  if exit == nil then
    exit = res.isError and 1 or 0
  end
  local r = result { status = exit == 0 and Status.SUCCESS or Status.ERROR, code = exit,
    stdout = stdout, stderr = stderr }
  -- the contract's words on every provider; what the command said is in r.stderr
  if exit ~= 0 then r.error = ("command exited with code %d"):format(exit) end
  return deliver(r, opts)
end

-- Background commands: startCommandExecution, polled with getTask (glsb.providers.bedrock.tasks).
function Sandbox:_start_command(command, opts)
  local line = command_line(command, opts)
  local bad = not_utf8("start_command", line)
  if bad then errors.raise(errors.SandboxExecutionError, Stage.EXECUTE, bad.error) end
  return require("glsb.providers.bedrock.tasks").start(self, line, opts)
end

---------------------------------------------------------------------------
-- Files: writeFiles (base64 blobs) and readFiles
---------------------------------------------------------------------------

function Sandbox:_upload(files, opts)
  local content = {}
  for i, f in ipairs(files) do content[i] = { path = f.path, blob = codec.b64encode(f.data) } end
  -- the request carries the files base64 in JSON: its bytes going out stand for the data's (scaled)
  local size = 0
  for _, f in ipairs(files) do size = size + #f.data end
  local res, failed = self:_invoke("writeFiles", { content = content },
    { deadline = sandbox.deadline(opts), what = "upload", on_progress = http.sent_progress(opts.on_progress, size) })
  if not res then errors.raise(errors.SandboxExecutionError, Stage.UPLOAD, failed.error, failed.failure) end
  if res.isError then errors.raise(errors.SandboxExecutionError, Stage.UPLOAD, tool_failure(res, "writeFiles")) end
end

function Sandbox:_download(path, opts)
  local res, failed = self:_invoke("readFiles", { paths = { path } },
    { deadline = sandbox.deadline(opts), what = "download", on_progress = http.received_progress(opts.on_progress) })
  if not res then errors.raise(errors.SandboxExecutionError, Stage.DOWNLOAD, failed.error, failed.failure) end
  if res.isError then errors.raise(errors.SandboxExecutionError, Stage.DOWNLOAD, tool_failure(res, "readFiles")) end
  for _, block in ipairs(type(res.content) == "table" and res.content or {}) do
    local r = type(block) == "table" and block.type == "resource" and block.resource
    if type(r) == "table" then
      if type(r.blob) == "string" then
        local data = codec.b64decode(r.blob)
        if not data then
          errors.raise(errors.SandboxExecutionError, Stage.DOWNLOAD, "readFiles: a blob that is not base64")
        end
        return data
      end
      if type(r.text) == "string" then return r.text end
    end
  end
  errors.raise(errors.SandboxExecutionError, Stage.DOWNLOAD, "readFiles answered no resource for " .. path)
end

---------------------------------------------------------------------------
-- Workspace primitives: exact argv, stdin and output bytes through executeCommand
---------------------------------------------------------------------------

-- A short Python program run by executeCommand: argv, stdin and the output travel as base64, so no
-- byte is altered by the JSON text of the request and answer, and no shell parses the argv. A large
-- stdin goes ahead through writeFiles (one argument of a command line holds at most 128 KiB on Linux).
local EXEC_ARGV = table.concat({
  "import base64 as b, json, os, subprocess as s, sys",
  "a = json.loads(b.b64decode(sys.argv[1]))",
  "if 'stdin_path' in a:",
  "    with open(a['stdin_path'], 'rb') as f: data = f.read()",
  "    os.unlink(a['stdin_path'])",
  "else:",
  "    data = b.b64decode(a['stdin'])",
  "try:",
  "    p = s.run([b.b64decode(x) for x in a['argv']], input=data, stdout=s.PIPE, stderr=s.PIPE)",
  "    r = {'exit': p.returncode, 'out': b.b64encode(p.stdout).decode(), 'err': b.b64encode(p.stderr).decode()}",
  "except OSError as e:",
  "    r = {'exit': 127, 'out': '', 'err': b.b64encode(str(e).encode()).decode()}",
  "print('glsb-exec-argv ' + json.dumps(r))",
}, "\n")
local INLINE_STDIN = 32 * 1024

function Sandbox:_exec_argv(argv, opts)
  local deadline = sandbox.deadline(opts) -- one budget for staging stdin and running argv
  local enc = {}
  for i, a in ipairs(argv) do enc[i] = codec.b64encode(a) end
  local doc = { argv = enc }
  local stdin = opts.stdin or ""
  if #stdin > INLINE_STDIN then
    doc.stdin_path = workspace.stage_stdin(self, stdin, { deadline = deadline })
  else
    doc.stdin = codec.b64encode(stdin)
  end
  local line = "python3 -c " .. shell.quote(EXEC_ARGV) .. " " .. codec.b64encode(http.encode_json(doc))
  local res, failed = self:_invoke("executeCommand", { command = line }, { deadline = deadline, what = "workspace" })
  if not res then return { exit_code = nil, stdout = "", stderr = "", status = failed.status, error = failed.error } end
  local sc = type(res.structuredContent) == "table" and res.structuredContent or {}
  local reply = (str(sc.stdout) or text_of(res)):match("glsb%-exec%-argv (%b{})")
  local ok, j = pcall(http.decode_json, reply or "")
  if not ok or type(j) ~= "table" then
    return { exit_code = nil, stdout = "", stderr = str(sc.stderr) or "", status = Status.ERROR,
      error = "the workspace channel gave no answer: " .. tostring(str(sc.stderr) or text_of(res)):sub(1, 300) }
  end
  return { exit_code = math.tointeger(j.exit), stdout = codec.b64decode(j.out or "") or "",
    stderr = codec.b64decode(j.err or "") or "" }
end

---------------------------------------------------------------------------
-- Life cycle
---------------------------------------------------------------------------

-- The packages a template (custom interpreter) asks for: kept in its description by the builder
-- (glsb.providers.bedrock.template).
function M.template_packages(description)
  if type(description) ~= "string" then return nil end
  local ok, j = pcall(http.decode_json, description)
  if ok and type(j) == "table" and j.glsb == "template-v1" and type(j.packages) == "table" then return j.packages end
  return nil
end

local function config_or_fail(opts)
  local cfg, err = api.config(opts)
  if not cfg then errors.raise(errors.SandboxStartError, Stage.CREATE, err) end
  return cfg
end

-- Wraps a failure of the adapter's own calls (a cause table) into an error of `class` at `stage`;
-- a cancellation or a glsb error passes as it is.
local function raise_from(class, stage, what, err)
  if require("glsb.loop").is_cancelled(err) or errors.is_error(err) then error(err, 0) end
  errors.raise(class, stage, what .. ": " .. errors.describe(err), err)
end
M.raise_from = raise_from

function Sandbox:_start(opts)
  local cfg = config_or_fail(opts)
  self._cfg = cfg
  local tpl = opts.template
  local identifier = interpreter_of(opts)
  if type(tpl) == "table" then self._template_packages = tpl.packages end
  self.identifier = identifier
  if identifier ~= M.DEFAULT_IDENTIFIER and self._template_packages == nil then
    -- a custom interpreter by id: its packages (if glsb built it) are in its description
    local ok, j = pcall(api.call, cfg, "control", "GET", "/code-interpreters/" .. http.segment(identifier))
    if not ok then raise_from(errors.SandboxStartError, Stage.CREATE, "GetCodeInterpreter " .. identifier, j) end
    self._template_packages = M.template_packages(j.description)
  end
  local lease = opts.session_timeout or opts.timeout or M.MAX_SESSION_TIMEOUT
  lease = math.max(1, math.min(M.MAX_SESSION_TIMEOUT, math.ceil(lease)))
  -- one token for this logical Start, whatever retries follow (ours or the base's)
  self._start_token = self._start_token or ids.uuid()
  local path = "/code-interpreters/" .. http.segment(identifier) .. "/sessions/start"
  local ok, j = pcall(api.call, cfg, "data", "PUT", path,
    { json = { name = opts.name or ("glsb-" .. ids.hex(8)), sessionTimeoutSeconds = lease,
      clientToken = self._start_token }, timeout = options.timeout(opts.create_timeout, api.API_TIMEOUT) or 0 })
  if not ok then raise_from(errors.SandboxStartError, Stage.CREATE, "StartCodeInterpreterSession", j) end
  if j.sessionId == nil or j.sessionId == "" then
    errors.raise(errors.SandboxStartError, Stage.CREATE, "StartCodeInterpreterSession answered no sessionId")
  end
  -- the session id goes into a header and every later query, the interpreter into every later path: each
  -- in its grammar (CodeInterpreterSessionId, an interpreter id or ARN), or refused
  local a = answer.reader("StartCodeInterpreterSession", errors.SandboxStartError, Stage.CREATE)
  self.sandbox_id = a:id(j.sessionId, "sessionId", IDS.session)
  self.identifier = a:id(j.codeInterpreterIdentifier, "codeInterpreterIdentifier", IDS.interpreter, true)
    or identifier
  self.session_timeout = lease
end

-- additional_packages, after the template's own (a custom interpreter has no image of its own: its
-- packages are installed into each session, §5 of the issue).
function Sandbox:_after_start(sopts)
  local merged, seen = {}, {}
  for _, list in ipairs({ self._template_packages or {}, sopts.additional_packages or {} }) do
    for _, p in ipairs(list) do
      if not seen[p] then
        seen[p] = true
        merged[#merged + 1] = p
      end
    end
  end
  if #merged == 0 then return end
  local copy = {}
  for k, v in pairs(sopts) do copy[k] = v end
  copy.additional_packages = packages.validate(merged, 2)
  return sandbox.CodeInterpreterSandbox._after_start(self, copy)
end

-- pip through executeCommand, as AWS's own wrapper installs packages.
function Sandbox:_install_packages(pkgs, opts)
  return self:_run_command(packages.shell_install_command(pkgs), { timeout = opts.timeout,
    deadline = sandbox.deadline(opts) })
end

---------------------------------------------------------------------------
-- Handles that outlive a process: ref, connect, list
---------------------------------------------------------------------------


-- What reconnecting needs besides sandbox_id: the interpreter and where the service is (no secret:
-- credentials come from connect's options or the AWS chain).
function Sandbox:_ref()
  local cfg = self._cfg or {}
  return { identifier = self.identifier, region = cfg.region, endpoint = cfg.endpoint,
    control_endpoint = cfg.control_endpoint }
end

-- connect's options win over what the ref says. A bad configuration raises at `stage` (connect or list).
local function config_for(ref, opts, stage)
  local merged = {}
  for _, k in ipairs({ "region", "endpoint", "control_endpoint", "identifier" }) do merged[k] = ref[k] end
  for k, v in pairs(opts or {}) do merged[k] = v end
  local cfg, err = api.config(merged)
  if not cfg then errors.raise(errors.SandboxStartError, stage, err) end
  return cfg, answer.given(IDS.interpreter, merged.identifier or M.DEFAULT_IDENTIFIER, stage .. ": identifier")
end

-- A session by id: GetCodeInterpreterSession must say READY. Its TTL (createdAt +
-- sessionTimeoutSeconds) is what is left of the lease: AgentCore cannot extend it.
function Sandbox:_attach(ref, opts)
  local cfg, identifier = config_for(ref, opts, Stage.CONNECT)
  self._cfg = cfg
  self.identifier = identifier
  local ok, j = pcall(api.call, cfg, "data", "GET",
    "/code-interpreters/" .. http.segment(identifier) .. "/sessions/get",
    { query = { { "sessionId", ref.sandbox_id } } })
  if not ok then
    if type(j) == "table" and (j.http_status == 404 or j.aws_error == "ResourceNotFoundException") then
      error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, Stage.CONNECT, "GetCodeInterpreterSession "
        .. ref.sandbox_id .. ": " .. errors.describe(j), j)), 0)
    end
    raise_from(errors.SandboxStartError, Stage.CONNECT, "GetCodeInterpreterSession " .. ref.sandbox_id, j)
  end
  if j.status ~= "READY" then
    local e = errors.new(errors.SandboxStartError, Stage.CONNECT, ("connect: the session %s is %s"):format(
      ref.sandbox_id, tostring(j.status)))
    -- a TERMINATED session is over for good (AgentCore cannot start it again)
    error(j.status == "TERMINATED" and errors.no_such_sandbox(e) or e, 0)
  end
  self.sandbox_id = ref.sandbox_id
  self.session_timeout = math.tointeger(j.sessionTimeoutSeconds)
  local created = time.parse_iso(j.createdAt)
  if created and self.session_timeout then
    self._lease_remaining = math.max(0, created + self.session_timeout - time.wall())
  end
end

-- The READY sessions of the interpreter (opts.identifier, default the system one), every page.
-- AgentCore sessions carry no labels: a metadata filter matches none of them; none is ever paused.
function Sandbox._list(_cls, opts)
  opts = opts or {}
  local cfg, identifier = config_for({}, opts, Stage.LIST)
  local states = opts.state
  if type(states) == "string" then states = { states } end
  local want_running = states == nil
  for _, st in ipairs(states or {}) do if st == "running" then want_running = true end end
  if not want_running or (opts.metadata and next(opts.metadata)) then return {} end
  local refs, token = {}, nil
  local pager = paging.new("ListCodeInterpreterSessions", errors.SandboxStartError, Stage.LIST)
  repeat
    local body = { maxResults = M.LIST_PAGE, status = "READY", nextToken = token }
    local ok, j = pcall(api.call, cfg, "data", "POST",
      "/code-interpreters/" .. http.segment(identifier) .. "/sessions/list", { json = body })
    if not ok then raise_from(errors.SandboxStartError, Stage.LIST, "ListCodeInterpreterSessions", j) end
    local a = answer.reader("ListCodeInterpreterSessions", errors.SandboxStartError, Stage.LIST)
    local items = a:list(j.items, "items", true) or {}
    for i, it in ipairs(items) do
      local f = "items[" .. i .. "]"
      a:object(it, f)
      if a:string(it.status, f .. ".status", true) == "READY" then
        refs[#refs + 1] = { sandbox_id = a:id(it.sessionId, f .. ".sessionId", IDS.session), state = "running",
          identifier = identifier, started_at = a:string(it.createdAt, f .. ".createdAt", true), region = cfg.region,
          endpoint = cfg.endpoint, control_endpoint = cfg.control_endpoint, language = "python",
          extra = { name = a:string(it.name, f .. ".name", true) } }
        if opts.limit and #refs >= opts.limit then return refs end
      end
    end
    token = pager:next(j.nextToken, #items)
  until not token
  return refs
end

-- The session's TTL is fixed at start (AgentCore cannot extend it): _set_timeout is left out, so
-- set_timeout is a no-op that reports success (docs/contract.md §2.1: a no-op where the provider cannot renew).

function Sandbox:_terminate(opts)
  self._stop_token = self._stop_token or ids.uuid()
  local ok, err = pcall(api.call, self._cfg, "data", "PUT",
    "/code-interpreters/" .. http.segment(self.identifier) .. "/sessions/stop",
    { query = { { "sessionId", self.sandbox_id } }, json = { clientToken = self._stop_token },
      timeout = opts.timeout or 0 }) -- 0: none
  if ok or (type(err) == "table" and err.http_status == 404) then -- stopped, or already gone
    self._stop_token = nil
    return
  end
  raise_from(errors.SandboxTerminateError, Stage.TERMINATE, "StopCodeInterpreterSession", err)
end

return require("glsb.registry").lazy_template(M, "glsb.providers.bedrock.template")
