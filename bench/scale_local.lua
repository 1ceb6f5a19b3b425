-- bench/scale_local.lua: COUNT live local sandboxes at once, beside COUNT bubblewrap + python3 REPLs
-- started the same way. Not a test.
--
--   make
--   build/glsb-lua bench/scale_local.lua [COUNT] [CONCURRENCY]     # defaults 100, 4
--
-- Figures:
--   create    COUNT glsb.create("local") with CONCURRENCY in flight at a time (tasks of one glsb-lua);
--             throughput in sandboxes per second and p50/p99 per create. Reference: COUNT bwrap (all
--             namespaces, read-only /usr) + python3 REPLs started the same way, each up when it has
--             answered a first line (what a create gives: an interpreter ready for code). The two
--             phases run one after the other, so the table's throughput row comes from rounds that
--             alternate (6 x 20 creates, 6 x 20 REPL starts), the same load on both.
--   memory    PSS (and RSS) of each live idle sandbox, summed over its whole process tree (supervisor,
--             init, agent: /proc/<pid>/smaps_rollup), as the mean over the COUNT; the same for the REPLs.
--             PSS splits each shared page among the processes that map it, so COUNT live sandboxes
--             share the Python binary and libraries the way a real fleet would.
--   calls     one execute_code("print(1)") on every sandbox at once: p50/p99; with COUNT > 100, also
--             on 100 of them at once (5 rounds), the others live and idle.
--   teardown  terminating all COUNT (CONCURRENCY at a time): throughput, and what is left of them
--             (their supervisors, processes of their host uids, their workspace folders).
-- Writes bench/results/scale_local.{json,md}.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"

local COUNT = tonumber(arg and arg[1]) or 100
local CONCURRENCY = tonumber(arg and arg[2]) or 4
local PY = measure.PY
local BWRAP = measure.BWRAP
local REPL = "import sys\nprint('ready', flush=True)\nfor line in sys.stdin:\n    exec(line)\n    sys.stdout.flush()"
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"

local pct = measure.percentile

-- Runs fn(i) for i = 1..n with at most `width` running at once; returns per-call ms and the wall ms.
local function pooled(n, width, fn)
  local ms, next_i = {}, 1
  local t0 = loop.now()
  local workers = {}
  for w = 1, math.min(width, n) do
    workers[w] = loop.spawn(function()
      while next_i <= n do
        local i = next_i
        next_i = next_i + 1
        local t = loop.now()
        fn(i)
        ms[i] = (loop.now() - t) * 1000
      end
    end)
  end
  loop.gather(workers)
  return ms, (loop.now() - t0) * 1000
end

-- pid -> children, from /proc
local function process_table()
  local children = {}
  local p = assert(io.popen("ls /proc"))
  for name in p:lines() do
    local pid = tonumber(name)
    local f = pid and io.open("/proc/" .. pid .. "/stat")
    if f then
      local ppid = tonumber((f:read("l") or ""):match("^%d+ %b() %a (%d+)"))
      f:close()
      if ppid then
        children[ppid] = children[ppid] or {}
        table.insert(children[ppid], pid)
      end
    end
  end
  p:close()
  return children
end

-- PSS/RSS (KiB) and process count of pid's tree, and per process name (comm) the PSS share.
local function tree_memory(children, root)
  local total = { pss = 0, rss = 0, procs = 0, by_name = {} }
  local function walk(pid)
    local f = io.open("/proc/" .. pid .. "/smaps_rollup")
    if f then
      local s = f:read("a")
      f:close()
      local pss = tonumber(s:match("\nPss:%s+(%d+)")) or 0
      total.pss = total.pss + pss
      total.rss = total.rss + (tonumber(s:match("\nRss:%s+(%d+)")) or 0)
      total.procs = total.procs + 1
      local c = io.open("/proc/" .. pid .. "/comm")
      local name = c and c:read("l") or "?"
      if c then c:close() end
      total.by_name[name] = (total.by_name[name] or 0) + pss
    end
    for _, c in ipairs(children[pid] or {}) do walk(c) end
  end
  walk(root)
  return total
end

