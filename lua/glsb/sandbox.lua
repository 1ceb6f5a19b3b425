-- glsb.sandbox: the contract classes BaseSandbox and CodeInterpreterSandbox.
--
-- The base classes own every rule of API.md that is not about a wire
-- protocol: argument checks, "not initialized" checks, timeout resolution,
-- files normalization, creation retries, additional_packages, terminate
-- retries that keep the handle, download_file's nil-on-failure, set_timeout's
-- never-raise, classification of hook failures into ExecutionResult statuses,
-- stages on every error, and terminate-on-cancel. A provider only implements
-- small hooks (PROVIDERS.md has the long version):
--
--   local sandbox = require "glsb.sandbox"
--   local Sandbox = sandbox.CodeInterpreterSandbox:extend("myprov", {
--     default_code_timeout = 300,          -- optional class settings, see below
--   })
--
--   function Sandbox:_start(opts)          -- REQUIRED. Create/connect the sandbox.
--     -- opts: the user's create opts (provider options included) with
--     -- language, timeout (lease seconds, or nil = unbounded) and template resolved.
--     -- Set self.sandbox_id as soon as the provider assigned one (so a failure
--     -- later in _start is torn down before a retry). Raise on failure: a glsb
--     -- error (e.g. SandboxStartError with stage health_check), a transport
--     -- failure table, or a string; anything not a SandboxStartError is wrapped
--     -- into one with stage "create". Only transient failures are retried.
--   end
--   function Sandbox:_run_code(code, opts)     -- CodeInterpreterSandbox: REQUIRED
--   function Sandbox:_run_command(cmd, opts)   -- REQUIRED for execute_command
--     -- opts: timeout (seconds > 0, or nil = no deadline: already resolved),
--     -- on_stdout/on_stderr (call per line, best effort), env (table), plus
--     -- language (code) / cwd (command) when given.
--     -- Return a table {status?, code? (or exit_code), stdout, stderr, error,
--     -- failure?} or an ExecutionResult for every outcome you can name (the
--     -- code failed -> ERROR; your deadline passed -> TIMEOUT). Raise only for
--     -- transport/provider failures: the base turns a provably-unsent one
--     -- (phase connect/send, retry_safe) into ERROR + failure.retry_safe, a
--     -- receive timeout into TIMEOUT, anything else into UNKNOWN.
--   function Sandbox:_upload(files, opts)      -- for execute_code{files=...}
--     -- files: array of {filename, data, path} (path = upload_dir/filename);
--     -- opts: {upload_dir, timeout}. Raise on failure.
--   function Sandbox:_download(path, opts)     -- -> string; raise or nil on failure
--   function Sandbox:_set_timeout(seconds)     -- optional; absent = no-op
--   function Sandbox:_terminate(opts)          -- REQUIRED. opts: {timeout}. Treat
--     -- "already gone" (404) as success. Raise on failure; the base retries.
--   function Sandbox:_install_packages(pkgs, opts)  -- optional override; the
--     -- default runs glsb.packages.python_install_code through _run_code.
--
-- Class settings (fields of the class table; all optional):
--   default_code_timeout     execute_code timeout when the caller gives none
--   default_command_timeout  execute_command default (30 s per API.md)
--   default_sandbox_timeout  session lease default
--   create_retry, terminate_retry   retry policies (glsb.retry), merged over
--                            glsb.constants.CREATE_RETRY / TERMINATE_RETRY
--   languages                set of supported languages, e.g. {python = true}
--
--   function Sandbox:_init(opts)               -- optional: per-instance setup at
--     -- construction (before _start); call the parent's _init when overriding.
--
-- Hooks run inside a glsb.loop task, so they may block on glsb.http / process.
-- A hook that pcalls must re-raise a cancellation (glsb.loop.is_cancelled):
-- the base terminates the sandbox when the calling task is cancelled.

