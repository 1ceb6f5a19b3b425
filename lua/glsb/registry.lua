-- glsb.registry: finds provider modules by name.
--
-- A provider is the Lua module "glsb.providers.<name>" returning a table with
-- at least `name` and `Sandbox` (a class with .create(opts)), optionally
-- `Template` (a class with .new(opts) and :ensure(spec)).
--
-- Where "glsb.providers.<name>" is looked up, first match wins:
--   1. directories added with registry.add_path(dir) (most recent first)
--   2. the directories in GLSB_PATH (colon-separated, in order): user providers
--      laid out as <dir>/<name>/init.lua or <dir>/<name>.lua
--   3. the source tree: <dir of glsb/init.lua>/../../providers (same layout), so
--      a checkout works without installing
--   4. package.path, as usual: the installed layout keeps providers at
--      <share>/lua/5.4/glsb/providers/<name>/init.lua
-- 1-3 are one package.searchers entry, inserted once, right after the preload
-- searcher. Submodules follow the same layout: "glsb.providers.e2b.template"
-- is <dir>/e2b/template.lua (or <dir>/e2b/template/init.lua).

local M = {}

local PREFIX = "glsb.providers."
local NAME_PATTERN = "^[%w_][%w_-]*$"

local extra_dirs = {}     -- registry.add_path, most recent first

local function this_dir()
  local src = debug.getinfo(1, "S").source
  if src:sub(1, 1) ~= "@" then return nil end
  local dir = src:sub(2):match("^(.*)/[^/]*$")
  return dir or "."
end

-- <checkout>/providers, from <checkout>/lua/glsb: spelled without "..", as glsb-lua registers the folder
-- of the providers' bytecode (src/core/load.c)
local SOURCE_PROVIDERS = (function()
  local dir = this_dir()
  if not dir then return nil end
  local top, a, b = dir:match("^(.*)/([^/]+)/([^/]+)$")
  if top and a ~= "." and a ~= ".." and b ~= "." and b ~= ".." then return top .. "/providers" end
  return dir .. "/../../providers"
end)()

