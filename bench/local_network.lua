-- bench/local_network.lua: what a network of the sandbox's own costs at start (issue 25 §7). A cold
-- create -> execute_code("print(1)") -> terminate, medians over N runs interleaved so each contender
-- sees the same load:
--   offline   network = false (a net namespace with only a loopback)
--   network   network = true (its own net namespace, user-mode networking from slirp4netns, the
--             nftables rules that keep the host out)
--   filtered  network = {allow = {"203.0.113.0/24"}, deny = {"0.0.0.0/0"}} (the same, more rules)
-- Writes bench/results/local_network.{json,md}; its summary rows put network and filtered beside
-- offline, measured in the same run. Not a test.
--
--   build/glsb-lua bench/local_network.lua [N]       # default N = 20
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"
local glsb = require "glsb"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 20
local CONTENDERS = {
  { name = "offline", network = false },
  { name = "network", network = true },
  { name = "filtered", network = { allow = { "203.0.113.0/24" }, deny = { "0.0.0.0/0" } } },
}

local samples = {}
glsb.run(function()
  local function once(c)
    local sb = glsb.create("local", { network = c.network })
    local r = sb:execute_code("print(1)")
    sb:terminate()
    assert(r.stdout == "1\n", tostring(r))
  end
  for _, c in ipairs(CONTENDERS) do
    samples[c.name] = {}
    once(c) -- warm-up: page cache, the helpers' first exec
  end
  for _ = 1, N do
    for _, c in ipairs(CONTENDERS) do
      samples[c.name][#samples[c.name] + 1] = measure.timed(function() once(c) end)
    end
  end
end)

local results = { n = N, date = os.date("!%Y-%m-%dT%H:%M:%SZ") }
for _, c in ipairs(CONTENDERS) do results[c.name] = measure.stats(samples[c.name]) end
local offline = results.offline.median
results.summary = {
  { figure = "local cold with network = true", value = results.network.median, unit = "ms",
    reference = "the same with network = false", reference_value = offline },
  { figure = "local cold with network = {allow, deny}", value = results.filtered.median, unit = "ms",
    reference = "the same with network = false", reference_value = offline },
}

local lines = {
  string.format("local cold create with and without a network, %s, N = %d (ms)", results.date, N), "",
  "| network | median | p90 |", "|---|---:|---:|",
}
for _, c in ipairs(CONTENDERS) do
  lines[#lines + 1] = string.format("| %s | %.1f | %.1f |", c.name, results[c.name].median, results[c.name].p90)
end
local text = table.concat(lines, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p bench/results")
local f = io.open("bench/results/local_network.md", "w")
if f then f:write(text) f:close() end
f = io.open("bench/results/local_network.json", "w")
if f then f:write(cjson.encode(results), "\n") f:close() end