local function mean_memory(roots)
  local children = process_table()
  local sum = { pss = 0, rss = 0, procs = 0, by_name = {} }
  for _, pid in ipairs(roots) do
    local m = tree_memory(children, pid)
    sum.pss, sum.rss, sum.procs = sum.pss + m.pss, sum.rss + m.rss, sum.procs + m.procs
    for k, v in pairs(m.by_name) do sum.by_name[k] = (sum.by_name[k] or 0) + v end
  end
  local n = #roots
  local by_name = {}
  for k, v in pairs(sum.by_name) do by_name[k] = v / n end
  return { pss_kb = sum.pss / n, rss_kb = sum.rss / n, processes = sum.procs / n, pss_kb_by_process = by_name }
end


local results = { count = COUNT, concurrency = CONCURRENCY, date = os.date("!%Y-%m-%dT%H:%M:%SZ") }
local ROUNDS, CHUNK = 6, 20 -- the interleaved create throughput

-- a bwrap + python3 REPL, up when it has answered its first line (what a create gives)
local function start_repl()
  local argv = {}
  for _, w in ipairs(BWRAP) do argv[#argv + 1] = w end
  for _, w in ipairs({ PY, "-u", "-c", REPL }) do argv[#argv + 1] = w end
  local p = assert(process.spawn { argv = argv, stdin = "pipe", stdout = "pipe", stderr = "inherit" })
  assert(p:read_line("stdout", loop.now() + 30) == "ready", "a bwrap python3 did not start")
  return p
end

local function stop_repl(p)
  p:close_stdin()
  if not p:wait(loop.now() + 10) then p:kill("KILL") p:wait(loop.now() + 5) end
  p:close()
end

glsb.run(function()
  -- warm the page cache and the helper
  for _ = 1, 2 do
    local sb = glsb.create("local")
    sb:execute_code("print(1)")
    sb:terminate()
  end

  -- glsb: create COUNT, CONCURRENCY at a time
  -- a create that fails is counted and named in the results, not the end of the bench
  local created, failures = {}, {}
  local create_ms, create_wall = pooled(COUNT, CONCURRENCY, function(i)
    local ok, sb = pcall(glsb.create, "local")
    if ok then created[i] = sb else failures[#failures + 1] = tostring(sb) end
  end)
  local sbs, roots = {}, {}
  for i = 1, COUNT do if created[i] then sbs[#sbs + 1] = created[i] end end
  for i, sb in ipairs(sbs) do roots[i] = sb._proc.pid end
  results.create_failures = failures
  results.glsb_idle = mean_memory(roots)
  local call_ms = {}
  local tasks = {}
  for i, sb in ipairs(sbs) do
    tasks[i] = loop.spawn(function()
      local t = loop.now()
      local r = sb:execute_code("print(1)")
      call_ms[i] = (loop.now() - t) * 1000
      assert(r.stdout == "1\n", tostring(r))
    end)
  end
  loop.gather(tasks)
  results.glsb_used = mean_memory(roots)
  -- with more than 100 live: also the calls of issue 26's goal, execute_code on 100 of them at once
  -- (5 rounds, the latencies of all 500 together), while the others stay live and idle
  local call100_ms
  if #sbs > 100 then
    call100_ms = {}
    for _ = 1, 5 do
      local round = {}
      for i = 1, 100 do
        round[i] = loop.spawn(function()
          local t = loop.now()
          local r = sbs[i]:execute_code("print(1)")
          call100_ms[#call100_ms + 1] = (loop.now() - t) * 1000
          assert(r.stdout == "1\n", tostring(r))
        end)
      end
      loop.gather(round)
    end
  end
  -- what terminate must leave nothing of: each sandbox's supervisor, the processes of its host uid
  -- (the sandbox user's, as root: one uid per sandbox) and its workspace folder
  local supervisors, uids, workspaces = {}, {}, {}
  for i, sb in ipairs(sbs) do
    supervisors[i] = sb._proc.pid
    uids[i] = sb.confinement and math.tointeger(sb.confinement.host_uid)
    workspaces[i] = sb.workspace
  end
  local stop_ms, stop_wall = pooled(#sbs, CONCURRENCY, function(i) sbs[i]:terminate() end)
  local left = { supervisors = 0, processes = 0, workspaces = 0 }
  for i = 1, #sbs do
    if io.open("/proc/" .. supervisors[i] .. "/stat") then left.supervisors = left.supervisors + 1 end
    if io.open(workspaces[i]) then left.workspaces = left.workspaces + 1 end
  end
  local by_uid = {}
  for _, u in ipairs(uids) do by_uid[u] = true end
  local ps = assert(io.popen("ps -e -o uid="))
  for line in ps:lines() do if by_uid[tonumber(line)] then left.processes = left.processes + 1 end end
  ps:close()
  results.left_after_terminate = left
  results.glsb = {
    create = { per_second = #sbs / create_wall * 1000, p50_ms = pct(create_ms, 0.5), p99_ms = pct(create_ms, 0.99),
      wall_ms = create_wall },
    calls = { p50_ms = pct(call_ms, 0.5), p99_ms = pct(call_ms, 0.99) },
    calls_100 = call100_ms and { p50_ms = pct(call100_ms, 0.5), p99_ms = pct(call100_ms, 0.99) } or nil,
    terminate = { per_second = #sbs / stop_wall * 1000, p50_ms = pct(stop_ms, 0.5), p99_ms = pct(stop_ms, 0.99) },
    left_running = left.supervisors + left.processes,
  }

  -- reference: COUNT bwrap + python3 REPLs, CONCURRENCY started at a time
  local repls = {}
  local repl_ms, repl_wall = pooled(COUNT, CONCURRENCY, function(i) repls[i] = start_repl() end)
  local repl_roots = {}
  for i, p in ipairs(repls) do repl_roots[i] = p.pid end
  results.bwrap_idle = mean_memory(repl_roots)
  for _, p in ipairs(repls) do stop_repl(p) end

  -- create throughput, interleaved: the two phases above run one after the other, and on a shared
  -- machine the load moves between them; here rounds of CHUNK creates (then their terminates) and
  -- CHUNK REPL starts (then their ends) alternate, and each side's rate is its creates over the
  -- time its creates took
  local walls = { glsb = 0, bwrap = 0 }
  for _ = 1, ROUNDS do
    local made = {}
    local _, w = pooled(CHUNK, CONCURRENCY, function(i) made[i] = glsb.create("local") end)
    walls.glsb = walls.glsb + w
    pooled(CHUNK, CONCURRENCY, function(i) made[i]:terminate() end)
    local started = {}
    _, w = pooled(CHUNK, CONCURRENCY, function(i) started[i] = start_repl() end)
    walls.bwrap = walls.bwrap + w
    for _, p in ipairs(started) do stop_repl(p) end
  end
  results.interleaved = { rounds = ROUNDS, chunk = CHUNK, glsb_per_second = ROUNDS * CHUNK / walls.glsb * 1000,
    bwrap_per_second = ROUNDS * CHUNK / walls.bwrap * 1000 }
  results.bwrap = { create = { per_second = COUNT / repl_wall * 1000, p50_ms = pct(repl_ms, 0.5),
    p99_ms = pct(repl_ms, 0.99), wall_ms = repl_wall } }
end)

local g, b = results.glsb, results.bwrap
local gi, bi = results.glsb_idle, results.bwrap_idle
local left = results.left_after_terminate
results.summary = {
  { figure = ("local: %d live sandboxes, PSS per idle sandbox"):format(COUNT), value = gi.pss_kb / 1024, unit = "MiB",
    reference = "goal (issue 26)", reference_value = 3.5 },
  { figure = ("local: %d live sandboxes, PSS per idle sandbox"):format(COUNT), value = gi.pss_kb / 1024, unit = "MiB",
    reference = "bwrap + python3 REPL, same count", reference_value = bi.pss_kb / 1024 },
  { figure = ("local: create throughput, %d at a time (2 cores), interleaved rounds of %d"):format(CONCURRENCY,
    CHUNK), value = results.interleaved.glsb_per_second, unit = "/s",
    reference = "bwrap + python3 REPL starts, same rounds", reference_value = results.interleaved.bwrap_per_second,
    higher_is_better = true },
  { figure = ("local: execute_code on %d live sandboxes at once, p99"):format(COUNT), value = g.calls.p99_ms,
    unit = "ms", reference = "p50 of the same calls", reference_value = g.calls.p50_ms },
  { figure = "local: creates that failed", value = #results.create_failures, unit = "creates",
    reference = "creates made", reference_value = COUNT },
  { figure = "local: left after terminating all (supervisors + processes + workspaces)",
    value = left.supervisors + left.processes + left.workspaces, unit = "", reference = "sandboxes terminated",
    reference_value = #results.create_failures < COUNT and COUNT - #results.create_failures or 0 },
}

if g.calls_100 then
  table.insert(results.summary, 5, { figure = ("local: execute_code on 100 of %d live sandboxes at once, p99"):format(
    COUNT), value = g.calls_100.p99_ms, unit = "ms", reference = "p50 of the same calls",
    reference_value = g.calls_100.p50_ms })
end

local function names(m)
  local parts = {}
  for k, v in pairs(m.pss_kb_by_process) do parts[#parts + 1] = ("%s %.2f"):format(k, v / 1024) end
  table.sort(parts)
  return table.concat(parts, ", ")
end
local md = {
  ("%d live local sandboxes (created %d at a time) beside %d bwrap + python3 REPLs, this machine (%s)"):format(
    COUNT, CONCURRENCY, COUNT, results.date), "",
  "| what | glsb local | bwrap + python3 REPL |", "|---|---:|---:|",
  ("| create throughput | %.1f /s | %.1f /s |"):format(g.create.per_second, b.create.per_second),
  ("| create p50 / p99 | %.1f / %.1f ms | %.1f / %.1f ms |"):format(g.create.p50_ms, g.create.p99_ms, b.create.p50_ms,
    b.create.p99_ms),
  ("| create throughput, interleaved (%d rounds of %d) | %.1f /s | %.1f /s |"):format(ROUNDS, CHUNK,
    results.interleaved.glsb_per_second, results.interleaved.bwrap_per_second),
  ("| PSS per idle sandbox | %.2f MiB | %.2f MiB |"):format(gi.pss_kb / 1024, bi.pss_kb / 1024),
  ("| RSS per idle sandbox | %.2f MiB | %.2f MiB |"):format(gi.rss_kb / 1024, bi.rss_kb / 1024),
  ("| processes per sandbox | %.1f | %.1f |"):format(gi.processes, bi.processes),
  ("| PSS after one execute_code | %.2f MiB | |"):format(results.glsb_used.pss_kb / 1024),
  ("| execute_code on all at once p50 / p99 | %.1f / %.1f ms | |"):format(g.calls.p50_ms, g.calls.p99_ms),
  ("| terminate throughput | %.1f /s | |"):format(g.terminate.per_second),
  "",
  "PSS per idle sandbox by process (MiB): glsb " .. names(gi) .. "; bwrap " .. names(bi),
  ("left after terminating all: %d supervisors, %d processes of the sandboxes' users, %d workspaces"):format(
    results.left_after_terminate.supervisors, results.left_after_terminate.processes,
    results.left_after_terminate.workspaces),
}
if g.calls_100 then -- after the row of the calls on all
  for i, line in ipairs(md) do
    if line:find("^| execute_code on all at once") then
      table.insert(md, i + 1, ("| execute_code on 100 of them at once (5 rounds) p50 / p99 | %.1f / %.1f ms | |")
        :format(g.calls_100.p50_ms, g.calls_100.p99_ms))
      break
    end
  end
end
if #results.create_failures > 0 then
  md[#md + 1] = ("%d of %d creates failed; the first: %s"):format(#results.create_failures, COUNT,
    results.create_failures[1])
end
local text = table.concat(md, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p " .. here .. "/results")
local f = assert(io.open(here .. "/results/scale_local.md", "w"))
f:write(text)
f:close()
f = assert(io.open(here .. "/results/scale_local.json", "w"))
f:write(cjson.encode(results), "\n")
f:close()
