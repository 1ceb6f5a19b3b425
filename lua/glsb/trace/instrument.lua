-- glsb.trace.instrument: the spans of the two choke points, loaded only once tracing is on.
--
--   operation(name, subject, attributes, fn, ...)  a span around one public operation (and its children:
--       create attempts, package install, build steps), current while fn runs, ended with what fn
--       returned or raised. subject: the sandbox or template builder (provider, ids, secrets to scrub).
--   annotate(attributes)                           adds attributes to the current operation span
--   http(request_fn, opts)                         a client span around one glsb.http request, with
--       OpenTelemetry's HTTP client conventions, and traceparent/tracestate added to the request
--   sandbox_env(env, asked)                        env plus TRACEPARENT/TRACESTATE when asked
--
-- What never goes into an attribute: code text, file contents, environment values, API keys, signed
-- URLs. Attributes are built from ids, names, counts and statuses only; the one free text (an error's
-- message) goes through glsb.trace.redact first.
local context = require "glsb.trace.context"
local redact = require "glsb.trace.redact"
local span_mod = require "glsb.trace.span"

local M = {}

local state -- glsb.trace's state, bound on activation

function M.bind(_api, st)
  state = st
end

-- span -> the subject of the operation it belongs to, for the operation spans running now (an entry is
-- removed when its span ends; weak keys all the same, for a span that never ends).
local info = setmetatable({}, { __mode = "k" })

-- current() -> the parent of the next span: glsb.trace.current() without its require (a call saved on
-- every operation).
local function current() return context.current() or state.root_parent end

local function errors() return require "glsb.errors" end

local function is_cancelled(err)
  local loop = package.loaded["glsb.loop"]
  return loop and loop.is_cancelled(err)
end

---------------------------------------------------------------------------------------------------
-- errors and results

