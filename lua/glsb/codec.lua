-- glsb.codec: base64 and SHA-256 of bytes, for providers and the kit (glsb.core's codecs behind plain Lua
-- functions: a provider requires this, never glsb.core; src/core/README.md, "Archive, codecs, files").
--
--   codec.sha256("abc")                 -> "ba7816bf..." (lowercase hex; raw = true: the 32 bytes)
--   codec.b64encode(bytes[, "url"])     -> text ("std" by default; "url": the URL alphabet, no padding)
--   codec.b64decode(text[, "url"])      -> bytes, or nil, message, "BAD_BASE64"
local core = require "glsb.core"

local M = {}

-- sha256(data[, raw]) -> the digest of data as lowercase hex, or as 32 raw bytes when raw is true.
function M.sha256(data, raw) return core.sha256(data, raw) end

-- b64encode(data[, alphabet]) -> base64 text; alphabet "std" (default, padded) or "url" (no padding).
function M.b64encode(data, alphabet) return core.b64encode(data, alphabet) end

-- b64decode(text[, alphabet]) -> bytes, or nil, message, "BAD_BASE64" (missing padding is accepted; bad
-- characters and incomplete padding are not).
function M.b64decode(text, alphabet) return core.b64decode(text, alphabet) end

return M
