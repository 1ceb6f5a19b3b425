-- The interpreter suite (spec/interpreter/suite.lua) on the OpenSandbox adapter, talking to the OpenSandbox
-- emulator. #opensandbox
local emulator = require "opensandbox.emulator"

describe("opensandbox interpreter run #opensandbox", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("interpreter.suite")("opensandbox", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#opensandbox",
    displays = false, -- execd forwards only the kernel's execute_result: a figure shown is not a result
    leftovers = function() return emu:leftovers() end,
  })
end)
