-- glsb.template: the provider-agnostic half of template building ("build
-- once, create many"): TemplateSpec validation and normalization, a canonical
-- content hash, and the TemplateBuilder base class whose ensure(spec) finds an
-- identical existing template or builds one.
--
-- A provider's builder only implements two hooks (PROVIDERS.md):
--
--   local template = require "glsb.template"
--   local Template = template.TemplateBuilder:extend("myprov")
--   function Template:_init(opts) ... end             -- optional: keep credentials etc.
--   function Template:_find(spec, hash) -> ref | nil  -- optional: an existing template
--                                                     -- built from this content hash
--   function Template:_build(spec, hash) -> ref       -- REQUIRED: build it; ref is a table
--                                                     -- (e.g. {template_id = ...})
--
-- spec is normalized (see M.normalize) and hash is M.hash(spec): the sha256 of
-- the canonical serialization of everything but `name`, so the same content
-- under two names shares a hash and any change of content changes it.
-- Failures raise TemplateBuildError with stage template_build.

local errors = require "glsb.errors"
local packages = require "glsb.packages"
local options = require "glsb.options"
local output = require "glsb.output"
local Stage = require("glsb.models").Stage
local trace_seam = require "glsb.trace.seam"
local progress = require "glsb.progress"
-- the environment asks for spans: glsb.trace registers itself with the seam (which cannot load it)
if trace_seam.on then require "glsb.trace" end

local M = {}

local HASH_VERSION = "glsb-template-v1"

local function fail(message, cause)
  errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, message, cause)
end

---------------------------------------------------------------------------
-- Canonical serialization
---------------------------------------------------------------------------

local function escape(s)
  return '"' .. s:gsub('[%c"\\\128-\255]', function(c) return string.format("\\x%02x", c:byte()) end) .. '"'
end

