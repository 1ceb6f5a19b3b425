-- glsb.models: the value types of the public API: ExecutionStatus, Stage,
-- Language, FailureDetail, ExecutionResult and SandboxFile.

local results = require "glsb.results"

local M = {}

local function frozen(name, t)
  return setmetatable({}, {
    __index = function(_, k)
      local v = t[k]
      if v == nil then error(string.format("%s has no member '%s'", name, tostring(k)), 2) end
      return v
    end,
    __newindex = function() error(name .. " is read-only", 2) end,
    __pairs = function() return next, t, nil end,
  })
end

-- A value set: members map NAME -> value; values(set) lists the values.
local function value_set(name, members)
  local values = {}
  for _, v in pairs(members) do values[v] = true end
  local set = frozen(name, members)
  return set, values
end

local status_values, stage_values, language_values, failure_type_values

-- ExecutionStatus: the outcome of one execute_code / execute_command.
--   SUCCESS  ran and succeeded
--   ERROR    the outcome is known: ran and failed, or provably never ran
--   TIMEOUT  overran its budget / never came back / sandbox killed mid-request:
--            may have run; never retried automatically
--   UNKNOWN  transport broke after delivery: may have run; never retried
M.ExecutionStatus, status_values = value_set("ExecutionStatus", {
  SUCCESS = "success", ERROR = "error", TIMEOUT = "timeout", UNKNOWN = "unknown",
})

-- Stage: where a lifecycle failure happened, one per operation that can fail. Stable strings (also the
-- error_code in logs). EXECUTE: execute_code / execute_command / start_command; SET_TIMEOUT, INFO,
-- GET_HOST and LIST: the provider calls behind sb:set_timeout, sb:info, sb:get_host and glsb.list; PAUSE,
-- SNAPSHOT and CONTEXT: sb:pause, sb:snapshot and sb:context.
M.Stage, stage_values = value_set("Stage", {
  CREATE = "create", HEALTH_CHECK = "health_check", PACKAGE_INSTALL = "package_install",
  NOT_INITIALIZED = "not_initialized", EXECUTE = "execute", UPLOAD = "upload",
  DOWNLOAD = "download", TERMINATE = "terminate", TEMPLATE_BUILD = "template_build",
  WORKSPACE = "workspace", CONNECT = "connect", FILES = "files", POOL = "pool", LM = "lm",
  SET_TIMEOUT = "set_timeout", INFO = "info", GET_HOST = "get_host", LIST = "list",
  PAUSE = "pause", SNAPSHOT = "snapshot", CONTEXT = "context",
})

-- Language of a code interpreter sandbox.
M.Language, language_values = value_set("Language", {
  PYTHON = "python", BASH = "bash", JAVASCRIPT = "javascript", TYPESCRIPT = "typescript",
  R = "r", JAVA = "java",
})

-- FailureType: failure.exception_type, what caused a failed call, in one word that is the same on every
-- provider for the same cause. A closed set: FailureDetail refuses any other value. What the provider
-- itself called it (an AWS exception, the interpreter's error line, execd's ename, a Connect code) is
-- kept beside it in failure.provider_type. These name kinds of failure, not glsb.errors classes (the
-- error a method raises has its class in `class`); SandboxNotInitializedError is both, for one cause.
--   TIMEOUT       a deadline passed: the call's timeout (glsb's, the transport's, a gateway's) or the
--                 provider's kill at it
--   SANDBOX_GONE  the sandbox ended during the call (killed, its lease over, deleted): the base then ends
--                 the handle
--   NOT_RUNNING   the sandbox was not running when the call was made: nothing was sent
--   TRANSPORT     the connection failed (retry_safe: before the request was written) or broke after
--   PROTOCOL      the answer broke the protocol: framing, bad JSON, a stream that ended early, a frame
--                 over its limit
--   REFUSED       the provider answered that it would not run it (an HTTP 4xx, throttling, a proxy or a
--                 port that refused, a program that could not start)
--   SERVER        the provider failed or lost the call after taking it (a 5xx, the interpreter's own
--                 error lines, an unmodeled error): it may have run
--   UNSUPPORTED   the provider cannot do this (no hook, an env a language cannot take, bytes its wire
--                 cannot carry): nothing ran
--   UPLOAD        the call's files (or a staged stdin) could not be uploaded: nothing ran
--   PROVIDER      what glsb cannot name: a hook raised something unexpected (a bug)
M.FailureType, failure_type_values = value_set("FailureType", {
  TIMEOUT = "TimeoutError", SANDBOX_GONE = "SandboxGoneError", NOT_RUNNING = "SandboxNotInitializedError",
  TRANSPORT = "TransportError", PROTOCOL = "ProtocolError", REFUSED = "RefusedError", SERVER = "ServerError",
  UNSUPPORTED = "UnsupportedError", UPLOAD = "UploadError", PROVIDER = "ProviderError",
})

