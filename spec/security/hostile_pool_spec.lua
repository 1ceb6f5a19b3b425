-- Issue 25 §5, pools that share a name on one Redis (a real redis-server this spec starts). Before: pool B
-- (another template) was handed pool A's sandbox; a pool of another provider took an idle entry it could
-- not use, failed, and dropped it, so that sandbox ran on after every pool had shut down. Now a pool's
-- identity in the store is its provider and a hash of the create options that make its sandboxes what they
-- are (glsb.pool.identity): another identity under the same name is refused at start with a clear error,
-- and an entry a process cannot use is put back (another provider's) or killed (its own provider's), never
-- dropped.
-- #security #pool #redis
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local sandbox = require "glsb.sandbox"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"
local redis = require "support.redis"
local redis_store = require "glsb.pool.redis"

local function new_fake(name)
  local mod, backend = fake_provider.new(name)
  mod.Sandbox._alive = function(self) return backend.live[self.sandbox_id] == true end
  mod.Sandbox.connect = function(ref)
    if not backend.live[ref.sandbox_id] then
      -- the provider's word that there is no such sandbox (E2B's 404): a pool may forget the entry
      error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, "connect", "sandbox " .. ref.sandbox_id
        .. " is not running")), 0)
    end
    local sb = sandbox.new(mod.Sandbox, {})
    sb.sandbox_id, sb._state = ref.sandbox_id, "running"
    return sb
  end
  registry.register(name, mod)
  return mod, backend
end

-- The template each live sandbox of a fake was created with.
local function template_of(backend, id)
  local n = 0
  for _, c in ipairs(backend.calls) do
    if c.hook == "_start" then
      n = n + 1
      if id:match("%-(%d+)$") == tostring(n) then return c.opts.template end
    end
  end
end

