-- glsb.trace.sampler: the OpenTelemetry SDK samplers (always_on, always_off, traceidratio and the
-- parentbased_* family), named as OTEL_TRACES_SAMPLER names them.
--
-- A sampler is a table with should_sample(parent, trace_id) -> true (record and sample) or false (drop);
-- parent is the parent span or SpanContext (nil for a root). The specification's defaults: a parent-based
-- sampler follows a sampled parent and drops under an unsampled one, local or remote, and asks its root
-- sampler only for roots. traceidratio decides from the trace id alone, so every process of a trace that
-- uses the same ratio decides the same way: it compares the trace id's last 8 bytes (shifted to 63 bits)
-- with ratio * 2^63, as the Go and Java SDKs do.
local M = {}

local always_on = { name = "always_on", should_sample = function() return true end }
local always_off = { name = "always_off", should_sample = function() return false end }

-- traceidratio(ratio): ratio in [0, 1].
function M.traceidratio(ratio)
  if ratio >= 1 then return { name = "traceidratio", ratio = 1, should_sample = always_on.should_sample } end
  if ratio <= 0 then return { name = "traceidratio", ratio = 0, should_sample = always_off.should_sample } end
  -- math.maxinteger = 2^63 - 1: the bound as an integer, compared unsigned-free (both sides < 2^63)
  local bound = math.floor(ratio * (math.maxinteger + 1.0))
  return {
    name = "traceidratio", ratio = ratio,
    should_sample = function(_, _, trace_id)
      local low = tonumber(trace_id:sub(17, 32), 16) -- 64 bits; wraps to a negative integer above 2^63
      return ((low >> 1) & math.maxinteger) < bound
    end,
  }
end

local function parentbased(root)
  return {
    name = "parentbased_" .. root.name, root = root,
    should_sample = function(_, parent, trace_id)
      if parent == nil then return root:should_sample(nil, trace_id) end
      return parent.sampled == true
    end,
  }
end

-- from_name(name, arg) -> sampler, or nil and a message naming the bad value.
function M.from_name(name, arg)
  name = (name or "parentbased_always_on"):lower()
  local ratio = 1.0
  if name == "traceidratio" or name == "parentbased_traceidratio" then
    if arg ~= nil and arg ~= "" then
      ratio = tonumber(arg)
      if not ratio or ratio ~= ratio or ratio < 0 or ratio > 1 then
        return nil, "OTEL_TRACES_SAMPLER_ARG must be a ratio in [0, 1], got " .. tostring(arg)
      end
    end
  end
  if name == "always_on" then return always_on end
  if name == "always_off" then return always_off end
  if name == "traceidratio" then return M.traceidratio(ratio) end
  if name == "parentbased_always_on" then return parentbased(always_on) end
  if name == "parentbased_always_off" then return parentbased(always_off) end
  if name == "parentbased_traceidratio" then return parentbased(M.traceidratio(ratio)) end
  return nil, "unknown sampler " .. tostring(name) .. " (always_on, always_off, traceidratio, "
    .. "parentbased_always_on, parentbased_always_off, parentbased_traceidratio)"
end

M.always_on = always_on
M.always_off = always_off
M.parentbased = parentbased

return M
