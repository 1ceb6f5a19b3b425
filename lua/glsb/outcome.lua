-- glsb.outcome: the one mapping from "the request failed" to an ExecutionResult status (docs/contract.md
-- §5.1). The base class applies it to whatever a hook raises; a provider that keeps the
-- output that arrived before the failure calls it itself with that output.
--
--   outcome.from_failure(err, ctx) -> ExecutionResult, gone
--     err: what failed (a glsb error, a transport failure table {phase, code, timeout, retry_safe}, a
--          string); a cancellation is re-raised, never converted.
--     ctx (optional): what ("execute_code"), stdout/stderr (what arrived before the failure),
--          alive() -> true | false | nil (is the sandbox still there? nil = cannot tell), asked only
--          when nothing else names the outcome.
--     gone: true when alive() said the sandbox is not there any more (the base then marks it).
--
-- The rules, in order:
--   provably never written (phase connect/send with retry_safe) -> ERROR, failure.retry_safe = true
--   our deadline or the transport's timeout                     -> TIMEOUT
--   the sandbox is gone (alive() == false)                      -> TIMEOUT (killed mid-request)
--   anything else: cut after delivery, framing, bad JSON, a bug -> UNKNOWN (may have run; never retry)

local errors = require "glsb.errors"
local models = require "glsb.models"

local Status = models.ExecutionStatus

local M = {}

local Type = models.FailureType

-- failure.exception_type of a result whose sandbox turned out to be gone (killed, or its lease ended):
-- a hook that finds it out itself returns such a result; the base class then marks the sandbox ended.
M.GONE = Type.SANDBOX_GONE

local function is_cancelled(err)
  local loop = package.loaded["glsb.loop"]
  return loop ~= nil and loop.is_cancelled(err)
end

local function result(status, ctx, message, exception_type, retry_safe)
  local what = ctx.what
  return models.ExecutionResult.new {
    status = status, stdout = ctx.stdout, stderr = ctx.stderr,
    error = what and (what .. ": " .. message) or message,
    failure = { exception_type = exception_type, retry_safe = retry_safe },
  }
end

-- unsent(tf) -> true when the transport failure proves the request was never fully written.
function M.unsent(tf)
  return tf ~= nil and tf.retry_safe == true and (tf.phase == "connect" or tf.phase == "send")
end

-- timed_out(tf) -> true when the failure is a deadline (ours or the transport's).
function M.timed_out(tf)
  return tf ~= nil and (tf.timeout == true or tf.code == "OPERATION_TIMEDOUT" or tf.code == "TIMEOUT")
end

-- The first HTTP status along a cause chain, or nil.
local function http_status(x)
  for _ = 1, 32 do
    if type(x) ~= "table" then return nil end
    local s = rawget(x, "http_status")
    if type(s) == "number" then return s end
    x = rawget(x, "cause")
  end
  return nil
end

-- failure_type(err) -> the glsb.FailureType of what a call raised: a deadline, a transport failure
-- (framing: the protocol), an HTTP refusal or server failure, a sandbox that was not running, else
-- PROVIDER (a hook raised something glsb cannot name).
function M.failure_type(err)
  local tf = errors.transport_failure(err)
  if tf then
    if M.timed_out(tf) then return Type.TIMEOUT end
    return tf.phase == "framing" and Type.PROTOCOL or Type.TRANSPORT
  end
  local status = http_status(err)
  if status then return status < 500 and Type.REFUSED or Type.SERVER end
  if errors.is(err, errors.SandboxNotInitializedError) then return Type.NOT_RUNNING end
  return Type.PROVIDER
end

function M.from_failure(err, ctx)
  if is_cancelled(err) then error(err, 0) end
  ctx = ctx or {}
  local tf = errors.transport_failure(err)
  local text = errors.is_error(err) and tostring(err) or errors.describe(err)
  local exception_type = M.failure_type(err)
  if M.unsent(tf) then
    return result(Status.ERROR, ctx, (ctx.what and "not delivered: " or "") .. text, exception_type, true)
  end
  if M.timed_out(tf) then
    return result(Status.TIMEOUT, ctx, (ctx.what and "timed out: " or "") .. text, exception_type, false)
  end
  if ctx.alive and ctx.alive() == false then
    return result(Status.TIMEOUT, ctx, "the sandbox was killed or reached its end of life (" .. text .. ")",
      M.GONE, false), true
  end
  local msg = ctx.what and ("the connection broke after the request was delivered; it may have run (" .. text .. ")")
    or text
  return result(Status.UNKNOWN, ctx, msg, exception_type, false)
end

return M
