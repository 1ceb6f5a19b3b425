-- glsb.retry: bounded exponential backoff with jitter around a function that
-- raises. Only what `retryable` accepts is retried (default: what the one
-- classifier in glsb.errors calls transient); a cause's retry_after is honoured.

local errors = require "glsb.errors"
local constants = require "glsb.constants"
local ids = require "glsb.ids"

local M = {}

local function default_sleep(s)
  return require("glsb.loop").sleep(s)
end

-- A cancellation must never be retried or swallowed, whatever the predicate says.
local function is_cancellation(err)
  local loop = package.loaded["glsb.loop"]
  return type(loop) == "table" and type(loop.is_cancelled) == "function" and loop.is_cancelled(err) == true
end
M.is_cancellation = is_cancellation

-- retry.delay(attempt, policy, err, random) -> seconds to wait after failed
-- attempt number `attempt` (1-based).
function M.delay(attempt, policy, err, random)
  random = random or ids.fraction
  local base = policy.base_delay or 0.5
  local factor = policy.factor or 2
  local max_delay = policy.max_delay or constants.MAX_BACKOFF
  local d = base * factor ^ (attempt - 1)
  if d > max_delay then d = max_delay end
  local jitter = policy.jitter or 0
  if jitter > 0 then
    d = d * (1 + jitter * (2 * random() - 1))
  end
  local ra = err ~= nil and errors.retry_after(err) or nil
  if ra then
    local cap = policy.max_retry_after or constants.MAX_BACKOFF
    if ra > cap then ra = cap end
    if ra > d then d = ra end
  end
  if d < 0 then d = 0 end
  if d > constants.MAX_BACKOFF then d = constants.MAX_BACKOFF end
  return d
end

-- retry.call(fn, policy, ...) -> fn's results, or raises fn's last error.
-- policy fields (all optional):
--   attempts      total attempts (default 3; 1 = no retry)
--   base_delay, factor, max_delay, jitter, max_retry_after   see retry.delay
--   retryable(err, attempt) -> bool   default errors.is_transient
--   sleep(seconds)                    default glsb.loop.sleep (injectable for tests)
--   random() -> [0,1)                 default glsb.ids.fraction (never math.random: the user's)
--   on_retry(err, attempt, delay)     called before each sleep (e.g. teardown, logging)
--   deadline                          absolute glsb.loop.now() seconds: a wait that would end at or
--                                     past it is not taken (fn's last error is raised), so every
--                                     attempt draws from one budget
--   now() -> seconds                  the clock of `deadline` (default glsb.loop.now; for tests)
function M.call(fn, policy, ...)
  policy = policy or {}
  local attempts = policy.attempts or 3
  if type(attempts) ~= "number" or attempts < 1 then attempts = 1 end
  local retryable = policy.retryable or errors.is_transient
  local sleep = policy.sleep or default_sleep
  local attempt = 1
  while true do
    local res = table.pack(pcall(fn, ...))
    if res[1] then return table.unpack(res, 2, res.n) end
    local err = res[2]
    if attempt >= attempts or is_cancellation(err) or not retryable(err, attempt) then
      error(err, 0)
    end
    local d = M.delay(attempt, policy, err, policy.random)
    if policy.deadline and (policy.now or require("glsb.loop").now)() + d >= policy.deadline then error(err, 0) end
    if policy.on_retry then policy.on_retry(err, attempt, d) end
    if d > 0 then sleep(d) end
    attempt = attempt + 1
  end
end

return M
