-- glsb.codec: base64 and SHA-256 of bytes, and UTF-8 repair, for providers and the kit (glsb.core's codecs
-- behind plain Lua functions: a provider requires this, never glsb.core; src/core/README.md, "Archive,
-- codecs, files").
--
--   codec.sha256("abc")                 -> "ba7816bf..." (lowercase hex; raw = true: the 32 bytes)
--   codec.sha256_stream():update("a"):update("bc"):digest() -> the same, fed in pieces
--   codec.b64encode(bytes[, "url"])     -> text ("std" by default; "url": the URL alphabet, no padding)
--   codec.b64decode(text[, "url"])      -> bytes, or nil, message, "BAD_BASE64"
--   codec.repair_utf8(bytes)            -> text: each byte that starts no valid UTF-8 sequence is U+FFFD
--   codec.crc32(data[, init])           -> integer (CRC-32 of zlib; not a digest: for cheap cache keys)
--   codec.decode_json(text[, budget])   -> value, or nil, message (text from outside: its decoded cost capped)
local core = require "glsb.core"
local cjson = require "cjson.safe"

local M = {}

-- sha256(data[, raw]) -> the digest of data as lowercase hex, or as 32 raw bytes when raw is true.
function M.sha256(data, raw) return core.sha256(data, raw) end

-- sha256_stream() -> h: h:update(piece) as the data comes (returns h), then h:digest([raw]) once: the
-- digest of the pieces joined, for data never whole in memory.
function M.sha256_stream() return core.sha256_stream() end

-- b64encode(data[, alphabet]) -> base64 text; alphabet "std" (default, padded) or "url" (no padding).
function M.b64encode(data, alphabet) return core.b64encode(data, alphabet) end

-- b64decode(text[, alphabet]) -> bytes, or nil, message, "BAD_BASE64" (missing padding is accepted; bad
-- characters and incomplete padding are not).
function M.b64decode(text, alphabet) return core.b64decode(text, alphabet) end

-- repair_utf8(s) -> s when it is valid UTF-8, else s with each byte that does not start a valid UTF-8
-- sequence replaced by U+FFFD: what a protocol whose strings must be UTF-8 (OTLP's protobuf strings, MCP's
-- JSON) sends of bytes that came from elsewhere (a sandbox's output), rather than have the far side refuse
-- the whole message.
function M.repair_utf8(s)
  if utf8.len(s) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:byte(i)
    local width = c < 0x80 and 1 or (c >= 0xC2 and c <= 0xDF) and 2 or (c >= 0xE0 and c <= 0xEF) and 3
      or (c >= 0xF0 and c <= 0xF4) and 4 or 0
    local chunk = width > 0 and s:sub(i, i + width - 1)
    -- utf8.len (strict) rejects overlong forms, surrogates and truncated sequences
    if chunk and #chunk == width and utf8.len(chunk) == 1 then
      out[#out + 1] = chunk
      i = i + width
    else
      out[#out + 1] = "\239\191\189"
      i = i + 1
    end
  end
  return table.concat(out)
end
-- crc32(data[, init]) -> the CRC-32 (zlib's) of data as an integer; init is an earlier result, so
-- crc32(b, crc32(a)) == crc32(a .. b). In the core's base: unlike sha256 it loads no libcrypto.
function M.crc32(data, init) return core.crc32(data, init) end

-- JSON from outside is decoded at the cost of what it holds, not of its length: `[[],[],...]` is 3 bytes of
-- text per Lua table (a 60 MiB answer of them took 1,863 MiB). What a value costs besides its text is
-- estimated before decoding (core.json_shape): JSON_CONTAINER bytes per object or array (a table and its
-- slot) and JSON_VALUE per value or key (a slot, a node, a string's header); past the budget (default
-- JSON_BUDGET), or nested deeper than JSON_DEPTH, the text is refused undecoded.
M.JSON_CONTAINER = 72
M.JSON_VALUE = 32
M.JSON_BUDGET = 16 * 1024 * 1024
M.JSON_DEPTH = 128

-- decode_json(text[, budget]) -> the decoded value (JSON null as cjson.null), or nil, message: not JSON, too
-- deep, or its decoded value would cost more than budget bytes beyond its text.
function M.decode_json(text, budget)
  if type(text) ~= "string" then return nil, "not a string: " .. type(text) end
  local containers, separators, depth = core.json_shape(text)
  if depth > M.JSON_DEPTH then
    return nil, string.format("JSON nested %d deep (the limit is %d): refused undecoded", depth, M.JSON_DEPTH)
  end
  local cost = containers * M.JSON_CONTAINER + (separators + 1) * M.JSON_VALUE
  budget = budget or M.JSON_BUDGET
  if cost > budget then
    return nil, string.format("JSON of %d bytes holding %d objects and arrays and %d values would cost %d bytes "
      .. "decoded beyond its text (the limit is %d): refused undecoded", #text, containers, separators + 1, cost,
      budget)
  end
  return cjson.decode(text)
end

return M
