-- glsb.providers.local.agent: the host's side of the requests to a sandbox's agent (agent.py;
-- PROTOCOL.md in this directory). channel.lua frames the stream and mux.lua hands each waiter its own
-- events; this is the request machine on top: one foreground request at a time (self._lock), one
-- frame at a time (self._wlock), the interrupt at the deadline and the kill after the grace period,
-- and how the sandbox ended when its stream did (program_end, describe_end, mark_dead). Every
-- function takes the provider's sandbox (init.lua) as its first argument.

local loop = require "glsb.loop"
local sandbox = require "glsb.sandbox"
local layout = require "glsb.providers.local.layout"

local M = {}

-- Keeps the last 4 KiB of the supervisor's stderr (diagnostics) without blocking.
local function drain_stderr(self)
  local p = self._proc
  if not p or not p.proc:fd("stderr") then return end
  for _ = 1, 16 do
    local data = p.proc:read("stderr")
    if not data or data == "" then
      if data == "" then p.proc:close_fd("stderr") end
      return
    end
    local tail = self._stderr_tail .. data
    if #tail > 4096 then tail = tail:sub(-4096) end
    self._stderr_tail = tail
  end
end

-- Reads one event: the decoded header, with ev.data = its payload (see channel.lua). keep(ev, n) may
-- refuse a payload (it is then read and dropped). Returns nil, "timeout" | "eof" | "protocol: ...".
local function read_event(self, deadline, keep)
  return self._chan:read_event(deadline, keep)
end

local SIGNAL_NAMES = { [1] = "SIGHUP", [2] = "SIGINT", [3] = "SIGQUIT", [4] = "SIGILL", [6] = "SIGABRT",
  [7] = "SIGBUS", [8] = "SIGFPE", [9] = "SIGKILL", [11] = "SIGSEGV", [13] = "SIGPIPE", [15] = "SIGTERM",
  [24] = "SIGXCPU", [25] = "SIGXFSZ", [31] = "SIGSYS" }

-- How the sandbox's program ended: from the supervisor's exit line when it wrote one (PROGRAM's own
-- wait status, and whether the OOM killer killed it), else from the supervisor's exit status (PROGRAM's
-- status: the code, or 128 + the signal; 125 when the sandbox could not be set up; see glsb-confine
-- sandbox --help). Returns {code = n} | {signal = n, name = "SIGKILL", oom = bool} | {setup = true}
-- | {supervisor_signal = n}, or nil while it runs.
local function program_end(self)
  local p = self._proc
  local st = p and p.proc:poll()
  if not st then return nil end
  if self._exit_report == nil then
    self._exit_report = (self._control and self._control:read_exit(loop.now() + 0.5)
      or not self._control and layout.read_exit(p, loop.now() + 0.5)) or false
  end
  local x = self._exit_report
  if x then
    if x.oom_killed == true then return { signal = 9, name = "SIGKILL", oom = true } end
    if math.type(x.code) == "integer" or (type(x.code) == "number" and x.code == math.floor(x.code)) then
      return { code = math.tointeger(x.code) }
    end
    if type(x.signal) == "number" then
      local sig = math.tointeger(x.signal)
      return { signal = sig, name = SIGNAL_NAMES[sig] or ("signal " .. sig) }
    end
  end
  if st.signal then return { supervisor_signal = st.signal } end
  if st.code == 125 then return { setup = true } end
  if st.code > 128 then
    local sig = st.code - 128
    return { signal = sig, name = SIGNAL_NAMES[sig] or ("signal " .. sig) }
  end
  return { code = st.code }
end

local function describe_end(e, opts)
  if not e then return "the sandbox ended unexpectedly" end
  if e.oom then
    return string.format("the interpreter was killed by the kernel's OOM killer: the sandbox ran out of memory "
      .. "(memory_mb = %s)", tostring(opts and opts.memory_mb or 1024))
  end
  if e.code then return string.format("the interpreter exited with code %d", e.code) end
  if e.signal then return "the interpreter was killed by " .. e.name end
  if e.setup then return "the sandbox supervisor failed" end
  return "the sandbox supervisor was killed by signal " .. tostring(e.supervisor_signal)
end

