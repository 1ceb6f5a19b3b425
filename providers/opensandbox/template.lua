-- glsb.providers.opensandbox.template: TemplateSpec -> an OpenSandbox snapshot
-- (docs/protocols/opensandbox.md §3; there is no image-build API):
--
--   1. a build sandbox from base_image (or the snapshot base_template names, or the code-interpreter
--      image), with the spec's env (a snapshot keeps the container's environment)
--   2. apt_packages, packages (pip), files (execd's multipart upload, modes kept), run commands, each a
--      step whose output goes to on_log
--   3. POST /sandboxes/{id}/snapshots {name = "<spec name>@glsb-<content hash>"}, polled until Ready
--   4. the build sandbox is deleted, also when a step failed
--
-- "Same spec twice builds once": the snapshot's name carries the content hash; ensure() looks for a
-- Ready snapshot of that name first. glsb.create("opensandbox", {template = ...}) takes the ref's
-- template_id, its name, or the bare spec name (the newest Ready snapshot built for it).
--
-- Builder options (glsb.template("opensandbox", opts)): domain, api_key, protocol, use_server_proxy,
-- request_timeout (as the sandbox), image (the default base), resources, build_timeout (s, default 3600),
-- step_timeout (s per step, default 1800), and every builder's on_log / progress (glsb.template).
-- builder:list() names the snapshots it made; builder:delete(name) removes them.
--
-- What a snapshot cannot carry is refused, not ignored: start_cmd and ready_cmd (a restore takes its
-- entrypoint at create time). workdir is where relative files land (created); sandboxes restored from
-- the snapshot keep the image's working directory. cpu and memory_mb size the build sandbox only.

local template = require "glsb.template"
local errors = require "glsb.errors"
local time = require "glsb.time"
local shell = require "glsb.shell"
local models = require "glsb.models"
local packages = require "glsb.packages"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"
local snapshot = require "glsb.providers.opensandbox.snapshot"
local files = require "glsb.providers.opensandbox.files"
-- (init.lua loads this module lazily, on first use of M.Template: requiring it here is no cycle)
local opensandbox = require "glsb.providers.opensandbox"

local Stage = models.Stage
local Status = models.ExecutionStatus

local M = {}

M.SEPARATOR = snapshot.SEPARATOR
M.DEFAULT_WORKDIR = "/workspace"
M.SNAPSHOT_TIMEOUT = 1800

local function fail(message, cause)
  errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, message, cause)
end

-- snapshot_name(spec_name, hash) -> "<name>@glsb-<first 16 hex of the content hash>" ('@' never occurs
-- in a spec name, so the bare name is its prefix unambiguously).
function M.snapshot_name(name, hash)
  return name .. M.SEPARATOR .. hash:sub(1, 16)
end


-- Absolute destination of a spec file: relative paths land below workdir.
local function destination(path, workdir)
  if path:sub(1, 1) == "/" then return path end
  return (workdir or M.DEFAULT_WORKDIR):gsub("/+$", "") .. "/" .. path
end

