-- glsb.trace.seam: what the two choke points (the public sandbox operations and glsb.http) read to
-- know whether to make spans. Nothing else lives here, so that requiring it costs nothing and tracing
-- that is off costs one table read per call:
--
--   if seam.on then return seam.operation(...) end     -- sandbox.lua, template.lua, workspace.lua
--   if seam.on and opts.trace ~= false then ... end    -- http.lua
--
-- `on` is true while a tracer is active (glsb.trace.configure / set_tracer), or from the start when the
-- OTEL_* environment asks for spans; then glsb.trace configures itself on the first traced call (not at
-- load time, so loading glsb.http never loads the exporter that itself needs glsb.http).
local M = { on = false }

do
  -- the environment asks for spans only with one of these set (glsb.trace.config from_env's `wants`):
  -- without, the config (and the sampler and options it loads) is not loaded at all (issue 26)
  local function set(name) local v = os.getenv(name) return v ~= nil and v ~= "" end
  if set("OTEL_TRACES_EXPORTER") or set("OTEL_EXPORTER_OTLP_ENDPOINT") or set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") then
    local _, wants = require("glsb.trace.config").from_env(os.getenv, function() end)
    M.on = wants == true
  end
end

-- start() -> glsb.trace.instrument once tracing is configured and on, else nil. glsb.trace sets it when it
-- is loaded (this module never loads glsb.trace: glsb.trace reaches glsb.http, which reads this one), and
-- the modules that read the seam load glsb.trace when `on` is true at their load (glsb, glsb.sandbox,
-- glsb.template), so the environment's spans start on the first traced call. Until then the forwarders
-- below run their function untraced.
M.start = nil

-- operation(name, subject, attributes, fn, ...), annotate(attributes), http(request_fn, opts) and
-- sandbox_env(env, asked): see glsb.trace.instrument. glsb.trace replaces these forwarders with the
-- instrument functions themselves once it is configured.
function M.operation(name, subject, attributes, fn, ...)
  local instrument = M.start and M.start()
  if instrument then return instrument.operation(name, subject, attributes, fn, ...) end
  return fn(...)
end

function M.http(request_fn, opts)
  local instrument = M.start and M.start()
  if instrument then return instrument.http(request_fn, opts) end
  return request_fn(opts)
end

function M.annotate(attributes)
  local instrument = M.start and M.start()
  if instrument then return instrument.annotate(attributes) end
end

function M.sandbox_env(env, asked)
  local instrument = M.start and M.start()
  if instrument then return instrument.sandbox_env(env, asked) end
  return env
end

return M
