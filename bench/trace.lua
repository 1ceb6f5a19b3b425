-- bench/trace.lua: what tracing costs the warm local execute round trip, in one run, side by side:
--
--   before   today's library with every tracing seam compiled out (see reference_tree; or a git ref
--            before tracing existed: BENCH_TRACE_REF)
--   off      today's library, tracing not configured (the seams' flag only)
--   queued   today's library, tracing configured, spans made and queued but exported only after the
--            measured calls (schedule delay of an hour): the caller's share of "on"
--   on       today's library, tracing configured, spans exported over OTLP/HTTP to the loopback
--            receiver of spec/support (default batch settings: the exports run on the loop while the
--            calls are made)
--
-- Every round starts one fresh lua5.4 process per contender (in rotating order, one at a time), each
-- with one warm local sandbox making CALLS round trips: a process's own luck (memory layout, CPU,
-- its agent's) shifts its figures by several percent, so each contender gets a new process every
-- round. Tracing on exports every 10 ms (OTEL_BSP_SCHEDULE_DELAY's role, shortened so that exports
-- happen during the measured calls rather than after them). Figures: median and p90 of
-- `execute_code("print(1)")` in milliseconds, to bench/results/trace.json and bench/results/trace.md. Not a test.
--
--   make build/glsb-lua build/glsb-confine && (cd spec && npm ci)
--   build/glsb-lua bench/trace.lua [ROUNDS] [CALLS_PER_ROUND]      # default 20 x 200
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local process = require "glsb.process"
local loop = require "glsb.loop"
local core = require "glsb.core"
local cjson = require "cjson"
local receiver = require "support.otlp_receiver"

local ROUNDS = tonumber(arg and arg[1]) or 20
local CALLS = tonumber(arg and arg[2]) or 200
local ROOT = io.popen("pwd"):read("l")

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  return ok and out or nil
end