-- steps(spec) -> {{title, command | files}}: apt, pip, workdir, files, run, in a Dockerfile's order.
function M.steps(spec)
  local steps = {}
  if spec.apt_packages then
    steps[#steps + 1] = { title = "apt-get install " .. table.concat(spec.apt_packages, " "), command =
      "apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y "
        .. shell.join(spec.apt_packages) }
  end
  if spec.packages then
    steps[#steps + 1] = { title = "pip install " .. table.concat(spec.packages, " "),
      command = packages.shell_install_command(spec.packages) }
  end
  if spec.workdir then
    steps[#steps + 1] = { title = "mkdir " .. spec.workdir,
      command = "mkdir -p " .. shell.quote(spec.workdir) }
  end
  if spec.files then
    local entries = {}
    for i, f in ipairs(spec.files) do
      entries[i] = { path = destination(f.path, spec.workdir), data = f.data, mode = f.mode }
    end
    steps[#steps + 1] = { title = string.format("copy %d file%s", #entries, #entries == 1 and "" or "s"),
      files = entries }
  end
  for _, cmd in ipairs(spec.run or {}) do steps[#steps + 1] = { title = "run " .. cmd, command = cmd } end
  return steps
end

---------------------------------------------------------------------------
-- The builder
---------------------------------------------------------------------------

local Template = template.TemplateBuilder:extend("opensandbox")
M.Template = Template

-- The builder's own options (glsb.options form); the provider's connection options come from init.lua.
M.BUILDER_OPTIONS = {
  image = { "string", "the base of a spec without base_image / base_template" },
  resources = { "string_map", "`resourceLimits` of the build sandbox" },
  build_timeout = { "seconds", "seconds a build may take; `<= 0`: none", default = "3600" },
  step_timeout = { "seconds", "seconds one step may take; `<= 0`: none", default = "1800" },
}

Template.options = { provider = opensandbox.PROVIDER_OPTIONS, builder = M.BUILDER_OPTIONS }

function Template:_init(opts)
  self._cfg = lifecycle.config(opts)
  self._sandbox_opts = {}
  for _, k in ipairs({ "domain", "api_key", "protocol", "use_server_proxy", "request_timeout", "cainfo" }) do
    self._sandbox_opts[k] = opts[k]
  end
  self.image = opts.image
  self.resources = opts.resources
  self.build_timeout = require("glsb.options").timeout(opts.build_timeout, 3600)
  self.step_timeout = require("glsb.options").timeout(opts.step_timeout, 1800)
end

-- One build log entry: to on_log and the progress line (the base class's _log), with the step it belongs
-- to and the progress line's words for it ("step 2/5: title", set by _step).
function Template:_say(message, level, step)
  self:_log { timestamp = time.iso(time.wall()), level = level or "info", message = message, step = step,
    status = self._status }
end

-- The newest Ready snapshot built from exactly this content.
function Template:_find(spec, hash)
  local name = M.snapshot_name(spec.name, hash)
  local ok, id = pcall(snapshot.resolve, self._cfg, name, errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
  if ok then return { template_id = id, name = name } end
  if require("glsb.loop").is_cancelled(id) then error(id, 0) end
  -- "no (Ready) snapshot named ..." means build it; a failed lookup is a failure
  if errors.is(id, errors.TemplateBuildError) and id.cause == nil then return nil end
  error(id, 0)
end

local function unsupported(spec)
  for _, k in ipairs({ "start_cmd", "ready_cmd" }) do
    if spec[k] then
      fail(string.format("OpenSandbox templates are snapshots: %s cannot be carried (a restored sandbox takes its "
        .. "entrypoint when it is created; pass entrypoint to glsb.create)", k))
    end
  end
end

-- The build sandbox: the base image (or base snapshot), the spec's env, the build's resources.
function Template:_build_sandbox(spec)
  local opts = {}
  for k, v in pairs(self._sandbox_opts) do opts[k] = v end
  opts.image = spec.base_image or self.image
  opts.template = spec.base_template
  opts.env = spec.env
  opts.timeout = self.build_timeout and self.build_timeout + 600 or 0 -- 0: no lease
  opts.retry = false
  local res
  if self.resources then
    res = {}
    for k, v in pairs(self.resources) do res[k] = v end
  end
  if spec.cpu or spec.memory_mb then
    res = res or {}
    if spec.cpu then res.cpu = tostring(spec.cpu) end
    if spec.memory_mb then res.memory = tostring(spec.memory_mb) .. "Mi" end
  end
  opts.resources = res
  return opensandbox.Sandbox.create(opts)
end

-- Runs one step in the build sandbox; raises TemplateBuildError naming it when it fails.
function Template:_step(sb, i, n, step)
  self._status = string.format("step %d/%d: %s", i, n, step.title)
  self:_say(self._status, "info", i)
  if step.files then
    local ok, err = pcall(files.upload, sb._conn, step.files,
      { timeout = self.step_timeout, class = errors.TemplateBuildError, stage = Stage.TEMPLATE_BUILD })
    if not ok then
      if require("glsb.loop").is_cancelled(err) then error(err, 0) end
      fail(string.format("step %d (%s) failed: %s", i, step.title, errors.describe(err)), err)
    end
    return
  end
  local function line(level) return function(l) self:_say(l, level, i) end end
  local r = sb:execute_command(step.command, { timeout = self.step_timeout or 0, -- 0: none
    on_stdout = line("info"), on_stderr = line("warn") })
  if r.status ~= Status.SUCCESS then
    local tail = (r.stderr ~= "" and r.stderr or r.stdout):sub(-500)
    fail(string.format("step %d (%s) failed (%s%s): %s", i, step.title, r.status,
      r.code and (", exit " .. tostring(r.code)) or "", tail ~= "" and tail or tostring(r.error)),
      { step = i, status = r.status, code = r.code, error = r.error })
  end
end

function Template:_build(spec, hash)
  unsupported(spec)
  local name = M.snapshot_name(spec.name, hash)
  local steps = M.steps(spec)
  self._status = "starting the build sandbox"
  self:_say("starting the build sandbox")
  local sb = self:_build_sandbox(spec)
  self:_say("build sandbox " .. tostring(sb.sandbox_id))
  local ok, res = pcall(function()
    for i, step in ipairs(steps) do self:_step(sb, i, #steps, step) end
    self._status = "snapshot"
    local snap = snapshot.create(self._cfg, sb.sandbox_id, name, errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
    self:_say("snapshot " .. snap.id .. " " .. name)
    snapshot.wait_ready(self._cfg, snap.id, M.SNAPSHOT_TIMEOUT, errors.TemplateBuildError, Stage.TEMPLATE_BUILD,
      function(state) self:_say("snapshot " .. snap.id .. " " .. tostring(state)) end)
    return { template_id = snap.id, name = name }
  end)
  -- the build sandbox goes, whatever happened (a snapshot outlives its source)
  local tok, terr = pcall(sb.terminate, sb)
  if not tok then self:_say("could not delete the build sandbox: " .. errors.describe(terr), "error") end
  self._status = nil
  if not ok then error(res, 0) end
  self:_say("ready: " .. res.template_id)
  return res
end

---------------------------------------------------------------------------
-- list and delete: the snapshots this builder made ("<name>@glsb-<hash>")
---------------------------------------------------------------------------

function Template:_list()
  local out = {}
  for _, s in ipairs(snapshot.list(self._cfg, {}, errors.TemplateBuildError, Stage.TEMPLATE_BUILD)) do
    local name = type(s.name) == "string" and s.name or ""
    local base, h = name:match("^(.-)" .. M.SEPARATOR:gsub("%p", "%%%0") .. "(%x+)$")
    if base then
      out[#out + 1] = { name = base, snapshot_name = name, template_id = s.id, hash = h,
        state = type(s.status) == "table" and s.status.state or nil, created_at = s.createdAt }
    end
  end
  table.sort(out, function(a, b)
    if a.name ~= b.name then return a.name < b.name end
    return tostring(a.created_at) > tostring(b.created_at)
  end)
  return out
end

-- delete(name): every snapshot built for that spec name (or the one snapshot name / id given).
function Template:_delete(name)
  local ids = {}
  for _, t in ipairs(self:_list()) do
    if t.name == name or t.snapshot_name == name or t.template_id == name then ids[#ids + 1] = t.template_id end
  end
  for _, id in ipairs(ids) do
    local ok, err = snapshot.delete(self._cfg, id, errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
    if not ok then error(err, 0) end
  end
  return #ids > 0
end

return M
