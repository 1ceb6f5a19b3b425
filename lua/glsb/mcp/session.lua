-- glsb.mcp.session: what one MCP client session holds (one server process: stdio serves one client):
-- the sandboxes this server created for it, their background commands, and the resources the results
-- point at. Only ids minted here are ever looked up, so a made-up id, or another session's, reaches
-- nothing (docs/protocols/mcp.md §5).
--
--   local s = session.new{providers = {...}, default_provider = "local", timeout = 600, store_bytes = n}
--   s:add(sb, {provider, keep_alive, timeout}) -> entry (entry.id: "local-3f9a0c1e")
--   s:get(id, what) -> entry | nil, message     (message names sandbox_list)
--   s:touch(entry)                                renews the lease once half of it has passed
--   s:add_command(entry, handle, command) -> cmd; s:command(id, what) -> cmd | nil, message
--   s:put(uri, data, mime, name) / s:resource(uri) -> {data, mime, name} | nil   (bounded: LRU bytes)
--   s:close(budget)                               terminates every sandbox not made with keep_alive
local ids = require "glsb.ids"
local loop = require "glsb.loop"
local log = require "glsb.log"
local errors = require "glsb.errors"

local M = {}

local Session = {}
Session.__index = Session

function M.new(opts)
  return setmetatable({
    sandboxes = {}, order = {}, commands = {}, command_count = 0,
    store = {}, store_order = {}, store_head = 1, store_tail = 0, store_size = 0,
    store_bytes = opts.store_bytes or 64 * 1024 * 1024, part_bytes = opts.part_bytes or 4 * 1024 * 1024,
    tag = ids.hex(12), -- this session's label in each sandbox's metadata (glsb_mcp_session)
  }, Session)
end

---------------------------------------------------------------------------------------------------
-- sandboxes

