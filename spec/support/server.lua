-- spec/support/server.lua: start a loopback helper server for a spec and stop it, whatever happens.
local process = require "glsb.process"
local core = require "glsb.core"

local M = {}

-- start(argv) -> { url = "http://127.0.0.1:N", stop = function } ; the server prints "listening <url>" first.
function M.start(argv, timeout)
  local p = assert(process.spawn({ argv = argv, stdin = "pipe", stdout = "pipe", stderr = "inherit" }))
  local line, err = p:read_line("stdout", core.now() + (timeout or 15))
  if not line or not line:match("^listening ") then
    p:kill("KILL")
    p:close()
    error("server " .. table.concat(argv, " ") .. " did not start: " .. tostring(line or err))
  end
  local srv = { url = line:match("^listening (%S+)"), proc = p }
  function srv.stop()
    if srv.stopped then return end
    srv.stopped = true
    p:kill("TERM")
    if not p:wait(core.now() + 5) then p:kill("KILL"); p:wait(core.now() + 5) end
    p:close()
  end
  return srv
end

return M
