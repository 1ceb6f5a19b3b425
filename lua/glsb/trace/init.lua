-- glsb.trace: OpenTelemetry spans for glsb's operations, off (and free) until configured.
--
--   local trace = require "glsb.trace"            -- also glsb.trace
--   trace.configure{ exporter = "otlp", endpoint = "http://127.0.0.1:4318", service_name = "agent" }
--   trace.with_span(trace.extract(incoming_traceparent), function() ... end)   -- join a caller's trace
--   local tp, ts = trace.inject()                 -- traceparent/tracestate of the current span
--   trace.shutdown()                              -- flush (also done when the Lua state closes)
--
-- configure{...} options: declared in glsb.trace.config (M.OPTIONS, checked by glsb.options), each with
-- the OTEL_* environment variable it overrides (seconds, not ms); docs/tracing.md's table is rendered from them.
-- Without a configure call, tracing starts by itself when the environment asks for it
-- (OTEL_TRACES_EXPORTER other than none, or an OTLP endpoint variable), unless OTEL_SDK_DISABLED=true.
--
-- Bring your own tracer: set_tracer(t) sends glsb's spans to t instead (the built-in exporters stay
-- idle). t needs one method, and the spans it returns five (the interface the built-in tracer keeps):
--   t:start_span(name, {kind = "internal"|"client", parent = <a span t returned, a SpanContext, or nil>,
--                       attributes = {key = value}}) -> span
--   span:set_attribute(key, value)     value: string, boolean, number, or an array of one of those
--   span:add_event(name, attributes)   glsb records errors as an "exception" event
--   span:set_status("ok"|"error", message)
--   span:finish()
--   span:traceparent() -> traceparent[, tracestate]   optional: without it nothing is propagated
local config = require "glsb.trace.config"
local seam = require "glsb.trace.seam"
local propagation = require "glsb.trace.propagation"

local M = {}

M.SpanContext = propagation.SpanContext

