-- The AWS event stream framer against the official test vectors (the AWS SDKs' shared corpus, kept in
-- spec/fixtures/eventstream), at every split point of each message.
local core = require "glsb.core"
local cjson = require "cjson"

local fixtures = require "support.fixtures"

-- The corpus: 5 messages that must decode, 4 that must be refused (raises when it is not there).
local POSITIVE, NEGATIVE = 5, 4

local function read(rel) return fixtures.read("eventstream", rel) end

local function names(kind) return fixtures.files("eventstream", "encoded/" .. kind) end

-- Every way to cut the message in two, in three for short ones, and one byte at a time.
local function splits(data)
  local out = { { data } }
  for i = 0, #data do out[#out + 1] = { data:sub(1, i), data:sub(i + 1) } end
  local bytes = {}
  for i = 1, #data do bytes[i] = data:sub(i, i) end
  out[#out + 1] = bytes
  return out
end

-- decode_frames in the failure shape of every core entry point: frames, or nil, message, code, and
-- (after those) the frames decoded before the failure. Returns frames, code.
local function decode(chunks, max_frame)
  local frames, msg, code, partial = core.decode_frames("eventstream", chunks, max_frame)
  if frames then return frames, nil end
  assert.is_string(msg)
  assert.truthy(msg:find(code, 1, true), "the message names the code")
  assert.equal("glsb", core.codes[code])
  return partial, code
end

describe("eventstream framer #core #unit", function()
  it("has every vector of the corpus, each with its expected decoding", function()
    assert.equal(POSITIVE, #names("positive"))
    assert.equal(NEGATIVE, #names("negative"))
    assert.are.same(names("positive"), fixtures.files("eventstream", "decoded/positive"))
    assert.are.same(names("negative"), fixtures.files("eventstream", "decoded/negative"))
  end)

  for _, name in ipairs(names("positive")) do
    it("decodes " .. name .. " identically at every split point", function()
      local data = read("encoded/positive/" .. name)
      local want = cjson.decode(read("decoded/positive/" .. name))
      for _, chunks in ipairs(splits(data)) do
        local frames, err = decode(chunks)
        assert.is_nil(err)
        assert.equal(1, #frames)
        local fr = frames[1]
        assert.equal(want.payload, core.b64encode(fr.payload))
        local n = 0
        for _, h in ipairs(want.headers) do
          n = n + 1
          assert.equal(h.type, fr.header_types[h.name], h.name)
          local got = fr.headers[h.name]
          if h.type == 6 or h.type == 7 or h.type == 9 then got = core.b64encode(got) end
          assert.equal(h.value, got, h.name)
        end
        local m = 0
        for _ in pairs(fr.headers) do m = m + 1 end
        assert.equal(n, m)
      end
    end)
  end

  local expected_code = { ["Prelude checksum mismatch"] = "PRELUDE_CRC", ["Message checksum mismatch"] = "MESSAGE_CRC" }
  for _, name in ipairs(names("negative")) do
    it("rejects " .. name .. " at every split point", function()
      local data = read("encoded/negative/" .. name)
      local want = expected_code[read("decoded/negative/" .. name):gsub("%s+$", "")]
      assert.is_truthy(want)
      for _, chunks in ipairs(splits(data)) do
        local frames, err = decode(chunks)
        assert.equal(want, err)
        assert.equal(0, #frames)
      end
    end)
  end

  it("decodes several messages in one chunk and refuses one cut short", function()
    local a = read("encoded/positive/payload_one_str_header")
    local b = read("encoded/positive/int32_header")
    local frames, err = decode({ a .. b .. a })
    assert.is_nil(err)
    assert.equal(3, #frames)
    frames, err = decode({ a .. b:sub(1, -2) })
    assert.equal(1, #frames)
    assert.equal("TRUNCATED_MESSAGE", err)
  end)

  it("refuses a message larger than max_frame as soon as its prelude is in", function()
    local a = read("encoded/positive/all_headers")
    local frames, err = decode({ a:sub(1, 12) }, 100)
    assert.equal("FRAME_TOO_LARGE", err)
    assert.equal(0, #frames)
  end)

  it("refuses malformed headers behind valid checksums", function()
    -- a header with an unknown value type (0x60), checksums recomputed so only the header is wrong
    local headers = string.char(1) .. "x" .. string.char(0x60)
    local total = 12 + #headers + 4
    local prelude = string.pack(">I4I4", total, #headers)
    prelude = prelude .. string.pack(">I4", core.crc32(prelude))
    local body = prelude .. headers
    local msg = body .. string.pack(">I4", core.crc32(body))
    local frames, err = decode({ msg })
    assert.equal("BAD_HEADERS", err)
    assert.equal(0, #frames)
  end)
end)
