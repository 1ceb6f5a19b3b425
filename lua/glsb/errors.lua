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

local time = require "glsb.time"
local secrets = require "glsb.secrets"

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
-- glsb.lm (stage "lm"): a model call failed (reason: auth, rate_limit, context_length, server, ...)
define("LMError", Root)
-- glsb.pool (stage "pool"); the names follow OpenSandbox's pool exceptions (PoolEmptyException, ...)
local PoolError = define("PoolError", Root)
define("PoolEmptyError", PoolError)                  -- fail_fast acquire found no idle sandbox
define("PoolAcquireFailedError", PoolError)          -- fail_fast acquire: the idle sandbox taken was not usable
define("PoolNotRunningError", PoolError)             -- the pool is not started, draining or stopped
define("PoolStateStoreUnavailableError", PoolError)  -- the state store (Redis) failed or cannot be reached
define("PoolDestroyedError", PoolError)              -- the pool was destroyed

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
  -- the one place an error's text is made: no registered secret stays in it (glsb.secrets)
  return setmetatable({ class = c.name, stage = stage, message = secrets.scrub(message or c.name), cause = cause },
    Error)
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

-- Failure codes. glsb.core lists every code it can report in core.codes (libcurl's names, errno names,
-- its own); spec/core/codes_spec.lua checks that each one is in exactly one of the three tables below.
-- A code decides the verdict of its failure table; text is read only where no code is known.

