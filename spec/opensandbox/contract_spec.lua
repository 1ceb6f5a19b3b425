-- The provider contract suite (spec/contract/suite.lua) against the OpenSandbox adapter, talking to the
-- OpenSandbox emulator. #opensandbox
local emulator = require "opensandbox.emulator"

describe("opensandbox contract run #opensandbox", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("contract.suite")("opensandbox", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#opensandbox",
    call_languages = { "bash", "javascript", "typescript" },
    displays = false,    -- execd forwards only the kernel's execute_result (display_data is dropped)
    charts = false,      -- no chart extraction in its kernel
    delay_next = function(step, seconds)
      local rule = ({ upload = { plane = "execd", path = "^/files/upload$" }, code = { plane = "execd", path = "^/code$" },
        command = { plane = "execd", path = "^/command$" } })[step]
      rule.action, rule.delayMs = "delay", math.floor(seconds * 1000)
      emu:fault(rule)
    end,
    leftovers = function() return emu:leftovers() end,
  })
end)
