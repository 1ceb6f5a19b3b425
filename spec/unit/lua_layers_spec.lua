-- scripts/check-lua-layers (make lint): the require graph of lua/ and providers/ has no cycle, and a
-- provider requires only the kit of PROVIDERS.md's table. Each rule is shown failing on a scratch copy of
-- the tree with one change, so the check cannot pass vacuously.
local process = require "glsb.process"

local function sh(cmd)
  local out, err, st = process.run({ "sh", "-c", cmd }, { timeout = 60 })
  assert(out, err)
  return st.code, out .. err
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function scratch()
  local dir = assert(require("glsb.fs").mkdtemp("/tmp/glsb-layers-XXXXXX"))
  assert(sh("cp -R lua providers scripts " .. q(dir)) == 0)
  return dir
end

local function append(path, text)
  local f = assert(io.open(path, "ab"))
  f:write(text)
  f:close()
end

describe("scripts/check-lua-layers #unit", function()
  local dir
  after_each(function() if dir then require("glsb.fs").rmtree(dir) dir = nil end end)

  it("passes on this tree", function()
    local code, out = sh("scripts/check-lua-layers")
    assert.are.equal(0, code, out)
    assert.matches("no cycle, providers reach only the kit", out, 1, true)
  end)

  it("fails on a cycle made by a require inside a function", function()
    dir = scratch()
    -- glsb.errors is required by glsb.sandbox; a lazy require back closes a loop
    append(dir .. "/lua/glsb/errors.lua", "\nlocal function _late() return require(\"glsb.sandbox\") end\n")
    local code, out = sh(q(dir .. "/scripts/check-lua-layers"))
    assert.are.equal(1, code, out)
    assert.matches("cycle among %d+ modules %([^)]*glsb%.errors[^)]*glsb%.sandbox", out)
  end)

  it("fails on a provider that requires glsb.core or an internal module", function()
    dir = scratch()
    append(dir .. "/providers/e2b/api.lua", "\nlocal _c = require \"glsb.core\"\nlocal _p = require(\"glsb.pool\")\n"
      .. "local function _s() return require 'glsb.trace.span' end\n")
    local code, out = sh(q(dir .. "/scripts/check-lua-layers"))
    assert.are.equal(1, code, out)
    assert.matches("glsb.providers.e2b.api (providers/e2b/api.lua) requires glsb.core, which is not in the kit table",
      out, 1, true)
    assert.matches("requires glsb.pool, which is internal (not in the kit)", out, 1, true)
    -- a `glsb.trace.*` entry of the table covers every submodule
    assert.matches("requires glsb.trace.span, which is internal (not in the kit)", out, 1, true)
  end)

  it("fails on a module of lua/glsb the table does not place", function()
    dir = scratch()
    append(dir .. "/lua/glsb/newthing.lua", "return {}\n")
    local code, out = sh(q(dir .. "/scripts/check-lua-layers"))
    assert.are.equal(1, code, out)
    assert.matches("glsb.newthing (lua/glsb/newthing.lua) is in neither column of the kit table", out, 1, true)
  end)
end)
