-- glsb.ids: every random token glsb makes (create tokens, client tokens, staged file names, pool owner
-- ids, trace ids, jitter) comes from here, from the kernel's generator (getrandom(2), core.random_bytes)
-- read a block at a time: one call per few hundred ids. No file is held open: an open /dev/urandom
-- (Lua's io.open has no close-on-exec) was inherited by every child io.popen or os.execute started,
-- one per fresh load of this module (busted reloads it per spec file: 40 of them in a full run).
--
-- Never math.random: it is shared with the user's code and reseedable (math.randomseed(42) in two
-- processes gives two equal streams, so two processes would make the same "unique" token), and drawing
-- from it would shift a seeded sequence the user's script relies on.
local M = {}

M.BLOCK = 4096

local core            -- glsb.core, required on first use (glsb loads, and finds providers, without it)
local failed          -- true once the kernel refused (ENOSYS before Linux 3.17), or no core
local buffer, pos = "", 1

-- Fallback when getrandom(2) is missing: splitmix64 seeded from the wall
-- clock, the pid-dependent address of a fresh table and the monotonic clock. Never math.random.
local fallback_state
local function fallback_bytes(n)
  if not fallback_state then
    local seed = tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0
    if core then seed = seed ~ core.realtime_ns() ~ math.floor(core.now() * 1e9) else seed = seed ~ os.time() end
    fallback_state = seed
  end
  local out = {}
  while #out * 8 < n do
    fallback_state = fallback_state + 0x9E3779B97F4A7C15
    local z = fallback_state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    z = z ~ (z >> 31)
    out[#out + 1] = string.pack("<i8", z)
  end
  return table.concat(out):sub(1, n)
end

local function refill()
  if core == nil and not failed then
    local ok, c = pcall(require, "glsb.core")
    core, failed = ok and c or false, not ok or nil
  end
  local block = not failed and core.random_bytes(M.BLOCK)
  if not block then
    if not failed then
      failed = true
      require("glsb.log").warn("glsb.ids: getrandom(2) (glsb.core) is not available; using a clock-seeded generator")
    end
    block = fallback_bytes(M.BLOCK)
  end
  buffer, pos = block, 1
end

-- take(n) -> buffer, at: n fresh random bytes start at `at` in the string `buffer` (n <= BLOCK). For
-- readers that unpack them in place (glsb.trace.ids); the bytes are never handed out again.
function M.take(n)
  if pos + n - 1 > #buffer then refill() end
  local at = pos
  pos = pos + n
  return buffer, at
end

-- bytes(n) -> n random bytes.
function M.bytes(n)
  if n <= M.BLOCK then
    local b, at = M.take(n)
    return b:sub(at, at + n - 1)
  end
  local parts = {}
  for i = 1, n, M.BLOCK do parts[#parts + 1] = M.bytes(math.min(M.BLOCK, n - i + 1)) end
  return table.concat(parts)
end

-- hex(n) -> n lowercase hex digits (4 random bits each): names, tokens, nonces.
function M.hex(n)
  local b = M.bytes((n + 1) // 2)
  return (b:gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, n)
end

-- uuid() -> a version 4 UUID ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", RFC 9562 §5.4), as the AWS SDKs
-- fill in a missing clientToken.
function M.uuid()
  local b = { M.bytes(16):byte(1, 16) }
  b[7] = (b[7] & 0x0f) | 0x40
  b[9] = (b[9] & 0x3f) | 0x80
  local s = string.format(string.rep("%02x", 16), table.unpack(b))
  return s:sub(1, 8) .. "-" .. s:sub(9, 12) .. "-" .. s:sub(13, 16) .. "-" .. s:sub(17, 20) .. "-" .. s:sub(21, 32)
end

-- fraction() -> a number in [0, 1) with 53 random bits: backoff jitter (glsb.retry).
function M.fraction()
  local b, at = M.take(7)
  return (string.unpack("<I7", b, at) >> 3) / (1 << 53)
end

-- Tests: force the fallback generator (or restore the normal source with nil).
function M._use_fallback(on)
  failed = on and true or nil
  buffer, pos = "", 1
end

return M
