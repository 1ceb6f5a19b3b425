-- glsb.sandbox: the contract classes BaseSandbox and CodeInterpreterSandbox.
--
-- The base classes own every rule of docs/contract.md that is not about a wire protocol: argument checks,
-- "not initialized" checks, timeout resolution, files normalization, creation retries,
-- additional_packages, terminate retries that keep the handle, download_file's nil-on-failure,
-- set_timeout's never-raise, classification of hook failures into ExecutionResult statuses, stages on
-- every error, and terminate-on-cancel. A provider extends a class and defines hooks:
--
--   local sandbox = require "glsb.sandbox"
--   local Sandbox = sandbox.CodeInterpreterSandbox:extend("myprov", { default_code_timeout = 300 })
--   function Sandbox:_start(opts) ... end          -- and _terminate, _run_code, ...
--
-- The hooks, which are required and what each gets and returns: M.HOOKS below, and its long version,
-- the table "Hooks" of lua/glsb/PROVIDERS.md (a spec keeps the two equal). A class that lacks a
-- required hook is refused when its provider is loaded (glsb.registry) and before its first instance.
-- Hooks run inside a glsb.loop task, so they may block on glsb.http / process; what a hook may call
-- besides the kit: M.guarded (run a body that terminates the sandbox on cancel), M.require_running.
-- A hook that pcalls must re-raise a cancellation (glsb.loop.is_cancelled): the base terminates the
-- sandbox when the calling task is cancelled.

local errors = require "glsb.errors"
local models = require "glsb.models"
local constants = require "glsb.constants"
local retry = require "glsb.retry"
-- glsb.packages: loaded by the first create that asks for additional_packages (issue 26)
local function packages() return require "glsb.packages" end
local log = require "glsb.log"
local output = require "glsb.output"
local results = require "glsb.results"
local outcome = require "glsb.outcome"
local options = require "glsb.options"
local time = require "glsb.time"
local trace_seam = require "glsb.trace.seam"
-- the environment asks for spans: glsb.trace registers itself with the seam (which cannot load it)
if trace_seam.on then require "glsb.trace" end

local Stage = models.Stage
local Status = models.ExecutionStatus
local ExecutionResult = models.ExecutionResult

local M = {}

local function loop() return require "glsb.loop" end

---------------------------------------------------------------------------
-- Small helpers (exported for providers and tests)
---------------------------------------------------------------------------

-- resolve_timeout(value, default, what) -> seconds (> 0) or nil (no deadline): glsb.options.timeout's
-- rule (nil = the default; <= 0 = unbounded) for a value not declared in a schema; NaN and non-numbers are
-- argument errors.
function M.resolve_timeout(value, default, what)
  if value ~= nil and (type(value) ~= "number" or value ~= value) then
    options.arg_error("%s must be a number of seconds, got %s", what or "timeout",
      value ~= value and "NaN" or type(value))
  end
  return options.timeout(value, default)
end

