-- glsb.providers.local.background: commands started in the background (start_command) and their
-- handles.

local loop = require "glsb.loop"
local models = require "glsb.models"
local outcome = require "glsb.outcome"
local sandbox = require "glsb.sandbox"
local agent = require "glsb.providers.local.agent"
local result = require "glsb.providers.local.result"

local Status = models.ExecutionStatus
local unusable, send, ended, mark_dead, stream_failure =
  agent.unusable, agent.send, agent.ended, agent.mark_dead, agent.stream_failure
local collector, finish, int, command_result = result.collector, result.finish, result.int, result.command_result

local M = {}

-- The agent starts a background command at once (op "spawn", handled by its reader thread whatever
-- else runs; PROTOCOL.md) and sends its events on the same stream as every request, with the
-- command's id: a task per command (its pump) waits for them through the mux, which hands each
-- waiter its own. Output streams to on_stdout / on_stderr as it arrives and is kept up to the cap,
-- like execute_command's. The agent kills the command's process group at its timeout; kill() sends
-- SIGKILL to the group (op "kill", also handled at once). A background command ends with its sandbox.
local Background = {}
Background.__index = Background

function Background:pid() return self._pid end
function Background:output() return self.c.out:text("stdout"), self.c.out:text("stderr") end
function Background:done() return self.task:done() end
function Background:wait(timeout) return self.task:wait(timeout) end

-- kill() -> true when the signal was sent to a command still running, false when it had ended.
function Background:kill()
  local sb = self.sb
  if self.task:done() or unusable(sb) then return false end
  local sent = send(sb, { op = "kill", id = self.id, signal = 9 }, loop.now() + 5)
  return sent == true
end

-- The sandbox ended under the command (terminate, the lease, the interpreter died).
function Background:_gone(why)
  local sb = self.sb
  local msg
  if sandbox.lease_over(sb) then
    msg = "the sandbox lease expired and the sandbox was terminated"
  else
    -- a terminate names itself in sb._dead before it stops anything
    if not sb._dead then
      if why == "eof" then ended(sb) else mark_dead(sb, stream_failure(why)) end
    end
    msg = sb._dead or "the sandbox ended"
  end
  return finish(self.c, nil, { status = Status.ERROR,
    error = "start_command: " .. msg .. " (the command ended with it)",
    failure = { exception_type = outcome.GONE, retry_safe = false } })
end

function Background:_pump()
  local sb = self.sb
  while true do
    local ok, ev, why = pcall(sb._mux.next, sb._mux, self.box, nil)
    if not ok then
      if loop.is_cancelled(ev) then return self:_gone("eof") end
      error(ev, 0)
    end
    if not ev then return self:_gone(why) end
    if ev.ev == "started" then
      self._pid = int(ev.pid)
    elseif ev.ev == "done" then
      return command_result(self.c, ev, "start_command", self.timeout)
    else
      self.c.on_event(ev)
    end
  end
end

-- Ends the pump (terminate): it reports the sandbox gone.
function Background:_stop()
  if not self.task:done() then self.task:cancel() end
end

-- start(sb, cmd, opts) -> the handle of a command started in the background (the hook
-- Sandbox:_start_command).
function M.start(self, cmd, opts)
  local why = unusable(self)
  if why then error("start_command: " .. why, 0) end
  self._next_id = self._next_id + 1
  local id = self._next_id
  local c = collector(opts)
  local h = setmetatable({ sb = self, id = id, c = c, timeout = opts.timeout }, Background)
  h.box = self._mux:open(id, c.keep)
  local sent, err = send(self, { op = "spawn", id = id, cmd = cmd, env = opts.env, cwd = opts.cwd,
    timeout = opts.timeout }, loop.now() + 10)
  if not sent then
    self._mux:close(h.box)
    if err == "busy" then error("start_command: timed out waiting to send the request (nothing was sent)", 0) end
    mark_dead(self, "the agent did not take the start_command request: " .. tostring(err))
    error("start_command: " .. self._dead, 0)
  end
  self._background[id] = h
  h.task = loop.spawn(function()
    local ok, r = pcall(h._pump, h)
    self._mux:close(h.box)
    self._background[id] = nil
    if not ok then error(r, 0) end
    return r
  end)
  return h
end

M.Background = Background

return M
