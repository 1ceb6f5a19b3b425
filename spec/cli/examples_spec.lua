-- Every example runs as the README says (build/glsb-lua examples/<name>.lua) and does what it shows.
local core = require "glsb.core"

local GLSB_LUA = core.realpath("build/glsb-lua")

-- What an example needs on its command line to run on a machine without keys (its header says so).
local ARGS = { ["examples/interpreter.lua"] = " --emulator" }

-- Runs an example from a folder of its own (what it writes where it runs, a chart, stays out of the
-- checkout), removed after.
local function run(script)
  local dir = assert(core.mkdtemp("/tmp/glsb-example-XXXXXX"))
  local p = assert(io.popen(("cd %s && %s %s%s 2>&1 < /dev/null"):format(dir, GLSB_LUA, core.realpath(script),
    ARGS[script] or "")))
  local out = p:read("a")
  local ok, _, code = p:close()
  core.rmtree(dir)
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

  it("hello.py: `build/glsb run examples/hello.py`, as the README's first screen says", function()
    local p = assert(io.popen("build/glsb run examples/hello.py 2>&1 < /dev/null"))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok, out)
    assert.matches("^hello from Python %d+%.%d+%.%d+ in a sandbox\nuser 1000 in /home/user", out)
    assert.matches("\nnetwork: none", out)
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
