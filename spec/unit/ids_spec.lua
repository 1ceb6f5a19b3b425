-- glsb.ids: the one source of random tokens (create tokens, client tokens, staged names, pool owners,
-- trace ids, jitter): the kernel's generator, never math.random.
local ids = require "glsb.ids"

describe("glsb.ids #unit", function()
  it("hex(n) is n lowercase hex digits that do not repeat", function()
    local seen = {}
    for _, n in ipairs({ 1, 7, 8, 24, 32, 64 }) do
      for _ = 1, 200 do
        local h = ids.hex(n)
        assert.are.equal(n, #h)
        assert.matches("^[0-9a-f]+$", h)
        if n >= 24 then
          assert.is_nil(seen[h], h)
          seen[h] = true
        end
      end
    end
  end)

  it("uuid() is a version 4, variant 1 UUID", function()
    local seen = {}
    for _ = 1, 500 do
      local u = ids.uuid()
      assert.matches("^%x%x%x%x%x%x%x%x%-%x%x%x%x%-4%x%x%x%-[89ab]%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$", u)
      assert.is_nil(seen[u])
      seen[u] = true
    end
  end)

  it("bytes(n) gives n bytes, beyond one block too", function()
    assert.are.equal(0, #ids.bytes(0))
    assert.are.equal(16, #ids.bytes(16))
    local big = ids.bytes(ids.BLOCK * 2 + 5)
    assert.are.equal(ids.BLOCK * 2 + 5, #big)
    assert.are_not.equal(big:sub(1, 64), big:sub(ids.BLOCK + 1, ids.BLOCK + 64))
  end)

  it("fraction() is in [0, 1) and spread over it", function()
    local buckets = {}
    for _ = 1, 4000 do
      local f = ids.fraction()
      assert.is_true(f >= 0 and f < 1, tostring(f))
      local b = math.floor(f * 8)
      buckets[b] = (buckets[b] or 0) + 1
    end
    -- 500 expected per eighth; 380..620 is > 5 standard deviations wide
    for b = 0, 7 do assert.is_true(buckets[b] > 380 and buckets[b] < 620, b .. ": " .. tostring(buckets[b])) end
  end)

  it("does not depend on math.random, nor move its sequence", function()
    math.randomseed(42)
    local a = ids.hex(32)
    math.randomseed(42)
    local b = ids.hex(32)
    assert.are_not.equal(a, b)
    math.randomseed(7)
    local x = math.random()
    math.randomseed(7)
    ids.hex(32); ids.uuid(); ids.fraction()
    assert.are.equal(x, math.random())
  end)

  it("the jitter of glsb.retry comes from it", function()
    math.randomseed(3)
    local x = math.random()
    math.randomseed(3)
    require("glsb.retry").delay(1, { base_delay = 1, jitter = 0.5 })
    assert.are.equal(x, math.random(), "retry.delay drew from math.random")
  end)

  it("keeps no file open: nothing of it is inherited by a child io.popen starts", function()
    -- a fresh load, as busted's insulation gives every spec file
    package.loaded["glsb.ids"] = nil
    local fresh = require "glsb.ids"
    package.loaded["glsb.ids"] = ids
    assert.are.equal(32, #fresh.hex(32))
    local p = assert(io.popen("ls -l /proc/self/fd/ 2>&1"))
    local fds = p:read("a")
    p:close()
    assert.is_nil(fds:find("urandom", 1, true), fds)
  end)

  it("core.random_bytes gives n kernel bytes and refuses a bad n", function()
    local core = require "glsb.core"
    assert.are.equal("", core.random_bytes(0))
    local a, b = core.random_bytes(64), core.random_bytes(64)
    assert.are.equal(64, #a)
    assert.are_not.equal(a, b)
    assert.are.equal(1048576, #core.random_bytes(1048576))
    assert.has_error(function() core.random_bytes(-1) end)
    assert.has_error(function() core.random_bytes(1048577) end)
    assert.has_error(function() core.random_bytes("x") end)
  end)

  it("keeps working from the clock-seeded fallback when getrandom(2) fails", function()
    ids._use_fallback(true)
    local a, b = ids.hex(32), ids.hex(32)
    ids._use_fallback(nil)
    assert.matches("^[0-9a-f]+$", a)
    assert.are_not.equal(a, b)
  end)
end)
