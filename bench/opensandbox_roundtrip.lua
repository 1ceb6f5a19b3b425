-- bench/opensandbox_roundtrip.lua: median execute_command round trip ("echo 1") through glsb and
-- through the official OpenSandbox JS SDK (@alibaba-group/opensandbox, commands.run), against the same
-- OpenSandbox emulator, side by side in one run (calls interleaved, so both see the same load).
--
--   make build/lib/glsb/core.so && (cd spec && npm ci)      # once
--   lua5.4 bench/opensandbox_roundtrip.lua [N]                # default N = 200
--
-- Two phases: execd's stream-close grace as newer execd builds have it (200 ms after the last event:
-- the SDK reads to EOF, glsb stops at the event that ends the command), then no grace (the transport
-- and the emulator alone). Writes bench/results/opensandbox_roundtrip.json and prints a table. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local http = require "glsb.http"
local emulator = require "opensandbox.emulator"

local N = tonumber(arg and arg[1]) or 200
local WARMUP = 10
local COMMAND = "echo 1"

local percentile = measure.percentile

local median = measure.median

local emu = emulator.start()
local node, sb
local ok, err = pcall(function()
  sb = glsb.create("opensandbox", emu:opts { timeout = 3600 })
  node = assert(process.spawn { argv = { "node", emulator.ROOT .. "/bench/opensandbox_roundtrip.mjs", emu.base,
    emu.api_key }, stdin = "pipe", stdout = "pipe", stderr = "inherit" })
  local function node_line()
    local line = loop.run(function() return node:read_line("stdout", loop.now() + 60) end)
    if not line then error("the SDK side stopped answering") end
    return http.decode_json(line)
  end
  local ready = node_line()
  assert(ready.ready, "SDK side not ready")

  local function glsb_once()
    local t0 = loop.now()
    local r = sb:execute_command(COMMAND)
    local ms = (loop.now() - t0) * 1000
    assert(r.status == glsb.ExecutionStatus.SUCCESS and r.stdout == "1\n", "glsb execute failed: " .. tostring(r))
    return ms
  end
  local function sdk_once()
    loop.run(function() assert(node:write("go\n", loop.now() + 10)) end)
    local res = node_line()
    assert(res.ok, "SDK commands.run failed")
    return res.ms
  end

  local rows = {}
  for _, grace in ipairs({ 200, 0 }) do
    emu:config { graceMs = grace }
    for _ = 1, WARMUP do glsb_once() sdk_once() end
    local g, s = {}, {}
    for i = 1, N do
      if i % 2 == 0 then g[#g + 1] = glsb_once() s[#s + 1] = sdk_once()
      else s[#s + 1] = sdk_once() g[#g + 1] = glsb_once() end
    end
    rows[#rows + 1] = { impl = "glsb (Lua, libcurl)", grace_ms = grace, n = N, median_ms = median(g),
      p10_ms = percentile(g, 0.1), p90_ms = percentile(g, 0.9), min_ms = percentile(g, 0) }
    rows[#rows + 1] = { impl = "OpenSandbox JS SDK " .. tostring(ready.version), grace_ms = grace, n = N,
      median_ms = median(s), p10_ms = percentile(s, 0.1), p90_ms = percentile(s, 0.9), min_ms = percentile(s, 0) }
  end

  local out = {
    benchmark = "opensandbox execute_command round trip", command = COMMAND, n = N, warmup = WARMUP,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"), emulator = emu.base, interleaved = true,
    note = "same emulator, same machine, calls interleaved; grace_ms = how long execd keeps a command stream "
      .. "open after its last event (the SDK reads to EOF; glsb stops at execution_complete / error)",
    results = rows,
  }
  os.execute("mkdir -p " .. emulator.ROOT .. "/bench/results")
  local f = assert(io.open(emulator.ROOT .. "/bench/results/opensandbox_roundtrip.json", "w"))
  f:write(http.encode_json(out), "\n")
  f:close()

  print(string.format("OpenSandbox execute_command (%q) round trip, %d calls each (after %d warm-up), interleaved",
    COMMAND, N, WARMUP))
  print(string.format("%-34s %9s %10s %10s %10s %10s", "client", "grace ms", "median ms", "p10 ms", "p90 ms", "min ms"))
  for _, r in ipairs(rows) do
    print(string.format("%-34s %9d %10.2f %10.2f %10.2f %10.2f", r.impl, r.grace_ms, r.median_ms, r.p10_ms, r.p90_ms,
      r.min_ms))
  end
  print("written: bench/results/opensandbox_roundtrip.json")
end)
if node then
  node:close_stdin()
  local st = loop.run(function() return node:wait(loop.now() + 15) end)
  if not st then node:kill("KILL") end
  node:close()
end
if sb then pcall(sb.terminate, sb) end
emu:stop()
if not ok then io.stderr:write("bench failed: ", tostring(err), "\n") os.exit(1) end