-- record_error(span, err, secrets): status error, error.type, the stage and transience of a glsb
-- error, and an "exception" event (OpenTelemetry's exception convention, plus glsb.error.stage).
local function record_error(span, err, secrets)
  local E = errors()
  local class, stage, message
  if E.is_error(err) then
    class, stage, message = err.class, err.stage, tostring(err)
    span:set_attribute("glsb.error.stage", stage)
    span:set_attribute("glsb.error.transient", err.transient == true)
  elseif is_cancelled(err) then
    class, message = "Cancelled", tostring(err.message or "cancelled")
  elseif type(err) == "table" and err.phase then
    class, message = "TransportError", E.describe(err)
  else
    class = type(err) == "table" and type(err.class) == "string" and err.class or "LuaError"
    message = type(err) == "table" and E.describe(err) or tostring(err)
  end
  message = redact.text(message, secrets)
  span:set_attribute("error.type", class)
  span:add_event("exception", { ["exception.type"] = class, ["exception.message"] = message,
    ["glsb.error.stage"] = stage })
  span:set_status("error", message)
end
M.record_error = record_error

local function is_execution_result(r)
  local models = package.loaded["glsb.models"]
  return models and models.ExecutionResult.is(r)
end

-- What an operation's return value says, per operation (by span name).
local RESULTS = {}

local function execution(span, r)
  if not is_execution_result(r) then
    -- a hook's plain result table (package install returns one): read it as the base class does
    local models = package.loaded["glsb.models"]
    local ok, res = pcall(models.ExecutionResult.new, r)
    if not ok then return end
    r = res
  end
  span:set_attribute("glsb.execution.status", r.status)
  if math.type(r.code) == "integer" then span:set_attribute("glsb.execution.exit_code", r.code) end
  if r.failure then span:set_attribute("glsb.failure.retry_safe", r.failure.retry_safe == true) end
  if r.status ~= "success" then
    span:set_attribute("error.type", r.failure and r.failure.exception_type or r.status)
    -- the status only: r.error is the user's own exception text, which may quote their data
    span:set_status("error", "execution ended with status " .. r.status)
  end
end
RESULTS["glsb.sandbox.execute_code"] = execution
RESULTS["glsb.sandbox.execute_command"] = execution
RESULTS["glsb.sandbox.package_install"] = execution

RESULTS["glsb.sandbox.download"] = function(span, data)
  if type(data) == "string" then
    span:set_attribute("glsb.transfer.bytes", #data)
  else
    span:set_attribute("error.type", "download_failed")
    span:set_status("error", "download failed (the reason is in the glsb log)")
  end
end

RESULTS["glsb.sandbox.set_timeout"] = function(span, ok)
  if ok == false then
    span:set_attribute("error.type", "set_timeout_failed")
    span:set_status("error", "set_timeout failed (the reason is in the glsb log)")
  end
end

RESULTS["glsb.pool.acquire"] = function(span, sb)
  if type(sb) == "table" and type(sb.sandbox_id) == "string" then
    span:set_attribute("glsb.sandbox.id", sb.sandbox_id)
  end
end

RESULTS["glsb.template.ensure"] = function(span, res)
  if type(res) ~= "table" then return end
  span:set_attribute("glsb.template.built", res.built == true)
  if type(res.hash) == "string" then span:set_attribute("glsb.template.hash", res.hash) end
  local ref = res.ref
  if type(ref) == "table" and type(ref.template_id) == "string" then
    span:set_attribute("glsb.template.id", ref.template_id)
  end
end

RESULTS["glsb.workspace.write"] = function(span, res)
  if type(res) == "table" and math.type(res.bytes) == "integer" then
    span:set_attribute("glsb.transfer.bytes", res.bytes)
  end
end

RESULTS["glsb.workspace.run"] = function(span, res)
  if type(res) ~= "table" then return end
  if math.type(res.exit_code) == "integer" then span:set_attribute("glsb.execution.exit_code", res.exit_code) end
  span:set_attribute("glsb.workspace.timed_out", res.timed_out == true)
  if res.timed_out then
    span:set_attribute("error.type", "timeout")
    span:set_status("error", "workspace command timed out")
  end
end

-- What an operation's arguments say (counts and sizes only), per operation.
local ARGS = {}

ARGS["glsb.sandbox.upload"] = function(span, _self, files)
  local bytes = 0
  for _, f in ipairs(files) do bytes = bytes + #f.data end
  span:set_attribute("glsb.files.count", #files)
  span:set_attribute("glsb.transfer.bytes", bytes)
end

ARGS["glsb.sandbox.package_install"] = function(span, _self, pkgs)
  span:set_attribute("glsb.packages.count", #pkgs)
end

---------------------------------------------------------------------------------------------------
-- operations

local function string_or_nil(v) return type(v) == "string" and v or nil end

-- subject_fields(subject) -> provider, sandbox id, language, template (each a string or nil).
local function subject_fields(subject)
  local opts = type(subject.options) == "table" and subject.options or nil
  local template = opts and opts.template
  if type(template) == "table" then template = template.template_id or template.name end
  return string_or_nil(subject.provider), string_or_nil(subject.sandbox_id), string_or_nil(subject.language),
    string_or_nil(template)
end

-- subject_attributes(subject, attrs) -> attrs with the subject's attributes added (a new table when
-- attrs is nil): what another tracer's start_span gets.
local function subject_attributes(subject, attrs)
  if type(subject) ~= "table" then return attrs end
  attrs = attrs or {}
  local provider, sid, language, template = subject_fields(subject)
  attrs["glsb.provider"] = provider or attrs["glsb.provider"]
  attrs["glsb.sandbox.id"] = sid or attrs["glsb.sandbox.id"]
  attrs["glsb.language"] = language or attrs["glsb.language"]
  attrs["glsb.template"] = template or attrs["glsb.template"]
  return attrs
end

-- set_subject_attributes(span, subject): the same onto a built-in span (no table in between).
local function set_subject_attributes(span, subject)
  local provider, sid, language, template = subject_fields(subject)
  if provider then span:set_attribute("glsb.provider", provider) end
  if sid then span:set_attribute("glsb.sandbox.id", sid) end
  if language then span:set_attribute("glsb.language", language) end
  if template then span:set_attribute("glsb.template", template) end
end

-- Secrets of an options table, computed once per table (weak keys: gone with the options).
local secrets_of = setmetatable({}, { __mode = "k" })

local function secrets(subject)
  -- a sandbox's or builder's options; a pool's (its create options inside)
  local opts = type(subject) == "table" and (subject.options or subject.opts)
  if type(opts) ~= "table" then return nil end
  local list = secrets_of[opts]
  if not list then
    list = redact.secrets(opts)
    secrets_of[opts] = list
  end
  return list
end

-- info[span] = the subject of the nearest enclosing operation (children inherit their parent's): its
-- provider decides propagation, its options' secrets are scrubbed from messages.
local function subject_of(parent, subject)
  if type(subject) == "table" then return subject end
  return parent and info[parent] or nil
end

local function finish(span, subject, name, ok, value)
  local sid = type(subject) == "table" and subject.sandbox_id
  -- the id a create learned, or one that changed; most operations had it from the start
  if type(sid) == "string" and (getmetatable(span) ~= span_mod.Span or span.attributes["glsb.sandbox.id"] ~= sid) then
    span:set_attribute("glsb.sandbox.id", sid)
  end
  if ok then
    local interpret = RESULTS[name]
    if interpret then pcall(interpret, span, value) end
  else
    record_error(span, value, secrets(info[span]))
  end
  -- only spans still running are looked up (as parents): keeping the table that small spares the
  -- collector an ephemeron table that grows with every span made between two cycles
  info[span] = nil
  span:finish()
end

-- The end of an operation: fn's results pass through as varargs (no table per call).
local function ended(span, subject, name, prev, ok, ...)
  context.swap(prev)
  pcall(finish, span, subject, name, ok, (...))
  if not ok then error((...), 0) end
  return ...
end

-- start(tracer, name, parent, subject, attributes) -> span or nil. The built-in tracer's spans get
-- their attributes set directly (no attributes table per call); another tracer gets them in
-- start_span's options, as its interface says.
-- subject_tables(subject) -> attributes, keys of a built-in span for the usual subject (provider,
-- sandbox id and language, no template), made by two constructors; nil for any other.
local function subject_tables(subject)
  local provider, sid, language, template = subject_fields(subject)
  local max = span_mod.MAX_STRING
  if not (provider and sid and language) or template or #provider > max or #sid > max or #language > max then
    return nil
  end
  return {
    ["glsb.provider"] = provider, ["glsb.sandbox.id"] = sid, ["glsb.language"] = language,
    -- not set (a nil in a constructor adds nothing), only counted: the table is sized for the two
    -- attributes an execution adds at its end, so they cause no rehash
    ["glsb.execution.status"] = nil, ["glsb.execution.exit_code"] = nil,
  }, { "glsb.provider", "glsb.sandbox.id", "glsb.language", nil, nil, nil, nil, nil }
end

-- start(tracer, name, parent, subject, attributes) -> span or nil. The built-in tracer's spans get
-- their attributes without a table in between; another tracer gets them in start_span's options, as
-- its interface says. The subject's attributes win over the caller's (as subject_attributes has it).
local function start(tracer, name, parent, subject, attributes)
  if getmetatable(tracer) == span_mod.Tracer then
    local attrs, keys
    if type(subject) == "table" then attrs, keys = subject_tables(subject) end
    local span = tracer:start(name, "internal", span_mod.valid_parent(parent), nil, attrs, keys)
    if getmetatable(span) ~= span_mod.Span then return span end
    if attributes then
      for k, v in pairs(attributes) do
        if not attrs or attrs[k] == nil then span:set_attribute(k, v) end
      end
    end
    if not attrs and type(subject) == "table" then set_subject_attributes(span, subject) end
    return span
  end
  local ok_start, span = pcall(tracer.start_span, tracer, name,
    { kind = "internal", parent = parent, attributes = subject_attributes(subject, attributes) })
  if not ok_start or type(span) ~= "table" and type(span) ~= "userdata" then
    return nil -- a broken tracer must not break the call
  end
  return span
end

-- operation(name, subject, attributes, fn, ...) -> fn's results (or its error, re-raised).
function M.operation(name, subject, attributes, fn, ...)
  local tracer = state.tracer
  if not tracer then return fn(...) end
  local parent = current()
  local span = start(tracer, name, parent, subject, attributes)
  if not span then return fn(...) end
  info[span] = subject_of(parent, subject) or false -- false: one of ours, without a subject
  local describe_args = ARGS[name]
  if describe_args then pcall(describe_args, span, ...) end
  return ended(span, subject, name, context.swap(span), pcall(fn, ...))
end

-- annotate(attributes): onto the current span, if it is one of ours (started by an operation).
function M.annotate(attributes)
  local span = context.current()
  if span == nil or info[span] == nil then return end
  for k, v in pairs(attributes) do pcall(span.set_attribute, span, k, v) end
end

---------------------------------------------------------------------------------------------------
-- steps of a long operation watched from outside (a template build the provider polls)

local Steps = {}
Steps.__index = Steps

-- steps(name) -> a tracker whose step spans are children of the current span (see glsb.trace.steps).
function M.steps(name)
  local parent = current()
  return setmetatable({ name = name, parent = parent, subject = parent and info[parent] or false }, Steps)
end

function Steps:step(id, attributes)
  id = tostring(id)
  if id == self.id then return end
  self:finish()
  local tracer = state.tracer
  if not tracer then return end
  local attrs = { ["glsb.step"] = id }
  for k, v in pairs(attributes or {}) do attrs[k] = v end
  local ok, span = pcall(tracer.start_span, tracer, self.name, { kind = "internal", parent = self.parent,
    attributes = attrs })
  if ok and span then
    self.span, self.id = span, id
  end
end

-- finish(err): ends the current step's span, recording err when there is one.
function Steps:finish(err)
  local span = self.span
  if not span then return end
  self.span, self.id = nil, nil
  if err ~= nil then pcall(record_error, span, err, secrets(self.subject)) end
  pcall(span.finish, span)
end

-- `local steps <close> = trace.steps(...)`: the last step ends with the block, with its error if any.
Steps.__close = function(self, err) self:finish(err) end

---------------------------------------------------------------------------------------------------
-- HTTP client spans

local KNOWN_METHODS = { GET = true, HEAD = true, POST = true, PUT = true, DELETE = true, CONNECT = true,
  OPTIONS = true, TRACE = true, PATCH = true }

local DEFAULT_PORT = { http = 80, https = 443 }

-- scheme, host, port of an absolute URL (IPv6 literals in brackets keep no brackets, as in the
-- server.address examples of the conventions).
local function server_of(url)
  local scheme, authority = url:match("^(%a[%w+.-]*)://([^/?#]*)")
  if not scheme then return nil end
  authority = authority:gsub("^.*@", "")
  local host, port = authority:match("^%[([^%]]+)%]:?(%d*)$")
  if not host then host, port = authority:match("^([^:]*):?(%d*)$") end
  scheme = scheme:lower()
  return scheme, host, tonumber(port) or DEFAULT_PORT[scheme]
end

local function propagation_allowed(provider)
  local p = state.settings and state.settings.propagate
  if p == false then return false end
  if type(p) == "table" and provider and p[provider] == false then return false end
  return true
end

local function with_trace_headers(opts, tp, ts)
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  local h = {}
  local array = false
  for k, v in pairs(opts.headers or {}) do
    if type(k) == "number" then array = true end
    h[k] = v
  end
  if array then
    -- "Name: value" strings: drop any traceparent/tracestate the caller set, then add ours
    local list = {}
    for _, line in ipairs(h) do
      local name = tostring(line):match("^([^:]*)")
      local low = name and name:lower()
      if low ~= "traceparent" and low ~= "tracestate" then list[#list + 1] = line end
    end
    list[#list + 1] = "traceparent: " .. tp
    if ts then list[#list + 1] = "tracestate: " .. ts end
    h = list
  else
    for k in pairs(opts.headers or {}) do
      local low = type(k) == "string" and k:lower()
      if low == "traceparent" or low == "tracestate" then h[k] = nil end
    end
    h.traceparent = tp
    h.tracestate = ts
  end
  copy.headers = h
  return copy
end

local function finish_http(span, res, scrub)
  local r = res[2]
  if not res[1] then
    record_error(span, r, scrub)
  elseif type(r) == "table" then
    if r.error then
      local f = r.error
      span:set_attribute("error.type", tostring(f.code or "transport"))
      span:set_attribute("glsb.failure.phase", tostring(f.phase))
      span:set_attribute("glsb.failure.retry_safe", f.retry_safe == true)
      span:set_status("error", redact.text(tostring(f.message or f.code or "transport failure"), scrub))
    end
    if math.type(r.status) == "integer" and r.status > 0 then
      span:set_attribute("http.response.status_code", r.status)
      if r.status >= 400 and not r.error then
        span:set_attribute("error.type", tostring(r.status))
        span:set_status("error") -- the conventions: a client span with a 4xx/5xx is an error, no message
      end
    end
    if r.aborted then span:set_attribute("glsb.http.aborted", true) end
  end
  span:finish()
end

-- http(request_fn, opts) -> request_fn's result, made under a client span.
function M.http(request_fn, opts)
  local tracer = state.tracer
  if not tracer or type(opts.url) ~= "string" then return request_fn(opts) end
  local parent = current()
  local method = tostring(opts.method or "GET"):upper()
  local scheme, host, port = server_of(opts.url)
  local attrs = {
    ["http.request.method"] = KNOWN_METHODS[method] and method or "_OTHER",
    ["http.request.method_original"] = not KNOWN_METHODS[method] and method or nil,
    ["server.address"] = host, ["server.port"] = port, ["url.full"] = redact.url(opts.url),
    ["url.scheme"] = scheme,
  }
  local ok_start, span = pcall(tracer.start_span, tracer, KNOWN_METHODS[method] and method or "HTTP",
    { kind = "client", parent = parent, attributes = attrs })
  if not ok_start or (type(span) ~= "table" and type(span) ~= "userdata") then return request_fn(opts) end
  local subject = parent and info[parent]
  if type(span.traceparent) == "function" and propagation_allowed(subject and subject.provider) then
    local ok, tp, ts = pcall(span.traceparent, span)
    if ok and type(tp) == "string" then opts = with_trace_headers(opts, tp, ts) end
  end
  local res = table.pack(pcall(request_fn, opts))
  pcall(finish_http, span, res, secrets(subject))
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

---------------------------------------------------------------------------------------------------
-- the sandbox's environment

-- sandbox_env(env, asked) -> env, or a copy with TRACEPARENT (and TRACESTATE) of the current span when
-- asked (the call's trace_into_sandbox) or configured (configure{trace_into_sandbox = true}).
function M.sandbox_env(env, asked)
  if asked == nil then asked = state.settings and state.settings.trace_into_sandbox end
  if not asked then return env end
  local span = context.current()
  if span == nil or type(span.traceparent) ~= "function" then return env end
  local ok, tp, ts = pcall(span.traceparent, span)
  if not ok or type(tp) ~= "string" then return env end
  local copy = {}
  for k, v in pairs(env or {}) do copy[k] = v end
  copy.TRACEPARENT = tp
  copy.TRACESTATE = ts
  return copy
end

return M
