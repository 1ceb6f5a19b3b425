-- The interpreter suite (spec/interpreter/suite.lua) on the Bedrock AgentCore adapter, talking to the
-- AgentCore emulator. #bedrock
local emulator = require "bedrock.emulator"

describe("bedrock interpreter run #bedrock", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("interpreter.suite")("bedrock", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#bedrock",
    renewable_lease = false, -- AgentCore cannot move a session's timeout
    leftovers = function() return emu:leftovers() end,
  })
end)