-- deadline(opts) -> the deadline (glsb.loop's clock; nil: none) a hook's sub-steps draw from: opts.deadline,
-- which the base computed once at the top of the public call (execute_code, execute_command, start_command,
-- download_file, every terminate attempt), or, for a hook called with a relative timeout only (by another
-- hook, or a provider's own helper), one made from opts.timeout now.
function M.deadline(opts)
  if opts.deadline ~= nil then return opts.deadline end
  return loop().deadline(opts.timeout)
end

local function check_env(env, name)
  if env == nil then return nil end
  for k in pairs(env) do
    if not k:match("^[%a_][%w_]*$") then options.arg_error("%s: option 'env' has a bad variable name: %q", name, k) end
  end
  return env
end

-- normalize_files(files, upload_dir) -> array of {filename, data, path}.
function M.normalize_files(files, upload_dir)
  upload_dir = upload_dir or constants.DEFAULT_UPLOAD_DIR
  if type(upload_dir) ~= "string" or upload_dir:sub(1, 1) ~= "/" then
    options.arg_error("upload_dir must be an absolute path, got %s", tostring(upload_dir))
  end
  for part in upload_dir:gmatch("[^/]+") do
    if part == ".." then options.arg_error("upload_dir must not contain '..'") end
  end
  upload_dir = upload_dir:gsub("/+$", "")
  if files == nil then return {}, upload_dir end
  if type(files) ~= "table" then options.arg_error("files must be an array of SandboxFile") end
  local out = {}
  for i = 1, #files do
    local ok, f = pcall(models.SandboxFile.normalize, files[i])
    if not ok then options.arg_error("files[%d]: %s", i, tostring(f):gsub("^[^:]*:%d+: ", "")) end
    out[i] = { filename = f.filename, data = f.data, path = upload_dir .. "/" .. f.filename }
  end
  return out, upload_dir
end

---------------------------------------------------------------------------
-- Declared options (glsb.options): every public method checks its options against these, merged with
-- what each class down the chain declares in its `options` field (PROVIDERS.md, "Options").
---------------------------------------------------------------------------

-- What execute_code and execute_command both take.
local RUN_OPTIONS = {
  env = { "string_map", "environment variables of this run" },
  on_stdout = { "function", "called once per line of stdout, while it runs" },
  on_stderr = { "function", "called once per line of stderr, while it runs" },
  files = { "table", "`SandboxFile`s uploaded first, to `upload_dir/<filename>`" },
  upload_dir = { "string", "absolute directory for `files`", default = "/files" },
  trace_into_sandbox = { "boolean", "pass the current span as `TRACEPARENT` in env",
    default = "glsb.trace.configure's" },
}
M.RUN_OPTIONS = RUN_OPTIONS

local COMMON = {
  provider = {},
  create = {
    timeout = { "seconds", "session lease; `<= 0`: no lease where the provider allows it", default = "300" },
    template = { "string|table", "template id or name, or a ref from `builder:ensure`" },
    env = { "string_map", "environment variables of the whole sandbox" },
    metadata = { "string_map", "labels kept with the sandbox: `sb.metadata`, filters of `glsb.list`" },
    retry = { "boolean|table", "`false`: one attempt; a table: retry policy fields over the default" },
    keep_alive = { "boolean", "not terminated when the `glsb-lua` script ends", default = "false" },
    on_timeout = { "string", "`kill`, or `pause`: the lease's end pauses the sandbox (where the provider can)",
      values = { "kill", "pause" }, default = "kill" },
    on_progress = { "function", "called with `{stage, message}` as create goes (each attempt, a retry, "
      .. "the package install, ready)" },
  },
  connect = {
    timeout = { "seconds", "a new lease from now; nil: unchanged" },
    keep_alive = { "boolean", "not terminated when the `glsb-lua` script ends", default = "false" },
    language = { "string", "the sandbox's language, when the ref does not say", default = "python" },
  },
  list = {
    metadata = { "string_map", "only sandboxes with all of these labels" },
    state = { "string|string_list", "`running`, `paused`, or a list", default = "both" },
    limit = { "count", "at most this many refs" },
  },
  execute_command = options.merge(RUN_OPTIONS, {
    timeout = { "seconds", "`<= 0`: none", default = "30" },
    cwd = { "string", "working directory" },
  }),
  download_file = { timeout = { "seconds", "`<= 0`: none", default = "60" } },
  start_command = {
    timeout = { "seconds", "the command is killed after this; `<= 0` or nil: runs until it ends or `kill()`" },
    env = { "string_map", "environment variables of this command" },
    cwd = { "string", "working directory" },
    on_stdout = { "function", "called once per line of stdout as it arrives" },
    on_stderr = { "function", "called once per line of stderr as it arrives" },
  },
  terminate = { timeout = { "seconds", "seconds per attempt; `<= 0`: none", default = "10" } },
  kill = { timeout = { "seconds", "seconds for the sandbox to end; `<= 0`: none", default = "10" } },
  snapshot = { name = { "string", "a name for the snapshot, where the provider keeps names" } },
  ref = { secrets = { "boolean", "also the tokens that reach the sandbox without the API key", default = "false" } },
}

local PROVIDER_LEVEL = { create = true, connect = true, list = true, kill = true }

-- schema(cls, what) -> the merged schema of `what` ("create", "execute_code", ...) for a class: what
-- it and its ancestors declare in `options[what]`, plus `options.provider` for create, connect, list.
function M.schema(cls, what)
  return options.collect(cls, what, PROVIDER_LEVEL[what] and "provider" or nil)
end

local function check(cls, opts, what)
  return options.check(opts, M.schema(cls, what), what)
end

local function now() return loop().now() end


-- normalize_result(r) -> ExecutionResult from what a hook returned, with the output cap applied (a
-- backstop for a hook that returned its output whole: glsb.output.CAP per stream, note and flag; and
-- glsb.results.CAP over its results, unless a glsb.results collector made them).
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
  -- what reaches the caller has the documented types whatever a provider's far side sent (a sandbox that
  -- forges its answer, a server's table where a string was): a bad field makes the call's outcome unknown
  for _, field in ipairs({ "stdout", "stderr", "text", "error" }) do
    local v = res[field]
    if v ~= nil and type(v) ~= "string" then
      return ExecutionResult.new { status = Status.UNKNOWN, failure = { exception_type = models.FailureType.PROTOCOL,
        retry_safe = false }, error = string.format("the provider's result has %s for %s, not a string", type(v),
          field) }
    end
  end
  -- an execution's error quotes what a server said (which may quote the request): no secret glsb knows
  if res.error then res.error = require("glsb.secrets").scrub(res.error) end
  for _, name in ipairs({ "stdout", "stderr" }) do
    local flag = name .. "_truncated"
    if res[flag] ~= true then
      local text, cut = output.cap_text(res[name])
      res[name], res[flag] = text, cut
    end
  end
  if not results.is_capped(res.results) then
    local list, cut = results.cap(res.results)
    res.results, res.results_truncated = list, cut or res.results_truncated
  end
  return res
end

---------------------------------------------------------------------------
-- Open sandboxes: what a script leaves running is terminated when it ends (glsb.close_all, called by
-- glsb-lua at the end of a script, normally or by an error), unless created with keep_alive = true.
---------------------------------------------------------------------------

local open_sandboxes = {}   -- sandbox -> true while it may be running

function M.track(sb)
  if not rawget(sb, "keep_alive") then open_sandboxes[sb] = true end
end

function M.forget(sb) open_sandboxes[sb] = nil end

-- close_all() -> how many sandboxes it closed. Each one's <close> (terminate, or its close handler),
-- errors logged, never raised.
function M.close_all()
  local list = {}
  for sb in pairs(open_sandboxes) do list[#list + 1] = sb end
  local n = 0
  for _, sb in ipairs(list) do
    open_sandboxes[sb] = nil
    if sb._state == "running" or sb.sandbox_id ~= nil then
      n = n + 1
      local close = getmetatable(sb).__close
      local ok, err = pcall(close, sb)
      if not ok then log.error("closing a sandbox at exit failed: " .. tostring(err), { provider = sb.provider }) end
    end
  end
  return n
end

---------------------------------------------------------------------------
-- BaseSandbox
---------------------------------------------------------------------------

local BaseSandbox = {}
BaseSandbox.__index = BaseSandbox
BaseSandbox.options = COMMON
BaseSandbox.provider_name = "base"
BaseSandbox.default_command_timeout = constants.DEFAULT_COMMAND_TIMEOUT
BaseSandbox.default_sandbox_timeout = constants.DEFAULT_SANDBOX_TIMEOUT
-- A provider's class sets id_grammar (glsb.answer.grammar) to the grammar of its sandbox ids: the id of a ref
-- given to connect or kill is checked against it before anything is sent. nil: glsb.answer.ANY.
BaseSandbox.id_grammar = nil
M.BaseSandbox = BaseSandbox

local METAMETHODS = { "__tostring", "__close", "__name" }

-- The hooks a provider's class may define, in the order of the table "Hooks" of lua/glsb/PROVIDERS.md,
-- which says what each gets and returns (spec/unit/hooks_spec.lua keeps the two equal). required: the
-- base class whose every provider class must define it.
M.HOOKS = {
  { "_start", required = "BaseSandbox" }, { "_terminate", required = "BaseSandbox" },
  { "_run_code", required = "CodeInterpreterSandbox" }, { "_run_command" }, { "_upload" }, { "_download" },
  { "_set_timeout" }, { "_install_packages" }, { "_init" }, { "_files_write" }, { "_files_read" },
  { "_files_list" }, { "_files_exists" }, { "_files_make_dir" }, { "_files_remove" }, { "_start_command" },
  { "_get_host" }, { "_info" }, { "_alive" }, { "_attach" }, { "_ref" }, { "_list" }, { "_exec_argv" },
  { "_workspace_helper" }, { "_find_created" }, { "_pause" }, { "_snapshot" }, { "_context_create" },
  { "_context_close" }, { "_kill" },
}

-- check_hooks(cls) -> cls, or raises naming the first required hook the class lacks. The registry checks
-- a provider's class when it loads the module (its hooks are defined by then: after extend returned),
-- and new() before a class's first instance, so a missing hook shows before anything starts.
function M.check_hooks(cls)
  if rawget(cls, "_hooks_checked") then return cls end
  local bases, c = {}, cls
  while type(c) == "table" do
    if c == M.BaseSandbox then bases.BaseSandbox = true end
    if c == M.CodeInterpreterSandbox then bases.CodeInterpreterSandbox = true end
    c = rawget(c, "super")
  end
  -- not a class of this module (a registry entry of an embedder), or one of the two bases themselves
  if not bases.BaseSandbox or cls == M.BaseSandbox or cls == M.CodeInterpreterSandbox then return cls end
  for _, h in ipairs(M.HOOKS) do
    if h.required and bases[h.required] and type(cls[h[1]]) ~= "function" then
      error(string.format("provider '%s': its class does not define %s, a required hook of every %s "
        .. "(lua/glsb/PROVIDERS.md, \"Hooks\")", tostring(cls.provider_name), h[1], h.required), 0)
    end
  end
  rawset(cls, "_hooks_checked", true)
  return cls
end

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
  cls.connect = function(ref, opts) return M.connect(cls, ref, opts) end
  cls.list = function(opts) return M.list(cls, opts) end
  cls.kill = function(ref, opts) return M.kill(cls, ref, opts) end
  cls.new = function(opts) return M.new(cls, opts) end
  return setmetatable(cls, { __index = parent })
end

-- new(cls, opts) -> an instance that is not started (state "new").
function M.new(cls, opts)
  M.check_hooks(cls)
  local self = setmetatable({
    provider = cls.provider_name,
    sandbox_id = nil,
    options = opts or {},
    _state = "new",
  }, cls)
  self.files = require("glsb.files").new(self, M.guarded, M.require_running)
  if cls._init then cls._init(self, self.options) end
  return self
end

-- The lease: the base keeps when it ends on the loop clock (create, set_timeout and connect set it; nil =
-- unknown or unbounded), so that after it ends every provider behaves the same: is_running() is false and
-- every call raises SandboxNotInitializedError saying the lease expired.
local function lease_over(self)
  local ends = self._lease_ends
  return ends ~= nil and now() >= ends
end
-- lease_over(sb) -> true once the lease has passed on the base's clock (a provider's own lease timer,
-- which fires at or after it, need keep no flag of its own)
M.lease_over = lease_over

function BaseSandbox:is_running()
  return self._state == "running" and not lease_over(self)
end

BaseSandbox.__tostring = function(self)
  return string.format("Sandbox(%s, id=%s, %s)", tostring(self.provider), tostring(self.sandbox_id), self._state)
end

-- `local sb <close> = glsb.create(...)`: terminate on scope exit, never raise from the close itself (a
-- failure is logged). A pool that lends sandboxes installs a close handler (sb:_set_close_handler(fn)):
-- then <close> and the end-of-script clean-up call fn(sb) instead (e.g. give it back to the pool).
BaseSandbox.__close = function(self)
  local handler = rawget(self, "_close_handler")
  local ok, err
  if handler then ok, err = pcall(handler, self) else ok, err = pcall(self.terminate, self) end
  if not ok then log.error("terminate on scope exit failed: " .. tostring(err), { provider = self.provider }) end
end

-- sb:_set_close_handler(fn | nil) -> the previous handler. For pools and other lease wrappers.
function BaseSandbox:_set_close_handler(fn)
  if fn ~= nil and type(fn) ~= "function" then error("_set_close_handler: function or nil expected", 2) end
  local prev = rawget(self, "_close_handler")
  rawset(self, "_close_handler", fn)
  return prev
end

local ENDED = {
  new = "has not been started",
  terminated = "has been terminated",
  expired = "has ended: its lease expired (the create/set_timeout timeout passed); create a new one, or renew "
    .. "the lease with set_timeout before it ends",
  gone = "has ended outside this handle (killed, or its lease ended elsewhere); create a new one",
  paused = "is paused: glsb.connect(provider, ref) resumes it",
}

local function not_running(self, what)
  return errors.new(errors.SandboxNotInitializedError, Stage.NOT_INITIALIZED,
    string.format("%s: the sandbox %s", what, ENDED[self._state] or ENDED.new))
end

local mark_ended -- defined after teardown

local function require_running(self, what)
  if self._state == "running" and lease_over(self) then mark_ended(self, "expired") end
  if self._state ~= "running" then error(not_running(self, what), 0) end
end
M.require_running = require_running

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
  local p = policy(self.terminate_retry, constants.TERMINATE_RETRY, override)
  p.retryable = function(err) return errors.classify(err) ~= false end
  p.on_retry = p.on_retry or function(err, attempt, delay)
    log.warn(string.format("terminate attempt %d failed, retrying in %.2fs: %s", attempt, delay, tostring(err)),
      { provider = self.provider, sandbox_id = self.sandbox_id, stage = Stage.TERMINATE })
  end
  local ok, err = pcall(retry.call, function()
    -- each attempt gets its own budget of `timeout` seconds (nil: none)
    return self:_terminate({ timeout = timeout, deadline = loop().deadline(timeout) })
  end, p)
  if ok then
    -- a provider's own lease timer terminating at the lease end is the lease expiring, not a terminate
    if self._state ~= "expired" and self._state ~= "gone" then
      self._state = lease_over(self) and "expired" or "terminated"
    end
    self.sandbox_id = nil
    M.forget(self)
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
      { provider = self.provider, sandbox_id = id, stage = Stage.TERMINATE })
  end
  return done
end
M.teardown_quietly = teardown_quietly

-- mark_ended(self, state): the sandbox ended without a terminate of ours ("expired": the lease passed;
-- "gone": it vanished otherwise). Whatever is left is released quietly (a provider's local resources;
-- a remote "already gone" is a success), one attempt; later calls raise SandboxNotInitializedError.
mark_ended = function(self, state)
  if self._state ~= "running" then return end
  -- created with on_timeout = "pause": the lease's end paused it, the provider keeps it
  if state == "expired" and self.on_timeout == "pause" then
    self._state = "paused"
    M.forget(self)
    return
  end
  self._state = state
  if self.sandbox_id ~= nil then
    local id = self.sandbox_id
    local ok, done, err = pcall(loop().shield, teardown, self, 5, false)
    if not ok then done, err = false, done end
    if not done then
      log.info("releasing an ended sandbox failed: " .. errors.describe(err),
        { provider = self.provider, sandbox_id = id })
    end
  end
  M.forget(self)
end

-- A hook's result that says the sandbox is gone (glsb.outcome.GONE) ends the handle: "expired" when the
-- lease clock says so (or within a second of it: the provider's clock started a little earlier), else
-- "gone". The result itself is returned as it is (TIMEOUT: the sandbox died mid-request).
local function note_gone(self, result)
  if result.failure and result.failure.exception_type == outcome.GONE and self._state == "running" then
    local ends = self._lease_ends
    mark_ended(self, (ends and now() >= ends - 1) and "expired" or "gone")
  end
  return result
end

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

-- caught(pcall(hook, ...)) -> what pcall returned, except that a cancellation of the calling task is
-- re-raised (guarded then terminates the sandbox): how the base calls every hook whose failure it handles.
local function caught(ok, ...)
  if not ok and retry.is_cancellation((...)) then error((...), 0) end
  return ok, ...
end

-- wrapped(class, stage, pcall(hook, ...)) -> the hook's results, or raises its failure as a glsb error of
-- that class and stage (errors.wrap: one of that class already is kept as it is); a cancellation is
-- re-raised as it is.
local function wrapped(class, stage, ok, ...)
  if ok then return ... end
  caught(ok, ...)
  error(errors.wrap(class, stage, (...)), 0)
end

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
  local ok, err = caught(pcall(self._start, self, sopts))
  if ok then return end
  -- a half-created sandbox must not leak into the next attempt
  if self.sandbox_id ~= nil then
    teardown_quietly(self, "failed start")
    self.sandbox_id = nil
    self._state = "new"
  end
  error(errors.wrap(errors.SandboxStartError, Stage.CREATE, err), 0)
end

-- send_create(self, send) -> the create answer, for a provider's _start whose create request may be
-- delivered and its answer lost. send(token) sends the create with `token` (fresh, glsb.ids) in the
-- sandbox's metadata and returns the glsb.http result. When that result is a transport failure after
-- delivery (not glsb.outcome.unsent), the sandbox may exist: the hook self:_find_created(token) looks
-- for the sandbox carrying the token and returns an answer shaped like send's, or nil. What it finds is
-- adopted rather than leaked, and a retry of create does not make a second one. A failure of the
-- lookup itself is logged; the lost answer then stands.
function M.send_create(self, send)
  local token = require("glsb.ids").hex(32)
  local res = send(token)
  local tf = type(res) == "table" and res.error or nil
  if tf == nil or outcome.unsent(tf) or type(self._find_created) ~= "function" then return res end
  local ok, found = pcall(self._find_created, self, token)
  if not ok then
    if retry.is_cancellation(found) then error(found, 0) end
    log.warn("create: the answer was lost and looking for the sandbox it may have made failed: "
      .. errors.describe(found), { provider = self.provider, stage = Stage.CREATE })
    return res
  end
  if found == nil then return res end
  log.info("create: the answer was lost; adopted the sandbox it created", { provider = self.provider })
  return found
end

-- progress(self, stage, message): tells create's on_progress (if any) what create is doing now; a
-- provider's _start may call it too (say, while it resolves a template). Never raises but a cancellation.
function M.progress(self, stage, message)
  local fn = self._on_progress
  if fn then output.call_back(fn, { stage = stage, message = message }) end
end

local function do_create(self, sopts, retry_override)
  local p = policy(self.create_retry, constants.CREATE_RETRY, retry_override)
  p.retryable = function(err) return errors.is_transient(err) end
  p.on_retry = p.on_retry or function(err, attempt, delay)
    -- a warning: retries show at the default level
    log.warn(string.format("create attempt %d failed (transient), retrying in %.2fs: %s", attempt, delay,
      tostring(err)), { provider = self.provider, stage = Stage.CREATE })
    M.progress(self, Stage.CREATE, string.format("attempt %d failed (transient), retrying in %.1f s", attempt, delay))
  end
  local started = now()
  local attempt = 0
  if sopts.template ~= nil then
    M.progress(self, "template", "template " .. (type(sopts.template) == "table"
      and tostring(sopts.template.template_id or sopts.template.name or "ref") or tostring(sopts.template)))
  end
  retry.call(function(...)
    attempt = attempt + 1
    M.progress(self, Stage.CREATE, "creating a " .. tostring(self.provider) .. " sandbox"
      .. (attempt > 1 and (" (attempt " .. attempt .. ")") or ""))
    return traced("glsb.sandbox.create.attempt", self, trace_seam.on and { ["glsb.retry.attempt"] = attempt },
      start_attempt, ...)
  end, p, self, sopts)
  self._state = "running"
  -- the provider may say what lease it got (E2B: its default when none was asked for)
  local lease = self._lease_remaining or sopts.timeout
  self._lease_remaining = nil
  self._lease_ends = lease and started + lease or nil
  self._started_wall = time.wall()
  M.track(self)
  self:_after_start(sopts)
  M.progress(self, "ready", "sandbox " .. tostring(self.sandbox_id) .. " is ready")
  return self
end

-- Hook run once the sandbox is up, before create returns (the
-- CodeInterpreterSandbox installs additional_packages here).
function BaseSandbox._after_start(_self, _sopts) end

-- create(cls, opts) -> a running sandbox, or raises SandboxStartError.
function M.create(cls, opts)
  opts = check(cls, opts, "create")
  local sopts = {}
  for k, v in pairs(opts) do sopts[k] = v end
  sopts.timeout = M.resolve_timeout(opts.timeout, cls.default_sandbox_timeout, "create: timeout")
  check_env(opts.env, "create")
  if opts.on_timeout == "pause" and not cls.pause_on_timeout then
    options.arg_error("create: provider '%s' cannot pause a sandbox at its timeout (on_timeout = \"pause\")%s",
      tostring(cls.provider_name),
      cls.pause_on_timeout_unsupported and (": " .. cls.pause_on_timeout_unsupported) or "")
  end
  if cls._prepare_create then cls._prepare_create(sopts) end
  local self = M.new(cls, sopts)
  self.timeout = sopts.timeout
  self.on_timeout = opts.on_timeout or "kill"
  self.keep_alive = opts.keep_alive == true
  self._on_progress = opts.on_progress
  if self.metadata == nil then
    self.metadata = {}
    for k, v in pairs(opts.metadata or {}) do self.metadata[k] = tostring(v) end
  end
  return traced_op("glsb.sandbox.create", self, do_create, sopts, opts.retry)
end

---------------------------------------------------------------------------
-- connect, ref, list: handles that outlive a process
---------------------------------------------------------------------------

local function normalize_ref(cls, ref, what)
  what = what or "connect"
  if type(ref) == "string" and ref ~= "" then return { sandbox_id = ref } end
  if type(ref) ~= "table" then
    options.arg_error("%s: expected a sandbox id (string) or a ref table from sb:ref(), got %s", what, type(ref))
  end
  if type(ref.sandbox_id) ~= "string" or ref.sandbox_id == "" then
    options.arg_error("%s: ref.sandbox_id must be a non-empty string", what)
  end
  if ref.provider ~= nil and ref.provider ~= cls.provider_name then
    options.arg_error("%s: the ref is for provider '%s', not '%s'", what, tostring(ref.provider),
      tostring(cls.provider_name))
  end
  -- an id goes into URLs and headers: one outside the provider's grammar of sandbox ids ("..", "a/b", one
  -- with CR LF: a ref from a shared store another process wrote) is refused before anything is sent
  local id = require("glsb.answer").given(cls.id_grammar, ref.sandbox_id, what .. ": ref.sandbox_id")
  local copy = {}
  for k, v in pairs(ref) do copy[k] = v end
  copy.sandbox_id = id
  return copy
end

local function do_connect(self, ref, sopts)
  local started = now()
  wrapped(errors.SandboxStartError, Stage.CONNECT, pcall(self._attach, self, ref, sopts))
  if self.sandbox_id == nil then self.sandbox_id = ref.sandbox_id end
  self._state = "running"
  -- the provider may know when the lease ends (remaining seconds); else a timeout we set now
  local remaining = self._lease_remaining or sopts.timeout
  self._lease_remaining = nil
  self._lease_ends = remaining and started + remaining or nil
  if sopts.timeout then self.timeout = sopts.timeout end
  M.track(self)
  return self
end

-- connect(cls, ref_or_id, opts) -> a running sandbox handle on an existing sandbox, with the same
-- contract as one from create. opts: the provider's options (credentials, endpoints) and timeout (a new
-- lease in seconds; nil leaves the lease as it is), keep_alive. Raises SandboxStartError[connect].
function M.connect(cls, ref, opts)
  ref = normalize_ref(cls, ref)
  opts = check(cls, opts, "connect")
  local sopts = {}
  for k, v in pairs(opts) do sopts[k] = v end
  sopts.timeout = M.resolve_timeout(opts.timeout, nil, "connect: timeout")
  sopts.language = sopts.language or ref.language
  local self = M.new(cls, sopts)
  self.keep_alive = opts.keep_alive == true
  if type(cls._attach) ~= "function" then
    errors.raise(errors.SandboxStartError, Stage.CONNECT, string.format("connect: provider '%s' cannot connect to "
      .. "an existing sandbox%s", tostring(cls.provider_name),
      cls.attach_unsupported and (": " .. cls.attach_unsupported) or ""))
  end
  return traced_op("glsb.sandbox.connect", self, do_connect, ref, sopts)
