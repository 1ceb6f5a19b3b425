-- loop.lua: coroutine tasks on one poll loop (glsb.core.poll): run, spawn, gather, sleep, cancel, waits.
--
-- One thread, one loop. A task is a coroutine; every network or process wait yields to the scheduler,
-- which sleeps in core.poll until a transfer, an fd or a timer is ready. A wait made outside any task
-- (the main chunk, or a coroutine of the user's own) drives the loop itself until it is satisfied, so
-- straight-line scripts work without glsb.run.
local core = require "glsb.core"

local M = {}

local Task = {}
Task.__index = Task

local Cancelled = {}
Cancelled.__index = Cancelled
Cancelled.__tostring = function(e) return "Cancelled: " .. e.message end

local task_of = setmetatable({}, { __mode = "k" }) -- coroutine -> Task
local ready = {}                                  -- FIFO of tasks to resume
local ready_head, ready_tail = 1, 0
local waiters = {}                                -- poll token -> waiter (a Task or an inline record)
local timers = {}                                 -- binary min-heap of { at, seq, waiter }
local timer_seq = 0
local inline_woken = false                        -- a wait outside any task was satisfied this step

---------------------------------------------------------------------------------------------------
-- timers

local function heap_push(t)
  timers[#timers + 1] = t
  local i = #timers
  while i > 1 do
    local p = i // 2
    local a, b = timers[p], timers[i]
    if a.at < b.at or (a.at == b.at and a.seq < b.seq) then break end
    timers[p], timers[i] = b, a
    i = p
  end
end

local function heap_pop()
  local n = #timers
  local top = timers[1]
  timers[1] = timers[n]
  timers[n] = nil
  n = n - 1
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= n and (timers[l].at < timers[m].at or (timers[l].at == timers[m].at and timers[l].seq < timers[m].seq)) then
      m = l
    end
    if r <= n and (timers[r].at < timers[m].at or (timers[r].at == timers[m].at and timers[r].seq < timers[m].seq)) then
      m = r
    end
    if m == i then break end
    timers[i], timers[m] = timers[m], timers[i]
    i = m
  end
  return top
end

local function add_timer(at, waiter)
  timer_seq = timer_seq + 1
  local t = { at = at, seq = timer_seq, waiter = waiter }
  heap_push(t)
  return t
end

---------------------------------------------------------------------------------------------------
-- waking

local function push_ready(task)
  ready_tail = ready_tail + 1
  ready[ready_tail] = task
end

-- Wakes a waiter once with a reason: "ready", "timeout" or "cancel".
local function wake(waiter, reason)
  if waiter.woken then return end
  waiter.woken = reason
  if waiter.token then waiters[waiter.token] = nil end
  if waiter.timer then waiter.timer.dead = true end
  if waiter.task then push_ready(waiter.task) else inline_woken = true end
end

local function resume(task)
  local wait = task.waiting
  task.waiting = nil
  local prev = M._current
  M._current = task
  local ok, err = coroutine.resume(task.co, wait and wait.woken)
  M._current = prev
  if not ok then
    -- An error escaping xpcall (cannot happen for errors raised by the task's function).
    task:_finish(false, err)
  end
end

-- One scheduler step: resume ready tasks, then poll at most max_wait seconds, then fire timers.
local function step(max_wait)
  inline_woken = false
  local tail = ready_tail
  while ready_head <= tail do
    local task = ready[ready_head]
    ready[ready_head] = nil
    ready_head = ready_head + 1
    if not task.finished then resume(task) end
  end
  local now = core.now()
  while timers[1] and timers[1].dead do heap_pop() end
  local wait = max_wait or 3600
  if ready_head <= ready_tail or inline_woken then
    wait = 0
  elseif timers[1] then
    wait = math.max(0, math.min(wait, timers[1].at - now))
  end
  for _, token in ipairs(core.poll(wait)) do
    local w = waiters[token]
    if w then wake(w, "ready") end
  end
  now = core.now()
  while timers[1] and (timers[1].dead or timers[1].at <= now) do
    local t = heap_pop()
    if not t.dead then wake(t.waiter, "timeout") end
  end
end

---------------------------------------------------------------------------------------------------
-- waiting

local function cancelled_error(task)
  return setmetatable({ class = "Cancelled", message = "task " .. task.name .. " was cancelled" }, Cancelled)
end

-- The task whose coroutine is running now, or nil (main chunk or a foreign coroutine).
local function running_task()
  local co = coroutine.running()
  local task = task_of[co]
  if task and not task.finished then return task end
  return nil
end

-- Waits for a poll token (or nil: only the deadline) until deadline (absolute core.now() seconds, or
-- nil for none). Returns "ready" or "timeout". In a task a cancel raises the Cancelled error here.
function M.wait(token, deadline)
  local task = running_task()
  local w = { token = token, task = task }
  if task then
    if task.cancel_requested and task.shield == 0 then error(cancelled_error(task), 0) end
    task.waiting = w
  end
  if token then waiters[token] = w end
  if deadline then w.timer = add_timer(deadline, w) end
  if not token and not deadline then error("glsb.loop.wait: neither a token nor a deadline", 2) end
  if task then
    coroutine.yield()
    if w.woken == "cancel" then error(cancelled_error(task), 0) end
  else
    -- Outside any task: drive the loop here until this wait is satisfied.
    while not w.woken do step() end
  end
  return w.woken
end

function M.wait_fd(fd, events, deadline)
  local token = core.watch(fd, events or "r")
  local ok, reason = pcall(M.wait, token, deadline)
  core.unwatch(token)
  if not ok then error(reason, 0) end
  return reason
end

function M.sleep(seconds)
  if type(seconds) ~= "number" then error("glsb.sleep: seconds must be a number", 2) end
  M.wait(nil, core.now() + math.max(0, seconds))
end

M.now = core.now

---------------------------------------------------------------------------------------------------
-- tasks

local task_count = 0

local function traceback_handler(e)
  if type(e) == "string" then return debug.traceback(e, 2) end
  return e
end

function M.spawn(fn, ...)
  if type(fn) ~= "function" then error("glsb.spawn: expected a function", 2) end
  task_count = task_count + 1
  local task = setmetatable({ name = "#" .. task_count, shield = 0, joiners = {} }, Task)
  local args = table.pack(...)
  task.co = coroutine.create(function()
    local res = table.pack(xpcall(fn, traceback_handler, table.unpack(args, 1, args.n)))
    if res[1] then
      task:_finish(true, table.pack(table.unpack(res, 2, res.n)))
    else
      task:_finish(false, res[2])
    end
  end)
  task_of[task.co] = task
  push_ready(task)
  return task
end

function Task:_finish(ok, value)
  if self.finished then return end
  self.finished = true
  self.ok = ok
  if ok then self.results = value else self.err = value end
  for _, w in ipairs(self.joiners) do wake(w, "ready") end
  self.joiners = {}
end

function Task:__tostring()
  return "glsb.Task " .. self.name .. (self.finished and (self.ok and " (done)" or " (failed)") or "")
end

function Task:done() return self.finished == true end

-- Requests cancellation: the task gets a Cancelled error at its current or next wait (deferred while
-- shielded). Cancelling a finished task does nothing.
function Task:cancel()
  if self.finished or self.cancel_requested then return end
  self.cancel_requested = true
  if self.waiting and self.shield == 0 then wake(self.waiting, "cancel") end
end

-- Waits for the task; returns its results or raises its error.
function Task:wait(deadline)
  if not self.finished then
    if running_task() == self then error("glsb: a task cannot wait for itself", 2) end
    local w = { task = running_task() }
    self.joiners[#self.joiners + 1] = w
    if deadline then w.timer = add_timer(deadline, w) end
    if w.task then
      if w.task.cancel_requested and w.task.shield == 0 then error(cancelled_error(w.task), 0) end
      w.task.waiting = w
      coroutine.yield()
      if w.woken == "cancel" then error(cancelled_error(w.task), 0) end
    else
      while not w.woken do step() end
    end
    if not self.finished then return nil, "timeout" end
  end
  if not self.ok then error(self.err, 0) end
  return table.unpack(self.results, 1, self.results.n)
end

-- (ok, results-or-error) without raising; nil while running.
function Task:result()
  if not self.finished then return nil end
  if self.ok then return true, table.unpack(self.results, 1, self.results.n) end
  return false, self.err
end

M.Task = Task

function M.current() return running_task() end

function M.is_cancelled(e) return getmetatable(e) == Cancelled end

-- Runs fn as a root task and drives the loop until it ends. Inside a task it simply calls fn.
function M.run(fn, ...)
  if type(fn) ~= "function" then error("glsb.run: expected a function", 2) end
  if running_task() then return fn(...) end
  return M.spawn(fn, ...):wait()
end

M.sync = M.run

-- Waits for every task; returns each one's first result in order. If any failed, raises the first
-- error (in argument order) once all have ended. Accepts tasks as arguments or one array of tasks.
function M.gather(...)
  local tasks = table.pack(...)
  if tasks.n == 1 and getmetatable(tasks[1]) ~= Task and type(tasks[1]) == "table" then
    tasks = table.pack(table.unpack(tasks[1]))
  end
  local out = { n = tasks.n }
  local first_err
  for i = 1, tasks.n do
    local t = tasks[i]
    if getmetatable(t) ~= Task then error("glsb.gather: argument " .. i .. " is not a task", 2) end
    local res = table.pack(pcall(t.wait, t))
    if res[1] then
      out[i] = res[2]
    elseif M.is_cancelled(res[2]) and running_task() and running_task().cancel_requested then
      -- We ourselves were cancelled while waiting: cancel what we gathered and pass it on.
      for j = i, tasks.n do tasks[j]:cancel() end
      error(res[2], 0)
    elseif first_err == nil then
      first_err = { res[2] }
    end
  end
  if first_err then error(first_err[1], 0) end
  return table.unpack(out, 1, out.n)
end

-- Runs fn with cancellation of the current task deferred until fn returns (cleanup that must finish,
-- such as terminating a sandbox). The deferred cancel is raised at the task's next wait.
function M.shield(fn, ...)
  local task = running_task()
  if not task then return fn(...) end
  task.shield = task.shield + 1
  local res = table.pack(pcall(fn, ...))
  task.shield = task.shield - 1
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- Steps the loop until nothing is ready, waiting or timed (tests and shutdown).
function M.drain(max_seconds)
  local deadline = core.now() + (max_seconds or 10)
  while (ready_head <= ready_tail or next(waiters) or timers[1]) and core.now() < deadline do
    step(math.max(0, deadline - core.now()))
  end
end

return M
