-- loop.lua: coroutine tasks on one poll loop (glsb.core.poll): run, spawn, gather, sleep, cancel, waits,
-- task-local context, and a condition variable.
--
-- One thread, one loop. A task is a coroutine; every network or process wait yields to the scheduler,
-- which sleeps in core.poll until a transfer, an fd or a timer is ready. A wait made outside any task
-- (the main chunk, or a coroutine of the user's own) drives the loop itself until it is satisfied, so
-- straight-line scripts work without glsb.run.
--
-- Time: the public API takes relative timeouts in seconds (Task:wait(timeout), sleep(seconds)); the
-- internal waits (wait, wait_fd, Condition:wait) take absolute deadlines on M.now()'s clock, computed
-- once at the top of an operation (M.deadline) and passed down (lua-http's habit), nil meaning none;
-- each sub-step takes what is left (M.remaining).
local core = require "glsb.core"

local M = {}

local Task = {}
Task.__index = Task

local Cancelled = {}
Cancelled.__index = Cancelled
Cancelled.__tostring = function(e) return "Cancelled: " .. e.message end

local task_of = setmetatable({}, { __mode = "k" }) -- coroutine -> Task
local root_context = {}                           -- the context of code running outside any task
local ready = {}                                  -- FIFO of tasks to resume
local ready_head, ready_tail = 1, 0
local waiters = {}                                -- poll token -> its first waiter; others chain by .next_same
local timers = {}                                 -- binary min-heap of { at, seq, waiter, pos }
local timer_seq = 0
local inline_woken = false                        -- a wait outside any task was satisfied this step

---------------------------------------------------------------------------------------------------
-- timers: a binary min-heap on (at, seq); each timer knows its position, so a wait that ends before its
-- deadline takes its timer out at once (O(log n)). Left in the heap until its deadline, it would keep
-- the waiter, its task and the task's coroutine alive that long: a thousand calls with a one-hour
-- deadline each, finished in a second, held a thousand coroutines for the hour.

local function before(a, b) return a.at < b.at or (a.at == b.at and a.seq < b.seq) end

local function place(t, i)
  timers[i] = t
  t.pos = i
end

local function sift_up(i)
  local t = timers[i]
  while i > 1 do
    local p = i // 2
    local parent = timers[p]
    if not before(t, parent) then break end
    place(parent, i)
    i = p
  end
  place(t, i)
end

local function sift_down(i)
  local n = #timers
  local t = timers[i]
  while true do
    local l = 2 * i
    if l > n then break end
    local m = l
    if l + 1 <= n and before(timers[l + 1], timers[l]) then m = l + 1 end
    if not before(timers[m], t) then break end
    place(timers[m], i)
    i = m
  end
  place(t, i)
end

-- Takes timer t out of the heap (the top one, or any other: a wait that ended first). Safe twice.
local function heap_remove(t)
  local i = t.pos
  if not i then return end
  t.pos = nil
  local n = #timers
  local last = timers[n]
  timers[n] = nil
  if i == n then return end
  place(last, i)
  if i > 1 and before(last, timers[i // 2]) then sift_up(i) else sift_down(i) end
end

local function add_timer(at, waiter)
  timer_seq = timer_seq + 1
  local t = { at = at, seq = timer_seq, waiter = waiter }
  timers[#timers + 1] = t
  sift_up(#timers)
  return t
end

---------------------------------------------------------------------------------------------------
-- waking

local function push_ready(task)
  ready_tail = ready_tail + 1
  ready[ready_tail] = task
end

-- Several waits may share one token (two tasks waiting for one process's exit: a lease's teardown and
-- a running call). The common case is one: waiters[token] is that waiter itself, and a second one
-- chains behind it through next_same, so one waiter costs no list.
local function add_waiter(token, w)
  local head = waiters[token]
  if not head then
    waiters[token] = w
    return
  end
  while head.next_same do head = head.next_same end
  head.next_same = w
end

local function remove_waiter(w)
  local token = w.token
  local head = waiters[token]
  if head == w then
    waiters[token] = w.next_same
  elseif head then
    while head.next_same and head.next_same ~= w do head = head.next_same end
    if head.next_same == w then head.next_same = w.next_same end
  end
  w.next_same = nil
end

-- Wakes a waiter once with a reason: "ready", "timeout" or "cancel". A waiter woken by its deadline or
-- a cancel leaves the others on its token waiting.
local function wake(waiter, reason)
  if waiter.woken then return end
  waiter.woken = reason
  if waiter.token then remove_waiter(waiter) end
  if waiter.timer then heap_remove(waiter.timer) end
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
  local wait = max_wait or 3600
  if ready_head <= ready_tail or inline_woken then
    wait = 0
  elseif timers[1] then
    wait = math.max(0, math.min(wait, timers[1].at - now))
  end
  local tokens, perr = core.poll(wait)
  if not tokens then error("glsb.loop: " .. perr, 0) end -- the wait itself failed: nothing can go on
  for _, token in ipairs(tokens) do
    -- every waiter of the token wakes; each wake unlinks the head, so this walks the chain
    local w = waiters[token]
    while w do
      wake(w, "ready")
      w = waiters[token]
    end
  end
  now = core.now()
  while timers[1] and timers[1].at <= now do
    local t = timers[1]
    heap_remove(t)
    wake(t.waiter, "timeout")
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
-- Any number of waits may share a token: its readiness wakes them all.
function M.wait(token, deadline)
  local task = running_task()
  local w = { token = token, task = task }
  if task then
    if task.cancel_requested and task.shield == 0 then error(cancelled_error(task), 0) end
    task.waiting = w
  end
  if token then add_waiter(token, w) end
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

-- deadline(timeout) -> the absolute deadline on M.now()'s clock of a resolved timeout (seconds > 0), or
-- nil for none (timeout nil: no limit). The one place an operation turns its budget into a deadline.
function M.deadline(timeout)
  if timeout == nil then return nil end
  return core.now() + timeout
end

-- remaining(deadline) -> seconds left until deadline, never below a millisecond (so that a transport
-- given it times out at once rather than read 0 as "no limit"), or nil for no deadline. What a sub-step
-- of an operation (a request, a lock wait, one of several cells) gets as its own timeout.
function M.remaining(deadline)
  if deadline == nil then return nil end
  return math.max(0.001, deadline - core.now())
end

-- expired(deadline) -> true when the deadline has passed (never for nil).
function M.expired(deadline)
  return deadline ~= nil and core.now() >= deadline
end

function M.sleep(seconds)
  if type(seconds) ~= "number" then error("glsb.sleep: seconds must be a number", 2) end
  M.wait(nil, core.now() + math.max(0, seconds))
end

---------------------------------------------------------------------------------------------------
-- Condition: tasks wait until another task notifies them (no polling). A condition has no memory: a
-- notify with nobody waiting is lost, so waiters re-check their predicate in a loop:
--
--   while not ready() do if cond:wait(deadline) == "timeout" then ... end end
--
-- wait(deadline) -> "ready" | "timeout"; a cancel of the waiting task raises the Cancelled error there.
-- notify() wakes the longest waiter and returns true, or false when nobody waits; broadcast() wakes all
-- and returns how many. Waiting outside any task drives the loop until notified, like every wait.

local Condition = {}
Condition.__index = Condition
M.Condition = Condition

function Condition.new() return setmetatable({ waiters = {}, head = 1, tail = 0 }, Condition) end
M.condition = Condition.new

function Condition:wait(deadline)
  local task = running_task()
  if task and task.cancel_requested and task.shield == 0 then error(cancelled_error(task), 0) end
  local w = { task = task }
  self.tail = self.tail + 1
  self.waiters[self.tail] = w
  if deadline then w.timer = add_timer(deadline, w) end
  if task then
    task.waiting = w
    coroutine.yield()
  else
    while not w.woken do step() end
  end
  -- a waiter woken by its deadline or a cancel stays queued until notify skips it: mark it, and let go
  -- of the task (the queue may hold the entry long after the task ended)
  if w.woken ~= "ready" then w.gone = true end
  w.task = nil
  if w.woken == "cancel" then error(cancelled_error(task), 0) end
  return w.woken
end

local function next_waiter(self)
  while self.head <= self.tail do
    local w = self.waiters[self.head]
    self.waiters[self.head] = nil
    self.head = self.head + 1
    if not w.woken and not w.gone then return w end
  end
  self.head, self.tail = 1, 0
  return nil
end

function Condition:notify()
  local w = next_waiter(self)
  if not w then return false end
  wake(w, "ready")
  return true
end

function Condition:broadcast()
  local n = 0
  while self:notify() do n = n + 1 end
  return n
end

-- has_waiters() -> true while some task waits (for tests and diagnostics).
function Condition:has_waiters()
  for i = self.head, self.tail do
    local w = self.waiters[i]
    if not w.woken and not w.gone then return true end
  end
  return false
end

---------------------------------------------------------------------------------------------------
-- Lock: one holder at a time, the others wait on a Condition in arrival order (ownership is handed to
-- the longest waiter on release, so nobody barges ahead of a waiting task).
--
-- acquire(deadline) -> true, or false when the deadline passed first; a cancel raises there.
-- release() hands the lock on (misuse: releasing a free lock raises). with(deadline, fn, ...) ->
-- true, fn's results | false: runs fn holding the lock and releases it also when fn raises.

local Lock = {}
Lock.__index = Lock
M.Lock = Lock

function Lock.new() return setmetatable({ held = false, cond = Condition.new() }, Lock) end
M.lock = Lock.new

function Lock:acquire(deadline)
  if not self.held then
    self.held = true
    return true
  end
  -- Only a release's notify wakes a waiter with "ready" (a wake happens once), and that release left
  -- `held` set for it: "ready" means the lock is ours. A timeout or a cancel means it was not handed.
  return self.cond:wait(deadline) == "ready"
end

function Lock:release()
  if not self.held then error("glsb.loop: release of a lock that is not held", 2) end
  -- held stays true when a waiter takes over; only with nobody waiting does the lock become free
  if not self.cond:notify() then self.held = false end
end

function Lock:locked() return self.held end

function Lock:with(deadline, fn, ...)
  if not self:acquire(deadline) then return false end
  local res = table.pack(pcall(fn, ...))
  self:release()
  if not res[1] then error(res[2], 0) end
  return true, table.unpack(res, 2, res.n)
end

-- glsb.now(): the loop's monotonic clock, in seconds (CLOCK_MONOTONIC; only differences mean anything).
M.now = core.now

---------------------------------------------------------------------------------------------------
-- tasks

local task_count = 0

local function traceback_handler(e)
  if type(e) == "string" then return debug.traceback(e, 2) end
  return e
end

---------------------------------------------------------------------------------------------------
-- task-local context: a table of values per task, copied into every task it spawns (a child sees its
-- parent's values as they were at the spawn, and what it sets is its own), as Python's contextvars
-- do. Tracing keeps the current span here; a pool tags who holds what.

local function current_context()
  local task = running_task()
  return task and task.context or root_context
end

-- context_get(key) -> the value the current task (or the main chunk) sees for key, or nil.
function M.context_get(key)
  return current_context()[key]
end

-- context_set(key, value) -> the previous value. Visible to this task and to the tasks it spawns from
-- now on; never to its parent or to tasks already running.
function M.context_set(key, value)
  if key == nil then error("glsb.loop.context_set: key must not be nil", 2) end
  local ctx = current_context()
  local prev = ctx[key]
  ctx[key] = value
  return prev
end

-- with_context(values, fn, ...) -> fn's results, with the keys of `values` set for the duration of fn
-- (restored afterwards, also when fn raises). For a value that covers one operation, such as a span.
function M.with_context(values, fn, ...)
  if type(values) ~= "table" then error("glsb.loop.with_context: values must be a table", 2) end
  if type(fn) ~= "function" then error("glsb.loop.with_context: fn must be a function", 2) end
  local ctx = current_context()
  local keys, saved = {}, {}
  for k, v in pairs(values) do
    keys[#keys + 1] = k
    saved[#keys] = ctx[k]
    ctx[k] = v
  end
  local res = table.pack(pcall(fn, ...))
  for i, k in ipairs(keys) do ctx[k] = saved[i] end
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

local function inherit_context()
  local copy = {}
  for k, v in pairs(current_context()) do copy[k] = v end
  return copy
end

function M.spawn(fn, ...)
  if type(fn) ~= "function" then error("glsb.spawn: expected a function", 2) end
  task_count = task_count + 1
  local task = setmetatable({ name = "#" .. task_count, shield = 0, joiners = {}, context = inherit_context() },
    Task)
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

-- task:wait([timeout]) -> the task's results, or raises its error. timeout: seconds (nil or <= 0 = no
-- limit); when it passes first, returns nil, "timeout" and the task keeps running.
function Task:wait(timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout) then
    error("glsb task:wait: timeout must be a number of seconds, got " .. tostring(timeout), 2)
  end
  local deadline = timeout and timeout > 0 and core.now() + timeout or nil
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

-- task:result() -> true, results... | false, error (without raising); nil while it runs.
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

-- gather(t1, t2, ...) or gather({t1, t2, ...}) -> each task's first result, in argument order.
-- Waits for every task, also when one fails: the others are NOT cancelled (a task may hold a sandbox
-- that cancelling would terminate); once all have ended, the first error in argument order is raised
-- as it is (errors.is still works on it); the other failures stay readable through task:result().
-- When the calling task itself is cancelled while gathering, the tasks not yet ended are cancelled.
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

-- stats() -> { tokens = tokens someone waits on, timers = pending deadlines, ready = tasks queued to run }
-- (tests and diagnostics: once every task has ended, all three are 0).
function M.stats()
  local tokens = 0
  for _ in pairs(waiters) do tokens = tokens + 1 end
  return { tokens = tokens, timers = #timers, ready = ready_tail - ready_head + 1 }
end

-- Steps the loop until nothing is ready, waiting or timed (tests and shutdown).
function M.drain(max_seconds)
  local deadline = core.now() + (max_seconds or 10)
  while (ready_head <= ready_tail or next(waiters) or timers[1]) and core.now() < deadline do
    local wait = math.max(0, deadline - core.now())
    -- only tasks to run (their last steps, say): run them without sleeping in the poll afterwards
    if not next(waiters) and not timers[1] then wait = 0 end
    step(wait)
  end
end

return M
