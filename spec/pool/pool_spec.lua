-- glsb.pool with the memory store over the scriptable fake provider: options, warm-up, acquire policies,
-- dead and expired entries, degraded + backoff + recovery, resize, release, shutdown, stalls.
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"
local pool_mod = require "glsb.pool"
local options = require "glsb.pool.options"

local function new_fake()
  local mod, backend = fake_provider.new("poolfake")
  mod.Sandbox._alive = function(self) return backend.live[self.sandbox_id] == true end
  registry.register("poolfake", mod)
  return mod, backend
end

local function opts(extra)
  local o = { name = "p", size = 3, create = { retry = false }, reconcile_interval = 0.2, primary_lock_ttl = 1 }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- Calls fn, expects a plain argument error (a string) pointing at this file, matching `pattern`.
local function misuse(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an argument error matching " .. pattern)
  assert.is_string(err, "misuse must be a plain Lua error, not a glsb error object: " .. tostring(err))
  assert.matches("^spec/pool/pool_spec.lua:%d+: ", err)
  assert.matches(pattern, err)
  return err
end

local function idle_ids(pool)
  local ids = {}
  for _, e in ipairs(pool.store:idle_entries(pool.name)) do ids[e.id] = true end
  return ids
end

describe("glsb.pool #pool #unit", function()
  local mod, backend, pool, prev_log

  setup(function() prev_log = glsb.log.set_handler(function() end) end)
  teardown(function() glsb.log.set_handler(prev_log) end)

  before_each(function() mod, backend = new_fake() end)
  after_each(function()
    if pool then pcall(pool.shutdown, pool, { graceful = false }) end
    pool = nil
    registry.unregister("poolfake")
  end)

  describe("options", function()
    it("requires name and size and names an unknown key with the closest one, at the caller's line", function()
      misuse("glsb.pool: option 'name' is required: the pool's shared identity", glsb.pool, "poolfake", { size = 1 })
      misuse("glsb.pool: option 'size' is required: how many sandboxes", glsb.pool, "poolfake", { name = "x" })
      misuse("glsb.pool: option 'name' must not be empty", glsb.pool, "poolfake", { name = "", size = 1 })
      misuse("glsb.pool: unknown option 'idle_timout' %(did you mean 'idle_timeout'%?%)", glsb.pool, "poolfake",
        { name = "x", size = 1, idle_timout = 5 })
      misuse("glsb.pool: option 'size' must be >= 0, got number %-1", glsb.pool, "poolfake", { name = "x", size = -1 })
      misuse("glsb.pool: option 'size' must be an integer, got number 1.5", glsb.pool, "poolfake",
        { name = "x", size = 1.5 })
      misuse("glsb.pool: option 'warmup_concurrency' must be a positive integer, got number 0", glsb.pool, "poolfake",
        { name = "x", size = 1, warmup_concurrency = 0 })
      misuse("glsb.pool: option 'idle_timeout' must be a number > 0, got number 0", glsb.pool, "poolfake",
        { name = "x", size = 1, idle_timeout = 0 })
      misuse("glsb.pool: option 'prepare' must be a function, got string", glsb.pool, "poolfake",
        { name = "x", size = 1, prepare = "x" })
      misuse("glsb.pool: option 'store' must be \"memory\" or a redis://", glsb.pool, "poolfake",
        { name = "x", size = 1, store = "memcached://x" })
      misuse("glsb.pool: store_options: unknown option 'comand_timeout' %(did you mean 'command_timeout'%?%)",
        glsb.pool, "poolfake", { name = "x", size = 1, store = "redis://127.0.0.1:1",
          store_options = { comand_timeout = 1 } })
      misuse("glsb.pool: provider name must be a string", glsb.pool, 42, { name = "x", size = 1 })
      misuse("glsb: unknown provider .nope.", glsb.pool, "nope", { name = "x", size = 1 })
    end)

    it("the three waits follow the time rule: <= 0 is no limit", function()
      local o = options.check({ name = "x", size = 1, acquire_timeout = 0, warmup_ready_timeout = -1,
        drain_timeout = 0 })
      assert.same({}, { o.acquire_timeout, o.warmup_ready_timeout, o.drain_timeout })
      o = options.check({ name = "x", size = 1 })
      assert.same({ 30, 30, 30 }, { o.acquire_timeout, o.warmup_ready_timeout, o.drain_timeout })
    end)

    it("refuses a minimum remaining TTL not below idle_timeout, and a tick not shorter than the lock", function()
      local ok, err = pcall(glsb.pool, "poolfake", { name = "x", size = 1, idle_timeout = 10,
        acquire_min_remaining_ttl = 10 })
      assert.is_false(ok)
      assert.matches("^spec/pool/pool_spec.lua:%d+: glsb.pool: option 'acquire_min_remaining_ttl' %(10%) must be "
        .. "smaller than 'idle_timeout' %(10%)", err)
      ok, err = pcall(glsb.pool, "poolfake", { name = "x", size = 1, reconcile_interval = 60 })
      assert.is_false(ok)
      assert.matches("option 'reconcile_interval' %(60%) must be shorter than 'primary_lock_ttl'", err)
    end)

    it("has OpenSandbox's defaults", function()
      local o = options.check({ name = "x", size = 8 })
      assert.are.equal(2, o.warmup_concurrency)          -- max(1, ceil(0.2 * 8))
      assert.are.equal(1, options.check({ name = "x", size = 0 }).warmup_concurrency)
      assert.are.equal(86400, o.idle_timeout)
      assert.are.equal(60, o.acquire_min_remaining_ttl)  -- min(60, idle_timeout / 2)
      assert.are.equal(5, options.check({ name = "x", size = 1, idle_timeout = 10 }).acquire_min_remaining_ttl)
      assert.are.same({ 30, 60, 3 }, { o.reconcile_interval, o.primary_lock_ttl, o.degraded_threshold })
      -- backoff: 30 s * 2^(n-1) from the threshold on, capped at a day
      assert.are.same({ 0, 30, 60, 120, 86400 },
        { options.backoff(o, 2), options.backoff(o, 3), options.backoff(o, 4), options.backoff(o, 5),
          options.backoff(o, 40) })
    end)

    it("refuses a Redis store for a provider whose sandboxes cannot leave their process", function()
      local ok, err = pcall(glsb.pool, "local", { name = "x", size = 1, store = "redis://127.0.0.1:1/0" })
      assert.is_false(ok)
      assert.matches("provider 'local' cannot share sandboxes between processes", err)
      assert.matches("use store = \"memory\"", err)
    end)
  end)

  it("warms up to size, at most warmup_concurrency creates at a time", function()
    backend.start_delay = 0.05
    local running, peak = 0, 0
    local start = mod.Sandbox._start
    mod.Sandbox._start = function(self, o)
      running = running + 1
      peak = math.max(peak, running)
      local ok, err = pcall(start, self, o)
      running = running - 1
      if not ok then error(err, 0) end
    end
    pool = glsb.pool("poolfake", opts({ size = 5, warmup_concurrency = 2 }))
    assert.are.equal("stopped", pool:snapshot().state)
    pool:start()
    assert.is_true(pool:wait_idle(5, 10))
    local s = pool:snapshot()
    assert.are.equal("healthy", s.state)
    assert.are.equal(5, s.idle)
    assert.are.equal(5, backend.count("_start"))
    assert.are.equal(2, peak)
    mod.Sandbox._start = start
  end)

  it("serves acquire from idle, then replenishes", function()
    pool = glsb.pool("poolfake", opts())
    pool:start()
    assert.is_true(pool:wait_idle(3, 5))
    local before = idle_ids(pool)
    local sb = pool:acquire()
    assert.is_true(before[sb.sandbox_id], "the acquired sandbox was one of the idle ones")
    assert.is_nil(idle_ids(pool)[sb.sandbox_id])
    assert.are.equal(1, pool:snapshot().stats.hits)
    assert.are.equal(3, backend.count("_start"))
    assert.is_true(pool:wait_idle(3, 5))
    assert.are.equal(4, backend.count("_start"))
    assert.is_true(backend.live[sb.sandbox_id])
    sb:terminate()
    assert.is_nil(backend.live[sb.sandbox_id])
  end)

  it("acquire{timeout = 0} and wait_idle(n, 0) mean no limit, as every public timeout's <= 0", function()
    backend.start_delay = 0.05
    pool = glsb.pool("poolfake", opts({ warmup_ready_timeout = 0 }))
    pool:start()
    assert.are.equal(0, pool:snapshot().idle, "nothing is warm yet: a wait with no limit has to wait")
    assert.is_true(pool:wait_idle(3, 0))
    local sb = pool:acquire({ timeout = 0 })
    assert.are.equal(1, pool:snapshot().stats.hits, "served from idle")
    sb:terminate()
    assert.is_true(pool:wait_idle(3, -1))
    assert.is_true(pool:wait_idle(), "warmup_ready_timeout = 0: no limit either")
    sb = pool:acquire({ timeout = -5, sandbox_timeout = 0 })
    assert.is_true(sb:is_running())
    sb:terminate()
    misuse("pool:wait_idle: option 'timeout' must be a number of seconds, got string", pool.wait_idle, pool, 1, "5")
    misuse("pool:wait_idle: option 'n' must be >= 0", pool.wait_idle, pool, -1)
  end)

  it("replenishes after an acquire made while a warm-up tick was busy (regression: a lost wake-up)", function()
    backend.start_delay = 0.1
    pool = glsb.pool("poolfake", opts({ size = 2, warmup_concurrency = 1, reconcile_interval = 10, primary_lock_ttl = 20 }))
    pool:start()
    assert.is_true(pool:wait_idle(2, 5))
    pool:acquire()  -- the reconciler starts creating a replacement (0.1 s)
    glsb.sleep(0.02)
    pool:acquire()  -- while it is busy: this notify finds nobody waiting
    assert.is_true(pool:wait_idle(2, 2), "the second deficit waited for the next interval")
  end)

  it("hands every concurrent acquirer a different sandbox", function()
    pool = glsb.pool("poolfake", opts())
    pool:start()
    assert.is_true(pool:wait_idle(3, 5))
    local ids = glsb.run(function()
      local tasks = {}
      for i = 1, 6 do tasks[i] = glsb.spawn(function() return pool:acquire().sandbox_id end) end
      return { glsb.gather(tasks) }
    end)
    local seen = {}
    for _, id in ipairs(ids) do
      assert.is_nil(seen[id], "duplicate " .. id)
      seen[id] = true
    end
    assert.are.equal(6, #ids)
    local st = pool:snapshot().stats
    assert.are.equal(3, st.hits)
    assert.are.equal(3, st.direct)
  end)

  it("fail_fast raises PoolEmptyError on an empty pool; direct_create creates", function()
    pool = glsb.pool("poolfake", opts({ size = 0 }))
    pool:start()
    local ok, err = pcall(pool.acquire, pool, { policy = "fail_fast" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolEmptyError), tostring(err))
    assert.is_true(errors.is(err, errors.CodeInterpreterError))
    assert.are.equal("pool", err.stage)
    local sb = pool:acquire({ policy = "direct_create" })
    assert.is_true(backend.live[sb.sandbox_id])
    assert.are.equal(1, pool:snapshot().stats.direct)
    misuse("pool:acquire: option 'policy' must be one of \"direct_create\", \"fail_fast\", got string \"wait\"",
      pool.acquire, pool, { policy = "wait" })
    misuse("pool:acquire: unknown option 'timout' %(did you mean 'timeout'%?%)", pool.acquire, pool, { timout = 1 })
    misuse("pool:acquire: option 'timeout' must be a number of seconds, got NaN", pool.acquire, pool,
      { timeout = 0 / 0 })
    misuse("pool:acquire: options must be a table, got string", pool.acquire, pool, "fast")
  end)

  it("raises PoolNotRunningError before start and after shutdown", function()
    pool = glsb.pool("poolfake", opts())
    local ok, err = pcall(pool.acquire, pool)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolNotRunningError), tostring(err))
    assert.matches("call pool:start%(%) first", err.message)
    pool:start()
    pool:shutdown()
    ok, err = pcall(pool.acquire, pool)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolNotRunningError), tostring(err))
    assert.are.equal("stopped", pool:snapshot().state)
  end)

  it("never hands out a dead idle sandbox: removed and killed, then fail_fast raises", function()
    pool = glsb.pool("poolfake", opts({ size = 2 }))
    pool:start()
    assert.is_true(pool:wait_idle(2, 5))
    local head = pool.store:idle_entries(pool.name)[1]
    backend.live[head.id] = nil -- it died behind the pool's back
    local ok, err = pcall(pool.acquire, pool, { policy = "fail_fast" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolAcquireFailedError), tostring(err))
    assert.is_truthy(err.message:find(head.id, 1, true), err.message)
    assert.is_nil(idle_ids(pool)[head.id])
    -- direct_create: the next dead one is skipped for a new sandbox
    local second = pool.store:idle_entries(pool.name)[1]
    backend.live[second.id] = nil
    local sb = pool:acquire()
    assert.are_not.equal(second.id, sb.sandbox_id)
    assert.is_true(backend.live[sb.sandbox_id])
    assert.are.equal(2, pool:snapshot().stats.dead)
  end)

  it("never hands out an entry below acquire_min_remaining_ttl; those are killed in the background", function()
    pool = glsb.pool("poolfake", opts({ size = 2, idle_timeout = 1, acquire_min_remaining_ttl = 0.6,
      reconcile_interval = 5, primary_lock_ttl = 10 }))
    pool:start()
    assert.is_true(pool:wait_idle(2, 5))
    local old = idle_ids(pool)
    glsb.sleep(0.5) -- 0.5 s left < 0.6 s
    local sb = pool:acquire()
    assert.is_nil(old[sb.sandbox_id], "an entry too close to its expiry was handed out")
    glsb.sleep(0.05) -- the background kills
    for id in pairs(old) do assert.is_nil(backend.live[id], id .. " was not killed") end
    assert.are.equal(2, pool:snapshot().stats.discarded)
  end)

  it("turns DEGRADED after degraded_threshold failures, backs off, and one success recovers it", function()
    for _ = 1, 3 do backend.start_failures[#backend.start_failures + 1] = { http_status = 503, message = "busy" } end
    pool = glsb.pool("poolfake", opts({ size = 1, backoff_base = 0.3 }))
    pool:start()
    local deadline = loop.now() + 5
    while pool:snapshot().failures < 3 and loop.now() < deadline do glsb.sleep(0.02) end
    local s = pool:snapshot()
    assert.are.equal("degraded", s.state)
    assert.is_true(s.backoff_active)
    assert.is_true(s.backoff > 0 and s.backoff <= 0.3, tostring(s.backoff))
    assert.matches("503", s.last_error)
    assert.are.equal(0, s.idle)
    -- no create while backing off
    local starts = backend.count("_start")
    glsb.sleep(0.1)
    assert.are.equal(starts, backend.count("_start"))
    -- the backoff ends, the next create succeeds, the pool is healthy again
    assert.is_true(pool:wait_idle(1, 5))
    s = pool:snapshot()
    assert.are.equal("healthy", s.state)
    assert.are.equal(0, s.failures)
    assert.is_false(s.backoff_active)
  end)

  it("doubles the backoff with every failure past the threshold", function()
    for _ = 1, 4 do backend.start_failures[#backend.start_failures + 1] = "boom" end
    pool = glsb.pool("poolfake", opts({ size = 1, backoff_base = 0.2, degraded_threshold = 3 }))
    pool:start()
    local deadline = loop.now() + 5
    while pool:snapshot().failures < 4 and loop.now() < deadline do glsb.sleep(0.02) end
    local s = pool:snapshot()
    assert.are.equal(4, s.failures)
    assert.is_true(s.backoff > 0.2 and s.backoff <= 0.4, tostring(s.backoff))
  end)

  it("runs prepare on every new sandbox; a failing prepare kills it and counts as a failure", function()
    local prepared = {}
    local fail_next = true
    pool = glsb.pool("poolfake", opts({ size = 2, prepare = function(sb)
      if fail_next then
        fail_next = false
        error("prepare broke")
      end
      prepared[sb.sandbox_id] = true
    end }))
    pool:start()
    assert.is_true(pool:wait_idle(2, 5))
    for id in pairs(idle_ids(pool)) do assert.is_true(prepared[id], id) end
    assert.is_nil(backend.live["poolfake-1"], "the sandbox whose prepare failed was killed")
    assert.matches("prepare broke", pool:snapshot().last_error)
    local direct = glsb.pool("poolfake", opts({ name = "q", size = 0, prepare = function(sb)
      prepared[sb.sandbox_id] = "direct"
    end })):start()
    local sb = direct:acquire()
    assert.are.equal("direct", prepared[sb.sandbox_id])
    direct:shutdown()
  end)

  it("resize grows and shrinks the idle set", function()
    pool = glsb.pool("poolfake", opts({ size = 1, warmup_concurrency = 4 }))
    pool:start()
    assert.is_true(pool:wait_idle(1, 5))
    pool:resize(4)
    assert.is_true(pool:wait_idle(4, 5))
    pool:resize(1)
    local deadline = loop.now() + 5
    while pool:snapshot().idle > 1 and loop.now() < deadline do glsb.sleep(0.05) end
    assert.are.equal(1, pool:snapshot().idle)
    glsb.sleep(0.05)
    assert.are.equal(1, backend.live_count())
    misuse("pool:resize: option 'size' must be >= 0, got number %-1", pool.resize, pool, -1)
    misuse("pool:resize: option 'size' must be an integer", pool.resize, pool, 2.5)
  end)

  it("release_all_idle kills every idle sandbox and says how many", function()
    pool = glsb.pool("poolfake", opts({ size = 3, reconcile_interval = 5, primary_lock_ttl = 10 }))
    pool:start()
    assert.is_true(pool:wait_idle(3, 5))
    assert.are.equal(3, pool:release_all_idle())
    assert.are.equal(0, backend.live_count())
  end)

  it("shutdown waits for warm-ups in flight, kills the idle ones of its own memory store, leaves nothing", function()
    backend.start_delay = 0.2
    pool = glsb.pool("poolfake", opts({ size = 2, warmup_concurrency = 2 }))
    pool:start()
    glsb.sleep(0.05) -- two creates are in flight now
    assert.are.equal(2, pool:snapshot().in_flight)
    pool:shutdown({ graceful = true })
    local s = pool:snapshot()
    assert.are.equal("stopped", s.state)
    assert.are.equal(0, s.in_flight)
    assert.are.equal(2, backend.count("_start"))
    assert.are.equal(0, backend.live_count())
  end)

  it("a non-graceful shutdown puts nothing idle: creates in flight finish and their sandboxes are killed", function()
    -- (cancelling a create whose request is in flight could leave a remote sandbox nobody knows the id of)
    backend.start_delay = 0.3
    pool = glsb.pool("poolfake", opts({ size = 2, warmup_concurrency = 2 }))
    pool:start()
    glsb.sleep(0.05)
    assert.are.equal(2, pool:snapshot().in_flight)
    pool:shutdown({ graceful = false })
    assert.are.equal(2, backend.count("_start"))
    assert.are.equal(0, backend.live_count())
    assert.are.equal(0, pool:snapshot().idle)
    assert.are.equal(0, pool:snapshot().in_flight)
  end)

  it("a script that stays in plain Lua loses the lock visibly, and the next call catches up", function()
    pool = glsb.pool("poolfake", opts({ size = 1, reconcile_interval = 0.2, primary_lock_ttl = 0.5 }))
    pool:start()
    assert.is_true(pool:wait_idle(1, 5))
    assert.is_true(pool:snapshot().primary)
    local t0 = os.time()
    local c0 = loop.now()
    while loop.now() - c0 < 1.6 do if os.time() - t0 > 5 then break end end -- busy in plain Lua, no loop
    local s = pool:snapshot()
    assert.is_true(s.stalled)
    assert.is_true(s.lock_lapsed)
    assert.is_false(s.primary)
    glsb.sleep(0.05) -- any glsb call runs the overdue tick first
    s = pool:snapshot()
    assert.is_false(s.stalled)
    assert.is_true(s.primary)
  end)

  it("a pool closes with its scope", function()
    do
      local p <close> = glsb.pool("poolfake", opts({ size = 2 }))
      p:start()
      assert.is_true(p:wait_idle(2, 5))
    end
    assert.are.equal(0, backend.live_count())
  end)

  it("destroy kills the idle sandboxes and every later call raises PoolDestroyedError", function()
    pool = glsb.pool("poolfake", opts({ size = 2 }))
    pool:start()
    assert.is_true(pool:wait_idle(2, 5))
    assert.are.equal(2, pool:destroy())
    assert.are.equal(0, backend.live_count())
    local ok, err = pcall(pool.acquire, pool)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolDestroyedError), tostring(err))
    ok, err = pcall(pool.start, pool)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolDestroyedError), tostring(err))
  end)

  it("accepts a store object and checks its methods", function()
    local store = require("glsb.pool.memory").new()
    pool = glsb.pool("poolfake", opts({ store = store }))
    pool:start()
    assert.is_true(pool:wait_idle(3, 5))
    assert.are.equal(3, store:idle_count("p"))
    pool:shutdown()
    assert.are.equal(3, store:idle_count("p"), "a store the pool did not make keeps its idle sandboxes")
    assert.are.equal(3, backend.live_count())
    local p2 = glsb.pool("poolfake", opts({ store = store })):start()
    assert.are.equal(3, p2:release_all_idle())
    p2:shutdown()
    misuse("glsb.pool: option 'store': the object has no method take_idle", glsb.pool, "poolfake",
      opts({ store = {} }))
  end)

  it("is reachable as glsb.pool and prints itself", function()
    pool = glsb.pool("poolfake", opts())
    assert.are.equal(pool_mod.Pool, getmetatable(pool))
    assert.are.equal("glsb.Pool(p, poolfake, size=3, new)", tostring(pool))
  end)
end)
