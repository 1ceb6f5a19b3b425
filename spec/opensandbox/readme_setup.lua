-- What providers/opensandbox/README.md's Lua blocks need to run (spec/cli/readme_spec.lua): the
-- OpenSandbox emulator, reached through the variables the provider reads, accepting the README's
-- placeholder key, and the README's example domains pointed at it.
local emulator = require "opensandbox.emulator"

local M = {}
local emu

function M.start()
  emu = emulator.start { api_keys = { emulator.API_KEY, "..." } }
  return { OPEN_SANDBOX_DOMAIN = emu.base, OPEN_SANDBOX_API_KEY = emu.api_key },
    { ["sandbox.example.com:8080"] = emu.base, ['domain = "..."'] = 'domain = "' .. emu.base .. '"' }
end

function M.stop()
  if emu then emu:stop() end
  emu = nil
end

return M
