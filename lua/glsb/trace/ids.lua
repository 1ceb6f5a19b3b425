-- glsb.trace.ids: W3C trace ids (16 bytes) and span ids (8 bytes) as lowercase hex, from glsb.ids.
--
-- W3C Trace Context asks for ids that are random (and, for the trace id, unique across processes):
-- glsb.ids reads the kernel's generator, never math.random (which the user's code shares and reseeds).
-- All-zero ids are invalid (W3C), so one is drawn again. Ids are the raw bytes read in place as 64-bit
-- integers and printed in hex (%016x of a negative integer is its two's complement: all 16 digits,
-- lowercase): one unpack and one format per id.
local random = require "glsb.ids"

local take = random.take

local M = {}

-- bytes(n) -> n random bytes.
M.bytes = random.bytes

-- trace_id() -> 32 lowercase hex digits, never all zero.
function M.trace_id()
  while true do
    local buffer, at = take(16)
    local id = string.format("%016x%016x", string.unpack("<i8i8", buffer, at))
    if id ~= "00000000000000000000000000000000" then return id end
  end
end

-- span_id() -> 16 lowercase hex digits, never all zero.
function M.span_id()
  while true do
    local buffer, at = take(8)
    local id = string.format("%016x", (string.unpack("<i8", buffer, at)))
    if id ~= "0000000000000000" then return id end
  end
end

-- trace_and_span_id() -> the ids of a root span: 24 fresh bytes, one unpack, one format.
function M.trace_and_span_id()
  local buffer, at = take(24)
  local hi, lo, sid = string.unpack("<i8i8i8", buffer, at)
  if (hi == 0 and lo == 0) or sid == 0 then return M.trace_id(), M.span_id() end
  return string.format("%016x%016x", hi, lo), string.format("%016x", sid)
end

-- Tests: force the fallback generator (or restore the normal source with nil).
M._use_fallback = random._use_fallback

return M
