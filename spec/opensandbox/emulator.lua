-- spec/opensandbox/emulator.lua: start and drive the OpenSandbox emulator from a spec
-- (require "opensandbox.emulator").
--
--   local emu = emulator.start{ api_keys = {...}, args = {...} }   -- scripts/emulator opensandbox --port 0
--   emu.base, emu.api_key, emu:opts(extra)                         -- glsb.create("opensandbox", emu:opts{...})
--   emu:fault{...}, emu:clear_faults(), emu:faults(), emu:state(), emu:config{...}, emu:kill(id), emu:reset(),
--   emu:execd_listener(up)                                         -- with args = {"--execd-listener"}
--   emu:leftovers()                                                -- sandboxes / children still there
--   emu:stop()                                                     -- SIGTERM, wait, reap; safe twice
-- Call stop() in teardown (busted runs it also when a test failed).

local process = require "glsb.process"
local http = require "glsb.http"
local loop = require "glsb.loop"

local M = {}

local Emulator = {}
Emulator.__index = Emulator

local function root_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/spec/opensandbox/[^/]*$") or "."
end

M.ROOT = root_dir()
M.API_KEY = "opensandbox_test_key"

function M.start(opts)
  opts = opts or {}
  local keys = opts.api_keys or { M.API_KEY }
  local argv = { M.ROOT .. "/scripts/emulator", "opensandbox", "--port", "0", "--exit-with-parent" }
  for _, k in ipairs(keys) do
    argv[#argv + 1] = "--api-key"
    argv[#argv + 1] = k
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  local p, err = process.spawn { argv = argv, stdin = "null", stdout = "pipe", stderr = opts.stderr or "null" }
  if not p then error("cannot start the OpenSandbox emulator: " .. tostring(err), 2) end
  local line = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
  local base = line and line:match("^listening (%S+)")
  if not base then
    p:kill("KILL")
    p:close()
    error("OpenSandbox emulator did not print 'listening <url>' (got " .. tostring(line) .. ")", 2)
  end
  return setmetatable({ proc = p, base = base, api_key = keys[1] }, Emulator)
end

-- Options for glsb.create("opensandbox", ...) pointing at this emulator.
function Emulator:opts(extra)
  local o = { domain = self.base, api_key = self.api_key }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

function Emulator:admin(method, path, body, headers)
  -- Connection: close: no pooled connection is left for an adapter request to reuse.
  local h = { Connection = "close" }
  for k, v in pairs(headers or {}) do h[k] = v end
  local res = http.json { method = method, url = self.base .. path, json = body, timeout = 10,
    connect_timeout = 5, headers = h }
  if res.error or res.status >= 300 then
    error(string.format("emulator admin %s %s failed: %s %s", method, path,
      tostring(res.status), res.error and res.error.message or tostring(res.body)), 2)
  end
  return res.json
end

-- A lifecycle call with the API key (what a client would see).
function Emulator:api(method, path, body)
  return self:admin(method, "/v1" .. path, body, { ["OPEN-SANDBOX-API-KEY"] = self.api_key })
end

function Emulator:fault(rule) return self:admin("POST", "/_emulator/faults", rule) end
function Emulator:clear_faults() return self:admin("DELETE", "/_emulator/faults") end
function Emulator:faults() return self:admin("GET", "/_emulator/faults") end
function Emulator:state() return self:admin("GET", "/_emulator/state") end
function Emulator:config(c) return self:admin("POST", "/_emulator/config", c) end
function Emulator:reset() return self:admin("POST", "/_emulator/reset") end
function Emulator:kill(id) return self:admin("POST", "/_emulator/sandboxes/" .. id .. "/kill") end
-- With start{args = {"--execd-listener"}}: close (false) or reopen (true) the listener of sandbox ports.
function Emulator:execd_listener(up) return self:admin("POST", "/_emulator/execd-listener", { up = up }) end

-- What a terminated sandbox or failed create left behind: sandboxes and live child processes. The
-- emulator reaps killed processes asynchronously, so children get up to 3 s to go.
function Emulator:leftovers()
  local state = self:state()
  local deadline = loop.now() + 3
  while (tonumber(state.children) or 0) > 0 and loop.now() < deadline do
    loop.sleep(0.05)
    state = self:state()
  end
  local out = {}
  for _, s in ipairs(state.sandboxes or {}) do out[#out + 1] = "sandbox " .. s.id end
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
