-- glsb.providers.local.template: content-addressed, read-only template layers
-- for the local provider.
--
--   local res = glsb.template("local"):ensure{ name = "data", packages = { "glsbtiny" },
--     files = { { path = "notes.txt", data = "hi" } }, run = { "echo built > stamp" },
--     provider = { pip_find_links = "/srv/wheels" } }
--   local sb = glsb.create("local", { template = res.ref.template_id })   -- or the name
--
-- Layout under <cache> = opts.cache_dir or $XDG_CACHE_HOME/glsb or ~/.cache/glsb:
--   local/templates/<hash>/        one layer, never modified once renamed into place
--       meta.json                  {id, name, env, workdir, packages, built_at[, base_template]}
--       site/                      `packages`, pip install --target (on sys.path in the kernel)
--       home/                      `files` and what `run` left in /home/user; copied into
--                                  each sandbox's home at start
--   local/names/<name>             the hash the name last pointed to
--   local/tmp/                     build and import scratch (same filesystem: rename is atomic)
-- <hash> is glsb.template.hash(spec): the same spec builds once. A build runs
-- in a confined sandbox (build.py, network only with provider.network = true: its own, as a sandbox's)
-- into a scratch directory and is renamed into place, so concurrent builds of
-- the same spec never see each other's halves: the first rename wins and the
-- loser discards its copy. Sandboxes bind the layer read-only at /opt/glsb/template.
--
-- Spec fields honoured: name, base_template, packages, files (paths relative
-- to /home/user or absolute below it), run, env, workdir, memory_mb, provider =
-- {pip_find_links, pip_index_url, network, build_timeout}. Refused with a
-- TemplateBuildError: base_image, apt_packages, start_cmd, ready_cmd (this
-- provider has no images or services). cpu is ignored.
--
-- base_template = <id or name of a local template> starts the new layer from
-- that parent's content: Template:ensure resolves it to the parent's id before
-- the spec is hashed, so the child's id covers the parent's content (rebuild a
-- name with other content and its children get new ids). The build sandbox
-- gets the parent layer read-only at /.glsb/base; build.py copies its site/
-- and home/ (symlinks as symlinks, nothing but regular files, directories and
-- symlinks) into the new layer's scratch before applying the child's packages,
-- files and run. The parent's env and workdir are defaults the child
-- overrides. The result is self-contained: it never refers to the parent.
-- meta.json then also has base_template = the parent's id.
--
-- Export/import: Template:export(id, path) writes the layer as a deterministic
-- tar.gz (glsb.fs.tar_pack); Template:import(path) unpacks one
-- (glsb.fs.tar_unpack refuses escapes) and returns its ref. The id is the
-- spec hash, not a digest of the bytes: import layers from sources you trust.

local codec = require "glsb.codec"
local options = require "glsb.options"
local fs = require "glsb.fs"
local cjson = require "cjson.safe"
local loop = require "glsb.loop"
local process = require "glsb.process"
local errors = require "glsb.errors"
local time = require "glsb.time"
local template = require "glsb.template"
local layout = require "glsb.providers.local.layout"
local Stage = require("glsb.models").Stage

local M = {}

-- What the host keeps of a build's stdout and of its stderr (the last bytes): build.log and errors.
M.LOG_MAX = 1024 * 1024

local function fail(message, cause)
  errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, message, cause)
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- run(argv) -> true, or nil, output (small host tools: mkdir, chmod, find).
local function run(argv, timeout)
  local out, err, st = process.run(argv, { timeout = timeout or 60 })
  if not out then return nil, tostring(err) end
  if st.code ~= 0 then return nil, (out .. err):sub(-500) end
  return true, out
end

M.cache_dir = layout.cache_dir

local function dirs(opts)
  local base = M.cache_dir(opts) .. "/local"
  return { base = base, templates = base .. "/templates", names = base .. "/names", tmp = base .. "/tmp" }
end

