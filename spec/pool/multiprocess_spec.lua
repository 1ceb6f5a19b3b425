-- Many processes on one pool: build/glsb-lua workers (spec/pool/worker.lua) share one Redis (started here, on
-- a unix socket) and one E2B emulator. Every acquired sandbox is handed out once, creates stay within what the
-- deficit allows (one replenisher at a time), the primary lock moves to another worker within its TTL when
-- the primary is SIGKILLed, a worker killed between take and connect leaks nothing past the lease, and after
-- shutdown + release_all_idle nothing is left on the emulator.
local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"
local shell = require "support.shell"
local redis = require "support.redis"
local emulator = require "e2b.emulator"
local redis_store = require "glsb.pool.redis"

local GLSB_LUA = shell.repo .. "/build/glsb-lua"
local WORKER = shell.repo .. "/spec/pool/worker.lua"

describe("glsb.pool across processes #pool #e2b #redis #slow", function()
  local srv, emu, workers, prev_log

  setup(function()
    prev_log = glsb.log.set_handler(function() end)
    srv = redis.start()
    emu = emulator.start()
  end)
  teardown(function()
    if emu then emu:stop() end
    if srv then srv:stop() end
    glsb.log.set_handler(prev_log)
  end)
  before_each(function()
    workers = {}
    srv:cli("FLUSHALL")
    emu:reset()
  end)
  after_each(function()
    for _, w in ipairs(workers) do
      if not w.exited then
        w.proc:kill("KILL")
        loop.run(function() w.proc:wait(loop.now() + 5) end)
      end
      w.proc:close()
    end
  end)

  local function config(extra)
    local c = { redis = srv.url, e2b = emu:opts(), name = "mp", size = 4, n = 50, lock_ttl = 2, interval = 0.3 }
    for k, v in pairs(extra or {}) do c[k] = v end
    return c
  end

  -- Starts a worker; its stdout lines are decoded into w.lines as they come.
  local function start_worker(mode, cfg)
    local p = assert(process.spawn { argv = { GLSB_LUA, WORKER, mode, cjson.encode(cfg) }, stdin = "null",
      stdout = "pipe", stderr = "pipe" })
    local w = { proc = p, lines = {}, mode = mode }
    w.reader = loop.spawn(function()
      while true do
        local line = p:read_line("stdout")
        if not line then break end
        local ok, v = pcall(cjson.decode, line)
        if ok then w.lines[#w.lines + 1] = v end
      end
      w.stderr = p:read("stderr", loop.now() + 1)
    end)
    workers[#workers + 1] = w
    return w
  end

  local function wait_exit(w, seconds)
    local st = loop.run(function()
      local s = w.proc:wait(loop.now() + seconds)
      pcall(w.reader.wait, w.reader, 5)
      return s
    end)
    w.exited = st ~= nil
    return st
  end

  local function creates_counter()
    emu:fault({ method = "POST", path = "^/v2/sandboxes$", action = "delay", delayMs = 0, times = -1 })
    return function()
      for _, f in ipairs(emu:faults()) do if f.action == "delay" then return f.fired end end
    end
  end

  local function idle_count(name)
    return tonumber(srv:cli("HLEN", redis_store.key("glsb:pool", name or "mp", "idle:expires")))
  end

  local function release_all(name)
    local p = glsb.pool("e2b", { name = name or "mp", size = 0, store = srv.url, create = emu:opts() })
    local n = p:release_all_idle()
    p.store:close()
    return n
  end

  local function emulator_empty(seconds)
    local deadline = loop.now() + (seconds or 5)
    while #emu:sandbox_ids() > 0 and loop.now() < deadline do glsb.sleep(0.1) end
    return emu:sandbox_ids()
  end

  it("4 workers, 200 acquires: each sandbox handed out once, creates within the deficit, nothing left", function()
    local creates = creates_counter()
    local cfg = config()
    for _ = 1, 4 do start_worker("acquire", cfg) end
    -- sample the idle count while they run: one replenisher at a time never fills past size
    local max_idle = 0
    local done = false
    local sampler = loop.spawn(function()
      while not done do
        max_idle = math.max(max_idle, idle_count() or 0)
        loop.sleep(0.05)
      end
    end)
    for _, w in ipairs(workers) do
      local st = wait_exit(w, 180)
      assert.are.same({ code = 0 }, st, "worker failed: " .. tostring(w.stderr))
    end
    done = true
    loop.run(function() sampler:wait() end)
    local seen, total = {}, { hits = 0, direct = 0, created = 0, dead = 0, discarded = 0 }
    local n = 0
    for _, w in ipairs(workers) do
      local r = w.lines[#w.lines]
      for _, id in ipairs(r.ids) do
        assert.is_nil(seen[id], "handed out twice: " .. id)
        seen[id] = true
        n = n + 1
      end
      for k in pairs(total) do total[k] = total[k] + r.stats[k] end
    end
    assert.are.equal(200, n)
    assert.are.equal(200, total.hits + total.direct)
    assert.is_true(total.hits > 100, "most acquires were served warm: " .. total.hits)
    -- every create the emulator saw is a warm-up or a direct create
    assert.are.equal(creates(), total.created + total.direct)
    -- a warm create only ever filled a deficit: the size, plus one per entry taken
    assert.is_true(total.created <= cfg.size + total.hits + total.dead + total.discarded,
      string.format("%d warm creates for %d takes", total.created, total.hits + total.dead + total.discarded))
    assert.is_true(max_idle <= cfg.size, "idle reached " .. max_idle)
    -- the workers shut down; their idle sandboxes stay in Redis for the next process, until released
    local idle = idle_count()
    assert.are.equal(idle, release_all())
    assert.are.same({}, emulator_empty())
  end)

  it("hands the primary lock to another worker within its TTL when the primary is SIGKILLed", function()
    local cfg = config({ size = 2 })
    for _ = 1, 3 do start_worker("serve", cfg) end
    local function primaries()
      local out = {}
      for i, w in ipairs(workers) do
        local last = w.lines[#w.lines]
        if not w.killed and last and last.primary then out[#out + 1] = i end
      end
      return out
    end
    local deadline = loop.now() + 30
    while #primaries() ~= 1 and loop.now() < deadline do glsb.sleep(0.05) end
    glsb.sleep(0.5)
    local p = primaries()
    assert.are.equal(1, #p, "one primary")
    local victim = workers[p[1]]
    victim.proc:kill("KILL")
    victim.killed = true
    local t_kill = loop.now()
    wait_exit(victim, 5)
    while #primaries() == 0 and loop.now() - t_kill < 10 do glsb.sleep(0.02) end
    local took = loop.now() - t_kill
    assert.are.equal(1, #primaries(), "another worker is primary")
    -- the dead primary's lock lapses lock_ttl after its last renewal at the latest, and the others look
    -- again the moment it lapses (the lock script tells them its PTTL); 0.25 s for processes to be scheduled
    assert.is_true(took <= cfg.lock_ttl + 0.25, string.format("took %.2fs", took))
    for _, w in ipairs(workers) do
      if not w.killed then w.proc:kill("TERM") end
      wait_exit(w, 5)
    end
    release_all()
    assert.are.same({}, emulator_empty())
  end)

  it("keeps serving while Redis is stopped and restarted mid-run, and recovers", function()
    local cfg = config({ size = 3, n = 30, gap = 0.05, idle_timeout = 6, min_ttl = 1 })
    for _ = 1, 2 do start_worker("acquire", cfg) end
    glsb.sleep(0.6)
    srv:pause()
    glsb.sleep(1)
    srv:resume() -- a fresh server: what was idle in it is forgotten (those sandboxes end with their lease)
    local seen, direct, n = {}, 0, 0
    for _, w in ipairs(workers) do
      local st = wait_exit(w, 120)
      assert.are.same({ code = 0 }, st, "worker failed: " .. tostring(w.stderr))
      local r = w.lines[#w.lines]
      for _, id in ipairs(r.ids) do
        assert.is_nil(seen[id], "handed out twice: " .. id)
        seen[id] = true
        n = n + 1
      end
      direct = direct + r.stats.direct
    end
    assert.are.equal(60, n)
    assert.is_true(direct >= 1, "acquires during the outage created directly")
    release_all()
    assert.are.same({}, emulator_empty(cfg.idle_timeout + 3))
  end)

  it("a worker killed between take and connect leaks nothing past the lease", function()
    local cfg = config({ size = 2, idle_timeout = 4, min_ttl = 0.5 })
    start_worker("serve", cfg)
    local deadline = loop.now() + 30
    while (idle_count() or 0) < 2 and loop.now() < deadline do glsb.sleep(0.05) end
    assert.are.equal(2, idle_count())
    local dier = start_worker("take-die", cfg)
    local st = wait_exit(dier, 20)
    assert.are.equal(9, st.signal)
    local id = dier.lines[1].took
    assert.is_string(id)
    assert.are.equal("0", srv:cli("HEXISTS", redis_store.key("glsb:pool", "mp", "idle:expires"), id))
    local alive = false
    for _, s in ipairs(emu:sandbox_ids()) do alive = alive or s == id end
    assert.is_true(alive, "the taken sandbox still runs (nobody holds it)")
    -- its lease (idle_timeout) ends it; nothing else needs to
    deadline = loop.now() + cfg.idle_timeout + 3
    while loop.now() < deadline do
      alive = false
      for _, s in ipairs(emu:sandbox_ids()) do alive = alive or s == id end
      if not alive then break end
      glsb.sleep(0.2)
    end
    assert.is_false(alive, "the orphan outlived its lease")
    workers[1].proc:kill("TERM")
    wait_exit(workers[1], 5)
    release_all()
    assert.are.same({}, emulator_empty(cfg.idle_timeout + 2))
  end)
end)
