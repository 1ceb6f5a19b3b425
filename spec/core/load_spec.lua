-- glsb-lua under a 1,000-task load (issue 16): every task completes, and once they have finished the
-- process holds no more than before: no fd, no child, no loop entry, and memory that stops growing
-- from one round to the next. Counts only, never timings (speed is bench/scale_e2b.lua's job).
local core = require "glsb.core"
local process = require "glsb.process"
local server = require "support.server"
local cjson = require "cjson"

local GLSB_LUA = core.realpath("build/glsb-lua")
local TASKS, ROUNDS = 1000, 4

-- Runs spec/core/load_1000.lua in a fresh glsb-lua whose soft fd limit is `soft` (a thousand transfers
-- need a socket each), returns its JSON lines.
local function run_load(url, soft)
  local cmd = ("ulimit -Sn %d && exec %s spec/core/load_1000.lua %s %d %d"):format(soft, GLSB_LUA, url, TASKS, ROUNDS)
  local out, err, st = process.run({ "sh", "-c", cmd }, { timeout = 120 })
  assert(out, "the load did not finish: " .. tostring(err))
  assert(st.code == 0, "the load failed: " .. tostring(err))
  local rounds = {}
  for line in out:gmatch("[^\n]+") do rounds[#rounds + 1] = cjson.decode(line) end
  return rounds
end

describe("glsb-lua under a 1,000-task load #core #slow", function()
  local srv
  setup(function() srv = server.start({ "node", "spec/support/fault_server.mjs", "0" }) end)
  teardown(function() if srv then srv.stop() end end)

  it("completes every task and holds no more fds, children, loop entries or memory afterwards", function()
    local hard = tonumber(io.popen("ulimit -Hn"):read("l")) or math.huge
    if hard < 2 * TASKS then
      pending("the hard fd limit (" .. hard .. ") is below what a thousand transfers need")
      return
    end
    -- a soft limit of 512 (below the usual 1024): the transport raises it to the hard limit itself
    local rounds = run_load(srv.url, 512)
    assert.equal(ROUNDS + 1, #rounds)
    local base = rounds[1].holds
    for r = 2, #rounds do
      local got, holds = rounds[r].got, rounds[r].holds
      local where = "round " .. (r - 1) .. ": " .. cjson.encode(rounds[r])
      -- every task completed as it should
      assert.equal(TASKS, got.http_ok, where)
      assert.equal(TASKS, got.slept + got.cancelled, where)
      assert.equal(math.ceil(TASKS / 3), got.cancelled, where)
      assert.equal(100, got.exits, where) -- 50 children, each waited on by two tasks
      assert.is_true(got.max_inflight > TASKS / 2, where) -- the requests really were in flight together
      -- and nothing of them is held afterwards
      -- the burst's connections were closed: what stays open is the cache of idle connections kept for the
      -- next calls, at most 64 (src/core/multi.c IDLE_CONNECTIONS; before, ~750 stayed after each round)
      assert.is_true(holds.fds <= base.fds + 64, where)
      assert.equal(0, holds.children, where)
      assert.same({ 0, 0, 0, 0 }, { holds.loop_tokens, holds.loop_timers, holds.loop_ready, holds.core_ready }, where)
      assert.equal(base.core_watches, holds.core_watches, where)
    end
    -- memory: whatever the first round left in the allocator and Lua's heap, later rounds add nothing
    local first, last = rounds[2].holds, rounds[#rounds].holds
    assert.is_true(last.lua_kb <= first.lua_kb + 128,
      ("Lua heap grew from %d KB to %d KB over %d rounds"):format(first.lua_kb, last.lua_kb, ROUNDS - 1))
    assert.is_true(last.rss_kb <= first.rss_kb + 8192,
      ("resident memory grew from %d KB to %d KB over %d rounds"):format(first.rss_kb, last.rss_kb, ROUNDS - 1))
  end)
end)
