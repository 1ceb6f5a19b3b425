-- bench/local_command.lua: execute_command("true") on a live local sandbox beside a plain fork+exec of
-- /bin/true from the same process, interleaved run by run. Not a test.
--
--   make
--   build/glsb-lua bench/local_command.lua [N]       # default N = 200
--
-- glsb: sb:execute_command("true") on one sandbox created beforehand (after 10 unmeasured calls), the
-- whole call: a request to the sandbox's agent, which starts the command inside the sandbox (op "cmd"; a
-- plain word like `true` runs without bash: providers/local/PROTOCOL.md), and its result coming back.
-- Reference: core.spawn of /bin/true and waiting for its exit (posix_spawn, no confinement).
-- Writes bench/results/local_command.{json,md}.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local core = require "glsb.core"
local loop = require "glsb.loop"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 200
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"

local pct = measure.percentile

local function fork_exec_true()
  local t0 = loop.now()
  local p = assert(core.spawn({ argv = { "/bin/true" }, stdin = "null", stdout = "null", stderr = "null" }))
  local st = p:poll()
  while not st do
    loop.wait(p.exit_token, loop.now() + 10)
    st = p:poll()
  end
  p:close()
  assert(st.code == 0)
  return (loop.now() - t0) * 1000
end

local result
glsb.run(function()
  local sb = glsb.create("local")
  local function glsb_true()
    local t0 = loop.now()
    local r = sb:execute_command("true")
    local ms = (loop.now() - t0) * 1000
    assert(r.status == glsb.ExecutionStatus.SUCCESS and r.code == 0, tostring(r))
    return ms
  end
  for _ = 1, 10 do glsb_true() fork_exec_true() end
  local g, f = {}, {}
  for i = 1, N do
    if i % 2 == 0 then g[#g + 1] = glsb_true() f[#f + 1] = fork_exec_true()
    else f[#f + 1] = fork_exec_true() g[#g + 1] = glsb_true() end
  end
  sb:terminate()
  result = { n = N, date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    glsb = { median_ms = pct(g, 0.5), p90_ms = pct(g, 0.9) },
    fork_exec = { median_ms = pct(f, 0.5), p90_ms = pct(f, 0.9) } }
end)
result.summary = {
  { figure = "local: execute_command(\"true\") on a live sandbox", value = result.glsb.median_ms, unit = "ms",
    reference = "fork+exec of /bin/true", reference_value = result.fork_exec.median_ms },
}
local text = table.concat({
  ("execute_command(\"true\") on a live local sandbox, N = %d, interleaved (ms)"):format(N), "",
  "| what | median | p90 |", "|---|---:|---:|",
  ("| glsb execute_command(\"true\") | %.2f | %.2f |"):format(result.glsb.median_ms, result.glsb.p90_ms),
  ("| fork+exec /bin/true | %.2f | %.2f |"):format(result.fork_exec.median_ms, result.fork_exec.p90_ms),
}, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p " .. here .. "/results")
local f = assert(io.open(here .. "/results/local_command.md", "w"))
f:write(text)
f:close()
f = assert(io.open(here .. "/results/local_command.json", "w"))
f:write(cjson.encode(result), "\n")
f:close()
