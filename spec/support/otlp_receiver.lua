-- spec/support/otlp_receiver.lua: start the loopback OTLP receiver (otlp_receiver.mjs) and ask it what
-- it received.
--
--   local receiver = require "support.otlp_receiver"
--   local rec = receiver.start()            -- rec.endpoint: the base URL for configure{endpoint = ...}
--   rec:plan{ { status = 429, retry_after = 1 }, { status = 503 } }   -- answers for the next exports
--   rec:refuse() / rec:accept()             -- no listener (connection refused) / listening again
--   local got = rec:received()              -- {spans, errors, orphans, requests}
--   rec:tree(trace_id)                      -- "name\n  child\n    grandchild" of one trace
--   rec:stop()                              -- in teardown/finally
-- Its own requests carry trace = false: they never become spans of the script under test.
local process = require "glsb.process"
local http = require "glsb.http"
local loop = require "glsb.loop"
local core = require "glsb.core"

local M = {}

local Receiver = {}
Receiver.__index = Receiver

local HERE = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "spec/support"

function M.start(opts)
  opts = opts or {}
  local argv = { "node", HERE .. "/otlp_receiver.mjs" }
  for _, s in ipairs(opts.scopes or {}) do
    argv[#argv + 1] = "--scope"
    argv[#argv + 1] = s
  end
  local p = assert(process.spawn({ argv = argv, stdin = "pipe", stdout = "pipe", stderr = "inherit" }))
  local line, err = loop.run(function() return p:read_line("stdout", core.now() + 15) end)
  local control, otlp = (line or ""):match("^listening (%S+) (%S+)")
  if not control then
    p:kill("KILL")
    p:close()
    error("otlp receiver did not start: " .. tostring(line or err), 2)
  end
  return setmetatable({ proc = p, control = control, endpoint = otlp }, Receiver)
end

local function call(self, method, path, body)
  local res = http.request { method = method, url = self.control .. path, timeout = 10, connect_timeout = 5,
    body = body and http.encode_json(body) or nil, headers = { ["Content-Type"] = "application/json" },
    trace = false }
  if res.error or res.status ~= 200 then
    error(("otlp receiver %s %s: %s"):format(method, path, res.error and res.error.message or tostring(res.status)), 2)
  end
  return http.decode_json(res.body)
end

function Receiver:plan(steps) return call(self, "POST", "/plan", steps) end
function Receiver:refuse() return call(self, "POST", "/refuse") end
function Receiver:accept() return call(self, "POST", "/accept") end
function Receiver:reset() return call(self, "POST", "/reset") end
function Receiver:received() return call(self, "GET", "/spans") end

-- spans named name (all, in arrival order)
function Receiver:named(name, got)
  got = got or self:received()
  local out = {}
  for _, s in ipairs(got.spans) do if s.name == name then out[#out + 1] = s end end
  return out
end

-- tree(trace_id[, got][, filter]) -> an indented text of one trace: children sorted by start time,
-- one span name per line (filter(span) -> false leaves a span and its subtree out).
function Receiver:tree(trace_id, got, filter)
  got = got or self:received()
  local children, roots, ids = {}, {}, {}
  for _, s in ipairs(got.spans) do
    if s.traceId == trace_id then ids[s.spanId] = s end
  end
  for _, s in pairs(ids) do
    if s.parentSpanId and ids[s.parentSpanId] then
      local list = children[s.parentSpanId] or {}
      children[s.parentSpanId] = list
      list[#list + 1] = s
    else
      roots[#roots + 1] = s
    end
  end
  local function by_start(a, b)
    if #a.start ~= #b.start then return #a.start < #b.start end
    if a.start ~= b.start then return a.start < b.start end
    return a.name < b.name
  end
  local lines = {}
  local function walk(s, depth)
    if filter and filter(s) == false then return end
    lines[#lines + 1] = string.rep("  ", depth) .. s.name
    local list = children[s.spanId] or {}
    table.sort(list, by_start)
    for _, c in ipairs(list) do walk(c, depth + 1) end
  end
  table.sort(roots, by_start)
  for _, r in ipairs(roots) do walk(r, 0) end
  return table.concat(lines, "\n")
end

-- stop(): safe twice; the receiver also exits when its stdin closes (this process ending).
function Receiver:stop()
  if self.stopped then return end
  self.stopped = true
  local p = self.proc
  p:kill("TERM")
  if not p:wait(core.now() + 5) then
    p:kill("KILL")
    p:wait(core.now() + 5)
  end
  p:close()
end

return M
