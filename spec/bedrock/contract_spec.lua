-- The provider contract suite against the Bedrock AgentCore adapter, talking to the AgentCore
-- emulator (every request SigV4-verified there). AgentCore does not stream output and cannot renew
-- a session's lease: the suite checks the documented behaviour instead. #bedrock
local emulator = require "bedrock.emulator"

describe("bedrock contract run #bedrock", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("contract.suite")("bedrock", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#bedrock",
    streams = false,
    renewable_lease = false,
    -- what the adapter does not have (kit's note, PROVIDERS.md "One behaviour"): the last expression's value
    -- (executeCode returns printed output), ports, per-call languages
    last_value = false,
    ports = false,
    call_languages = {},
    -- sessions still READY and processes the emulator started for them
    leftovers = function() return emu:leftovers() end,
  })
end)