local state = {
  tracer = nil,        -- the active tracer (built-in or the user's), nil when off
  builtin = nil,       -- {tracer, processors, settings} of the configured pipeline
  external = nil,      -- the tracer given to set_tracer
  settings = nil,      -- resolved settings (propagate, trace_into_sandbox, ...); defaults when external
  root_parent = nil,   -- parent of spans started with no current span (configure{parent} / TRACEPARENT)
  sentinel = nil,      -- its __gc flushes when the Lua state closes (end of a glsb-lua script)
}

local function warn(msg) require("glsb.log").warn("trace: " .. msg) end


local function build_processors(s)
  local processors = {}
  for _, name in ipairs(s.exporters) do
    if name == "console" then
      processors[#processors + 1] = require("glsb.trace.console").new(s.console)
    elseif name == "otlp" then
      local exporter = require("glsb.trace.otlp").new {
        url = s.endpoint, headers = s.headers, timeout = s.timeout, retry = s.export_retry, warn = warn,
        resource = s.resource, scope = { name = "glsb", version = require("glsb.constants").VERSION },
      }
      processors[#processors + 1] = require("glsb.trace.batch").new {
        exporter = exporter, warn = warn, clear_context = require("glsb.trace.context").clear,
        max_queue_size = s.max_queue_size, max_export_batch_size = s.max_export_batch_size,
        schedule_delay = s.schedule_delay, export_timeout = s.export_timeout,
      }
    end
  end
  return processors
end

local function resolve_parent(p)
  if p == nil then return nil end
  if propagation.is_span_context(p) then return p end
  if type(p) == "string" then return propagation.extract(p) end
  if type(p) == "table" and p.traceparent then return propagation.extract(p.traceparent, p.tracestate) end
  return nil
end

local function activate()
  state.tracer = state.external or (state.builtin and state.builtin.tracer) or nil
  seam.on = state.tracer ~= nil
  if seam.on then
    local instrument = require "glsb.trace.instrument"
    instrument.bind(M, state)
    seam.operation, seam.http = instrument.operation, instrument.http
    seam.annotate, seam.sandbox_env = instrument.annotate, instrument.sandbox_env
    if not state.sentinel then
      -- Finalizers run in reverse order of creation when the state closes: made at configure time,
      -- this one runs after those of what the script created later (its sandboxes, requests).
      state.sentinel = setmetatable({}, { __gc = function() pcall(M.shutdown) end })
    end
  end
end

-- configure(opts) -> true when spans are being made. Replaces any earlier configuration (whose queued
-- spans are flushed first). Misuse (an unknown option, a wrong type) raises an argument error.
function M.configure(opts)
  opts = config.check(opts)
  local env = config.from_env(os.getenv, warn)
  local s = config.resolve(opts, env, warn)
  if state.builtin then M.shutdown() end
  state.settings = s
  state.root_parent = resolve_parent(s.parent)
  if s.parent ~= nil and not state.root_parent and opts.parent ~= nil then
    require("glsb.options").arg_error("glsb.trace.configure: option 'parent' is not a valid traceparent")
  end
  if s.disabled then
    state.builtin = nil
    activate()
    return seam.on
  end
  local processors = build_processors(s)
  state.builtin = {
    tracer = require("glsb.trace.span").new_tracer { sampler = s.sampler, processors = processors },
    processors = processors,
  }
  activate()
  return true
end

-- _ensure(): the seams call this on their first traced call when the environment turned tracing on.
function M._ensure()
  if state.tracer then return end
  if not state.settings then
    M.configure()
  else
    activate()
  end
end

-- The seam starts tracing through this (it cannot load this module itself: see glsb.trace.seam).
seam.start = function()
  M._ensure()
  if seam.on then return require "glsb.trace.instrument" end
  return nil
end

-- set_tracer(t): glsb's spans go to t (see the interface above); nil gives them back to the configured
-- pipeline (or turns tracing off when there is none).
function M.set_tracer(t)
  if t ~= nil and (type(t) ~= "table" and type(t) ~= "userdata") then
    require("glsb.options").arg_error("glsb.trace.set_tracer: expected a tracer (a table with start_span) or nil")
  end
  if t ~= nil and type(t.start_span) ~= "function" then
    require("glsb.options").arg_error("glsb.trace.set_tracer: the tracer has no start_span method")
  end
  state.external = t
  if t and not state.settings then
    state.settings = config.resolve({ exporter = "none" }, {}, warn)
  end
  activate()
end

-- enabled() -> true while spans are being made.
function M.enabled() return state.tracer ~= nil end

-- force_flush(timeout) -> true when every queued span was exported.
function M.force_flush(timeout)
  local ok = true
  for _, p in ipairs(state.builtin and state.builtin.processors or {}) do
    ok = p:force_flush(timeout) and ok
  end
  return ok
end

-- shutdown(timeout): flushes the queued spans (within timeout seconds, default 5; <= 0: no limit) and turns the
-- built-in pipeline off. Called by itself when the Lua state closes (the end of a glsb-lua script,
-- or lua_close); os.exit without closing the state skips it.
function M.shutdown(timeout)
  local b = state.builtin
  if not b then return true end
  local ok = true
  for _, p in ipairs(b.processors) do
    ok = p:shutdown(timeout or math.min(5, state.settings.export_timeout or 5)) and ok
  end
  state.builtin = nil
  state.settings = state.external and state.settings or nil
  state.stats = M.stats(b)
  activate()
  return ok
end

-- stats() -> {queued, exported, dropped, failed_exports, exports} summed over the exporters.
function M.stats(b)
  b = b or state.builtin
  if not b then return state.stats or { queued = 0, exported = 0, dropped = 0, failed_exports = 0, exports = 0 } end
  local out = { queued = 0, exported = 0, dropped = 0, failed_exports = 0, exports = 0 }
  for _, p in ipairs(b.processors) do
    for k, v in pairs(p.stats) do out[k] = (out[k] or 0) + v end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- context

-- current() -> the span (or SpanContext) glsb's next span would be a child of, or nil.
function M.current()
  local ctx = require "glsb.trace.context"
  return ctx.current() or state.root_parent
end

-- with_span(span, fn, ...) -> fn's results. span (a span or a SpanContext from extract; nil for
-- none) is the current span while fn runs, in this task and the tasks it spawns.
function M.with_span(span, fn, ...)
  if type(fn) ~= "function" then error("glsb.trace.with_span: expected a function", 2) end
  return require("glsb.trace.context").with(span, fn, ...)
end

-- extract(traceparent[, tracestate]) -> SpanContext, or nil when the header is malformed (W3C: a bad
-- header is ignored, never an error). traceparent may also be a headers or environment table.
function M.extract(traceparent, tracestate)
  return propagation.extract(traceparent, tracestate)
end

-- inject([carrier]) -> traceparent, tracestate of the current span (nil when there is none). With a
-- carrier table, also sets carrier.traceparent / carrier.tracestate.
function M.inject(carrier)
  local span = M.current()
  if span == nil or type(span.traceparent) ~= "function" then return nil end
  local tp, ts = span:traceparent()
  if type(carrier) == "table" and tp then
    carrier.traceparent = tp
    carrier.tracestate = ts
  end
  return tp, ts
end

-- A span that does nothing: what start_span returns while tracing is off.
local NOOP = setmetatable({}, { __index = function() return function() end end,
  __tostring = function() return "NoopSpan" end })

-- start_span(name, {kind, attributes, parent}) -> a span of the active tracer, a child of the current
-- span unless opts.parent says otherwise. While tracing is off: a span that does nothing. End it with
-- span:finish(); make it current with with_span.
function M.start_span(name, opts)
  if type(name) ~= "string" then error("glsb.trace.start_span: name must be a string", 2) end
  if opts ~= nil and type(opts) ~= "table" then error("glsb.trace.start_span: opts must be a table", 2) end
  M._ensure_if_wanted()
  if not state.tracer then return NOOP end
  local o = { kind = opts and opts.kind or "internal", attributes = opts and opts.attributes,
    parent = opts and opts.parent or M.current() }
  return state.tracer:start_span(name, o)
end

-- A tracker that does nothing: what steps returns while tracing is off.
local NOOP_STEPS = setmetatable({ step = function() end, finish = function() end },
  { __close = function() end })

-- steps(name) -> a tracker for the steps of a long operation that a provider watches from outside (a
-- template build it polls): tracker:step(id[, attributes]) ends the previous step's span and starts a
-- span `name` for step id (attribute glsb.step), a child of the current span; the same id again does
-- nothing; tracker:finish([err]) ends the last one. Declared `local steps <close> = trace.steps(...)`,
-- the last step ends with the block, marked with its error when the block raised. While tracing is
-- off: a shared tracker that does nothing.
function M.steps(name)
  if type(name) ~= "string" then error("glsb.trace.steps: name must be a string", 2) end
  M._ensure_if_wanted()
  if not state.tracer then return NOOP_STEPS end
  return require("glsb.trace.instrument").steps(name)
end

function M._ensure_if_wanted()
  if seam.on then M._ensure() end
end

return M
