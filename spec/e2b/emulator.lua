-- spec/e2b/emulator.lua: start and drive the E2B emulator from a spec (require "e2b.emulator").
--
--   local emu = emulator.start{ api_keys = {...} }   -- scripts/emulator e2b --port 0
--   emu.base, emu.api_key, emu:opts(extra)           -- glsb.create("e2b", emu:opts{...})
--   emu:fault{...}, emu:clear_faults(), emu:state(), emu:kill(id), emu:reset(), emu:api(m, path)
--   emu:stop()                                       -- SIGTERM, wait, reap; safe twice
-- Call stop() in teardown (busted runs it also when a test failed).
--
-- The emulator's state directory (sandbox trees, template builds) is made here and handed over with
-- --state-dir, so stop() removes it whatever became of the emulator (stopped, crashed, SIGKILLed).

local process = require "glsb.process"
local http = require "glsb.http"
local loop = require "glsb.loop"
local core = require "glsb.core"

local M = {}

local Emulator = {}
Emulator.__index = Emulator

local function root_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  local dir = src:match("^(.*)/spec/e2b/[^/]*$")
  return dir or "."
end

M.ROOT = root_dir()

-- emulator.start(opts) -> Emulator. opts.api_keys: accepted keys (default {"e2b_test_key"});
-- opts.args: more emulator arguments (e.g. --domain). opts.tls = {cert, key, domain}: serve HTTPS for
-- that domain; admin calls then go to https://api.<domain> through connect_to, checked with the cert.
function M.start(opts)
  opts = opts or {}
  local keys = opts.api_keys or { "e2b_test_key" }
  local state_dir = assert(core.mkdtemp("/tmp/glsb-e2b-emu-XXXXXX"))
  local argv = { M.ROOT .. "/scripts/emulator", "e2b", "--port", "0", "--exit-with-parent", "--state-dir", state_dir }
  for _, k in ipairs(keys) do
    argv[#argv + 1] = "--api-key"
    argv[#argv + 1] = k
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  if opts.tls then
    for _, a in ipairs({ "--domain", opts.tls.domain, "--tls-cert", opts.tls.cert, "--tls-key", opts.tls.key }) do
      argv[#argv + 1] = a
    end
  end
  local p, err = process.spawn { argv = argv, stdin = "null", stdout = "pipe", stderr = opts.stderr or "null" }
  if not p then
    core.rmtree(state_dir)
    error("cannot start the E2B emulator: " .. tostring(err), 2)
  end
  local line = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
  local base = line and line:match("^listening (%S+)")
  if not base then
    p:kill("KILL")
    loop.run(function() return p:wait(loop.now() + 5) end)
    p:close()
    core.rmtree(state_dir)
    error("E2B emulator did not print 'listening <url>' (got " .. tostring(line) .. "); "
      .. "is spec/node_modules installed (cd spec && npm ci)?", 2)
  end
  local emu = setmetatable({ proc = p, base = base, api_key = keys[1], state_dir = state_dir }, Emulator)
  if opts.tls then
    emu.port = base:match(":(%d+)$")
    emu.admin_base = "https://api." .. opts.tls.domain
    emu.transport = { cainfo = opts.tls.cert, connect_to = { "::127.0.0.1:" .. emu.port } }
  end
  return emu
end

-- Options for glsb.create("e2b", ...) pointing at this emulator.
function Emulator:opts(extra)
  local o = { api_key = self.api_key, api_url = self.base, sandbox_url = self.base }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

function Emulator:admin(method, path, body, headers)
  -- Connection: close, so no pooled connection is left for an adapter request to reuse (libcurl
  -- replays a request on a reused connection that dies before answering; see the e2b adapter).
  local h = { Connection = "close" }
  for k, v in pairs(headers or {}) do h[k] = v end
  local t = self.transport or {}
  local res = http.json { method = method, url = (self.admin_base or self.base) .. path, json = body, timeout = 10,
    connect_timeout = 5, headers = h, cainfo = t.cainfo, connect_to = t.connect_to }
  if res.error or res.status >= 300 then
    error(string.format("emulator admin %s %s failed: %s %s", method, path,
      tostring(res.status), res.error and res.error.message or tostring(res.body)), 2)
  end
  return res.json
end

-- A control-plane call with the API key (what a client would see).
function Emulator:api(method, path, body)
  return self:admin(method, path, body, { ["X-API-KEY"] = self.api_key })
end

function Emulator:fault(rule) return self:admin("POST", "/_emulator/faults", rule) end
function Emulator:clear_faults() return self:admin("DELETE", "/_emulator/faults") end
function Emulator:faults() return self:admin("GET", "/_emulator/faults") end
function Emulator:state() return self:admin("GET", "/_emulator/state") end
function Emulator:reset() return self:admin("POST", "/_emulator/reset") end
function Emulator:kill(id) return self:admin("POST", "/_emulator/sandboxes/" .. id .. "/kill") end

-- The sandbox ids the emulator still has (any state).
function Emulator:sandbox_ids()
  local ids = {}
  for _, s in ipairs(self:state().sandboxes or {}) do ids[#ids + 1] = s.sandboxID end
  return ids
end

-- stop(): SIGTERM, wait (SIGKILL after 10 s), reap, then remove the state directory: the emulator
-- removes it itself when it can, but not when it was killed or crashed. Safe twice.
-- What a terminated sandbox or failed create left behind: sandboxes, and the processes (kernels, commands)
-- the emulator started for them. It reaps killed processes asynchronously (within ~100 ms), so children
-- get up to 3 s to go.
function Emulator:leftovers()
  local state = self:state()
  local deadline = loop.now() + 3
  while (tonumber(state.children) or 0) > 0 and loop.now() < deadline do
    loop.sleep(0.05)
    state = self:state()
  end
  local out = {}
  for _, s in ipairs(state.sandboxes or {}) do out[#out + 1] = "sandbox " .. s.sandboxID end
  if (tonumber(state.children) or 0) > 0 then out[#out + 1] = "children " .. tostring(state.children) end
  return out
end

function Emulator:stop()
  local p = self.proc
  if p then
    self.proc = nil
    p:kill("TERM")
    local st = loop.run(function() return p:wait(loop.now() + 10) end)
    if not st then
      p:kill("KILL")
      loop.run(function() return p:wait(loop.now() + 5) end)
    end
    p:close()
  end
  if self.state_dir then
    core.rmtree(self.state_dir)
    self.state_dir = nil
  end
end

return M