-- The reference: today's lua/ and providers/ copied to a temp dir with every tracing seam compiled
-- out (`trace_seam.on` replaced by the constant `false`, which Lua folds away): the code as it runs
-- without tracing in it. BENCH_TRACE_REF=<git ref> takes that commit's lua/ and providers/ instead
-- (with today's C core and glsb-confine: an old ref may not run on them).
local function reference_tree()
  local dir = core.mkdtemp("/tmp/glsb-bench-trace.XXXXXX")
  local ref = os.getenv("BENCH_TRACE_REF")
  if ref then
    local id = sh("git rev-parse --short " .. ref)
    if not id or not sh(("git archive %s lua providers | tar -x -C %s"):format(ref, dir)) then
      return dir, nil, "git archive " .. ref .. " failed"
    end
    return dir, "git " .. id:match("%S+")
  end
  assert(sh(("cp -r lua providers %s/"):format(dir)))
  local files, checks = 0, 0
  for path in sh("find " .. dir .. "/lua -name '*.lua'"):gmatch("[^\n]+") do
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    local out, n = text:gsub("trace_seam%.on", "false")
    if n > 0 then
      files, checks = files + 1, checks + n
      f = assert(io.open(path, "w"))
      f:write(out)
      f:close()
    end
  end
  return dir, ("seams compiled out: %d checks in %d files"):format(checks, files)
end

-- The worker: one warm local sandbox; answers "N" with N round-trip times in ms, "quit" with the
-- tracing stats (or {}).
local WORKER = [[
local lua_dir, mode, endpoint = os.getenv("BENCH_LUA"), os.getenv("BENCH_MODE"), os.getenv("BENCH_ENDPOINT")
package.path = lua_dir .. "/?.lua;" .. lua_dir .. "/?/init.lua;" .. package.path
package.cpath = os.getenv("BENCH_BUILD") .. "/lib/?.so;" .. package.cpath
local glsb = require "glsb"
local loop = require "glsb.loop"
if mode == "on" then glsb.trace.configure { endpoint = endpoint, service_name = "bench", schedule_delay = 0.01 } end
if mode == "queued" then -- spans made and queued; exported only at the end, after the measured calls
  glsb.trace.configure { endpoint = endpoint, service_name = "bench", schedule_delay = 3600, max_queue_size = 100000 }
end
local sb = glsb.create("local")
for _ = 1, 20 do assert(sb:execute_code("print(1)").stdout == "1\n") end
io.write("ready\n")
io.flush()
for line in io.lines() do
  if line == "quit" then break end
  local out = {}
  for i = 1, tonumber(line) do
    local t = loop.now()
    local r = sb:execute_code("print(1)")
    out[i] = string.format("%.4f", (loop.now() - t) * 1000)
    assert(r.stdout == "1\n", tostring(r))
  end
  io.write(table.concat(out, " "), "\n")
  io.flush()
end
sb:terminate()
local stats = {}
if mode ~= "off" then
  glsb.trace.shutdown(10)
  stats = glsb.trace.stats()
end
io.write(require("cjson").encode(stats), "\n")
]]

local function start_worker(name, lua_dir, mode, endpoint)
  local argv = { "env", "BENCH_LUA=" .. lua_dir, "BENCH_MODE=" .. mode, "BENCH_ENDPOINT=" .. (endpoint or ""),
    "BENCH_BUILD=" .. ROOT .. "/build", "GLSB_CONFINE=" .. ROOT .. "/build/glsb-confine",
    "lua5.4", "-e", WORKER }
  local p = assert(process.spawn({ argv = argv, stdin = "pipe", stdout = "pipe", stderr = "inherit" }))
  local line = p:read_line("stdout", loop.now() + 60)
  if line ~= "ready" then
    p:kill("KILL")
    p:wait(loop.now() + 5)
    p:close()
    return nil, name .. " did not start: " .. tostring(line)
  end
  return p
end

-- One round of a contender: a fresh worker, CALLS round trips, its samples added to c.samples; the
-- worker's tracing stats summed into c.trace.
local function round(c, endpoint)
  local p, why = start_worker(c.name, c.lua_dir, c.mode, endpoint)
  if not p then return nil, why end
  assert(p:write(CALLS .. "\n", loop.now() + 10))
  local line = assert(p:read_line("stdout", loop.now() + 120), c.name .. " stopped answering")
  for v in line:gmatch("%S+") do c.samples[#c.samples + 1] = tonumber(v) end
  assert(p:write("quit\n", loop.now() + 10))
  local st = p:read_line("stdout", loop.now() + 30)
  p:wait(loop.now() + 10)
  p:close()
  for k, v in pairs(st and cjson.decode(st) or {}) do c.trace[k] = (c.trace[k] or 0) + v end
  return true
end

local function stats(samples)
  return { n = #samples, median_ms = measure.percentile(samples, 0.5), p90_ms = measure.percentile(samples, 0.9) }
end

local rec = receiver.start()
local ref_dir, ref_id, ref_err = reference_tree()
local ok, err = pcall(function()
  local contenders, notes = {}, {}
  if ref_id then
    contenders[#contenders + 1] = { name = "before", lua_dir = ref_dir .. "/lua", mode = "off" }
  else
    notes[#notes + 1] = "no reference: " .. tostring(ref_err)
  end
  contenders[#contenders + 1] = { name = "off", lua_dir = ROOT .. "/lua", mode = "off" }
  contenders[#contenders + 1] = { name = "queued", lua_dir = ROOT .. "/lua", mode = "queued" }
  contenders[#contenders + 1] = { name = "on", lua_dir = ROOT .. "/lua", mode = "on" }
  for _, c in ipairs(contenders) do c.samples, c.trace = {}, {} end
  for r = 1, ROUNDS do
    for i = 0, #contenders - 1 do
      local c = contenders[(r + i) % #contenders + 1]
      if not c.failed then
        local done, why = round(c, rec.endpoint)
        if not done then
          c.failed = true
          notes[#notes + 1] = why
        end
      end
    end
  end
  local result = { rounds = ROUNDS, calls_per_round = CALLS, date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    reference = ref_id, notes = notes }
  for _, c in ipairs(contenders) do
    if #c.samples > 0 then result[c.name] = stats(c.samples) end
  end
  for _, c in ipairs(contenders) do
    if result[c.name] and c.mode ~= "off" then result[c.name].trace = c.trace end
  end
  result.received_spans = #rec:received().spans -- "queued" and "on" both export to it
  os.execute("mkdir -p bench/results")
  local f = assert(io.open("bench/results/trace.json", "w"))
  f:write(cjson.encode(result), "\n")
  f:close()
  local lines = {
    ("Warm local execute_code(\"print(1)\") round trip, %d rounds x %d calls, ms"):format(ROUNDS, CALLS), "",
    "| contender | median | p90 | vs without |", "|---|---:|---:|---:|",
  }
  local LABEL = { before = "without tracing (" .. tostring(ref_id) .. ")", off = "tracing off",
    queued = "tracing on, export held back (spans made and queued; sent after the calls)",
    on = "tracing on (OTLP to loopback)" }
  local base = result.before and result.before.median_ms
  for _, name in ipairs({ "before", "off", "queued", "on" }) do
    local s = result[name]
    if s then
      lines[#lines + 1] = ("| %s | %.3f | %.3f | %s |"):format(LABEL[name], s.median_ms, s.p90_ms,
        base and ("%+.1f %%"):format((s.median_ms / base - 1) * 100) or "n/a")
    end
  end
  local t = result.on and result.on.trace or {}
  local q = result.queued and result.queued.trace or {}
  lines[#lines + 1] = ""
  local function int(v) return tostring(math.tointeger(v) or v) end
  lines[#lines + 1] = ("tracing on: %s spans exported in %s exports, %s dropped; held back: %s exported at "
    .. "exit, %s dropped; the receiver got %d"):format(int(t.exported), int(t.exports), int(t.dropped),
    int(q.exported), int(q.dropped), result.received_spans)
  for _, n in ipairs(notes) do lines[#lines + 1] = "note: " .. n end
  local md = table.concat(lines, "\n") .. "\n"
  f = assert(io.open("bench/results/trace.md", "w"))
  f:write(md)
  f:close()
  io.write(md)
end)
rec:stop()
if ref_dir then core.rmtree(ref_dir) end
if not ok then error(err, 0) end
