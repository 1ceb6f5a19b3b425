-- bench/local.lua: the local provider beside bubblewrap and a bare python3, in one run.
--
--   make build/glsb-lua build/glsb-confine
--   build/glsb-lua bench/local.lua [N]          # default N = 30 cold, 5*N warm
--
-- Three figures, each as a median (and p90) over N runs, interleaved so every
-- contender sees the same machine load:
--   cold  glsb: glsb.create("local") -> execute_code("print(1)") -> terminate
--         bwrap: bwrap (all namespaces, read-only /usr, fresh /proc /dev /tmp) python3 -c 'print(1)'
--         bare: python3 -c 'print(1)'
--   warm  glsb: execute_code("print(1)") on a running sandbox (state kept)
--         bwrap / bare: a persistent python3 inside bwrap / bare, fed `print(1)` on
--         stdin, answer read back (the same round trip, without glsb's protocol)
--   command glsb: execute_command("true") on a running sandbox
--         bwrap / bare: the persistent python3 runs subprocess.run(["true"]) and answers
--         spawn: fork+exec of /bin/true from this process (glsb.process), waited for
-- Writes bench/results/local.json and bench/results/local.md, prints the table. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 30
local WARM = 5 * N
local PY = measure.PY

local BWRAP = measure.BWRAP

local LOOP_PY = "import sys, subprocess\nfor line in sys.stdin:\n    exec(line)\n    sys.stdout.flush()"
local TRUE_PY = "subprocess.run(['true']); print(1)\n"

local function with(prefix, argv)
  local out = {}
  for _, w in ipairs(prefix or {}) do out[#out + 1] = w end
  for _, w in ipairs(argv) do out[#out + 1] = w end
  return out
end

local stats = measure.stats

local timed = measure.timed

local function run_once(argv)
  local out, err, st = process.run(argv, { timeout = 30 })
  if not out or st.code ~= 0 or out ~= "1\n" then
    error("bench: " .. table.concat(argv, " ") .. " failed: " .. tostring(err) .. " " .. tostring(out))
  end
end

-- A persistent interpreter answering `print(1)` lines.
local function repl(prefix)
  local p = assert(process.spawn { argv = with(prefix, { PY, "-u", "-c", LOOP_PY }), stdin = "pipe",
    stdout = "pipe", stderr = "inherit" })
  return {
    ask = function(line_in)
      assert(p:write(line_in or "print(1)\n", loop.now() + 10))
      local line = p:read_line("stdout", loop.now() + 10)
      assert(line == "1", "repl answered " .. tostring(line))
    end,
    close = function()
      p:close_stdin()
      p:wait(loop.now() + 5)
      p:close()
    end,
  }
end

local function have_bwrap()
  local ok = pcall(run_once, with(BWRAP, { PY, "-c", "print(1)" }))
  return ok
end

local results = {}

glsb.run(function()
  local bwrap_ok = have_bwrap()
  local cold = { glsb = {}, bwrap = {}, bare = {} }
  -- warm-up: page cache, python imports
  for _ = 1, 3 do
    local sb = glsb.create("local")
    sb:execute_code("print(1)")
    sb:terminate()
    run_once({ PY, "-c", "print(1)" })
  end
  for _ = 1, N do
    cold.glsb[#cold.glsb + 1] = timed(function()
      local sb = glsb.create("local")
      local r = sb:execute_code("print(1)")
      sb:terminate()
      assert(r.stdout == "1\n", tostring(r))
    end)
    if bwrap_ok then
      cold.bwrap[#cold.bwrap + 1] = timed(function() run_once(with(BWRAP, { PY, "-c", "print(1)" })) end)
    end
    cold.bare[#cold.bare + 1] = timed(function() run_once({ PY, "-c", "print(1)" }) end)
  end

  local warm = { glsb = {}, bwrap = {}, bare = {} }
  local sb = glsb.create("local")
  local rb = bwrap_ok and repl(BWRAP) or nil
  local rp = repl(nil)
  for _ = 1, 10 do sb:execute_code("print(1)") rp.ask() if rb then rb.ask() end end
  for _ = 1, WARM do
    warm.glsb[#warm.glsb + 1] = timed(function()
      local r = sb:execute_code("print(1)")
      assert(r.stdout == "1\n")
    end)
    if rb then warm.bwrap[#warm.bwrap + 1] = timed(rb.ask) end
    warm.bare[#warm.bare + 1] = timed(rp.ask)
  end

  local command = { glsb = {}, bwrap = {}, bare = {}, spawn = {} }
  local function true_cmd(which) return function() which.ask(TRUE_PY) end end
  for _ = 1, 10 do sb:execute_command("true") rp.ask(TRUE_PY) end
  for _ = 1, WARM do
    command.glsb[#command.glsb + 1] = timed(function()
      local r = sb:execute_command("true")
      assert(r.status == "success", tostring(r))
    end)
    if rb then command.bwrap[#command.bwrap + 1] = timed(true_cmd(rb)) end
    command.bare[#command.bare + 1] = timed(true_cmd(rp))
    command.spawn[#command.spawn + 1] = timed(function()
      local _, _, st = process.run({ "/bin/true" }, { timeout = 10 })
      assert(st and st.code == 0)
    end)
  end
  sb:terminate()
  if rb then rb.close() end
  rp.close()

  local sets = { cold = cold, warm = warm, command = command }
  for _, kind in ipairs({ "cold", "warm", "command" }) do
    local set = sets[kind]
    results[kind] = {}
    for _, who in ipairs({ "glsb", "bwrap", "bare", "spawn" }) do
      if set[who] and #set[who] > 0 then results[kind][who] = stats(set[who]) end
    end
  end
  results.bwrap_available = bwrap_ok
end)

local LABEL = {
  glsb = "glsb local (glsb-confine + agent)",
  bwrap = "bubblewrap + python3",
  bare = "bare python3",
  spawn = "fork+exec /bin/true (glsb.process)",
}
local lines = {
  string.format("local provider benchmark, %s, N = %d cold / %d warm and command (ms)",
    os.date("!%Y-%m-%d %H:%M UTC"), N, WARM),
  "",
  "| contender | cold median | cold p90 | warm median | warm p90 | command median | command p90 |",
  "|---|---:|---:|---:|---:|---:|---:|",
}
local function cell(x, fmt) return x and string.format(fmt, x) or "n/a" end
for _, who in ipairs({ "glsb", "bwrap", "bare", "spawn" }) do
  local c, w, k = results.cold[who], results.warm[who], results.command[who]
  lines[#lines + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s |", LABEL[who],
    cell(c and c.median, "%.1f"), cell(c and c.p90, "%.1f"), cell(w and w.median, "%.3f"),
    cell(w and w.p90, "%.3f"), cell(k and k.median, "%.3f"), cell(k and k.p90, "%.3f"))
end
lines[#lines + 1] = ""
lines[#lines + 1] = "cold: glsb = create -> execute_code(\"print(1)\") -> terminate;"
  .. " others = spawn python3 -c 'print(1)' and wait."
lines[#lines + 1] = "warm: glsb = execute_code(\"print(1)\") on a live sandbox;"
  .. " others = one line to a persistent python3."
lines[#lines + 1] = "command: glsb = execute_command(\"true\") on a live sandbox; bwrap / bare = a persistent"
  .. " python3 runs subprocess.run(['true']); spawn = fork+exec of /bin/true from the host."
local text = table.concat(lines, "\n") .. "\n"
io.write(text)

os.execute("mkdir -p bench/results")
local f = io.open("bench/results/local.md", "w")
if f then f:write(text) f:close() end
results.n, results.warm_n, results.date = N, WARM, os.date("!%Y-%m-%dT%H:%M:%SZ")
f = io.open("bench/results/local.json", "w")
if f then f:write(cjson.encode(results), "\n") f:close() end
