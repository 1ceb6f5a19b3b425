-- glsb.errors: the error class tree, the one transient classifier, and helpers
-- that turn transport failures and HTTP responses into error objects.
--
-- Lifecycle failures are raised as objects with `error(obj, 0)`. Every object has
--   class    the class name ("SandboxStartError", ...)
--   stage    a glsb.Stage string ("create", "terminate", ...)
--   message  what went wrong, for humans
--   cause    what caused it, kept as is: another error object, a transport failure
--            table {phase, code, message, retry_safe, http_status?, retry_after?},
--            an HTTP failure table (see errors.http_failure) or a string
-- and `transient`, which is NOT stored: reading it walks the cause chain through
-- errors.classify, so a wrapper never disagrees with what it wraps.

local M = {}

---------------------------------------------------------------------------
-- Classes
---------------------------------------------------------------------------

local classes = {}       -- name -> class
M.classes = classes

local Error = {}         -- metatable of every error object

local function define(name, parent)
  local class = { name = name, parent = parent }
  classes[name] = class
  M[name] = class
  return class
end

local Root = define("CodeInterpreterError", nil)
define("SandboxStartError", Root)
define("SandboxExecutionError", Root)
define("SandboxNotInitializedError", Root)
define("SandboxTerminateError", Root)
define("TemplateBuildError", Root)
define("WorkspaceError", Root)

local function class_of(x)
  if type(x) == "string" then return classes[x] end
  if type(x) == "table" and classes[x.name] == x then return x end
  return nil
end

-- errors.new(Class, stage, message[, cause]) -> error object (not raised).
-- Class may be a class table or its name.
function M.new(class, stage, message, cause)
  local c = class_of(class)
  if not c then
    error("glsb.errors.new: unknown error class " .. tostring(class), 2)
  end
  if type(stage) ~= "string" then
    error("glsb.errors.new: stage must be a string", 2)
  end
  if message == nil and cause ~= nil then
    message = M.describe(cause)
  end
  return setmetatable({ class = c.name, stage = stage, message = tostring(message or c.name), cause = cause }, Error)
end

-- errors.raise(Class, stage, message[, cause]): never returns.
function M.raise(class, stage, message, cause)
  error(M.new(class, stage, message, cause), 0)
end

-- errors.is_error(x): true for any glsb error object.
function M.is_error(x)
  return getmetatable(x) == Error
end

-- errors.is(e, Class): true when e is a glsb error whose class is Class or a
-- subclass of it. Class may be a class table or a class name.
function M.is(e, class)
  if getmetatable(e) ~= Error then return false end
  local want = class_of(class)
  if not want then return false end
  local c = classes[rawget(e, "class")]
  while c do
    if c == want then return true end
    c = c.parent
  end
  return false
end

---------------------------------------------------------------------------
-- The classifier
---------------------------------------------------------------------------

-- HTTP statuses: 408/429 and the gateway family say "try again later"; the
-- client errors say the request itself is wrong and will stay wrong.
local TRANSIENT_STATUS = { [408] = true, [429] = true, [502] = true, [503] = true, [504] = true }

-- curl error names (glsb.core reports them in failure.code) meaning "the
-- network or the peer hiccuped", as opposed to "the request is bad".
local TRANSIENT_CODE = {
  COULDNT_CONNECT = true, COULDNT_RESOLVE_HOST = true, COULDNT_RESOLVE_PROXY = true,
  OPERATION_TIMEDOUT = true, SEND_ERROR = true, RECV_ERROR = true, GOT_NOTHING = true,
  SSL_CONNECT_ERROR = true, HTTP2 = true, HTTP2_STREAM = true, PARTIAL_FILE = true,
  -- errno-style names a provider or process layer may report
  ECONNREFUSED = true, ECONNRESET = true, ETIMEDOUT = true, EPIPE = true,
  EHOSTUNREACH = true, ENETUNREACH = true, EAI_AGAIN = true, TIMEOUT = true,
}

-- Lower-case fragments of free-text messages (strings as causes).
local TRANSIENT_TEXT = {
  "connection refused", "connection reset", "timed out", "econnreset",
  "econnrefused", "etimedout", "broken pipe", "too many requests", "service unavailable",
  "bad gateway", "gateway timeout", "temporarily unavailable",
}

