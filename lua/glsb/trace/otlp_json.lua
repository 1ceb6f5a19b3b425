-- glsb.trace.otlp_json: spans -> an OTLP ExportTraceServiceRequest in the OTLP/HTTP JSON encoding.
--
-- The encoding's rules (OTLP specification, "JSON Protobuf Encoding"), which differ from plain proto3
-- JSON: field names lowerCamelCase; traceId/spanId/parentSpanId lowercase hex (not base64); enums
-- (kind, status.code) integers; 64-bit integers (timestamps, intValue) decimal strings. Strings must be
-- UTF-8 (protobuf `string`): a byte sequence that is not is repaired with U+FFFD rather than make the
-- collector reject the whole request. Written by hand rather than through cjson, whose 2.1 encoder
-- prints integers with 14 significant digits.
local span_mod = require "glsb.trace.span"
local codec = require "glsb.codec"

local M = {}

local KIND_TEXT = {}
for name, code in pairs(span_mod.KIND) do KIND_TEXT[name] = tostring(code) end

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }

local repair_utf8 = codec.repair_utf8
M.repair_utf8 = repair_utf8

local function escape(s)
  if not utf8.len(s) then s = repair_utf8(s) end
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

-- Escaped forms of the strings seen lately: keys and most values (provider, status, names) repeat
-- from span to span. Bounded: emptied when it grows past MEMO_MAX entries.
local MEMO_MAX = 1024
local memo, memo_n = {}, 0

local function str(s)
  local e = memo[s]
  if e then return e end
  e = escape(s)
  if #s <= 64 then
    if memo_n >= MEMO_MAX then memo, memo_n = {}, 0 end
    memo[s] = e
    memo_n = memo_n + 1
  end
  return e
end
M.string = str

local function double(v)
  if v == math.huge then return '"Infinity"' end
  if v == -math.huge then return '"-Infinity"' end
  return string.format("%.17g", v)
end

-- The writers append to `out` (an array of strings joined once at the end), `n` being its length;
-- each returns the new length.

local function any_value(out, n, v)
  local t = type(v)
  if t == "string" then
    out[n + 1], out[n + 2], out[n + 3] = '{"stringValue":', str(v), "}"
    return n + 3
  elseif t == "boolean" then
    out[n + 1] = v and '{"boolValue":true}' or '{"boolValue":false}'
    return n + 1
  elseif t == "number" then
    if math.type(v) == "integer" then
      out[n + 1], out[n + 2], out[n + 3] = '{"intValue":"', tostring(v), '"}'
    else
      out[n + 1], out[n + 2], out[n + 3] = '{"doubleValue":', double(v), "}"
    end
    return n + 3
  end
  -- arrays (span.attribute_value admits only homogeneous arrays of the above)
  out[n + 1] = '{"arrayValue":{"values":['
  n = n + 1
  for i = 1, #v do
    if i > 1 then out[n + 1] = ","; n = n + 1 end
    n = any_value(out, n, v[i])
  end
  out[n + 1] = "]}}"
  return n + 1
end

