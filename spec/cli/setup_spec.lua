-- Setting up from nothing: the first `make` on a fresh machine (packages installed by the same run)
-- builds, and the README's `luarocks make` command resolves lua-cjson offline from Debian's package.
local core = require "glsb.core"

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then assert(os.execute(("chmod %s %q"):format(mode, path))) end
end

describe("setting up #cli #install", function()
  local tmp
  before_each(function() tmp = assert(core.mkdtemp("/tmp/glsb-setup-XXXXXX")) end)
  after_each(function() assert(core.rmtree(tmp)) end)

  it("the first `make build` on a fresh machine installs the packages and then builds", function()
    -- A fresh machine, as make sees it: pkg-config knows no package until install-deps has run.
    write(tmp .. "/pkg-config", ("#!/bin/sh\n[ -e %s/installed ] || exit 1\nexec pkg-config \"$@\"\n"):format(tmp), "+x")
    write(tmp .. "/install-deps", ("#!/bin/sh\ntouch %s/installed\n"):format(tmp), "+x")
    local code, out = sh(("make -s build BUILD=%s/build PKG_CONFIG=%s/pkg-config INSTALL_DEPS=%s/install-deps")
      :format(tmp, tmp, tmp))
    assert.equal(0, code, out)
    assert.is_nil(out:find("No such file", 1, true), out)
    code, out = sh(tmp .. "/build/glsb-lua -e 'print(require(\"glsb.core\").sha256(\"\"):sub(1, 8))'")
    assert.equal(0, code, out)
    assert.equal("e3b0c442\n", out)
  end)

  it("`luarocks --lua-version=5.4 make rockspec/...` finds Debian's lua-cjson offline once set up", function()
    -- what install-deps does for `make demo`, here into a private LuaRocks config
    local home = tmp .. "/home"
    local code, out = sh(("scripts/luarocks-provided %s/.luarocks/config-5.4.lua"):format(home))
    assert.equal(0, code, out)
    local again
    code, again = sh(("scripts/luarocks-provided %s/.luarocks/config-5.4.lua"):format(home))
    assert.equal(0, code, again)
    assert.equal("", again) -- idempotent
    -- The README's command as written, with a private tree instead of the system one.
    code, out = sh(("HOME=%s luarocks --lua-version=5.4 --tree=%s/tree make rockspec/gl-sandbox-scm-1.rockspec")
      :format(home, tmp))
    assert.equal(0, code, out)
    assert.matches("gl-sandbox scm-1 is now installed", out, 1, true)
    code, out = sh(("cd / && eval \"$(HOME=%s luarocks --lua-version=5.4 --tree=%s/tree path)\" && "
      .. "lua5.4 -e 'print(require(\"glsb\").ExecutionStatus.SUCCESS)'"):format(home, tmp))
    assert.equal(0, code, out)
    assert.equal("success\n", out)
  end)
end)
