-- The shared workspace primitives suite on the local provider: glsb-confine is bound read-only into
-- the sandbox and run by the agent with an exact argv. #local
local glsb = require "glsb"

require("workspace.suite")("local", function() return glsb.create("local") end, "#local")