-- attributes: '[{"key":..,"value":..},...]' in keys order (all keys of map, sorted, when keys is nil).
local function attributes(out, n, map, keys)
  if not keys then
    keys = {}
    for k in pairs(map) do keys[#keys + 1] = k end
    table.sort(keys)
  end
  out[n + 1] = "["
  n = n + 1
  for i, k in ipairs(keys) do
    out[n + 1], out[n + 2], out[n + 3] = i > 1 and ',{"key":' or '{"key":', str(k), ',"value":'
    n = any_value(out, n + 3, map[k])
    out[n + 1] = "}"
    n = n + 1
  end
  out[n + 1] = "]"
  return n + 1
end

function M.attributes(map, keys)
  local out = {}
  attributes(out, 0, map, keys)
  return table.concat(out)
end

-- Whole `{"key":..,"value":..}` members of the attribute values that repeat from span to span (a
-- provider, a sandbox id, a status, a small exit code): one table read per attribute instead of six
-- strings. Strings up to 64 bytes, booleans and integers (never floats: 0.0 and 0 are the same table
-- key, and they encode differently); bounded like the string memo.
local pair_memo, pair_n = {}, 0

local function attribute_member(k, v)
  local t = type(v)
  local by_key = (t == "string" and #v <= 64 or t == "boolean" or math.type(v) == "integer") and pair_memo[k]
  local e = by_key and by_key[v]
  if e then return e end
  local out = { '{"key":', str(k), ',"value":' }
  local n = any_value(out, 3, v)
  out[n + 1] = "}"
  e = table.concat(out)
  if t == "string" and #v <= 64 or t == "boolean" or math.type(v) == "integer" then
    if pair_n >= MEMO_MAX then pair_memo, pair_n = {}, 0 end
    by_key = pair_memo[k]
    if not by_key then
      by_key = {}
      pair_memo[k] = by_key
    end
    by_key[v] = e
    pair_n = pair_n + 1
  end
  return e
end

local format = string.format

local function span_json(out, n, s)
  -- the fixed fields in two formats (ids and nanosecond integers printed by %s/%d, no tostring)
  if s.parent_span_id then
    out[n + 1] = format('{"traceId":"%s","spanId":"%s","parentSpanId":"%s"', s.trace_id, s.span_id,
      s.parent_span_id)
  else
    out[n + 1] = format('{"traceId":"%s","spanId":"%s"', s.trace_id, s.span_id)
  end
  n = n + 1
  if s.tracestate then
    out[n + 1], out[n + 2] = ',"traceState":', str(s.tracestate)
    n = n + 2
  end
  out[n + 1] = format(',"name":%s,"kind":%s,"startTimeUnixNano":"%d","endTimeUnixNano":"%d"', str(s.name),
    KIND_TEXT[s.kind] or "1", s.start_ns, s.end_ns)
  n = n + 1
  local keys = s.attribute_keys
  if #keys > 0 then
    local map = s.attributes
    out[n + 1] = ',"attributes":['
    n = n + 1
    for i = 1, #keys do
      local k = keys[i]
      if i > 1 then
        out[n + 1] = ","
        n = n + 1
      end
      out[n + 1] = attribute_member(k, map[k])
      n = n + 1
    end
    out[n + 1] = "]"
    n = n + 1
  end
  if s.dropped_attributes > 0 then
    out[n + 1], out[n + 2] = ',"droppedAttributesCount":', tostring(s.dropped_attributes)
    n = n + 2
  end
  if s.events and #s.events > 0 then
    out[n + 1] = ',"events":['
    n = n + 1
    for i, e in ipairs(s.events) do
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] =
        i > 1 and ',{"timeUnixNano":"' or '{"timeUnixNano":"', tostring(e.time_ns), '","name":', str(e.name)
      n = n + 4
      if #e.attribute_keys > 0 then
        out[n + 1] = ',"attributes":'
        n = attributes(out, n + 1, e.attributes, e.attribute_keys)
      end
      out[n + 1] = "}"
      n = n + 1
    end
    out[n + 1] = "]"
    n = n + 1
  end
  if s.dropped_events > 0 then
    out[n + 1], out[n + 2] = ',"droppedEventsCount":', tostring(s.dropped_events)
    n = n + 2
  end
  local code = span_mod.STATUS[s.status_code] or 0
  if code ~= 0 then
    out[n + 1], out[n + 2] = ',"status":{"code":', tostring(code)
    n = n + 2
    if s.status_message then
      out[n + 1], out[n + 2] = ',"message":', str(s.status_message)
      n = n + 2
    end
    out[n + 1] = "}"
    n = n + 1
  end
  out[n + 1] = "}"
  return n + 1
end

function M.span(s)
  local out = {}
  span_json(out, 0, s)
  return table.concat(out)
end

-- encode(spans, resource, scope) -> the request body. resource: attribute map; scope: {name, version}.
-- The pieces of the request being encoded: one array kept from export to export (emptied after each),
-- so a batch does not grow a new array of a few thousand slots by doubling every time. encode never
-- yields, so two tasks cannot share it at once.
local scratch = {}

function M.encode(spans, resource, scope)
  local out = scratch
  scratch = {} -- in use: an encode that raises midway leaves it behind rather than half-full
  out[1] = '{"resourceSpans":[{"resource":{"attributes":'
  local n = attributes(out, 1, resource)
  out[n + 1], out[n + 2] = '},"scopeSpans":[{"scope":{"name":', str(scope.name)
  n = n + 2
  if scope.version then
    out[n + 1], out[n + 2] = ',"version":', str(scope.version)
    n = n + 2
  end
  out[n + 1] = '},"spans":['
  n = n + 1
  for i = 1, #spans do
    if i > 1 then out[n + 1] = ","; n = n + 1 end
    n = span_json(out, n, spans[i])
  end
  out[n + 1] = "]}]}]}"
  n = n + 1
  local body = table.concat(out, "", 1, n)
  for i = 1, n do out[i] = nil end -- the capacity stays; the strings go
  scratch = out
  return body
end

return M
