-- The Redis store and its connection, on a real redis-server this spec starts (unix socket, TCP with ACL
-- user and database, TLS with a CA it made): URL parsing and redaction, the C connection (core.redis_connect,
-- a loop source), OpenSandbox's key layout and scripts, and pools sharing one Redis (on the fake provider
-- with a connect of its own): one primary, outages, recovery, no password in any log line or error.
local glsb = require "glsb"
local loop = require "glsb.loop"
local core = require "glsb.core"
local errors = require "glsb.errors"
local sandbox = require "glsb.sandbox"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"
local redis = require "support.redis"
local url = require "glsb.pool.url"
local redis_conn = require "glsb.pool.redis_conn"
local redis_store = require "glsb.pool.redis"

local function new_fake()
  local mod, backend = fake_provider.new("poolfake")
  backend.connects = 0
  mod.Sandbox._alive = function(self) return backend.live[self.sandbox_id] == true end
  -- what glsb.connect does for a real provider: a handle on a sandbox another handle created
  mod.Sandbox.connect = function(ref)
    backend.connects = backend.connects + 1
    if not backend.live[ref.sandbox_id] then
      -- the provider's word that there is no such sandbox (E2B's 404): a pool may forget the entry
      error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, "connect", "sandbox " .. ref.sandbox_id
        .. " is not running")), 0)
    end
    local sb = sandbox.new(mod.Sandbox, {})
    sb.sandbox_id, sb._state = ref.sandbox_id, "running"
    return sb
  end
  registry.register("poolfake", mod)
  return mod, backend
end

local function run(fn, ...) return loop.run(fn, ...) end

describe("glsb.pool.url #pool #unit", function()
  it("parses redis, rediss and unix URLs", function()
    assert.are.same({ scheme = "redis", tls = false, host = "h", port = 6379, db = 0 }, url.parse("redis://h"))
    local r = url.parse("rediss://alice:p%40ss@10.0.0.1:7000/3")
    assert.are.same({ "alice", "p@ss", "10.0.0.1", 7000, 3, true }, { r.user, r.password, r.host, r.port, r.db, r.tls })
    r = url.parse("redis://:only@[::1]:6380")
    assert.are.same({ nil, "only", "::1", 6380 }, { r.user, r.password, r.host, r.port })
    r = url.parse("unix://:pw@/run/redis.sock?db=2")
    assert.are.same({ "/run/redis.sock", "pw", 2 }, { r.path, r.password, r.db })
    assert.is_nil((url.parse("http://h")))
    assert.is_nil((url.parse("unix://relative.sock")))
    assert.is_nil((url.parse("redis://h:99999")))
  end)

  it("never shows a password", function()
    assert.are.equal("redis://alice:***@h:1/0", url.redact("redis://alice:secret@h:1/0"))
    assert.are.equal("rediss://:***@h", url.redact("rediss://:secret@h"))
    assert.are.equal("unix://:***@/x.sock", url.redact("unix://:secret@/x.sock"))
    assert.are.equal("redis://h:1", url.redact("redis://h:1"))
    local _, err = url.parse("redis://u:secret@h/notanumber")
    assert.matches("bad Redis URL redis://u:%*%*%*@h/notanumber", err)
    assert.is_nil(err:find("secret", 1, true))
  end)
end)

