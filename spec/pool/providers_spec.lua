-- glsb.pool (memory store) on every remote provider, each against its emulator: warm-up reaches size, acquire
-- is served from idle, a dead or nearly expired idle sandbox is never handed out, and shutdown leaves nothing
-- running on the emulator.
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"

-- Each provider: how to start its emulator, the create options, how to kill a sandbox behind the client's
-- back, what is still running, and the shortest lease it accepts (OpenSandbox's server refuses < 60 s).
local PROVIDERS = {
  {
    name = "e2b", tag = "#e2b", min_lease = 3,
    start = function() return require("e2b.emulator").start() end,
    opts = function(emu) return emu:opts() end,
    kill = function(emu, id) emu:kill(id) end,
    running = function(emu) -- the emulator's list is empty and its children are gone
      local state = emu:state()
      local out = {}
      for _, s in ipairs(state.sandboxes or {}) do out[#out + 1] = s.sandboxID .. " " .. tostring(s.state) end
      if (tonumber(state.children) or 0) > 0 then out[#out + 1] = "children " .. tostring(state.children) end
      return out
    end,
  },
  {
    name = "opensandbox", tag = "#opensandbox", min_lease = 61,
    start = function() return require("opensandbox.emulator").start() end,
    opts = function(emu) return emu:opts() end,
    kill = function(emu, id) emu:kill(id) end,
    running = function(emu) return emu:leftovers() end,
  },
  {
    name = "bedrock", tag = "#bedrock", min_lease = 3,
    start = function() return require("bedrock.emulator").start() end,
    opts = function(emu) return emu:opts() end,
    kill = function(emu, id) emu:lose(id) end,
    running = function(emu) return emu:leftovers() end,
  },
}

for _, P in ipairs(PROVIDERS) do
  describe("glsb.pool on " .. P.name .. " #pool " .. P.tag, function()
    local emu, pool, prev_log

    setup(function()
      prev_log = glsb.log.set_handler(function() end)
      emu = P.start()
    end)
    teardown(function()
      if emu then emu:stop() end
      glsb.log.set_handler(prev_log)
    end)
    after_each(function()
      if pool then pcall(pool.shutdown, pool, { graceful = false }) end
      pool = nil
    end)

    local function new_pool(extra)
      local o = { name = P.name .. "-pool", size = 2, create = P.opts(emu) }
      for k, v in pairs(extra or {}) do o[k] = v end
      pool = glsb.pool(P.name, o)
      return pool
    end

    local function idle_ids()
      local ids = {}
      for _, e in ipairs(pool.store:idle_entries(pool.name)) do ids[#ids + 1] = e.id end
      return ids
    end

    it("warms up to size and serves acquire from idle", function()
      new_pool():start()
      assert.is_true(pool:wait_idle(2, 60))
      local s = pool:snapshot()
      assert.are.same({ "healthy", 2, 2 }, { s.state, s.idle, s.stats.created })
      local warm = {}
      for _, id in ipairs(idle_ids()) do warm[id] = true end
      local sb <close> = pool:acquire()
      assert.is_true(warm[sb.sandbox_id], "served from idle")
      assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
      assert.are.equal(1, pool:snapshot().stats.hits)
    end)

    it("never hands out an idle sandbox killed behind its back", function()
      new_pool():start()
      assert.is_true(pool:wait_idle(2, 60))
      local ids = idle_ids()
      P.kill(emu, ids[1])
      local ok, err = pcall(pool.acquire, pool, { policy = "fail_fast" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.PoolAcquireFailedError), tostring(err))
      P.kill(emu, ids[2])
      local sb <close> = pool:acquire() -- direct_create: a new, live one
      assert.is_true(sb.sandbox_id ~= ids[1] and sb.sandbox_id ~= ids[2])
      assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
    end)

    it("never hands out an idle sandbox too close to its expiry", function()
      new_pool({ size = 1, idle_timeout = P.min_lease, acquire_min_remaining_ttl = P.min_lease - 0.5,
        reconcile_interval = 20, primary_lock_ttl = 40 }):start()
      assert.is_true(pool:wait_idle(1, 60))
      local old = idle_ids()[1]
      glsb.sleep(0.6)
      local sb <close> = pool:acquire()
      assert.are_not.equal(old, sb.sandbox_id)
      assert.are.equal(1, pool:snapshot().stats.discarded)
    end)

    it("shutdown leaves nothing running on the emulator", function()
      new_pool({ size = 3 }):start()
      assert.is_true(pool:wait_idle(3, 60))
      local sb = pool:acquire()
      sb:terminate()
      pool:shutdown({ graceful = true })
      assert.are.equal("stopped", pool:snapshot().state)
      local deadline = loop.now() + 5
      local left = P.running(emu)
      while #left > 0 and loop.now() < deadline do
        glsb.sleep(0.1)
        left = P.running(emu)
      end
      assert.are.same({}, left)
    end)
  end)
end
