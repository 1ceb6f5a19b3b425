-- bench/local_files.lua: sb.files calls on a live local sandbox (its file server: src/confine/CONTROL.md,
-- "The file server"), each beside the goal of issue 26 (0.3 ms) and, same run, an execute_command
-- that does the same in the sandbox through the agent. Interleaved call by call. Not a test.
--
--   make
--   build/glsb-lua bench/local_files.lua [N]       # default N = 300 of each
--
-- What is timed, on one sandbox created beforehand (after 20 unmeasured rounds): files:exists of a
-- file, files:read and files:write of 1 KiB, files:list of a folder of 10 files, files:make_dir of a
-- folder that exists, files:remove of a file that is not there; reference: execute_command("cat
-- /home/user/f.txt") (a program started in the sandbox, its output back). Writes
-- bench/results/local_files.{json,md}.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 300
local GOAL = 0.3
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
local pct = measure.percentile

local result
glsb.run(function()
  local sb = glsb.create("local")
  local f = sb.files
  local kib = string.rep("x", 1024)
  f:write("f.txt", kib)
  for i = 1, 10 do f:write("dir/" .. i .. ".txt", "x") end
  local ops = {
    { "exists", function() assert(f:exists("f.txt")) end },
    { "read", function() assert(#f:read("f.txt") == 1024) end },
    { "write", function() f:write("w.txt", kib) end },
    { "list", function() assert(#f:list("dir") == 10) end },
    { "make_dir", function() assert(f:make_dir("dir") == false) end },
    { "remove", function() f:remove("missing.txt") end },
    { "cmd", function()
      local r = sb:execute_command("cat /home/user/f.txt")
      assert(r.status == glsb.ExecutionStatus.SUCCESS and #r.stdout == 1024, tostring(r))
    end },
  }
  local samples = {}
  for _, op in ipairs(ops) do samples[op[1]] = {} end
  local function round(keep)
    for _, op in ipairs(ops) do
      local t0 = loop.now()
      op[2]()
      if keep then table.insert(samples[op[1]], (loop.now() - t0) * 1000) end
    end
  end
  for _ = 1, 20 do round(false) end
  for _ = 1, N do round(true) end
  sb:terminate()
  result = { n = N, goal_ms = GOAL, date = os.date("!%Y-%m-%dT%H:%M:%SZ"), calls = {} }
  for _, op in ipairs(ops) do
    result.calls[op[1]] = { median_ms = pct(samples[op[1]], 0.5), p90_ms = pct(samples[op[1]], 0.9) }
  end
end)

local c = result.calls
result.summary = {}
for _, name in ipairs({ "exists", "read", "write", "list", "make_dir", "remove" }) do
  result.summary[#result.summary + 1] = { figure = ("local: sb.files:%s on a live sandbox"):format(name),
    value = c[name].median_ms, unit = "ms", reference = "goal (issue 26)", reference_value = GOAL }
end
result.summary[#result.summary + 1] = { figure = "local: sb.files:read of 1 KiB", value = c.read.median_ms,
  unit = "ms", reference = "execute_command(\"cat\") of it", reference_value = c.cmd.median_ms }

local lines = { ("sb.files on a live local sandbox, N = %d each, interleaved (ms)"):format(N), "",
  "| call | median | p90 |", "|---|---:|---:|" }
for _, name in ipairs({ "exists", "read", "write", "list", "make_dir", "remove", "cmd" }) do
  lines[#lines + 1] = ("| %s | %.3f | %.3f |"):format(name == "cmd" and "execute_command(\"cat f.txt\")"
    or "files:" .. name, c[name].median_ms, c[name].p90_ms)
end
local text = table.concat(lines, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p " .. here .. "/results")
local out = assert(io.open(here .. "/results/local_files.md", "w"))
out:write(text)
out:close()
out = assert(io.open(here .. "/results/local_files.json", "w"))
out:write(cjson.encode(result), "\n")
out:close()
