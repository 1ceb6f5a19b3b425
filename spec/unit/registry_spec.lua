-- glsb.registry and glsb.provider/create/template: lookup, GLSB_PATH, source tree, unknown names.
local registry = require "glsb.registry"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local PROVIDER_SRC = [[
local M = { name = "%s" }
M.Sandbox = { create = function(opts) return { provider = "%s", opts = opts } end }
M.Template = { new = function(opts) return { kind = "builder", opts = opts } end }
return M
]]

describe("glsb.registry #unit", function()
  local dir

  setup(function()
    dir = sh("mktemp -d /tmp/glsb-registry-XXXXXX"):gsub("%s+$", "")
    assert(sh("mkdir -p " .. dir .. "/dirprov " .. dir .. "/users"))
    write(dir .. "/dirprov/init.lua", PROVIDER_SRC:format("dirprov", "dirprov"))
    write(dir .. "/dirprov/template.lua", "return { recipe = 'dirprov-template' }\n")
    write(dir .. "/flatprov.lua", PROVIDER_SRC:format("flatprov", "flatprov"))
    write(dir .. "/broken.lua", "return {{{ syntax error\n")
    write(dir .. "/shapeless.lua", "return { name = 'shapeless' }\n")
    write(dir .. "/users/userprov.lua", PROVIDER_SRC:format("userprov", "userprov"))
    registry.add_path(dir)
  end)

  teardown(function()
    registry.remove_path(dir)
    for _, n in ipairs({ "dirprov", "dirprov.template", "flatprov", "broken", "shapeless" }) do
      package.loaded["glsb.providers." .. n] = nil
    end
    if dir and dir:match("^/tmp/glsb%-registry%-") then os.execute("rm -rf " .. dir) end
  end)

  it("require 'glsb' loads no provider module", function()
    local out = sh([[cd "$PWD" && lua5.4 -e 'package.path="lua/?.lua;lua/?/init.lua;"..package.path
      require "glsb"
      for k in pairs(package.loaded) do if k:find("^glsb%.providers") or k == "glsb.loop" then print(k) end end
      print("done")' 2>&1]])
    assert.are.equal("done\n", out)
  end)

  it("finds <dir>/<name>/init.lua, <dir>/<name>.lua and submodules", function()
    local glsb = require "glsb"
    local p = glsb.provider("dirprov")
    assert.are.equal("dirprov", p.name)
    assert.are.equal("dirprov-template", require("glsb.providers.dirprov.template").recipe)
    assert.are.equal("flatprov", glsb.provider("flatprov").name)
  end)

  it("create and template go through the provider module", function()
    local glsb = require "glsb"
    local sb = glsb.create("flatprov", { x = 1 })
    assert.are.same({ provider = "flatprov", opts = { x = 1 } }, sb)
    local b = glsb.template("dirprov", { api_key = "k" })
    assert.are.same({ kind = "builder", opts = { api_key = "k" } }, b)
  end)

  it("create(nil) means the local provider", function()
    local glsb = require "glsb"
    local saved = package.loaded["glsb.providers.local"]
    package.loaded["glsb.providers.local"] = {
      name = "local", Sandbox = { create = function(opts) return { which = "local", opts = opts } end } }
    local ok, sb = pcall(glsb.create, nil, { language = "python" })
    package.loaded["glsb.providers.local"] = saved
    assert.is_true(ok, tostring(sb))
    assert.are.equal("local", sb.which)
  end)

  it("an unknown name lists the known providers", function()
    local glsb = require "glsb"
    local ok, err = pcall(glsb.provider, "nope")
    assert.is_false(ok)
    assert.truthy(err:find("unknown provider 'nope'", 1, true), err)
    assert.truthy(err:find("dirprov", 1, true), err)
    assert.truthy(err:find("flatprov", 1, true), err)
    assert.is_nil(err:find("template", 1, true), "submodules are not providers: " .. err)
    local ok2, err2 = pcall(glsb.create, "nope")
    assert.is_false(ok2)
    assert.truthy(err2:find("unknown provider 'nope'", 1, true))
  end)

  it("reports a provider's own load error instead of 'unknown'", function()
    local ok, err = pcall(registry.get, "broken")
    assert.is_false(ok)
    assert.is_nil(err:find("unknown provider", 1, true), err)
    assert.truthy(err:find("broken.lua", 1, true), err)
  end)

  it("rejects modules without a Sandbox class and bad names", function()
    local ok, err = pcall(registry.get, "shapeless")
    assert.is_false(ok)
    assert.truthy(err:find("no Sandbox class", 1, true), err)
    assert.has_error(function() registry.get("../etc") end)
    assert.has_error(function() registry.get(42) end)
    assert.has_error(function() require("glsb").template("flatprov_missing") end)
  end)

  it("template() needs a Template class", function()
    registry.register("notemplate", { name = "notemplate", Sandbox = { create = function() end } })
    local ok, err = pcall(require("glsb").template, "notemplate")
    registry.unregister("notemplate")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("no template builder", 1, true))
  end)

  it("register() makes a provider available without a file", function()
    registry.register("inmem", { Sandbox = { create = function() return "sb" end } })
    assert.are.equal("sb", require("glsb").create("inmem"))
    assert.are.equal("inmem", registry.get("inmem").name)
    local known = table.concat(registry.known(), " ")
    registry.unregister("inmem")
    assert.truthy(known:find("inmem", 1, true))
  end)

  it("installs its searcher once, right after the preload searcher", function()
    registry.install_searcher()
    registry.install_searcher()
    local n = 0
    for _, s in ipairs(package.searchers) do if s == registry.searcher then n = n + 1 end end
    assert.are.equal(1, n)
    assert.are.equal(registry.searcher, package.searchers[2])
  end)

  it("searches the repository's providers/ directory", function()
    local dirs = registry.search_dirs()
    local last = dirs[#dirs]
    assert.truthy(last:find("/../../providers$"), last)
    local real = sh("cd '" .. last .. "' && pwd -P"):gsub("%s+$", "")
    local want = sh("cd providers && pwd -P"):gsub("%s+$", "")
    assert.are.equal(want, real)
  end)

  it("GLSB_PATH (colon-separated) is searched in a fresh interpreter", function()
    local out = sh("cd \"$PWD\" && GLSB_PATH=/nonexistent:" .. dir .. "/users lua5.4 -e '"
      .. "package.path=\"lua/?.lua;lua/?/init.lua;\"..package.path "
      .. "local glsb = require \"glsb\" print(glsb.provider(\"userprov\").name) "
      .. "print(select(2, pcall(glsb.provider, \"zzz\")))' 2>&1")
    assert.truthy(out:find("^userprov\n"), out)
    assert.truthy(out:find("known: [^\n]*userprov"), out)
  end)
end)