describe("Redis store #pool #redis", function()
  local srv, backend, pools, logged, prev_log
  local PW = "pw-Zq81-never-logged"

  setup(function()
    srv = redis.start { password = PW, tcp = true, tls = true, acl_user = { "alice", "alice-" .. PW } }
    prev_log = glsb.log.set_handler(function(level, msg, fields)
      local parts = { level, msg }
      for k, v in pairs(fields or {}) do parts[#parts + 1] = tostring(k) .. "=" .. tostring(v) end
      logged[#logged + 1] = table.concat(parts, " ")
    end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if srv then srv:stop() end
  end)
  before_each(function()
    logged = {}
    pools = {}
    backend = select(2, new_fake())
    srv:cli("FLUSHALL")
  end)
  after_each(function()
    for _, p in ipairs(pools) do pcall(p.shutdown, p, { graceful = false }) end
    registry.unregister("poolfake")
    for _, line in ipairs(logged) do assert.is_nil(line:find(PW, 1, true), "a log line holds the password: " .. line) end
  end)

  local function pool(extra)
    local o = { name = "shared", size = 3, store = srv.url, create = { retry = false }, reconcile_interval = 0.2,
      primary_lock_ttl = 1 }
    for k, v in pairs(extra or {}) do o[k] = v end
    local p = glsb.pool("poolfake", o)
    pools[#pools + 1] = p
    return p
  end

  describe("connection", function()
    it("talks RESP over the unix socket, pipelined across tasks", function()
      local c = run(redis_conn.open, url.parse(srv.url), {})
      local replies = run(function()
        return c:pipeline({ { "SET", "k", "v" }, { "INCR", "n" }, { "GET", "missing" }, { "RPUSH", "l", "a", "b" },
          { "LRANGE", "l", 0, -1 }, { "HGET" } })
      end)
      assert.are.same({ "OK", 1, false, 2, { "a", "b", n = 2 } }, { replies[1], replies[2], replies[3], replies[4], replies[5] })
      assert.matches("^ERR wrong number of arguments", replies[6].err)
      local total = run(function()
        local tasks = {}
        for i = 1, 20 do tasks[i] = loop.spawn(function() for _ = 1, 10 do c:call({ "INCR", "n" }) end end) end
        loop.gather(tasks)
        return c:call({ "GET", "n" })
      end)
      assert.are.equal("201", total)
      c:close()
      c:close()
    end)

    it("authenticates as an ACL user over TCP and selects the database", function()
      local u = "redis://alice:alice-" .. PW .. "@127.0.0.1:" .. srv.port .. "/5"
      local c = run(redis_conn.open, url.parse(u), {})
      run(function() c:call({ "SET", "in5", "yes" }) end)
      c:close()
      assert.are.equal("yes", srv:cli("-n", 5, "GET", "in5"))
      assert.are.equal("", srv:cli("GET", "in5"))
    end)

    it("speaks TLS, verifies the server against the CA and its name", function()
      local c = run(redis_conn.open, url.parse(srv.tls_url), { tls_ca = srv.ca })
      assert.are.equal("PONG", run(function() return c:call({ "PING" }) end))
      c:close()
      local ok, err = pcall(run, redis_conn.open, url.parse(srv.tls_url), {})
      assert.is_false(ok)
      assert.are.equal("PEER_FAILED_VERIFICATION", err.code)
      ok, err = pcall(run, redis_conn.open, url.parse(srv.tls_url), { tls_ca = srv.ca, tls_servername = "other.test" })
      assert.is_false(ok)
      assert.are.equal("PEER_FAILED_VERIFICATION", err.code)
      assert.matches("hostname mismatch", err.message)
    end)

    it("reports a wrong password, a refused connection and an unknown host without the password", function()
      local ok, err = pcall(run, redis_conn.open, url.parse("unix://:wrong-" .. PW .. "@" .. srv.socket), {})
      assert.is_false(ok)
      assert.are.equal("WRONGPASS", err.code)
      assert.is_nil(err.message:find(PW, 1, true))
      ok, err = pcall(run, redis_conn.open, url.parse("redis://127.0.0.1:1"), { connect_timeout = 2 })
      assert.is_false(ok)
      assert.are.equal("ECONNREFUSED", err.code)
      assert.matches("127.0.0.1:1", err.message)
      ok, err = pcall(run, redis_conn.open, url.parse("redis://no-such-host.invalid"), { connect_timeout = 5 })
      assert.is_false(ok)
      assert.are.equal("COULDNT_RESOLVE_HOST", err.code)
      assert.is_true(errors.is_transient(errors.new(errors.PoolStateStoreUnavailableError, "pool", "x",
        { code = "ECONNREFUSED", message = "refused" })))
    end)

    it("fails every request in flight when the server goes away", function()
      local c = run(redis_conn.open, url.parse(srv.url), {})
      local ok, err = pcall(run, function()
        local t = loop.spawn(function() return c:call({ "BLPOP", "never", 0 }) end)
        loop.sleep(0.05)
        srv:cli("CLIENT", "KILL", "TYPE", "normal")
        return t:wait()
      end)
      assert.is_false(ok)
      assert.are.equal("ECONNRESET", err.code)
      assert.is_truthy(c.broken)
    end)
  end)

  describe("store", function()
    local store
    before_each(function() store = redis_store.new(srv.url, { prefix = "opensandbox:pool" }) end)
    after_each(function() store:close() end)

    it("lays keys out as OpenSandbox documents (hash-tagged, base64url name)", function()
      run(function()
        store:set_idle_entry_ttl("agents/α", 30)
        store:set_max_idle("agents/α", 4)
        store:put_idle("agents/α", { id = "sb-1", ref = { provider = "poolfake", sandbox_id = "sb-1" } })
        assert.is_true(store:try_acquire_primary_lock("agents/α", "owner-1", 5))
      end)
      local tag = "{" .. core.b64encode("agents/α", "url") .. "}"
      assert.is_nil(tag:find("=", 1, true))
      local base = "opensandbox:pool:" .. tag .. ":"
      assert.are.equal("list", srv:cli("TYPE", base .. "idle:list"))
      assert.are.equal("hash", srv:cli("TYPE", base .. "idle:expires"))
      assert.are.equal("hash", srv:cli("TYPE", base .. "idle:refs"))
      assert.are.equal("owner-1", srv:cli("GET", base .. "lock"))
      assert.are.equal("4", srv:cli("GET", base .. "maxIdle"))
      assert.are.equal("30000", srv:cli("GET", base .. "idleTtlMillis"))
      local pttl = tonumber(srv:cli("PTTL", base .. "lock"))
      assert.is_true(pttl > 4000 and pttl <= 5000, tostring(pttl))
      -- the expiry is the server's clock (TIME) plus the TTL, in epoch milliseconds
      local t = {}
      for n in srv:cli("TIME"):gmatch("%d+") do t[#t + 1] = tonumber(n) end
      local now_ms = t[1] * 1000 + t[2] // 1000
      local exp = tonumber(srv:cli("HGET", base .. "idle:expires", "sb-1"))
      assert.is_true(math.abs(exp - (now_ms + 30000)) < 2000, tostring(exp - now_ms))
      assert.are.same({ provider = "poolfake", sandbox_id = "sb-1" },
        require("cjson").decode(srv:cli("HGET", base .. "idle:refs", "sb-1")))
    end)

    it("takes FIFO, skips entries below the minimum TTL and returns the live ones to kill", function()
      run(function()
        store:set_idle_entry_ttl("p", 1)
        store:put_idle("p", { id = "old", ref = { sandbox_id = "old" } })
        loop.sleep(0.4)
        store:set_idle_entry_ttl("p", 10)
        assert.is_true(store:put_idle("p", { id = "new1" }))
        assert.is_false(store:put_idle("p", { id = "new1" }), "put is idempotent")
        store:put_idle("p", { id = "new2" })
        assert.are.equal(3, store:idle_count("p"))
        local e, discarded = store:take_idle("p", 0.8) -- "old" has ~0.6 s left: passed over, alive
        assert.are.equal("new1", e.id)
        assert.are.equal(1, #discarded)
        assert.are.equal("old", discarded[1].id)
        assert.are.equal("old", discarded[1].ref.sandbox_id)
        assert.are.equal(1, store:idle_count("p"))
        assert.is_true(store:remove_idle("p", "new2"))
        assert.is_false(store:remove_idle("p", "new2"))
        assert.is_nil((store:take_idle("p", 0)))
      end)
      assert.are.equal("0", srv:cli("LLEN", redis_store.key("opensandbox:pool", "p", "idle:list")))
    end)

    it("reaps expired and near-expiry entries; only the live ones come back", function()
      run(function()
        store:set_idle_entry_ttl("p", 0.3)
        store:put_idle("p", { id = "dead" })
        loop.sleep(0.4)
        store:set_idle_entry_ttl("p", 2)
        store:put_idle("p", { id = "near" })
        store:set_idle_entry_ttl("p", 60)
        store:put_idle("p", { id = "fine" })
        local alive = store:reap_expired_idle("p", 5)
        assert.are.equal(1, #alive)
        assert.are.equal("near", alive[1].id)
        assert.are.same({ "fine" }, (function()
          local ids = {}
          for _, e in ipairs(store:idle_entries("p")) do ids[#ids + 1] = e.id end
          return ids
        end)())
      end)
    end)

    it("grants the primary lock to one owner, renews and releases only for it, and lets it lapse", function()
      run(function()
        assert.is_true(store:try_acquire_primary_lock("p", "a", 0.3))
        local got, left = store:try_acquire_primary_lock("p", "b", 0.3)
        assert.is_false(got)
        assert.is_true(left > 0.2 and left <= 0.3, "the holder's lock has " .. tostring(left) .. " s left")
        assert.is_false(store:renew_primary_lock("p", "b", 0.3))
        assert.is_false(store:release_primary_lock("p", "b"))
        assert.is_true(store:renew_primary_lock("p", "a", 0.3))
        loop.sleep(0.4)
        assert.is_true(store:try_acquire_primary_lock("p", "b", 5), "a lapsed lock goes to the next owner")
        assert.is_false(store:renew_primary_lock("p", "a", 5))
        assert.is_true(store:release_primary_lock("p", "b"))
        assert.is_true(store:try_acquire_primary_lock("p", "a", 5))
      end)
    end)

    it("turns any Redis error into a failure the pool reports as store unavailable", function()
      srv:cli("SET", redis_store.key("glsb:pool", "shared", "idle:list"), "not a list")
      srv:cli("HSET", redis_store.key("glsb:pool", "shared", "idle:expires"), "x", "99999999999999")
      local p = pool():start()
      local ok, err = pcall(p.acquire, p, { policy = "fail_fast" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.PoolStateStoreUnavailableError), tostring(err))
      assert.are.equal("pool", err.stage)
      assert.matches("WRONGTYPE", tostring(err))
    end)
  end)

  describe("pools sharing it", function()
    it("warms up once however many pools share the name: one primary creates", function()
      local a, b = pool(), pool()
      a:start()
      b:start()
      assert.is_true(a:wait_idle(3, 10))
      glsb.sleep(0.5) -- several more ticks of both
      local sa, sb = a:snapshot(), b:snapshot()
      assert.is_true(sa.primary ~= sb.primary, "exactly one primary")
      assert.are.equal(3, backend.count("_start"))
      assert.are.equal(3, sa.idle)
      assert.are.equal(3, sb.idle)
    end)

    it("hands a sandbox one pool warmed to the other through connect, each only once", function()
      local a, b = pool(), pool()
      a:start()
      assert.is_true(a:wait_idle(3, 10))
      b:start()
      local seen = {}
      for i = 1, 6 do
        local p = i % 2 == 0 and a or b
        local sb = p:acquire()
        assert.is_nil(seen[sb.sandbox_id], "handed out twice: " .. sb.sandbox_id)
        seen[sb.sandbox_id] = true
        assert.is_true(backend.live[sb.sandbox_id])
      end
      assert.is_true(backend.connects >= 1, "b reconnected to a's sandboxes")
      -- creates never exceed what the deficit allows: size + one per acquire
      assert.is_true(backend.count("_start") <= 3 + 6, tostring(backend.count("_start")))
    end)

    it("keeps the handles of its own idle sandboxes (no reconnect, also after a GC) and forgets taken ones", function()
      local a, b = pool(), pool()
      a:start()
      assert.is_true(a:wait_idle(3, 10))
      collectgarbage("collect")
      collectgarbage("collect")
      local mine = a:acquire()
      assert.are.equal(0, backend.connects, "acquired through its own handle (regression: handles were weak)")
      b:start()
      local taken = {}
      for _ = 1, 2 do taken[#taken + 1] = b:acquire().sandbox_id end
      assert.are.equal(2, backend.connects)
      glsb.sleep(0.6) -- a few of a's ticks
      for _, id in ipairs(taken) do assert.is_nil(a.handles[id], "a still holds a handle of " .. id) end
      assert.is_nil(a.handles[mine.sandbox_id])
    end)

    it("a dead shared entry is removed and killed; fail_fast raises PoolAcquireFailedError", function()
      local a, b = pool({ size = 1 }), pool({ size = 1 })
      a:start()
      assert.is_true(a:wait_idle(1, 10))
      a:shutdown({ graceful = true }) -- idle stays in Redis
      local id = srv:cli("LINDEX", redis_store.key("glsb:pool", "shared", "idle:list"), 0)
      backend.live[id] = nil
      b:start()
      local ok, err = pcall(b.acquire, b, { policy = "fail_fast" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.PoolAcquireFailedError), tostring(err))
      assert.matches("not running", tostring(err))
    end)

    it("resize reaches every pool of the name", function()
      local a, b = pool({ size = 1 }), pool({ size = 1 })
      a:start()
      b:start()
      assert.is_true(a:wait_idle(1, 10))
      b:resize(4)
      assert.is_true(a:wait_idle(4, 10))
      glsb.sleep(0.3)
      assert.are.equal(4, a:snapshot().size)
      assert.are.equal(4, backend.live_count())
    end)

    it("survives Redis going away: store unavailable, direct creates, and recovery when it is back", function()
      local p = pool({ size = 2 })
      p:start()
      assert.is_true(p:wait_idle(2, 10))
      srv:pause()
      local ok, err = pcall(p.acquire, p, { policy = "fail_fast" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.PoolStateStoreUnavailableError), tostring(err))
      assert.is_nil(tostring(err):find(PW, 1, true))
      local sb = p:acquire() -- direct_create goes on without the store
      assert.is_true(backend.live[sb.sandbox_id])
      glsb.sleep(0.5)
      local s = p:snapshot()
      assert.is_false(s.store_ok)
      assert.is_nil(s.idle)
      assert.matches("StateStoreUnavailable", s.last_error)
      srv:resume() -- a fresh server: the idle entries are gone with the old one
      assert.is_true(p:wait_idle(2, 15), "the pool warmed up again once Redis was back")
      s = p:snapshot()
      assert.is_true(s.store_ok)
      assert.is_true(s.primary)
      local again = p:acquire({ policy = "fail_fast" })
      assert.is_true(backend.live[again.sandbox_id])
      for _, line in ipairs(logged) do assert.is_nil(line:find(PW, 1, true), line) end
      assert.is_true(#logged > 0, "the outage was logged")
    end)

    it("works over TLS and TCP URLs too", function()
      local t = pool({ size = 1, store = srv.tls_url, store_options = { tls_ca = srv.ca } }):start()
      assert.is_true(t:wait_idle(1, 10))
      local c = pool({ name = "tcp", size = 1, store = "redis://alice:alice-" .. PW .. "@127.0.0.1:" .. srv.port .. "/3" })
      c:start()
      assert.is_true(c:wait_idle(1, 10))
      assert.are.equal("1", srv:cli("-n", 3, "HLEN", redis_store.key("glsb:pool", "tcp", "idle:expires")))
    end)

    it("destroy reaches the other pools of the name", function()
      local a, b = pool({ size = 1 }), pool({ size = 1 })
      a:start()
      b:start()
      assert.is_true(a:wait_idle(1, 10))
      assert.are.equal(1, a:destroy())
      local ok, err = pcall(b.acquire, b)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.PoolDestroyedError), tostring(err))
    end)
  end)
end)
