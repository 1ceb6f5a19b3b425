-- Installing works outside the source tree: `luarocks make` into a temp tree gives a plain lua5.4 a working
-- `require "glsb"`, and `make install PREFIX=...` gives a glsb-lua that finds its modules and providers.
local core = require "glsb.core"

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

describe("installation #install", function()
  local tmp

  before_each(function() tmp = core.mkdtemp("/tmp/glsb-install-XXXXXX") end)
  after_each(function() if tmp then core.rmtree(tmp) end end)

  it("luarocks make installs a tree where plain lua5.4 can require glsb", function()
    local code, out = sh(("luarocks --lua-version=5.4 --tree=%s make --deps-mode=none rockspec/gl-sandbox-scm-1.rockspec"):format(tmp))
    assert.equal(0, code, out)
    -- Only the temp tree and the system paths: run from / so nothing of the checkout is on the path.
    local script = [[
      local glsb = require "glsb"
      local core = require "glsb.core"
      assert(glsb.ExecutionStatus.SUCCESS)
      print(package.searchpath("glsb", package.path))
      print(core.module_path())
      print(glsb.provider("local").name)
    ]]
    code, out = sh(("cd / && eval \"$(luarocks --lua-version=5.4 --tree=%s path)\" && lua5.4 -e %q"):format(tmp, script))
    assert.equal(0, code, out)
    assert.matches(tmp .. "/share/lua/5.4/glsb/init.lua", out, 1, true)
    assert.matches(tmp .. "/lib/lua/5.4/glsb/core.so", out, 1, true)
    assert.matches("\nlocal\n", out, 1, true)
    -- the glsb command of the tree
    code, out = sh(("cd / && %s/bin/glsb --version"):format(tmp))
    assert.equal(0, code, out)
    assert.matches("^glsb %d", out)
  end)

  it("make install PREFIX=... gives a glsb-lua that finds its modules and providers", function()
    local code, out = sh(("make -s install PREFIX=%s"):format(tmp))
    assert.equal(0, code, out)
    local script = 'local g = require "glsb"; print(package.searchpath("glsb", package.path)); print(g.provider("local").name)'
    code, out = sh(("cd / && env -u LUA_PATH -u LUA_PATH_5_4 %s/bin/glsb-lua -e %q"):format(tmp, script))
    assert.equal(0, code, out)
    assert.matches(tmp .. "/share/lua/5.4/glsb/init.lua", out, 1, true)
    assert.matches("\nlocal\n", out, 1, true)
    -- each module's bytecode beside it, named after the installed source (src/core/load.c uses it then)
    local p = assert(io.popen("cd " .. tmp .. "/share/lua/5.4 && find glsb -name '*.lua' -type f"))
    local count = 0
    for rel in p:lines() do
      local f = assert(loadfile(tmp .. "/share/lua/5.4/" .. rel .. "c", "b"), rel)
      assert.equal("@" .. tmp .. "/share/lua/5.4/" .. rel, debug.getinfo(f, "S").source)
      count = count + 1
    end
    p:close()
    assert.is_true(count > 50)
    code, out = sh(("%s/bin/glsb-lua --version"):format(tmp))
    assert.equal(0, code)
    assert.matches("^glsb%-lua %d", out)
    -- glsb, the command (a link beside glsb-lua), from anywhere, and its completion
    code, out = sh(("cd / && echo 'print(6 * 7)' | env -u LUA_PATH -u LUA_PATH_5_4 %s/bin/glsb run -"):format(tmp))
    assert.equal(0, code, out)
    assert.equal("42\n", out)
    code, out = sh(("bash -c 'source %s/share/bash-completion/completions/glsb && complete -p glsb'"):format(tmp))
    assert.equal(0, code, out)
    assert.matches("_glsb", out)
    assert.truthy(io.open(tmp .. "/share/zsh/site-functions/_glsb"), "zsh completion installed")
    code = sh(("make -s uninstall PREFIX=%s"):format(tmp))
    assert.equal(0, code)
    assert.is_nil(io.open(tmp .. "/bin/glsb"))
  end)
end)