end

-- kill(cls, ref_or_id, opts) -> true: ends a sandbox named by its id or a ref, without a handle of this
-- process (a leaked one; `glsb kill`). A provider's class hook _kill(cls, ref, opts) does it directly
-- (the local provider: its sandboxes cannot be connected to from another process, but ended); else
-- connect (keep_alive) and terminate. opts: the provider's options, timeout. No such sandbox raises
-- SandboxStartError[connect], a kill that failed SandboxTerminateError[terminate].
function M.kill(cls, ref, opts)
  ref = normalize_ref(cls, ref, "kill")
  opts = check(cls, opts, "kill")
  if type(cls._kill) == "function" then
    return loop().run(function()
      local ok, err = caught(pcall(cls._kill, cls, ref, opts))
      if ok then return true end
      if errors.is(err, errors.SandboxStartError) then error(err, 0) end
      errors.raise(errors.SandboxTerminateError, Stage.TERMINATE, "kill " .. ref.sandbox_id .. ": "
        .. errors.describe(err), err)
    end)
  end
  local copts = {}
  for k, v in pairs(opts) do if k ~= "timeout" then copts[k] = v end end
  copts.keep_alive = true
  M.connect(cls, ref, copts):terminate({ timeout = opts.timeout })
  return true
end

-- sb:ref(opts) -> a plain table (strings and numbers only: it can go through JSON to another process)
-- naming this sandbox: provider, sandbox_id, language, and what the provider needs to reconnect
-- (endpoints, template). No secret is in it unless opts.secrets = true.
function BaseSandbox:ref(opts)
  opts = check(getmetatable(self), opts, "ref")
  if self.sandbox_id == nil then error(not_running(self, "ref"), 0) end
  local r = { provider = self.provider, sandbox_id = self.sandbox_id, language = self.language }
  if type(self._ref) == "function" then
    -- endpoints without their user:password@: a ref is stored and passed around (a pool's store); connect
    -- takes credentials from its options
    local secrets = require "glsb.secrets"
    for k, v in pairs(self:_ref({ secrets = opts.secrets == true }) or {}) do r[k] = secrets.without_userinfo(v) end
  end
  return r
end

---------------------------------------------------------------------------
-- info() and list(): one set of fields on every provider
---------------------------------------------------------------------------

-- What a provider's _info may report and its _list refs may carry, besides sandbox_id: normalised here
-- (times to ISO 8601 UTC whole seconds, a state to lower case), the same names on every provider.
local REPORTED = { "server_state", "template_id", "metadata", "started_at", "ends_at" }
M.INFO_FIELDS = { "provider", "sandbox_id", "state", "server_state", "template_id", "metadata", "language",
  "started_at", "ends_at" }

-- Names providers used before these were one set: read for one release, each with one warning.
local RENAMED = { expires_at = "ends_at", snapshot_id = "template_id", created_at = "started_at" }
local warned = {}

local function deprecated(what, key, instead)
  if warned[what .. key] then return end
  warned[what .. key] = true
  log.warn(string.format("%s.%s is deprecated and goes in the next release: read %s.%s", what, key, what, instead))
end

-- with_aliases(t, provider, what) -> t, whose old names still read: a renamed field, or a provider's
-- extra that used to stand beside the common fields (now under t[provider]).
local function with_aliases(t, provider, what)
  return setmetatable(t, { __index = function(tt, k)
    local to = RENAMED[k]
    if to ~= nil and rawget(tt, to) ~= nil then
      deprecated(what, k, to)
      return rawget(tt, to)
    end
    local extra = rawget(tt, provider)
    if type(extra) == "table" and extra[k] ~= nil then
      deprecated(what, k, provider .. "." .. k)
      return extra[k]
    end
    return nil
  end })
end

-- normalize_report(t, r, provider[, state_key]): the common fields of a provider's report r into t (a
-- time that is not one is left out; the provider's state, server_state or a list ref's state_key, goes to
-- lower case), its `extra` under t[provider].
local function normalize_report(t, r, provider, state_key)
  for _, k in ipairs(REPORTED) do
    local from = k == "server_state" and state_key or k
    local v = r[from]
    if k == "started_at" or k == "ends_at" then v = time.normalize_iso(v)
    elseif k == "server_state" and type(v) == "string" then v = v:lower() end
    if v ~= nil then t[from] = v end
  end
  if type(r.extra) == "table" and next(r.extra) ~= nil then t[provider] = r.extra end
  return t
