-- process.lua: child processes for tasks: spawn, read lines, write, wait with deadlines, kill.
local core = require "glsb.core"
local loop = require "glsb.loop"

local M = {}

local Process = {}
Process.__index = Process

-- spawn(opts) -> Process, or nil, message, code (an errno name). opts: as core.spawn (argv, env, cwd,
-- stdin/stdout/stderr, setsid, fd3 = "pipe" (the child writes, we read) | "socket" (both ways)).
function M.spawn(opts)
  local p, err, code = core.spawn(opts)
  if not p then return nil, err, code end
  return setmetatable({ proc = p, pid = p.pid, buf = { stdout = "", stderr = "", fd3 = "" }, eof = {} }, Process)
end

-- Reads what is available on stdout/stderr/fd3 (at most max bytes, default 64 KiB), waiting until
-- deadline. Returns data, "" at EOF, or nil, "timeout". The deadline is checked before every wait,
-- never only when the pipe is empty: a child that writes without pause cannot hold a caller past it.
function Process:read(which, deadline, max)
  which = which or "stdout"
  local buffered = self.buf[which]
  if buffered ~= "" then
    if max and #buffered > max then
      self.buf[which] = buffered:sub(max + 1)
      return buffered:sub(1, max)
    end
    self.buf[which] = ""
    return buffered
  end
  if self.eof[which] then return "" end
  while true do
    if not self.proc:fd(which) then
      self.eof[which] = true
      return ""
    end
    local data, _, code = self.proc:read(which, max)
    if data then
      if data == "" then self.eof[which] = true end
      return data
    elseif code ~= "EAGAIN" then
      self.eof[which] = true
      return ""
    end
    if deadline and loop.now() >= deadline then return nil, "timeout" end
    local fd = self.proc:fd(which)
    if loop.wait_fd(fd, "r", deadline) == "timeout" then return nil, "timeout" end
  end
end

-- buffer(capacity) -> bytes outside the Lua heap that reads land in (core.buffer: len, capacity, append,
-- sub, find, take, close; src/core/buffer.c). Mapped, not allocated: unused capacity costs nothing.
function M.buffer(capacity) return core.buffer(capacity) end

