-- bench/scale_http.lua: what one request costs the glsb process when a thousand are in flight at once,
-- beside ten in flight, and beside Node's fetch with a thousand in flight. Not a test.
--
--   build/glsb-lua bench/scale_http.lua [N] [ROUNDS]       # defaults 2000 requests, 2 rounds
--
-- The loopback server (bench/scale_http.mjs) holds every request and answers the oldest one each
-- millisecond: all in flight wait together and one becomes ready at a time, so the wall time is the
-- server's (N ms) and the client's CPU time per request is what its event loop pays per ready event with
-- that many transfers open. Figures: client CPU ms per request (user + system), peak RSS, fds held after.
-- Writes bench/results/scale_http.{json,md}.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local http = require "glsb.http"
local loop = require "glsb.loop"
local process = require "glsb.process"
local server = require "support.server"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 2000
local ROUNDS = tonumber(arg and arg[2]) or 2
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"

local cpu_ms = measure.cpu_ms

local status_kb = measure.status_kb

local open_fds = measure.open_fds

local srv = server.start({ "node", here .. "/scale_http.mjs", "server" })
local ok, err = pcall(function()
  local url = srv.url .. "/h"
  local function glsb_run(inflight)
    local good, next_i = 0, 0
    local c0, t0 = cpu_ms(), loop.now()
    loop.run(function()
      local workers = {}
      for w = 1, inflight do
        workers[w] = loop.spawn(function()
          while next_i < N do
            next_i = next_i + 1
            local res = http.request({ url = url, timeout = 120 })
            if res.status == 200 and res.body == "x" then good = good + 1 end
          end
        end)
      end
      loop.gather(workers)
    end)
    return { ok = good, wall_ms = (loop.now() - t0) * 1000, cpu_ms = cpu_ms() - c0, fds_after = open_fds() }
  end
  local function node_run(inflight)
    local argv = { "node", here .. "/scale_http.mjs", "client", url, tostring(N), tostring(inflight) }
    local out = assert(process.run(argv, { timeout = 300 }))
    return cjson.decode(out)
  end

  assert(http.request({ url = url }).status == 200) -- the HTTP part loaded, one connection made
  local fds_before = open_fds()
  local runs = { glsb10 = {}, glsb1000 = {}, node1000 = {} }
  for r = 1, ROUNDS do
    local order = r % 2 == 1 and { "glsb10", "glsb1000", "node1000" } or { "node1000", "glsb1000", "glsb10" }
    for _, k in ipairs(order) do
      local x = k == "node1000" and node_run(1000) or glsb_run(k == "glsb10" and 10 or 1000)
      table.insert(runs[k], x)
    end
  end
  local function summary(list)
    local cpu, wall, good = {}, {}, 0
    for _, x in ipairs(list) do
      cpu[#cpu + 1] = x.cpu_ms / N
      wall[#wall + 1] = x.wall_ms
      good = good + x.ok
    end
    table.sort(cpu)
    table.sort(wall)
    return { cpu_ms_per_request = cpu[(#cpu + 1) // 2], wall_ms = wall[(#wall + 1) // 2], ok = good,
      requests = N * #list, peak_rss_kb = list[#list].peak_rss_kb, fds_after = list[#list].fds_after }
  end
  local g10, g1000, n1000 = summary(runs.glsb10), summary(runs.glsb1000), summary(runs.node1000)
  local result = { n = N, rounds = ROUNDS, date = os.date("!%Y-%m-%dT%H:%M:%SZ"), glsb_10 = g10, glsb_1000 = g1000,
    node_1000 = n1000, glsb_peak_rss_kb = status_kb("VmHWM"), fds_before = fds_before }
  result.summary = {
    { figure = "HTTP, 1,000 requests in flight: client CPU per request", value = g1000.cpu_ms_per_request, unit = "ms",
      reference = "glsb, 10 in flight", reference_value = g10.cpu_ms_per_request },
    { figure = "HTTP, 1,000 requests in flight: client CPU per request", value = g1000.cpu_ms_per_request, unit = "ms",
      reference = "Node fetch, 1,000 in flight", reference_value = n1000.cpu_ms_per_request },
    { figure = "HTTP, 1,000 requests in flight: client peak RSS", value = result.glsb_peak_rss_kb / 1024, unit = "MB",
      reference = "Node fetch, 1,000 in flight", reference_value = n1000.peak_rss_kb / 1024 },
  }
  os.execute("mkdir -p " .. here .. "/results")
  local f = assert(io.open(here .. "/results/scale_http.json", "w"))
  f:write(cjson.encode(result), "\n")
  f:close()
  local md = {
    ("%d GETs against a server that answers one per millisecond, %d rounds per contender, alternating"):format(N,
      ROUNDS),
    "", "| client | in flight | ok | wall ms | CPU ms per request | peak RSS MB |", "|---|---:|---:|---:|---:|---:|",
    ("| glsb | 10 | %d/%d | %.0f | %.3f | |"):format(g10.ok, g10.requests, g10.wall_ms, g10.cpu_ms_per_request),
    ("| glsb | 1000 | %d/%d | %.0f | %.3f | %.1f |"):format(g1000.ok, g1000.requests, g1000.wall_ms,
      g1000.cpu_ms_per_request, result.glsb_peak_rss_kb / 1024),
    ("| Node fetch (undici) | 1000 | %d/%d | %.0f | %.3f | %.1f |"):format(n1000.ok, n1000.requests, n1000.wall_ms,
      n1000.cpu_ms_per_request, n1000.peak_rss_kb / 1024),
    "", ("glsb fds: %d before, %d after the 1000-in-flight runs"):format(fds_before, g1000.fds_after),
  }
  local text = table.concat(md, "\n") .. "\n"
  f = assert(io.open(here .. "/results/scale_http.md", "w"))
  f:write(text)
  f:close()
  io.write(text)
end)
srv.stop()
if not ok then io.stderr:write("bench failed: ", tostring(err), "\n") os.exit(1) end
