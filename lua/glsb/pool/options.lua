-- glsb.pool.options: the checked options of glsb.pool(provider, opts) and their defaults.
--
-- The defaults are OpenSandbox's pool defaults (shared/protocols/opensandbox.md §5.1): idle_timeout 24 h,
-- acquire_min_remaining_ttl min(60 s, idle_timeout / 2), reconcile_interval 30 s, primary_lock_ttl 60 s,
-- degraded_threshold 3, drain_timeout 30 s, acquire/warmup ready timeouts 30 s, warmup_concurrency
-- max(1, ceil(0.2 * size)), backoff 30 s * 2^(n-1) capped at one day. glsb's own: replenish_delay (10 ms: how
-- long a tick that an acquire asked for waits, so that the acquirer's first request is not slowed by a create).

local M = {}

-- key -> the type it must have (checked before any default is applied).
local KINDS = {
  name = "string", size = "number", create = "table", connect = "table", store = "any",
  key_prefix = "string", store_options = "table",
  idle_timeout = "number", acquire_min_remaining_ttl = "number", reconcile_interval = "number",
  primary_lock_ttl = "number", degraded_threshold = "number", drain_timeout = "number",
  acquire_timeout = "number", warmup_ready_timeout = "number", warmup_concurrency = "number",
  backoff_base = "number", backoff_max = "number", owner_id = "string", prepare = "function",
  replenish_delay = "number",
}
M.KINDS = KINDS

-- Levenshtein distance, for "did you mean" on a misspelt key.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- closest(key, known) -> the known key nearest to `key`, or nil when none is close.
function M.closest(key, known)
  local best, best_d
  for k in pairs(known) do
    local d = distance(key, k)
    if not best_d or d < best_d or (d == best_d and k < best) then best, best_d = k, d end
  end
  if best_d and best_d <= math.max(2, #key // 3) then return best end
  return nil
end

local function fail(msg, level) error("glsb.pool: " .. msg, level + 1) end

local function number_at_least(o, key, min, level, integer)
  local v = o[key]
  if v == nil then return end
  if v ~= v or v < min or (integer and math.type(v) ~= "integer" and v ~= math.floor(v)) then
    fail(string.format("opts.%s must be %s >= %s, got %s", key, integer and "an integer" or "a number", min,
      tostring(v)), level + 1)
  end
end

-- check(opts, level) -> a new table of resolved options. Misuse raises a plain argument error naming the key.
function M.check(opts, level)
  level = (level or 1) + 1
  if type(opts) ~= "table" then fail("opts must be a table with at least name and size", level) end
  for k, v in pairs(opts) do
    local kind = KINDS[k]
    if kind == nil then
      local near = type(k) == "string" and M.closest(k, KINDS)
      fail(string.format("unknown option %s%s", tostring(k), near and (" (did you mean " .. near .. "?)") or ""), level)
    end
    if kind ~= "any" and type(v) ~= kind then
      fail(string.format("opts.%s must be a %s, got %s", k, kind, type(v)), level)
    end
  end
  if opts.name == nil or opts.name == "" then fail("opts.name is required (the shared identity of the pool)", level) end
  if opts.size == nil then fail("opts.size is required (how many sandboxes to keep warm)", level) end
  number_at_least(opts, "size", 0, level, true)
  for _, k in ipairs({ "idle_timeout", "reconcile_interval", "primary_lock_ttl", "drain_timeout", "acquire_timeout",
    "warmup_ready_timeout", "backoff_base", "backoff_max" }) do
    number_at_least(opts, k, 0.001, level)
  end
  number_at_least(opts, "acquire_min_remaining_ttl", 0, level)
  number_at_least(opts, "replenish_delay", 0, level)
  number_at_least(opts, "degraded_threshold", 1, level, true)
  number_at_least(opts, "warmup_concurrency", 1, level, true)
  local store = opts.store
  if store ~= nil and type(store) ~= "string" and type(store) ~= "table" then
    fail("opts.store must be \"memory\", a redis:// / rediss:// / unix:// URL, or a store object", level)
  end

  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.size = math.tointeger(o.size) or math.floor(o.size)
  o.create = o.create or {}
  o.store = o.store or "memory"
  o.key_prefix = o.key_prefix or "glsb:pool"
  o.idle_timeout = o.idle_timeout or 86400
  o.acquire_min_remaining_ttl = o.acquire_min_remaining_ttl or math.min(60, o.idle_timeout / 2)
  if o.acquire_min_remaining_ttl >= o.idle_timeout then
    fail(string.format("opts.acquire_min_remaining_ttl (%g) must be smaller than opts.idle_timeout (%g)",
      o.acquire_min_remaining_ttl, o.idle_timeout), level)
  end
  o.reconcile_interval = o.reconcile_interval or 30
  o.primary_lock_ttl = o.primary_lock_ttl or 60
  if o.reconcile_interval >= o.primary_lock_ttl then
    fail(string.format("opts.reconcile_interval (%g) must be shorter than opts.primary_lock_ttl (%g), or the "
      .. "primary's lock would lapse between two ticks", o.reconcile_interval, o.primary_lock_ttl), level)
  end
  o.degraded_threshold = o.degraded_threshold or 3
  o.drain_timeout = o.drain_timeout or 30
  o.acquire_timeout = o.acquire_timeout or 30
  o.warmup_ready_timeout = o.warmup_ready_timeout or 30
  o.warmup_concurrency = o.warmup_concurrency or math.max(1, math.ceil(0.2 * o.size))
  o.backoff_base = o.backoff_base or 30
  o.backoff_max = o.backoff_max or 86400
  o.replenish_delay = o.replenish_delay or 0.01
  return o
end

-- backoff(o, failures) -> seconds to wait before the next warm-up attempt once `failures` consecutive
-- failures reached the threshold: base * 2^(n-1), n counting from the threshold, capped at backoff_max.
function M.backoff(o, failures)
  local n = failures - o.degraded_threshold + 1
  if n < 1 then return 0 end
  return math.min(o.backoff_max, o.backoff_base * 2 ^ math.min(n - 1, 60))
end

return M
