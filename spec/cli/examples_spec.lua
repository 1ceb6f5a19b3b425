-- Every example runs as the README says (build/glsb-lua examples/<name>.lua) and does what it shows.
local core = require "glsb.core"

local GLSB_LUA = core.realpath("build/glsb-lua")

local function run(script)
  local p = assert(io.popen(("%s %s 2>&1 < /dev/null"):format(GLSB_LUA, script)))
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

describe("examples #cli #local", function()
  it("hello.lua: streams, keeps state, ships a file in and reads it back", function()
    local code, out = run("examples/hello.lua")
    assert.equal(0, code, out)
    assert.matches("live: 42\n", out, 1, true)
    assert.matches("0\t2 /files/data.csv", out, 1, true)
    assert.matches("a,b\n1,2\n", out, 1, true)
  end)

  it("every example exits 0", function()
    local p = assert(io.popen("ls examples/*.lua"))
    local n = 0
    for path in p:lines() do
      local code, out = run(path)
      assert.equal(0, code, path .. ": " .. out)
      n = n + 1
    end
    p:close()
    assert.is_true(n >= 2)
  end)
end)
