-- glsb.pool under provider faults, on the E2B emulator's fault knobs: creates refused with 503 and 429 make the
-- pool DEGRADED with exponential backoff (no create while it backs off), and the first success makes it
-- healthy again.
local glsb = require "glsb"
local loop = require "glsb.loop"
local emulator = require "e2b.emulator"

describe("glsb.pool under provider faults #pool #e2b", function()
  local emu, pool, prev_log

  setup(function()
    prev_log = glsb.log.set_handler(function() end)
    emu = emulator.start()
  end)
  teardown(function()
    if emu then emu:stop() end
    glsb.log.set_handler(prev_log)
  end)
  after_each(function()
    if pool then pcall(pool.shutdown, pool, { graceful = false }) end
    pool = nil
    emu:clear_faults()
  end)

  -- How many create requests the emulator saw: a rule that only counts (a 0 ms delay, forever).
  local function counting_rule()
    emu:fault({ method = "POST", path = "^/v2/sandboxes$", action = "delay", delayMs = 0, times = -1 })
    return function()
      for _, f in ipairs(emu:faults()) do
        if f.action == "delay" then return f.fired end
      end
    end
  end

  for _, case in ipairs({ { status = 503 }, { status = 429, retryAfter = 1 } }) do
    it("goes DEGRADED on " .. case.status .. "s, backs off, and recovers with one success", function()
      emu:fault({ method = "POST", path = "^/v2/sandboxes$", status = case.status, retryAfter = case.retryAfter,
        times = 3 })
      local creates = counting_rule()
      pool = glsb.pool("e2b", { name = "faulty", size = 1, create = emu:opts({ retry = false }),
        backoff_base = 0.6, reconcile_interval = 0.1, primary_lock_ttl = 5 })
      pool:start()
      local deadline = loop.now() + 10
      while pool:snapshot().failures < 3 and loop.now() < deadline do glsb.sleep(0.02) end
      local s = pool:snapshot()
      assert.are.equal("degraded", s.state)
      assert.is_true(s.backoff_active)
      assert.matches(tostring(case.status), s.last_error)
      -- while backing off, no create reaches the provider
      local seen = creates()
      glsb.sleep(0.3)
      assert.are.equal(seen, creates())
      assert.are.equal("degraded", pool:snapshot().state)
      -- the backoff ends, the next create succeeds: healthy, failures reset
      assert.is_true(pool:wait_idle(1, 10))
      s = pool:snapshot()
      assert.are.same({ "healthy", 0, false }, { s.state, s.failures, s.backoff_active })
      local sb <close> = pool:acquire({ policy = "fail_fast" })
      assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
    end)
  end

  it("doubles the backoff while the provider keeps failing", function()
    emu:fault({ method = "POST", path = "^/v2/sandboxes$", status = 503, times = -1 })
    pool = glsb.pool("e2b", { name = "down", size = 1, create = emu:opts({ retry = false }), backoff_base = 0.2,
      degraded_threshold = 1, reconcile_interval = 0.05, primary_lock_ttl = 5 })
    pool:start()
    local deadline = loop.now() + 10
    while pool:snapshot().failures < 3 and loop.now() < deadline do glsb.sleep(0.02) end
    local s = pool:snapshot()
    assert.are.equal(3, s.failures)
    -- threshold 1: backoffs 0.2, 0.4, 0.8 s
    assert.is_true(s.backoff > 0.4 and s.backoff <= 0.8, tostring(s.backoff))
    -- acquire still works by creating directly once the provider answers again
    emu:clear_faults()
    local sb <close> = pool:acquire()
    assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
    assert.are.equal(1, pool:snapshot().stats.direct)
  end)
end)
