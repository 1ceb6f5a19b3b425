-- glsb.providers.local.control: the host end of glsb-confine's control channel (src/confine/CONTROL.md).
--
-- The workspace primitives, uploads and downloads promise confinement and byte counts. The code in
-- the sandbox runs in the agent's process and could replace any handler of the agent, so these do
-- not go through the agent: the supervisor (outside every namespace of the sandbox) runs each call
-- as `glsb-confine write|run|read|pack` in a confined child of its own and relays its output on fd 3, a
-- socketpair only the host and the supervisor hold. The same socket carries the supervisor's report
-- lines (the set-up line, the exit line: REPORT.md), so every read of fd 3 goes through here.
--
-- Requests: `call ID NARGS ARGBYTES STDINBYTES\n`, the NUL-ended arguments, the stdin bytes;
-- `cancel ID\n`. Replies: JSON header lines, `len` raw bytes after stdout/stderr headers; a call ends
-- at its `exit` or `error` frame. One call at a time (a lock; the supervisor answers `busy` else).
-- What the supervisor relays is bounded by the helper's own limits; the host keeps at most the
-- caller's max_stdout of it and drops the rest unread, whatever arrives.
local fs = require "glsb.fs"
local loop = require "glsb.loop"
local channel = require "glsb.providers.local.channel"

local M = {}

-- After a cancel, the supervisor SIGTERMs the helper and SIGKILLs it 2 s later: then the call ends.
M.CANCEL_GRACE = 5
M.PROGRESS_SLICE = 1024 * 1024 -- bytes of stdin written between two progress reports
M.STDERR_KEEP = 64 * 1024

local Control = {}
Control.__index = Control

-- M.new(process) -> the control channel on the process's fd 3 (spawned with fd3 = "socket").
function M.new(p)
  return setmetatable({
    chan = channel.new(p, nil, { read = "fd3", write = "fd3", len = "len" }),
    lock = loop.lock(), next_id = 0, exit = nil, broken = nil,
  }, Control)
end

-- A report line (no "id"): the exit line is kept (control.exit); the set-up line is returned.
local function report_line(self, ev)
  if type(ev.exit) == "table" then self.exit = ev.exit end
end

-- control:read_report(deadline) -> the set-up line ({"ok": ...}), or nil, reason.
function Control:read_report(deadline)
  while true do
    local ev, err = self.chan:read_event(deadline, function() return false end)
    if not ev then return nil, err end
    if ev.ok ~= nil then return ev end
    report_line(self, ev)
  end
end

-- control:read_exit(deadline) -> the exit line's table ({code, signal, oom_kills, oom_killed}), or nil
-- when the supervisor wrote none before closing fd 3.
function Control:read_exit(deadline)
  while not self.exit do
    local ev = self.chan:read_event(deadline, function() return false end)
    if not ev then break end
    if ev.id == nil then report_line(self, ev) end
  end
  return self.exit
end

local function argblob(args)
  local parts = {}
  for i, a in ipairs(args) do
    if type(a) ~= "string" or a:find("\0", 1, true) then
      error("control: argument " .. i .. " must be a string without NUL", 3)
    end
    parts[i] = a .. "\0"
  end
  return table.concat(parts)
end