local function classify_status(status)
  if type(status) ~= "number" then return nil end
  if TRANSIENT_STATUS[status] then return true end
  if status >= 400 and status < 500 then return false end
  return nil
end

local function classify_text(s)
  local low = s:lower()
  -- "HTTP 503", "status 429", or a message starting with the status code
  local status = low:match("^(%d%d%d)%f[%D]") or low:match("http%s*(%d%d%d)%f[%D]")
      or low:match("status%s*:?%s*(%d%d%d)%f[%D]")
  if status then
    local verdict = classify_status(tonumber(status))
    if verdict ~= nil then return verdict end
  end
  for _, frag in ipairs(TRANSIENT_TEXT) do
    if low:find(frag, 1, true) then return true end
  end
  return nil
end

-- Verdict of one link of a cause chain, ignoring what it wraps:
-- true (transient), false (permanent) or nil (no claim).
-- Failures no retry can mend, whatever phase they happened in.
local PERMANENT_CODE = {
  PEER_FAILED_VERIFICATION = true, -- the server's certificate does not check out
  UNSUPPORTED_PROTOCOL = true, URL_MALFORMAT = true, SSL_CERTPROBLEM = true, SSL_CACERT_BADFILE = true,
}

local function classify_one(x)
  local t = type(x)
  if t == "string" then return classify_text(x) end
  if t ~= "table" then return nil end
  local status = rawget(x, "http_status")
  local verdict = classify_status(status)
  if verdict ~= nil then return verdict end
  if getmetatable(x) == Error then return nil end
  -- transport failure table {phase, code, message, retry_safe}
  local code = rawget(x, "code")
  if type(code) == "string" and PERMANENT_CODE[code] then return false end
  if type(code) == "string" and TRANSIENT_CODE[code] then return true end
  if rawget(x, "timeout") == true then return true end
  local phase = rawget(x, "phase")
  if phase == "connect" or phase == "send" then return true end
  if phase == "framing" then return false end
  local msg = rawget(x, "message")
  if type(msg) == "string" then return classify_text(msg) end
  return nil
end

local MAX_CHAIN = 32   -- a cause chain longer than this is a bug (or a cycle)

-- errors.classify(x) -> true | false | nil. Walks x and its cause chain; the
-- first link with an opinion decides. Works on error objects, transport
-- failure tables, HTTP failure tables and strings. This is THE classifier:
-- `e.transient`, retry.lua and the create wrapper all go through it.
function M.classify(x)
  local n = 0
  while x ~= nil and n < MAX_CHAIN do
    local verdict = classify_one(x)
    if verdict ~= nil then return verdict end
    if type(x) ~= "table" then return nil end
    x = rawget(x, "cause")
    n = n + 1
  end
  return nil
end

-- errors.is_transient(x): true only when the classifier says transient.
function M.is_transient(x)
  return M.classify(x) == true
end

-- errors.retry_after(x) -> seconds or nil: the first retry_after found in the
-- cause chain (set from a Retry-After header by errors.http_failure).
function M.retry_after(x)
  local n = 0
  while type(x) == "table" and n < MAX_CHAIN do
    local ra = rawget(x, "retry_after")
    if type(ra) == "number" and ra >= 0 then return ra end
    x = rawget(x, "cause")
    n = n + 1
  end
  return nil
end

-- errors.transport_failure(x) -> the first transport failure table in the
-- chain (a table with `phase`), or nil.
function M.transport_failure(x)
  local n = 0
  while type(x) == "table" and n < MAX_CHAIN do
    if getmetatable(x) ~= Error and rawget(x, "phase") ~= nil then return x end
    x = rawget(x, "cause")
    n = n + 1
  end
  return nil
end

---------------------------------------------------------------------------
-- Rendering
---------------------------------------------------------------------------

