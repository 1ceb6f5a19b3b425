-- spec/support/busted_summary.lua: the busted output handler scripts/test reads (busted -o this file).
-- It writes one JSON document, {successes, failures, errors, pendings} of {name, file, line, message},
-- built from plain strings and numbers only. busted's own json handler encodes its raw records with
-- dkjson and writes nothing at all when one holds a function, which every pending() does in Debian's
-- busted 2.1: one pending test then cost the whole count ("0 passed, 1 failed").
local cjson = require "cjson"

local function clean(list)
  local out = {}
  for i, t in ipairs(list) do
    local trace = (t.element and t.element.trace) or t.trace or {}
    out[i] = {
      name = tostring(t.name or "?"),
      file = tostring(trace.short_src or "?"),
      line = tonumber(trace.currentline) or 0,
      message = t.message ~= nil and tostring(t.message) or nil,
    }
  end
  return out
end

return function()
  local busted = require "busted"
  local handler = require("busted.outputHandlers.base")()
  busted.subscribe({ "suite", "end" }, function()
    io.stdout:write(cjson.encode({
      successes = clean(handler.successes), failures = clean(handler.failures),
      errors = clean(handler.errors), pendings = clean(handler.pendings),
      duration = handler.getDuration(),
    }), "\n")
    io.stdout:flush()
    return nil, true
  end)
  return handler
end
