-- spec/pool/worker.lua: one process of a shared pool, for spec/pool/multiprocess_spec.lua. Run by build/glsb-lua:
--
--   glsb-lua spec/pool/worker.lua MODE CONFIG_JSON
--
-- CONFIG: redis (URL), e2b (create options), name, size, n (acquires), lock_ttl, interval, idle_timeout.
-- MODE
--   acquire   n acquires, each sandbox used (print(1)) and terminated; prints one JSON line at the end:
--             {ids, stats, primary_seen}
--   serve     keeps the pool running (glsb.run) and prints {"primary": bool, "t": glsb.now()} every 0.1 s
--   take-die  takes one idle entry straight from the store, prints {"took": id}, then SIGKILLs itself
--             (a worker dying between take and connect)
local glsb = require "glsb"
local cjson = require "cjson"
local core = require "glsb.core"
local loop = require "glsb.loop"

local mode, config = arg[1], cjson.decode(arg[2])

local function out(t)
  io.stdout:write(cjson.encode(t), "\n")
  io.stdout:flush()
end

local pool = glsb.pool("e2b", {
  name = config.name, size = config.size, store = config.redis, create = config.e2b,
  primary_lock_ttl = config.lock_ttl or 2, reconcile_interval = config.interval or 0.3,
  idle_timeout = config.idle_timeout or 60, acquire_min_remaining_ttl = config.min_ttl or 1,
})

if mode == "take-die" then
  local entry = loop.run(function() return pool.store:take_idle(pool.name, 0) end)
  out({ took = entry and entry.id or cjson.null })
  os.execute("kill -KILL " .. core.getpid())
  return
end

pool:start()

if mode == "serve" then
  glsb.run(function()
    while true do
      out({ primary = pool:snapshot().primary, t = glsb.now() })
      glsb.sleep(0.1)
    end
  end)
  return
end

-- acquire
local ids, primary_seen = {}, false
glsb.run(function()
  for _ = 1, config.n do
    local sb = pool:acquire()
    ids[#ids + 1] = sb.sandbox_id
    primary_seen = primary_seen or pool:snapshot().primary
    assert(sb:execute_code("print(1)").stdout == "1\n")
    sb:terminate()
    glsb.sleep(config.gap or 0.01)
  end
end)
pool:shutdown({ graceful = true }) -- warm-ups in flight finish first: the stats then count them
out({ ids = ids, stats = pool:snapshot().stats, primary_seen = primary_seen })