end

-- list(cls, opts) -> array of refs of the provider's sandboxes (the account's, not only this process's):
-- each what connect needs (sb:ref()'s fields) and the fields info() has, with `state` the provider's
-- ("running", "paused"), times ISO 8601 UTC, a provider's extras under ref[provider]. opts: the
-- provider's options, metadata (table: every pair must match), state ("running" | "paused" | an array of
-- them), limit.
function M.list(cls, opts)
  opts = check(cls, opts, "list")
  if type(cls._list) ~= "function" then
    errors.raise(errors.SandboxStartError, Stage.LIST, string.format("list: provider '%s' cannot list sandboxes%s",
      tostring(cls.provider_name), cls.attach_unsupported and (": " .. cls.attach_unsupported) or ""))
  end
  return loop().run(function()
    local refs = wrapped(errors.SandboxStartError, Stage.LIST, pcall(cls._list, cls, opts))
    local out = {}
    for i, r in ipairs(refs) do
      -- what sb:ref() would hold (connect's fields) stays as it is; the reported fields are normalised
      local ref = {}
      for k, v in pairs(r) do ref[k] = require("glsb.secrets").without_userinfo(v) end -- as in sb:ref()
      for _, k in ipairs(REPORTED) do ref[k] = nil end
      ref.extra, ref.state = nil, nil
      normalize_report(ref, r, cls.provider_name, "state")
      ref.provider = cls.provider_name
      out[i] = with_aliases(ref, cls.provider_name, "list()[i]")
    end
    return out
  end)
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
      failure = { exception_type = models.FailureType.UNSUPPORTED, retry_safe = true } }
  else
    local ok, r = caught(pcall(fn, self, arg, hopts))
    result = note_gone(self, ok and M.normalize_result(r) or (outcome.from_failure(r)))
  end
  if result.duration_ms == nil then result.duration_ms = (now() - started) * 1000 end
  return result
