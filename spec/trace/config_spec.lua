-- Settings: configure{...} over the OTEL_* environment over the defaults, as the specification orders them.
local config = require "glsb.trace.config"

local function env_of(t) return function(name) return t[name] end end

local function resolve(opts, env)
  local warnings = {}
  local warn = function(m) warnings[#warnings + 1] = m end
  local e, wants = config.from_env(env_of(env or {}), warn)
  return config.resolve(opts, e, warn), warnings, wants
end

describe("glsb.trace settings #unit", function()
  it("default to OTLP at localhost:4318, parentbased_always_on and the BSP defaults", function()
    local s, warnings, wants = resolve()
    assert.is_false(wants) -- an empty environment does not turn tracing on
    assert.are.same({ "otlp" }, s.exporters)
    assert.are.equal("http://localhost:4318/v1/traces", s.endpoint)
    assert.are.equal("http/json", s.protocol)
    assert.are.equal(10, s.timeout)
    assert.are.equal("parentbased_always_on", s.sampler.name)
    assert.are.same({ 5, 30, 2048, 512 }, { s.schedule_delay, s.export_timeout, s.max_queue_size, s.max_export_batch_size })
    assert.matches("^unknown_service:", s.resource["service.name"])
    assert.are.equal("glsb", s.resource["telemetry.sdk.name"])
    assert.are.same({}, warnings)
  end)

  it("read every OTEL_* variable, milliseconds turned into seconds", function()
    local s, warnings, wants = resolve(nil, {
      OTEL_TRACES_EXPORTER = "console, otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT = "http://collector:4318/",
      OTEL_EXPORTER_OTLP_HEADERS = "api-key=abc%20def, x=1",
      OTEL_EXPORTER_OTLP_PROTOCOL = "http/json",
      OTEL_EXPORTER_OTLP_TIMEOUT = "2500",
      OTEL_SERVICE_NAME = "agent",
      OTEL_RESOURCE_ATTRIBUTES = "service.name=ignored,deployment.environment=prod%2Ceu",
      OTEL_TRACES_SAMPLER = "traceidratio", OTEL_TRACES_SAMPLER_ARG = "0.5",
      OTEL_BSP_SCHEDULE_DELAY = "100", OTEL_BSP_EXPORT_TIMEOUT = "2000",
      OTEL_BSP_MAX_QUEUE_SIZE = "10", OTEL_BSP_MAX_EXPORT_BATCH_SIZE = "4",
    })
    assert.is_true(wants)
    assert.are.same({}, warnings)
    assert.are.same({ "console", "otlp" }, s.exporters)
    assert.are.equal("http://collector:4318/v1/traces", s.endpoint)
    assert.are.same({ ["api-key"] = "abc def", x = "1" }, s.headers)
    assert.are.equal(2.5, s.timeout)
    assert.are.equal("agent", s.resource["service.name"]) -- OTEL_SERVICE_NAME wins over the attribute
    assert.are.equal("prod,eu", s.resource["deployment.environment"])
    assert.are.equal("traceidratio", s.sampler.name)
    assert.are.equal(0.5, s.sampler.ratio)
    assert.are.same({ 0.1, 2, 10, 4 }, { s.schedule_delay, s.export_timeout, s.max_queue_size, s.max_export_batch_size })
  end)

  it("use the per-signal variables over the generic ones, and the traces endpoint as is", function()
    local s = resolve(nil, {
      OTEL_EXPORTER_OTLP_ENDPOINT = "http://generic:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "http://traces:9999/custom/path",
      OTEL_EXPORTER_OTLP_HEADERS = "a=1,b=2", OTEL_EXPORTER_OTLP_TRACES_HEADERS = "b=3",
      OTEL_EXPORTER_OTLP_TIMEOUT = "1000", OTEL_EXPORTER_OTLP_TRACES_TIMEOUT = "3000",
    })
    assert.are.equal("http://traces:9999/custom/path", s.endpoint)
    assert.are.same({ a = "1", b = "3" }, s.headers)
    assert.are.equal(3, s.timeout)
  end)

  it("let configure{} win over the environment", function()
    local s = resolve({ endpoint = "http://code:1", service_name = "from-code", sampler = "always_off",
      headers = { b = "code" }, schedule_delay = 0.5, exporter = "console" }, {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "http://env/v1/traces", OTEL_SERVICE_NAME = "from-env",
      OTEL_TRACES_SAMPLER = "always_on", OTEL_EXPORTER_OTLP_HEADERS = "a=env,b=env",
      OTEL_BSP_SCHEDULE_DELAY = "9000", OTEL_TRACES_EXPORTER = "otlp",
    })
    assert.are.equal("http://code:1/v1/traces", s.endpoint)
    assert.are.equal("from-code", s.resource["service.name"])
    assert.are.equal("always_off", s.sampler.name)
    assert.are.same({ a = "env", b = "code" }, s.headers)
    assert.are.equal(0.5, s.schedule_delay)
    assert.are.same({ "console" }, s.exporters)
  end)

  it("turn tracing on from the environment only when it asks for spans", function()
    local function wants(env) return select(3, resolve(nil, env)) end
    assert.is_true(wants { OTEL_EXPORTER_OTLP_ENDPOINT = "http://x" })
    assert.is_true(wants { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "http://x/v1/traces" })
    assert.is_true(wants { OTEL_TRACES_EXPORTER = "console" })
    assert.is_false(wants { OTEL_TRACES_EXPORTER = "none" })
    assert.is_false(wants { OTEL_TRACES_EXPORTER = "otlp", OTEL_SDK_DISABLED = "TRUE" })
    assert.is_false(wants { OTEL_SERVICE_NAME = "svc" })
    assert.is_false(wants { OTEL_EXPORTER_OTLP_ENDPOINT = "  " })
  end)

  it("warn about a malformed variable and use its default (never an error)", function()
    local s, warnings = resolve(nil, {
      OTEL_BSP_SCHEDULE_DELAY = "soon", OTEL_BSP_MAX_QUEUE_SIZE = "-3", OTEL_TRACES_SAMPLER = "sometimes",
      OTEL_TRACES_EXPORTER = "zipkin,otlp", OTEL_EXPORTER_OTLP_PROTOCOL = "grpc",
      OTEL_EXPORTER_OTLP_HEADERS = "novalue,a=1", OTEL_SDK_DISABLED = "maybe",
    })
    assert.are.equal(5, s.schedule_delay)
    assert.are.equal(2048, s.max_queue_size)
    assert.are.equal("parentbased_always_on", s.sampler.name)
    assert.are.same({ "otlp" }, s.exporters)
    assert.are.equal("http/json", s.protocol)
    assert.are.same({ a = "1" }, s.headers)
    assert.is_false(s.disabled)
    local text = table.concat(warnings, "\n")
    for _, what in ipairs({ "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_QUEUE_SIZE", "unknown sampler sometimes",
      "zipkin", "grpc", "novalue", "OTEL_SDK_DISABLED" }) do
      assert.is_truthy(text:find(what, 1, true), what .. " not warned in:\n" .. text)
    end
  end)

  it("keep the batch size within the queue size", function()
    local s = resolve({ max_queue_size = 8, max_export_batch_size = 100 })
    assert.are.equal(8, s.max_export_batch_size)
  end)

  it("take TRACEPARENT/TRACESTATE from the environment as the parent", function()
    local s = resolve(nil, { TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", TRACESTATE = "a=1" })
    assert.are.same({ traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate = "a=1" }, s.parent)
  end)

  it("follow glsb's time rule for the two timeouts: <= 0 is no limit (nil), nil the default", function()
    local s = resolve({ timeout = 0, export_timeout = -1 })
    assert.is_nil(s.timeout)
    assert.is_nil(s.export_timeout)
    s = resolve()
    assert.are.same({ 10, 30 }, { s.timeout, s.export_timeout })
    assert.are.equal(4, math.tointeger(resolve({ max_queue_size = 4.0 }).max_queue_size))
  end)

  it("reject a bad configure{} option as an argument error naming it", function()
    assert.has_error(function() config.check({ endpiont = "x" }) end,
      "glsb.trace.configure: unknown option 'endpiont' (did you mean 'endpoint'?)")
    assert.has_error(function() config.check({ zzzzzzzz = "x" }) end,
      "glsb.trace.configure: unknown option 'zzzzzzzz'", "far from every key: no suggestion")
    assert.has_error(function() config.check({ timeout = "10" }) end,
      "glsb.trace.configure: option 'timeout' must be a number of seconds, got string \"10\"")
    assert.has_error(function() config.check({ schedule_delay = 0 }) end,
      "glsb.trace.configure: option 'schedule_delay' must be a number > 0, got number 0")
    assert.has_error(function() config.check({ max_queue_size = 1.5 }) end,
      "glsb.trace.configure: option 'max_queue_size' must be an integer, got number 1.5")
    assert.has_error(function() config.check({ max_queue_size = 0 }) end,
      "glsb.trace.configure: option 'max_queue_size' must be >= 1, got number 0")
    assert.has_error(function() config.check({ sampler_arg = 3 }) end,
      "glsb.trace.configure: option 'sampler_arg' must be from 0 to 1, got number 3")
    assert.has_error(function() config.check("otlp") end,
      "glsb.trace.configure: options must be a table, got string")
    assert.has_error(function() resolve({ exporter = "zipkin" }) end,
      "glsb.trace.configure: unknown exporter 'zipkin' (otlp, console, none)")
    assert.has_error(function() resolve({ protocol = "grpc" }) end,
      "glsb.trace.configure: protocol 'grpc' is not supported (http/json)")
  end)
end)
