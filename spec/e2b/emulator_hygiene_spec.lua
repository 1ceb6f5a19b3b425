-- The E2B emulator leaves no state directory behind, whatever ends it: stopped, crashed (an uncaught
-- exception), or SIGKILLed (the spec helper removes the directory it handed over; the next emulator
-- removes directories whose owner is gone). #e2b
local emulator = require "e2b.emulator"
local core = require "glsb.core"
local loop = require "glsb.loop"

local function exists(path)
  local f = io.open(path .. "/.", "r")
  if f then f:close() return true end
  return false
end

local function write(path, data)
  local f = assert(io.open(path, "w"))
  f:write(data)
  f:close()
end

-- This process's start time as /proc/<pid>/stat's field 22 (what the emulator's OWNER file holds).
local function start_time(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local stat = f:read("a")
  f:close()
  local fields = {}
  for w in stat:sub(stat:find(")", 1, true) + 2):gmatch("%S+") do fields[#fields + 1] = w end
  return fields[20]
end

describe("e2b emulator state directory #e2b", function()
  it("is removed by the spec helper when the emulator was SIGKILLed", function()
    local emu = emulator.start()
    finally(function() emu:stop() end)
    local dir = emu:state().stateDir
    assert.is_string(dir)
    assert.is_true(exists(dir))
    emu.proc:kill("KILL")
    loop.run(function() return emu.proc:wait(loop.now() + 5) end)
    assert.is_true(exists(dir), "SIGKILL: the emulator could not remove it")
    emu:stop()
    assert.is_false(exists(dir), dir .. " left behind")
  end)

  it("is removed by the emulator itself when it crashes", function()
    local emu = emulator.start()
    finally(function() emu:stop() end)
    local dir = emu:state().stateDir
    emu:admin("POST", "/_emulator/crash")
    local st = loop.run(function() return emu.proc:wait(loop.now() + 10) end)
    assert.is_truthy(st, "the emulator exited")
    assert.is_false(exists(dir), dir .. " left behind by a crash")
  end)

  it("is swept by the next emulator when its owner is gone, and kept while its owner lives", function()
    local dead = assert(core.mkdtemp("/tmp/glsb-e2b-emu-XXXXXX"))
    local live = assert(core.mkdtemp("/tmp/glsb-e2b-emu-XXXXXX"))
    local emu
    finally(function()
      if emu then emu:stop() end
      core.rmtree(dead)
      core.rmtree(live)
    end)
    -- pid 1's start time is never "1": a dead owner (or a reused pid)
    write(dead .. "/OWNER", '{"pid": 1, "start": "1"}')
    local me = core.getpid()
    write(live .. "/OWNER", string.format('{"pid": %d, "start": "%s"}', me, start_time(me)))
    emu = emulator.start()
    assert.is_false(exists(dead), dead .. " was not swept")
    assert.is_true(exists(live), live .. " belongs to a live process")
  end)
end)