function M.is_status(v) return status_values[v] == true end
function M.is_failure_type(v) return failure_type_values[v] == true end
function M.is_stage(v) return stage_values[v] == true end
function M.is_language(v) return language_values[v] == true end

---------------------------------------------------------------------------
-- FailureDetail
---------------------------------------------------------------------------

-- FailureDetail: present on a result when a caught failure adds something `status` does not say, and
-- on every TIMEOUT. exception_type: one of FailureType (nil: PROVIDER); retry_safe: true only when the
-- request was provably never written (no detail = no claim either way); provider_type: the provider's
-- own name for it, or nil.
local FailureDetail = {}
FailureDetail.__index = FailureDetail
M.FailureDetail = FailureDetail

-- FailureDetail.new(exception_type, retry_safe[, provider_type]) or FailureDetail.new{exception_type,
-- retry_safe, provider_type}. An exception_type outside FailureType is an argument error.
function FailureDetail.new(exception_type, retry_safe, provider_type)
  if type(exception_type) == "table" then
    retry_safe = exception_type.retry_safe
    provider_type = exception_type.provider_type
    exception_type = exception_type.exception_type
  end
  if exception_type == nil then exception_type = M.FailureType.PROVIDER end
  if not failure_type_values[exception_type] then
    local names = {}
    for v in pairs(failure_type_values) do names[#names + 1] = v end
    table.sort(names)
    error(string.format("FailureDetail: exception_type must be one of glsb.FailureType (%s), got %s",
      table.concat(names, ", "), tostring(exception_type)), 2)
  end
  if provider_type ~= nil then provider_type = tostring(provider_type) end
  return setmetatable({ exception_type = exception_type, retry_safe = retry_safe == true,
    provider_type = provider_type }, FailureDetail)
end

FailureDetail.__tostring = function(self)
  return string.format("FailureDetail(%s%s, retry_safe=%s)", self.exception_type,
    self.provider_type and (" [" .. self.provider_type .. "]") or "", tostring(self.retry_safe))
end

---------------------------------------------------------------------------
-- ExecutionResult
---------------------------------------------------------------------------

local ExecutionResult = {}
ExecutionResult.__index = ExecutionResult
M.ExecutionResult = ExecutionResult

-- ExecutionResult.new{status, code, stdout, stderr, error, duration_ms, failure, text,
-- stdout_truncated, stderr_truncated, results, results_truncated}
-- status defaults from code (0 -> SUCCESS, other -> ERROR) when not given, and
-- to UNKNOWN when nothing says what happened.
--   text: the value of the code's last expression as the interpreter shows it (Python: its repr, a
--         string's without the outer quotes, as E2B's text/plain), or nil when the last statement is
--         not an expression or its value is None. Never printed to stdout too (one field, the same on
--         every provider).
--   stdout_truncated / stderr_truncated: true when the stream passed glsb.output.CAP (10 MiB) and
--         was cut there; the stream then ends with a "[glsb: output truncated ...]" note.
--   results: the rich results, in the order the code produced them (glsb.results: bundles of MIME
--         forms, binary ones as bytes; the main result, whose text is `text`, among them); {} when the
--         code displayed nothing. results_truncated: true when bundles past glsb.results.CAP were
--         dropped (the list then ends with a note bundle).
function ExecutionResult.new(t)
  t = t or {}
  local status = t.status
  local code = t.code
  if code == nil then code = t.exit_code end
  if status == nil then
    if code == 0 and t.error == nil then
      status = M.ExecutionStatus.SUCCESS
    elseif code ~= nil or t.error ~= nil then
      status = M.ExecutionStatus.ERROR
    else
      status = M.ExecutionStatus.UNKNOWN
    end
  end
  if not status_values[status] then
    error("ExecutionResult: bad status " .. tostring(status), 2)
  end
  local failure = t.failure
  if failure ~= nil and getmetatable(failure) ~= FailureDetail then failure = FailureDetail.new(failure) end
  -- a TIMEOUT always says so in the one word (a provider need not repeat it; the call may have run)
  if failure == nil and status == M.ExecutionStatus.TIMEOUT then failure = FailureDetail.new(M.FailureType.TIMEOUT) end
  return setmetatable({
    status = status,
    code = code,
    stdout = t.stdout or "",
    stderr = t.stderr or "",
    error = t.error,
    duration_ms = t.duration_ms,
    failure = failure,
    text = t.text,
    stdout_truncated = t.stdout_truncated == true,
    stderr_truncated = t.stderr_truncated == true,
    results = type(t.results) == "table" and t.results or {},
    results_truncated = t.results_truncated == true,
  }, ExecutionResult)
end

function ExecutionResult.is(x) return getmetatable(x) == ExecutionResult end

