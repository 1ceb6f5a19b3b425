-- spec/mcp/client.lua: run `glsb-lua --mcp` as a child and speak raw JSON-RPC lines to it (require
-- "mcp.client"): what the official clients never send (broken lines, huge lines, bad ids) goes through here.
--
--   local c = client.start{args = {...}, env = {K = "v"}, tmpdir = dir}
--   c:send(msg_or_raw_line)          a table is encoded as one line; a string is written as it is (+ "\n")
--   c:recv(timeout) -> message | nil, why     (notifications too, in order)
--   c:call(method, params, timeout) -> the response to it (notifications on the way kept in c.notes)
--   c:initialize(version) -> the initialize result (and notifications/initialized sent)
--   c:tool(name, args, timeout) -> the tools/call result (raises on a protocol error)
--   c:close(timeout) -> exit status {code=} | {signal=}, seconds it took; c:rss_peak_kb()
local process = require "glsb.process"
local loop = require "glsb.loop"
local cjson = require "cjson.safe"

local M = {}

local ROOT = debug.getinfo(1, "S").source:sub(2):match("^(.*)/spec/mcp/[^/]*$") or "."
M.ROOT = ROOT
M.GLSB_LUA = ROOT .. "/build/glsb-lua"

local Client = {}
Client.__index = Client

function M.start(opts)
  opts = opts or {}
  local env = { "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin"), "HOME=" .. (os.getenv("HOME") or "/root") }
  if opts.tmpdir then env[#env + 1] = "TMPDIR=" .. opts.tmpdir end
  for k, v in pairs(opts.env or {}) do env[#env + 1] = k .. "=" .. v end
  local argv = { M.GLSB_LUA, "--mcp" }
  for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  local p = assert(process.spawn { argv = argv, env = env, stdin = "pipe", stdout = "pipe", stderr = "pipe" })
  local c = setmetatable({ p = p, id = 0, notes = {}, stderr_parts = {}, pending = {} }, Client)
  -- stderr is drained all along (a full pipe would stop the server), and kept for the specs that read it
  c.stderr_task = loop.spawn(function()
    while true do
      local data = p:read("stderr")
      if not data or data == "" then break end
      c.stderr_parts[#c.stderr_parts + 1] = data
    end
  end)
  return c
end

function Client:stderr() return table.concat(self.stderr_parts) end

function Client:send(msg)
  local line = type(msg) == "string" and msg or assert(cjson.encode(msg))
  local ok, err = self.p:write(line .. "\n", loop.now() + 60)
  if not ok then error("mcp client: write failed: " .. tostring(err), 2) end
end

function Client:recv(timeout)
  local line, err = self.p:read_line("stdout", loop.now() + (timeout or 30))
  if not line then return nil, err end
  local msg = cjson.decode(line)
  if type(msg) ~= "table" then error("mcp client: the server wrote a line that is not JSON: " .. line:sub(1, 200), 2) end
  return msg, line
end

function Client:next_id()
  self.id = self.id + 1
  return self.id
end

-- response(id, timeout) -> the response with that id; other responses are kept for their own waiters,
-- notifications go to self.notes.
function Client:response(id, timeout)
  local deadline = loop.now() + (timeout or 30)
  while true do
    if self.pending[id] then
      local m = self.pending[id]
      self.pending[id] = nil
      return m
    end
    local msg, err = self:recv(math.max(0.001, deadline - loop.now()))
    if not msg then return nil, err end
    if msg.id ~= nil and msg.id ~= cjson.null and msg.method == nil then
      if msg.id == id then return msg end
      self.pending[msg.id] = msg
    else
      self.notes[#self.notes + 1] = msg
    end
  end
end

function Client:call(method, params, timeout)
  local id = self:next_id()
  self:send({ jsonrpc = "2.0", id = id, method = method, params = params })
  local msg, err = self:response(id, timeout)
  if not msg then error("mcp client: no answer to " .. method .. ": " .. tostring(err), 2) end
  return msg
end

function Client:initialize(version)
  local r = self:call("initialize", { protocolVersion = version or "2025-11-25", capabilities = {},
    clientInfo = { name = "spec", version = "1" } })
  self:send({ jsonrpc = "2.0", method = "notifications/initialized" })
  return r.result, r
end

function Client:tool(name, args, timeout, meta)
  local params = { name = name, arguments = args or {} }
  if meta then params._meta = meta end
  local r = self:call("tools/call", params, timeout)
  if r.error then error("mcp client: tools/call " .. name .. ": " .. cjson.encode(r.error), 2) end
  return r.result
end

-- text(result) -> the first text block (the one tools write for people and models).
function M.text(result) return result.content[1].text end

function Client:rss_peak_kb()
  local f = io.open("/proc/" .. self.p.pid .. "/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)"))
end

function Client:close(timeout)
  local t0 = loop.now()
  self.p:close_stdin()
  local st = self.p:wait(loop.now() + (timeout or 10))
  if not st then
    self.p:kill("KILL")
    st = self.p:wait(loop.now() + 5)
    st = { killed = true, status = st }
  end
  self.stderr_task:wait(5)
  self.p:close()
  return st, loop.now() - t0
end

function Client:kill()
  if self.p then
    self.p:kill("KILL")
    self.p:wait(loop.now() + 5)
    self.p:close()
  end
end

return M
