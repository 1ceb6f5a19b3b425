-- bench/run.lua: `make bench` runs the benchmarks in bench/ one after the other (each writes its own figures
-- to bench/results/ and prints its own table), then prints ONE table: every figure beside its reference,
-- measured in the same run, and their ratio; written to bench/results/summary.{md,json}. Not a test:
-- nothing here passes or fails on a number.
--
--   build/glsb-lua bench/run.lua [NAME...]        # make bench [ONLY="startup scale_e2b"]
--
-- NAME is a script's name without .lua; without names every bench/*.lua runs (about 6 minutes on a 2-core
-- machine; pool_e2b and pool_local get smaller counts than their defaults to stay there). A script lists
-- its figures in its JSON file as `summary`, an array of {figure, value, unit, reference, reference_value
-- [, higher_is_better]}; for the scripts that do not (yet), the table below reads their own JSON. A script
-- that fails, or whose figures are missing, gets a row saying so.
local process = require "glsb.process"
local cjson = require "cjson"

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
local interp = arg and arg[-1] or "lua5.4"
local results_dir = here .. "/results"

local function row(figure, value, unit, reference, reference_value, higher_is_better)
  return { figure = figure, value = value, unit = unit, reference = reference, reference_value = reference_value,
    higher_is_better = higher_is_better }
end

