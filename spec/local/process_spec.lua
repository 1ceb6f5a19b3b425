-- glsb.process: what the local provider's channels rely on: large writes arrive whole and in order
-- (written from an offset, never re-sliced), fd3 as a socket both ways, misuse raising.
local core = require "glsb.core"
local loop = require "glsb.loop"
local process = require "glsb.process"

describe("glsb.process #local", function()
  it("writes 64 MiB to a slow reader whole, in order", function()
    local data = {}
    for i = 1, 64 * 1024 do data[i] = string.format("%08d", i) .. string.rep(".", 1015) .. "\n" end
    data = table.concat(data)
    local p = assert(process.spawn { argv = { "sha256sum" }, stdin = "pipe", stdout = "pipe", stderr = "null" })
    local out, _, st = p:communicate(data, loop.now() + 60)
    p:close()
    assert.are.equal(0, st.code)
    assert.are.equal(core.sha256(data), out:match("^(%x+)"))
  end)

  it("gives fd3 as a socket, read and written", function()
    local p = assert(process.spawn { argv = { "/usr/bin/python3", "-c",
      "import os\nd = b''\nwhile not d.endswith(b'\\n'): d += os.read(3, 100)\nos.write(3, d.upper())" },
      stdin = "null", stdout = "null", fd3 = "socket" })
    assert.is_true(p:write("hello\n", loop.now() + 5, "fd3"))
    assert.are.equal("HELLO", p:read_line("fd3", loop.now() + 5))
    assert.are.equal(0, p:wait(loop.now() + 5).code)
    p:close()
  end)

  it("refuses a write to a read-only fd3 and an offset outside the data", function()
    local p = assert(process.spawn { argv = { "cat" }, stdin = "pipe", stdout = "null", fd3 = "pipe" })
    finally(function() p:close() end)
    assert.has_error(function() p.proc:write("x", "fd3") end)
    assert.has_error(function() p.proc:write("abc", "stdin", 5) end)
    assert.has_error(function() p.proc:write("abc", "stdin", 0) end)
    assert.are.equal(1, p.proc:write("abc", "stdin", 3))
    assert.are.equal(0, p.proc:write("abc", "stdin", 4))
  end)
end)
