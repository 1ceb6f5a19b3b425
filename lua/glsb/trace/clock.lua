-- glsb.trace.clock: span timestamps, nanoseconds since the Unix epoch (OTLP's startTimeUnixNano).
--
-- The wall clock is read once; later times add the monotonic clock's progress to it (as the JS SDK
-- adds performance.now() to timeOrigin), so a span's duration never goes negative when NTP steps the
-- wall clock while it runs.
local core = require "glsb.core"
local loop = require "glsb.loop"

local M = {}

local origin_wall = core.realtime_ns()
local origin_mono = loop.now()

-- now_ns() -> integer nanoseconds since the epoch.
function M.now_ns()
  return origin_wall + math.floor((loop.now() - origin_mono) * 1e9)
end

return M