-- ExecutionResult.text_of(repr) -> the `text` field's form of an interpreter's text/plain repr: a
-- string's repr without its outer quotes ('aa' -> aa), anything else as it is (E2B's rule).
function ExecutionResult.text_of(repr)
  if type(repr) ~= "string" then return repr end
  return repr:match("^'(.*)'$") or repr:match('^"(.*)"$') or repr
end

-- One line for a cause chain (glsb.errors.describe): status and code, not the whole output (an error's
-- message already carries what matters of it, once).
ExecutionResult.__describe = function(self)
  return string.format("ExecutionResult(status=%s%s)", self.status,
    self.code ~= nil and (", code=" .. tostring(self.code)) or "")
end

function ExecutionResult:ok() return self.status == M.ExecutionStatus.SUCCESS end

-- r:images() -> every png, jpeg and svg of r.results, in order: {mime, data, result, index}.
function ExecutionResult:images() return results.images(self) end

local function clip(s, n)
  s = tostring(s)
  if #s > n then return s:sub(1, n) .. "..." end
  return s
end

ExecutionResult.__tostring = function(self)
  local parts = { "status=" .. self.status }
  if self.code ~= nil then parts[#parts + 1] = "code=" .. tostring(self.code) end
  if self.duration_ms ~= nil then parts[#parts + 1] = string.format("duration_ms=%d", math.floor(self.duration_ms)) end
  if self.stdout ~= "" then parts[#parts + 1] = string.format("stdout=%q", clip(self.stdout, 200)) end
  if self.stderr ~= "" then parts[#parts + 1] = string.format("stderr=%q", clip(self.stderr, 200)) end
  if self.text ~= nil then parts[#parts + 1] = string.format("text=%q", clip(self.text, 200)) end
  if self.stdout_truncated then parts[#parts + 1] = "stdout_truncated=true" end
  if self.stderr_truncated then parts[#parts + 1] = "stderr_truncated=true" end
  if #self.results > 0 then parts[#parts + 1] = string.format("results=%d", #self.results) end
  if self.results_truncated then parts[#parts + 1] = "results_truncated=true" end
  if self.error ~= nil then parts[#parts + 1] = string.format("error=%q", clip(self.error, 200)) end
  if self.failure ~= nil then parts[#parts + 1] = "failure=" .. tostring(self.failure) end
  return "ExecutionResult(" .. table.concat(parts, ", ") .. ")"
end

---------------------------------------------------------------------------
-- SandboxFile
---------------------------------------------------------------------------

local SandboxFile = {}
SandboxFile.__index = SandboxFile
M.SandboxFile = SandboxFile

local function check_filename(filename, level)
  if type(filename) ~= "string" or filename == "" then
    error("SandboxFile: filename must be a non-empty string", level + 1)
  end
  if filename:sub(1, 1) == "/" or filename:find("%z") then
    error("SandboxFile: filename must be relative: " .. filename, level + 1)
  end
  for part in filename:gmatch("[^/]+") do
    if part == ".." then error("SandboxFile: filename must not contain '..': " .. filename, level + 1) end
  end
end

-- SandboxFile.from_bytes(data, filename)
function SandboxFile.from_bytes(data, filename)
  if type(data) ~= "string" then error("SandboxFile.from_bytes: data must be a string", 2) end
  check_filename(filename, 2)
  return setmetatable({ filename = filename, data = data }, SandboxFile)
end

-- SandboxFile.from_path(path[, filename]): reads the local file now;
-- filename defaults to the path's last component.
function SandboxFile.from_path(path, filename)
  if type(path) ~= "string" or path == "" then error("SandboxFile.from_path: path must be a string", 2) end
  filename = filename or path:match("([^/]+)/*$")
  check_filename(filename, 2)
  local f, err = io.open(path, "rb")
  if not f then error("SandboxFile.from_path: " .. tostring(err), 2) end
  local data = f:read("a")
  f:close()
  if data == nil then error("SandboxFile.from_path: cannot read " .. path, 2) end
  return setmetatable({ filename = filename, data = data }, SandboxFile)
end

-- SandboxFile.normalize(x) -> SandboxFile, accepting any table with string
-- `filename` and `data`. Raises (argument error) otherwise.
function SandboxFile.normalize(x, level)
  level = (level or 1) + 1
  if getmetatable(x) == SandboxFile then return x end
  if type(x) ~= "table" then error("file must be a SandboxFile or a {filename, data} table", level) end
  if type(x.data) ~= "string" then error("file.data must be a string", level) end
  check_filename(x.filename, level)
  return setmetatable({ filename = x.filename, data = x.data }, SandboxFile)
end

SandboxFile.__tostring = function(self)
  return string.format("SandboxFile(%s, %d bytes)", self.filename, #self.data)
end

return M