end

local function upload_files(self, files, upload_dir, deadline)
  if type(self._upload) ~= "function" then
    error(hook_missing(self, "_upload", Stage.UPLOAD), 0)
  end
  wrapped(errors.SandboxExecutionError, Stage.UPLOAD, pcall(self._upload, self, files,
    { upload_dir = upload_dir, deadline = deadline, timeout = loop().remaining(deadline) }))
end

-- The result of a run whose deadline passed before the hook was called (the upload took it all): the
-- code provably never ran.
local function never_ran(what, hopts, started, why)
  return ExecutionResult.new {
    status = Status.TIMEOUT, duration_ms = (now() - started) * 1000,
    error = string.format("%s: the timeout (%gs) passed %s; nothing ran", what, hopts.budget, why),
    failure = { exception_type = models.FailureType.TIMEOUT, retry_safe = true },
  }
end

-- Files are uploaded before the run, from the run's own budget; when the upload fails the code provably
-- never ran, so the result is ERROR (TIMEOUT when the budget ran out) with failure.retry_safe = true.
local function with_files(self, what, files, upload_dir, hopts, started)
  if #files == 0 then return nil end
  local ok, err = caught(pcall(traced, "glsb.sandbox.upload", self, nil, upload_files, self, files, upload_dir,
    hopts.deadline))
  if ok then return nil end
  if loop().expired(hopts.deadline) then
    return never_ran(what, hopts, started, "while the files were uploaded (" .. errors.describe(err) .. ")")
  end
  return ExecutionResult.new {
    status = Status.ERROR, error = "upload failed: " .. tostring(err),
    duration_ms = (now() - started) * 1000,
    failure = { exception_type = models.FailureType.UPLOAD, retry_safe = true },
  }
end