-- scratch_dir(d, prefix) -> a new directory d.tmp/<prefix>XXXXXX, or raises. d.tmp must be glsb's own
-- (a directory of ours nobody else may write to: reaper.own_root); what builds and imports of killed
-- owners left there goes first (once per process).
local function scratch_dir(d, prefix)
  local reaper = require "glsb.providers.local.reaper"
  local root, why = reaper.own_root(d.tmp)
  if not root then fail("the template scratch folder is not glsb's own: " .. tostring(why)) end
  reaper.sweep_once(root)
  local scratch, merr = fs.mkdtemp(root .. "/" .. prefix)
  if not scratch then fail("cannot create a scratch directory: " .. tostring(merr)) end
  return scratch
end

local function ensure_dirs(d)
  local ok, err = run({ "mkdir", "-p", "-m", "0755", d.templates, d.names, d.tmp })
  if not ok then fail("cannot create the template cache under " .. d.base .. ": " .. err) end
end

function M.read_meta(dir)
  local s = read_file(dir .. "/meta.json")
  if not s then return nil end
  local meta = cjson.decode(s)
  if type(meta) ~= "table" then return nil end
  return meta
end

-- resolve(template, opts) -> layer directory, or nil, message. template is a
-- hash (what ensure returns) or a name given to ensure.
function M.resolve(name, opts)
  local d = dirs(opts)
  if type(name) ~= "string" or not name:match("^[%w][%w._-]*$") then
    return nil, "local: bad template reference " .. tostring(name)
  end
  local id = name
  if not (#name == 64 and name:match("^%x+$")) then
    id = (read_file(d.names .. "/" .. name) or ""):match("^(%x+)")
    if not id then return nil, "local: template '" .. name .. "' not found in " .. d.base end
  end
  local dir = d.templates .. "/" .. id
  if not M.read_meta(dir) then return nil, "local: template " .. id .. " not found in " .. d.base end
  return dir
end

---------------------------------------------------------------------------
-- Snapshots (sb:snapshot: snapshot.lua captures the sandbox's files, this makes the layer)
---------------------------------------------------------------------------

-- A snapshot is a layer like a build's: local/templates/<hash>/ with meta.json, the parent template's
-- site/ (hard links: a layer is never modified once in place) and workspace.tar, what the sandbox
-- could write (its /home/user, /files and /tmp) as `glsb-confine pack` archived it. The host never
-- unpacks it: a sandbox started from the layer does (agent.py, as the sandbox user, inside). <hash>
-- covers the archive's bytes and the parent's id: the same files snapshotted twice are one layer.
-- meta.json: {id, name, env, workdir, packages, built_at, base_template (the parent's id, or none),
-- snapshot = {sandbox_id, bytes}}; env, workdir and packages are the parent's.
M.SNAPSHOT_ARCHIVE = "workspace.tar"

-- names/<name>: the hash the name points to from now on.
local function record_name(d, name, hash)
  if name then fs.write_file_atomic(d.names .. "/" .. name, hash .. "\n") end
end

local function snapshot_fail(message) error("snapshot: " .. message, 0) end

-- M.snapshot(opts, source, capture) -> {template_id, name}. opts: the sandbox's create options (its
-- cache_dir); source: {sandbox_id, template_dir (the layer it started from, or nil), name};
-- capture(path) writes the archive to path and returns its sha256 (hex), or raises.
function M.snapshot(opts, source, capture)
  local d = dirs(opts)
  ensure_dirs(d)
  local scratch = scratch_dir(d, "snapshot-")
  require("glsb.providers.local.reaper").record(scratch)
  local ok, res = pcall(function()
    local archive = scratch .. "/" .. M.SNAPSHOT_ARCHIVE
    local digest = capture(archive)
    local pmeta = source.template_dir and M.read_meta(source.template_dir)
    if source.template_dir and not pmeta then
      snapshot_fail("the template the sandbox started from is gone: " .. source.template_dir)
    end
    local id = codec.sha256("glsb-local-snapshot 1\n" .. digest .. "\n"
      .. tostring(pmeta and pmeta.id or "") .. "\n")
    local final = d.templates .. "/" .. id
    if M.read_meta(final) then return id end
    local layer = scratch .. "/layer"
    local mok, merr = run({ "mkdir", "-m", "0755", layer })
    if not mok then snapshot_fail("cannot create " .. layer .. ": " .. merr) end
    local rok, rerr = os.rename(archive, layer .. "/" .. M.SNAPSHOT_ARCHIVE)
    if not rok then snapshot_fail("cannot move the archive: " .. tostring(rerr)) end
    run({ "chmod", "0644", layer .. "/" .. M.SNAPSHOT_ARCHIVE })
    local site = source.template_dir and source.template_dir .. "/site"
    if site and fs.lstat(site) and fs.lstat(site).type == "dir" then
      -- hard links where the cache's file system takes them, else a copy (symlinks stay symlinks)
      local cok = run({ "cp", "-a", "-l", "--", site, layer .. "/site" }, 600)
      if not cok then
        fs.rmtree(layer .. "/site")
        local cok2, cerr = run({ "cp", "-a", "--", site, layer .. "/site" }, 600)
        if not cok2 then snapshot_fail("cannot copy the template's packages: " .. cerr) end
      end
    end
    local st = fs.lstat(layer .. "/" .. M.SNAPSHOT_ARCHIVE)
    local meta = {
      id = id, name = source.name, env = pmeta and pmeta.env, workdir = pmeta and pmeta.workdir,
      packages = pmeta and pmeta.packages, built_at = os.time(), base_template = pmeta and pmeta.id,
      snapshot = { sandbox_id = source.sandbox_id, bytes = st and st.size },
    }
    local wok, werr = fs.write_file_atomic(layer .. "/meta.json", cjson.encode(meta), 420)
    if not wok then snapshot_fail("cannot write meta.json: " .. tostring(werr)) end
    if not os.rename(layer, final) and not M.read_meta(final) then
      snapshot_fail("cannot move the layer into " .. final)
    end
    return id
  end)
  fs.rmtree(scratch)
  if not ok then error(res, 0) end
  record_name(d, source.name, res)
  return { template_id = res, name = source.name }
end

---------------------------------------------------------------------------
-- The builder
---------------------------------------------------------------------------

local Template = template.TemplateBuilder:extend("local", {
  -- declared once (glsb.options): what builds take from the host, and the sandbox limits of a build
  options = {
    builder = {
      cache_dir = { "string", "where layers are kept", default = "$XDG_CACHE_HOME/glsb or ~/.cache/glsb" },
      confine = { "string", "path of glsb-confine", default = "$GLSB_CONFINE, else next to the core" },
      python = { "string", "the build's interpreter", default = "/usr/bin/python3" },
      network = { "boolean", "builds may reach the network (pip from an index)", default = "false" },
      memory_mb = { "count", "memory limit of a build (MiB)", default = "1024" },
      disk_mb = { "count", "size of a build's /tmp (MiB)", default = "1024" },
      max_file_mb = { "count", "largest file a build may write (MiB)", default = "512" },
      allow_degraded = { "boolean", "build even if a kernel feature is missing", default = "false" },
      pip_find_links = { "string", "a directory of wheels (implies `--no-index`)" },
      pip_index_url = { "string", "pip `--index-url`" },
      build_timeout = { "seconds", "seconds a build may take; `<= 0`: none", default = "600" },
    },
  },
})
M.Template = Template

function Template:_init(opts)
  self.dirs = dirs(opts)
end

-- builder:ensure(spec): the base class's, after base_template is replaced by
-- the id its name or id resolves to now (so the hash covers the parent's
-- content, not a name that can be re-pointed).
function Template:ensure(spec)
  if type(spec) == "table" and type(spec.base_template) == "string" then
    local ref = spec.base_template
    local dir, err = M.resolve(ref, self.options)
    if not dir then
      errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD,
        "local: base_template '" .. ref .. "': " .. tostring(err))
    end
    local copy = {}
    for k, v in pairs(spec) do copy[k] = v end
    copy.base_template = dir:match("([^/]+)$")
    spec = copy
  end
  return template.TemplateBuilder.ensure(self, spec)
end

function Template:_find(spec, hash)
  local dir = self.dirs.templates .. "/" .. hash
  if M.read_meta(dir) then
    ensure_dirs(self.dirs)
    record_name(self.dirs, spec.name, hash)
    return { template_id = hash, name = spec.name, path = dir }
  end
  return nil
end

local UNSUPPORTED = { "base_image", "apt_packages", "start_cmd", "ready_cmd" }

local function provider_opts(self, spec)
  local p = {}
  for k, v in pairs(self.options) do p[k] = v end
  for k, v in pairs(spec.provider or {}) do p[k] = v end
  return p
end

-- The parent layer of spec (base_template is an id by now: see ensure) ->
-- dir, meta; nil without a base_template. Raises when it is gone.
local function parent_of(self, spec)
  local id = spec.base_template
  if id == nil then return nil end
  if not (#id == 64 and id:match("^%x+$")) then fail("local: base_template must be resolved to an id: " .. id) end
  local dir = self.dirs.templates .. "/" .. id
  local meta = M.read_meta(dir)
  if not meta then fail("local: base_template " .. id .. " not found in " .. self.dirs.base) end
  if meta.snapshot then
    fail("local: base_template " .. id .. " is a snapshot (sb:snapshot): a build starts from a template "
      .. "(its files are an archive only a sandbox unpacks); create a sandbox from the snapshot instead")
  end
  return dir, meta
end

-- env, workdir and packages of the layer: the parent's, overridden or added
-- to by the child's.
local function merged(spec, pmeta)
  if not pmeta then return spec.env, spec.workdir, spec.packages end
  local env = {}
  for k, v in pairs(type(pmeta.env) == "table" and pmeta.env or {}) do env[k] = v end
  for k, v in pairs(spec.env or {}) do env[k] = v end
  local pk, seen = {}, {}
  for _, list in ipairs({ type(pmeta.packages) == "table" and pmeta.packages or {}, spec.packages or {} }) do
    for _, p in ipairs(list) do
      if not seen[p] then seen[p] = true pk[#pk + 1] = p end
    end
  end
  table.sort(pk)
  local workdir = spec.workdir or (type(pmeta.workdir) == "string" and pmeta.workdir or nil)
  return next(env) and env or nil, workdir, #pk > 0 and pk or nil
end

local function build_input(spec, popts, pmeta)
  local files = {}
  for i, f in ipairs(spec.files or {}) do
    files[i] = { path = f.path, data = codec.b64encode(f.data), mode = f.mode }
  end
  local pip_args = {}
  if popts.pip_find_links then
    pip_args[#pip_args + 1] = "--find-links"
    pip_args[#pip_args + 1] = "/.glsb/find-links"
    if not popts.pip_index_url then pip_args[#pip_args + 1] = "--no-index" end
  end
  if popts.pip_index_url then
    pip_args[#pip_args + 1] = "--index-url"
    pip_args[#pip_args + 1] = popts.pip_index_url
  end
  local env, workdir = merged(spec, pmeta)
  return {
    files = files, packages = spec.packages or {}, pip_args = pip_args,
    run = spec.run or {}, env = env or {}, workdir = workdir, base = pmeta ~= nil,
  }
end

-- The build's output as it arrives -> one on_log entry per line (the base's _log: on_log and the
-- progress line), each with the step it belongs to. build.py starts each step with a line
-- "[glsb step I/N] TITLE"; the progress line then shows that step. A line longer than LINE_MAX comes in
-- pieces (the build is untrusted: the host holds no unbounded line).
M.LINE_MAX = 64 * 1024

local function log_lines(self, state)
  local partial = { stdout = {}, stderr = {} }
  local sizes = { stdout = 0, stderr = 0 }
  local function line(which, text)
    local i, n, title = text:match("^%[glsb step (%d+)/(%d+)%] (.*)$")
    if i and which == "stdout" then
      state.step, state.steps, state.title = tonumber(i), tonumber(n), title
      state.status = string.format("step %s/%s: %s", i, n, title)
      state.tracker:step(state.step) -- the span names the step's number only: a title holds commands
    end
    self:_log({ timestamp = time.iso(time.wall()), level = which == "stderr" and "warn" or "info",
      message = text, step = state.step, status = state.status })
  end
  local function push(which, data)
    local parts = partial[which]
    local pos = 1
    while true do
      local nl = data:find("\n", pos, true)
      if not nl then break end
      parts[#parts + 1] = data:sub(pos, nl - 1)
      line(which, table.concat(parts))
      parts = {}
      partial[which], sizes[which] = parts, 0
      pos = nl + 1
    end
    if pos <= #data then
      parts[#parts + 1] = data:sub(pos)
      sizes[which] = sizes[which] + #data - pos + 1
      if sizes[which] >= M.LINE_MAX then
        line(which, table.concat(parts))
        partial[which], sizes[which] = {}, 0
      end
    end
  end
  local function flush()
    for _, which in ipairs({ "stdout", "stderr" }) do
      if #partial[which] > 0 then line(which, table.concat(partial[which])) end
      partial[which], sizes[which] = {}, 0
    end
  end
  return push, flush
end

-- Runs build.py in a confined sandbox whose workspace is <scratch>/ws (kept:
-- no --cleanup), with the parent layer (if any) read-only at /.glsb/base.
-- Returns the build log or raises.
local function run_build(self, scratch, spec, popts, pdir, pmeta)
  local helper, herr = layout.find_helper(popts.confine)
  if not helper then fail(herr) end
  local stage = scratch .. "/stage"
  local ok, err = run({ "mkdir", "-m", "0755", stage })
  if not ok then fail("cannot create " .. stage .. ": " .. err) end
  local input = cjson.encode(build_input(spec, popts, pmeta))
  local wok, werr = fs.write_file_atomic(stage .. "/build.json", input, 420)
  if not wok then fail("cannot write the build input: " .. tostring(werr)) end
  run({ "chmod", "0755", scratch })
  local ro = { { layout.agent_dir(), layout.AGENT_DIR }, { stage, "/.glsb/build" } }
  if popts.pip_find_links then ro[#ro + 1] = { popts.pip_find_links, layout.FIND_LINKS_DIR } end
  if pdir then ro[#ro + 1] = { pdir, "/.glsb/base" } end
  local argv, config = layout.confine_argv {
    helper = helper, workspace = scratch .. "/ws", cleanup = false,
    program = { popts.python or "/usr/bin/python3", "-B", layout.AGENT_DIR .. "/build.py" },
    ro_binds = ro, env = { PYTHONDONTWRITEBYTECODE = "1" },
    opts = { network = popts.network, memory_mb = spec.memory_mb or popts.memory_mb,
      allow_degraded = popts.allow_degraded, disk_mb = popts.disk_mb, max_file_mb = popts.max_file_mb },
  }
  -- the options on stdin (--config-fd 0), then end of file (the build reads nothing); a session of its
  -- own, like a sandbox's (a Ctrl-C at the owner's terminal is not the build's)
  local p, serr = process.spawn { argv = argv, stdin = "pipe", stdout = "pipe", stderr = "pipe", fd3 = "pipe",
    setsid = true }
  if not p then fail("cannot start the build sandbox: " .. tostring(serr)) end
  require("glsb.providers.local.reaper").record(scratch, { supervisor = p.pid })
  local build_timeout = options.timeout(popts.build_timeout, 600)
  local deadline = loop.deadline(build_timeout)
  -- a glsb.template.build_step span per step build.py announces, the failing one marked when this
  -- raises (tracing; a shared no-op while it is off)
  local steps <close> = require("glsb.trace").steps("glsb.template.build_step")
  local state = { tracker = steps }
  local push, flush = log_lines(self, state)
  -- the build writes what it likes: the host keeps the last LOG_MAX bytes of each stream
  local out, errs, st = p:communicate(config, deadline, M.LOG_MAX, push)
  flush()
  if not out then
    p:kill("KILL")
    p:wait(loop.now() + 5)
    p:close()
    fail(string.format("the template build timed out after %gs%s", build_timeout or 0,
      state.status and (" (at " .. state.status .. ")") or ""))
  end
  local report = st.code ~= 0 and layout.read_report(p, loop.now() + 1) or nil
  p:close()
  local cut = (st.dropped_stdout or 0) + (st.dropped_stderr or 0)
  local log = (cut > 0 and string.format("[glsb: the build log was cut: %d earlier bytes dropped]\n", cut) or "")
    .. out .. errs
  if st.code ~= 0 then
    local why = report and report.ok == false and ("glsb-confine: " .. tostring(report.error)) or nil
    local at = state.status and not why and (" at " .. state.status) or ""
    -- the log's tail after the reason, when the build printed anything (glsb-confine may fail before it)
    fail("the template build failed" .. at .. (why and (" (" .. why .. ")") or "")
      .. (log ~= "" and (":\n" .. log:sub(-2000)) or ""),
      { exit = st, log = log, step = state.step })
  end
  return log
end

function Template:_build(spec, hash)
  for _, k in ipairs(UNSUPPORTED) do
    if spec[k] ~= nil then fail("local templates do not support " .. k) end
  end
  local popts = provider_opts(self, spec)
  local d = self.dirs
  local pdir, pmeta = parent_of(self, spec)
  ensure_dirs(d)
  local scratch = scratch_dir(d, "build-")
  local ok, res = pcall(function()
    local log = run_build(self, scratch, spec, popts, pdir, pmeta)
    local layer = scratch .. "/layer"
    -- <ws>/home is the host side of the build's /home/user: the path is ours (glsb-confine made it,
    -- the build cannot replace a mount point), everything below it is the build's and hostile: the
    -- site directory is taken without following any symlink (fs.move_dir_beneath), the rest of
    -- .glsb-layer removed without following any (fs.rmtree), home moved as a whole.
    local home = scratch .. "/ws/home"
    assert(run({ "mkdir", "-m", "0755", layer }))
    local rok, rerr = fs.move_dir_beneath(home, ".glsb-layer/site", layer .. "/site")
    if not rok then fail("the build's layer is refused: " .. tostring(rerr)) end
    rok, rerr = fs.rmtree(home .. "/.glsb-layer")
    if not rok then fail("the build's layer is refused: " .. tostring(rerr)) end
    rok, rerr = os.rename(home, layer .. "/home")
    if not rok then fail("cannot move the built home: " .. tostring(rerr)) end
    local env, workdir, pk = merged(spec, pmeta)
    local meta = {
      id = hash, name = spec.name, env = env, workdir = workdir,
      packages = pk, built_at = os.time(), base_template = spec.base_template,
    }
    local wok, werr = fs.write_file_atomic(layer .. "/meta.json", cjson.encode(meta), 420)
    if not wok then fail("cannot write meta.json: " .. tostring(werr)) end
    fs.write_file_atomic(layer .. "/build.log", log, 420)
    local final = d.templates .. "/" .. hash
    if not os.rename(layer, final) then
      -- someone else built the same spec meanwhile: theirs is as good as ours
      if not M.read_meta(final) then fail("cannot move the layer into " .. final) end
    end
    return final
  end)
  fs.rmtree(scratch)
  if not ok then error(res, 0) end
  record_name(self.dirs, spec.name, hash)
  return { template_id = hash, name = spec.name, path = res }
end

---------------------------------------------------------------------------
-- List / delete
---------------------------------------------------------------------------

-- {hash = {names...}} from local/names/ (each file holds the hash its name last pointed to).
local function names_by_hash(d)
  local out = {}
  for _, name in ipairs(fs.listdir(d.names) or {}) do
    local id = (read_file(d.names .. "/" .. name) or ""):match("^(%x+)")
    if id and name:match("^[%w][%w._-]*$") then
      out[id] = out[id] or {}
      table.insert(out[id], name)
    end
  end
  for _, list in pairs(out) do table.sort(list) end
  return out
end

-- builder:list() -> {name, names, template_id, built_at, packages, base_template, path}, one per
-- layer in the cache (names: every name pointing to it; name: the first, else the one it was built
-- as), sorted by name then id.
function Template:_list()
  local d = self.dirs
  local names = names_by_hash(d)
  local out = {}
  for _, id in ipairs(fs.listdir(d.templates) or {}) do
    local meta = #id == 64 and id:match("^%x+$") and M.read_meta(d.templates .. "/" .. id)
    if meta then
      local list = names[id] or {}
      out[#out + 1] = { name = list[1] or meta.name, names = list, template_id = id, built_at = meta.built_at,
        packages = meta.packages, base_template = meta.base_template, path = d.templates .. "/" .. id }
    end
  end
  table.sort(out, function(a, b)
    if tostring(a.name) ~= tostring(b.name) then return tostring(a.name) < tostring(b.name) end
    return a.template_id < b.template_id
  end)
  return out
end

-- builder:delete(name_or_id) -> true when a layer was deleted, false when nothing has that name or id.
-- The layer goes, with every name pointing to it (as E2B deletes a template by any of its aliases).
-- It is first renamed out of place (a sandbox created meanwhile finds it whole or not at all), then
-- removed; a sandbox still running from it loses the layer's files: delete what no sandbox uses.
-- Children built on it are self-contained and stay.
function Template:_delete(name)
  local d = self.dirs
  local id = name
  if not (#name == 64 and name:match("^%x+$")) then
    if not name:match("^[%w][%w._-]*$") then return false end
    id = (read_file(d.names .. "/" .. name) or ""):match("^(%x+)")
    if not id then return false end
  end
  for _, n in ipairs(names_by_hash(d)[id] or {}) do os.remove(d.names .. "/" .. n) end
  if name ~= id then os.remove(d.names .. "/" .. name) end
  local dir = d.templates .. "/" .. id
  if not M.read_meta(dir) then return false end
  local scratch = scratch_dir(d, "delete-")
  require("glsb.providers.local.reaper").record(scratch)
  local ok, rerr = os.rename(dir, scratch .. "/layer")
  if not ok then
    fs.rmtree(scratch)
    fail("cannot delete the template " .. id .. ": " .. tostring(rerr))
  end
  local rok, err = fs.rmtree(scratch)
  if not rok then fail("cannot remove the deleted template's files in " .. scratch .. ": " .. tostring(err)) end
  return true
end

---------------------------------------------------------------------------
-- Export / import
---------------------------------------------------------------------------

-- Runs body() as a loop task; a failure is raised as a TemplateBuildError (a glsb error kept as is).
local function as_template_op(body)
  return loop.run(function()
    local ok, res = pcall(body)
    if ok then return res end
    error(errors.wrap(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, res), 0)
  end)
end

-- Lists a directory tree: array of {type = "f"|"d"|"l", mode, rel, target}.
local function walk(dir)
  local ok, out = run({ "find", dir, "-mindepth", "1", "-printf", "%y\\t%m\\t%P\\t%l\\0" })
  if not ok then fail("cannot list " .. dir .. ": " .. out) end
  local entries = {}
  for rec in out:gmatch("([^%z]+)%z") do
    local y, mode, rel, target = rec:match("^(%a)\t(%d+)\t([^\t]*)\t(.*)$")
    if y then entries[#entries + 1] = { type = y, mode = tonumber(mode, 8), rel = rel, target = target } end
  end
  table.sort(entries, function(a, b) return a.rel < b.rel end)
  return entries
end

-- builder:export(id_or_name, path) -> path of a tar.gz of the layer.
function Template:export(id, path)
  local function body()
    local dir, err = M.resolve(id, self.options)
    if not dir then fail(err) end
    local entries = {}
    for _, e in ipairs(walk(dir)) do
      if e.type == "d" then
        entries[#entries + 1] = { name = e.rel, type = "dir", mode = e.mode }
      elseif e.type == "l" then
        entries[#entries + 1] = { name = e.rel, type = "symlink", target = e.target, mode = 511 }
      elseif e.type == "f" then
        local data = read_file(dir .. "/" .. e.rel)
        if not data then fail("cannot read " .. dir .. "/" .. e.rel) end
        entries[#entries + 1] = { name = e.rel, type = "file", data = data, mode = e.mode }
      end
    end
    local tgz = fs.tar_pack(entries, { gzip = true })
    local ok, werr = fs.write_file_atomic(path, tgz, 420)
    if not ok then fail("cannot write " .. path .. ": " .. tostring(werr)) end
    return path
  end
  return as_template_op(body)
end

-- builder:import(path) -> ref {template_id, name, path}; imported = false
-- when the layer was already there.
function Template:import(path)
  local function body()
    local data = read_file(path)
    if not data then fail("cannot read " .. tostring(path)) end
    local entries, uerr = fs.tar_unpack(data, { max_bytes = 4 * 1024 * 1024 * 1024 })
    if not entries then fail("not a template archive: " .. tostring(uerr)) end
    local meta
    for _, e in ipairs(entries) do
      if e.name == "meta.json" and e.type == "file" then meta = cjson.decode(e.data) end
    end
    if type(meta) ~= "table" or type(meta.id) ~= "string" or not (#meta.id == 64 and meta.id:match("^%x+$")) then
      fail("not a template archive: no valid meta.json")
    end
    local d = self.dirs
    ensure_dirs(d)
    local final = d.templates .. "/" .. meta.id
    if M.read_meta(final) then
      record_name(self.dirs, meta.name, meta.id)
      return { template_id = meta.id, name = meta.name, path = final, imported = false }
    end
    local scratch = scratch_dir(d, "import-")
    require("glsb.providers.local.reaper").record(scratch)
    local ok, res = pcall(function()
      local layer = scratch .. "/layer"
      local mkdirs = { "mkdir", "-p", layer }
      for _, e in ipairs(entries) do
        if e.type == "dir" then mkdirs[#mkdirs + 1] = layer .. "/" .. e.name end
      end
      assert(run(mkdirs))
      local modes = {}
      for _, e in ipairs(entries) do
        local target = layer .. "/" .. e.name
        if e.type == "file" then
          local f = io.open(target, "wb")
          if not f then fail("cannot write " .. target) end
          f:write(e.data)
          f:close()
        elseif e.type == "symlink" then
          assert(run({ "ln", "-s", e.target, target }))
        elseif e.type ~= "dir" then
          fail("unsupported entry in a template archive: " .. e.name .. " (" .. tostring(e.type) .. ")")
        end
        if e.type ~= "symlink" then
          local m = string.format("%o", (e.mode or 420) & 493) -- no setuid/setgid/sticky, no group/other write
          modes[m] = modes[m] or { "chmod", m }
          table.insert(modes[m], target)
        end
      end
      for _, argv in pairs(modes) do assert(run(argv)) end
      assert(run({ "chmod", "0755", layer }))
      if not os.rename(layer, final) and not M.read_meta(final) then
        fail("cannot move the imported layer into " .. final)
      end
    end)
    fs.rmtree(scratch)
    if not ok then error(res, 0) end
    record_name(self.dirs, meta.name, meta.id)
    return { template_id = meta.id, name = meta.name, path = final, imported = true }
  end
  return as_template_op(body)
end

return M
