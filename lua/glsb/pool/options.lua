-- glsb.pool.options: the declared options of glsb.pool(provider, opts), of pool:acquire and
-- pool:shutdown (glsb.options' form: checked by it, rendered into docs/pool.md by it), and their defaults.
--
-- The defaults are OpenSandbox's pool defaults (docs/protocols/opensandbox.md §5.1): idle_timeout 24 h,
-- acquire_min_remaining_ttl min(60 s, idle_timeout / 2), reconcile_interval 30 s, primary_lock_ttl 60 s,
-- degraded_threshold 3, drain_timeout 30 s, acquire/warmup ready timeouts 30 s, warmup_concurrency
-- max(1, ceil(0.2 * size)), backoff 30 s * 2^(n-1) capped at one day. glsb's own: replenish_delay (10 ms: how
-- long a tick that an acquire asked for waits, so that the acquirer's first request is not slowed by a create).
--
-- The time rule is every public timeout's (glsb.options.timeout): acquire_timeout, warmup_ready_timeout,
-- drain_timeout and acquire's timeout <= 0 mean no limit. idle_timeout, the intervals and TTLs are not
-- waits: a warm sandbox always expires, a lock always lapses, so they must be > 0.
local check = require "glsb.options"

local M = {}

M.SCHEMA = {
  name = { "string", "the pool's shared identity (every process with the same name and store shares it)",
    required = true },
  size = { "integer", "how many sandboxes to keep idle (OpenSandbox's `max_idle`)", required = true, min = 0 },
  create = { "table", "create options of each sandbox (provider options: keys, URLs, template, ...)",
    default = "{}" },
  connect = { "table", "options for `glsb.connect` when another process's sandbox is acquired",
    default = "from create" },
  store = { "string|table", "`\"memory\"`, `\"redis://[user:pass@]host[:port][/db]\"`, `\"rediss://...\"` (TLS), "
    .. "`\"unix://[:pass@]/path.sock[?db=N]\"`, or a store object", default = "\"memory\"" },
  store_options = { "table", "Redis: `connect_timeout` (5 s), `command_timeout` (5 s), `tls_ca`, `tls_verify` "
    .. "(true), `tls_servername`" },
  key_prefix = { "string", "Redis key prefix", default = "\"glsb:pool\"" },
  owner_id = { "string", "this process's name in the store's primary lock", default = "random" },
  idle_timeout = { "positive", "lease of a warm sandbox and TTL of its idle entry (s; a TTL, not a wait: "
    .. "a warm sandbox always expires, so > 0)", default = "86400" },
  acquire_min_remaining_ttl = { "number", "an idle sandbox with less left (s) is not handed out (it is killed)",
    min = 0, default = "min(60, idle_timeout/2)" },
  reconcile_interval = { "positive", "reconciler tick (s)", default = "30" },
  primary_lock_ttl = { "positive", "primary lock lease (s)", default = "60" },
  warmup_concurrency = { "count", "creates at a time", default = "max(1, ceil(0.2 * size))" },
  degraded_threshold = { "count", "after that many failed creates in a row: DEGRADED, next try after "
    .. "backoff_base * 2^(n-1) s, capped at backoff_max", default = "3" },
  backoff_base = { "positive", "first backoff once DEGRADED (s)", default = "30" },
  backoff_max = { "positive", "longest backoff (s)", default = "86400" },
  acquire_timeout = { "seconds", "`pool:acquire`'s timeout when it gives none; `<= 0`: none", default = "30" },
  warmup_ready_timeout = { "seconds", "`pool:wait_idle`'s timeout when it gives none; `<= 0`: none",
    default = "30" },
  drain_timeout = { "seconds", "how long a graceful shutdown waits for work in flight; `<= 0`: none",
    default = "30" },
  prepare = { "function", "`function(sb)` run on every new sandbox before it is offered (warm or created directly)" },
  replenish_delay = { "number", "a tick an acquire asked for waits this long (s), so the acquirer's first call "
    .. "goes first", min = 0, default = "0.01" },
}

M.ACQUIRE = {
  timeout = { "seconds", "for reaching and checking an idle sandbox; `<= 0`: none", default = "acquire_timeout" },
  policy = { "string", "what happens when no idle sandbox is usable", values = { "direct_create", "fail_fast" },
    default = "direct_create" },
  sandbox_timeout = { "seconds", "the lease of the acquired sandbox; `<= 0`: the warm lease is left as it is",
    default = "create's timeout" },
}

M.SHUTDOWN = {
  graceful = { "boolean", "wait up to drain_timeout for work in flight (else cancel it at once)", default = "true" },
  release_idle = { "boolean", "kill the idle sandboxes", default = "true for a memory store, false for Redis" },
}

-- WAIT_IDLE: pool:wait_idle(n, timeout)'s two arguments, declared like options.
M.WAIT_IDLE = {
  n = { "integer", "how many idle sandboxes to wait for", min = 0 },
  timeout = { "seconds", "`<= 0`: none" },
}

-- check(opts) -> a new table of resolved options. Misuse raises a plain argument error (glsb.options: at
-- the user's line) naming the key.
function M.check(opts)
  check.check(opts, M.SCHEMA, "glsb.pool")
  if opts.name == "" then
    check.arg_error("glsb.pool: option 'name' must not be empty (the shared identity of the pool)")
  end

  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.size = math.tointeger(o.size)
  o.create = o.create or {}
  o.store = o.store or "memory"
  o.key_prefix = o.key_prefix or "glsb:pool"
  o.idle_timeout = o.idle_timeout or 86400
  o.acquire_min_remaining_ttl = o.acquire_min_remaining_ttl or math.min(60, o.idle_timeout / 2)
  if o.acquire_min_remaining_ttl >= o.idle_timeout then
    check.arg_error("glsb.pool: option 'acquire_min_remaining_ttl' (%g) must be smaller than 'idle_timeout' (%g)",
      o.acquire_min_remaining_ttl, o.idle_timeout)
  end
  o.reconcile_interval = o.reconcile_interval or 30
  o.primary_lock_ttl = o.primary_lock_ttl or 60
  if o.reconcile_interval >= o.primary_lock_ttl then
    check.arg_error("glsb.pool: option 'reconcile_interval' (%g) must be shorter than 'primary_lock_ttl' (%g), or "
      .. "the primary's lock would lapse between two ticks", o.reconcile_interval, o.primary_lock_ttl)
  end
  o.degraded_threshold = o.degraded_threshold or 3
  -- the three waits, resolved once by the time rule: seconds > 0, or nil for no limit
  o.drain_timeout = check.timeout(o.drain_timeout, 30)
  o.acquire_timeout = check.timeout(o.acquire_timeout, 30)
  o.warmup_ready_timeout = check.timeout(o.warmup_ready_timeout, 30)
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
