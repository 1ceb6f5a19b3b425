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
      errors.raise(errors.SandboxStartError, "connect", "sandbox " .. ref.sandbox_id .. " is not running")
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
end)
