-- glsb.providers.opensandbox.lifecycle: the lifecycle API (docs/protocols/opensandbox.md §1, §3, §4):
-- where the server is, the request every call makes, the errors it answers with.
--
--   base URL      {protocol}://{domain}/v1; a domain with a scheme overrides protocol, a path prefix is
--                 kept and a trailing /v1 dropped (as the official SDKs read OPEN_SANDBOX_DOMAIN)
--   auth          OPEN-SANDBOX-API-KEY on every call
--   errors        {code, message} (FastAPI's 422 {detail: [...]} for validation), and X-Request-ID on
--                 every response: both kept on the error and its cause (request_id, server_code), as the
--                 official SDK's SandboxApiException keeps requestId and error.code

local http = require "glsb.http"
local errors = require "glsb.errors"
local time = require "glsb.time"
local secrets = require "glsb.secrets"
local answer = require "glsb.answer"

local M = {}

-- The grammars of OpenSandbox's ids (docs/protocols/opensandbox.md §6): the server names sandboxes and
-- snapshots by str(uuid4()). Checked where an id arrives: a create answer, a list entry, a ref, a snapshot.
M.IDS = {
  sandbox = answer.uuid("an OpenSandbox sandbox id", "docs/protocols/opensandbox.md §6"),
  snapshot = answer.uuid("an OpenSandbox snapshot id", "docs/protocols/opensandbox.md §6"),
}

M.VERSION = "0.1.0"
M.USER_AGENT = "glsb-lua/" .. M.VERSION
M.DEFAULT_DOMAIN = "localhost:8080"
M.DEFAULT_REQUEST_TIMEOUT = 30   -- s per lifecycle request (the SDKs' default)
M.CONNECT_TIMEOUT = 10           -- s to establish a TCP connection
M.EXECD_PORT = 44772
-- The image with execd's Jupyter behind /code (the provider's default; init.lua's DEFAULT_IMAGE).
M.CODE_IMAGE = "opensandbox/code-interpreter:v1.1.0"
M.EGRESS_PORT = 18080

local function nonempty(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil
end

local function truthy(v)
  if v == nil then return nil end
  if type(v) == "boolean" then return v end
  v = tostring(v):lower()
  return v == "1" or v == "true" or v == "yes"
end

local function strip(s)
  s = s:gsub("/+$", "")
  if s:sub(-3) == "/v1" then s = s:sub(1, -4):gsub("/+$", "") end
  return s
end

-- config(opts) -> {base, protocol, domain, api_key, use_server_proxy, request_timeout, cainfo}. opts win
-- over OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY, OPEN_SANDBOX_PROTOCOL, OPEN_SANDBOX_USE_SERVER_PROXY,
-- OPEN_SANDBOX_REQUEST_TIMEOUT. api_key may be nil (a server without server.api_key checks none).
function M.config(opts)
  opts = opts or {}
  local domain = nonempty(opts.domain) or nonempty(os.getenv("OPEN_SANDBOX_DOMAIN")) or M.DEFAULT_DOMAIN
  local protocol = nonempty(opts.protocol) or nonempty(os.getenv("OPEN_SANDBOX_PROTOCOL")) or "http"
  local scheme, rest = domain:match("^(https?)://(.*)$")
  if scheme then protocol, domain = scheme, rest end
  if protocol ~= "http" and protocol ~= "https" then
    require("glsb.options").arg_error("opensandbox: protocol must be \"http\" or \"https\", got %s", tostring(protocol))
  end
  domain = strip(domain)
  local proxy = opts.use_server_proxy
  if proxy == nil then proxy = truthy(os.getenv("OPEN_SANDBOX_USE_SERVER_PROXY")) end
  -- the time rule (<= 0: none, nil from here on); a malformed variable is ignored
  local rt = opts.request_timeout or tonumber(os.getenv("OPEN_SANDBOX_REQUEST_TIMEOUT") or "")
  if type(rt) ~= "number" or rt ~= rt then rt = nil end
  return {
    protocol = protocol,
    domain = domain,
    base = protocol .. "://" .. domain .. "/v1",
    -- sent on every lifecycle call: known to glsb.secrets wherever it came from (option or environment)
    api_key = secrets.register(nonempty(opts.api_key) or nonempty(os.getenv("OPEN_SANDBOX_API_KEY"))),
    use_server_proxy = proxy == true,
    request_timeout = require("glsb.options").timeout(rt, M.DEFAULT_REQUEST_TIMEOUT),
    cainfo = nonempty(opts.cainfo),
  }
end

-- The public part of a config (what a sandbox ref keeps: no key).
function M.public(cfg)
  return { domain = cfg.protocol .. "://" .. cfg.domain, use_server_proxy = cfg.use_server_proxy or nil }
end

local function header(headers, name)
  if type(headers) ~= "table" then return nil end
  return headers[name] or headers[name:lower()]
end

-- failure(res) -> the cause table for a non-2xx answer: errors.http_failure's fields plus request_id
-- (X-Request-ID) and server_code (the body's code; UNEXPECTED_RESPONSE when it has none, as the SDKs say).
function M.failure(res)
  local f = errors.http_failure(res.status, res.headers, res.body)
  f.request_id = header(res.headers, "x-request-id")
  local j = res.json
  if type(j) ~= "table" and type(res.body) == "string" then
    local ok, v = pcall(http.decode_json, res.body)
    if ok then j = v end
  end
  if type(j) == "table" and type(j.code) == "string" then
    f.server_code = j.code
    if type(j.message) == "string" and j.message ~= "" then
      f.message = string.format("%d %s: %s", res.status, j.code, j.message)
    end
  else
    f.server_code = "UNEXPECTED_RESPONSE"
  end
  return f
end

-- check(class, stage, res, what) -> nil for a 2xx (a 3xx is no answer: redirects are never followed), else
-- an error object whose cause is the transport
-- failure or M.failure(res); request_id and server_code are also on the error itself.
function M.check(class, stage, res, what)
  if res.error then
    return errors.from_transport(class, stage, res.error, what .. ": " .. errors.describe(res.error))
  end
  if res.status >= 200 and res.status < 300 then return nil end
  local cause = M.failure(res)
  local e = errors.new(class, stage, what .. ": " .. cause.message
    .. (cause.request_id and (" (request id " .. cause.request_id .. ")") or ""), cause)
  e.request_id = cause.request_id
  e.server_code = cause.server_code
  e.http_status = res.status
  return e
end

function M.raise_if(class, stage, res, what)
  local e = M.check(class, stage, res, what)
  if e then error(e, 0) end
  return res
end

-- request(cfg, method, path, body, opts) -> glsb.http result with res.json. body (a table) goes as JSON;
-- opts: timeout (s; nil: cfg.request_timeout, itself nil for none), query (string, without "?").
function M.request(cfg, method, path, body, opts)
  opts = opts or {}
  local headers = { ["User-Agent"] = M.USER_AGENT }
  if cfg.api_key then headers["OPEN-SANDBOX-API-KEY"] = cfg.api_key end
  local url = cfg.base .. path .. (opts.query and opts.query ~= "" and ("?" .. opts.query) or "")
  -- (http.json decodes with cjson.safe: a body that is not JSON leaves res.json nil)
  return http.json {
    method = method, url = url, headers = headers, json = body,
    connect_timeout = M.CONNECT_TIMEOUT, timeout = opts.timeout or cfg.request_timeout or 0, -- 0: none
    cainfo = cfg.cainfo,
  }
end

-- sandbox_path(id[, rest]) -> "/sandboxes/<id><rest>"
function M.sandbox_path(id, rest)
  return "/sandboxes/" .. http.segment(id) .. (rest or "")
end

-- query(pairs) -> "k=v&k=v2" from an array of {k, v} (repeated keys kept, values escaped).
function M.query(list)
  local out = {}
  for _, kv in ipairs(list) do out[#out + 1] = http.escape(kv[1]) .. "=" .. http.escape(kv[2]) end
  return table.concat(out, "&")
end

-- metadata_filter(t) -> the one `metadata` value the server parses with parse_qsl: "k1=v1&k2=v2",
-- sorted for a stable URL (it is escaped again as a whole by query()).
function M.metadata_filter(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = http.escape(k) .. "=" .. http.escape(tostring(t[k])) end
  return table.concat(parts, "&")
end

-- expires_in(seconds) -> RFC 3339 UTC with milliseconds, `seconds` from now by the wall clock (as the
-- SDK's `new Date(Date.now() + s * 1e3).toISOString()`). Whole seconds would not do: os.time() + 1
-- can be a millisecond ahead, and the server refuses an expiry that has passed when the request
-- arrives ("New expiration time must be in the future").
function M.expires_in(seconds)
  local ms = math.floor(time.wall() * 1000) + math.ceil(seconds * 1000)
  return time.iso(ms / 1000, true)
end

return M
