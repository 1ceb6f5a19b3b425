-- bench/mcp_roundtrip.lua: the MCP server's own cost. `tools/call execute_code print(1)` on a warm local
-- sandbox through the official MCP client (@modelcontextprotocol/sdk over stdio, bench/mcp_roundtrip.mjs),
-- through raw JSON-RPC lines (no SDK: the server alone), and the same call made directly from Lua
-- (sb:execute_code) in this process, interleaved call by call so all three see the same machine load.
--
--   make && (cd spec && npm ci)                 # once
--   build/glsb-lua bench/mcp_roundtrip.lua [N]  # default N = 500 of each
--
-- The server's overhead is a p50 through MCP minus the direct p50 (goal of issue 23: under 0.3 ms); the
-- CPU each server process spends per call is beside this process's per direct call. Writes
-- bench/results/mcp_roundtrip.{json,md} and prints the table. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
local root = here .. "/.."
local N = tonumber(arg and arg[1]) or 500
local WARMUP = 50
local GOAL_MS = 0.3

local percentile, median = measure.percentile, measure.median

local node, sb
local ok, err = pcall(function()
  sb = glsb.create("local", { timeout = 3600 })
  node = assert(process.spawn { argv = { "node", here .. "/mcp_roundtrip.mjs", root .. "/build/glsb-lua" },
    stdin = "pipe", stdout = "pipe", stderr = "inherit" })
  local function ask(line)
    return loop.run(function()
      if line then assert(node:write(line .. "\n", loop.now() + 30)) end
      local got = node:read_line("stdout", loop.now() + 60)
      if not got then error("the client side stopped answering") end
      return cjson.decode(got)
    end)
  end
  local ready = ask()
  assert(ready.ready, "client side not ready")

  local function direct()
    local t0 = loop.now()
    local r = sb:execute_code("print(1)")
    local ms = (loop.now() - t0) * 1000
    assert(r.status == "success" and r.stdout == "1\n", "direct execute_code failed: " .. tostring(r))
    return ms
  end
  local function through(kind)
    local r = ask(kind)
    assert(r.ok, kind .. " call failed")
    return r.ms
  end

  for _ = 1, WARMUP do direct() through("sdk") through("raw") end
  local d, s, w = {}, {}, {}
  local cpu0, self0 = ask("cpu"), measure.cpu_ms()
  local self_ms = 0
  for i = 1, N do
    -- rotate the order, so that no kind always follows another
    local order = ({ { "d", "s", "w" }, { "s", "w", "d" }, { "w", "d", "s" } })[i % 3 + 1]
    for _, k in ipairs(order) do
      if k == "d" then
        local c0 = measure.cpu_ms()
        d[#d + 1] = direct()
        self_ms = self_ms + measure.cpu_ms() - c0
      elseif k == "s" then s[#s + 1] = through("sdk")
      else w[#w + 1] = through("raw") end
    end
  end
  local cpu1, self1 = ask("cpu"), measure.cpu_ms()

  local function row(name, xs)
    return { impl = name, n = #xs, median_ms = median(xs), p10_ms = percentile(xs, 0.1), p90_ms = percentile(xs, 0.9),
      p99_ms = percentile(xs, 0.99) }
  end
  local rows = {
    row("direct: sb:execute_code from Lua", d),
    row("MCP: official client @modelcontextprotocol/sdk " .. tostring(ready.version), s),
    row("MCP: raw JSON-RPC lines (no SDK)", w),
  }
  local over_sdk = rows[2].median_ms - rows[1].median_ms
  local over_raw = rows[3].median_ms - rows[1].median_ms
  -- CPU per call: each server made N calls (plus nothing else between the two readings)
  local server_cpu_sdk = (cpu1.sdk - cpu0.sdk) * 1000 / N
  local server_cpu_raw = (cpu1.raw - cpu0.raw) * 1000 / N
  local direct_cpu = self_ms / N
  local out = {
    benchmark = "MCP tools/call execute_code print(1) round trip", n = N, warmup = WARMUP,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"), interleaved = true, results = rows,
    overhead_ms = { official_client = over_sdk, raw_lines = over_raw },
    cpu_ms_per_call = { server_via_sdk = server_cpu_sdk, server_via_raw = server_cpu_raw, direct = direct_cpu,
      bench_process_total = (self1 - self0) / N },
    summary = {
      { figure = "MCP: tools/call execute_code print(1), official client, p50", value = rows[2].median_ms, unit = "ms",
        reference = "the same call direct from Lua, p50", reference_value = rows[1].median_ms },
      { figure = "MCP: server overhead (official client - direct), p50", value = over_sdk, unit = "ms",
        reference = "goal (issue 23)", reference_value = GOAL_MS },
      { figure = "MCP: server overhead (raw JSON-RPC lines - direct), p50", value = over_raw, unit = "ms",
        reference = "goal (issue 23)", reference_value = GOAL_MS },
      { figure = "MCP: server CPU per tools/call (raw lines)", value = server_cpu_raw, unit = "ms",
        reference = "this process's CPU per direct call", reference_value = direct_cpu },
    },
  }
  os.execute("mkdir -p " .. here .. "/results")
  local f = assert(io.open(here .. "/results/mcp_roundtrip.json", "w"))
  f:write(cjson.encode(out), "\n")
  f:close()
  local lines = {
    string.format("MCP tools/call execute_code print(1), warm local sandbox, %d calls each (after %d warm-up), "
      .. "interleaved", N, WARMUP), "",
    "| path | p50 ms | p10 ms | p90 ms | p99 ms |", "|---|---:|---:|---:|---:|",
  }
  for _, r in ipairs(rows) do
    lines[#lines + 1] = string.format("| %s | %.3f | %.3f | %.3f | %.3f |", r.impl, r.median_ms, r.p10_ms, r.p90_ms,
      r.p99_ms)
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = string.format("server overhead, p50: %.3f ms through the official client, %.3f ms through raw "
    .. "lines (goal %.1f ms)", over_sdk, over_raw, GOAL_MS)
  lines[#lines + 1] = string.format("CPU per call: server %.3f ms (official client) / %.3f ms (raw lines); direct "
    .. "call %.3f ms", server_cpu_sdk, server_cpu_raw, direct_cpu)
  local md = table.concat(lines, "\n") .. "\n"
  f = assert(io.open(here .. "/results/mcp_roundtrip.md", "w"))
  f:write(md)
  f:close()
  io.write(md, "written: bench/results/mcp_roundtrip.json\n")
end)
if node then
  node:close_stdin()
  local st = loop.run(function() return node:wait(loop.now() + 15) end)
  if not st then node:kill("KILL") end
  node:close()
end
if sb then pcall(sb.terminate, sb) end
if not ok then io.stderr:write("bench failed: ", tostring(err), "\n") os.exit(1) end
