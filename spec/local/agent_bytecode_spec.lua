-- The agent's bytecode cache (providers/local/layout.lua agent_bytecode): compiled once per agent and
-- interpreter into the cache folder, found by later processes, and keyed without loading libcrypto into
-- the process (SHA-256 through libcrypto cost 2.6 ms of each process's first create).
require "glsb" -- its registry finds the provider modules
local core = require "glsb.core"
local process = require "glsb.process"
local layout = require "glsb.providers.local.layout"

describe("local agent bytecode cache #local", function()
  local cache

  before_each(function() cache = assert(core.mkdtemp("/tmp/glsb-agent-cache-XXXXXX")) end)
  after_each(function() assert(core.rmtree(cache)) end)

  it("compiles agent.py once into the cache with the sandbox's interpreter", function()
    local path = layout.agent_bytecode("/usr/bin/python3", cache)
    assert.is_string(path)
    assert.equal(cache .. "/local/agent/", path:sub(1, #cache + 13))
    local magic = process.run({ "/usr/bin/python3", "-c",
      "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())" }, { timeout = 30 })
    local f = assert(io.open(path, "rb"))
    assert.equal(magic, (f:read(4):gsub(".", function(c) return ("%02x"):format(c:byte()) end)))
    f:close()
    assert.equal(path, layout.agent_bytecode("/usr/bin/python3", cache)) -- the same file, not again
  end)

  it("finds the key without libcrypto in the process", function()
    local script = ([[
      local layout = require "glsb.providers.local.layout"
      assert(layout.agent_bytecode("/usr/bin/python3", %q))
      local f = assert(io.open("/proc/self/maps"))
      io.write(f:read("a"):find("libcrypto", 1, true) and "libcrypto" or "none")
      f:close()
    ]]):format(cache)
    local out, err = process.run({ core.realpath("build/glsb-lua"), "-e", script }, { timeout = 30 })
    assert.equal("none", out, err)
  end)
end)
