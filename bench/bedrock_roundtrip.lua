-- bench/bedrock_roundtrip.lua: median execute_code round trip through glsb and through the official
-- AWS SDK (@aws-sdk/client-bedrock-agentcore), against the same AgentCore emulator, side by side in
-- one run (calls interleaved, each side going first half of the time, so both see the same load).
-- Both sides sign every request with SigV4 and the emulator verifies each signature.
--
--   make build/lib/glsb/core.so && (cd spec && npm ci)      # once
--   lua5.4 bench/bedrock_roundtrip.lua [N]                    # default N = 200
--
-- Writes bench/results/bedrock_roundtrip.json and prints a table. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local http = require "glsb.http"
local emulator = require "bedrock.emulator"

local N = tonumber(arg and arg[1]) or 200
local WARMUP = 10
local CODE = "print(1)"

local percentile = measure.percentile

local median = measure.median

local emu = emulator.start()
local node, sb
local ok, err = pcall(function()
  sb = glsb.create("bedrock", emu:opts { timeout = 900 })
  node = assert(process.spawn { argv = { "node", emulator.ROOT .. "/bench/bedrock_roundtrip.mjs", emu.base },
    stdin = "pipe", stdout = "pipe", stderr = "inherit" })
  local function node_line()
    local line = loop.run(function() return node:read_line("stdout", loop.now() + 60) end)
    if not line then error("the SDK side stopped answering") end
    return http.decode_json(line)
  end
  local ready = node_line()
  assert(ready.ready, "SDK side not ready")

  local function glsb_once()
    local t0 = loop.now()
    local r = sb:execute_code(CODE)
    local ms = (loop.now() - t0) * 1000
    assert(r.status == glsb.ExecutionStatus.SUCCESS and r.stdout == "1\n", "glsb execute failed: " .. tostring(r))
    return ms
  end
  local function sdk_once()
    loop.run(function() assert(node:write("go\n", loop.now() + 10)) end)
    local res = node_line()
    assert(res.ok, "SDK executeCode failed")
    return res.ms
  end

  for _ = 1, WARMUP do glsb_once() sdk_once() end
  local g, s = {}, {}
  for i = 1, N do
    if i % 2 == 0 then g[#g + 1] = glsb_once() s[#s + 1] = sdk_once()
    else s[#s + 1] = sdk_once() g[#g + 1] = glsb_once() end
  end

  local rows = {
    { impl = "glsb (Lua SigV4, libcurl)", n = N, median_ms = median(g), p10_ms = percentile(g, 0.1),
      p90_ms = percentile(g, 0.9), min_ms = percentile(g, 0) },
    { impl = "AWS JS SDK " .. tostring(ready.version) .. " (client-bedrock-agentcore)", n = N, median_ms = median(s),
      p10_ms = percentile(s, 0.1), p90_ms = percentile(s, 0.9), min_ms = percentile(s, 0) },
  }
  local out = {
    benchmark = "bedrock execute_code round trip", code = CODE, n = N, warmup = WARMUP,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"), emulator = emu.base, interleaved = true,
    note = "same emulator (every signature verified with @smithy/signature-v4), same session machinery, calls "
      .. "interleaved; both sides keep connections alive",
    results = rows,
  }
  os.execute("mkdir -p " .. emulator.ROOT .. "/bench/results")
  local f = assert(io.open(emulator.ROOT .. "/bench/results/bedrock_roundtrip.json", "w"))
  f:write(http.encode_json(out), "\n")
  f:close()

  print(string.format("Bedrock AgentCore execute_code round trip, %d calls each (after %d warm-up), interleaved, "
    .. "same emulator", N, WARMUP))
  print(string.format("%-52s %10s %10s %10s %10s", "client", "median ms", "p10 ms", "p90 ms", "min ms"))
  for _, r in ipairs(rows) do
    print(string.format("%-52s %10.2f %10.2f %10.2f %10.2f", r.impl, r.median_ms, r.p10_ms, r.p90_ms, r.min_ms))
  end
  print(string.format("ratio glsb/sdk (median): %.2f", rows[1].median_ms / rows[2].median_ms))
  print("written: bench/results/bedrock_roundtrip.json")
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
