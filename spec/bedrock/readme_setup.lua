-- What providers/bedrock/README.md's Lua blocks need to run (spec/cli/readme_spec.lua): the AgentCore
-- emulator, reached through the variables the provider and the AWS credential chain read. The
-- emulator's sessions have no network, so the example template's package install is left out of the
-- run (everything else runs as written).
local emulator = require "bedrock.emulator"

local M = {}
local emu

function M.start()
  emu = emulator.start()
  return {
    AWS_ACCESS_KEY_ID = emulator.ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY = emulator.SECRET_ACCESS_KEY,
    BEDROCK_AGENTCORE_DP_ENDPOINT = emu.base, BEDROCK_AGENTCORE_CP_ENDPOINT = emu.base,
  }, {
    ['region = "us-west-2"'] = 'region = "' .. emulator.REGION .. '"',
    ['packages = { "pandas" }, '] = "",
  }
end

function M.stop()
  if emu then emu:stop() end
  emu = nil
end

return M
