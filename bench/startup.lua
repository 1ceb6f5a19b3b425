-- bench/startup.lua: how long a process takes to start and run one line, glsb-lua beside lua5.4, in
-- the same run, interleaved (so both see the machine's same load); and the whole script a user times
-- (bench/lib/cold_local.lua: require glsb, create a local sandbox, execute_code("print(1)"), terminate)
-- beside bubblewrap + python3 -c 'print(1)'. Figures to bench/results/startup.md and .json. Not a test:
-- nothing passes or fails on a number.
--   build/glsb-lua bench/startup.lua [N]      (N = 200 runs of each, default)
package.path = "bench/?.lua;" .. package.path
local measure = require "lib.measure"
local core = require "glsb.core"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 200
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
local root = core.realpath(here .. "/..")
local glsb_lua = root .. "/build/glsb-lua"
-- plain lua5.4 finds the source tree's modules and core.so the way an installed tree would be found
local env = {}
for _, k in ipairs({ "PATH", "HOME", "LANG" }) do
  if os.getenv(k) then env[#env + 1] = k .. "=" .. os.getenv(k) end
end
env[#env + 1] = ("LUA_PATH=%s/lua/?.lua;%s/lua/?/init.lua;;"):format(root, root)
env[#env + 1] = ("LUA_CPATH=%s/build/lib/?.so;;"):format(root)

-- { name, argv, reference name[, runs every k rounds] } in the order they run within one round
local contenders = {
  { "lua5.4 -e 'print(1)'", { "lua5.4", "-e", "print(1)" } },
  { "glsb-lua -e 'print(1)'", { glsb_lua, "-e", "print(1)" }, "lua5.4 -e 'print(1)'" },
  { "lua5.4 -e 'require \"glsb\"'", { "lua5.4", "-e", "require 'glsb'" } },
  { "glsb-lua -e 'require \"glsb\"'", { glsb_lua, "-e", "require 'glsb'" }, "lua5.4 -e 'require \"glsb\"'" },
  { "glsb-lua -e 'glsb.provider(\"local\")'", { glsb_lua, "-e", "glsb.provider('local')" },
    "glsb-lua -e 'print(1)'" },
  { "glsb-lua -e 'glsb.provider(\"e2b\")'", { glsb_lua, "-e", "glsb.provider('e2b')" },
    "glsb-lua -e 'print(1)'" },
  -- the whole script (bench/lib/cold_local.lua: create, execute_code("print(1)"), terminate) beside the
  -- same work in bubblewrap, every 4th round (a run is some 30 ms)
  { "glsb-lua cold.lua: create local, execute_code(print(1)), terminate",
    { glsb_lua, root .. "/bench/lib/cold_local.lua" }, "bwrap + python3 -c 'print(1)'", 4 },
  { "bwrap + python3 -c 'print(1)'", (function()
    local argv = {}
    for _, w in ipairs(measure.BWRAP) do argv[#argv + 1] = w end
    argv[#argv + 1] = measure.PY
    argv[#argv + 1] = "-c"
    argv[#argv + 1] = "print(1)"
    return argv
  end)(), nil, 4 },
}

-- One run: spawn, wait for the exit (its pidfd), return wall milliseconds.
local function once(argv)
  local t0 = core.now()
  local p = assert(core.spawn({ argv = argv, env = env, stdin = "null", stdout = "null", stderr = "inherit" }))
  local st
  repeat
    st = p:poll()
    if not st then
      local token = core.watch(p:fd("pidfd"), "r")
      core.poll(5)
      core.unwatch(token)
    end
  until st
  local ms = (core.now() - t0) * 1000
  p:close()
  assert(st.code == 0, table.concat(argv, " ") .. " failed")
  return ms
end

local samples = {}
for _, c in ipairs(contenders) do samples[c[1]] = {} end
for _, c in ipairs(contenders) do once(c[2]) end -- warm the page cache
for round = 1, N do
  for _, c in ipairs(contenders) do
    if round % (c[4] or 1) == 0 then
      local s = samples[c[1]]
      s[#s + 1] = once(c[2])
    end
  end
end

local pct = measure.percentile

local rows, json = {}, { n = N, results = {} }
rows[#rows + 1] = "| command | median ms | p90 ms | vs |"
rows[#rows + 1] = "|---|---:|---:|---|"
for _, c in ipairs(contenders) do
  local med, p90 = pct(samples[c[1]], 0.5), pct(samples[c[1]], 0.9)
  local vs = ""
  if c[3] then vs = ("%.2f× %s"):format(med / pct(samples[c[3]], 0.5), c[3]) end
  rows[#rows + 1] = ("| `%s` | %.2f | %.2f | %s |"):format(c[1], med, p90, vs)
  json.results[#json.results + 1] = { command = c[1], median_ms = med, p90_ms = p90, reference = c[3] }
end
local libs = io.popen("ldd " .. glsb_lua .. " | wc -l"):read("l")
rows[#rows + 1] = ""
rows[#rows + 1] = ("N = %d runs each (the whole-script pair every 4th round), interleaved; glsb-lua maps %s "
  .. "shared objects at start (ldd)."):format(N, libs)
json.glsb_lua_shared_objects = tonumber(libs)
-- the goals of issue 26 as rows of make bench's table: loading glsb and a provider within 2 ms of a bare
-- glsb-lua start, and the whole script within 1.2x bubblewrap doing the same
local by = {}
for _, r in ipairs(json.results) do by[r.command] = r end
local bare = by["glsb-lua -e 'print(1)'"].median_ms
json.summary = {}
for _, r in ipairs(json.results) do
  if r.reference and by[r.reference] then
    json.summary[#json.summary + 1] = { figure = "start-up: " .. r.command, value = r.median_ms, unit = "ms",
      reference = r.reference, reference_value = by[r.reference].median_ms }
  end
end
for _, name in ipairs({ "local", "e2b" }) do
  local r = by[("glsb-lua -e 'glsb.provider(\"%s\")'"):format(name)]
  json.summary[#json.summary + 1] = { figure = ("loading glsb and the %s provider, over a bare glsb-lua start"):format(
    name), value = r.median_ms - bare, unit = "ms", reference = "goal (issue 26)", reference_value = 2 }
end
local function over(name) return by[("glsb-lua -e 'glsb.provider(\"%s\")'"):format(name)].median_ms - bare end
rows[#rows + 1] = ("Loading glsb and a provider over a bare glsb-lua start (goal: 2 ms): local %.2f ms, e2b %.2f ms.")
  :format(over("local"), over("e2b"))
local text = table.concat(rows, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p " .. here .. "/results")
local f = assert(io.open(here .. "/results/startup.md", "w"))
f:write(text)
f:close()
f = assert(io.open(here .. "/results/startup.json", "w"))
f:write(cjson.encode(json), "\n")
f:close()