function Session:add(sb, info)
  local id
  repeat id = info.provider .. "-" .. ids.hex(8) until not self.sandboxes[id]
  local entry = { id = id, sb = sb, provider = info.provider, keep_alive = info.keep_alive == true,
    timeout = info.timeout, renewed = loop.now(), runs = 0, created = os.time() }
  self.sandboxes[id] = entry
  self.order[#self.order + 1] = id
  return entry
end

-- state(entry) -> "running", "expired", "terminated", "gone", ... (the handle's own words, sb:info())
function Session.state(entry)
  if entry.killed then return "killed" end
  if entry.sb:is_running() then return "running" end
  local ok, info = pcall(entry.sb.info, entry.sb)
  return ok and info.state or "ended"
end

local function describe_end(entry, state)
  if state == "expired" then return "its lease ended" end
  if state == "killed" then return "it was killed with sandbox_kill" end
  if entry.cancelled then return "a cancelled call ended it (notifications/cancelled stops the run and its sandbox)" end
  return "it ended (" .. tostring(state) .. ")"
end

-- get(id, what) -> a running entry, or nil and the message the model reads.
function Session:get(id, what)
  local entry = self.sandboxes[id]
  if not entry then
    local known = #self.order > 0 and (" (this session has: " .. table.concat(self.order, ", ", 1,
      math.min(#self.order, 10)) .. (#self.order > 10 and ", ..." or "") .. ")") or " (this session has none yet)"
    return nil, string.format("%s: no sandbox '%s' in this session%s: use an id that sandbox_create returned; "
      .. "sandbox_list shows them", what, tostring(id), known)
  end
  local state = M.state(entry)
  if state ~= "running" then
    return nil, string.format("%s: sandbox '%s' is no longer running: %s; create another with sandbox_create",
      what, id, describe_end(entry, state))
  end
  return entry
end
M.state = Session.state

-- Renews the lease of a sandbox in use once half of it has passed, so that a sandbox ends `timeout`
-- seconds (at most) after its last use rather than after its creation.
function Session:touch(entry)
  local t = entry.timeout
  if not t or loop.now() - entry.renewed < t / 2 then return end
  entry.renewed = loop.now()
  entry.sb:set_timeout(t)
end

function Session:list()
  local out = {}
  for _, id in ipairs(self.order) do out[#out + 1] = self.sandboxes[id] end
  return out
end

-- kill(entry, timeout) -> true, or raises the terminate failure (the entry stays: it can be killed again).
function Session:kill(entry, timeout)
  entry.sb:terminate({ timeout = timeout })
  entry.killed = true
  for id, cmd in pairs(self.commands) do
    if cmd.entry == entry then self.commands[id] = nil end
  end
  return true
end

---------------------------------------------------------------------------------------------------
-- background commands

function Session:add_command(entry, handle, command)
  self.command_count = self.command_count + 1
  local id = "cmd-" .. self.command_count .. "-" .. ids.hex(4)
  local cmd = { id = id, entry = entry, handle = handle, command = command, sent = { stdout = 0, stderr = 0 },
    started = loop.now() }
  self.commands[id] = cmd
  return cmd
end

function Session:command(id, what)
  local cmd = self.commands[id]
  if not cmd then
    return nil, string.format("%s: no command '%s' in this session: use an id that command_start returned", what,
      tostring(id))
  end
  return cmd
end

---------------------------------------------------------------------------------------------------
-- resources: full outputs and images the results link to, kept in memory up to store_bytes (oldest
-- dropped first: a link to a dropped one answers "not found", saying why)

function Session:put(uri, data, mime, name)
  local old = self.store[uri]
  if old then self.store_size = self.store_size - #old.data end
  self.store[uri] = { data = data, mime = mime, name = name, uri = uri }
  self.store_size = self.store_size + #data
  self.store_tail = self.store_tail + 1
  self.store_order[self.store_tail] = uri
  while self.store_size > self.store_bytes and self.store_head < self.store_tail do
    local victim = self.store_order[self.store_head]
    self.store_order[self.store_head] = nil
    self.store_head = self.store_head + 1
    local v = self.store[victim]
    if v and victim ~= uri then
      self.store_size = self.store_size - #v.data
      self.store[victim] = nil
      self.dropped = (self.dropped or 0) + 1
    end
  end
end

-- The byte where each part of a stored resource starts: every part_bytes, moved back off a byte that
-- continues a UTF-8 character, so that no part of a text cuts a character in two.
local function starts(r, part)
  if r.starts then return r.starts end
  local out, at, n = { 1 }, 1, #r.data
  while at + part <= n do
    local next_at = at + part
    local back = 0
    while back < 3 do
      local b = r.data:byte(next_at)
      if not (b and b >= 0x80 and b < 0xC0) then break end
      next_at, back = next_at - 1, back + 1
    end
    out[#out + 1] = next_at
    at = next_at
  end
  r.starts = out
  return out
end

-- parts(uri) -> the URIs a stored resource is read by: itself when it fits in one message, else
-- <uri>/part-1 .. <uri>/part-N, about part_bytes each.
function Session:parts(uri)
  local r = self.store[uri]
  if not r or #r.data <= self.part_bytes then return { uri } end
  local out = {}
  for k = 1, #starts(r, self.part_bytes) do out[k] = uri .. "/part-" .. k end
  return out
end

-- part_list(uri) -> {{uri, size}, ...}: the resources a result links to for a stored one.
function Session:part_list(uri)
  local r = self.store[uri]
  if not r then return {} end
  if #r.data <= self.part_bytes then return { { uri = uri, size = #r.data } } end
  local st, out = starts(r, self.part_bytes), {}
  for k = 1, #st do out[k] = { uri = uri .. "/part-" .. k, size = (st[k + 1] or (#r.data + 1)) - st[k] } end
  return out
end

-- resource(uri) -> {data, mime, name, uri} of a stored resource or of one part of it | nil, why.
function Session:resource(uri)
  local r = self.store[uri]
  if r then
    if #r.data <= self.part_bytes then return r end
    local parts = self:parts(uri)
    return nil, string.format("%d bytes, more than one message carries: read it in %d parts, %s ... %s", #r.data,
      #parts, parts[1], parts[#parts])
  end
  local base, k = uri:match("^(.*)/part%-(%d+)$")
  r = base and self.store[base]
  if not r or #r.data <= self.part_bytes then return nil end
  local st = starts(r, self.part_bytes)
  k = tonumber(k)
  if not st[k] then return nil end
  local last = (st[k + 1] or (#r.data + 1)) - 1
  return { data = r.data:sub(st[k], last), mime = r.mime, uri = uri,
    name = (r.name or base) .. " (part " .. k .. " of " .. #st .. ")" }
end

-- resources() -> the stored resources, oldest first (resources/list).
function Session:resources()
  local out, seen = {}, {}
  for i = self.store_tail, self.store_head, -1 do
    local uri = self.store_order[i]
    if uri and self.store[uri] and not seen[uri] then
      seen[uri] = true
      table.insert(out, 1, self.store[uri])
    end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- the end: every sandbox this session made is terminated (in parallel, within the budget), except those
-- made with keep_alive

function Session:close(budget)
  local tasks = {}
  for _, entry in ipairs(self:list()) do
    if not entry.killed and not entry.keep_alive then
      tasks[#tasks + 1] = loop.spawn(function()
        local ok, err = pcall(entry.sb.terminate, entry.sb, { timeout = budget })
        if not ok then
          log.warn("mcp: terminating sandbox " .. entry.id .. " at exit failed: " .. errors.describe(err))
        end
        entry.killed = true
      end)
    end
  end
  local deadline = loop.deadline(budget)
  for _, t in ipairs(tasks) do t:wait(loop.remaining(deadline)) end
  return #tasks
end

return M