-- "The network or the peer hiccuped; the same request may well work later."
local TRANSIENT_CODE = {
  -- libcurl
  COULDNT_CONNECT = true, COULDNT_RESOLVE_HOST = true, COULDNT_RESOLVE_PROXY = true,
  OPERATION_TIMEDOUT = true, SEND_ERROR = true, RECV_ERROR = true, GOT_NOTHING = true,
  SSL_CONNECT_ERROR = true, HTTP2 = true, HTTP2_STREAM = true, PARTIAL_FILE = true, AGAIN = true,
  NO_CONNECTION_AVAILABLE = true, PROXY = true, HTTP3 = true, QUIC_CONNECT_ERROR = true,
  -- glsb.core
  IDLE_TIMEOUT = true,
  -- errno
  EAGAIN = true, EINTR = true, EBUSY = true, ETXTBSY = true, EMFILE = true, ENFILE = true,
  ECONNREFUSED = true, ECONNRESET = true, ETIMEDOUT = true, EPIPE = true,
  EHOSTUNREACH = true, ENETUNREACH = true,
  -- names a provider or process layer may report (not from glsb.core); SERVER_ERROR: a model API's 5xx
  -- that no status rule decides (500, 529 overloaded), which the OpenAI and Anthropic SDKs retry
  EAI_AGAIN = true, TIMEOUT = true, SERVER_ERROR = true,
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

-- "No retry can mend this", whatever phase it happened in.
local PERMANENT_CODE = {
  -- libcurl: the request, the TLS set-up or the credentials are wrong
  PEER_FAILED_VERIFICATION = true, -- the server's certificate does not check out
  UNSUPPORTED_PROTOCOL = true, URL_MALFORMAT = true, NOT_BUILT_IN = true, SSL_CERTPROBLEM = true,
  SSL_CACERT_BADFILE = true, SSL_CIPHER = true, SSL_ENGINE_NOTFOUND = true, SSL_ENGINE_SETFAILED = true,
  SSL_ENGINE_INITFAILED = true, SSL_CRL_BADFILE = true, SSL_ISSUER_ERROR = true,
  SSL_PINNEDPUBKEYNOTMATCH = true, SSL_INVALIDCERTSTATUS = true, SSL_CLIENTCERT = true, USE_SSL_FAILED = true,
  LOGIN_DENIED = true, AUTH_ERROR = true, REMOTE_ACCESS_DENIED = true, BAD_FUNCTION_ARGUMENT = true,
  UNKNOWN_OPTION = true, SETOPT_OPTION_SYNTAX = true, FUNCTION_NOT_FOUND = true, TOO_MANY_REDIRECTS = true,
  BAD_CONTENT_ENCODING = true, FILESIZE_EXCEEDED = true, INTERFACE_FAILED = true,
  -- glsb.core: the body broke its framing rules, or an archive / encoding is bad
  FRAME_TOO_LARGE = true, TRUNCATED_ENVELOPE = true, TRUNCATED_MESSAGE = true, PRELUDE_CRC = true,
  MESSAGE_CRC = true, BAD_LENGTH = true, BAD_HEADERS = true, BODY_TOO_LARGE = true,
  TAR_CORRUPT = true, TAR_UNSAFE_ENTRY = true, TAR_TOO_LARGE = true, BAD_BASE64 = true,
  BAD_HEADER_VALUE = true, -- CR, LF or NUL in a header (an id a server sent): the same request stays refused
  -- errno: the path, the program or the permissions are wrong
  EPERM = true, ENOENT = true, EACCES = true, ENOTDIR = true, EISDIR = true, EINVAL = true,
  ENAMETOOLONG = true, ELOOP = true, EROFS = true, EEXIST = true, ENOEXEC = true, E2BIG = true,
  EXDEV = true, ENOTEMPTY = true, EBADF = true, ENOSYS = true, EOPNOTSUPP = true, EFAULT = true,
  ESPIPE = true, EMLINK = true, EFBIG = true, ERANGE = true, EOVERFLOW = true, ENODEV = true, ENXIO = true,
  -- names a provider may report (not from glsb.core): an account's limit, e.g. E2B's concurrent sandboxes;
  -- the provider has no such sandbox (errors.no_such_sandbox)
  QUOTA_EXCEEDED = true, NO_SUCH_SANDBOX = true,
}

-- Codes that make no claim either way: the failure's phase or timeout flag decides, never its text.
local NO_CLAIM_CODE = {
  -- libcurl: other protocols' codes (glsb.core allows only http and https), and failures whose
  -- meaning another field carries (an HTTP status, the framer's own code, NOT_RESENT)
  FAILED_INIT = true, WEIRD_SERVER_REPLY = true, FTP_ACCEPT_FAILED = true, FTP_WEIRD_PASS_REPLY = true,
  FTP_ACCEPT_TIMEOUT = true, FTP_WEIRD_PASV_REPLY = true, FTP_WEIRD_227_FORMAT = true,
  FTP_CANT_GET_HOST = true, FTP_COULDNT_SET_TYPE = true, FTP_COULDNT_RETR_FILE = true, QUOTE_ERROR = true,
  HTTP_RETURNED_ERROR = true, WRITE_ERROR = true, UPLOAD_FAILED = true, READ_ERROR = true,
  OUT_OF_MEMORY = true, FTP_PORT_FAILED = true, FTP_COULDNT_USE_REST = true, RANGE_ERROR = true,
  HTTP_POST_ERROR = true, BAD_DOWNLOAD_RESUME = true, FILE_COULDNT_READ_FILE = true, LDAP_CANNOT_BIND = true,
  LDAP_SEARCH_FAILED = true, ABORTED_BY_CALLBACK = true, SEND_FAIL_REWIND = true, TFTP_NOTFOUND = true,
  TFTP_PERM = true, REMOTE_DISK_FULL = true, TFTP_ILLEGAL = true, TFTP_UNKNOWNID = true,
  REMOTE_FILE_EXISTS = true, TFTP_NOSUCHUSER = true, REMOTE_FILE_NOT_FOUND = true, SSH = true,
  SSL_SHUTDOWN_FAILED = true, FTP_PRET_FAILED = true, RTSP_CSEQ_ERROR = true, RTSP_SESSION_ERROR = true,
  FTP_BAD_FILE_LIST = true, CHUNK_FAILED = true, RECURSIVE_API_CALL = true, UNRECOVERABLE_POLL = true,
  CURL_OTHER = true,
  -- glsb.core
  NOT_RESENT = true, -- the request was sent, then the connection died: retry_safe = false says the rest
  HTTP_SETUP_FAILED = true, POLL_FAILED = true, TAR_WRITE_FAILED = true, TREE_CHANGED = true,
  -- errno
  ESRCH = true, EIO = true, ECHILD = true, ENOMEM = true, ENOSPC = true, EDQUOT = true, ESTALE = true,
  ECANCELED = true, EOTHER = true,
}

-- The three tables, for specs and tools (read-only by convention).
M.codes = { transient = TRANSIENT_CODE, permanent = PERMANENT_CODE, no_claim = NO_CLAIM_CODE }

-- Verdict of one link of a cause chain, ignoring what it wraps: true (transient), false (permanent)
-- or nil (no claim), and the rule that decided ("status", "code", "timeout", "phase", "text"; nil
-- when none did).
local function classify_one(x)
  local t = type(x)
  if t == "string" then return classify_text(x), "text" end
  if t ~= "table" then return nil end
  local status = rawget(x, "http_status")
  local verdict = classify_status(status)
  if verdict ~= nil then return verdict, "status" end
  if getmetatable(x) == Error then return nil end
  -- transport failure table {phase, code, message, retry_safe}
  local code = rawget(x, "code")
  local known = type(code) == "string"
    and (PERMANENT_CODE[code] or TRANSIENT_CODE[code] or NO_CLAIM_CODE[code])
  if known and PERMANENT_CODE[code] then return false, "code" end
  if known and TRANSIENT_CODE[code] then return true, "code" end
  if rawget(x, "timeout") == true then return true, "timeout" end
  local phase = rawget(x, "phase")
  if phase == "connect" or phase == "send" then return true, "phase" end
  if phase == "framing" then return false, "phase" end
  -- A known code said all there is: its message is not second-guessed. Text is read only for
  -- failures that carry nothing better (no code we know, no status with an opinion).
  if known then return nil end
  local msg = rawget(x, "message")
  if type(msg) == "string" then return classify_text(msg), "text" end
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

-- errors.explain(x) -> verdict, rule, link: what errors.classify decides, which rule decided it
-- ("status", "code", "timeout", "phase" or "text") and at which link of the chain (1 = x itself);
-- nil, nil, nil when no link has an opinion. For logs, and for specs that pin where text is read.
function M.explain(x)
  local n = 0
  while x ~= nil and n < MAX_CHAIN do
    local verdict, rule = classify_one(x)
    if verdict ~= nil then return verdict, rule, n + 1 end
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

-- errors.has_code(x, code) -> true when x or a link of its cause chain carries code (a table's `code`).
function M.has_code(x, code)
  local n = 0
  while type(x) == "table" and n < MAX_CHAIN do
    if rawget(x, "code") == code then return true end
    x = rawget(x, "cause")
    n = n + 1
  end
  return false
end

-- errors.no_such_sandbox(e) -> e, marked as the provider's word that it has no such sandbox (connect or
-- kill of one that ended or never was: E2B's and OpenSandbox's 404, a session AgentCore says is over). Only
-- that word lets a caller take a sandbox as gone (a pool forgets its entry); any other failure of connect
-- or kill leaves the sandbox possibly alive. errors.is_no_such_sandbox(x) reads the mark.
M.NO_SUCH_SANDBOX = "NO_SUCH_SANDBOX"
function M.no_such_sandbox(e)
  rawset(e, "cause", { code = M.NO_SUCH_SANDBOX, cause = rawget(e, "cause") })
  return e
end
function M.is_no_such_sandbox(x) return M.has_code(x, M.NO_SUCH_SANDBOX) end

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

-- words(x) -> what a cause says in words (without its own cause), or nil when it says nothing a person
-- can read: a table of data only ({log = ""}, {exit = {...}}), whose fields stay on the error for programs.
local function words(x)
  local t = type(x)
  if t == "string" then return x end
  if t ~= "table" then return x ~= nil and tostring(x) or nil end
  if getmetatable(x) == Error then
    return string.format("%s[%s]: %s", x.class, x.stage, x.message)
  end
  local mt = getmetatable(x)
  if mt and type(rawget(mt, "__describe")) == "function" then return mt.__describe(x) end
  local parts = {}
  local phase, code, msg = rawget(x, "phase"), rawget(x, "code"), rawget(x, "message")
  local status = rawget(x, "http_status")
  if phase then parts[#parts + 1] = "transport " .. tostring(phase) end
  if code then parts[#parts + 1] = tostring(code) end
  if status and not (type(msg) == "string" and msg:find(tostring(status), 1, true)) then
    parts[#parts + 1] = "HTTP " .. tostring(status)
  end
  local head = table.concat(parts, " ")
  if msg == nil then
    -- what other layers call their text (a helper's report, a tool's failure)
    for _, k in ipairs({ "error", "reason", "detail", "value" }) do
      local v = rawget(x, k)
      if type(v) == "string" and v ~= "" then msg = v break end
    end
  end
  if msg ~= nil then
    head = head == "" and tostring(msg) or head .. ": " .. tostring(msg)
  end
  if head == "" then
    if mt and mt.__tostring then return tostring(x) end
    return nil
  end
  return head
end
M.words = words

-- errors.describe(x) -> one-line text for any cause (without its own cause); a table of data only is
-- shown by its scalar fields (errors.compact).
function M.describe(x)
  local w = words(x)
  if w ~= nil then return w end
  return M.compact(x)
end

-- errors.compact(t) -> "{k=v, ...}": a table's scalar fields, sorted, clipped (never "<error table>").
function M.compact(t)
  local keys = {}
  for k, v in pairs(t) do
    local tv = type(v)
    if tv == "string" or tv == "number" or tv == "boolean" then keys[#keys + 1] = tostring(k) end
  end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    if v == nil then v = t[tonumber(k)] end
    out[#out + 1] = k .. "=" .. (type(v) == "string" and string.format("%q", v:sub(1, 120)):gsub("\\\n", "\\n")
      or tostring(v))
  end
  local s = "{" .. table.concat(out, ", ") .. "}"
  if #s > 300 then s = s:sub(1, 297) .. "...}" end
  return s
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

-- errors.causes(e) -> array of what e's cause chain says, each once: a link whose words are already in
-- the message or in an earlier link is left out (a message that quotes its cause, a wrapper that repeats
-- what it wraps), and so is a link that says nothing in words (a table of data only). The message itself
-- is not in the array.
function M.causes(e)
  local out = {}
  local said = { tostring(rawget(e, "message") or "") }
  local function new_words(w)
    for _, s in ipairs(said) do
      if s:find(w, 1, true) then return false end
    end
    return true
  end
  local cause, n = rawget(e, "cause"), 0
  while cause ~= nil and n < MAX_CHAIN do
    local is_err = getmetatable(cause) == Error
    -- an error object is judged by its message: the class and stage do not make a repeat new
    local w = is_err and tostring(rawget(cause, "message") or "") or words(cause)
    if w ~= nil and w ~= "" and new_words(w) then
      out[#out + 1] = is_err and string.format("%s[%s]: %s", cause.class, cause.stage, w) or w
      said[#said + 1] = w
    end
    if type(cause) ~= "table" then break end
    cause = rawget(cause, "cause")
    n = n + 1
  end
  return out
end

Error.__tostring = function(self)
  local s = string.format("%s[%s]: %s", self.class, self.stage, tostring(self.message))
  if self.transient then s = s .. " (transient)" end
  for _, w in ipairs(M.causes(self)) do s = s .. " <- cause: " .. w end
  -- causes carry what other layers wrote (a transport's message, a server's words): scrubbed here too
  return secrets.scrub(s)
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

-- errors.retry_after_of(headers) -> seconds or nil: what a response asks a client to wait. The
-- non-standard retry-after-ms (milliseconds; the OpenAI and Anthropic SDKs read it first) wins over
-- Retry-After (seconds, or an HTTP date counted from the answer's own Date header: glsb.time).
function M.retry_after_of(headers)
  local ms = header(headers, "retry-after-ms")
  ms = type(ms) == "string" and tonumber(ms:match("^%s*(%d+%.?%d*)%s*$") or "")
  if ms then return ms / 1000 end
  return time.retry_after(header(headers, "retry-after"), time.parse_http_date(header(headers, "date")))
end

-- errors.http_failure(status, headers, body) -> a cause table describing a
-- non-2xx response: {http_status, message, body, retry_after}. retry_after
-- comes from the response's retry-after-ms or Retry-After header (errors.retry_after_of).
function M.http_failure(status, headers, body)
  local msg = tostring(status) .. (REASON[status] and (" " .. REASON[status]) or "")
  -- a server may quote the request back (its headers, and so its keys): the body kept is scrubbed
  if type(body) == "string" then body = secrets.scrub(body) end
  if type(body) == "string" and body ~= "" then
    local snippet = body:gsub("%s+", " ")
    if #snippet > MAX_BODY_IN_MESSAGE then snippet = snippet:sub(1, MAX_BODY_IN_MESSAGE) .. "..." end
    msg = msg .. ": " .. snippet
  end
  return { http_status = status, message = msg, body = body, retry_after = M.retry_after_of(headers) }
end

-- errors.from_transport(Class, stage, failure[, message]) -> error object whose
-- cause is the transport failure table glsb.core reported.
function M.from_transport(class, stage, failure, message)
  return M.new(class, stage, message or M.describe(failure), failure)
end

-- errors.from_response(Class, stage, result[, message]) -> error object for a
-- glsb.http result {status, headers, body, error}: the transport failure when
-- there is one, else the HTTP status. Returns nil for a 2xx result only: redirects are never followed, so a
-- 3xx is no answer to the call (a DELETE answered 302 did not delete anything).
function M.from_response(class, stage, result, message)
  if type(result) ~= "table" then
    return M.new(class, stage, message or "no response", result)
  end
  if result.error then
    -- the curl reason goes into the message itself: the first line a reader sees says why
    return M.from_transport(class, stage, result.error, message and (message .. ": " .. M.describe(result.error)))
  end
  local status = result.status
  if type(status) == "number" and status >= 200 and status < 300 then return nil end
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
