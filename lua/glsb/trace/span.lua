-- glsb.trace.span: the built-in tracer and its spans: the interface every tracer glsb talks to keeps
-- (glsb.trace.set_tracer documents it), implemented the way the OpenTelemetry SDK specifies spans.
--
--   tracer:start_span(name, {kind = "internal"|"client", parent = span|SpanContext|nil, attributes = {}})
--   span:set_attribute(key, value)   string, boolean, integer, float, or an array of one of those
--   span:add_event(name, attributes)
--   span:set_status("ok"|"error", message)
--   span:finish()
--   span:traceparent() -> traceparent, tracestate
--
-- A span the sampler drops is a NonRecordingSpan: it has ids (so propagation still names the trace,
-- with the sampled flag off) and ignores every call. Ended spans go to the tracer's processors.
local ids = require "glsb.trace.ids"
local clock = require "glsb.trace.clock"
local propagation = require "glsb.trace.propagation"

local M = {}

M.KIND = { internal = 1, server = 2, client = 3, producer = 4, consumer = 5 }
M.STATUS = { unset = 0, ok = 1, error = 2 }

-- Bounds from the SDK's span limits (defaults there: 128 attributes, 128 events); strings are clipped
-- so one huge error message cannot inflate every export.
M.MAX_ATTRIBUTES = 128
M.MAX_EVENTS = 128
M.MAX_STRING = 4096

local function clip(v)
  if type(v) == "string" and #v > M.MAX_STRING then return v:sub(1, M.MAX_STRING) end
  return v
end

-- A valid attribute value as OTLP's AnyValue allows it for attributes, or nil (ignored).
local function attribute_value(v)
  local t = type(v)
  if t == "string" then return clip(v) end
  if t == "boolean" then return v end
  if t == "number" then
    if v ~= v then return nil end
    return v
  end
  if t == "table" then
    local kind, out = nil, {}
    for i = 1, #v do
      local x = v[i]
      local k = type(x) == "number" and math.type(x) or type(x)
      if kind == nil then kind = k elseif k ~= kind then return nil end
      if k ~= "string" and k ~= "boolean" and k ~= "integer" and k ~= "float" then return nil end
      out[i] = clip(x)
    end
    return out
  end
  return nil
end
M.attribute_value = attribute_value

---------------------------------------------------------------------------------------------------
-- NonRecordingSpan

local NonRecordingSpan = {}
NonRecordingSpan.__index = NonRecordingSpan
M.NonRecordingSpan = NonRecordingSpan

local function noop() end
NonRecordingSpan.set_attribute = noop
NonRecordingSpan.set_attributes = noop
NonRecordingSpan.add_event = noop
NonRecordingSpan.set_status = noop
NonRecordingSpan.finish = noop
function NonRecordingSpan:is_recording() return false end
function NonRecordingSpan:traceparent() return propagation.format(self), self.tracestate end
NonRecordingSpan.__tostring = function(self) return "NonRecordingSpan(" .. propagation.format(self) .. ")" end

---------------------------------------------------------------------------------------------------
-- Span

local Span = {}
Span.__index = Span
M.Span = Span

function Span:is_recording() return self.end_ns == nil end

-- Fields most spans never set are read through the class (Span.__index): a span table holds only what
-- it has, so it fits the hash size its constructor gives it (no rehash while it runs).
Span.dropped_attributes = 0
Span.dropped_events = 0
Span.status_code = "unset"
Span.sampled = true

function Span:set_attribute(key, value)
  if self.end_ns or type(key) ~= "string" or key == "" then return end
  local t = type(value)
  local v
  if t == "string" then -- the common case first, without a call
    v = #value > M.MAX_STRING and value:sub(1, M.MAX_STRING) or value
  elseif t == "boolean" or (t == "number" and value == value) then
    v = value
  else
    v = attribute_value(value)
    if v == nil then return end
  end
  local attrs = self.attributes
  if attrs[key] == nil then
    local keys = self.attribute_keys
    local n = #keys
    if n >= M.MAX_ATTRIBUTES then
      self.dropped_attributes = self.dropped_attributes + 1
      return
    end
    keys[n + 1] = key
  end
  attrs[key] = v
end

function Span:set_attributes(t)
  if type(t) ~= "table" then return end
  for k, v in pairs(t) do self:set_attribute(k, v) end
end

