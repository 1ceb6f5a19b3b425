-- glsb: one interface to run untrusted code in sandboxes across providers.
-- `require "glsb"` loads no provider: glsb.create / glsb.template / glsb.provider
-- load "glsb.providers.<name>" on first use (see glsb.registry).

local models = require "glsb.models"
local errors = require "glsb.errors"
local constants = require "glsb.constants"
local registry = require "glsb.registry"
local log = require "glsb.log"

local M = {}

M.VERSION = constants.VERSION

M.ExecutionStatus = models.ExecutionStatus
M.ExecutionResult = models.ExecutionResult
M.FailureDetail = models.FailureDetail
M.FailureType = models.FailureType
M.SandboxFile = models.SandboxFile
M.Stage = models.Stage
M.Language = models.Language
M.errors = errors
M.constants = constants
M.log = log
-- Rich results (r.results): the bundle type, r:images(), results.save(r, dir), the cap.
M.results = require "glsb.results"
-- Loaded on first use (a script that never touches one does not load it; issue 26: loading glsb and a
-- provider costs a few milliseconds of every script):
--   glsb.trace        tracing: off until configured (glsb.trace.configure or the OTEL_* environment)
--   glsb.lm           model clients (docs/lm.md): glsb.lm.openai, glsb.lm.anthropic, glsb.lm.fn
--   glsb.interpreter  the AI code interpreter (docs/interpreter.md): glsb.interpreter{sandbox = sb, lm = ...}
local LAZY = { trace = "glsb.trace", lm = "glsb.lm", interpreter = "glsb.interpreter" }
setmetatable(M, { __index = function(t, k)
  local name = LAZY[k]
  if not name then return nil end
  local v = require(name)
  rawset(t, k, v)
  return v
end })
-- the environment asks for spans: glsb.trace registers itself with the seam (which cannot load it)
if require("glsb.trace.seam").on then M.trace = require "glsb.trace" end

-- Concurrency (glsb.loop): loaded on first use, so that requiring glsb does
-- not load the C core until something actually waits.
local function loop() return require "glsb.loop" end
function M.run(fn, ...) return loop().run(fn, ...) end
function M.spawn(fn, ...) return loop().spawn(fn, ...) end
function M.gather(...) return loop().gather(...) end
function M.sleep(seconds) return loop().sleep(seconds) end
-- glsb.now(): the loop's monotonic clock in seconds (only differences mean anything).
function M.now() return loop().now() end

-- glsb.provider(name) -> the provider module "glsb.providers.<name>".
function M.provider(name)
  return registry.get(name)
end

local function provider_name(name, what)
  if name == nil then return constants.DEFAULT_PROVIDER end
  if type(name) ~= "string" then
    require("glsb.options").arg_error("glsb.%s: provider name must be a string (or nil for %q), got %s",
      what, constants.DEFAULT_PROVIDER, type(name))
  end
  return name
end

-- glsb.create(provider_name, opts) -> a running sandbox.
-- provider_name nil = "local". Same as glsb.provider(name).Sandbox.create(opts).
function M.create(name, opts)
  return registry.get(provider_name(name, "create")).Sandbox.create(opts)
end

-- glsb.connect(provider_name, ref_or_id, opts) -> a running sandbox handle on an existing sandbox (a
-- ref from sb:ref(), possibly made by another process, or a bare sandbox id), with the same contract as
-- one from create. opts: the provider's options (credentials are never in a ref), timeout (new lease).
function M.connect(name, ref, opts)
  return registry.get(provider_name(name, "connect")).Sandbox.connect(ref, opts)
end

-- glsb.list(provider_name, opts) -> array of refs of the provider's sandboxes. opts: the provider's
-- options, metadata = {k = v} (all must match), state ("running" | "paused" | {...}), limit.
function M.list(name, opts)
  return registry.get(provider_name(name, "list")).Sandbox.list(opts)
end

-- glsb.kill(provider_name, ref_or_id, opts) -> true: ends a sandbox by its id (or a ref) without a handle
-- of this process: a leaked one, one another process made. opts: the provider's options, timeout.
function M.kill(name, ref, opts)
  return registry.get(provider_name(name, "kill")).Sandbox.kill(ref, opts)
end

-- glsb.close_all() -> how many: closes every sandbox this process still has open (terminate, unless
-- created with keep_alive = true). glsb-lua calls it when a script ends, normally or by an error.
function M.close_all()
  local sandbox = package.loaded["glsb.sandbox"]
  if not sandbox then return 0 end
  return sandbox.close_all()
end

-- glsb.template(provider_name, opts) -> the provider's template builder.
function M.template(name, opts)
  name = provider_name(name, "template")
  local p = registry.get(name)
  if type(p.Template) ~= "table" or type(p.Template.new) ~= "function" then
    error(string.format("glsb.template: provider '%s' has no template builder", name), 2)
  end
  return p.Template.new(opts)
end

-- glsb.pool(provider_name, opts) -> a warm pool of sandboxes (glsb.pool, loaded on first use).
function M.pool(name, opts)
  return require("glsb.pool").new(provider_name(name, "pool"), opts)
end

-- Workspace primitives (glsb.workspace, loaded on first use).
function M.write_workspace_file(sandbox, req)
  return require("glsb.workspace").write_workspace_file(sandbox, req)
end

function M.run_workspace_command(sandbox, argv, opts)
  return require("glsb.workspace").run_workspace_command(sandbox, argv, opts)
end

return M
