-- spec/support/python.lua: what this machine's python3 can import. The local sandbox and the emulators
-- run code with it, so the rich results specs need its matplotlib, numpy and pandas.
--
--   if not python.need("matplotlib, pandas") then return end   -- inside an it(): pending, with the reason
local shell = require "support.shell"

local M = {}

M.REASON = "needs python3-matplotlib, python3-numpy and python3-pandas on this machine (scripts/install-deps "
  .. "installs them): the local sandbox and the emulators run the code with its python3"

local known = {}

-- has("matplotlib, pandas") -> true when /usr/bin/python3 imports them all
function M.has(modules)
  if known[modules] == nil then
    local _, code = shell.sh("/usr/bin/python3 -c " .. shell.q("import " .. modules) .. " 2>/dev/null")
    known[modules] = code == 0
  end
  return known[modules]
end

-- need(modules) -> true when importable; else marks the running test pending with the reason, false
function M.need(modules)
  if M.has(modules) then return true end
  require("busted").pending(M.REASON)
  return false
end

return M
