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

local status_values, stage_values, language_values

-- ExecutionStatus: the outcome of one execute_code / execute_command.
--   SUCCESS  ran and succeeded
--   ERROR    the outcome is known: ran and failed, or provably never ran
--   TIMEOUT  overran its budget / never came back / sandbox killed mid-request:
--            may have run; never retried automatically
--   UNKNOWN  transport broke after delivery: may have run; never retried
M.ExecutionStatus, status_values = value_set("ExecutionStatus", {
  SUCCESS = "success", ERROR = "error", TIMEOUT = "timeout", UNKNOWN = "unknown",
})

-- Stage: where a lifecycle failure happened. Stable strings (also the
-- error_code in logs).
M.Stage, stage_values = value_set("Stage", {
  CREATE = "create", HEALTH_CHECK = "health_check", PACKAGE_INSTALL = "package_install",
  NOT_INITIALIZED = "not_initialized", EXECUTE = "execute", UPLOAD = "upload",
  DOWNLOAD = "download", TERMINATE = "terminate", TEMPLATE_BUILD = "template_build",
  WORKSPACE = "workspace", CONNECT = "connect", FILES = "files", POOL = "pool",
})

-- Language of a code interpreter sandbox.
M.Language, language_values = value_set("Language", {
  PYTHON = "python", BASH = "bash", JAVASCRIPT = "javascript", TYPESCRIPT = "typescript",
  R = "r", JAVA = "java",
})

function M.is_status(v) return status_values[v] == true end
function M.is_stage(v) return stage_values[v] == true end
function M.is_language(v) return language_values[v] == true end

---------------------------------------------------------------------------
-- FailureDetail
---------------------------------------------------------------------------

-- FailureDetail: present on a result only when a caught failure adds
-- something `status` does not say. retry_safe is true only when the request
-- was provably never written. No detail = no claim either way.
local FailureDetail = {}
FailureDetail.__index = FailureDetail
M.FailureDetail = FailureDetail

function FailureDetail.new(exception_type, retry_safe)
  if type(exception_type) == "table" then
    retry_safe = exception_type.retry_safe
    exception_type = exception_type.exception_type
  end
  return setmetatable({ exception_type = tostring(exception_type or "Error"), retry_safe = retry_safe == true },
    FailureDetail)
end

FailureDetail.__tostring = function(self)
  return string.format("FailureDetail(%s, retry_safe=%s)", self.exception_type, tostring(self.retry_safe))
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
