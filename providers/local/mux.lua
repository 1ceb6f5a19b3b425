-- glsb.providers.local.mux: several readers of one agent stream (PROTOCOL.md "Several requests at
-- once"). The agent answers one foreground request at a time, but background commands (start_command)
-- send their events on the same stream, interleaved with it: every event carries the id of the
-- request it belongs to, and each waiter takes only its own.
--
-- Whoever waits reads: a task that wants its next event and finds nobody reading becomes the reader
-- and reads frames until its own comes, handing each other frame to the box of its id (and waking its
-- task). When it stops (it got its event, or its deadline passed) it wakes one other waiter, which
-- then reads in its turn. So a lone foreground request reads the stream itself, as if there were no
-- mux (no task switch per event), and a background command's events are read by whoever waits.
--
-- A frame whose id has no open box is read and dropped (its payload never kept). End of file or a
-- protocol violation ends every box: each waiter gets the reason ("eof" | "protocol: ..."). A reader
-- cancelled mid-frame leaves the stream unreadable: every box then gets "broken".
local loop = require "glsb.loop"

local M = {}

local Mux = {}
Mux.__index = Mux

-- M.new(channel) -> a mux over channel:read_event (channel.lua).
function M.new(chan)
  local self = setmetatable({ chan = chan, boxes = {}, waiting = {}, reading = false, failed = nil }, Mux)
  -- the reader asks the box of each frame whether to keep its payload (a box caps what it holds)
  self.keep = function(ev, n)
    local b = ev.id ~= nil and self.boxes[ev.id]
    if not b then return false end
    if b.keep then return b.keep(ev, n) end
    return true
  end
  return self
end

-- mux:open(id[, keep]) -> a box receiving the events of request id. keep(ev, n): keep that payload?
function Mux:open(id, keep)
  local b = { id = id, keep = keep, queue = {}, head = 1, tail = 0, cond = loop.condition() }
  self.boxes[id] = b
  return b
end

-- mux:close(box): events of its id are dropped from now on.
function Mux:close(box)
  if self.boxes[box.id] == box then self.boxes[box.id] = nil end
end

local function push(b, ev)
  b.tail = b.tail + 1
  b.queue[b.tail] = ev
  b.cond:notify()
end

local function pop(b)
  if b.head > b.tail then return nil end
  local ev = b.queue[b.head]
  b.queue[b.head] = nil
  b.head = b.head + 1
  return ev
end

-- Someone else may read now: wake one waiter (it becomes the reader), or nobody when none waits.
local function hand_over(self)
  local b = next(self.waiting)
  if b then b.cond:notify() end
end

-- Ends every box with reason (eof, a protocol violation, a broken stream).
function Mux:fail(reason)
  if self.failed then return end
  self.failed = reason
  for b in pairs(self.waiting) do b.cond:broadcast() end
end

-- mux:next(box, deadline) -> the box's next event, or nil, "timeout" | "eof" | "protocol: ..." |
-- "broken". A timeout leaves the stream as it was: the next call goes on.
function Mux:next(box, deadline)
  while true do
    local ev = pop(box)
    if ev then return ev end
    if self.failed then return nil, self.failed end
    if not self.reading then
      self.reading = true
      local ok, got, err = pcall(self.chan.read_event, self.chan, deadline, self.keep)
      self.reading = false
      if not ok then
        -- cancelled (or failed) in the middle of a frame: nobody can read this stream any more
        self:fail("broken")
        error(got, 0)
      end
      if got then
        local b = got.id ~= nil and self.boxes[got.id] or nil
        if b == box then
          hand_over(self)
          return got
        end
        if b then push(b, got) end
      elseif err == "timeout" then
        hand_over(self)
        return nil, "timeout"
      else
        self:fail(err)
        return nil, err
      end
    else
      -- somebody reads: they hand our events to our box, or wake us when they stop reading
      self.waiting[box] = true
      local ok, r = pcall(box.cond.wait, box.cond, deadline)
      self.waiting[box] = nil
      if not ok then error(r, 0) end
      if r == "timeout" and box.head > box.tail and not self.failed then return nil, "timeout" end
    end
  end
end

return M
