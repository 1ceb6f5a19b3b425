-- core.buffer (src/core/buffer.c): bytes outside the Lua heap that reads land in, made one string at the
-- end; and Process:read_into, which reads a child's output straight into one.
local core = require "glsb.core"
local process = require "glsb.process"
local loop = require "glsb.loop"

describe("core.buffer #core", function()
  it("appends, finds, cuts and takes bytes, NULs included", function()
    local b = core.buffer(64)
    assert.equal(0, b:len())
    assert.equal(64, b:capacity())
    b:append("head\n")
    b:append("xx\0body\0yy", 3, 8)
    assert.equal(11, b:len())
    assert.equal(5, b:find("\n"))
    assert.equal(6, b:find("\0"))
    assert.equal(11, b:find("\0", 7))
    assert.is_nil(b:find("zz"))
    assert.equal("head", b:sub(1, 4))
    assert.equal("\0body\0", b:sub(6, -1))
    assert.equal("body\0", b:take(7))
    assert.equal(0, b:len()) -- taking empties it, for the next fill
    assert.equal(64, b:capacity())
    b:append("again")
    b:clear()
    assert.equal(0, b:len())
    b:append("again")
    assert.equal("again", b:take())
    b:close()
    assert.equal(0, b:capacity())
  end)

  it("refuses more than its capacity and bad arguments, at the caller's line", function()
    local b = core.buffer(4)
    b:append("abcd")
    assert.has_error(function() b:append("e") end)
    assert.has_error(function() core.buffer(-1) end)
    assert.has_error(function() b:take(7) end)
    assert.has_error(function() b:find("a", 0) end)
    b:close()
    assert.equal(0, b:len())
    assert.equal("", b:take())
  end)

  it("holds 256 MiB of capacity for the address space alone until bytes arrive", function()
    local function rss_kb()
      local f = assert(io.open("/proc/self/status"))
      local kb = tonumber(f:read("a"):match("VmRSS:%s+(%d+)"))
      f:close()
      return kb
    end
    local before = rss_kb()
    local b = core.buffer(256 * 1024 * 1024)
    b:append(string.rep("x", 1024))
    assert.is_true(rss_kb() - before < 8 * 1024) -- at most a huge page or two touched
    b:close()
  end)

  it("Process:read_into reads a child's output straight into one buffer, to its end", function()
    loop.run(function()
      local n = 3 * 1024 * 1024 + 17
      local p = assert(process.spawn({ argv = { "head", "-c", tostring(n), "/dev/urandom" }, stdout = "pipe" }))
      local b = process.buffer(n + 100)
      local total = 0
      while true do
        local got = assert(p:read_into("stdout", loop.now() + 10, 1024 * 1024, b))
        if got == 0 then break end
        assert.is_true(got <= 1024 * 1024)
        total = total + got
      end
      p:wait(loop.now() + 10)
      p:close()
      assert.equal(n, total)
      assert.equal(n, b:len())
      assert.equal(n, #b:take())
    end)
  end)

  it("Process:read_into stops at the buffer's room and gives what read_line kept first", function()
    loop.run(function()
      local p = assert(process.spawn({ argv = { "printf", "line\\nrest-of-it" }, stdout = "pipe" }))
      assert.equal("line", p:read_line("stdout", loop.now() + 10))
      local b = process.buffer(4)
      local got = assert(p:read_into("stdout", loop.now() + 10, 100, b))
      assert.is_true(got >= 1 and got <= 4)
      while b:len() < 4 do assert(p:read_into("stdout", loop.now() + 10, 100, b)) end
      assert.equal("rest", b:take())
      p:wait(loop.now() + 10)
      p:close()
    end)
  end)
end)
