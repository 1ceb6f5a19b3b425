-- bench/scale_e2b.lua: N concurrent execute_code calls from one glsb process against the E2B emulator,
-- beside the official E2B JS SDK making the same N calls at once (Promise.all) against the same
-- emulator, rounds alternating between the two so both see the same machine. Not a test.
--
--   make && (cd spec && npm ci)                        # once
--   build/glsb-lua bench/scale_e2b.lua [N] [SANDBOXES] [ROUNDS]    # defaults 1000, 10, 3
--
-- After one unmeasured round per side, call i runs `x = i; x` on sandbox i % SANDBOXES (the emulator
-- runs one kernel per sandbox, cells one at a time, so a call's latency is mostly its wait in that
-- kernel's queue: p50/p99 say how fair and how fast the client keeps the queue fed, the wall time what
-- the emulator can do). Figures per side: calls that came back right, p50/p99 per call, wall time, the
-- client process's CPU time per call and its peak RSS (VmHWM; Node's maxRSS), and for glsb the fds it
-- holds before and after.
-- Writes bench/results/scale_e2b.{json,md}.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local http = require "glsb.http"
local emulator = require "e2b.emulator"

local N = tonumber(arg and arg[1]) or 1000
local SANDBOXES = tonumber(arg and arg[2]) or 10
local ROUNDS = tonumber(arg and arg[3]) or 3
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"

local pct = measure.percentile

local status_kb = measure.status_kb

local cpu_ms = measure.cpu_ms

local open_fds = measure.open_fds