describe("pools that share a name (issue 25 §5) #security #pool #redis", function()
  local srv, pools, prev_log, a, b

  setup(function()
    srv = redis.start {}
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if srv then srv:stop() end
  end)
  before_each(function()
    srv:cli("FLUSHALL")
    pools = {}
    a = { new_fake("hostileA") }
    b = { new_fake("hostileB") }
  end)
  after_each(function()
    for _, p in ipairs(pools) do pcall(p.shutdown, p, { graceful = false }) end
    registry.unregister("hostileA")
    registry.unregister("hostileB")
  end)

  local function pool(provider, template, extra)
    local o = { name = "shared-name", size = 1, store = srv.url, create = { template = template, retry = false },
      reconcile_interval = 0.1, primary_lock_ttl = 1, idle_timeout = 60 }
    for k, v in pairs(extra or {}) do o[k] = v end
    local p = glsb.pool(provider, o)
    pools[#pools + 1] = p
    return p
  end

  it("a pool of another template under the same name is refused at start; the first keeps its sandbox", function()
    local pa = pool("hostileA", "t1"):start()
    assert.is_true(pa:wait_idle(1, 10))
    local pb = pool("hostileA", "t2")
    local ok, err = pcall(pb.start, pb)
    if ok then
      -- what it would hand out is the other template's sandbox
      local sb = pb:acquire({ timeout = 5 })
      assert.are.equal("t2", template_of(a[2], sb.sandbox_id), "pool B got a sandbox of another template")
    end
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolError), tostring(err))
    assert.matches("shared%-name", err.message)
    assert.matches("other create options", err.message)
    assert.are.equal(1, pa:snapshot().idle)
    local sb = pa:acquire({ timeout = 5 })
    assert.are.equal("t1", template_of(a[2], sb.sandbox_id))
    sb:terminate()
  end)

  it("a pool of another provider under the same name is refused at start", function()
    local pa = pool("hostileA", "t1"):start()
    assert.is_true(pa:wait_idle(1, 10))
    local pb = pool("hostileB", "t1")
    local ok, err = pcall(pb.start, pb)
    assert.is_false(ok)
    assert.matches("hostileA/", tostring(err))
    assert.are.equal(1, pa:snapshot().idle)
  end)

  it("the same options in another process share the pool (the identity is what the options make)", function()
    local pa = pool("hostileA", "t1"):start()
    assert.is_true(pa:wait_idle(1, 10))
    -- another key or another lease is the same pool: credentials and timing are no part of its identity
    local pb = pool("hostileA", "t1", { create = { template = "t1", retry = false, api_key = "another-key",
      timeout = 99 } })
    pb:start()
    local sb = pb:acquire({ timeout = 5, policy = "fail_fast" })
    assert.are.equal("t1", template_of(a[2], sb.sandbox_id))
    sb:terminate()
  end)

  it("an idle entry of another provider is put back, never dropped: its sandbox is not left running unlisted",
    function()
    -- what a lapsed claim, or a process of an older version, leaves: pool B's sandbox under the name
    local bsb = b[1].Sandbox.create { template = "t1" }
    local store = redis_store.new(srv.url)
    loop.run(function()
      store:set_idle_entry_ttl("shared-name", 60)
      store:put_idle("shared-name", { id = bsb.sandbox_id, ref = { provider = "hostileB", sandbox_id = bsb.sandbox_id,
        pool_identity = "hostileB/0000000000000000" } })
    end)
    local pa = pool("hostileA", "t1", { size = 0 })
    srv:cli("DEL", redis_store.key("glsb:pool", "shared-name", "identity")) -- the claim lapsed
    pa:start()
    local sb = pa:acquire({ timeout = 5 })
    assert.are_not.equal(bsb.sandbox_id, sb.sandbox_id)
    sb:terminate()
    -- still listed for a process of its own provider to use or end, and still running
    assert.are.equal(1, loop.run(function() return store:idle_count("shared-name") end))
    assert.is_true(b[2].live[bsb.sandbox_id] == true)
    pa:shutdown()
    local pb = pool("hostileB", "t1", { size = 0, create = { template = "zz", retry = false } })
    srv:cli("DEL", redis_store.key("glsb:pool", "shared-name", "identity"))
    pb:start()
    assert.are.equal(1, pb:release_all_idle())
    assert.is_nil(b[2].live[bsb.sandbox_id])
    store:close()
  end)

  -- An idle entry of this pool's own provider, under another identity: this process must end it.
  local function foreign_entry(backend_of, sandbox_id)
    local store = redis_store.new(srv.url)
    loop.run(function()
      store:set_idle_entry_ttl("shared-name", 60)
      store:put_idle("shared-name", { id = sandbox_id, ref = { provider = "hostileA", sandbox_id = sandbox_id,
        pool_identity = "hostileA/0000000000000000" } })
    end)
    srv:cli("DEL", redis_store.key("glsb:pool", "shared-name", "identity")) -- the claim lapsed
    return store, backend_of
  end

  it("an entry of its own provider whose kill fails (not 'no such sandbox') is put back, not taken as gone",
    function()
      local asb = a[1].Sandbox.create { template = "t0" }
      -- this process's key does not reach it (a 401): it is not gone, it is not this process's to end
      local connect = a[1].Sandbox.connect
      a[1].Sandbox.connect = function(ref, o)
        if ref.sandbox_id == asb.sandbox_id then
          errors.raise(errors.SandboxStartError, "connect", "401 from the provider",
            errors.http_failure(401, {}, '{"message":"Invalid API key"}'))
        end
        return connect(ref, o)
      end
      local store = foreign_entry(a, asb.sandbox_id)
      local pa = pool("hostileA", "t1", { size = 0 }):start()
      local sb = pa:acquire({ timeout = 5 })
      assert.are_not.equal(asb.sandbox_id, sb.sandbox_id)
      sb:terminate()
      pa:shutdown() -- waits for the background kill
      assert.is_true(a[2].live[asb.sandbox_id] == true, "the sandbox was killed after all?")
      assert.are.equal(1, loop.run(function() return store:idle_count("shared-name") end),
        "the entry of a live sandbox was dropped: nobody could end it any more")
      -- a process that can reach it ends it
      a[1].Sandbox.connect = connect
      local pb = pool("hostileA", "t9", { size = 0 })
      srv:cli("DEL", redis_store.key("glsb:pool", "shared-name", "identity"))
      pb:start()
      assert.are.equal(1, pb:release_all_idle())
      assert.is_nil(a[2].live[asb.sandbox_id])
      store:close()
    end)

  it("an entry of its own provider whose sandbox is gone ('no such sandbox') is forgotten", function()
    local store = foreign_entry(a, "hostileA-999")
    local pa = pool("hostileA", "t1", { size = 0 }):start()
    pa:acquire({ timeout = 5 }):terminate()
    pa:shutdown()
    assert.are.equal(0, loop.run(function() return store:idle_count("shared-name") end))
    store:close()
  end)

  it("an idle sandbox whose terminate fails is put back for a later try, not dropped", function()
    local pa = pool("hostileA", "t1"):start()
    assert.is_true(pa:wait_idle(1, 10))
    local id = loop.run(function() return redis_store.new(srv.url):idle_entries("shared-name")[1].id end)
    -- a permanent failure (a 403 the provider answered): one attempt, the handle kept
    a[2].terminate_failures = { errors.new(errors.SandboxTerminateError, "terminate", "403 from the provider",
      errors.http_failure(403, {}, '{"message":"denied"}')) }
    assert.are.equal(0, pa:release_all_idle())
    assert.is_true(a[2].live[id] == true)
    assert.are.equal(1, pa:snapshot().idle, "the sandbox whose terminate failed left the store")
    assert.are.equal(1, pa:release_all_idle())
    assert.is_nil(a[2].live[id])
  end)

  it("metadata is part of the identity: a pool of other metadata under the same name is refused", function()
    local pa = pool("hostileA", "t1", { create = { template = "t1", metadata = { team = "a" }, retry = false } })
    pa:start()
    assert.is_true(pa:wait_idle(1, 10))
    local pb = pool("hostileA", "t1", { create = { template = "t1", metadata = { team = "b" }, retry = false } })
    local ok, err = pcall(pb.start, pb)
    if ok then
      local sb = pb:acquire({ timeout = 5 })
      sb:terminate()
    end
    assert.is_false(ok, "pool B (team b) was handed pool A's sandboxes (team a)")
    assert.is_true(errors.is(err, errors.PoolError), tostring(err))
  end)

  it("a store object shared between processes without claim_identity is refused, not left unchecked", function()
    local store = redis_store.new(srv.url)
    local custom = { shared = true }
    for _, m in ipairs({ "take_idle", "put_idle", "remove_idle", "try_acquire_primary_lock", "renew_primary_lock",
      "release_primary_lock", "reap_expired_idle", "idle_count", "get_max_idle", "set_max_idle",
      "set_idle_entry_ttl" }) do
      custom[m] = function(_, ...) return store[m](store, ...) end
    end
    local ok, err = pcall(glsb.pool, "hostileA", { name = "shared-name", size = 0, store = custom,
      create = { template = "t1" } })
    if ok then pools[#pools + 1] = err end
    assert.is_false(ok)
    assert.is_string(err)
    assert.matches("claim_identity", err)
    custom.claim_identity = function(_, ...) return store:claim_identity(...) end
    custom.release_identity = function(_, ...) return store:release_identity(...) end
    local p = glsb.pool("hostileA", { name = "shared-name", size = 0, store = custom, create = { template = "t1" } })
    pools[#pools + 1] = p
    p:start()
    store:close()
  end)
end)
