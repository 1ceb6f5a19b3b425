-- The shared workspace primitives suite against the Bedrock AgentCore adapter and emulator:
-- glsb-confine is uploaded through writeFiles and run through executeCommand (argv, stdin and
-- output as base64, so every byte survives the JSON text of the wire). #bedrock
local emulator = require "bedrock.emulator"
local glsb = require "glsb"

describe("bedrock workspace run #bedrock", function()
  local emu
  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("workspace.suite")("bedrock", function()
    return glsb.create("bedrock", emu:opts { timeout = 300 })
  end, "#bedrock")
end)
