-- glsb.trace.ids: W3C trace ids (16 bytes) and span ids (8 bytes) as lowercase hex, from /dev/urandom.
--
-- W3C Trace Context asks for ids that are random (and, for the trace id, unique across processes):
-- math.random is shared with the user's code and reseedable (math.randomseed(42) in two processes gives
-- two equal streams), so ids come from the kernel's generator, read a block at a time to keep one read
-- per few hundred ids. All-zero ids are invalid (W3C), so one is drawn again.
local M = {}

local BLOCK = 4096

local source          -- an open /dev/urandom, or false once it failed
local buffer, pos = "", 1

-- Fallback when /dev/urandom cannot be read (no /dev in a chroot): splitmix64 seeded from the wall
-- clock, the pid-dependent address of a fresh table and the monotonic clock. Never math.random.
local fallback_state
local function fallback_bytes(n)
  if not fallback_state then
    local ok, core = pcall(require, "glsb.core")
    local seed = tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0
    if ok then seed = seed ~ core.realtime_ns() ~ math.floor(core.now() * 1e9) else seed = seed ~ os.time() end
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
  if source == nil then
    source = io.open("/dev/urandom", "rb") or false
    if not source then
      require("glsb.log").warn("trace ids: /dev/urandom cannot be read; using a clock-seeded generator")
    end
  end
  local block = source and source:read(BLOCK)
  if not block or #block < BLOCK then block = fallback_bytes(BLOCK) end
  buffer, pos = block, 1
end

-- take(n) -> where n fresh random bytes start in `buffer` (refilled first when short).
local function take(n)
  if pos + n - 1 > #buffer then refill() end
  local at = pos
  pos = pos + n
  return at
end

-- bytes(n) -> n random bytes (n <= BLOCK).
function M.bytes(n)
  local at = take(n)
  return buffer:sub(at, at + n - 1)
end

-- Ids are the raw bytes read as 64-bit integers and printed in hex (%016x of a negative integer is
-- its two's complement: all 16 digits, lowercase): one unpack and one format per id.

-- trace_id() -> 32 lowercase hex digits, never all zero.
function M.trace_id()
  while true do
    local at = take(16) -- before reading `buffer`: take may replace it
    local id = string.format("%016x%016x", string.unpack("<i8i8", buffer, at))
    if id ~= "00000000000000000000000000000000" then return id end
  end
end

-- span_id() -> 16 lowercase hex digits, never all zero.
function M.span_id()
  while true do
    local at = take(8)
    local id = string.format("%016x", (string.unpack("<i8", buffer, at)))
    if id ~= "0000000000000000" then return id end
  end
end

-- trace_and_span_id() -> the ids of a root span: 24 fresh bytes, one unpack, one format.
function M.trace_and_span_id()
  local at = take(24)
  local hi, lo, sid = string.unpack("<i8i8i8", buffer, at)
  if (hi == 0 and lo == 0) or sid == 0 then return M.trace_id(), M.span_id() end
  return string.format("%016x%016x", hi, lo), string.format("%016x", sid)
end

-- Tests: force the fallback generator (or restore the normal source with nil).
function M._use_fallback(on)
  if source then source:close() end
  source = on and false or nil
  buffer, pos = "", 1
end

return M