-- The body of execute_code / execute_command: one deadline for the whole call (hopts.deadline, on the
-- loop's clock), the files uploaded from it, then the hook with what is left (hopts.timeout) and the
-- deadline itself, which every sub-step of the hook draws from.
local function execution_body(self, what, hook, payload, hopts, files, upload_dir)
  require_running(self, what)
  if trace_seam.on then hopts.env = trace_seam.sandbox_env(hopts.env, hopts.trace_into_sandbox) end
  local started = now()
  hopts.budget = hopts.timeout
  hopts.deadline = loop().deadline(hopts.timeout)
  local failed = with_files(self, what, files, upload_dir, hopts, started)
  if failed then return failed end
  if #files > 0 then
    if loop().expired(hopts.deadline) then return never_ran(what, hopts, started, "while the files were uploaded") end
    hopts.timeout = loop().remaining(hopts.deadline)
  end
  local r = run_hook(self, hook, payload, hopts, started)
  if log.enabled("debug") then
    log.debug(string.format("%s: %s in %.1f ms", what, r.status, r.duration_ms or 0),
      { provider = self.provider, sandbox_id = self.sandbox_id })
  end
  return r
end

-- sb:execute_command(command, opts) -> ExecutionResult. Never raises for
-- what the command did. opts: timeout (nil = 30 s, <= 0 = none), env, cwd,
-- on_stdout, on_stderr, files, upload_dir, trace_into_sandbox (TRACEPARENT in
-- env; default: glsb.trace.configure's).
function BaseSandbox:execute_command(command, opts)
  if type(command) ~= "string" then options.arg_error("execute_command: command must be a string") end
  opts = check(getmetatable(self), opts, "execute_command")
  local hopts = {
    timeout = options.timeout(opts.timeout, self.default_command_timeout),
    env = check_env(opts.env, "execute_command"),
    cwd = opts.cwd, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr,
    trace_into_sandbox = opts.trace_into_sandbox,
  }
  local files, upload_dir = M.normalize_files(opts.files, opts.upload_dir)
  return traced_op("glsb.sandbox.execute_command", self, execution_body, "execute_command", "_run_command", command,
    hopts, files, upload_dir)
end

local function download_body(self, path, timeout)
  require_running(self, "download_file")
  if type(self._download) ~= "function" then
    log.warn("download_file: provider does not implement downloads", { provider = self.provider })
    return nil
  end
  local ok, data = caught(pcall(self._download, self, path,
    { timeout = timeout, deadline = loop().deadline(timeout) }))
  if not ok then
    -- the reason, whole: a 404, BODY_TOO_LARGE, a timeout...
    log.warn("download_file of " .. path .. " gives nil: " .. (errors.is_error(data) and tostring(data)
      or errors.describe(data)), { provider = self.provider, path = path, stage = Stage.DOWNLOAD })
    return nil
  end
  if type(data) ~= "string" then return nil end
  return data
end

-- sb:download_file(path, opts) -> string, or nil on any failure of the
-- download (timeouts too; the reason goes to glsb.log). Raises only for misuse
-- (bad arguments, sandbox not running) and re-raises a cancellation.
function BaseSandbox:download_file(path, opts)
  if type(path) ~= "string" or path == "" then options.arg_error("download_file: path must be a non-empty string") end
  opts = check(getmetatable(self), opts, "download_file")
  local timeout = options.timeout(opts.timeout, constants.DEFAULT_DOWNLOAD_TIMEOUT)
  return traced_op("glsb.sandbox.download", self, download_body, path, timeout)
end

local function set_timeout_body(self, seconds)
  if self._state == "running" and lease_over(self) then mark_ended(self, "expired") end
  if self._state ~= "running" then
    log.warn("set_timeout: the sandbox is not running", { provider = self.provider })
    return false
  end
  if type(self._set_timeout) ~= "function" then return true end -- unsupported: a no-op
  local asked = now()
  local ok, err = caught(pcall(self._set_timeout, self, seconds))
  if ok then
    -- a hook may return the seconds the provider actually granted (a lifetime cap shortened them)
    local granted = type(err) == "number" and err >= 0 and math.min(err, seconds) or seconds
    self.timeout = seconds
    self._lease_ends = asked + granted
    return true
  end
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

---------------------------------------------------------------------------
-- Background commands, ports, info
---------------------------------------------------------------------------

-- A command running in the background (sb:start_command). Methods: output() -> stdout, stderr so far;
-- wait([timeout]) -> ExecutionResult | nil, "timeout"; kill() -> true (signalled) | false (it had
-- ended); done() -> bool; pid (when the provider knows it).
local CommandHandle = {}
M.CommandHandle = CommandHandle

function CommandHandle:output()
  loop().sleep(0) -- let what already arrived be read (a script outside any task drives the loop here)
  return self._inner:output()
end

function CommandHandle:done() return self._inner:done() end

function CommandHandle:wait(timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout) then
    options.arg_error("wait: timeout must be a number of seconds, got %s", tostring(timeout))
  end
  local sb = self.sandbox
  local r, why = guarded(sb, function() return self._inner:wait(options.timeout(timeout)) end)
  if r == nil then return nil, why or "timeout" end
  if self.result == nil then
    self.result = note_gone(sb, M.normalize_result(r))
    if self.result.duration_ms == nil then self.result.duration_ms = (now() - self._started) * 1000 end
  end
  return self.result
end

function CommandHandle:kill()
  return guarded(self.sandbox, function() return self._inner:kill() == true end)
end

CommandHandle.__index = function(h, k)
  if k == "pid" then return h._inner.pid and h._inner:pid() end
  return CommandHandle[k]
end

CommandHandle.__tostring = function(h)
  return string.format("CommandHandle(%s, %s)", h.command:sub(1, 40), h._inner:done() and "done" or "running")
end

-- sb:start_command(command, opts) -> CommandHandle. The command runs in the background (a shell line, as
-- execute_command's) until it ends, kill() or the sandbox ends. opts: env, cwd, timeout (seconds; nil or
-- <= 0: no limit), on_stdout, on_stderr (called as lines arrive while the loop runs).
function BaseSandbox:start_command(command, opts)
  if type(command) ~= "string" then options.arg_error("start_command: command must be a string") end
  opts = check(getmetatable(self), opts, "start_command")
  local hopts = {
    timeout = options.timeout(opts.timeout),
    env = check_env(opts.env, "start_command"), cwd = opts.cwd, on_stdout = opts.on_stdout,
    on_stderr = opts.on_stderr,
  }
  return guarded(self, function()
    require_running(self, "start_command")
    if type(self._start_command) ~= "function" then
      errors.raise(errors.SandboxExecutionError, Stage.EXECUTE, string.format(
        "start_command: provider '%s' cannot run background commands%s", tostring(self.provider),
        self.start_command_unsupported and (": " .. self.start_command_unsupported) or ""))
    end
    local started = now()
    hopts.deadline = loop().deadline(hopts.timeout)
    local inner = wrapped(errors.SandboxExecutionError, Stage.EXECUTE, pcall(self._start_command, self, command,
      hopts))
    return setmetatable({ sandbox = self, command = command, _inner = inner, _started = started }, CommandHandle)
  end)
end

-- sb:get_host(port) -> "host:port" (or the host name the provider routes to that port) where a program
-- listening on that port inside the sandbox is reached from outside. Raises SandboxExecutionError where
-- the provider exposes no ports (the message says why).
function BaseSandbox:get_host(port)
  if math.type(port) ~= "integer" and not (type(port) == "number" and port == math.floor(port)) then
    options.arg_error("get_host: port must be an integer, got %s", tostring(port))
  end
  if port < 1 or port > 65535 then options.arg_error("get_host: port must be 1-65535, got %d", port) end
  require_running(self, "get_host")
  if type(self._get_host) ~= "function" then
    errors.raise(errors.SandboxExecutionError, Stage.GET_HOST, string.format(
      "get_host: provider '%s' exposes no ports%s", tostring(self.provider),
      self.get_host_unsupported and (": " .. self.get_host_unsupported) or ""))
  end
  return wrapped(errors.SandboxExecutionError, Stage.GET_HOST, pcall(self._get_host, self, math.tointeger(port)))
end

-- sb:info() -> {provider, sandbox_id, state, server_state, template_id, metadata, language, started_at,
-- ends_at, [provider] = {...}}: what this handle knows, and what the provider reports (_info) while it
-- runs. state: this handle's ("running", "expired" (its lease ended), "terminated", "gone" (ended outside
-- this handle), "new"); server_state: the provider's word for the sandbox ("running", "paused", ...),
-- when it says. Times are ISO 8601 UTC, whole seconds ("2026-01-02T03:04:05Z"). What only one provider
-- reports is under info()[provider] (info().e2b.cpu_count).
function BaseSandbox:info()
  if self._state == "running" and lease_over(self) then mark_ended(self, "expired") end
  local t = {
    provider = self.provider, sandbox_id = self.sandbox_id, state = self._state, template_id = self.template_id,
    metadata = self.metadata, language = self.language, started_at = time.iso(self._started_wall),
    ends_at = self._lease_ends and time.iso(time.wall() + (self._lease_ends - now()) + 0.5) or nil,
  }
  if self._state == "running" and type(self._info) == "function" then
    local ok, r = caught(pcall(guarded, self, self._info))
    if ok and type(r) == "table" then
      normalize_report(t, r, self.provider)
    elseif not ok then
      log.warn("info: the provider's report failed: " .. errors.describe(r), { provider = self.provider })
    end
  end
  return with_aliases(t, self.provider, "info()")
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

