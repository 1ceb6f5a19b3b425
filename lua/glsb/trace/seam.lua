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

local function trace() return require "glsb.trace" end

do
  local _, wants = require("glsb.trace.config").from_env(os.getenv, function() end)
  M.on = wants == true
end

-- operation(name, subject, attributes, fn, ...), annotate(attributes), http(request_fn, opts) and
-- sandbox_env(env, asked): see glsb.trace.instrument. glsb.trace replaces these forwarders with the
-- instrument functions themselves once it is configured.
function M.operation(...)
  trace()._ensure()
  return require("glsb.trace.instrument").operation(...)
end

function M.http(...)
  trace()._ensure()
  return require("glsb.trace.instrument").http(...)
end

function M.annotate(...)
  trace()._ensure()
  return require("glsb.trace.instrument").annotate(...)
end

function M.sandbox_env(...)
  trace()._ensure()
  return require("glsb.trace.instrument").sandbox_env(...)
end

return M
