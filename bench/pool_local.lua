-- bench/pool_local.lua: a warm glsb.pool on the local provider (memory store) beside starting a bare python3
-- and bwrap + python3, in one run. Not a test: figures only.
--
--   make build/glsb-lua build/glsb-confine
--   build/glsb-lua bench/pool_local.lua [N] [RATE] [STEADY]    # defaults: N = 200, RATE = 20/s, STEADY = 1000
--
-- Figures (milliseconds; p50 and p99 over N, interleaved run by run so all see the same load):
--   warm    pool:acquire() -> execute_code("print(1)") -> the result, the pool full before each run (what a
--           request pays when the pool keeps up); split into acquire and execute_code to show where time goes
--   bare    /usr/bin/python3 -c 'print(1)' (spawn, run, exit)
--   bwrap   bwrap (all namespaces, read-only /usr, fresh /proc /dev /tmp) python3 -c 'print(1)'
--   steady  STEADY acquires over a pool of 16 at RATE per second, each sandbox used (print(1)) and terminated in
--           the background: acquire latency p50/p99/max and how many acquires were not served from idle
--   memory  PSS and RSS of one idle local sandbox (its supervisor's process tree), averaged over the pool
-- Writes bench/results/pool_local.json and .md.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 200
local RATE = tonumber(arg and arg[2]) or 20
local STEADY = tonumber(arg and arg[3]) or 1000
local PY = measure.PY
local BWRAP = measure.BWRAP

local pct = measure.percentile

local function summary(samples)
  return { p50 = pct(samples, 0.5), p99 = pct(samples, 0.99), max = pct(samples, 1), n = #samples }
end

local function run_once(argv)
  local out, err, st = process.run(argv, { timeout = 30 })
  if not out or st.code ~= 0 or out ~= "1\n" then
    error("bench: " .. table.concat(argv, " ") .. " failed: " .. tostring(err) .. " " .. tostring(out))
  end
end

local timed = measure.timed

local function with(prefix, argv)
  local out = {}
  for _, w in ipairs(prefix) do out[#out + 1] = w end
  for _, w in ipairs(argv) do out[#out + 1] = w end
  return out
end

-- Sums a memory field (kB) of smaps_rollup over pid and its descendants.
local function tree_memory(root)
  local children = {}
  local p = io.popen("ls /proc")
  for name in p:lines() do
    local pid = tonumber(name)
    if pid then
      local f = io.open("/proc/" .. pid .. "/stat")
      local line = f and f:read("l")
      if f then f:close() end
      local ppid = line and tonumber(line:match("^%d+ %b() %a (%d+)"))
      if ppid then
        children[ppid] = children[ppid] or {}
        table.insert(children[ppid], pid)
      end
    end
  end
  p:close()
  local total = { Pss = 0, Rss = 0, procs = 0 }
  local function walk(pid)
    local f = io.open("/proc/" .. pid .. "/smaps_rollup")
    if f then
      local s = f:read("a")
      f:close()
      total.Pss = total.Pss + (tonumber(s:match("\nPss:%s+(%d+)")) or 0)
      total.Rss = total.Rss + (tonumber(s:match("^[^\n]*\nRss:%s+(%d+)")) or tonumber(s:match("Rss:%s+(%d+)")) or 0)
      total.procs = total.procs + 1
    end
    for _, c in ipairs(children[pid] or {}) do walk(c) end
  end
  walk(root)
  return total
end

local results = { n = N, rate = RATE, steady_n = STEADY }

glsb.run(function()
  local bwrap_ok = pcall(run_once, with(BWRAP, { PY, "-c", "print(1)" }))

  -- warm: the pool full before each run
  local pool = glsb.pool("local", { name = "bench", size = 4 })
  pool:start()
  assert(pool:wait_idle(4, 60), "the pool did not warm up")
  for _ = 1, 5 do run_once({ PY, "-c", "print(1)" }) end
  local warm, acq, exec, bare, bw = {}, {}, {}, {}, {}
  for _ = 1, N do
    assert(pool:wait_idle(4, 60))
    local t0 = loop.now()
    local sb = pool:acquire()
    local t1 = loop.now()
    local r = sb:execute_code("print(1)")
    local t2 = loop.now()
    assert(r.stdout == "1\n", tostring(r))
    warm[#warm + 1] = (t2 - t0) * 1000
    acq[#acq + 1] = (t1 - t0) * 1000
    exec[#exec + 1] = (t2 - t1) * 1000
    sb:terminate()
    bare[#bare + 1] = timed(function() run_once({ PY, "-c", "print(1)" }) end)
    if bwrap_ok then bw[#bw + 1] = timed(function() run_once(with(BWRAP, { PY, "-c", "print(1)" })) end) end
  end
  results.warm, results.warm_acquire, results.warm_execute = summary(warm), summary(acq), summary(exec)
  results.bare, results.bwrap = summary(bare), bwrap_ok and summary(bw) or nil
  pool:shutdown()

  -- steady: STEADY acquires over a pool of 16 at RATE/s
  local steady = glsb.pool("local", { name = "steady", size = 16 })
  steady:start()
  assert(steady:wait_idle(16, 120), "the pool of 16 did not warm up")
  local mem = { Pss = 0, Rss = 0, procs = 0 }
  local entries = steady.store:idle_entries("steady")
  for _, e in ipairs(entries) do
    local m = tree_memory(e.sandbox._proc.pid)
    for k, v in pairs(m) do mem[k] = mem[k] + v end
  end
  results.memory_per_idle_sandbox_kb = { pss = mem.Pss / #entries, rss = mem.Rss / #entries,
    processes = mem.procs / #entries, sandboxes = #entries }
  local lat, min_idle = {}, 16
  local users = {}
  local t_start = loop.now()
  for i = 1, STEADY do
    local due = t_start + (i - 1) / RATE
    if loop.now() < due then loop.sleep(due - loop.now()) end
    local t0 = loop.now()
    local sb = steady:acquire()
    lat[#lat + 1] = (loop.now() - t0) * 1000
    min_idle = math.min(min_idle, steady.store:idle_count("steady"))
    users[#users + 1] = loop.spawn(function()
      assert(sb:execute_code("print(1)").stdout == "1\n")
      sb:terminate()
    end)
  end
  loop.gather(users)
  local st = steady:snapshot()
  results.steady = summary(lat)
  results.steady.seconds = loop.now() - t_start
  results.steady.from_idle = st.stats.hits
  results.steady.direct_creates = st.stats.direct
  results.steady.min_idle_seen = min_idle
  results.steady.warm_creates = st.stats.created
  steady:shutdown()
end)

local function ms(x) return x and string.format("%.2f", x) or "-" end
local rows = {
  { "pool warm: acquire + execute_code(print(1))", results.warm },
  { "  of which acquire", results.warm_acquire },
  { "  of which execute_code", results.warm_execute },
  { "bare /usr/bin/python3 -c 'print(1)'", results.bare },
  { "bwrap + python3 -c 'print(1)'", results.bwrap },
  { string.format("steady: acquire at %d/s over a pool of 16", RATE), results.steady },
}
local md = { "| what | p50 ms | p99 ms | max ms | n |", "|---|---:|---:|---:|---:|" }
for _, r in ipairs(rows) do
  local s = r[2] or {}
  md[#md + 1] = string.format("| %s | %s | %s | %s | %s |", r[1], ms(s.p50), ms(s.p99), ms(s.max), tostring(s.n or "-"))
end
local s = results.steady
md[#md + 1] = ""
md[#md + 1] = string.format("steady: %d acquires in %.1f s: %d from idle, %d direct creates (waited on a create), "
  .. "fewest idle seen %d, %d warm creates", STEADY, s.seconds, s.from_idle, s.direct_creates, s.min_idle_seen,
  s.warm_creates)
local m = results.memory_per_idle_sandbox_kb
md[#md + 1] = string.format("memory per idle local sandbox: PSS %.0f KiB, RSS %.0f KiB (%.1f processes; mean of %d)",
  m.pss, m.rss, m.processes, m.sandboxes)
local text = table.concat(md, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p bench/results")
local f = assert(io.open("bench/results/pool_local.md", "w"))
f:write(text)
f:close()
-- the rows of make bench's table (bench/run.lua reads `summary`): each figure beside its reference or the
-- issue's goal, p99 included (issue 12: warm acquire + print(1) p50 <= 2 ms, p99 <= 5 ms)
local function row(figure, value, unit, reference, reference_value)
  return { figure = figure, value = value, unit = unit, reference = reference, reference_value = reference_value }
end
local WARM = "pool (local): acquire + execute_code(print(1)), "
results.summary = {
  row(WARM .. "p50", results.warm.p50, "ms", "bare python3 -c 'print(1)', p50", results.bare.p50),
  row(WARM .. "p50", results.warm.p50, "ms", "goal (issue 12)", 2),
  row(WARM .. "p99", results.warm.p99, "ms", "goal (issue 12)", 5),
  row(string.format("pool (local): acquire at %d/s over a pool of 16, p99", RATE), s.p99, "ms",
    "the same acquires, p50", s.p50),
  row(string.format("pool (local): of %d steady acquires, waited on a create", STEADY), s.direct_creates,
    "acquires", "acquires made", STEADY),
  row("pool (local): PSS per idle sandbox", m.pss / 1024, "MiB", "goal (issue 16)", 10),
}
if results.bwrap then
  table.insert(results.summary, 4, row(WARM .. "p99", results.warm.p99, "ms", "bwrap + python3 -c 'print(1)', p99",
    results.bwrap.p99))
end
f = assert(io.open("bench/results/pool_local.json", "w"))
f:write(cjson.encode(results))
f:close()
