-- glsb.providers.local.channel: framed streams from a sandbox: the host end of the agent protocol
-- (PROTOCOL.md in this directory) and the reading half of glsb-confine's control channel (control.lua).
--
-- Frames both ways are one JSON header line, then, when the header has "n" (the control channel:
-- "len"), exactly that many raw bytes. Bulk
-- data (uploads, downloads, output) never goes through JSON or base64, and nothing is re-concatenated:
-- a frame costs time linear in its size.
--
-- Everything read here comes from the sandbox and is hostile: a header line is at most MAX_HEADER
-- bytes, a payload at most MAX_PAYLOAD; a payload the caller does not want is read and dropped, never
-- kept; the deadline is checked before every read, so a sandbox that writes without pause cannot hold
-- a caller past it. A violation is returned as "protocol: ..." and the caller kills the sandbox.
local cjson = require "cjson.safe"
local codec = require "glsb.codec"
local loop = require "glsb.loop"

local M = {}

M.MAX_HEADER = 1024 * 1024
M.MAX_PAYLOAD = 16 * 1024 * 1024
local READ_SIZE = 1024 * 1024
-- A header is read with at most this much after it: the payload that follows is then read in pieces of
-- its own (kept as they come), not cut out of a large read (a copy of each payload byte).
local HEADER_READ = 64 * 1024

local Channel = {}
Channel.__index = Channel

-- M.new(process, before_read[, opts]) -> a channel on the process's stdin (requests) and stdout (events).
-- before_read(), if given, runs before every read from the process (e.g. to drain its stderr). opts:
-- read / write (the process's streams, default "stdout" / "stdin"), len (the header key of a payload's
-- size, default "n").
function M.new(p, before_read, opts)
  opts = opts or {}
  return setmetatable({ proc = p, buf = "", pos = 1, pending = nil, before_read = before_read,
    rfd = opts.read or "stdout", wfd = opts.write or "stdin", len = opts.len or "n" }, Channel)
end

-- channel:write(data, deadline) -> true, or nil, "timeout" | "closed" | message: bytes as they are.
function Channel:write(data, deadline)
  return self.proc:write(data, deadline, self.wfd)
end

-- channel:send(header, payload, deadline) -> true, or nil, "timeout" | "closed" | message.
-- header is a table (its "n" is set from payload); payload is a string or nil.
function Channel:send(header, payload, deadline)
  header.n = payload and #payload or nil
  local line = cjson.encode(header)
  if not line then return nil, "cannot encode the request" end
  local ok, err = self.proc:write(line .. "\n", deadline, self.wfd)
  if ok and payload and #payload > 0 then ok, err = self.proc:write(payload, deadline, self.wfd) end
  if not ok then return nil, err end
  return true
end

local function more(self, deadline, max)
  if deadline and loop.now() >= deadline then return nil, "timeout" end
  if self.before_read then self.before_read() end
  local data, err = self.proc:read(self.rfd, deadline, max)
  if not data then return nil, err end
  if data == "" then return nil, "eof" end
  return data
end

-- The next header line, or nil, reason. What follows it stays in self.buf.
local function header_line(self, deadline)
  local buf = self.buf
  local nl = buf:find("\n", self.pos, true)
  if nl then
    local line = buf:sub(self.pos, nl - 1)
    self.pos = nl + 1
    return line
  end
  local rest = buf:sub(self.pos)
  local parts, size = { rest }, #rest
  self.buf, self.pos = "", 1
  while true do
    -- the bytes after a header (small frames, the start of a payload) come with it
    local data, err = more(self, deadline, HEADER_READ)
    if not data then
      self.buf = table.concat(parts) -- kept for the next call
      return nil, err
    end
    nl = data:find("\n", 1, true)
    if nl then
      if size + nl - 1 > M.MAX_HEADER then return nil, "protocol: a header line from the agent exceeded 1 MiB" end
      parts[#parts + 1] = data:sub(1, nl - 1)
      self.buf, self.pos = data, nl + 1
      return table.concat(parts)
    end
    parts[#parts + 1] = data
    size = size + #data
    if size > M.MAX_HEADER then return nil, "protocol: a header line from the agent exceeded 1 MiB" end
  end
end

-- Reads the pending payload (self.pending: {ev, need, parts | nil when dropped, sink | nil}).
local function payload(self, deadline)
  local p = self.pending
  while p.need > 0 do
    local avail = #self.buf - self.pos + 1
    local piece
    if avail > 0 then
      local take = math.min(avail, p.need)
      if p.sink then p.sink:append(self.buf, self.pos, self.pos + take - 1)
      elseif p.parts then piece = self.buf:sub(self.pos, self.pos + take - 1) end
      self.pos = self.pos + take
      p.need = p.need - take
    elseif p.sink then
      if deadline and loop.now() >= deadline then return nil, "timeout" end
      if self.before_read then self.before_read() end
      local n, err = self.proc:read_into(self.rfd, deadline, p.need, p.sink)
      if not n then return nil, err end
      if n == 0 then return nil, "eof" end
      p.need = p.need - n
    else
      local data, err = more(self, deadline, math.min(p.need, READ_SIZE))
      if not data then return nil, err end
      piece = p.parts and data or nil
      p.need = p.need - #data
    end
    if piece then p.parts[#p.parts + 1] = piece end
  end
  self.pending = nil
  -- a payload read in one piece is kept as it came (no copy of it); with want_parts, its pieces
  if p.parts and p.want_parts then
    p.ev.parts = p.parts
  elseif p.parts then
    p.ev.data = #p.parts == 1 and p.parts[1] or table.concat(p.parts)
  end
  return p.ev
end

-- channel:read_event(deadline, keep) -> event table (ev.data = the payload when kept), or nil, reason
-- ("timeout" | "eof" | "protocol: ..."). keep(ev, n) says whether to keep a payload (default: keep);
-- a dropped payload is read and discarded (ev.dropped = its size); a core.buffer returned by keep
-- gets the payload appended (read straight into it: ev.sunk = its size; it must have room for n).
-- want_parts: a kept payload is ev.parts (its pieces in order, never joined) instead of ev.data. A
-- timeout leaves a partly read frame in place: the next call goes on with it.
function Channel:read_event(deadline, keep, want_parts)
  if self.pending then return payload(self, deadline) end
  local line, err = header_line(self, deadline)
  if not line then return nil, err end
  if #self.buf > READ_SIZE and self.pos > #self.buf // 2 then
    self.buf, self.pos = self.buf:sub(self.pos), 1
  end
  local ev = codec.decode_json(line) -- a line the code may have written: decoded at the cost of what it holds
  if type(ev) ~= "table" then return nil, "protocol: the agent sent a line that is not a JSON object" end
  local n = ev[self.len]
  if n == nil then return ev end
  if math.type(n) == "float" then n = math.tointeger(n) end
  if math.type(n) ~= "integer" or n < 0 or n > M.MAX_PAYLOAD then
    return nil, "protocol: a payload size from the agent is not an integer in [0, 16 MiB]"
  end
  local kept = keep == nil or keep(ev, n)
  local sink = type(kept) == "userdata" and kept or nil
  if sink then ev.sunk = n elseif not kept then ev.dropped = n end
  self.pending = { ev = ev, need = n, parts = kept and not sink and {} or nil, sink = sink, want_parts = want_parts }
  return payload(self, deadline)
end

M.Channel = Channel
return M