local function is_array(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

local function ser(v, out, depth)
  if depth > 32 then error("canonical: nesting too deep (cycle?)", 0) end
  local t = type(v)
  if t == "string" then
    out[#out + 1] = escape(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then error("canonical: non-finite number", 0) end
    if math.type(v) == "integer" or (v == math.floor(v) and math.abs(v) < 2 ^ 53) then
      out[#out + 1] = string.format("%d", math.tointeger(v) or v)
    else
      out[#out + 1] = string.format("%.17g", v)
    end
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "table" then
    if next(v) ~= nil and is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        ser(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then error("canonical: map keys must be strings, got " .. type(k), 0) end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = escape(k)
        out[#out + 1] = ":"
        ser(v[k], out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  else
    error("canonical: cannot serialize a " .. t, 0)
  end
end

-- template.canonical(value) -> string: sorted keys, arrays in order, integers
-- without a fraction, every byte outside printable ASCII escaped. Equal
-- values give equal strings whatever the table construction order.
function M.canonical(v)
  local out = {}
  ser(v, out, 0)
  return table.concat(out)
end

---------------------------------------------------------------------------
-- TemplateSpec
---------------------------------------------------------------------------

-- A bad spec is misuse: a plain argument error (at the user's line), never a TemplateBuildError.
local function spec_error(msg) options.arg_error("template spec: %s", msg) end

local FIELDS = {
  name = true, base_image = true, base_template = true, packages = true, apt_packages = true,
  files = true, run = true, env = true, workdir = true, start_cmd = true, ready_cmd = true,
  cpu = true, memory_mb = true, provider = true,
}

local function check_string(spec, key)
  local v = spec[key]
  if v ~= nil and (type(v) ~= "string" or v == "") then
    spec_error(key .. " must be a non-empty string")
  end
  return v
end

local function check_relative_or_absolute(path, what)
  if type(path) ~= "string" or path == "" then spec_error(what .. " must be a non-empty string") end
  if path:find("%z") then spec_error(what .. " contains a NUL byte") end
  for part in path:gmatch("[^/]+") do
    if part == ".." then spec_error(what .. " must not contain '..': " .. path) end
  end
end

local function sorted_unique(list)
  local seen, out = {}, {}
  for _, v in ipairs(list) do
    if not seen[v] then seen[v] = true out[#out + 1] = v end
  end
  table.sort(out)
  return out
end

local function array_of(spec, key)
  local v = spec[key]
  if v == nil then return nil end
  if type(v) ~= "table" or not is_array(v) then spec_error(key .. " must be an array") end
  if #v == 0 then return nil end
  return v
end

-- template.normalize(spec) -> a new, validated spec in canonical form: empty
-- lists and maps dropped, packages and apt_packages sorted and deduplicated,
-- files sorted by path. A bad spec is misuse: a plain argument error naming the field.
function M.normalize(spec)
  if type(spec) ~= "table" then options.arg_error("template spec must be a table, got %s", type(spec)) end
  for k in pairs(spec) do
    if not FIELDS[k] then
      local near = type(k) == "string" and options.closest(k, FIELDS)
      spec_error("unknown field '" .. tostring(k) .. "'" .. (near and (" (did you mean '" .. near .. "'?)") or ""))
    end
  end
  local out = {}
  local name = spec.name
  if type(name) ~= "string" or not name:match("^[%w][%w._-]*$") or #name > 128 then
    spec_error("name must be 1-128 characters of letters, digits, '.', '_' or '-'")
  end
  out.name = name
  out.base_image = check_string(spec, "base_image")
  out.base_template = check_string(spec, "base_template")
  if out.base_image and out.base_template then spec_error("give base_image or base_template, not both") end

  local pk = array_of(spec, "packages")
  if pk then
    for i, p in ipairs(pk) do
      local ok, why = packages.check(p)
      if not ok then spec_error(string.format("packages[%d]: %s", i, why)) end
    end
    out.packages = sorted_unique(pk)
  end

  local apt = array_of(spec, "apt_packages")
  if apt then
    for i, p in ipairs(apt) do
      local ok = type(p) == "string"
          and (p:match("^[a-z0-9][a-z0-9+.-]+$") or p:match("^[a-z0-9][a-z0-9+.-]+=[%w.+:~-]+$"))
      if not ok then
        spec_error(string.format("apt_packages[%d] is not a Debian package name: %s", i, tostring(p)))
      end
    end
    out.apt_packages = sorted_unique(apt)
  end

  local files = array_of(spec, "files")
  if files then
    local norm, seen = {}, {}
    for i, f in ipairs(files) do
      if type(f) ~= "table" then spec_error(string.format("files[%d] must be a table", i)) end
      local path = f.path or f.filename
      check_relative_or_absolute(path, string.format("files[%d].path", i))
      if type(f.data) ~= "string" then spec_error(string.format("files[%d].data must be a string", i)) end
      if f.mode ~= nil and math.type(f.mode) ~= "integer" then
        spec_error(string.format("files[%d].mode must be an integer", i))
      end
      if seen[path] then spec_error("duplicate file " .. path) end
      seen[path] = true
      norm[#norm + 1] = { path = path, data = f.data, mode = f.mode }
    end
    table.sort(norm, function(a, b) return a.path < b.path end)
    out.files = norm
  end

  local run = array_of(spec, "run")
  if run then
    for i, cmd in ipairs(run) do
      if type(cmd) ~= "string" or cmd == "" then
        spec_error(string.format("run[%d] must be a non-empty string", i))
      end
    end
    out.run = { table.unpack(run) }
  end

  if spec.env ~= nil then
    if type(spec.env) ~= "table" then spec_error("env must be a table") end
    local env = {}
    for k, v in pairs(spec.env) do
      if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
        spec_error("bad env name " .. tostring(k))
      end
      if type(v) ~= "string" then spec_error("env." .. k .. " must be a string") end
      env[k] = v
    end
    if next(env) then out.env = env end
  end

  out.workdir = check_string(spec, "workdir")
  if out.workdir and out.workdir:sub(1, 1) ~= "/" then spec_error("workdir must be an absolute path") end
  if out.workdir then check_relative_or_absolute(out.workdir, "workdir") end
  out.start_cmd = check_string(spec, "start_cmd")
  out.ready_cmd = check_string(spec, "ready_cmd")

  if spec.cpu ~= nil and (type(spec.cpu) ~= "number" or spec.cpu <= 0 or spec.cpu ~= spec.cpu) then
    spec_error("cpu must be a number > 0")
  end
  out.cpu = spec.cpu
  if spec.memory_mb ~= nil and (math.type(spec.memory_mb) ~= "integer" or spec.memory_mb <= 0) then
    spec_error("memory_mb must be an integer > 0")
  end
  out.memory_mb = spec.memory_mb

  if spec.provider ~= nil then
    if type(spec.provider) ~= "table" then spec_error("provider must be a table") end
    local ok, err = pcall(M.canonical, spec.provider)
    if not ok then spec_error("provider options must be plain data: " .. tostring(err)) end
    if next(spec.provider) then out.provider = spec.provider end
  end
  return out
end

local function default_hasher(s)
  local ok, core = pcall(require, "glsb.core")
  if not ok or type(core) ~= "table" or type(core.sha256) ~= "function" then
    fail("template hash needs glsb.core.sha256; build the C core first (make)", (not ok) and core or nil)
  end
  return core.sha256(s)
end

-- template.content(spec) -> the canonical string the hash covers (a
-- normalized spec without its name, prefixed by the format version).
function M.content(spec)
  local norm = M.normalize(spec)
  norm.name = nil
  return HASH_VERSION .. "\n" .. M.canonical(norm)
end

-- template.hash(spec[, hasher]) -> hex sha256 of template.content(spec).
-- hasher(string) -> hex may be injected (tests); default glsb.core.sha256.
function M.hash(spec, hasher)
  return (hasher or default_hasher)(M.content(spec))
end

---------------------------------------------------------------------------
-- TemplateBuilder
---------------------------------------------------------------------------

local TemplateBuilder = {}
TemplateBuilder.__index = TemplateBuilder
TemplateBuilder.provider_name = "base"
M.TemplateBuilder = TemplateBuilder

-- Options every builder takes; a provider's builder declares its own in its `options.builder` field
-- (and its sandbox's `options.provider` ones when it shares them: credentials, endpoints).
TemplateBuilder.options = {
  builder = {
    on_log = { "function", "called with each build log entry `{timestamp, level, message, step?}`" },
    progress = { "boolean", "one progress line on stderr while a build runs (glsb.progress)",
      default = "stderr is a terminal" },
  },
}

-- Class:extend(provider_name[, fields]) -> subclass with a dot-callable
-- constructor Sub.new(opts).
function TemplateBuilder.extend(parent, provider_name, fields)
  local cls = fields or {}
  cls.__index = cls
  if cls.__tostring == nil then cls.__tostring = parent.__tostring end
  cls.super = parent
  if provider_name ~= nil then cls.provider_name = provider_name end
  cls.new = function(opts) return M.new(cls, opts) end
  return setmetatable(cls, { __index = parent })
end

-- schema(cls) -> the merged builder options of a builder class (declared down the class chain).
function M.schema(cls)
  return options.collect(cls, "builder", "provider")
end

function M.new(cls, opts)
  opts = options.check(opts, M.schema(cls), "template(" .. tostring(cls.provider_name) .. ")")
  local self = setmetatable({ provider = cls.provider_name, options = opts }, cls)
  self.on_log = opts.on_log
  if opts.progress == nil then self.progress = progress.tty() == true else self.progress = opts.progress end
  if cls._init then cls._init(self, self.options) end
  return self
end

TemplateBuilder.__tostring = function(self)
  return string.format("TemplateBuilder(%s)", tostring(self.provider))
end

-- builder:_log(entry): a build log line from the provider ({message, level?, step?, timestamp?}, or a
-- string): to on_log, and to the progress line when it is on. Providers call it as their build runs.
function TemplateBuilder:_log(entry)
  if type(entry) == "string" then entry = { message = entry } end
  self._log_lines = (self._log_lines or 0) + 1
  if self.on_log then output.call_back(self.on_log, entry) end
  self:_progress(self._building or "", entry.status or "building")
end

-- builder:_progress(name, status[, final]): the one progress line (glsb.progress, on stderr) when progress
-- is on: the status (a provider says "step 2/5: pip install x" where it knows its steps) and the count of
-- log lines so far.
function TemplateBuilder:_progress(name, status, final)
  if not self.progress then return end
  local line = self._line
  if not line or line.label ~= tostring(self.provider) .. " template " .. name then
    line = progress.line { enabled = true, label = tostring(self.provider) .. " template " .. name }
    self._line = line
  end
  local text = string.format("%s, %d log lines", status, self._log_lines or 0)
  -- a new status is drawn at once (a step must not be skipped by the throttle); more log lines are not
  if final then line:done(text) else line:show(text, status ~= self._shown_status) end
  self._shown_status = not final and status or nil
end

local function is_cancellation(err)
  local loop = package.loaded["glsb.loop"]
  return type(loop) == "table" and loop.is_cancelled and loop.is_cancelled(err) == true
end

local function ensure_body(self, norm)
  local h = M.hash(norm, self.hasher)
  if type(self._find) == "function" then
    local ref = self:_find(norm, h)
    if ref ~= nil then return { ref = ref, built = false, hash = h } end
  end
  if type(self._build) ~= "function" then
    fail(string.format("provider '%s' cannot build templates", tostring(self.provider)))
  end
  self._building, self._log_lines = norm.name, 0
  local loop = require "glsb.loop"
  local started = loop.now()
  self:_progress(norm.name, "building")
  local ok, ref = pcall(self._build, self, norm, h)
  self:_progress(norm.name, ok and string.format("built in %.1fs", loop.now() - started) or "failed", true)
  self._building = nil
  if not ok then error(ref, 0) end
  if type(ref) ~= "table" then
    fail(string.format("provider '%s' returned no template reference", tostring(self.provider)))
  end
  return { ref = ref, built = true, hash = h }
end

local function run_wrapped(fn, ...)
  local args = table.pack(...)
  return require("glsb.loop").run(function()
    local res = table.pack(pcall(fn, table.unpack(args, 1, args.n)))
    if res[1] then return table.unpack(res, 2, res.n) end
    if is_cancellation(res[2]) then error(res[2], 0) end
    error(errors.wrap(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, res[2]), 0)
  end)
end

-- builder:ensure(spec) -> {ref = {...}, built = bool, hash = hex}. built is false when a template with
-- identical content already existed. A bad spec is an argument error; a failed build TemplateBuildError.
function TemplateBuilder:ensure(spec)
  local norm = M.normalize(spec)
  -- tracing's choke point: a span for ensure when tracing is on (one field read when off)
  if trace_seam.on then
    return trace_seam.operation("glsb.template.ensure", self, { ["glsb.template.name"] = norm.name },
      run_wrapped, ensure_body, self, norm)
  end
  return run_wrapped(ensure_body, self, norm)
end

-- builder:list() -> array of {name, template_id, hash?, ...}: the templates this builder can use.
function TemplateBuilder:list()
  if type(self._list) ~= "function" then
    fail(string.format("provider '%s' cannot list templates", tostring(self.provider)))
  end
  return run_wrapped(self._list, self)
end

-- builder:delete(name_or_id) -> true when it was deleted, false when there was nothing by that name.
function TemplateBuilder:delete(name)
  if type(name) ~= "string" or name == "" then options.arg_error("delete: name must be a non-empty string") end
  if type(self._delete) ~= "function" then
    fail(string.format("provider '%s' cannot delete templates", tostring(self.provider)))
  end
  return run_wrapped(self._delete, self, name) == true
end

return M
