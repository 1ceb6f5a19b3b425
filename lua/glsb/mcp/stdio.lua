-- glsb.mcp.stdio: the MCP server's stdio transport on glsb.loop: lines in from one fd, lines out to
-- another (docs/protocols/mcp.md §1).
--
--   local r = stdio.reader(fd, {max_line = bytes})
--   r:read(deadline) -> {line, ...} (complete lines, without "\n" and a trailing "\r") | nil, "eof"
--                       a line longer than max_line is not kept: it comes as {too_long = bytes} in its
--                       place once its "\n" arrives (its bytes are counted, never held)
--   local w = stdio.writer(fd, {on_broken = fn, on_drain = fn})   on_drain: some of the queue was written
--   w:send(text)        queues text .. "\n"; written in order, as the fd takes it
--   w:flush(deadline)   -> true once everything queued is written | false (deadline, or the reader left)
--   w:queued()          -> bytes waiting for the fd (a reader that reads slowly makes it grow: the server
--                          stops reading requests while it is over a bound)
--   w:wait_below(bytes) waits until at most that many bytes wait
local core = require "glsb.core"
local loop = require "glsb.loop"

local M = {}

local CHUNK = 256 * 1024

local Reader = {}
Reader.__index = Reader

function M.reader(fd, opts)
  opts = opts or {}
  return setmetatable({ fd = fd, max_line = opts.max_line or 16 * 1024 * 1024, parts = {}, size = 0,
    skipping = false, eof = false }, Reader)
end

-- Cuts one chunk into lines, joined with what came before: out gets the complete ones.
function Reader:_feed(chunk, out)
  local pos = 1
  while true do
    local nl = chunk:find("\n", pos, true)
    if not nl then break end
    local piece = chunk:sub(pos, nl - 1)
    if self.skipping then
      out[#out + 1] = { too_long = self.size + #piece }
      self.skipping = false
    elseif self.size + #piece > self.max_line then
      out[#out + 1] = { too_long = self.size + #piece }
    else
      local line = self.size > 0 and (table.concat(self.parts) .. piece) or piece
      if line:byte(-1) == 13 then line = line:sub(1, -2) end
      out[#out + 1] = line
    end
    self.parts, self.size = {}, 0
    pos = nl + 1
  end
  if pos <= #chunk then
    local rest = #chunk - pos + 1
    if self.skipping or self.size + rest > self.max_line then
      -- past the cap: count the bytes until the line ends, keep none of them
      if not self.skipping then self.parts = {} end
      self.skipping = true
      self.size = self.size + rest
    else
      self.parts[#self.parts + 1] = chunk:sub(pos)
      self.size = self.size + rest
    end
  end
end

function Reader:read(deadline)
  if self.eof then return nil, "eof" end
  while true do
    local data, err, code = core.fd_read(self.fd, CHUNK)
    if data == "" then
      self.eof = true
      -- a last line without its "\n" still counts (the spec's writers always end lines, some others not)
      if self.size > 0 and not self.skipping then
        local line = table.concat(self.parts)
        self.parts, self.size = {}, 0
        return { line }
      end
      return nil, "eof"
    elseif data then
      local out = {}
      self:_feed(data, out)
      if #out > 0 then return out end
    elseif code == "EAGAIN" then
      if loop.wait_fd(self.fd, "r", deadline) == "timeout" then return {} end
    else
      -- the fd itself failed (EBADF, EIO): nothing more will come
      self.eof = true
      return nil, "eof", err
    end
  end
end

local Writer = {}
Writer.__index = Writer

function M.writer(fd, opts)
  opts = opts or {}
  return setmetatable({ fd = fd, queue = {}, head = 1, tail = 0, offset = 1, broken = false, bytes = 0,
    on_broken = opts.on_broken, on_drain = opts.on_drain, idle = loop.condition() }, Writer)
end

-- Writes what the fd takes now; returns true when the queue is empty, false when it must wait.
function Writer:_drain()
  while self.head <= self.tail do
    local s = self.queue[self.head]
    local n, err, code = core.fd_write(self.fd, s, self.offset)
    if n then
      self.offset = self.offset + n
      self.bytes = self.bytes - n
      if self.offset > #s then
        self.queue[self.head] = nil
        self.head = self.head + 1
        self.offset = 1
      end
    elseif code == "EAGAIN" then
      return false
    else
      self.broken = true
      self.queue, self.head, self.tail, self.offset, self.bytes = {}, 1, 0, 1, 0
      if self.on_broken then self.on_broken(err) end
      return true
    end
  end
  self.head, self.tail = 1, 0
  return true
end

function Writer:send(text)
  if self.broken then return false end
  self.tail = self.tail + 1
  self.queue[self.tail] = text .. "\n"
  self.bytes = self.bytes + #text + 1
  if self.flusher then return true end -- a task already waits for the fd: it writes this too, in order
  if self:_drain() then return true end
  self.flusher = loop.spawn(function()
    while not self:_drain() do
      self:_went()
      loop.wait_fd(self.fd, "w")
    end
    self.flusher = nil
    self:_went()
  end)
  return true
end

-- Some of the queue went: whoever waits for room looks again.
function Writer:_went()
  self.idle:broadcast()
  if self.on_drain then self.on_drain() end
end

function Writer:queued() return self.bytes end

function Writer:wait_below(bytes)
  while self.bytes > bytes and not self.broken do self.idle:wait() end
end

function Writer:flush(deadline)
  while self.flusher do
    if self.idle:wait(deadline) == "timeout" then return false end
  end
  return not self.broken
end

return M
