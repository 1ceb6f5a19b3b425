-- spec/support/python.lua: what this machine's python3 can import. The local sandbox and the emulators
-- run code with it, so the rich results specs need its matplotlib, numpy and pandas.
--
--   python.need("matplotlib, pandas", pending)   -- inside an it(): the test's own pending, with the reason
--
-- The test's own `pending` (the global inside an it()) must be passed in: busted's module-level
-- require("busted").pending, called inside a running test, registers a phantom pending block whose
-- function breaks busted's JSON output (scripts/test then reads nothing at all).
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

-- need(modules, pending): returns when importable; else ends the running test as pending with the reason
function M.need(modules, pending)
  assert(type(pending) == "function", "python.need: pass the test's pending")
  if not M.has(modules) then pending(M.REASON) end
end

return M
