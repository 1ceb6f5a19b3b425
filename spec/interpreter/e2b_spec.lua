-- The interpreter suite (spec/interpreter/suite.lua) on the E2B adapter, talking to the E2B emulator. #e2b
local emulator = require "e2b.emulator"

describe("e2b interpreter run #e2b", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("interpreter.suite")("e2b", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#e2b",
    leftovers = function() return emu:leftovers() end,
  })
end)