-- Reads what is available on stdout/stderr/fd3 into buffer (a core.buffer: at most max bytes and its
-- room), waiting until deadline. Returns the count, 0 at EOF, or nil, "timeout". Bytes read earlier and
-- kept (read_line's rest) go in first. For bulk reads: the bytes are copied once, into the buffer, and
-- made one string there (buffer:take()), never a string per read joined at the end.
function Process:read_into(which, deadline, max, buffer)
  which = which or "stdout"
  max = math.min(max, buffer:capacity() - buffer:len())
  local buffered = self.buf[which]
  if buffered ~= "" then
    local n = math.min(#buffered, max)
    buffer:append(buffered, 1, n)
    self.buf[which] = buffered:sub(n + 1)
    return n
  end
  if self.eof[which] then return 0 end
  while true do
    if not self.proc:fd(which) then
      self.eof[which] = true
      return 0
    end
    local n, _, code = self.proc:read(which, max, buffer)
    if n then
      if n == 0 then self.eof[which] = true end
      return n
    elseif code ~= "EAGAIN" then
      self.eof[which] = true
      return 0
    end
    if deadline and loop.now() >= deadline then return nil, "timeout" end
    if loop.wait_fd(self.proc:fd(which), "r", deadline) == "timeout" then return nil, "timeout" end
  end
end

-- take_fd() -> the oldest descriptor that came on fd3 (a socket: glsb-confine passes one with an `open`
-- answer), now the caller's to close (glsb.fs.close), or nil.
function Process:take_fd() return self.proc:take_fd() end

-- Reads one line (without its "\n"). At EOF returns the last partial line, then nil, "eof".
-- Pieces are kept in a table until the newline comes: a long line costs linear time.
function Process:read_line(which, deadline)
  which = which or "stdout"
  local buf = self.buf[which]
  local nl = buf:find("\n", 1, true)
  if nl then
    self.buf[which] = buf:sub(nl + 1)
    return buf:sub(1, nl - 1)
  end
  local parts = { buf }
  self.buf[which] = ""
  while true do
    if self.eof[which] then
      local line = table.concat(parts)
      if line ~= "" then return line end
      return nil, "eof"
    end
    local data, err = self:read(which, deadline)
    if not data then
      self.buf[which] = table.concat(parts)
      return nil, err
    end
    nl = data:find("\n", 1, true)
    if nl then
      parts[#parts + 1] = data:sub(1, nl - 1)
      self.buf[which] = data:sub(nl + 1)
      return table.concat(parts)
    end
    parts[#parts + 1] = data
  end
end

-- Reads exactly n bytes (for length-prefixed protocols). nil, "eof" | "timeout" otherwise (what was
-- read is kept for the next call).
function Process:read_exact(n, deadline, which)
  which = which or "stdout"
  local parts, have = {}, 0
  while have < n do
    local data, err = self:read(which, deadline, n - have)
    if not data or data == "" then
      self.buf[which] = table.concat(parts)
      return nil, data == "" and "eof" or err
    end
    parts[#parts + 1] = data
    have = have + #data
  end
  return table.concat(parts)
end

-- Writes all of data to stdin (or to which = "fd3" when spawned with fd3 = "socket"). Returns true, or
-- nil, "timeout" | "closed" | a message (a broken pipe). A pipe or socket takes at most its buffer per
-- write: the core writes from an offset into the string, so a large string is never sliced or copied
-- (re-slicing the rest after every partial write made a 100 MB upload quadratic). The deadline is
-- checked between writes too: a slow reader cannot keep the writer past it.
function Process:write(data, deadline, which)
  which = which or "stdin"
  local len = #data
  local pos = 1
  while pos <= len do
    if not self.proc:fd(which) then return nil, "closed" end
    local n, err, code = self.proc:write(data, which, pos)
    if n then
      pos = pos + n
    elseif code == "EAGAIN" then
      if deadline and loop.now() >= deadline then return nil, "timeout" end
      if loop.wait_fd(self.proc:fd(which), "w", deadline) == "timeout" then return nil, "timeout" end
    else
      return nil, err
    end
  end
  return true
end

function Process:close_stdin() if self.proc:fd("stdin") then self.proc:close_fd("stdin") end end

-- Waits for the process to end. Returns {code = n} or {signal = n}, or nil, "timeout". Any number of
-- tasks may wait for one process: its exit token (the core reaps the child when its pidfd turns
-- readable) wakes them all.
function Process:wait(deadline)
  while true do
    local st = self.proc:poll()
    if st then return st end
    local token = self.proc.exit_token
    if not token then
      -- no pidfd (kernel before 5.3, or valgrind): poll
      if deadline and loop.now() >= deadline then return nil, "timeout" end
      loop.sleep(0.01)
    elseif loop.wait(token, deadline) == "timeout" then
      return nil, "timeout"
    end
  end
end

function Process:kill(sig, group) return self.proc:kill(sig or "KILL", group) end

function Process:fd(which) return self.proc:fd(which) end

-- A stream's capture that keeps at most max bytes: the last ones (a log's end says what failed), and
-- how many were dropped before them. Linear: pieces are joined only when twice the bound is held.
local function tail_keeper(max)
  local k = { parts = {}, size = 0, dropped = 0 }
  function k.add(data)
    k.parts[#k.parts + 1] = data
    k.size = k.size + #data
    if max and k.size > 2 * max then
      local all = table.concat(k.parts)
      k.dropped = k.dropped + #all - max
      k.parts, k.size = { all:sub(-max) }, max
    end
  end
  function k.text()
    local all = table.concat(k.parts)
    if max and #all > max then
      k.dropped = k.dropped + #all - max
      all = all:sub(-max)
    end
    return all
  end
  return k
end

-- Reads stdout and stderr to EOF (concurrently) and waits for exit. Returns stdout, stderr, status,
-- or nil, "timeout" (the process is left running: the caller decides). max, when given, bounds what
-- is kept of each stream: its last max bytes (status.dropped_stdout / dropped_stderr say how many
-- came before them), so a child that writes without end costs bounded memory. on_data(which, bytes),
-- when given, sees every piece of stdout ("stdout") and stderr ("stderr") as it arrives (progress).
function Process:communicate(input, deadline, max, on_data)
  local out, errs = tail_keeper(max), tail_keeper(max)
  local function drain(which, acc)
    return function()
      while true do
        local data, e = self:read(which, deadline)
        if not data then return e end
        if data == "" then return "eof" end
        acc.add(data)
        if on_data then on_data(which, data) end
      end
    end
  end
  local tasks = {}
  if self.proc:fd("stdin") then
    -- Fed from its own task: a child that writes as it reads would deadlock a write-then-read.
    tasks[#tasks + 1] = loop.spawn(function()
      local ok, err = true, nil
      if input then ok, err = self:write(input, deadline) end
      self:close_stdin()
      if not ok and err == "timeout" then return "timeout" end
    end)
  end
  if self.proc:fd("stdout") then tasks[#tasks + 1] = loop.spawn(drain("stdout", out)) end
  if self.proc:fd("stderr") then tasks[#tasks + 1] = loop.spawn(drain("stderr", errs)) end
  local results = table.pack(loop.gather(tasks))
  for i = 1, results.n do
    if results[i] == "timeout" then return nil, "timeout" end
  end
  local st, err = self:wait(deadline)
  if not st then return nil, err end
  local o, e = out.text(), errs.text()
  if max then st.dropped_stdout, st.dropped_stderr = out.dropped, errs.dropped end
  return o, e, st
end

function Process:close() self.proc:close() end
Process.__close = Process.close
Process.__gc = Process.close

-- run(argv, opts) -> stdout, stderr, status | nil, message: spawn, feed opts.input, collect, wait.
-- opts.timeout: seconds (nil or <= 0: no limit, glsb's time rule).
function M.run(argv, opts)
  opts = opts or {}
  return loop.run(function()
    local p, err = M.spawn({ argv = argv, env = opts.env, cwd = opts.cwd, stdin = opts.input and "pipe" or "null" })
    if not p then return nil, err end
    local out, errs, st = p:communicate(opts.input, loop.deadline(require("glsb.options").timeout(opts.timeout)))
    if not out then p:kill("KILL") end
    p:close()
    if not out then return nil, errs end
    return out, errs, st
  end)
end

-- getpid() -> this process's pid; geteuid() -> its effective uid.
function M.getpid() return core.getpid() end
function M.geteuid() return core.geteuid() end
-- signal(pid, start, sig) -> true | nil, message, code: sig ("HUP", "KILL", ...) to process pid only while
-- it is the one that started at `start` (field 22 of /proc/<pid>/stat, ticks since boot): a recycled pid
-- is never signalled (pidfd: no race between the check and the signal).
function M.signal(pid, start, sig) return core.signal(pid, start, sig) end
-- isatty(fd) -> true, columns (nil when unknown) | false: whether this process's fd (0, 1, 2) is a terminal.
function M.isatty(fd) return core.isatty(fd) end

return M
