-- The shared workspace primitives suite against the E2B adapter and emulator: glsb-confine is uploaded
-- through envd's /files and run through process.Process/Start. #e2b
local emulator = require "e2b.emulator"
local glsb = require "glsb"

describe("e2b workspace run #e2b", function()
  local emu
  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("workspace.suite")("e2b", function()
    return glsb.create("e2b", emu:opts { timeout = 120 })
  end, "#e2b")
end)

describe("e2b commands and bytes #e2b", function()
  local emu, sb
  setup(function()
    emu = emulator.start()
    sb = glsb.create("e2b", emu:opts { timeout = 120 })
  end)
  teardown(function()
    if sb then sb:terminate() end
    if emu then emu:stop() end
  end)

  it("refuses a non-UTF-8 argument clearly instead of running an altered command", function()
    local r = sb:execute_command("echo \xff")
    assert.equal(glsb.ExecutionStatus.ERROR, r.status)
    assert.is_true(r.failure.retry_safe)
    assert.matches("UTF%-8", r.error)
    local ok, err = pcall(glsb.run_workspace_command, sb, { "echo", "\xff" })
    assert.is_false(ok)
    assert.matches("UTF%-8", err.message)
  end)
end)