local errors = require "glsb.errors"
local models = require "glsb.models"
local constants = require "glsb.constants"
local retry = require "glsb.retry"
local packages = require "glsb.packages"
local log = require "glsb.log"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local trace_seam = require "glsb.trace.seam"

local Stage = models.Stage
local Status = models.ExecutionStatus
local ExecutionResult = models.ExecutionResult

local M = {}

local function loop() return require "glsb.loop" end

---------------------------------------------------------------------------
-- Small helpers (exported for providers and tests)
---------------------------------------------------------------------------

-- resolve_timeout(value, default) -> seconds (> 0) or nil (no deadline).
-- nil = the default; <= 0 = unbounded.
function M.resolve_timeout(value, default, what, level)
  if value == nil then value = default end
  if value == nil then return nil end
  if type(value) ~= "number" or value ~= value then
    error(string.format("%s must be a number of seconds, got %s", what or "timeout", type(value)), (level or 1) + 1)
  end
  if value <= 0 then return nil end
  return value
end

local function check_opts(opts, name, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(name .. ": opts must be a table", level + 1) end
  return opts
end

local function check_field(opts, key, kind, name, level)
  local v = opts[key]
  if v ~= nil and type(v) ~= kind then
    error(string.format("%s: opts.%s must be a %s, got %s", name, key, kind, type(v)), level + 1)
  end
  return v
end

local function check_env(env, name, level)
  if env == nil then return nil end
  if type(env) ~= "table" then error(name .. ": opts.env must be a table", level + 1) end
  for k, v in pairs(env) do
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
      error(name .. ": opts.env has a bad variable name: " .. tostring(k), level + 1)
    end
    if type(v) ~= "string" and type(v) ~= "number" then
      error(name .. ": opts.env." .. k .. " must be a string", level + 1)
    end
  end
  return env
end

-- normalize_files(files, upload_dir) -> array of {filename, data, path}.
function M.normalize_files(files, upload_dir, level)
  level = (level or 1) + 1
  upload_dir = upload_dir or constants.DEFAULT_UPLOAD_DIR
  if type(upload_dir) ~= "string" or upload_dir:sub(1, 1) ~= "/" then
    error("upload_dir must be an absolute path", level)
  end
  for part in upload_dir:gmatch("[^/]+") do
    if part == ".." then error("upload_dir must not contain '..'", level) end
  end
  upload_dir = upload_dir:gsub("/+$", "")
  if files == nil then return {}, upload_dir end
  if type(files) ~= "table" then error("files must be an array of SandboxFile", level) end
  local out = {}
  for i = 1, #files do
    local f = models.SandboxFile.normalize(files[i], level)
    out[i] = { filename = f.filename, data = f.data, path = upload_dir .. "/" .. f.filename }
  end
  return out, upload_dir
end

local function now() return loop().now() end

-- result_from_failure(err[, ctx]) -> ExecutionResult for a failure a hook raised while running code
-- (glsb.outcome's rules). Cancellation is never converted: it is re-raised.
function M.result_from_failure(err, ctx)
  return (outcome.from_failure(err, ctx))
end

-- normalize_result(r) -> ExecutionResult from what a hook returned, with the output cap applied (a
-- backstop for a hook that returned its output whole: glsb.output.CAP per stream, note and flag).
function M.normalize_result(r)
  local res
  if ExecutionResult.is(r) then
    res = r
  elseif type(r) ~= "table" then
    return ExecutionResult.new { status = Status.UNKNOWN, error = "provider returned no result" }
  else
    local ok, made = pcall(ExecutionResult.new, r)
    if not ok then
      return ExecutionResult.new { status = Status.UNKNOWN,
        error = "provider returned a bad result: " .. tostring(made) }
    end
    res = made
    for k, v in pairs(r) do if res[k] == nil then res[k] = v end end -- provider extras (text, results, ...)
  end
  for _, name in ipairs({ "stdout", "stderr" }) do
    local flag = name .. "_truncated"
    if res[flag] ~= true then
      local text, cut = output.cap_text(res[name])
      res[name], res[flag] = text, cut
    end
  end
  return res
end

---------------------------------------------------------------------------
-- BaseSandbox
---------------------------------------------------------------------------

local BaseSandbox = {}
BaseSandbox.__index = BaseSandbox
BaseSandbox.provider_name = "base"
BaseSandbox.default_command_timeout = constants.DEFAULT_COMMAND_TIMEOUT
BaseSandbox.default_sandbox_timeout = constants.DEFAULT_SANDBOX_TIMEOUT
M.BaseSandbox = BaseSandbox

local METAMETHODS = { "__tostring", "__close", "__name" }

-- Class:extend(provider_name[, fields]) -> subclass. The subclass gets
-- dot-callable constructors: Sub.create(opts) and Sub.new(opts).
function BaseSandbox.extend(parent, provider_name, fields)
  local cls = fields or {}
  cls.__index = cls
  for _, mm in ipairs(METAMETHODS) do
    if cls[mm] == nil then cls[mm] = parent[mm] end
  end
  cls.super = parent
  if provider_name ~= nil then cls.provider_name = provider_name end
  cls.create = function(opts) return M.create(cls, opts) end
  cls.new = function(opts) return M.new(cls, opts) end
  return setmetatable(cls, { __index = parent })
end

-- new(cls, opts) -> an instance that is not started (state "new").
function M.new(cls, opts)
  local self = setmetatable({
    provider = cls.provider_name,
    sandbox_id = nil,
    options = opts or {},
    _state = "new",
  }, cls)
  if cls._init then cls._init(self, self.options) end
  return self
end

function BaseSandbox:is_running() return self._state == "running" end

BaseSandbox.__tostring = function(self)
  return string.format("Sandbox(%s, id=%s, %s)", tostring(self.provider), tostring(self.sandbox_id), self._state)
end

-- `local sb <close> = glsb.create(...)`: terminate on scope exit, never raise
-- from the close itself (a failure is logged).
BaseSandbox.__close = function(self)
  local ok, err = pcall(self.terminate, self)
  if not ok then log.error("terminate on scope exit failed: " .. tostring(err), { provider = self.provider }) end
end

local function require_running(self, what)
  if self._state ~= "running" then
    local why = self._state == "terminated" and "has been terminated" or "has not been started"
    errors.raise(errors.SandboxNotInitializedError, Stage.NOT_INITIALIZED,
      string.format("%s: the sandbox %s", what, why))
  end
end

local function policy(cls_policy, defaults, override)
  local p = {}
  for k, v in pairs(defaults) do p[k] = v end
  for k, v in pairs(cls_policy or {}) do p[k] = v end
  if override == false then p.attempts = 1
  elseif type(override) == "table" then for k, v in pairs(override) do p[k] = v end end
  return p
end

local function hook_missing(self, hook, stage)
  return errors.new(errors.CodeInterpreterError, stage or Stage.EXECUTE,
    string.format("provider '%s' does not implement %s", tostring(self.provider), hook))
end

-- Terminate with retries; returns true or false, last error. Does not touch
-- the state on failure (the handle stays so the caller can retry).
local function teardown(self, timeout, override)
  if type(self._terminate) ~= "function" then
    return false, hook_missing(self, "_terminate", Stage.TERMINATE)
  end
  local p = policy(self.terminate_retry, constants.TERMINATE_RETRY, override)
  p.retryable = function(err) return errors.classify(err) ~= false end
  local ok, err = pcall(retry.call, self._terminate, p, self, { timeout = timeout })
  if ok then
    self._state = "terminated"
    self.sandbox_id = nil
    return true
  end
  return false, err
end

-- Best-effort teardown for failure paths (failed start attempt, failed
-- install, cancellation): shielded from cancellation, never raises.
local function teardown_quietly(self, why)
  if self.sandbox_id == nil then
    if self._state ~= "running" then return true end
  end
  local id = self.sandbox_id
  local ok, done, err = pcall(loop().shield, teardown, self, constants.DEFAULT_TERMINATE_TIMEOUT)
  if not ok then done, err = false, done end
  if not done then
    log.error("could not tear down sandbox after " .. why .. "; it may still be running: " .. tostring(err),
      { provider = self.provider, sandbox_id = id })
  end
  return done
end
M.teardown_quietly = teardown_quietly

-- Runs fn(self, ...) in a loop task. If the calling task is cancelled while
-- fn runs, the sandbox is terminated (shielded) and the cancellation re-raised.
local function guarded(self, fn, ...)
  return loop().run(function(...)
    local res = table.pack(pcall(fn, self, ...))
    if res[1] then return table.unpack(res, 2, res.n) end
    local err = res[2]
    if retry.is_cancellation(err) then
      teardown_quietly(self, "cancellation")
    end
    error(err, 0)
  end, ...)
end
M.guarded = guarded

-- Tracing's choke point (glsb.trace): fn(...) inside a span named `name` when tracing is on; one field
-- read when it is off. traced_op wraps a public operation's guarded body.
local function traced(name, self, attributes, fn, ...)
  if trace_seam.on then return trace_seam.operation(name, self, attributes, fn, ...) end
  return fn(...)
end

local function traced_op(name, self, fn, ...)
  if trace_seam.on then return trace_seam.operation(name, self, nil, guarded, self, fn, ...) end
  return guarded(self, fn, ...)
end

---------------------------------------------------------------------------
-- create
---------------------------------------------------------------------------

local function start_attempt(self, sopts)
  local ok, err = pcall(self._start, self, sopts)
  if ok then return end
  if retry.is_cancellation(err) then error(err, 0) end
  -- a half-created sandbox must not leak into the next attempt
  if self.sandbox_id ~= nil then
    teardown_quietly(self, "failed start")
    self.sandbox_id = nil
    self._state = "new"
  end
  error(errors.wrap(errors.SandboxStartError, Stage.CREATE, err), 0)
end

local function do_create(self, sopts, retry_override)
  local p = policy(self.create_retry, constants.CREATE_RETRY, retry_override)
  p.retryable = function(err) return errors.is_transient(err) end
  p.on_retry = p.on_retry or function(err, attempt, delay)
    log.info(string.format("create attempt %d failed (transient), retrying in %.2fs: %s", attempt, delay,
      tostring(err)), { provider = self.provider })
  end
  local attempt = 0
  retry.call(function(...)
    attempt = attempt + 1
    return traced("glsb.sandbox.create.attempt", self, trace_seam.on and { ["glsb.retry.attempt"] = attempt },
      start_attempt, ...)
  end, p, self, sopts)
  self._state = "running"
  self:_after_start(sopts)
  return self
end

-- Hook run once the sandbox is up, before create returns (the
-- CodeInterpreterSandbox installs additional_packages here).
function BaseSandbox._after_start(_self, _sopts) end

-- create(cls, opts) -> a running sandbox, or raises SandboxStartError.
function M.create(cls, opts)
  opts = check_opts(opts, "create", 3)
  local sopts = {}
  for k, v in pairs(opts) do sopts[k] = v end
  sopts.timeout = M.resolve_timeout(opts.timeout, cls.default_sandbox_timeout, "create: opts.timeout", 3)
  if opts.template ~= nil and type(opts.template) ~= "string" and type(opts.template) ~= "table" then
    error("create: opts.template must be a string (id/name) or a template ref table", 3)
  end
  if cls._prepare_create then cls._prepare_create(sopts, 3) end
  local self = M.new(cls, sopts)
  self.timeout = sopts.timeout
  return traced_op("glsb.sandbox.create", self, do_create, sopts, opts.retry)
end

---------------------------------------------------------------------------
-- Public methods of every sandbox
---------------------------------------------------------------------------


local function run_hook(self, hook, arg, hopts, started)
  local fn = self[hook]
  local result
  if type(fn) ~= "function" then
    -- nothing was sent anywhere: the outcome is known
    result = ExecutionResult.new { status = Status.ERROR, error = tostring(hook_missing(self, hook)),
      failure = { exception_type = "NotImplemented", retry_safe = true } }
  else
    local ok, r = pcall(fn, self, arg, hopts)
    result = ok and M.normalize_result(r) or M.result_from_failure(r)
  end
  if result.duration_ms == nil then result.duration_ms = (now() - started) * 1000 end
  return result
end

local function upload_files(self, files, upload_dir, timeout)
  if type(self._upload) ~= "function" then
    error(hook_missing(self, "_upload", Stage.UPLOAD), 0)
  end
  local ok, err = pcall(self._upload, self, files, { upload_dir = upload_dir, timeout = timeout })
  if ok then return end
  if retry.is_cancellation(err) then error(err, 0) end
  error(errors.wrap(errors.SandboxExecutionError, Stage.UPLOAD, err), 0)
end

-- Files are uploaded before the run; when the upload fails the code provably
-- never ran, so the result is ERROR with failure.retry_safe = true.
local function with_files(self, files, upload_dir, started)
  if #files == 0 then return nil end
  local ok, err = pcall(traced, "glsb.sandbox.upload", self, nil, upload_files, self, files, upload_dir,
    constants.DEFAULT_UPLOAD_TIMEOUT)
  if ok then return nil end
  if retry.is_cancellation(err) then error(err, 0) end
  return ExecutionResult.new {
    status = Status.ERROR, error = "upload failed: " .. tostring(err),
    duration_ms = (now() - started) * 1000,
    failure = { exception_type = errors.is_error(err) and err.class or "SandboxExecutionError", retry_safe = true },
  }
end

-- The body of execute_code / execute_command: upload the files, then run the hook.
local function execution_body(self, what, hook, payload, hopts, files, upload_dir)
  require_running(self, what)
  if trace_seam.on then hopts.env = trace_seam.sandbox_env(hopts.env, hopts.trace_into_sandbox) end
  local started = now()
  local failed = with_files(self, files, upload_dir, started)
  if failed then return failed end
  return run_hook(self, hook, payload, hopts, started)
end

-- sb:execute_command(command, opts) -> ExecutionResult. Never raises for
-- what the command did. opts: timeout (nil = 30 s, <= 0 = none), env, cwd,
-- on_stdout, on_stderr, files, upload_dir, trace_into_sandbox (TRACEPARENT in
-- env; default: glsb.trace.configure's).
function BaseSandbox:execute_command(command, opts)
  if type(command) ~= "string" then error("execute_command: command must be a string", 2) end
  opts = check_opts(opts, "execute_command", 2)
  local hopts = {
    timeout = M.resolve_timeout(opts.timeout, self.default_command_timeout, "execute_command: opts.timeout", 2),
    env = check_env(opts.env, "execute_command", 2),
    cwd = check_field(opts, "cwd", "string", "execute_command", 2),
    on_stdout = check_field(opts, "on_stdout", "function", "execute_command", 2),
    on_stderr = check_field(opts, "on_stderr", "function", "execute_command", 2),
    trace_into_sandbox = check_field(opts, "trace_into_sandbox", "boolean", "execute_command", 2),
  }
  local files, upload_dir = M.normalize_files(opts.files, opts.upload_dir, 2)
  return traced_op("glsb.sandbox.execute_command", self, execution_body, "execute_command", "_run_command", command,
    hopts, files, upload_dir)
end

local function download_body(self, path, timeout)
  require_running(self, "download_file")
  if type(self._download) ~= "function" then
    log.warn("download_file: provider does not implement downloads", { provider = self.provider })
    return nil
  end
  local ok, data = pcall(self._download, self, path, { timeout = timeout })
  if not ok then
    if retry.is_cancellation(data) then error(data, 0) end
    log.warn("download_file failed: " .. errors.describe(data), { provider = self.provider, path = path })
    return nil
  end
  if type(data) ~= "string" then return nil end
  return data
end

-- sb:download_file(path, opts) -> string, or nil on any failure of the
-- download (timeouts too; the reason goes to glsb.log). Raises only for misuse
-- (bad arguments, sandbox not running) and re-raises a cancellation.
function BaseSandbox:download_file(path, opts)
  if type(path) ~= "string" or path == "" then error("download_file: path must be a non-empty string", 2) end
  opts = check_opts(opts, "download_file", 2)
  local timeout = M.resolve_timeout(opts.timeout, constants.DEFAULT_DOWNLOAD_TIMEOUT, "download_file: opts.timeout", 2)
  return traced_op("glsb.sandbox.download", self, download_body, path, timeout)
end

local function set_timeout_body(self, seconds)
  if self._state ~= "running" then
    log.warn("set_timeout: the sandbox is not running", { provider = self.provider })
    return false
  end
  if type(self._set_timeout) ~= "function" then return true end -- unsupported: a no-op
  local ok, err = pcall(self._set_timeout, self, seconds)
  if ok then
    self.timeout = seconds
    return true
  end
  if retry.is_cancellation(err) then error(err, 0) end
  log.warn("set_timeout failed: " .. errors.describe(err), { provider = self.provider, sandbox_id = self.sandbox_id })
  return false
end

-- sb:set_timeout(seconds) -> true when applied (or unsupported: a no-op),
-- false when it failed. Never raises (bad input is logged), except that a
-- cancellation of the calling task is re-raised.
function BaseSandbox:set_timeout(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds <= 0 then
    log.warn("set_timeout: seconds must be a number > 0, got " .. tostring(seconds), { provider = self.provider })
    return false
  end
  return traced_op("glsb.sandbox.set_timeout", self, set_timeout_body, seconds)
end

local function terminate_body(self, timeout)
  if self._state ~= "running" and self.sandbox_id == nil then return end -- never started / already gone
  local done, err = teardown(self, timeout)
  if not done then
    if retry.is_cancellation(err) then error(err, 0) end
    errors.raise(errors.SandboxTerminateError, Stage.TERMINATE,
      "terminate failed after every retry; the sandbox may still be running (call terminate again): "
        .. errors.describe(err), err)
  end
end

-- sb:terminate(opts): opts.timeout per attempt (must be > 0; default 10 s).
-- A no-op when the sandbox was never started or is already terminated. On
-- failure after every retry raises SandboxTerminateError and keeps sandbox_id.
function BaseSandbox:terminate(opts)
  opts = check_opts(opts, "terminate", 2)
  local timeout = opts.timeout
  if timeout == nil then
    timeout = constants.DEFAULT_TERMINATE_TIMEOUT
  elseif type(timeout) ~= "number" or timeout ~= timeout or timeout <= 0 then
    error("terminate: opts.timeout must be a number of seconds > 0, got " .. tostring(timeout), 2)
  end
  return traced_op("glsb.sandbox.terminate", self, terminate_body, timeout)
end

---------------------------------------------------------------------------
-- CodeInterpreterSandbox
---------------------------------------------------------------------------

local CodeInterpreterSandbox = BaseSandbox:extend("base")
CodeInterpreterSandbox.languages = { python = true }
CodeInterpreterSandbox.default_code_timeout = constants.DEFAULT_CODE_TIMEOUT
M.CodeInterpreterSandbox = CodeInterpreterSandbox

-- Validates the create opts that concern the interpreter.
function CodeInterpreterSandbox._prepare_create(sopts, level)
  level = level + 1
  local language = sopts.language or constants.DEFAULT_LANGUAGE
  if type(language) ~= "string" then error("create: opts.language must be a string", level) end
  sopts.language = language
  sopts.additional_packages = packages.validate(sopts.additional_packages, level)
end

local function check_language(self, language)
  local langs = self.languages
  if langs and not langs[language] then
    local names = {}
    for k in pairs(langs) do names[#names + 1] = k end
    table.sort(names)
    errors.raise(errors.SandboxStartError, Stage.CREATE,
      string.format("provider '%s' does not support language '%s' (supported: %s)",
        tostring(self.provider), language, table.concat(names, ", ")))
  end
end

-- language is set before _start runs so hooks can read self.language.
function CodeInterpreterSandbox:_init(opts)
  self.language = opts.language or constants.DEFAULT_LANGUAGE
  check_language(self, self.language)
end

-- Default package install: pip through the code channel (sys.executable).
function CodeInterpreterSandbox:_install_packages(pkgs, opts)
  return self:_run_code(packages.python_install_code(pkgs), { timeout = opts.timeout, language = "python" })
end

function CodeInterpreterSandbox:_after_start(sopts)
  local pkgs = sopts.additional_packages
  if not pkgs or #pkgs == 0 then return end
  if self.language ~= models.Language.PYTHON then
    log.warn(string.format("additional_packages skipped: language '%s' is not python", self.language),
      { provider = self.provider, packages = table.concat(pkgs, " ") })
    return
  end
  local started = now()
  local timeout = M.resolve_timeout(sopts.package_install_timeout, constants.DEFAULT_PACKAGE_INSTALL_TIMEOUT,
    "create: opts.package_install_timeout")
  local ok, r = pcall(traced, "glsb.sandbox.package_install", self, nil, self._install_packages, self, pkgs,
    { timeout = timeout })
  local result
  if ok then
    result = M.normalize_result(r)
  else
    if retry.is_cancellation(r) then error(r, 0) end
    result = M.result_from_failure(r)
  end
  if result.duration_ms == nil then result.duration_ms = (now() - started) * 1000 end
  if result.status ~= Status.SUCCESS then
    teardown_quietly(self, "failed package install")
    if self._state ~= "terminated" then self._state = "new" end
    local detail = result.error or ""
    if result.stderr ~= "" then detail = detail .. (detail ~= "" and ": " or "") .. result.stderr:sub(-500) end
    errors.raise(errors.SandboxStartError, Stage.PACKAGE_INSTALL,
      string.format("installing additional_packages failed (%s)%s", result.status,
        detail ~= "" and (": " .. detail) or ""), result)
  end
end

-- sb:execute_code(code, opts) -> ExecutionResult. Never raises for what the
-- code did. opts: timeout (nil = provider default, <= 0 = none), files,
-- upload_dir (default "/files"), on_stdout, on_stderr, env, trace_into_sandbox
-- (TRACEPARENT in env; default: glsb.trace.configure's).
function CodeInterpreterSandbox:execute_code(code, opts)
  if type(code) ~= "string" then error("execute_code: code must be a string", 2) end
  opts = check_opts(opts, "execute_code", 2)
  local hopts = {
    timeout = M.resolve_timeout(opts.timeout, self.default_code_timeout, "execute_code: opts.timeout", 2),
    env = check_env(opts.env, "execute_code", 2),
    language = self.language,
    on_stdout = check_field(opts, "on_stdout", "function", "execute_code", 2),
    on_stderr = check_field(opts, "on_stderr", "function", "execute_code", 2),
    trace_into_sandbox = check_field(opts, "trace_into_sandbox", "boolean", "execute_code", 2),
  }
  local files, upload_dir = M.normalize_files(opts.files, opts.upload_dir, 2)
  return traced_op("glsb.sandbox.execute_code", self, execution_body, "execute_code", "_run_code", code, hopts,
    files, upload_dir)
end

return M
