-- glsb.providers.local.result: what the agent's events of one call become: the output collected
-- (capped, per-line callbacks), then the glsb.models.ExecutionResult, also for a call that got no
-- "done" (agent.request's reasons: dead_result) and for a command's "done" (command_result).

local models = require "glsb.models"
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local results = require "glsb.results"
local codec = require "glsb.codec"
local agent = require "glsb.providers.local.agent"

local Status = models.ExecutionStatus
local Type = models.FailureType

local M = {}

-- Output of one call (glsb.output: per-line callbacks, the cap, the note). Frames of a stream already
-- at the cap are dropped unread (keep), so what the host holds stays bounded whatever the sandbox sends.
local STREAMS = { "stdout", "stderr" }

-- A "res" frame's payload (PROTOCOL.md): its named parts, in order, back into a bundle; nil when the
-- parts do not describe the payload exactly (the frame was not the agent's: the code can write to
-- the protocol on purpose).
local JSON_PART = { json = true, extra = true }

local function bundle_of(ev)
  local parts, data = ev.parts, ev.data
  if type(parts) ~= "table" or type(data) ~= "string" then return nil end
  local b, pos = { is_main_result = ev.main == true }, 1
  for _, p in ipairs(parts) do
    local name, n = type(p) == "table" and p[1], type(p) == "table" and math.tointeger(p[2])
    if type(name) ~= "string" or not n or n < 0 or pos + n - 1 > #data then return nil end
    local v = data:sub(pos, pos + n - 1)
    pos = pos + n
    -- decoded at the cost of what it holds (the code writes what it likes here: `[[],[],...]`)
    if JSON_PART[name] then v = codec.decode_json(v) end
    if v ~= nil then b[name] = v end
  end
  if pos ~= #data + 1 then return nil end
  return results.clean(b)
end

local function collector(opts)
  local out = output.capture(opts)
  local res = results.collector()
  local sizes = { 0, 0 }
  local c = { out = out, results = res }
  c.keep = function(ev, n)
    if ev.ev == "res" then
      -- a bundle that cannot fit any more is read and dropped unkept (counted in on_event)
      return n <= res:room()
    end
    if ev.ev ~= "out" then return true end
    local s = ev.s == 2 and 2 or 1
    if sizes[s] >= out.cap then
      out:dropped(STREAMS[s], n)
      return false
    end
    return true
  end
  c.on_event = function(ev)
    if ev.ev == "res" then
      local b = ev.data and bundle_of(ev)
      if b then res:add(b) else res:drop(ev.dropped or (ev.data and #ev.data)) end
      return
    end
    if ev.ev ~= "out" or not ev.data then return end
    local s = ev.s == 2 and 2 or 1
    sizes[s] = sizes[s] + #ev.data
    out:push(STREAMS[s], ev.data)
  end
  -- -> the result's fields, with the agent's own drops noted
  c.finish = function(done, fields)
    if done then
      out:dropped("stdout", tonumber(done.dropped_stdout))
      out:dropped("stderr", tonumber(done.dropped_stderr))
      res:drops(done.dropped_results, done.dropped_results_bytes)
    end
    res:finish(fields)
    return out:finish(fields)
  end
  return c
end

-- Whole output of a helper run, kept up to cap bytes per stream (no callbacks, no note).
local function accumulator(cap)
  local a = { parts = { {}, {} }, sizes = { 0, 0 }, truncated = { false, false } }
  a.keep = function(ev, n)
    if ev.ev ~= "out" then return true end
    local s = ev.s == 2 and 2 or 1
    if a.sizes[s] + n > cap then
      a.truncated[s] = true
      return false
    end
    a.sizes[s] = a.sizes[s] + n
    return true
  end
  a.on_event = function(ev)
    if ev.ev == "out" and ev.data then
      local parts = a.parts[ev.s == 2 and 2 or 1]
      parts[#parts + 1] = ev.data
    end
  end
  return a
end

local function finish(c, done, fields)
  return models.ExecutionResult.new(c.finish(done, fields))
end

-- The result of a call that got no "done" (see agent.request for the reasons, and how it ended).
local function dead_result(self, c, what, timeout, reason, how)
  if reason == "unusable" then
    -- provably never sent: a known outcome
    return finish(c, nil, { status = Status.ERROR, error = what .. ": " .. agent.unusable(self),
      failure = { exception_type = Type.NOT_RUNNING, retry_safe = true } })
  end
  if reason == "busy" then
    return finish(c, nil, { status = Status.TIMEOUT,
      error = string.format("%s: timed out after %gs waiting for another call on this sandbox to end "
        .. "(nothing was sent)", what, timeout or 0),
      failure = { exception_type = Type.TIMEOUT, retry_safe = true } })
  end
  if reason == "lease" then
    -- The call saw the agent go away while the lease's terminate is still finishing: let it finish
    -- (it holds self._ending), so that the caller finds the sandbox terminated, as the message says.
    self._ending:with(nil, function() end)
    return finish(c, nil, { status = Status.TIMEOUT, error = string.format(
      "%s: the sandbox lease expired during the call (after %gs) and the sandbox was terminated",
      what, self.timeout or 0), failure = { exception_type = outcome.GONE, retry_safe = false } })
  end
  if reason == "exited" then
    -- the interpreter (the sandbox's program) ended by itself: the code ran and ended it, or crashed it
    -- The sandbox is gone: the GONE marker makes the base end the handle (is_running() false, later
    -- calls raise SandboxNotInitializedError), as on every provider.
    local e = how or {}
    local r = finish(c, nil, { status = Status.ERROR, code = e.code,
      error = string.format("%s: %s", what, self._dead or "the sandbox ended") .. " (create a new one)",
      failure = { exception_type = outcome.GONE, retry_safe = false } })
    r.error_name = "SandboxExited"
    return r
  end
  local why = self._dead or "the sandbox is not running"
  if reason == "killed" and timeout then
    return finish(c, nil, { status = Status.TIMEOUT,
      error = string.format("%s: timed out after %gs: %s", what, timeout, why),
      failure = { exception_type = outcome.GONE, retry_safe = false } })
  end
  -- broken: the request may have been delivered and the outcome is unknown
  return finish(c, nil, { status = Status.UNKNOWN, error = what .. ": " .. why,
    failure = { exception_type = Type.TRANSPORT, retry_safe = false } })
end

local function int(v)
  if type(v) ~= "number" then return nil end
  return math.tointeger(v) or v
end

-- The result of a command's "done" (execute_command, start_command).
local function command_result(c, done, what, timeout)
  if done.timeout then
    return finish(c, done, { status = Status.TIMEOUT, code = int(done.exit_code),
      error = string.format("%s: timed out after %gs (process group killed)", what, timeout or 0) })
  end
  if done.name then
    return finish(c, done, { status = Status.ERROR, code = int(done.exit_code),
      error = tostring(done.name) .. ": " .. tostring(done.value) })
  end
  local code = int(done.exit_code)
  local sig = int(done.signal)
  local err
  if sig then
    err = "command ended by signal: " .. (agent.SIGNAL_NAMES[sig] or ("signal " .. sig))
  elseif code ~= 0 then
    err = "command exited with code " .. tostring(code)
  end
  return finish(c, done, { status = code == 0 and Status.SUCCESS or Status.ERROR, code = code, error = err })
end

M.collector = collector
M.accumulator = accumulator
M.finish = finish
M.dead_result = dead_result
M.int = int
M.command_result = command_result

return M