-- Reads the frames of call id until its end. -> result | nil, reason.
local function collect(self, id, opts)
  local max = opts.max_stdout or math.huge
  local out, size, over = {}, 0, false
  local err_parts, err_size = {}, 0
  local deadline = opts.deadline
  local cancelled = false
  while true do
    local ev, why = self.chan:read_event(deadline, function(ev, n)
      if ev.id ~= id then return false end
      if ev.ev == "stdout" then
        if over or size + n > max then
          over = true
          return false
        end
        size = size + n
        if opts.on_progress then opts.on_progress(nil, size) end
        return opts.sink or true
      end
      if ev.ev == "stderr" then
        if err_size + n > M.STDERR_KEEP then return false end
        err_size = err_size + n
        return true
      end
      return false
    end, true)
    if ev then
      if ev.id == nil then
        if ev.ev == "protocol_error" then
          self.broken = "the supervisor refused a request: " .. tostring(ev.message)
          return nil, "broken"
        end
        report_line(self, ev)
      elseif ev.id == id then
        if ev.ev == "stdout" and ev.parts and opts.on_stdout then
          for _, piece in ipairs(ev.parts) do opts.on_stdout(piece) end
        elseif ev.ev == "stdout" and ev.parts then table.move(ev.parts, 1, #ev.parts, #out + 1, out)
        elseif ev.ev == "stderr" and ev.parts then table.move(ev.parts, 1, #ev.parts, #err_parts + 1, err_parts)
        elseif ev.ev == "exit" or ev.ev == "error" then
          return {
            -- opts.parts: the stdout as its pieces (stdout_parts), not joined: a caller that takes
            -- a header off the front joins the rest once (a 100 MB download is not copied twice)
            stdout = not opts.parts and not opts.sink and not opts.on_stdout and table.concat(out) or nil,
            stdout_parts = opts.parts and out or nil,
            stderr = table.concat(err_parts), stdout_over = over,
            code = math.tointeger(ev.code), signal = math.tointeger(ev.signal), oom_kills = ev.oom_kills,
            error = ev.ev == "error" and ev.error or nil, message = ev.message, cancelled = cancelled,
          }
        end
      end
    elseif why == "timeout" and not cancelled then
      cancelled = true
      self.chan:write(string.format("cancel %d\n", id), loop.now() + 1)
      deadline = loop.now() + M.CANCEL_GRACE
    elseif why == "timeout" then
      self.broken = "a cancelled call did not end"
      return nil, "broken"
    elseif why == "eof" then
      return nil, "gone"
    else
      self.broken = tostring(why)
      return nil, "broken"
    end
  end
end

-- control:call(args, stdin, opts) -> {stdout, stderr, stdout_over, code, signal, oom_kills, error, message,
-- cancelled}, or nil, reason: "busy" (the lock's deadline passed, nothing sent), "gone" (the supervisor
-- ended: the sandbox is over), "broken" (the channel cannot be trusted any more: control.broken says
-- why). args: the helper command and its arguments ({"write", "--root", ...}); stdin: bytes or nil.
-- opts: deadline (cancel the call then; the call ends at the latest CANCEL_GRACE later), max_stdout
-- (what the caller can need: beyond it the stdout is dropped and stdout_over set), on_progress(sent,
-- received) (stdin bytes written, or stdout bytes read, the other nil: a progress line), parts (the result has
-- stdout_parts, the stdout's pieces in order, instead of stdout), sink (a glsb.process.buffer the stdout
-- is read into, with room for max_stdout: the result has no stdout; for bulk reads), on_stdout (called
-- with each piece of the stdout kept, in order, as it comes: the result has no stdout; for a stream
-- of any length, such as a snapshot's archive, that the caller writes out as it comes; it must not
-- raise: the call goes on to its end either way).
function Control:call(args, stdin, opts)
  opts = opts or {}
  if self.broken then return nil, "broken" end
  if not self.lock:acquire(opts.deadline) then return nil, "busy" end
  local ok, res, why = pcall(function()
    self.next_id = self.next_id + 1
    local id = self.next_id
    local blob = argblob(args)
    stdin = stdin or ""
    local header = string.format("call %d %d %d %d\n", id, #args, #blob, #stdin)
    -- a frame half written cannot be taken back: past this point a failed write breaks the channel
    local sent, err = self.chan:write(header .. blob, opts.deadline and (opts.deadline + M.CANCEL_GRACE))
    local late = opts.deadline and (opts.deadline + M.CANCEL_GRACE)
    if sent and #stdin > 0 and opts.on_progress and #stdin > M.PROGRESS_SLICE then
      -- in slices, so that a progress line moves (each slice is a copy: only when one is shown)
      for at = 1, #stdin, M.PROGRESS_SLICE do
        sent, err = self.chan:write(stdin:sub(at, at + M.PROGRESS_SLICE - 1), late)
        if not sent then break end
        opts.on_progress(math.min(#stdin, at + M.PROGRESS_SLICE - 1), nil)
      end
    elseif sent and #stdin > 0 then
      sent, err = self.chan:write(stdin, late)
      if sent and opts.on_progress then opts.on_progress(#stdin, nil) end
    end
    if not sent then
      if err == "closed" or err == "EPIPE" then return nil, "gone" end
      self.broken = "a request could not be sent: " .. tostring(err)
      return nil, "broken"
    end
    return collect(self, id, opts)
  end)
  self.lock:release()
  if not ok then error(res, 0) end
  return res, why
end

-- One short request `VERB ID[ ARG]` and its one answer: the event with that id whose ev is want or
-- "error". -> event, or nil, reason as for call ("timeout" too).
local function ask(self, verb, arg, want, deadline)
  if self.broken then return nil, "broken" end
  if not self.lock:acquire(deadline) then return nil, "busy" end
  local ok, res, why = pcall(function()
    self.next_id = self.next_id + 1
    local id = self.next_id
    local line = arg and string.format("%s %d %s\n", verb, id, arg) or string.format("%s %d\n", verb, id)
    local sent, err = self.chan:write(line, deadline)
    if not sent then
      if err == "closed" or err == "EPIPE" then return nil, "gone" end
      self.broken = "a request could not be sent: " .. tostring(err)
      return nil, "broken"
    end
    while true do
      local ev, rerr = self.chan:read_event(deadline, function() return false end)
      if not ev then
        if rerr == "eof" then return nil, "gone" end
        if rerr ~= "timeout" then self.broken = tostring(rerr) end
        return nil, rerr == "timeout" and "timeout" or "broken"
      end
      if ev.id == nil then
        report_line(self, ev)
      elseif ev.id == id and (ev.ev == want or ev.ev == "error") then
        return ev
      end
    end
  end)
  self.lock:release()
  if not ok then error(res, 0) end
  return res, why
end

-- control:files(words, data, deadline) -> the file server's answer (its fields: ok, error, message,
-- ...; .data its bytes; .fd the descriptor an `open` answer passed, the caller's to close), or nil,
-- reason as for call ("timeout" too). words: the operation and its arguments (ws_serve.c:
-- exists|list|mkdir|remove PATH, read PATH MAX, open ROOT RELHEX MAX follow|beneath, write ROOT RELHEX);
-- data: a write's bytes (at most FILES_DATA_MAX). A long-lived server in the sandbox answers, confined as a
-- call's helper (src/confine/CONTROL.md, "files"): one round trip, no process started per request.
M.FILES_DATA_MAX = 1024 * 1024

function Control:files(words, data, deadline)
  if self.broken then return nil, "broken" end
  local body = argblob(words) .. (data or "")
  if not self.lock:acquire(deadline) then return nil, "busy" end
  local proc = self.chan.proc
  local ok, res, why = pcall(function()
    -- a descriptor still waiting belongs to an answer nobody read (a timeout): never to this one
    for fd in function() return proc:take_fd() end do fs.close(fd) end
    self.next_id = self.next_id + 1
    local id = self.next_id
    local sent, err = self.chan:write(string.format("files %d %d\n", id, #body) .. body, deadline)
    if not sent then
      if err == "closed" or err == "EPIPE" then return nil, "gone" end
      self.broken = "a request could not be sent: " .. tostring(err)
      return nil, "broken"
    end
    while true do
      local ev, rerr = self.chan:read_event(deadline, function(e) return e.id == id end)
      if not ev then
        if rerr == "eof" then return nil, "gone" end
        -- a timeout leaves the channel in step (a late answer is read and dropped by whoever reads next)
        if rerr == "timeout" then return nil, "timeout" end
        self.broken = tostring(rerr)
        return nil, "broken"
      end
      if ev.id == nil then
        if ev.ev == "protocol_error" then
          self.broken = "the supervisor refused a request: " .. tostring(ev.message)
          return nil, "broken"
        end
        report_line(self, ev)
      elseif ev.id == id and (ev.ev == "files" or ev.ev == "error") then
        -- an `open` answer's descriptor came with its first byte (nil: a channel that passes none)
        if ev.fd == true then ev.fd = proc:take_fd() else ev.fd = nil end
        return ev
      end
    end
  end)
  self.lock:release()
  if not ok then error(res, 0) end
  return res, why
end

-- control:stats(deadline) -> {oom_kills, memory_bytes, memory_peak_bytes} (numbers or nil when the
-- sandbox has no memory cgroup), or nil, reason as for call.
function Control:stats(deadline)
  local ev, why = ask(self, "stats", nil, "stats", deadline)
  if not ev then return nil, why end
  if ev.ev ~= "stats" then return nil, "broken" end
  local function n(v) return math.type(v) and v or nil end
  return { oom_kills = n(ev.oom_kills), memory_bytes = n(ev.memory_bytes), memory_peak_bytes = n(ev.memory_peak_bytes) }
end

-- control:forward(port, deadline) -> the port on the host's 127.0.0.1 that reaches port in the sandbox
-- (the same one each time for a port), or nil, reason ("no_network", "forward_failed", or as for
-- call), message.
function Control:forward(port, deadline)
  local ev, why = ask(self, "forward", string.format("%d", port), "forward", deadline)
  if not ev then return nil, why end
  if ev.ev == "error" then return nil, tostring(ev.error), tostring(ev.message) end
  local host = math.tointeger(ev.host_port)
  if not host or host < 1 or host > 65535 then return nil, "broken", "a forward answer without a port" end
  return host
end

return M
