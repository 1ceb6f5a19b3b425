-- bench/pool_e2b.lua: what a Redis store adds to pool:acquire() over the memory store, on the E2B emulator, in
-- one run. Not a test: figures only.
--
--   (cd spec && npm ci) once; make build/glsb-lua
--   build/glsb-lua bench/pool_e2b.lua [N]      # default N = 300
--
-- Four pools of 4 on one emulator, measured in turn for every sample (each refilled before it is measured):
--   memory       store = "memory"
--   redis tcp    store = "redis://127.0.0.1:<port>" (a private redis-server, loopback TCP)
--   redis unix   store = "unix://<dir>/redis.sock"
--   redis, another process's sandbox   the same Redis pool name, acquired through a second pool object that
--                did not create the sandbox (what another process pays: glsb.connect, E2B's POST .../connect)
-- Every acquire includes the health check (envd's /health). Writes bench/results/pool_e2b.md and .json.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local cjson = require "cjson"
local emulator = require "e2b.emulator"
local redis = require "support.redis"

local N = tonumber(arg and arg[1]) or 300

local pct = measure.percentile

local emu = emulator.start()
local srv = redis.start({ tcp = true })
local results = { n = N }
local ok, err = pcall(function()
  glsb.run(function()
    local function pool(name, store)
      local p = glsb.pool("e2b", { name = name, size = 4, store = store, create = emu:opts(), reconcile_interval = 1,
        primary_lock_ttl = 5 })
      return p:start()
    end
    local contenders = {
      { key = "memory", pool = pool("m", "memory") },
      { key = "redis_tcp", pool = pool("t", srv.tcp_url) },
      { key = "redis_unix", pool = pool("u", srv.url) },
    }
    -- a second pool object on the unix pool's name: it holds no handle of the sandboxes, so it reconnects
    local other = glsb.pool("e2b", { name = "u", size = 4, store = srv.url, create = emu:opts(), reconcile_interval = 1,
      primary_lock_ttl = 5 })
    other:start()
    contenders[#contenders + 1] = { key = "redis_other_process", pool = other, fill = contenders[3].pool }
    for _, c in ipairs(contenders) do
      c.samples = {}
      assert((c.fill or c.pool):wait_idle(4, 60), c.key .. " did not warm up")
    end
    for i = 1, N + 10 do
      for _, c in ipairs(contenders) do
        assert((c.fill or c.pool):wait_idle(4, 60))
        if c.key == "redis_other_process" then c.pool.handles = {} end -- never a handle of its own
        local t0 = loop.now()
        local sb = c.pool:acquire({ policy = "fail_fast" })
        local dt = (loop.now() - t0) * 1000
        if i > 10 then c.samples[#c.samples + 1] = dt end -- the first ones warm connections up
        sb:terminate()
      end
    end
    for _, c in ipairs(contenders) do
      results[c.key] = { p50 = pct(c.samples, 0.5), p99 = pct(c.samples, 0.99), n = #c.samples }
    end
    other:shutdown({ release_idle = false })
    for _, c in ipairs(contenders) do
      if c.pool ~= other then
        c.pool:shutdown()
        c.pool:release_all_idle()
      end
    end
  end)
end)
srv:stop()
emu:stop()
if not ok then error(err, 0) end

local lines = {
  "| store | acquire p50 ms | p99 ms | p50 over memory |",
  "|---|---:|---:|---:|",
}
for _, key in ipairs({ "memory", "redis_tcp", "redis_unix", "redis_other_process" }) do
  local r = results[key]
  lines[#lines + 1] = string.format("| %s | %.3f | %.3f | %+.3f |", key:gsub("_", " "), r.p50, r.p99,
    r.p50 - results.memory.p50)
end
local text = table.concat(lines, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p bench/results")
local f = assert(io.open("bench/results/pool_e2b.md", "w"))
f:write(text)
f:close()
f = assert(io.open("bench/results/pool_e2b.json", "w"))
f:write(cjson.encode(results))
f:close()