local function describe_exit(self)
  local st = self._proc and self._proc.proc:poll()
  local parts = {}
  if st then
    parts[#parts + 1] = st.code and ("supervisor exit code " .. st.code)
      or ("supervisor killed by signal " .. tostring(st.signal))
  end
  drain_stderr(self)
  local tail = self._stderr_tail:gsub("%s+$", "")
  if tail ~= "" then parts[#parts + 1] = "stderr: " .. tail:sub(-500) end
  return table.concat(parts, "; ")
end

-- Marks the sandbox dead (it cannot serve requests any more) and stops it:
-- SIGHUP makes the supervisor kill it and remove the cgroup and workspace;
-- SIGKILL only if the supervisor itself does not exit.
local function mark_dead(self, why)
  if self._dead then return end
  self._dead = why
  local p = self._proc
  if not p then return end
  for _, step in ipairs({ { "HUP", 2 }, { "KILL", 1 } }) do
    if p.proc:poll() then return end
    p:kill(step[1])
    if p:wait(loop.now() + step[2]) then return end
  end
end

-- Why the sandbox cannot serve a request, or nil when it can: the base's state first (not running: not
-- started, ended, its lease over), then what only this provider knows (self._dead: the program ended, or
-- the stream broke and the sandbox was killed).
local function unusable(self)
  if self._dead then
    return string.format("the local sandbox is no longer usable (%s); terminate it and create a new one", self._dead)
  end
  if not self._proc or not self:is_running() then return "the local sandbox is not running" end
  return nil
end

-- Sends one frame to the agent. Frames of background requests (spawn, kill) may be sent while a
-- foreground request runs: one frame at a time (self._wlock), never interleaved.
-- -> true, or nil, "busy" (nothing was written: the deadline passed while another frame went out) |
-- "timeout" | "closed" | a message (part of the frame may be out).
local function send(self, req, deadline, payload)
  if not self._wlock:acquire(deadline) then return nil, "busy" end
  local ok, sent, err = pcall(self._chan.send, self._chan, req, payload, deadline)
  self._wlock:release()
  if not ok then error(sent, 0) end
  return sent, err
end

-- Why the agent's stream cannot be read any more, from mux.lua's reason.
local function stream_failure(rerr)
  if rerr == "broken" then
    return "the agent's stream was left in the middle of a frame (its reader was cancelled)"
  end
  return rerr
end

-- The agent's stdout ended in the middle of a request: the lease's terminate (its own doing), or the
-- program ended. Waits for the supervisor's status and says which. -> "lease" | "exited", how (see
-- program_end; {} when unknown)
local function ended(self)
  if sandbox.lease_over(self) then return "lease" end
  if not self._proc then return "exited", {} end
  self._proc:wait(loop.now() + 2)
  local e = program_end(self)
  local desc = describe_end(e, self._opts)
  if not e or e.setup or e.supervisor_signal then
    local d = describe_exit(self)
    if d ~= "" then desc = desc .. " (" .. d .. ")" end
  end
  mark_dead(self, desc .. "; the sandbox is gone")
  return "exited", e or {}
end

-- request(self, req, opts) -> done event, or nil, reason:
--   "unusable" (nothing sent: the sandbox is dead or stopped), "busy" (nothing sent: the deadline
--   passed while another call held the sandbox), "lease" (the lease ended it), "exited" (the program
--   ended during the call: a third value says how, a table of program_end), "killed" (by us: the
--   timeout and the grace period passed), "broken" (a request that could not be written whole, or a
--   protocol violation: the sandbox was killed; self._dead says which).
-- opts: deadline (interrupt at this time), limit (the deadline the agent enforces itself: req.timeout
-- gets what is left of it when the request goes out, and the wait for the sandbox ends there),
-- payload (bytes sent after the header), on_event(ev) for out/chunk events, keep(ev, n) (keep that
-- payload? see channel.lua), grace (seconds after the interrupt before the sandbox is killed),
-- interrupt (send an interrupt at the deadline, else kill).
local function request(self, req, opts)
  if unusable(self) then return nil, "unusable" end
  self._next_id = self._next_id + 1
  req.id = self._next_id
  -- one request at a time: the others wait their turn (FIFO); whoever gets the lock after the
  -- sandbox died finds it unusable below
  if not self._lock:acquire(opts.limit or opts.deadline) then return nil, "busy" end
  local box
  local ok, res, why, how = pcall(function()
    if unusable(self) then return nil, "unusable" end
    if opts.limit then
      if loop.expired(opts.limit) then return nil, "busy" end
      req.timeout = loop.remaining(opts.limit)
    end
    box = self._mux:open(req.id, opts.keep)
    local sent, err = send(self, req, opts.deadline, opts.payload)
    if not sent then
      if sandbox.lease_over(self) then return nil, "lease" end
      if err == "busy" then return nil, "busy" end
      -- part of the frame may be out: the stream cannot be trusted any more
      mark_dead(self, err == "timeout" and string.format("the agent did not take the %s request in time", req.op)
        or ("the agent stopped reading requests: " .. tostring(err)))
      return nil, "broken"
    end
    local deadline = opts.deadline
    local interrupted = false
    while true do
      local ev, rerr = self._mux:next(box, deadline)
      if ev then
        if ev.ev == "done" then return ev end
        if opts.on_event then opts.on_event(ev) end
      elseif rerr == "timeout" then
        if opts.interrupt and not interrupted then
          interrupted = true
          -- a failed send is fine here: the stdin was closed by terminate (the lease), or the agent
          -- is stuck, and the grace period below settles both
          send(self, { op = "interrupt", id = req.id }, loop.now() + 1)
          deadline = loop.now() + (opts.grace or self._grace)
        else
          if sandbox.lease_over(self) then return nil, "lease" end
          mark_dead(self, string.format(
            "%s did not stop within its timeout and the grace period; the sandbox was killed",
            req.op == "exec" and "the code" or req.op))
          return nil, "killed"
        end
      elseif rerr == "eof" then
        return nil, ended(self)
      else
        mark_dead(self, stream_failure(rerr))
        return nil, "broken"
      end
    end
  end)
  if box then self._mux:close(box) end
  self._lock:release()
  if not ok then error(res, 0) end
  return res, why, how
end

M.SIGNAL_NAMES = SIGNAL_NAMES
M.drain_stderr = drain_stderr
M.read_event = read_event
M.program_end = program_end
M.describe_end = describe_end
M.describe_exit = describe_exit
M.mark_dead = mark_dead
M.unusable = unusable
M.send = send
M.stream_failure = stream_failure
M.ended = ended
M.request = request

return M