function Span:add_event(name, attributes)
  if self.end_ns or type(name) ~= "string" then return end
  if not self.events then self.events = {} end -- most spans have none
  if #self.events >= M.MAX_EVENTS then
    self.dropped_events = self.dropped_events + 1
    return
  end
  local ev = { name = name, time_ns = clock.now_ns(), attributes = {}, attribute_keys = {} }
  if type(attributes) == "table" then
    local keys = {}
    for k in pairs(attributes) do if type(k) == "string" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = attribute_value(attributes[k])
      if v ~= nil then
        ev.attributes[k] = v
        ev.attribute_keys[#ev.attribute_keys + 1] = k
      end
    end
  end
  self.events[#self.events + 1] = ev
end

-- set_status(code, message): "ok" is final; "unset" is ignored; a message is kept only with "error"
-- (the specification's rules for Span.SetStatus).
function Span:set_status(code, message)
  if self.end_ns or self.status_code == "ok" then return end
  if code == "ok" then
    self.status_code, self.status_message = "ok", nil
  elseif code == "error" then
    self.status_code = "error"
    self.status_message = message ~= nil and clip(tostring(message)) or nil
  end
end

function Span:finish(end_ns)
  if self.end_ns then return end
  -- integer nanoseconds (the encoder prints them with %d)
  local t = end_ns and math.floor(end_ns) or clock.now_ns()
  if t < self.start_ns then t = self.start_ns end
  self.end_ns = t
  local processors = self.processors
  for i = 1, #processors do processors[i]:on_end(self) end
end

function Span:traceparent() return propagation.format(self), self.tracestate end

Span.__tostring = function(self)
  return string.format("Span(%s %s/%s)", self.name, self.trace_id, self.span_id)
end

function M.is_span(x)
  local mt = getmetatable(x)
  return mt == Span or mt == NonRecordingSpan
end

---------------------------------------------------------------------------------------------------
-- Tracer

local Tracer = {}
Tracer.__index = Tracer
M.Tracer = Tracer

-- Tracer.new{sampler, processors} -> tracer
function M.new_tracer(opts)
  return setmetatable({ sampler = opts.sampler, processors = opts.processors or {} }, Tracer)
end

-- start(name, kind, parent, start_ns[, attributes, keys]) -> span: start_span without the options
-- table, for the callers inside glsb.trace (parent already checked as in start_span). attributes and
-- keys, when given, become the span's own: valid values (strings within MAX_STRING), keys listed once.
function Tracer:start(name, kind, parent, start_ns, attributes, keys)
  local trace_id, span_id
  if parent then
    trace_id, span_id = parent.trace_id, ids.span_id()
  else
    trace_id, span_id = ids.trace_and_span_id()
  end
  local tracestate = parent and parent.tracestate or nil
  if not self.sampler:should_sample(parent, trace_id) then
    return setmetatable({ trace_id = trace_id, span_id = span_id, sampled = false,
      tracestate = tracestate }, NonRecordingSpan)
  end
  -- every field a span may get, nil ones included, so the constructor sizes the table once
  return setmetatable({
    name = name, kind = kind or "internal",
    trace_id = trace_id, span_id = span_id, parent_span_id = parent and parent.span_id or nil,
    tracestate = tracestate, start_ns = start_ns and math.floor(start_ns) or clock.now_ns(), end_ns = nil,
    -- room for the attributes of an operation span (provider, ids, status...) from the start
    attributes = attributes or {}, attribute_keys = keys or { nil, nil, nil, nil, nil, nil, nil, nil },
    events = nil, status_code = nil, status_message = nil,
    processors = self.processors,
  }, Span)
end

-- valid_parent(p) -> p when it can be a parent (a span or SpanContext with ids), else nil.
local function valid_parent(parent)
  if parent ~= nil and (type(parent) ~= "table" or type(parent.trace_id) ~= "string"
      or type(parent.span_id) ~= "string") then
    return nil -- not one of ours (or a SpanContext): start a new trace rather than fail the call
  end
  return parent
end
M.valid_parent = valid_parent

function Tracer:start_span(name, opts)
  opts = opts or {}
  local span = self:start(name, opts.kind, valid_parent(opts.parent), opts.start_ns)
  if opts.attributes and getmetatable(span) == Span then span:set_attributes(opts.attributes) end
  return span
end

return M
