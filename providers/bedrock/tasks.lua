-- glsb.providers.bedrock.tasks: sb:start_command on AgentCore's background commands
-- (startCommandExecution, then getTask until the task ends; stopTask kills it). The output so far
-- comes with each getTask answer, so it reaches output() and on_stdout/on_stderr as the polls bring
-- it (best effort streaming, at the poll interval).
local loop = require "glsb.loop"
local output = require "glsb.output"
local models = require "glsb.models"
local outcome = require "glsb.outcome"

local Status = models.ExecutionStatus

local M = {}

M.POLL_FIRST = 0.05
M.POLL_MAX = 1
M.REQUEST_TIMEOUT = 30

local ENDED = { completed = true, failed = true, canceled = true }

local Handle = {}
Handle.__index = Handle

local function str(v) return type(v) == "string" and v or nil end

-- getTask gives the output so far: push what is new. (Should an answer not extend the last one, it
-- is taken as the next piece.) What was seen is kept as its length and its first output.CAP bytes, all
-- the capture can keep: an answer extends the last when it starts with that head and is at least as
-- long, so a server whose answers never extend each other costs the cap, not the sum of its answers.
local function feed(h, name, now)
  if type(now) ~= "string" then return end
  local head, len = h.seen[name], h.seen_len[name]
  if #now >= len and now:sub(1, #head) == head then
    if #now > len then h.out:push(name, now:sub(len + 1)) end
    h.seen_len[name] = #now
    if #head < output.CAP then h.seen[name] = now:sub(1, output.CAP) end
  else
    h.out:push(name, now)
    h.seen_len[name] = len + #now
    if #head < output.CAP then h.seen[name] = (head .. now):sub(1, output.CAP) end
  end
end

local function final(h, sc, timed_out)
  local exit = math.tointeger(sc.exitCode)
  local r
  if timed_out then
    r = models.ExecutionResult.new { status = Status.TIMEOUT, code = exit,
      error = ("start_command timed out after %gs"):format(h.timeout),
      failure = { exception_type = models.FailureType.TIMEOUT, retry_safe = false } }
  elseif sc.taskStatus == "canceled" then
    r = models.ExecutionResult.new { status = Status.ERROR, code = exit, error = "the command was killed" }
  else
    exit = exit or (sc.taskStatus == "completed" and 0 or 1)
    r = models.ExecutionResult.new { status = exit == 0 and Status.SUCCESS or Status.ERROR, code = exit,
      error = exit ~= 0 and ("command exited with code %d"):format(exit) or nil }
  end
  h.out:finish(r)
  return r
end

local function run(h, sb, line)
  local res, failed = sb:_invoke("startCommandExecution", { command = line },
    { timeout = M.REQUEST_TIMEOUT, what = "start_command" })
  if not res then return failed end
  local sc = type(res.structuredContent) == "table" and res.structuredContent or {}
  h.task_id = str(sc.taskId)
  if not h.task_id then
    return models.ExecutionResult.new { status = Status.UNKNOWN,
      error = "start_command: startCommandExecution answered no taskId",
      failure = { exception_type = models.FailureType.PROTOCOL, retry_safe = false } }
  end
  h.started:broadcast()
  local pause = M.POLL_FIRST
  while true do
    local timed_out = h.deadline and loop.now() >= h.deadline
    if timed_out then
      sb:_invoke("stopTask", { taskId = h.task_id }, { timeout = M.REQUEST_TIMEOUT, what = "start_command" })
    end
    local t, tfailed = sb:_invoke("getTask", { taskId = h.task_id },
      { timeout = M.REQUEST_TIMEOUT, what = "start_command" })
    if not t then
      -- the task's fate is unknown from here (it may go on running)
      if tfailed.failure and tfailed.failure.exception_type == outcome.GONE then return tfailed end
      tfailed.status = Status.UNKNOWN
      local f = tfailed.failure
      tfailed.failure = { exception_type = f and f.exception_type, provider_type = f and f.provider_type,
        retry_safe = false }
      h.out:finish(tfailed)
      return tfailed
    end
    local tsc = type(t.structuredContent) == "table" and t.structuredContent or {}
    feed(h, "stdout", tsc.stdout)
    feed(h, "stderr", tsc.stderr)
    -- at our deadline the task was stopped just before this poll: TIMEOUT, whatever it reports now
    if ENDED[tsc.taskStatus] or timed_out then return final(h, tsc, timed_out) end
    local wake = loop.now() + pause
    if h.deadline and h.deadline < wake then wake = h.deadline end
    loop.sleep(math.max(0, wake - loop.now()))
    pause = math.min(pause * 2, M.POLL_MAX)
  end
end

-- start(sb, line, opts) -> handle (opts: timeout or nil, on_stdout, on_stderr).
function M.start(sb, line, opts)
  local h = setmetatable({ sb = sb, out = output.capture(opts), seen = { stdout = "", stderr = "" },
    seen_len = { stdout = 0, stderr = 0 },
    timeout = opts.timeout, deadline = opts.timeout and loop.now() + opts.timeout or nil,
    started = loop.condition() }, Handle)
  h.task = loop.spawn(run, h, sb, line)
  return h
end

function Handle:pid() return self.task_id end
function Handle:output() return self.out:text("stdout"), self.out:text("stderr") end
function Handle:done() return self.task:done() end

-- wait(timeout) -> ExecutionResult | nil, "timeout"
function Handle:wait(timeout) return self.task:wait(timeout) end

-- kill() -> true when AgentCore took the stop (the poller then sees the task canceled), false when
-- the command had ended already.
function Handle:kill()
  if self.task:done() then return false end
  local deadline = loop.now() + M.REQUEST_TIMEOUT
  while not self.task_id and not self.task:done() do
    if self.started:wait(deadline) == "timeout" then break end
  end
  if self.task:done() then return false end
  if not self.task_id then
    self.task:cancel()
    return true
  end
  local res = self.sb:_invoke("stopTask", { taskId = self.task_id }, { timeout = M.REQUEST_TIMEOUT, what = "kill" })
  return res ~= nil and not res.isError
end

return M