-- sb:terminate(opts): opts.timeout per attempt (default 10 s; <= 0: no limit).
-- A no-op when the sandbox was never started or is already terminated. On
-- failure after every retry raises SandboxTerminateError and keeps sandbox_id.
function BaseSandbox:terminate(opts)
  opts = check(getmetatable(self), opts, "terminate")
  return traced_op("glsb.sandbox.terminate", self, terminate_body,
    options.timeout(opts.timeout, constants.DEFAULT_TERMINATE_TIMEOUT))
end

---------------------------------------------------------------------------
-- Pause and snapshots
---------------------------------------------------------------------------

local function unsupported(self, what, stage, reason_field)
  errors.raise(errors.SandboxExecutionError, stage, string.format("%s: provider '%s' cannot %s%s", what,
    tostring(self.provider), what == "pause" and "pause a sandbox" or "snapshot a sandbox",
    self[reason_field] and (": " .. self[reason_field]) or ""))
end

local function pause_body(self)
  require_running(self, "pause")
  if type(self._pause) ~= "function" then unsupported(self, "pause", Stage.PAUSE, "pause_unsupported") end
  wrapped(errors.SandboxExecutionError, Stage.PAUSE, pcall(self._pause, self))
  self._state = "paused"
  self._lease_ends = nil
  M.forget(self) -- a paused sandbox outlives the script: it is there to be resumed
  return true
end

-- sb:pause() -> true. The sandbox stops where it is: its processes and (where the provider keeps it) their
-- memory and the interpreter's variables are kept, its files too; it runs nothing and holds no CPU until
-- glsb.connect(provider, sb:ref()) resumes it. This handle is then done (state "paused", every call
-- raises SandboxNotInitializedError saying so) and is not terminated when the script ends. Raises
-- SandboxExecutionError[pause] when the provider fails, or cannot pause (the message says why).
function BaseSandbox:pause()
  return traced_op("glsb.sandbox.pause", self, pause_body)
end

local function snapshot_body(self, opts)
  require_running(self, "snapshot")
  if type(self._snapshot) ~= "function" then unsupported(self, "snapshot", Stage.SNAPSHOT, "snapshot_unsupported") end
  local ref = wrapped(errors.SandboxExecutionError, Stage.SNAPSHOT, pcall(self._snapshot, self, opts))
  if type(ref) ~= "table" or (type(ref.template_id) ~= "string" and type(ref.name) ~= "string") then
    errors.raise(errors.SandboxExecutionError, Stage.SNAPSHOT, "snapshot: the provider returned no template ref")
  end
  ref.provider, ref.kind = self.provider, "snapshot"
  return ref
end

-- sb:snapshot(opts) -> a template ref {provider, kind = "snapshot", template_id, name?} that
-- glsb.create(provider, {template = ref}) starts new sandboxes from, with this sandbox's files as they are
-- now (what else a provider keeps, memory or none, its README says). The sandbox runs on. opts.name: a
-- name for it where the provider keeps names. Raises SandboxExecutionError[snapshot].
function BaseSandbox:snapshot(opts)
  opts = check(getmetatable(self), opts, "snapshot")
  return traced_op("glsb.sandbox.snapshot", self, snapshot_body, opts)
end

---------------------------------------------------------------------------
-- CodeInterpreterSandbox
---------------------------------------------------------------------------

local CodeInterpreterSandbox = BaseSandbox:extend("base")
CodeInterpreterSandbox.options = {
  create = {
    language = { "string", "language of the code interpreter", default = "python" },
    additional_packages = { "string_list", "pip packages installed once into the kernel (Python only)" },
    package_install_timeout = { "seconds", "the whole `additional_packages` install", default = "600" },
  },
  execute_code = options.merge(M.RUN_OPTIONS, {
    timeout = { "seconds", "`<= 0`: none", default = "300" },
    language = { "string", "run this call in another language the provider runs", default = "the sandbox's" },
  }),
}
CodeInterpreterSandbox.languages = { python = true }
CodeInterpreterSandbox.default_code_timeout = constants.DEFAULT_CODE_TIMEOUT
M.CodeInterpreterSandbox = CodeInterpreterSandbox

-- Validates the create opts that concern the interpreter.
function CodeInterpreterSandbox._prepare_create(sopts)
  sopts.language = sopts.language or constants.DEFAULT_LANGUAGE
  if sopts.additional_packages == nil then
    sopts.additional_packages = {}
    return
  end
  local ok, pkgs = pcall(packages().validate, sopts.additional_packages)
  if not ok then options.arg_error("create: %s", tostring(pkgs):gsub("^[^:]*:%d+: ", "")) end
  sopts.additional_packages = pkgs
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
  return self:_run_code(packages().python_install_code(pkgs), { timeout = opts.timeout, deadline = M.deadline(opts),
    language = "python" })
end

function CodeInterpreterSandbox:_after_start(sopts)
  local pkgs = sopts.additional_packages
  if not pkgs or #pkgs == 0 then return end
  if self.language ~= models.Language.PYTHON then
    log.warn(string.format("additional_packages skipped: language '%s' is not python", self.language),
      { provider = self.provider, packages = table.concat(pkgs, " "), stage = Stage.PACKAGE_INSTALL })
    return
  end
  local started = now()
  local timeout = M.resolve_timeout(sopts.package_install_timeout, constants.DEFAULT_PACKAGE_INSTALL_TIMEOUT,
    "create: opts.package_install_timeout")
  M.progress(self, Stage.PACKAGE_INSTALL, "installing " .. table.concat(pkgs, " "))
  local ok, r = caught(pcall(traced, "glsb.sandbox.package_install", self, nil, self._install_packages, self, pkgs,
    { timeout = timeout, deadline = loop().deadline(timeout) }))
  local result = ok and M.normalize_result(r) or (outcome.from_failure(r))
  if result.duration_ms == nil then result.duration_ms = (now() - started) * 1000 end
  if result.status ~= Status.SUCCESS then
    teardown_quietly(self, "failed package install")
    if self._state ~= "terminated" then self._state = "new" end
    errors.raise(errors.SandboxStartError, Stage.PACKAGE_INSTALL,
      "installing additional_packages failed: " .. M.failure_summary(result, self.network_hint), result)
  end
