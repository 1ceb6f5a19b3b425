-- glsb.pool on the local provider with the memory store: real confined sandboxes kept warm in this process.
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local helper = require "local.helper"

describe("glsb.pool on local #pool #local", function()
  local root, pool, prev_log

  setup(function()
    root = helper.private_tmp()
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    helper.rm_rf(root)
  end)
  after_each(function()
    if pool then pcall(pool.shutdown, pool, { graceful = false }) end
    pool = nil
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)), "a workspace was left behind")
  end)

  local function new_pool(extra)
    local o = { name = "local-spec", size = 2, create = { host_workspace_dir = root } }
    for k, v in pairs(extra or {}) do o[k] = v end
    pool = glsb.pool("local", o)
    return pool
  end

  local function idle()
    local out = {}
    for _, e in ipairs(pool.store:idle_entries(pool.name)) do out[#out + 1] = e end
    return out
  end

  it("warms up to size, serves acquire from idle, and the sandbox keeps what prepare did", function()
    new_pool({ prepare = function(sb) assert(sb:execute_code("warm = 41").status == "success") end })
    pool:start()
    assert.is_true(pool:wait_idle(2, 30))
    local s = pool:snapshot()
    assert.are.same({ "healthy", 2, 2 }, { s.state, s.idle, s.stats.created })
    local ids = {}
    for _, e in ipairs(idle()) do ids[e.id] = true end
    local sb <close> = pool:acquire()
    assert.is_true(ids[sb.sandbox_id], "served from idle")
    local r = sb:execute_code("print(warm + 1)")
    assert.are.equal("42\n", r.stdout)
    assert.are.equal(1, pool:snapshot().stats.hits)
    assert.are.equal(0, pool:snapshot().stats.direct)
  end)

  it("never hands out a sandbox whose process died while it was idle", function()
    new_pool()
    pool:start()
    assert.is_true(pool:wait_idle(2, 30))
    local head = idle()[1]
    local pid = head.sandbox._proc.pid
    helper.sh("kill -KILL " .. pid)
    local deadline = loop.now() + 5
    while helper.pid_alive(pid) and loop.now() < deadline do glsb.sleep(0.01) end
    local ok, err = pcall(pool.acquire, pool, { policy = "fail_fast" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.PoolAcquireFailedError), tostring(err))
    -- and with the default policy, a live one
    helper.sh("kill -KILL " .. idle()[1].sandbox._proc.pid)
    glsb.sleep(0.1)
    local sb <close> = pool:acquire()
    assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
  end)

  it("never hands out an entry too close to its expiry, and kills it", function()
    new_pool({ size = 1, idle_timeout = 2, acquire_min_remaining_ttl = 1.5, reconcile_interval = 10,
      primary_lock_ttl = 20 })
    pool:start()
    assert.is_true(pool:wait_idle(1, 30))
    local old = idle()[1]
    glsb.sleep(0.6)
    local sb <close> = pool:acquire()
    assert.are_not.equal(old.id, sb.sandbox_id)
    assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
    local deadline = loop.now() + 5
    while old.sandbox:_alive() and loop.now() < deadline do glsb.sleep(0.02) end
    assert.is_false(old.sandbox:_alive(), "the discarded sandbox was killed")
  end)

  it("shutdown leaves no sandbox running and no workspace behind", function()
    new_pool({ size = 3 })
    pool:start()
    assert.is_true(pool:wait_idle(3, 30))
    local handles = {}
    for _, e in ipairs(idle()) do handles[#handles + 1] = { sb = e.sandbox, id = e.id, pid = e.sandbox._proc.pid } end
    local taken = pool:acquire()
    pool:shutdown({ graceful = true })
    assert.are.equal("stopped", pool:snapshot().state)
    for _, h in ipairs(handles) do
      if h.sb ~= taken then
        assert.is_false(h.sb:_alive(), h.id .. " still runs")
        assert.is_false(helper.pid_alive(h.pid), h.id .. ": its supervisor still runs")
      end
    end
    assert.is_true(taken:_alive(), "the acquired sandbox is the caller's, not the pool's")
    taken:terminate()
    pool = nil
  end)
end)
