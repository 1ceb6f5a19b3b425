-- What a shared pool writes to Redis, on a real provider (issue 12, "Refs in the store hold what
-- glsb.connect needs, never an API key"): a pool on the E2B emulator with a private redis-server warms
-- sandboxes whose creates carry an API key and get an envd access token (E2B's secure sandboxes); every
-- key and value the pool left in Redis is read back and holds neither, and a second pool object on the
-- name, which holds no handle of those sandboxes, reaches one through glsb.connect with its own key.
local glsb = require "glsb"
local cjson = require "cjson"
local redis = require "support.redis"
local emulator = require "e2b.emulator"

describe("glsb.pool Redis store on E2B: no secret in the store #pool #e2b #redis", function()
  local srv, emu, prev_log
  local pools = {}

  setup(function()
    prev_log = glsb.log.set_handler(function() end)
    srv = redis.start()
    emu = emulator.start()
  end)
  teardown(function()
    for _, p in ipairs(pools) do
      pcall(p.shutdown, p, { graceful = false })
      pcall(p.release_all_idle, p)
      if p.store.close then pcall(p.store.close, p.store) end
    end
    if emu then emu:stop() end
    if srv then srv:stop() end
    glsb.log.set_handler(prev_log)
  end)

  local function new_pool()
    local p = glsb.pool("e2b", { name = "secrets", size = 2, store = srv.url, create = emu:opts({ timeout = 60 }),
      reconcile_interval = 0.2, primary_lock_ttl = 2 })
    pools[#pools + 1] = p
    return p
  end

  -- Every key in the server and what it holds, as text (redis-cli's raw output).
  local function dump()
    local out = {}
    for key in srv:cli("--raw", "KEYS", "*"):gmatch("[^\n]+") do
      local kind = srv:cli("TYPE", key)
      local value
      if kind == "string" then value = srv:cli("--raw", "GET", key)
      elseif kind == "hash" then value = srv:cli("--raw", "HGETALL", key)
      elseif kind == "list" then value = srv:cli("--raw", "LRANGE", key, 0, -1)
      else value = "(" .. kind .. ")" end
      out[#out + 1] = key .. "\n" .. value
    end
    return table.concat(out, "\n")
  end

  it("idle refs hold what glsb.connect needs, no API key or access token; another pool connects with its own key",
    function()
      local a = new_pool()
      a:start()
      assert.is_true(a:wait_idle(2, 30), "warm-up reached size")
      local tokens = {}
      for id, sb in pairs(a.handles) do
        local token = sb._conn and sb._conn.envd_token
        assert.is_string(token, "sandbox " .. id .. " has an envd access token (a secure sandbox)")
        tokens[#tokens + 1] = token
      end
      assert.are.equal(2, #tokens)

      local text = dump()
      assert.is_truthy(text:find("idle:refs", 1, true), text)
      assert.is_nil(text:find(emu.api_key, 1, true), "the API key is in Redis:\n" .. text)
      for _, token in ipairs(tokens) do
        assert.is_nil(text:find(token, 1, true), "an envd access token is in Redis:\n" .. text)
      end
      -- each ref is what glsb.connect takes: the provider, the id, and where to reach it
      local refs_key = require("glsb.pool.redis").key("glsb:pool", "secrets", "idle:refs")
      for id in pairs(a.handles) do
        local ref = cjson.decode(srv:cli("--raw", "HGET", refs_key, id))
        assert.are.equal("e2b", ref.provider)
        assert.are.equal(id, ref.sandbox_id)
        assert.is_nil(ref.api_key)
        assert.is_nil(ref.envd_access_token)
        assert.is_nil(ref.traffic_access_token)
      end

      -- a pool object that made none of them (what another process sees) reaches one with its own options
      a:shutdown({ graceful = true })
      local b = new_pool()
      b:start()
      assert.is_nil(next(b.handles), "b holds no handle of a's sandboxes")
      local sb <close> = b:acquire({ policy = "fail_fast", timeout = 10 })
      assert.is_true(tokens[1] == sb._conn.envd_token or tokens[2] == sb._conn.envd_token,
        "b reached one of a's sandboxes (connect gave it the token from the API, not from Redis)")
      assert.are.equal("2", (sb:execute_code("print(1 + 1)").stdout:gsub("%s+$", "")))
    end)
end)