-- name -> { args = the arguments that keep `make bench` near its budget, rows = function(json) -> rows }
local BENCHES = {
  startup = { rows = function(j)
    local by, out = {}, {}
    for _, r in ipairs(j.results) do by[r.command] = r end
    for _, r in ipairs(j.results) do
      if r.reference and by[r.reference] then
        out[#out + 1] = row("start-up: " .. r.command, r.median_ms, "ms", r.reference, by[r.reference].median_ms)
      end
    end
    return out
  end },
  ["local"] = { rows = function(j)
    local out = {}
    if j.cold and j.cold.glsb and j.cold.bwrap then
      out[#out + 1] = row("local cold: create, execute_code(print(1)), terminate", j.cold.glsb.median, "ms",
        "bwrap + python3 -c 'print(1)'", j.cold.bwrap.median)
    end
    if j.warm and j.warm.glsb and j.warm.bare then
      out[#out + 1] = row("local warm: execute_code(print(1))", j.warm.glsb.median, "ms",
        "a line to a persistent python3", j.warm.bare.median)
    end
    if j.command and j.command.glsb and j.command.spawn then
      out[#out + 1] = row("local command: execute_command(\"true\")", j.command.glsb.median, "ms",
        "fork+exec of /bin/true", j.command.spawn.median)
    end
    return out
  end },
  local_upload = { rows = function(j)
    local out = {
      row(("local upload of %d MB"):format(j.mb), j.upload.median, "ms", "cp of the same file", j.cp.median),
    }
    if j.cp_tmpfs then -- the sandbox's /files is a tmpfs: the same copy into one
      out[#out + 1] = row(("local upload of %d MB"):format(j.mb), j.upload.median, "ms",
        "cp of the same file to a tmpfs", j.cp_tmpfs.median)
    end
    out[#out + 1] = row(("local download of %d MB"):format(j.mb), j.download.median, "ms", "cp of the same file",
      j.cp.median)
    return out
  end },
  e2b_roundtrip = { rows = function(j)
    return { row("E2B execute_code round trip", j.results[1].median_ms, "ms", j.results[2].impl,
      j.results[2].median_ms) }
  end },
  opensandbox_roundtrip = { rows = function(j)
    local out, by = {}, {}
    for _, r in ipairs(j.results) do
      by[r.grace_ms] = by[r.grace_ms] or {}
      table.insert(by[r.grace_ms], r)
    end
    for _, grace in ipairs({ 200, 0 }) do
      local pair = by[grace]
      if pair and pair[2] then
        out[#out + 1] = row(("OpenSandbox execute_command round trip (execd grace %d ms)"):format(grace),
          pair[1].median_ms, "ms", pair[2].impl, pair[2].median_ms)
      end
    end
    return out
  end },
  bedrock_roundtrip = { rows = function(j)
    return { row("Bedrock AgentCore execute_code round trip", j.results[1].median_ms, "ms", j.results[2].impl,
      j.results[2].median_ms) }
  end },
  http_roundtrip = { rows = function(j)
    return { row("HTTP GET round trip, kept-alive loopback", j.glsb.median_ms, "ms", "Node fetch (undici)",
      j.node_fetch.median_ms) }
  end },
  -- issue 26: a thousand live local sandboxes (and as many bwrap + python3 REPLs), 4 created at a time
  scale_local = { args = { "1000", "4" } },
  pool_local = { args = { "200", "20", "600" }, rows = function(j)
    local out = { row("pool (local): acquire + execute_code(print(1)), p50", j.warm.p50, "ms",
      "bare python3 -c 'print(1)'", j.bare.p50) }
    if j.steady then
      out[#out + 1] = row(("pool (local): acquire at %d/s over a pool of 16, p99"):format(j.rate), j.steady.p99, "ms",
        "the same acquires, p50", j.steady.p50)
    end
    return out
  end },
  pool_e2b = { args = { "50" }, rows = function(j)
    return {
      row("pool (E2B): acquire through Redis (TCP), p50", j.redis_tcp.p50, "ms", "memory store", j.memory.p50),
      row("pool (E2B): acquire of another process's sandbox, p50", j.redis_other_process.p50, "ms", "memory store",
        j.memory.p50),
    }
  end },
  trace = { rows = function(j)
    local base = j.before
    if not base then return {} end
    local out = {}
    if j.off then out[#out + 1] = row("tracing off: warm local execute_code", j.off.median_ms, "ms",
      "tracing compiled out", base.median_ms) end
    if j.on then out[#out + 1] = row("tracing on (OTLP): warm local execute_code", j.on.median_ms, "ms",
      "tracing compiled out", base.median_ms) end
    return out
  end },
}
-- the order they run in: quick and quiet ones first; ones that start their own servers after
local ORDER = { "startup", "local", "local_command", "local_files", "local_upload", "http_roundtrip",
  "e2b_roundtrip", "bedrock_roundtrip", "opensandbox_roundtrip", "mcp_roundtrip", "interpreter", "pool_local",
  "pool_e2b", "trace", "scale_http", "scale_e2b", "scale_local" }

local function scripts_here()
  local found = {}
  local p = assert(io.popen("ls " .. here .. "/*.lua"))
  for path in p:lines() do
    local name = path:match("([^/]+)%.lua$")
    if name ~= "run" then found[name] = path end
  end
  p:close()
  return found
end

local found = scripts_here()
local names = {}
if arg and #arg > 0 then
  for _, a in ipairs(arg) do
    for name in a:gmatch("[^%s,]+") do
      if not found[name] then
        io.stderr:write("bench: no bench/", name, ".lua (have: ")
        local have = {}
        for n in pairs(found) do have[#have + 1] = n end
        table.sort(have)
        io.stderr:write(table.concat(have, " "), ")\n")
        os.exit(2)
      end
      names[#names + 1] = name
    end
  end
else
  local seen = {}
  for _, name in ipairs(ORDER) do
    if found[name] then names[#names + 1] = name; seen[name] = true end
  end
  local rest = {}
  for name in pairs(found) do if not seen[name] then rest[#rest + 1] = name end end
  table.sort(rest)
  for _, name in ipairs(rest) do names[#names + 1] = name end
end

local function read_json(name)
  local f = io.open(results_dir .. "/" .. name .. ".json")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local ok, j = pcall(cjson.decode, (text:match("^%s*(.-)%s*$")))
  return ok and j or nil
end

local function clock() return require("glsb.core").now() end

os.execute("mkdir -p " .. results_dir)
local table_rows, runs, failed = {}, {}, 0
for _, name in ipairs(names) do
  local spec = BENCHES[name] or {}
  local argv = { interp, found[name] }
  for _, a in ipairs(spec.args or {}) do argv[#argv + 1] = a end
  io.write("== ", table.concat(argv, " ", 2), "\n")
  io.flush()
  os.remove(results_dir .. "/" .. name .. ".json") -- a figure in the table is one from this run
  local t0 = clock()
  local proc = assert(process.spawn({ argv = argv, stdin = "null", stdout = "inherit", stderr = "inherit" }))
  local st = proc:wait()
  proc:close()
  local seconds = clock() - t0
  local run = { name = name, seconds = seconds, exit = st.code or ("signal " .. tostring(st.signal)) }
  runs[#runs + 1] = run
  local j = read_json(name)
  local rows
  if st.code ~= 0 then
    failed = failed + 1
    rows = { { figure = name .. ": did not finish (" .. (st.code and "exit " .. st.code or "signal " ..
      tostring(st.signal)) .. ")" } }
  elseif not j then
    rows = { { figure = name .. ": wrote no bench/results/" .. name .. ".json" } }
  elseif type(j.summary) == "table" then
    rows = j.summary
  elseif spec.rows then
    local ok, r = pcall(spec.rows, j)
    rows = ok and r or { { figure = name .. ": its JSON has not the fields run.lua reads (" .. tostring(r) .. ")" } }
  else
    rows = { { figure = name .. ": no summary in its JSON" } }
  end
  for _, r in ipairs(rows) do
    r.bench = name
    table_rows[#table_rows + 1] = r
  end
end

local function fmt(v, unit)
  if type(v) ~= "number" then return "" end
  local s
  if math.abs(v) >= 100 then s = ("%.0f"):format(v)
  elseif math.abs(v) >= 10 then s = ("%.1f"):format(v)
  elseif math.abs(v) >= 1 then s = ("%.2f"):format(v)
  else s = ("%.3f"):format(v) end
  return unit and (s .. " " .. unit) or s
end

local lines = {
  ("glsb benchmarks, %s, one run on this machine (%s)"):format(os.date("!%Y-%m-%d %H:%M UTC"),
    io.popen("nproc"):read("l") .. " cores"),
  "",
  "| bench | figure | glsb | reference | reference value | ratio |",
  "|---|---|---:|---|---:|---:|",
}
for _, r in ipairs(table_rows) do
  local ratio = ""
  if type(r.value) == "number" and type(r.reference_value) == "number" and r.reference_value ~= 0 then
    ratio = ("%.2f×"):format(r.value / r.reference_value)
    if r.higher_is_better then ratio = ratio .. " (higher is better)" end
  end
  lines[#lines + 1] = ("| %s | %s | %s | %s | %s | %s |"):format(r.bench, r.figure, fmt(r.value, r.unit),
    r.reference or "", fmt(r.reference_value, r.unit), ratio)
end
lines[#lines + 1] = ""
local total = 0
local took = {}
for _, run in ipairs(runs) do
  total = total + run.seconds
  took[#took + 1] = ("%s %.0f s"):format(run.name, run.seconds)
end
lines[#lines + 1] = ("ratio = glsb / reference (below 1 is faster or smaller unless marked). %d scripts in %.0f s: %s.")
  :format(#runs, total, table.concat(took, ", "))
lines[#lines + 1] = "Each script's own table and details: bench/results/<name>.md / .json."
local text = table.concat(lines, "\n") .. "\n"
io.write("\n", text)
local f = assert(io.open(results_dir .. "/summary.md", "w"))
f:write(text)
f:close()
f = assert(io.open(results_dir .. "/summary.json", "w"))
f:write(cjson.encode({ date = os.date("!%Y-%m-%dT%H:%M:%SZ"), rows = table_rows, runs = runs }), "\n")
f:close()
io.write(("bench: %d scripts, %d did not finish; table in %s/summary.md\n"):format(#runs, failed, results_dir))
os.exit(failed == 0 and 0 or 1)
