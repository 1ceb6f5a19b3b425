-- The shared workspace primitives suite against the OpenSandbox adapter and emulator: glsb-confine is
-- uploaded through execd's /files/upload and run through /command. #opensandbox
local emulator = require "opensandbox.emulator"
local glsb = require "glsb"

describe("opensandbox workspace run #opensandbox", function()
  local emu
  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("workspace.suite")("opensandbox", function()
    return glsb.create("opensandbox", emu:opts { timeout = 120 })
  end, "#opensandbox")
end)
