-- bench/http_roundtrip.lua: sequential GET round trips over one kept-alive loopback connection,
-- through glsb's transport (libcurl on the glsb loop) and Node's fetch, against the same server in
-- the same run. Writes bench/results/http_roundtrip.json and prints a table. Not a test.
--   build/glsb-lua bench/http_roundtrip.lua [N]
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
local measure = require "lib.measure"
local http = require "glsb.http"
local core = require "glsb.core"
local process = require "glsb.process"
local server = require "support.server"

local N = tonumber(arg and arg[1]) or 500

local function stats(samples)
  return { n = #samples, median_ms = measure.percentile(samples, 0.5), p10_ms = measure.percentile(samples, 0.1),
    p90_ms = measure.percentile(samples, 0.9) }
end

local srv = server.start({ "node", "spec/support/fault_server.mjs", "0" })
local ok, err = pcall(function()
  local url = srv.url .. "/ok"
  local glsb_samples = {}
  for i = 1, N + 20 do
    local t0 = core.now()
    local res = http.request({ url = url })
    assert(res.status == 200, "request failed")
    if i > 20 then glsb_samples[#glsb_samples + 1] = (core.now() - t0) * 1000 end
  end
  local out = assert(process.run({ "node", "bench/http_roundtrip.mjs", url, tostring(N) }, { timeout = 120 }))
  local node_samples = http.decode_json(out).samples
  local result = { glsb = stats(glsb_samples), node_fetch = stats(node_samples), n = N,
                   date = os.date("!%Y-%m-%dT%H:%M:%SZ") }
  os.execute("mkdir -p bench/results")
  local f = assert(io.open("bench/results/http_roundtrip.json", "w"))
  f:write(http.encode_json(result), "\n")
  f:close()
  print(("%-22s %10s %10s %10s"):format("GET round trip", "median", "p10", "p90"))
  for _, k in ipairs({ "glsb", "node_fetch" }) do
    local r = result[k]
    print(("%-22s %8.3f ms %7.3f ms %7.3f ms"):format(k == "glsb" and "glsb (libcurl)" or "Node fetch (undici)",
      r.median_ms, r.p10_ms, r.p90_ms))
  end
end)
srv.stop()
if not ok then error(err, 0) end