-- errors.describe(x) -> one-line text for any cause (without its own cause).
function M.describe(x)
  local t = type(x)
  if t == "string" then return x end
  if t ~= "table" then return tostring(x) end
  if getmetatable(x) == Error then
    return string.format("%s[%s]: %s", x.class, x.stage, x.message)
  end
  local parts = {}
  local phase, code, msg = rawget(x, "phase"), rawget(x, "code"), rawget(x, "message")
  local status = rawget(x, "http_status")
  if phase then parts[#parts + 1] = "transport " .. tostring(phase) end
  if code then parts[#parts + 1] = tostring(code) end
  if status and not (type(msg) == "string" and msg:find(tostring(status), 1, true)) then
    parts[#parts + 1] = "HTTP " .. tostring(status)
  end
  local head = table.concat(parts, " ")
  if msg ~= nil then
    head = head == "" and tostring(msg) or head .. ": " .. tostring(msg)
  end
  if head == "" then
    local mt = getmetatable(x)
    if mt and mt.__tostring then return tostring(x) end
    return "<error table>"
  end
  return head
end

Error.__index = function(self, key)
  if key == "transient" then return M.classify(self) == true end
  if key == "retry_after" then return M.retry_after(rawget(self, "cause")) end
  return nil
end

Error.__newindex = function(self, key, value)
  if key == "transient" then
    error("glsb error: 'transient' is derived from the cause chain and cannot be set", 2)
  end
  rawset(self, key, value)
end

Error.__tostring = function(self)
  local s = string.format("%s[%s]: %s", self.class, self.stage, self.message)
  if self.transient then s = s .. " (transient)" end
  local cause, n = rawget(self, "cause"), 0
  while cause ~= nil and n < MAX_CHAIN do
    s = s .. " <- cause: " .. M.describe(cause)
    if type(cause) ~= "table" then break end
    cause = rawget(cause, "cause")
    n = n + 1
  end
  return s
end

---------------------------------------------------------------------------
-- Builders for providers
---------------------------------------------------------------------------

local REASON = {
  [400] = "Bad Request", [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found",
  [405] = "Method Not Allowed", [408] = "Request Timeout", [409] = "Conflict", [410] = "Gone",
  [413] = "Payload Too Large", [422] = "Unprocessable Entity", [429] = "Too Many Requests",
  [500] = "Internal Server Error", [501] = "Not Implemented", [502] = "Bad Gateway",
  [503] = "Service Unavailable", [504] = "Gateway Timeout",
}
M.REASON = REASON

local function header(headers, name)
  if type(headers) ~= "table" then return nil end
  local v = headers[name]
  if v ~= nil then return v end
  for k, val in pairs(headers) do
    if type(k) == "string" and k:lower() == name then return val end
  end
  return nil
end

local MAX_BODY_IN_MESSAGE = 300

-- errors.http_failure(status, headers, body) -> a cause table describing a
-- non-2xx response: {http_status, message, body, retry_after}. retry_after
-- comes from a Retry-After header given in seconds.
function M.http_failure(status, headers, body)
  local msg = tostring(status) .. (REASON[status] and (" " .. REASON[status]) or "")
  if type(body) == "string" and body ~= "" then
    local snippet = body:gsub("%s+", " ")
    if #snippet > MAX_BODY_IN_MESSAGE then snippet = snippet:sub(1, MAX_BODY_IN_MESSAGE) .. "..." end
    msg = msg .. ": " .. snippet
  end
  local ra = tonumber(header(headers, "retry-after"))
  return { http_status = status, message = msg, body = body, retry_after = ra }
end

-- errors.from_transport(Class, stage, failure[, message]) -> error object whose
-- cause is the transport failure table glsb.core reported.
function M.from_transport(class, stage, failure, message)
  return M.new(class, stage, message or M.describe(failure), failure)
end

-- errors.from_response(Class, stage, result[, message]) -> error object for a
-- glsb.http result {status, headers, body, error}: the transport failure when
-- there is one, else the HTTP status. Returns nil for a 2xx/3xx result.
function M.from_response(class, stage, result, message)
  if type(result) ~= "table" then
    return M.new(class, stage, message or "no response", result)
  end
  if result.error then
    return M.from_transport(class, stage, result.error, message)
  end
  local status = result.status
  if type(status) == "number" and status >= 200 and status < 400 then return nil end
  local cause = M.http_failure(status, result.headers, result.body)
  return M.new(class, stage, message and (message .. ": " .. cause.message) or cause.message, cause)
end

-- errors.wrap(Class, stage, err[, message]) -> err itself when it already is
-- a glsb error of Class (or a subclass), else a new Class error caused by err.
function M.wrap(class, stage, err, message)
  if M.is(err, class) then return err end
  return M.new(class, stage, message or M.describe(err), err)
end

return M
