-- glsb.log: the one place the library reports what it does not raise
-- (skipped package installs, failed set_timeout, teardown after cancel).
-- Default: one line on io.stderr for warnings and errors; glsb.log.set_handler
-- replaces it (e.g. to feed a structured logger, or to silence it).
-- GLSB_LOG_FORMAT=json makes that line a JSON object (see json_line below).
-- GLSB_LOG=debug|info|warn|error (default warn) is the level the default handler shows: debug adds every
-- HTTP request (method, URL without query values or credentials, status, bytes, milliseconds), retries
-- and timings; retries are warnings, so they show by default. A handler set with set_handler gets info
-- and above (debug as well when the level is debug) and filters as it likes.

local M = {}

local LEVELS = { debug = 1, info = 2, warn = 3, error = 4 }

local function level_from_env()
  local v = os.getenv("GLSB_LOG")
  v = v and v:lower()
  return LEVELS[v] and v or "warn"
end

local threshold = LEVELS[level_from_env()]
local custom = false -- a handler of the user's: it sees every level

-- log.set_level(level) -> previous level: what the default handler shows.
function M.set_level(level)
  if not LEVELS[level] then error("log.set_level: debug, info, warn or error expected", 2) end
  local prev
  for k, v in pairs(LEVELS) do if v == threshold then prev = k end end
  threshold = LEVELS[level]
  return prev
end

-- log.enabled(level) -> true when a message at that level reaches anyone (cheap: call it before
-- building an expensive debug message). A handler of the user's gets info and above, and debug too
-- when the level is debug (GLSB_LOG=debug or set_level("debug")).
function M.enabled(level)
  local floor = custom and math.min(threshold, LEVELS.info) or threshold
  return LEVELS[level] >= floor
end

local function stderr_handler(level, message, fields)
  if LEVELS[level] < threshold then return end
  local extra = {}
  if fields then
    local keys = {}
    for k in pairs(fields) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do extra[#extra + 1] = k .. "=" .. tostring(fields[k]) end
  end
  io.stderr:write("glsb: ", level, ": ", message,
    #extra > 0 and (" (" .. table.concat(extra, " ") .. ")") or "", "\n")
end

---------------------------------------------------------------------------
-- JSON lines (GLSB_LOG_FORMAT=json)
---------------------------------------------------------------------------

-- Keys of the line itself; a field of the same name is written as "field.<name>".
local RESERVED = { time = true, level = true, message = true, error_code = true, error_class = true,
  trace_id = true, span_id = true }

local function iso_time()
  local core = package.loaded["glsb.core"]
  -- the core's clock only when something loaded it already: a log line never loads the C core
  local t = core and core.realtime_ns and core.realtime_ns() // 1000000 / 1000 or os.time()
  return require("glsb.time").iso(t, true)
end

-- The active span's ids, when tracing is on (never loads the tracing modules itself).
local function trace_ids()
  local trace = package.loaded["glsb.trace"]
  if type(trace) ~= "table" or not trace.enabled() then return nil end
  local span = trace.current()
  if type(span) ~= "table" then return nil end
  if type(span.trace_id) == "string" and type(span.span_id) == "string" then return span.trace_id, span.span_id end
  if type(span.traceparent) == "function" then
    local ok, tp = pcall(span.traceparent, span)
    if ok and type(tp) == "string" then return tp:match("^%x%x%-(%x+)%-(%x+)%-") end
  end
  return nil
end

local function field_value(v)
  local t = type(v)
  if t == "string" or t == "boolean" then return v end
  if t == "number" then return v == v and v or tostring(v) end
  return tostring(v)
end

-- json_line(level, message, fields) -> one JSON object (no newline): time (UTC, ms), level, message,
-- error_code (the glsb.Stage of fields.stage / fields.error_code / fields.error), error_class,
-- trace_id and span_id of the active span, then the fields.
function M.json_line(level, message, fields)
  local cjson = require "cjson.safe"
  local doc = { time = iso_time(), level = level, message = tostring(message) }
  fields = type(fields) == "table" and fields or {}
  local err = fields.error
  local is_glsb_error = type(err) == "table" and type(rawget(err, "stage")) == "string"
    and type(rawget(err, "class")) == "string"
  doc.error_code = fields.error_code or fields.stage or (is_glsb_error and err.stage) or nil
  if is_glsb_error then doc.error_class = err.class end
  doc.trace_id, doc.span_id = trace_ids()
  for k, v in pairs(fields) do
    k = tostring(k)
    if k ~= "stage" and k ~= "error_code" then
      doc[RESERVED[k] and ("field." .. k) or k] = field_value(v)
    end
  end
  return (cjson.encode(doc))
end

local function json_handler(level, message, fields)
  if LEVELS[level] < threshold then return end
  io.stderr:write(M.json_line(level, message, fields), "\n")
end
M.json_handler = json_handler

local function default_handler()
  local format = os.getenv("GLSB_LOG_FORMAT")
  if format and format:lower() == "json" then return json_handler end
  return stderr_handler
end

local handler = default_handler()

-- log.set_handler(fn(level, message, fields)) -> previous handler. nil restores
-- the default stderr handler (JSON lines under GLSB_LOG_FORMAT=json).
function M.set_handler(fn)
  if fn ~= nil and type(fn) ~= "function" then error("log.set_handler: function or nil expected", 2) end
  local prev = handler
  handler = fn or default_handler()
  custom = fn ~= nil and fn ~= stderr_handler and fn ~= json_handler
  return prev
end

-- Every line is scrubbed of the secrets glsb knows (glsb.secrets) before any handler sees it: its message
-- and its string fields (an error object's text is scrubbed by the error itself).
local function scrubbed(fields)
  if type(fields) ~= "table" then return fields end
  local secrets = require "glsb.secrets"
  local out
  for k, v in pairs(fields) do
    if type(v) == "string" then
      local s = secrets.scrub(v)
      if s ~= v then
        out = out or {}
        out[k] = s
      end
    end
  end
  if not out then return fields end
  for k, v in pairs(fields) do if out[k] == nil then out[k] = v end end
  return out
end

local function emit(level, message, fields)
  if not M.enabled(level) then return end
  -- a broken handler must never turn a warning into a failure
  pcall(handler, level, require("glsb.secrets").scrub(tostring(message)), scrubbed(fields))
end

function M.debug(message, fields) emit("debug", message, fields) end
function M.info(message, fields) emit("info", message, fields) end
function M.warn(message, fields) emit("warn", message, fields) end
function M.error(message, fields) emit("error", message, fields) end

return M
