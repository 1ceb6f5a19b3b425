-- glsb.trace.batch: the batch span processor (OpenTelemetry SDK specification), on the glsb loop.
--
-- Ended spans wait in a bounded queue (max_queue_size; beyond it a span is dropped and counted, so
-- memory never grows with a slow or absent collector). A worker task exports them in batches of at most
-- max_export_batch_size: as soon as a batch is full (on_end notifies it), or schedule_delay after the
-- oldest queued span. One
-- export at a time (the specification forbids concurrent Export calls), each bounded by export_timeout,
-- retries included. The worker exists only while spans are queued: with nothing to send there is no
-- task, no timer, no wake-up. The user's call never waits for any of it: on_end only appends to a table.
--
-- A failed export is reported once (one warning line for the life of the processor); while exports keep
-- failing, each makes a single attempt, so a dead collector costs one refused connection per batch.
local loop = require "glsb.loop"

local M = {}

local Batch = {}
Batch.__index = Batch

-- new{exporter, max_queue_size, max_export_batch_size, schedule_delay, export_timeout (nil: none), warn,
-- context}
-- context: optional {clear = fn()} run first in the worker task (no trace context of its own).
function M.new(opts)
  return setmetatable({
    exporter = opts.exporter, warn = opts.warn or function() end, clear_context = opts.clear_context,
    max_queue = opts.max_queue_size, max_batch = opts.max_export_batch_size,
    delay = opts.schedule_delay, export_timeout = opts.export_timeout,
    queue = {}, head = 1, tail = 0, first_at = nil,
    worker = nil, sleeping = false, wakeup = loop.condition(), failing = false, warned = false, shut = false,
    stats = { queued = 0, exported = 0, dropped = 0, failed_exports = 0, exports = 0 },
  }, Batch)
end

function Batch:size() return self.tail - self.head + 1 end

local function take(self, n)
  local batch = {}
  while #batch < n and self.head <= self.tail do
    batch[#batch + 1] = self.queue[self.head]
    self.queue[self.head] = nil
    self.head = self.head + 1
  end
  if self.head > self.tail then self.head, self.tail, self.first_at = 1, 0, nil end
  return batch
end

-- Exports one batch; returns true when it was accepted.
function Batch:_export(batch, deadline, attempts)
  self.stats.exports = self.stats.exports + 1
  local ok, accepted, note = pcall(self.exporter.export, self.exporter, batch, deadline, attempts)
  if not ok then
    if loop.is_cancelled(accepted) then error(accepted, 0) end
    accepted, note = false, tostring(accepted)
  end
  if accepted then
    self.stats.exported = self.stats.exported + #batch
    if self.failing then self.failing = false end
    if note and not self.warned_partial then
      self.warned_partial = true
      self.warn("trace export to " .. self.exporter:describe() .. ": " .. note)
    end
    return true
  end
  self.stats.failed_exports = self.stats.failed_exports + 1
  self.stats.dropped = self.stats.dropped + #batch
  self.failing = true
  if not self.warned then
    self.warned = true
    self.warn(("trace export to %s failed (%s); its spans are dropped and later failures are not reported")
      :format(self.exporter:describe(), tostring(note)))
  end
  return false
end

local function worker_body(self)
  local me = loop.current()
  if self.clear_context then self.clear_context() end
  while self.worker == me and self:size() > 0 do
    -- wait for a full batch (on_end notifies) or the schedule delay after the oldest queued span
    while self.worker == me and self:size() > 0 and self:size() < self.max_batch
        and loop.now() < self.first_at + self.delay do
      self.sleeping = true
      self.wakeup:wait(self.first_at + self.delay)
      self.sleeping = false
    end
    if self.worker ~= me or self:size() == 0 then break end
    local batch = take(self, self.max_batch)
    self.exporting = true
    local ok, err = pcall(self._export, self, batch, loop.deadline(self.export_timeout), self.failing and 1 or nil)
    self.exporting = false
    if not ok then
      -- cancelled by a flush or shutdown: the batch goes back to the front, the flusher sends it
      for i = #batch, 1, -1 do
        self.head = self.head - 1
        self.queue[self.head] = batch[i]
      end
      self.first_at = self.first_at or loop.now()
      error(err, 0)
    end
  end
  if self.worker == me then self.worker = nil end
end

function Batch:_start_worker()
  self.sleeping = false
  self.worker = loop.spawn(worker_body, self)
end

-- on_end(span): called by Span:finish. Never waits.
function Batch:on_end(span)
  local tail = self.tail + 1
  local size = tail - self.head + 1
  if self.shut or size > self.max_queue then
    self.stats.dropped = self.stats.dropped + 1
    return
  end
  self.tail = tail
  self.queue[tail] = span
  local stats = self.stats
  stats.queued = stats.queued + 1
  if not self.first_at then self.first_at = loop.now() end
  if self.flushing then
    return -- the flush in progress sends it, or the next worker does
  elseif not self.worker then
    self:_start_worker()
  elseif self.sleeping and size >= self.max_batch then
    self.wakeup:notify()
  end
end

-- force_flush(timeout, attempts) -> true when every queued span was exported. timeout: seconds (nil:
-- export_timeout; <= 0: no limit, glsb's time rule). Runs the exports in the caller
-- (a task or the main chunk). A worker waiting for its batch to fill is cancelled; one with an export in
-- flight finishes it first (cancelling it could send spans the collector already has twice), unless it
-- overruns the deadline: then it is cancelled and its batch put back.
function Batch:force_flush(timeout, attempts)
  local deadline = loop.deadline(require("glsb.options").timeout(timeout, self.export_timeout))
  local w = self.worker
  self.worker = nil -- the worker leaves its loop after the export in hand
  self.flushing = true -- and on_end starts no other meanwhile: one export at a time
  if w and not w:done() then
    if self.exporting then pcall(w.wait, w, loop.remaining(deadline)) end
    if not w:done() then
      w:cancel()
      pcall(w.wait, w, loop.remaining(deadline)) -- lets it put its batch back
    end
  end
  local all = true
  local ok, err = pcall(function()
    while self:size() > 0 and not loop.expired(deadline) do
      local batch = take(self, self.max_batch)
      if not self:_export(batch, deadline, attempts or (self.failing and 1 or nil)) then
        all = false
        break
      end
    end
  end)
  self.flushing = false
  if not ok then error(err, 0) end
  -- spans that arrived meanwhile (or a failed batch's successors) get a worker again
  if self:size() > 0 and not self.closing then self:_start_worker() end
  return all and self:size() == 0
end

-- shutdown(timeout): flush what is queued (a single retry at most: the process is ending), then refuse
-- new spans. What could not be sent is counted as dropped.
function Batch:shutdown(timeout)
  if self.shut then return true end
  self.closing = true
  local ok = self:force_flush(timeout, self.failing and 1 or 2)
  self.shut = true
  local left = self:size()
  if left > 0 then
    self.stats.dropped = self.stats.dropped + left
    take(self, left)
  end
  return ok
end

return M
