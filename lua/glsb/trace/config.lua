-- glsb.trace.config: tracing settings from glsb.trace.configure{...} and the OpenTelemetry SDK
-- environment variables, with the specification's precedence: what the code says explicitly wins over
-- the environment, which wins over the default. Per-signal variables (OTEL_EXPORTER_OTLP_TRACES_*) win
-- over the generic ones. A malformed variable is reported once as a warning and its default used (the
-- specification's rule), never an error; a bad configure{} option is a Lua argument error naming it.
local sampler = require "glsb.trace.sampler"
local options = require "glsb.options"

local M = {}

local DEFAULT_BASE = "http://localhost:4318"

-- configure{...}'s options, declared in glsb.options' form (checked by it: an unknown key names the
-- closest one, a wrong type or range is an argument error at the caller's line). The two timeouts follow
-- glsb's time rule (<= 0: no limit); the environment's are the specification's (a positive number of ms).
M.OPTIONS = {
  disabled = { "boolean", "true turns everything off (`OTEL_SDK_DISABLED`)", default = "false" },
  exporter = { "string|string_list", "`otlp`, `console`, `none` or a list of them (`OTEL_TRACES_EXPORTER`)",
    default = "otlp" },
  endpoint = { "string", "collector base URL, `/v1/traces` appended (`OTEL_EXPORTER_OTLP_ENDPOINT`)",
    default = DEFAULT_BASE },
  traces_endpoint = { "string", "the whole traces URL (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)" },
  headers = { "string_map", "sent with each export (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`)" },
  protocol = { "string", "`http/json`, the one supported (`OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`)",
    default = "http/json" },
  timeout = { "seconds", "per export request; `<= 0`: none (`OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, in ms)",
    default = "10" },
  service_name = { "string", "`service.name` (`OTEL_SERVICE_NAME`)", default = "unknown_service:<program>" },
  resource = { "table", "resource attributes (`OTEL_RESOURCE_ATTRIBUTES`)" },
  sampler = { "string|table", "a standard sampler's name, or a table with `should_sample` (`OTEL_TRACES_SAMPLER`)",
    default = "parentbased_always_on" },
  sampler_arg = { "number", "the ratio of the ratio samplers (`OTEL_TRACES_SAMPLER_ARG`)", min = 0, max = 1 },
  schedule_delay = { "positive", "seconds between two exports of a batch not yet full (`OTEL_BSP_SCHEDULE_DELAY`)",
    default = "5" },
  export_timeout = { "seconds", "one export, its retries included; `<= 0`: none (`OTEL_BSP_EXPORT_TIMEOUT`)",
    default = "30" },
  max_queue_size = { "integer", "spans queued at most; more are dropped and counted (`OTEL_BSP_MAX_QUEUE_SIZE`)",
    min = 1, default = "2048" },
  max_export_batch_size = { "integer", "spans per export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`)", min = 1,
    default = "512" },
  propagate = { "boolean|table", "`traceparent`/`tracestate` on provider requests; or `{e2b = false, ...}`",
    default = "true" },
  trace_into_sandbox = { "boolean", "`TRACEPARENT`/`TRACESTATE` in `execute_code`/`execute_command`'s env",
    default = "false" },
  console = { "userdata|table", "where the console exporter writes", default = "io.stderr" },
  parent = { "string|table", "a traceparent or SpanContext that roots every glsb span (`TRACEPARENT`)" },
  export_retry = { "table", "retry policy fields of an export", default = "{attempts = 5, base_delay = 1, ...}" },
}

local WHAT = "glsb.trace.configure"

-- check(opts) -> opts: argument errors (at the caller's line) for unknown keys, wrong types and ranges.
function M.check(opts)
  return options.check(opts, M.OPTIONS, WHAT)
end

---------------------------------------------------------------------------------------------------
-- environment

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- key1=value1,key2=value2 with URL-encoded values (the W3C Baggage format the specification uses for
-- OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES). A malformed member is skipped.
function M.parse_pairs(s, what, warn)
  local out = {}
  for member in (s .. ","):gmatch("([^,]*),") do
    if trim(member) ~= "" then
      local k, v = member:match("^([^=]*)=(.*)$")
      k = k and trim(k)
      if not k or k == "" then
        if warn then warn(what .. ": ignoring malformed entry '" .. trim(member) .. "'") end
      else
        out[k] = percent_decode(trim(v))
      end
    end
  end
  return out
end

local function env_nonempty(getenv, name)
  local v = getenv(name)
  if v == nil or trim(v) == "" then return nil end
  return trim(v)
end

-- An environment number in milliseconds -> seconds, or nil (unset or malformed: warned).
local function env_ms(getenv, name, warn)
  local v = env_nonempty(getenv, name)
  if v == nil then return nil end
  local n = tonumber(v)
  if not n or n ~= n or n <= 0 then
    warn(name .. " must be a positive number of milliseconds, got '" .. v .. "'; using the default")
    return nil
  end
  return n / 1000
end

local function env_int(getenv, name, warn)
  local v = env_nonempty(getenv, name)
  if v == nil then return nil end
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then
    warn(name .. " must be an integer >= 1, got '" .. v .. "'; using the default")
    return nil
  end
  return n
end

-- from_env(getenv, warn) -> {settings found in the environment}, wants_tracing (bool).
-- wants_tracing: the environment asks for spans by itself (an exporter other than none, or an OTLP
-- endpoint), so glsb turns tracing on without a configure call.
function M.from_env(getenv, warn)
  getenv = getenv or os.getenv
  local e = {}
  local disabled = env_nonempty(getenv, "OTEL_SDK_DISABLED")
  if disabled then
    if disabled:lower() == "true" then e.disabled = true
    elseif disabled:lower() ~= "false" then warn("OTEL_SDK_DISABLED must be true or false, got '" .. disabled .. "'")
    end
  end
  local exporters = env_nonempty(getenv, "OTEL_TRACES_EXPORTER")
  if exporters then
    local list = {}
    for name in exporters:gmatch("[^,]+") do list[#list + 1] = trim(name):lower() end
    e.exporter = list
  end
  e.traces_endpoint = env_nonempty(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
  e.endpoint = env_nonempty(getenv, "OTEL_EXPORTER_OTLP_ENDPOINT")
  local headers = env_nonempty(getenv, "OTEL_EXPORTER_OTLP_HEADERS")
  local trace_headers = env_nonempty(getenv, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
  if headers or trace_headers then
    e.headers = headers and M.parse_pairs(headers, "OTEL_EXPORTER_OTLP_HEADERS", warn) or {}
    -- the per-signal variable wins key by key
    local per_signal = trace_headers and M.parse_pairs(trace_headers, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", warn)
    for k, v in pairs(per_signal or {}) do e.headers[k] = v end
  end
  e.protocol = env_nonempty(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    or env_nonempty(getenv, "OTEL_EXPORTER_OTLP_PROTOCOL")
  e.timeout = env_ms(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", warn)
    or env_ms(getenv, "OTEL_EXPORTER_OTLP_TIMEOUT", warn)
  e.service_name = env_nonempty(getenv, "OTEL_SERVICE_NAME")
  local res = env_nonempty(getenv, "OTEL_RESOURCE_ATTRIBUTES")
  if res then e.resource = M.parse_pairs(res, "OTEL_RESOURCE_ATTRIBUTES", warn) end
  e.sampler = env_nonempty(getenv, "OTEL_TRACES_SAMPLER")
  e.sampler_arg = env_nonempty(getenv, "OTEL_TRACES_SAMPLER_ARG")
  e.schedule_delay = env_ms(getenv, "OTEL_BSP_SCHEDULE_DELAY", warn)
  e.export_timeout = env_ms(getenv, "OTEL_BSP_EXPORT_TIMEOUT", warn)
  e.max_queue_size = env_int(getenv, "OTEL_BSP_MAX_QUEUE_SIZE", warn)
  e.max_export_batch_size = env_int(getenv, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", warn)
  local tp = env_nonempty(getenv, "TRACEPARENT")
  if tp then e.parent = { traceparent = tp, tracestate = env_nonempty(getenv, "TRACESTATE") } end

  local wants = not e.disabled and (e.traces_endpoint ~= nil or e.endpoint ~= nil
    or (e.exporter ~= nil and not (#e.exporter == 1 and e.exporter[1] == "none")))
  return e, wants
end

---------------------------------------------------------------------------------------------------
-- merging

local function pick(explicit, env, default)
  if explicit ~= nil then return explicit end
  if env ~= nil then return env end
  return default
end

local function process_name()
  local a = rawget(_G, "arg")
  local exe = type(a) == "table" and a[-1] or nil
  if type(exe) ~= "string" then return "lua" end
  return exe:match("([^/]+)$") or exe
end

-- resolve(opts, env, warn) -> the settings tracing runs with (see the fields below), or nil, reason when
-- nothing is to be exported.
function M.resolve(opts, env, warn)
  opts = opts or {}
  local s = {}
  s.disabled = pick(opts.disabled, env.disabled, false)

  local exporters = opts.exporter or env.exporter or { "otlp" }
  if type(exporters) == "string" then exporters = { exporters } end
  s.exporters = {}
  for _, name in ipairs(exporters) do
    if name == "otlp" or name == "console" then
      s.exporters[#s.exporters + 1] = name
    elseif name ~= "none" then
      if opts.exporter then
        options.arg_error("%s: unknown exporter '%s' (otlp, console, none)", WHAT, tostring(name))
      end
      warn("OTEL_TRACES_EXPORTER: unsupported exporter '" .. tostring(name) .. "' ignored (otlp, console, none)")
    end
  end

  -- OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the whole URL; the generic one is a base that gets /v1/traces.
  if opts.traces_endpoint then
    s.endpoint = opts.traces_endpoint
  elseif opts.endpoint then
    s.endpoint = opts.endpoint:gsub("/+$", "") .. "/v1/traces"
  elseif env.traces_endpoint then
    s.endpoint = env.traces_endpoint
  else
    s.endpoint = (env.endpoint or DEFAULT_BASE):gsub("/+$", "") .. "/v1/traces"
  end

  s.headers = {}
  for k, v in pairs(env.headers or {}) do s.headers[k] = v end
  for k, v in pairs(opts.headers or {}) do s.headers[k] = tostring(v) end

  s.protocol = pick(opts.protocol, env.protocol, "http/json")
  if s.protocol ~= "http/json" then
    if opts.protocol then
      options.arg_error("%s: protocol '%s' is not supported (http/json)", WHAT, opts.protocol)
    end
    warn("OTEL_EXPORTER_OTLP_PROTOCOL=" .. s.protocol .. " is not supported; sending http/json")
    s.protocol = "http/json"
  end
  -- the time rule: nil = the default, <= 0 = no limit (nil from here on)
  s.timeout = options.timeout(pick(opts.timeout, env.timeout, 10))

  s.resource = { ["telemetry.sdk.name"] = "glsb", ["telemetry.sdk.language"] = "lua" }
  for k, v in pairs(env.resource or {}) do s.resource[k] = v end
  for k, v in pairs(opts.resource or {}) do s.resource[k] = v end
  -- OTEL_SERVICE_NAME wins over service.name in OTEL_RESOURCE_ATTRIBUTES; code wins over both.
  s.resource["service.name"] = opts.service_name or (opts.resource and opts.resource["service.name"])
    or env.service_name or s.resource["service.name"] or ("unknown_service:" .. process_name())

  if type(opts.sampler) == "table" then
    if type(opts.sampler.should_sample) ~= "function" then
      options.arg_error("%s: option 'sampler' must be a sampler name or a table with should_sample", WHAT)
    end
    s.sampler = opts.sampler
  else
    local name = opts.sampler or env.sampler
    local arg = opts.sampler_arg
    if arg == nil and opts.sampler == nil then arg = env.sampler_arg end
    local smp, why = sampler.from_name(name, arg)
    if not smp then
      if opts.sampler or opts.sampler_arg then options.arg_error("%s: %s", WHAT, why) end
      warn(why .. "; using parentbased_always_on")
      smp = sampler.from_name("parentbased_always_on")
    end
    s.sampler = smp
  end

  s.schedule_delay = pick(opts.schedule_delay, env.schedule_delay, 5)
  s.export_timeout = options.timeout(pick(opts.export_timeout, env.export_timeout, 30))
  s.max_queue_size = math.tointeger(pick(opts.max_queue_size, env.max_queue_size, 2048))
  s.max_export_batch_size = math.tointeger(pick(opts.max_export_batch_size, env.max_export_batch_size, 512))
  if s.max_export_batch_size > s.max_queue_size then
    -- the specification: the batch size must not exceed the queue size
    s.max_export_batch_size = s.max_queue_size
  end
  s.export_retry = opts.export_retry or {}
  s.propagate = pick(opts.propagate, nil, true)
  s.trace_into_sandbox = pick(opts.trace_into_sandbox, nil, false)
  s.console = opts.console or io.stderr
  s.parent = pick(opts.parent, env.parent, nil)
  return s
end

return M