local function split_path(s)
  local out = {}
  if type(s) ~= "string" then return out end
  for dir in s:gmatch("[^:]+") do out[#out + 1] = dir end
  return out
end

-- registry.search_dirs() -> the directories of steps 1-3, in order.
function M.search_dirs()
  local dirs = {}
  for _, d in ipairs(extra_dirs) do dirs[#dirs + 1] = d end
  for _, d in ipairs(split_path(os.getenv("GLSB_PATH"))) do dirs[#dirs + 1] = d end
  if SOURCE_PROVIDERS then dirs[#dirs + 1] = SOURCE_PROVIDERS end
  return dirs
end

-- registry.add_path(dir): search dir before GLSB_PATH (tests, embedders).
function M.add_path(dir)
  if type(dir) ~= "string" or dir == "" then error("registry.add_path: directory expected", 2) end
  table.insert(extra_dirs, 1, dir)
end

-- registry.remove_path(dir): undo add_path.
function M.remove_path(dir)
  for i, d in ipairs(extra_dirs) do
    if d == dir then table.remove(extra_dirs, i) return true end
  end
  return false
end

local function readable(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- loadfile, from the module's precompiled bytecode when glsb-lua made one (src/core/load.c)
local function load_file(path)
  local ok, core = pcall(require, "glsb.core")
  return (ok and core.loadfile or loadfile)(path)
end

-- The searcher: resolves "glsb.providers.*" from search_dirs().
local function searcher(modname)
  if modname:sub(1, #PREFIX) ~= PREFIX then return nil end
  local rel = modname:sub(#PREFIX + 1):gsub("%.", "/")
  if rel == "" then return nil end
  local tried = {}
  for _, dir in ipairs(M.search_dirs()) do
    for _, cand in ipairs({ dir .. "/" .. rel .. ".lua", dir .. "/" .. rel .. "/init.lua" }) do
      if readable(cand) then
        local chunk, err = load_file(cand)
        if not chunk then
          error(string.format("error loading module '%s' from file '%s':\n\t%s", modname, cand, err), 0)
        end
        return chunk, cand
      end
      tried[#tried + 1] = "no file '" .. cand .. "'"
    end
  end
  return table.concat(tried, "\n\t")
end
M.searcher = searcher

-- registry.install_searcher(): idempotent.
function M.install_searcher()
  for _, s in ipairs(package.searchers) do
    if s == searcher then return end
  end
  table.insert(package.searchers, 2, searcher)
end

M.install_searcher()

---------------------------------------------------------------------------
-- Known names (for the "unknown provider" message)
---------------------------------------------------------------------------

local function list_dir(dir)
  if not io.popen then return {} end
  local p = io.popen("ls -1A -- " .. require("glsb.shell").quote(dir) .. " 2>/dev/null")
  if not p then return {} end
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  return out
end

local function scan_provider_dir(dir, into)
  for _, entry in ipairs(list_dir(dir)) do
    local stem = entry:match("^(.-)%.lua$")
    if stem and stem ~= "init" and stem:match(NAME_PATTERN) then
      into[stem] = true
    elseif entry:match(NAME_PATTERN) and readable(dir .. "/" .. entry .. "/init.lua") then
      into[entry] = true
    end
  end
end

local registered = {}

-- registry.known() -> sorted array of provider names that can be found.
function M.known()
  local names = {}
  for _, dir in ipairs(M.search_dirs()) do scan_provider_dir(dir, names) end
  for template in package.path:gmatch("[^;]+") do
    local prefix = template:match("^(.-)%?")
    if prefix then scan_provider_dir(prefix .. "glsb/providers", names) end
  end
  for _, t in ipairs({ package.loaded, package.preload }) do
    for k in pairs(t) do
      if type(k) == "string" and k:sub(1, #PREFIX) == PREFIX then
        local n = k:sub(#PREFIX + 1)
        if n:match(NAME_PATTERN) then names[n] = true end
      end
    end
  end
  for n in pairs(registered) do names[n] = true end
  local out = {}
  for n in pairs(names) do out[#out + 1] = n end
  table.sort(out)
  return out
end

---------------------------------------------------------------------------
-- Lookup
---------------------------------------------------------------------------

local function check_module(name, mod)
  if type(mod) ~= "table" then
    error(string.format("glsb: provider '%s' did not return a table", name), 0)
  end
  if type(mod.Sandbox) ~= "table" or type(mod.Sandbox.create) ~= "function" then
    error(string.format("glsb: provider '%s' has no Sandbox class with create(opts)", name), 0)
  end
  -- its hooks are all defined once the module has run: a required one missing is said now, by name
  require("glsb.sandbox").check_hooks(mod.Sandbox)
  if mod.name == nil then mod.name = name end
  return mod
end

-- registry.register(name, module): make a provider available under `name`
-- without a file (embedders, tests).
function M.register(name, mod)
  if type(name) ~= "string" or not name:match(NAME_PATTERN) then
    error("registry.register: bad provider name " .. tostring(name), 2)
  end
  package.loaded[PREFIX .. name] = check_module(name, mod)
  registered[name] = true
  return mod
end

-- registry.unregister(name): forget a registered or loaded provider.
function M.unregister(name)
  package.loaded[PREFIX .. name] = nil
  registered[name] = nil
end

-- registry.lazy_template(mod, modname) -> mod, whose mod.Template is require(modname).Template, loaded on
-- first use: a provider's module stays cheap to load for users who never build templates.
function M.lazy_template(mod, modname)
  return setmetatable(mod, { __index = function(t, k)
    if k ~= "Template" then return nil end
    local T = require(modname).Template
    rawset(t, "Template", T)
    return T
  end })
end

-- registry.get(name) -> provider module. An unknown name raises an error that
-- lists the known ones; a provider that fails to load raises its own error.
function M.get(name)
  if type(name) ~= "string" or not name:match(NAME_PATTERN) then
    require("glsb.options").arg_error("glsb: provider name must be a word (letters, digits, '_' or '-'), got %s",
      tostring(name))
  end
  local modname = PREFIX .. name
  local ok, mod = pcall(require, modname)
  if not ok then
    if type(mod) == "string" and mod:find("module '" .. modname .. "' not found", 1, true) then
      local known = M.known()
      require("glsb.options").arg_error("glsb: unknown provider '%s' (known: %s)", name,
        #known > 0 and table.concat(known, ", ") or "none found; set GLSB_PATH")
    end
    error(mod, 0)
  end
  return check_module(name, mod)
end

return M
