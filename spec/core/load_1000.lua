-- spec/core/load_1000.lua: the load that spec/core/load_spec.lua runs in a fresh glsb-lua (not a spec
-- itself). Rounds of TASKS concurrent tasks of each kind: HTTP requests all in flight at once, sleepers
-- with deadlines (a third cancelled), and child processes each waited on by two tasks. After every round
-- it prints one JSON line of counts: what completed, and what the process still holds (fds, memory, loop
-- state, children).
--   glsb-lua spec/core/load_1000.lua <fault-server-url> [TASKS] [ROUNDS]
local core = require "glsb.core"
local http = require "glsb.http"
local loop = require "glsb.loop"
local process = require "glsb.process"
local cjson = require "cjson"

local url = assert(arg[1], "usage: load_1000.lua <fault-server-url> [TASKS] [ROUNDS]")
local TASKS = tonumber(arg[2]) or 1000
local ROUNDS = tonumber(arg[3]) or 3
local PROCESSES = 50
local pid = core.getpid()

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

local function open_fds() return #lines_of("ls /proc/" .. pid .. "/fd") end

local function rss_kb()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmRSS:%s+(%d+)"))
end

-- Our children, zombies included (the ls run by lines_of has been reaped by then).
local function children()
  local n = 0
  for _, name in ipairs(lines_of("ls /proc")) do
    local f = tonumber(name) and io.open("/proc/" .. name .. "/stat")
    if f then
      local ppid = tonumber((f:read("l") or ""):match("^%d+ %b() %a (%d+)"))
      f:close()
      if ppid == pid then n = n + 1 end
    end
  end
  return n
end

local function holdings()
  collectgarbage()
  collectgarbage()
  local ls, cs = loop.stats(), core.loop_stats()
  return { fds = open_fds(), rss_kb = rss_kb(), lua_kb = math.floor(collectgarbage("count")),
    loop_tokens = ls.tokens, loop_timers = ls.timers, loop_ready = ls.ready, core_watches = cs.watches,
    core_ready = cs.ready, children = children() }
end

local function round()
  local got = { http_ok = 0, slept = 0, cancelled = 0, exits = 0 }
  assert(http.request({ url = url .. "/reset-inflight" }).status == 200)
  loop.run(function()
    local tasks = {}
    for _ = 1, TASKS do
      tasks[#tasks + 1] = loop.spawn(function()
        local res = http.request({ url = url .. "/slow?ms=300", timeout = 60 })
        if res.status == 200 and res.body == "late" then got.http_ok = got.http_ok + 1 end
      end)
    end
    local sleepers = {}
    for i = 1, TASKS do
      sleepers[i] = loop.spawn(function()
        loop.wait(nil, loop.now() + 0.5 + (i % 20) / 100) -- 500..690 ms: cancelled while they wait
        got.slept = got.slept + 1
      end)
    end
    -- a third cancelled as soon as every sleeper waits: later (after the children below) they could all
    -- have slept their 500 ms out on a loaded machine, and none would be cancelled while it waits
    loop.sleep(0)
    for i = 1, TASKS, 3 do sleepers[i]:cancel() end
    for i = 1, PROCESSES do
      local p = assert(process.spawn({ argv = { "sh", "-c", "exit 0" }, stdin = "null", stdout = "null",
        stderr = "null" }))
      local ended = 0
      for _ = 1, 2 do
        tasks[#tasks + 1] = loop.spawn(function()
          local st = p:wait(loop.now() + 30)
          if st and st.code == 0 then got.exits = got.exits + 1 end
          ended = ended + 1
          if ended == 2 then p:close() end
        end)
      end
      if i % 10 == 0 then loop.sleep(0) end
    end
    loop.sleep(0.02)
    for _, t in ipairs(sleepers) do
      local ok, err = pcall(t.wait, t)
      if not ok then
        assert(loop.is_cancelled(err), tostring(err))
        got.cancelled = got.cancelled + 1
      end
    end
    loop.gather(tasks)
  end)
  got.max_inflight = tonumber(http.request({ url = url .. "/max-inflight" }).body)
  return got
end

-- warm-up: the HTTP part loaded, one connection made
assert(http.request({ url = url .. "/ok" }).status == 200)
io.write(cjson.encode({ round = 0, holds = holdings() }), "\n")
for r = 1, ROUNDS do
  local got = round()
  io.write(cjson.encode({ round = r, got = got, holds = holdings() }), "\n")
  io.flush()
end
