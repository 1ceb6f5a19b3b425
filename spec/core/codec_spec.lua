-- core.sha256, core.sha256_stream and core.hmac_sha256 (libcrypto) against published vectors: FIPS 180-4 examples, RFC 4231.
local core = require "glsb.core"

local function unhex(h)
  return (h:gsub("%x%x", function(b) return string.char(tonumber(b, 16)) end))
end

describe("glsb.core sha256 / hmac_sha256 #core #unit", function()
  it("sha256 gives the FIPS 180-4 example digests, hex and raw", function()
    local vectors = {
      [""] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
      abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq =
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
      [("a"):rep(1000000)] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
    }
    for msg, want in pairs(vectors) do
      assert.equal(want, core.sha256(msg))
      assert.equal(unhex(want), core.sha256(msg, true))
    end
    assert.equal(64, #core.sha256("\0\1\2"))
  end)

  -- RFC 4231 section 4, test cases 1 to 7 (case 5 is specified truncated to 128 bits).
  local rfc4231 = {
    { ("\x0b"):rep(20), "Hi There",
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
    { "Jefe", "what do ya want for nothing?",
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
    { ("\xaa"):rep(20), ("\xdd"):rep(50),
      "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
    { unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"), ("\xcd"):rep(50),
      "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
    { ("\x0c"):rep(20), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b" },
    { ("\xaa"):rep(131), "Test Using Larger Than Block-Size Key - Hash Key First",
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
    { ("\xaa"):rep(131), "This is a test using a larger than block-size key and a larger than block-size data. "
      .. "The key needs to be hashed before being used by the HMAC algorithm.",
      "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
  }

  for i, case in ipairs(rfc4231) do
    it("hmac_sha256 passes RFC 4231 test case " .. i, function()
      local key, msg, want = case[1], case[2], case[3]
      local got = core.hmac_sha256(key, msg)
      assert.equal(64, #got)
      assert.equal(want, got:sub(1, #want))
      local raw = core.hmac_sha256(key, msg, true)
      assert.equal(32, #raw)
      assert.equal(unhex(want), raw:sub(1, #want // 2))
    end)
  end

  it("hmac_sha256 keys longer than the block are hashed first (RFC 2104 section 2)", function()
    local long = ("k"):rep(200)
    assert.equal(core.hmac_sha256(core.sha256(long, true), "m"), core.hmac_sha256(long, "m"))
  end)

  it("sha256_stream fed in pieces gives the digest of the whole, once", function()
    local msg = ("a"):rep(1000000)
    local h = core.sha256_stream()
    for i = 1, #msg, 65537 do assert.equal(h, h:update(msg:sub(i, i + 65536))) end
    assert.equal("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", h:digest())
    assert.equal(unhex(core.sha256("abc")), core.sha256_stream():update("ab"):update(""):update("c"):digest(true))
    assert.equal(core.sha256(""), core.sha256_stream():digest())
    assert.has_error(function() h:digest() end, "sha256_stream: already digested")
    assert.has_error(function() h:update("x") end, "sha256_stream: already digested")
    assert.has_error(function() core.sha256_stream():update(nil) end)
    core.sha256_stream():update("dropped unfinished") -- freed by __gc (valgrind: make check-c)
    collectgarbage()
  end)

  it("misuse raises an argument error", function()
    assert.has_error(function() core.hmac_sha256("k") end)
    assert.has_error(function() core.hmac_sha256({}, "m") end)
    assert.has_error(function() core.sha256(nil) end)
  end)
end)