end

-- What "no network" looks like in pip's (and most tools') words.
local NO_NETWORK = { "No matching distribution found", "Could not find a version that satisfies",
  "Failed to establish a new connection", "Temporary failure in name resolution", "Name or service not known",
  "Network is unreachable", "NewConnectionError", "Could not resolve host", "Connection refused" }

-- tail(text, lines, bytes) -> the last lines of text, at most `bytes`, trimmed.
local function tail(text, max_lines, max_bytes)
  text = (text or ""):gsub("%s+$", "")
  if #text > max_bytes then text = text:sub(-max_bytes):gsub("^[^\n]*\n", "", 1) end
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
  return table.concat(lines, "\n", math.max(1, #lines - max_lines + 1))
end

-- failure_summary(result[, network_hint]) -> one message for a failed tool run (a package install, a
-- template step): its status and error, then the tail of its output once (stderr, else stdout), then, when
-- the output reads like "no network", a sentence saying so and what helps (network_hint).
function M.failure_summary(result, network_hint)
  local err = (result.error or ""):gsub("%s+$", "")
  local out = tail(result.stderr ~= "" and result.stderr or result.stdout, 12, 1500)
  if out ~= "" then err = err:match("([^\n]*)$") end -- a traceback's last line says it; the output says why
  local parts = { "(" .. tostring(result.status) .. (result.code and (", exit code " .. tostring(result.code)) or "")
    .. ")" }
  if err ~= "" and not out:find(err, 1, true) then parts[#parts + 1] = err end
  if out ~= "" then
    local last = out:match("([^\n]*)$")
    if not err:find(last, 1, true) or #out > #last then parts[#parts + 1] = "output (last lines):\n" .. out end
  end
  local text = (result.stdout or "") .. (result.stderr or "") .. err
  for _, frag in ipairs(NO_NETWORK) do
    if text:find(frag, 1, true) then
      parts[#parts + 1] = "\nThis looks like the sandbox could not reach the package index (no network?): "
        .. (network_hint or "give the sandbox network access, or install from a directory of wheels")
      break
    end
  end
  return table.concat(parts, " ")
end

local function code_call(self, code, opts, ctx)
  if type(code) ~= "string" then options.arg_error("execute_code: code must be a string") end
  opts = check(getmetatable(self), opts, "execute_code")
  local language = opts.language or (ctx and ctx.language) or self.language
  if ctx and language ~= ctx.language then
    options.arg_error("execute_code: this context runs %s, not %s", ctx.language, tostring(language))
  end
  if self.languages and not self.languages[language] then
    options.arg_error("execute_code: provider '%s' does not run language '%s' (it runs: %s)", tostring(self.provider),
      language, table.concat(options.names(self.languages), ", "))
  end
  local env = check_env(opts.env, "execute_code")
  if ctx and ctx.env then
    local merged = {}
    for k, v in pairs(ctx.env) do merged[k] = v end
    for k, v in pairs(env or {}) do merged[k] = v end
    env = merged
  end
  local hopts = {
    timeout = options.timeout(opts.timeout, self.default_code_timeout),
    env = env, language = language, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr,
    trace_into_sandbox = opts.trace_into_sandbox, context = ctx and ctx._handle,
  }
  local files, upload_dir = M.normalize_files(opts.files, opts.upload_dir)
  return traced_op("glsb.sandbox.execute_code", self, execution_body, "execute_code", "_run_code", code, hopts,
    files, upload_dir)
end

-- sb:execute_code(code, opts) -> ExecutionResult. Never raises for what the
-- code did. opts: timeout (nil = provider default, <= 0 = none), files,
-- upload_dir (default "/files"), on_stdout, on_stderr, env, trace_into_sandbox
-- (TRACEPARENT in env; default: glsb.trace.configure's).
function CodeInterpreterSandbox:execute_code(code, opts)
  return code_call(self, code, opts, nil)
end

---------------------------------------------------------------------------
-- Code contexts: interpreters of their own in one sandbox
---------------------------------------------------------------------------

-- A code context (sb:context): its own interpreter state, language, working directory and env. Fields:
-- language, cwd, env, sandbox. The sandbox's default context stays what sb:execute_code uses.
local Context = {}
Context.__index = Context
M.Context = Context

CodeInterpreterSandbox.options.context = {
  language = { "string", "the context's language", default = "the sandbox's" },
  cwd = { "string", "the context's working directory", default = "the provider's" },
  env = { "string_map", "environment variables of every call in it (a call's env wins)" },
}

-- ctx:execute_code(code, opts) -> ExecutionResult, as sb:execute_code, in this context (opts.language,
-- when given, must be the context's).
function Context:execute_code(code, opts)
  if self._closed then
    error(errors.new(errors.SandboxNotInitializedError, Stage.NOT_INITIALIZED,
      "execute_code: this context is closed"), 0)
  end
  return code_call(self.sandbox, code, opts, self)
end

local function context_close_body(sb, ctx)
  if type(sb._context_close) == "function" and sb._state == "running" then
    wrapped(errors.SandboxExecutionError, Stage.CONTEXT, pcall(sb._context_close, sb, ctx._handle))
  end
end

-- ctx:close(): the context's interpreter ends (a no-op when already closed or the sandbox has ended).
-- Raises SandboxExecutionError[context] when the provider fails to close it.
function Context:close()
  if self._closed then return end
  self._closed = true
  traced_op("glsb.sandbox.context_close", self.sandbox, context_close_body, self)
end

Context.__close = Context.close

local function context_body(self, spec)
  require_running(self, "context")
  if type(self._context_create) ~= "function" then
    errors.raise(errors.SandboxExecutionError, Stage.CONTEXT, string.format(
      "context: provider '%s' has no code contexts of its own%s", tostring(self.provider),
      self.context_unsupported and (": " .. self.context_unsupported) or ""))
  end
  local handle = wrapped(errors.SandboxExecutionError, Stage.CONTEXT, pcall(self._context_create, self,
    { language = spec.language, cwd = spec.cwd }))
  return setmetatable({ sandbox = self, language = spec.language, cwd = spec.cwd, env = spec.env, _handle = handle },
    Context)
end

-- sb:context(opts) -> a Context with an interpreter of its own (variables set in one are not seen in
-- another, nor in sb:execute_code's). opts: language (one the provider runs; default the sandbox's), cwd,
-- env. Raises SandboxExecutionError[context] when the provider cannot make one.
function CodeInterpreterSandbox:context(opts)
  opts = check(getmetatable(self), opts, "context")
  local language = opts.language or self.language
  if self.languages and not self.languages[language] then
    options.arg_error("context: provider '%s' does not run language '%s' (it runs: %s)", tostring(self.provider),
      language, table.concat(options.names(self.languages), ", "))
  end
  local spec = { language = language, cwd = opts.cwd, env = check_env(opts.env, "context") }
  return traced_op("glsb.sandbox.context", self, context_body, spec)
end

return M
