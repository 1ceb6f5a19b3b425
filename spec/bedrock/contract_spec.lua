-- The provider contract suite against the Bedrock AgentCore adapter, talking to the AgentCore
-- emulator (every request SigV4-verified there). AgentCore does not stream output and cannot renew
-- a session's lease: the suite checks the documented behaviour instead. The last expression's value
-- is r.text as on every provider (glsb.providers.bedrock.cell). #bedrock
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
    -- AgentCore exposes no ports; execute_code{language=...} takes executeCode's javascript and typescript,
    -- which the emulator does not run (spec/bedrock/sandbox_spec.lua checks what reaches the wire)
    ports = false,
    call_languages = {},
    -- AgentCore has no pause, snapshot or second interpreter in a session: each is refused, saying so
    pause = false,
    snapshot = false,
    contexts = false,
    -- AgentCore sessions carry no labels: list filters none (a metadata filter would match no session)
    list_filters_metadata = false,
    -- figures come back as image blocks of the service (no chart extraction); display() and the last
    -- value's forms come through glsb's cell wrapper
    charts = false,
    -- sessions still READY and processes the emulator started for them
    delay_next = function(step, seconds)
      local tool = ({ upload = "writeFiles", code = "executeCode", command = "executeCommand" })[step]
      emu:fault { op = "InvokeCodeInterpreter", tool = tool, action = "delay", delayMs = math.floor(seconds * 1000) }
    end,
    leftovers = function() return emu:leftovers() end,
    -- an interpreter id of AgentCore's grammar that names none (the default name is no interpreter id at all:
    -- an argument error, docs/protocols/bedrock.md §7)
    bad_create_opts = function() return emu:opts { timeout = 120, template = "glsb_no_such-0000000000" } end,
  })
end)
