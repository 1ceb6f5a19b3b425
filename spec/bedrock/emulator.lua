-- spec/bedrock/emulator.lua: start and drive the AgentCore emulator from a spec (require "bedrock.emulator").
--
--   local emu = emulator.start{ args = {...} }      -- scripts/emulator bedrock --port 0
--   emu.base, emu:opts(extra)                       -- glsb.create("bedrock", emu:opts{...})
--   emu:fault{...}, emu:clear_faults(), emu:state(), emu:requests(since), emu:last_seq(),
--   emu:expire(id), emu:lose(id), emu:reset(), emu:live_sessions()
--   emu:stop()                                      -- SIGTERM, wait, reap; safe twice
local process = require "glsb.process"
local http = require "glsb.http"
local loop = require "glsb.loop"

local M = {}

M.ACCESS_KEY_ID = "AKIDEXAMPLE"
M.SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
M.REGION = "us-west-2"

local Emulator = {}
Emulator.__index = Emulator

local function root_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/spec/bedrock/[^/]*$") or "."
end
M.ROOT = root_dir()

function M.start(opts)
  opts = opts or {}
  local argv = { M.ROOT .. "/scripts/emulator", "bedrock", "--port", "0", "--exit-with-parent",
    "--create-delay-ms", tostring(opts.create_delay_ms or 100) }
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  local p, err = process.spawn { argv = argv, stdin = "null", stdout = "pipe", stderr = opts.stderr or "null" }
  if not p then error("cannot start the AgentCore emulator: " .. tostring(err), 2) end
  local line = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
  local base = line and line:match("^listening (%S+)")
  if not base then
    p:kill("KILL")
    p:close()
    error("AgentCore emulator did not print 'listening <url>' (got " .. tostring(line) .. "); "
      .. "is spec/node_modules installed (cd spec && npm ci)?", 2)
  end
  return setmetatable({ proc = p, base = base }, Emulator)
end

-- Options for glsb.create("bedrock", ...) / glsb.template("bedrock", ...) pointing at this emulator.
function Emulator:opts(extra)
  local o = { region = M.REGION, endpoint = self.base, control_endpoint = self.base,
    access_key_id = M.ACCESS_KEY_ID, secret_access_key = M.SECRET_ACCESS_KEY }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

function Emulator:admin(method, path, body)
  -- Connection: close, so no pooled connection is left for an adapter request to reuse.
  local res = http.json { method = method, url = self.base .. path, json = body, timeout = 10, connect_timeout = 5,
    headers = { Connection = "close" } }
  if res.error or res.status >= 300 then
    error(string.format("emulator admin %s %s failed: %s %s", method, path, tostring(res.status),
      res.error and res.error.message or tostring(res.body)), 2)
  end
  return res.json
end

function Emulator:fault(rule) return self:admin("POST", "/_emulator/faults", rule) end
function Emulator:clear_faults() return self:admin("DELETE", "/_emulator/faults") end
function Emulator:state() return self:admin("GET", "/_emulator/state") end
function Emulator:reset() return self:admin("POST", "/_emulator/reset") end
function Emulator:expire(id) return self:admin("POST", "/_emulator/sessions/" .. id .. "/expire") end
function Emulator:lose(id) return self:admin("POST", "/_emulator/sessions/" .. id .. "/lose") end
function Emulator:requests(since) return self:admin("GET", "/_emulator/requests?since=" .. tostring(since or 0)) or {} end

function Emulator:last_seq()
  local r = self:requests(0)
  return #r > 0 and r[#r].seq or 0
end

-- Sessions still READY and processes still alive (children get up to 3 s to be reaped).
function Emulator:leftovers()
  local state = self:state()
  local deadline = loop.now() + 3
  while (tonumber(state.children) or 0) > 0 and loop.now() < deadline do
    loop.sleep(0.05)
    state = self:state()
  end
  local out = {}
  for _, s in ipairs(state.sessions or {}) do
    if s.status == "READY" then out[#out + 1] = "session " .. s.sessionId end
  end
  if (tonumber(state.children) or 0) > 0 then out[#out + 1] = "children " .. tostring(state.children) end
  return out
end

function Emulator:stop()
  local p = self.proc
  if not p then return end
  self.proc = nil
  p:kill("TERM")
  local st = loop.run(function() return p:wait(loop.now() + 10) end)
  if not st then p:kill("KILL") end
  p:close()
end

return M