local emu = emulator.start()
local node
local sbs = {}
local ok, err = pcall(function()
  local ready_node
  node = assert(process.spawn { argv = { "node", here .. "/scale_e2b.mjs", emu.base, emu.api_key, tostring(SANDBOXES) },
    stdin = "pipe", stdout = "pipe", stderr = "inherit" })
  local function node_line(timeout)
    local line = loop.run(function() return node:read_line("stdout", loop.now() + (timeout or 300)) end)
    if not line then error("the SDK side stopped answering") end
    return http.decode_json(line)
  end

  glsb.run(function()
    for i = 1, SANDBOXES do sbs[i] = glsb.create("e2b", emu:opts { timeout = 3600 }) end
    for _, sb in ipairs(sbs) do assert(sb:execute_code("x = 0\nx").text == "0") end
  end)
  ready_node = node_line()
  assert(ready_node.ready, "SDK side not ready")

  -- the uncontended round trip, for scale: one call at a time
  local single = {}
  glsb.run(function()
    for i = 1, 100 do
      local t0 = loop.now()
      assert(sbs[i % SANDBOXES + 1]:execute_code("x = 1\nx").text == "1")
      single[#single + 1] = (loop.now() - t0) * 1000
    end
  end)

  local function glsb_round()
    local fds0 = open_fds()
    local cpu0, t0 = cpu_ms(), loop.now()
    local ms, good = {}, 0
    glsb.run(function()
      local tasks = {}
      for i = 1, N do
        tasks[i] = loop.spawn(function()
          local t = loop.now()
          local r = sbs[(i - 1) % SANDBOXES + 1]:execute_code("x = " .. i .. "\nx")
          ms[i] = (loop.now() - t) * 1000
          if r.status == glsb.ExecutionStatus.SUCCESS and r.text == tostring(i) then good = good + 1 end
        end)
      end
      loop.gather(tasks)
    end)
    local wall = (loop.now() - t0) * 1000
    collectgarbage()
    return { ms = ms, ok = good, wall_ms = wall, cpu_ms = cpu_ms() - cpu0, peak_rss_kb = status_kb("VmHWM"),
      fds_before = fds0, fds_after = open_fds() }
  end
  local function sdk_round()
    loop.run(function() assert(node:write("go " .. N .. "\n", loop.now() + 10)) end)
    return node_line()
  end

  -- one unmeasured round each first: the first burst makes the connections and warms Node's JIT
  glsb_round()
  sdk_round()
  local sides = { glsb = {}, sdk = {} }
  for r = 1, ROUNDS do
    if r % 2 == 1 then
      sides.glsb[#sides.glsb + 1] = glsb_round()
      sides.sdk[#sides.sdk + 1] = sdk_round()
    else
      sides.sdk[#sides.sdk + 1] = sdk_round()
      sides.glsb[#sides.glsb + 1] = glsb_round()
    end
  end

  -- per side: all calls of all rounds pooled for p50/p99; the other figures as the median round's
  local function summary(rounds)
    local all, walls, cpus, oks, rss = {}, {}, {}, 0, 0
    for _, r in ipairs(rounds) do
      for _, v in ipairs(r.ms) do all[#all + 1] = v end
      walls[#walls + 1] = r.wall_ms
      cpus[#cpus + 1] = r.cpu_ms / N
      oks = oks + r.ok
      rss = math.max(rss, r.peak_rss_kb)
    end
    return { calls = #all, ok = oks, p50_ms = pct(all, 0.5), p99_ms = pct(all, 0.99), max_ms = pct(all, 1),
      wall_ms = pct(walls, 0.5), cpu_ms_per_call = pct(cpus, 0.5), peak_rss_mb = rss / 1024,
      fds_before = rounds[1].fds_before, fds_after = rounds[#rounds].fds_after }
  end
  local g, s = summary(sides.glsb), summary(sides.sdk)
  local result = { benchmark = "scale_e2b", n = N, sandboxes = SANDBOXES, rounds = ROUNDS,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"), sdk_version = ready_node.version, glsb = g, sdk = s,
    single_p50_ms = pct(single, 0.5) }
  -- the one-table rows (bench/run.lua): figure, value, unit, reference, its value
  result.summary = {
    { figure = ("E2B %d concurrent execute_code: p50"):format(N), value = g.p50_ms, unit = "ms",
      reference = "E2B JS SDK, same calls (Promise.all)", reference_value = s.p50_ms },
    { figure = ("E2B %d concurrent execute_code: p99"):format(N), value = g.p99_ms, unit = "ms",
      reference = "E2B JS SDK, same calls (Promise.all)", reference_value = s.p99_ms },
    { figure = ("E2B %d concurrent execute_code: client CPU per call"):format(N), value = g.cpu_ms_per_call,
      unit = "ms", reference = "E2B JS SDK (node)", reference_value = s.cpu_ms_per_call },
    { figure = ("E2B %d concurrent execute_code: client peak RSS"):format(N), value = g.peak_rss_mb, unit = "MB",
      reference = "goal (issue 16)", reference_value = 64 },
    { figure = ("E2B %d concurrent execute_code: calls completed"):format(N), value = g.ok / ROUNDS, unit = "calls",
      reference = "calls made", reference_value = N },
  }
  os.execute("mkdir -p " .. here .. "/results")
  local f = assert(io.open(here .. "/results/scale_e2b.json", "w"))
  f:write(http.encode_json(result), "\n")
  f:close()
  local lines = {
    ("%d concurrent execute_code calls on %d E2B emulator sandboxes, %d rounds per side, alternating"):format(
      N, SANDBOXES, ROUNDS), "",
    "| client | ok | p50 ms | p99 ms | max ms | wall ms | CPU ms/call | peak RSS MB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  }
  local rows = { { "glsb (one glsb-lua process)", g }, { "E2B JS SDK " .. tostring(ready_node.version), s } }
  for _, row in ipairs(rows) do
    local x = row[2]
    lines[#lines + 1] = ("| %s | %d/%d | %.1f | %.1f | %.1f | %.0f | %.3f | %.1f |"):format(row[1], x.ok, x.calls,
      x.p50_ms, x.p99_ms, x.max_ms, x.wall_ms, x.cpu_ms_per_call, x.peak_rss_mb)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = ("one call at a time (glsb): p50 %.2f ms; glsb fds before a round %d, after the last %d")
    :format(result.single_p50_ms, g.fds_before, g.fds_after)
  local md = table.concat(lines, "\n") .. "\n"
  f = assert(io.open(here .. "/results/scale_e2b.md", "w"))
  f:write(md)
  f:close()
  io.write(md)
end)
if node then
  node:close_stdin()
  local st = loop.run(function() return node:wait(loop.now() + 30) end)
  if not st then node:kill("KILL") end
  node:close()
end
for _, sb in ipairs(sbs) do pcall(sb.terminate, sb) end
emu:stop()
if not ok then io.stderr:write("bench failed: ", tostring(err), "\n") os.exit(1) end
