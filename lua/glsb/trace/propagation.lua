-- glsb.trace.propagation: W3C Trace Context headers (traceparent, tracestate), parsed and formatted.
--
-- Rules from the W3C Trace Context recommendation:
--   traceparent = version "-" trace-id "-" parent-id "-" trace-flags, all lowercase hex (2, 32, 16, 2).
--   Version ff is invalid; an all-zero trace-id or parent-id is invalid. A version 00 header is exactly
--   55 characters; a later version may append fields after a "-" (parsed as 00, the rest ignored).
--   Flags bit 0 = sampled. A header that breaks any rule is ignored: the receiver starts a new trace, it
--   never fails the request.
--   tracestate = up to 32 comma-separated list members key=value (empty members allowed); an invalid
--   tracestate is dropped on its own and the traceparent kept. It is passed on unchanged otherwise.
local M = {}

-- SpanContext: what crosses a process boundary. Also a valid parent for start_span.
local SpanContext = {}
SpanContext.__index = SpanContext
M.SpanContext = SpanContext

SpanContext.__tostring = function(self)
  return "SpanContext(" .. M.format(self) .. (self.remote and ", remote" or "") .. ")"
end

-- SpanContext.new{trace_id, span_id, sampled, tracestate, remote} (ids already validated).
function SpanContext.new(t)
  return setmetatable({ trace_id = t.trace_id, span_id = t.span_id, sampled = t.sampled == true,
    tracestate = t.tracestate, remote = t.remote == true }, SpanContext)
end

function SpanContext:is_recording() return false end

function SpanContext:traceparent() return M.format(self), self.tracestate end

function M.is_span_context(x) return getmetatable(x) == SpanContext end

local ZERO_TRACE = string.rep("0", 32)
local ZERO_SPAN = string.rep("0", 16)

local function trim(s) return (s:gsub("^[ \t]+", ""):gsub("[ \t]+$", "")) end

-- parse_traceparent(header) -> {trace_id, span_id, sampled, flags} or nil (malformed: ignore it).
function M.parse_traceparent(header)
  if type(header) ~= "string" then return nil end
  header = trim(header)
  local version, trace_id, span_id, flags = header:match("^(%x%x)%-(%x+)%-(%x+)%-(%x%x)")
  if not version then return nil end
  -- lowercase only (uppercase hex is invalid), and the exact field widths
  if header:sub(1, 55):find("[A-F]") then return nil end
  if #trace_id ~= 32 or #span_id ~= 16 then return nil end
  if version == "ff" then return nil end
  if version == "00" then
    if #header ~= 55 then return nil end
  elseif #header > 55 and header:sub(56, 56) ~= "-" then
    return nil
  end
  if trace_id == ZERO_TRACE or span_id == ZERO_SPAN then return nil end
  local f = tonumber(flags, 16)
  return { trace_id = trace_id, span_id = span_id, sampled = (f & 1) == 1, flags = f }
end

-- A tracestate key: simple (lcalpha then lcalpha/digit/_-*/, at most 256) or multi-tenant
-- (tenant@system: tenant up to 241, system up to 14 characters).
local function valid_key(k)
  if #k == 0 or #k > 256 then return false end
  local tenant, system = k:match("^([^@]*)@([^@]*)$")
  if tenant then
    return #tenant >= 1 and #tenant <= 241 and tenant:match("^[a-z0-9][a-z0-9_%-%*/]*$") ~= nil
      and #system >= 1 and #system <= 14 and system:match("^[a-z][a-z0-9_%-%*/]*$") ~= nil
  end
  return k:match("^[a-z][a-z0-9_%-%*/]*$") ~= nil
end

-- value: 1 to 256 printable ASCII characters except ',' and '=', not ending with a space.
local function valid_value(v)
  return #v >= 1 and #v <= 256 and v:match("^[\32-\43\45-\60\62-\126]*[\33-\43\45-\60\62-\126]$") ~= nil
end

local MAX_MEMBERS = 32

-- parse_tracestate(header) -> the normalized header (members joined by ",") or nil when invalid or empty.
function M.parse_tracestate(header)
  if type(header) ~= "string" then return nil end
  local members, seen = {}, {}
  for raw in (header .. ","):gmatch("([^,]*),") do
    local m = trim(raw)
    if m ~= "" then
      local k, v = m:match("^([^=]+)=(.*)$")
      if not k or not valid_key(k) or not valid_value(v) or seen[k] then return nil end
      seen[k] = true
      members[#members + 1] = k .. "=" .. v
      if #members > MAX_MEMBERS then return nil end
    end
  end
  if #members == 0 then return nil end
  return table.concat(members, ",")
end

-- format(ctx) -> "00-<trace_id>-<span_id>-<flags>"
function M.format(ctx)
  return "00-" .. ctx.trace_id .. "-" .. ctx.span_id .. (ctx.sampled and "-01" or "-00")
end

-- extract(traceparent, tracestate) -> SpanContext (remote) or nil. The first argument may also be a
-- carrier table: HTTP headers (any case) or an environment-style table (TRACEPARENT, TRACESTATE).
function M.extract(traceparent, tracestate)
  if type(traceparent) == "table" then
    local carrier = traceparent
    traceparent, tracestate = nil, nil
    for k, v in pairs(carrier) do
      if type(k) == "string" and type(v) == "string" then
        local low = k:lower()
        if low == "traceparent" then traceparent = v elseif low == "tracestate" then tracestate = v end
      end
    end
  end
  local p = M.parse_traceparent(traceparent)
  if not p then return nil end
  return SpanContext.new { trace_id = p.trace_id, span_id = p.span_id, sampled = p.sampled,
    tracestate = M.parse_tracestate(tracestate), remote = true }
end

return M
