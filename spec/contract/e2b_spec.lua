-- The provider contract suite against the E2B adapter, talking to the E2B emulator. #e2b
local emulator = require "e2b.emulator"
local loop = require "glsb.loop"

describe("e2b contract run #e2b", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  require("contract.suite")("e2b", function()
    return emu:opts { timeout = 120 }
  end, {
    tag = "#e2b",
    call_languages = {}, -- the emulator's interpreter runs python only (E2B's runs bash, r, java, js, ts)
    -- what the emulator still holds after a terminate or a failed create: sandboxes and the
    -- processes (kernels, commands) it started for them. The emulator reaps killed processes
    -- asynchronously (within ~100 ms), so children get up to 3 s to go.
    delay_next = function(step, seconds)
      local rule = ({ upload = { plane = "envd", method = "POST", path = "^/files$" },
        code = { plane = "jupyter", path = "^/execute$" }, command = { plane = "envd", path = "Process/Start$" } })[step]
      rule.action, rule.delayMs = "delay", math.floor(seconds * 1000)
      emu:fault(rule)
    end,
    leftovers = function()
      local state = emu:state()
      local deadline = loop.now() + 3
      while (tonumber(state.children) or 0) > 0 and loop.now() < deadline do
        loop.sleep(0.05)
        state = emu:state()
      end
      local out = {}
      for _, s in ipairs(state.sandboxes or {}) do out[#out + 1] = "sandbox " .. s.sandboxID end
      if (tonumber(state.children) or 0) > 0 then out[#out + 1] = "children " .. tostring(state.children) end
      return out
    end,
  })
end)
