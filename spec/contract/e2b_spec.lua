-- The provider contract suite against the E2B adapter, talking to the E2B emulator. #e2b
local emulator = require "e2b.emulator"

describe("e2b contract run #e2b", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("contract.suite")("e2b", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#e2b",
    call_languages = { "bash", "javascript", "typescript" }, -- what the emulator runs (E2B also has r, java)
    delay_next = function(step, seconds)
      local rule = ({ upload = { plane = "envd", method = "POST", path = "^/files$" },
        code = { plane = "jupyter", path = "^/execute$" }, command = { plane = "envd", path = "Process/Start$" } })[step]
      rule.action, rule.delayMs = "delay", math.floor(seconds * 1000)
      emu:fault(rule)
    end,
    leftovers = function() return emu:leftovers() end,
  })
end)
