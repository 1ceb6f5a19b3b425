-- core.write_file_atomic: whole content, mode, nothing left beside it; sync = false (a live sandbox's
-- listing, on every local create's path) leaves out the fsyncs and nothing else.
local core = require "glsb.core"
local process = require "glsb.process"

local ROOT = debug.getinfo(1, "S").source:sub(2):match("^(.*)/spec/core/[^/]*$") or "."

local function names(dir)
  local out = assert(core.listdir(dir))
  table.sort(out)
  return table.concat(out, ",")
end

describe("core.write_file_atomic", function()
  local dir
  before_each(function() dir = assert(core.mkdtemp("/tmp/glsb-wfa-XXXXXX")) end)
  after_each(function() core.rmtree(dir) end)

  for _, sync in ipairs({ true, false }) do
    it("sync = " .. tostring(sync) .. ": replaces the file whole with the mode asked, no temp file left", function()
      local path = dir .. "/info"
      assert.is_true(core.write_file_atomic(path, "old", 384, sync))
      assert.is_true(core.write_file_atomic(path, ("x"):rep(100000), 416, sync))
      local f = assert(io.open(path, "rb"))
      assert.equal(("x"):rep(100000), f:read("a"))
      f:close()
      assert.equal(416, core.lstat(path).mode)
      assert.equal("info", names(dir))
    end)
  end

  it("sync = false makes no fsync; the default makes two (the file, the directory)", function()
    local strace = process.run({ "sh", "-c", "command -v strace" }, { timeout = 10 })
    if not strace or strace == "" then
      pending("no strace here")
      return
    end
    local function fsyncs(arg)
      local lua = ROOT .. "/build/glsb-lua"
      local code = ("require('glsb.core').write_file_atomic(%q, 'data', 384%s)"):format(dir .. "/f", arg)
      local _, err = process.run({ "strace", "-f", "-e", "trace=fsync,fdatasync", lua, "-e", code },
        { timeout = 60 })
      local n = 0
      for _ in tostring(err):gmatch("fsync%(") do n = n + 1 end
      return n
    end
    assert.equal(2, fsyncs(""))
    assert.equal(0, fsyncs(", false"))
  end)
end)
