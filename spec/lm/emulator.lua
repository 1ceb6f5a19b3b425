-- spec/lm/emulator.lua: start and drive the model API emulators from a spec (require "lm.emulator").
--
--   local emu = emulator.start("openai" | "anthropic", { api_keys = {...}, args = {...} })
--   emu.base, emu.api_key, emu:client(extra)        -- glsb.lm.openai / .anthropic pointed at it
--   emu:script(name, replies) -> "script:<name>"    -- a scripted model (spec/emulators/README.md)
--   emu:fault{...}, emu:clear_faults(), emu:requests([model]), emu:config{...}, emu:reset(), emu:state(),
--   emu:in_flight()                                 -- responses still open (0 once nothing is left running)
--   emu:stop()                                      -- SIGTERM, wait, reap; safe twice
-- Call stop() in teardown (busted runs it also when a test failed).
local process = require "glsb.process"
local http = require "glsb.http"
local loop = require "glsb.loop"

local M = {}

local Emulator = {}
Emulator.__index = Emulator

local function root_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/spec/lm/[^/]*$") or "."
end

M.ROOT = root_dir()
M.KEYS = { openai = "sk-glsb-spec-key-0123456789", anthropic = "sk-ant-glsb-spec-key-0123456789" }

function M.start(kind, opts)
  opts = opts or {}
  local keys = opts.api_keys or { M.KEYS[kind] }
  local argv = { M.ROOT .. "/scripts/emulator", kind, "--port", "0", "--exit-with-parent" }
  for _, k in ipairs(keys) do
    argv[#argv + 1] = "--api-key"
    argv[#argv + 1] = k
  end
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  local p, err = process.spawn { argv = argv, stdin = "null", stdout = "pipe", stderr = opts.stderr or "null" }
  if not p then error("cannot start the " .. kind .. " emulator: " .. tostring(err), 2) end
  local line = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
  local base = line and line:match("^listening (%S+)")
  if not base then
    p:kill("KILL")
    p:close()
    error(kind .. " emulator did not print 'listening <url>' (got " .. tostring(line) .. ")", 2)
  end
  return setmetatable({ kind = kind, proc = p, base = base, api_key = keys[1] }, Emulator)
end

-- The base URL a client takes: OpenAI's includes /v1, Anthropic's does not.
function Emulator:base_url()
  return self.kind == "openai" and (self.base .. "/v1") or self.base
end

-- A glsb.lm client of this emulator (model "glsb-rules" unless extra says).
function Emulator:client(extra)
  local o = { model = "glsb-rules", api_key = self.api_key, base_url = self:base_url() }
  for k, v in pairs(extra or {}) do o[k] = v end
  local lm = require "glsb.lm"
  return self.kind == "openai" and lm.openai(o) or lm.anthropic(o)
end

function Emulator:admin(method, path, body)
  local res = http.json { method = method, url = self.base .. path, json = body, timeout = 10, connect_timeout = 5,
    headers = { Connection = "close" } }
  if res.error or res.status >= 300 then
    error(string.format("emulator admin %s %s failed: %s %s", method, path,
      tostring(res.status), res.error and res.error.message or tostring(res.body)), 2)
  end
  return res.json
end

function Emulator:script(name, replies, extra)
  local body = { name = name, replies = replies }
  for k, v in pairs(extra or {}) do body[k] = v end
  return self:admin("POST", "/_emulator/scripts", body).model
end

function Emulator:script_info(name) return self:admin("GET", "/_emulator/scripts/" .. name) end
function Emulator:fault(rule) return self:admin("POST", "/_emulator/faults", rule) end
function Emulator:clear_faults() return self:admin("DELETE", "/_emulator/faults") end
function Emulator:state() return self:admin("GET", "/_emulator/state") end
function Emulator:config(c) return self:admin("POST", "/_emulator/config", c) end
function Emulator:reset() return self:admin("POST", "/_emulator/reset") end

-- in_flight() -> how many API responses are still open once they had up to 3 s to close (the state
-- request itself is not counted).
function Emulator:in_flight()
  local st = self:state()
  local deadline = loop.now() + 3
  while st.inFlight > 1 and loop.now() < deadline do
    loop.sleep(0.05)
    st = self:state()
  end
  return st.inFlight - 1
end

function Emulator:requests(model)
  return self:admin("GET", "/_emulator/requests" .. (model and ("?model=" .. http.escape(model)) or ""))
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
