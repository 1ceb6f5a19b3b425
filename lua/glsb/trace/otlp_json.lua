-- glsb.trace.otlp_json: spans -> an OTLP ExportTraceServiceRequest in the OTLP/HTTP JSON encoding.
--
-- The encoding's rules (OTLP specification, "JSON Protobuf Encoding"), which differ from plain proto3
-- JSON: field names lowerCamelCase; traceId/spanId/parentSpanId lowercase hex (not base64); enums
-- (kind, status.code) integers; 64-bit integers (timestamps, intValue) decimal strings. Strings must be
-- UTF-8 (protobuf `string`): a byte sequence that is not is repaired with U+FFFD rather than make the
-- collector reject the whole request. Written by hand rather than through cjson, whose 2.1 encoder
-- prints integers with 14 significant digits.
local span_mod = require "glsb.trace.span"

local M = {}

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }

-- Replaces every byte that does not start a valid UTF-8 sequence with U+FFFD.
local function repair_utf8(s)
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
M.repair_utf8 = repair_utf8

local function str(s)
  if not utf8.len(s) then s = repair_utf8(s) end
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end
M.string = str

local function double(v)
  if v == math.huge then return '"Infinity"' end
  if v == -math.huge then return '"-Infinity"' end
  return string.format("%.17g", v)
end

local function any_value(v)
  local t = type(v)
  if t == "string" then return '{"stringValue":' .. str(v) .. "}" end
  if t == "boolean" then return v and '{"boolValue":true}' or '{"boolValue":false}' end
  if t == "number" then
    if math.type(v) == "integer" then return '{"intValue":"' .. string.format("%d", v) .. '"}' end
    return '{"doubleValue":' .. double(v) .. "}"
  end
  -- arrays (span.attribute_value admits only homogeneous arrays of the above)
  local parts = {}
  for i = 1, #v do parts[i] = any_value(v[i]) end
  return '{"arrayValue":{"values":[' .. table.concat(parts, ",") .. "]}}"
end

-- attributes(map, keys) -> '[{"key":..,"value":..},...]' in keys order (all keys of map when nil).
local function attributes(map, keys)
  if not keys then
    keys = {}
    for k in pairs(map) do keys[#keys + 1] = k end
    table.sort(keys)
  end
  local parts = {}
  for i, k in ipairs(keys) do
    parts[i] = '{"key":' .. str(k) .. ',"value":' .. any_value(map[k]) .. "}"
  end
  return "[" .. table.concat(parts, ",") .. "]"
end
M.attributes = attributes

local function span_json(s)
  local out = {
    '{"traceId":"', s.trace_id, '","spanId":"', s.span_id, '"',
  }
  if s.parent_span_id then out[#out + 1] = ',"parentSpanId":"' .. s.parent_span_id .. '"' end
  if s.tracestate then out[#out + 1] = ',"traceState":' .. str(s.tracestate) end
  out[#out + 1] = ',"name":' .. str(s.name)
  out[#out + 1] = ',"kind":' .. (span_mod.KIND[s.kind] or 1)
  out[#out + 1] = string.format(',"startTimeUnixNano":"%d","endTimeUnixNano":"%d"', s.start_ns, s.end_ns)
  if #s.attribute_keys > 0 then out[#out + 1] = ',"attributes":' .. attributes(s.attributes, s.attribute_keys) end
  if s.dropped_attributes > 0 then out[#out + 1] = ',"droppedAttributesCount":' .. s.dropped_attributes end
  if #s.events > 0 then
    local evs = {}
    for i, e in ipairs(s.events) do
      evs[i] = string.format('{"timeUnixNano":"%d","name":%s', e.time_ns, str(e.name))
        .. (#e.attribute_keys > 0 and (',"attributes":' .. attributes(e.attributes, e.attribute_keys)) or "") .. "}"
    end
    out[#out + 1] = ',"events":[' .. table.concat(evs, ",") .. "]"
  end
  if s.dropped_events > 0 then out[#out + 1] = ',"droppedEventsCount":' .. s.dropped_events end
  local code = span_mod.STATUS[s.status_code] or 0
  if code ~= 0 then
    out[#out + 1] = ',"status":{"code":' .. code
      .. (s.status_message and (',"message":' .. str(s.status_message)) or "") .. "}"
  end
  out[#out + 1] = "}"
  return table.concat(out)
end
M.span = span_json

-- encode(spans, resource, scope) -> the request body. resource: attribute map; scope: {name, version}.
function M.encode(spans, resource, scope)
  local parts = {}
  for i, s in ipairs(spans) do parts[i] = span_json(s) end
  return '{"resourceSpans":[{"resource":{"attributes":' .. attributes(resource) .. '},"scopeSpans":[{"scope":{"name":'
    .. str(scope.name) .. (scope.version and (',"version":' .. str(scope.version)) or "") .. '},"spans":['
    .. table.concat(parts, ",") .. "]}]}]}"
end

return M
