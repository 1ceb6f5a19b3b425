-- glsb.providers.e2b.api: what the sandbox adapter and the template builder share:
-- where E2B lives (control plane and data plane URLs), the headers each plane wants,
-- the control-plane request, and the Connect envelope.
--
-- Facts (docs/protocols/e2b.md §1, §2, §2.1):
-- - control plane base = api_url || E2B_API_URL || "https://api.<domain>", domain =
--   domain || E2B_DOMAIN || "e2b.app"; every call carries X-API-KEY.
-- - data plane: envd on port 49983, the code interpreter on 49999, reached at
--   https://<port>-<sandboxID>.<domain>, or, with a sandbox_url override, at that one base URL
--   routed by the E2b-Sandbox-Id / E2b-Sandbox-Port headers (which we always send: the edge
--   proxy ignores them when it routes by host).
-- - Connect streams: one request envelope (1 byte flags + 4 byte big-endian length + JSON).

local http = require "glsb.http"
local errors = require "glsb.errors"
local models = require "glsb.models"
local outcome = require "glsb.outcome"
local secrets = require "glsb.secrets"
local answer = require "glsb.answer"

local M = {}

M.VERSION = "0.1.0"
M.USER_AGENT = "glsb-lua/" .. M.VERSION
M.ENVD_PORT = 49983
M.JUPYTER_PORT = 49999
M.DEFAULT_DOMAIN = "e2b.app"
M.CONNECT_TIMEOUT = 10      -- seconds to establish a TCP connection, every request
M.API_TIMEOUT = 60          -- seconds per control-plane request (the SDK's requestTimeoutMs)

-- The grammars of E2B's ids (docs/protocols/e2b.md §6), checked where an id arrives: a create or connect
-- answer, a list entry, a ref, a template name the user gives.
local function template_ref(s)
  local ident, tag = s:match("^([^:]*):(.*)$")
  ident = ident or s
  if tag and not tag:match("^[0-9A-Za-z_.-]+$") then return false end
  local ns, alias = ident:match("^([^/]*)/(.*)$")
  if ns and not ns:match("^[0-9A-Za-z_-]+$") then return false end
  return (alias or ident):match("^[0-9A-Za-z_-]+$") ~= nil
end
M.IDS = {
  sandbox = answer.grammar { what = "an E2B sandbox id", says = "lowercase letters and digits", max = 64,
    pattern = "^[a-z0-9]+$", source = "docs/protocols/e2b.md §6",
    -- what E2B's API still accepts from a user: "<sandboxID>-<clientID>" means the sandbox sandboxID
    short = function(s) return s:match("^([a-z0-9]+)%-[a-z0-9]+$") end },
  template = answer.grammar { what = "an E2B template", says = "[namespace/]name[:tag]: letters, digits, '_', '-' "
    .. "(and '.' in the tag)", max = 256, test = template_ref, source = "docs/protocols/e2b.md §6" },
  build = answer.uuid("an E2B build id", "docs/protocols/e2b.md §6"),
}

-- E2B's provider options, declared once (glsb.options): accepted by create, connect, list and the
-- template builder.
M.OPTIONS = {
  api_key = { "string", "sent as `X-API-KEY`; missing: `SandboxStartError`, no request made",
    default = "$E2B_API_KEY" },
  domain = { "string", "control plane `https://api.<domain>`, data plane `https://<port>-<id>.<domain>`",
    default = "$E2B_DOMAIN or e2b.app" },
  api_url = { "string", "control plane base URL (emulator, self-hosted)", default = "$E2B_API_URL" },
  sandbox_url = { "string", "one data-plane base URL, routed by the `E2b-Sandbox-Id`/`-Port` headers",
    default = "$E2B_SANDBOX_URL" },
  cainfo = { "string|boolean", "a CA bundle to check E2B's certificate with (self-hosted E2B, tests); false: "
    .. "the system's", default = "the system's" },
  connect_to = { "string_list", "curl `HOST:PORT:TO_HOST:TO_PORT` entries (split horizon, tests)" },
}

-- api.header(headers, name) -> the value of a response header (any case), or nil.
function M.header(headers, name)
  name = name:lower()
  for k, v in pairs(headers or {}) do
    if type(k) == "string" and k:lower() == name then return v end
  end
  return nil
end

-- api.clean(v) -> v, or nil for JSON null.
function M.clean(v)
  if v == http.json_null then return nil end
  return v
end

-- api.decode(text) -> the decoded JSON, or nil, why (not JSON, or refused as too costly to decode).
function M.decode(text)
  local ok, v, why = pcall(http.decode_json, text)
  if ok then return v, why end
  return nil, tostring(v)
end

local function strip_slash(s) return (s:gsub("/+$", "")) end

local function nonempty(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil
end

-- api.config(opts) -> {api_key, domain, api_url, sandbox_url}; api_key may be nil (the caller
-- decides how to fail). opts fields win over the E2B_* environment variables.
function M.config(opts)
  opts = opts or {}
  local domain = nonempty(opts.domain) or nonempty(os.getenv("E2B_DOMAIN")) or M.DEFAULT_DOMAIN
  local api_url = nonempty(opts.api_url) or nonempty(os.getenv("E2B_API_URL")) or ("https://api." .. domain)
  local sandbox_url = nonempty(opts.sandbox_url) or nonempty(os.getenv("E2B_SANDBOX_URL"))
  return {
    -- sent on every control-plane call: known to glsb.secrets wherever it came from (option or environment)
    api_key = secrets.register(nonempty(opts.api_key) or nonempty(os.getenv("E2B_API_KEY"))),
    domain = domain,
    api_url = strip_slash(api_url),
    sandbox_url = sandbox_url and strip_slash(sandbox_url) or nil,
    -- transport options every request gets: a private CA (self-hosted E2B, tests) and
    -- connect_to (reach the E2B host names at another address: split horizon, tests)
    cainfo = nonempty(opts.cainfo),
    connect_to = opts.connect_to,
  }
end

-- api.http(cfg, req) -> glsb.http.request(req) with the configured transport options.
function M.http(cfg, req)
  req.cainfo = req.cainfo or cfg.cainfo
  req.connect_to = req.connect_to or cfg.connect_to
  return http.request(req)
end

-- api.request(cfg, method, path, body, opts) -> glsb.http result (res.json decoded when JSON).
-- body (a table) is sent as JSON. opts: timeout (s), headers (extra), url (absolute, instead of
-- api_url .. path), raw_body (string, with opts.content_type).
function M.request(cfg, method, path, body, opts)
  opts = opts or {}
  -- POSTs are not idempotent to the transport: it never replays them (glsb.core http `idempotent`).
  local headers = { ["X-API-KEY"] = cfg.api_key, ["User-Agent"] = M.USER_AGENT }
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  local req = {
    method = method,
    url = opts.url or (cfg.api_url .. path),
    headers = headers,
    connect_timeout = M.CONNECT_TIMEOUT,
    timeout = opts.timeout or M.API_TIMEOUT,
    cainfo = cfg.cainfo,
    connect_to = cfg.connect_to,
  }
  if opts.raw_body ~= nil then
    req.body = opts.raw_body
    headers["Content-Type"] = opts.content_type or "application/octet-stream"
    return http.request(req)
  end
  req.json = body
  -- E2B answers 2xx without a body in places (204, 202); http.json leaves res.json nil then.
  return http.json(req)
end

-- E2B's own domains, where envd is reached at one shared host, https://sandbox.<domain>, routed by the
-- E2b-Sandbox-Id / E2b-Sandbox-Port headers (the SDK's ConnectionConfig.getSandboxUrl and its
-- supportedDomains; the edge proxy honours the headers on that host: infra shared/pkg/proxy/host.go).
-- One host for every sandbox: no DNS look-up and TLS handshake per sandbox. Elsewhere (self-hosted)
-- sandbox.<domain> need not exist: <port>-<id>.<domain>, as the SDK does.
M.SHARED_HOST_DOMAINS = { ["e2b.app"] = true, ["e2b.dev"] = true, ["e2b.pro"] = true, ["e2b-staging.dev"] = true }

-- api.data_url(cfg, sandbox_id, port, path[, domain]) -> URL of a data-plane endpoint: sandbox_url when
-- given; envd on E2B's own domains at the shared host; else https://<port>-<id>.<domain> (the code
-- interpreter always: the SDK's getHost(49999)).
function M.data_url(cfg, sandbox_id, port, path, domain)
  if cfg.sandbox_url then return cfg.sandbox_url .. path end
  domain = domain or cfg.domain
  if port == M.ENVD_PORT and M.SHARED_HOST_DOMAINS[domain] then return "https://sandbox." .. domain .. path end
  return string.format("https://%d-%s.%s%s", port, sandbox_id, domain, path)
end

-- api.envelope(json_text) -> one Connect envelope, flags 0.
function M.envelope(json_text)
  return string.pack(">BI4", 0, #json_text) .. json_text
end

---------------------------------------------------------------------------
-- One sandbox's data plane (E2B's SDK: one connection config under Commands, Filesystem and the
-- code interpreter): where the sandbox lives and what its requests carry.
---------------------------------------------------------------------------

local Connection = {}
Connection.__index = Connection

-- api.connection{cfg, sandbox_id, envd_token?, traffic_token?, domain?, user?, envd_version?}
function M.connection(fields) return setmetatable(fields, Connection) end

-- Headers of every data-plane request. X-Access-Token goes everywhere: envd requires it except on
-- /health and /files (where it is accepted), the interpreter wants it on /execute. POSTs are never
-- replayed by the transport when a reused connection dies before any response byte (glsb.core http
-- `idempotent`): it reports the failure.
function Connection:headers(port, extra)
  local h = {
    ["E2b-Sandbox-Id"] = self.sandbox_id,
    ["E2b-Sandbox-Port"] = tostring(port),
    ["User-Agent"] = M.USER_AGENT,
  }
  if self.envd_token then h["X-Access-Token"] = self.envd_token end
  if self.traffic_token then h["E2B-Traffic-Access-Token"] = self.traffic_token end
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

function Connection:url(port, path)
  return M.data_url(self.cfg, self.sandbox_id, port, path, self.domain)
end

function Connection:http(req) return M.http(self.cfg, req) end

M.PROBE_TIMEOUT = 5

-- conn:alive() -> true | false | nil. envd GET /health: 2xx -> true; the edge proxy's 502 "The sandbox
-- was not found" (or envd's port closed) -> false; anything else, a transport failure too -> nil (cannot
-- tell). The SDK's own probe after a dropped connection (docs/protocols/e2b.md §2, §3).
function Connection:alive()
  local res = self:http {
    method = "GET", url = self:url(M.ENVD_PORT, "/health"), headers = self:headers(M.ENVD_PORT),
    connect_timeout = M.PROBE_TIMEOUT, timeout = M.PROBE_TIMEOUT,
  }
  if res.error then return nil end
  if res.status >= 200 and res.status < 300 then return true end
  local kind = M.proxy_error(res)
  if kind == "gone" or kind == "port_closed" then return false end
  return nil
end

---------------------------------------------------------------------------
-- Answers of the data plane
---------------------------------------------------------------------------

-- body_message(res) -> the human part of an error answer: its JSON message, else the body clipped.
function M.body_message(res)
  local j = res.json
  if j == nil and type(res.body) == "string" then j = M.decode(res.body) end
  if type(j) == "table" and type(j.message) == "string" then return j.message end
  if type(res.body) == "string" and res.body ~= "" then return (res.body:gsub("%s+", " "):sub(1, 300)) end
  return errors.REASON[res.status] or ""
end

-- proxy_error(res) -> kind, body | nil: an answer of E2B's edge proxy itself (JSON with sandboxId and
-- code; infra shared/pkg/proxy/template/*.go), not of the sandbox behind it:
--   "gone"          502 "The sandbox was not found" (killed, ended, or never there)
--   "port_closed"   502 "The sandbox is running but port is not open", with the port
--   "transitioning" 409 "The sandbox is still transitioning. Try again in a moment." (pausing, resuming)
--   "limited"       429 too many connections to the sandbox (connectionLimit), or the team's sandbox limit
function M.proxy_error(res, stream)
  local j = res.json
  if j == nil and type(res.body) == "string" then j = M.decode(res.body) end
  if type(j) ~= "table" or type(j.sandboxId) ~= "string" then
    -- A Connect stream's body went to the framer; but envd answers every stream 200 (its errors come in
    -- the end-stream message) and answers 409/429 never: the status alone says it was the proxy.
    if stream and (res.body == nil or res.body == "") then
      if res.status == 409 then return "transitioning", {} end
      if res.status == 429 then return "limited", {} end
    end
    return nil
  end
  if res.status == 502 then return (j.port ~= nil and "port_closed" or "gone"), j end
  if res.status == 409 then return "transitioning", j end
  if res.status == 429 then return "limited", j end
  return nil
end

local PORT_SERVICE = { [49983] = "envd", [49999] = "the code interpreter" }

-- classify_status(res, what[, conn[, stream]]) -> ExecutionResult for a non-2xx answer to an execution
-- (stream: a Connect stream, whose body the framer took).
-- - the proxy's "sandbox not found" 502: the sandbox is gone (the SDK's TimeoutError, "sandbox
--   timeout"): TIMEOUT, marked gone (the base class then reports the sandbox as ended);
-- - the proxy's "port is not open" 502, 409 "still transitioning", 429 "too many connections": the
--   proxy refused before anything reached the sandbox: ERROR, and provably not run (retry_safe);
-- - another 502 (the proxy's plain-text "Failed to route request to sandbox"): envd's /health says
--   whether the sandbox is still there: gone -> TIMEOUT, else the request may have reached it: UNKNOWN;
-- - any other status: the service behind refused it before running anything: ERROR.
function M.classify_status(res, what, conn, stream)
  local msg = string.format("%s: HTTP %d: %s", what, res.status, M.body_message(res))
  local kind, j = M.proxy_error(res, stream)
  local ER, Status, Type = models.ExecutionResult.new, models.ExecutionStatus, models.FailureType
  if kind == "gone" then
    return ER { status = Status.TIMEOUT, error = msg .. " (the sandbox was killed or reached its end of life)",
      failure = { exception_type = outcome.GONE, retry_safe = false } }
  end
  if kind == "port_closed" then
    local port = tonumber(j.port)
    return ER { status = Status.ERROR, error = string.format("%s (port %s: %s is not running in this sandbox; "
      .. "nothing ran)", msg, tostring(j.port), PORT_SERVICE[port] or "nothing listens there"),
      failure = { exception_type = Type.REFUSED, provider_type = "port_closed", retry_safe = true } }
  end
  if kind == "transitioning" or kind == "limited" then
    return ER { status = Status.ERROR, error = msg .. " (refused by E2B's proxy before it reached the sandbox; "
      .. "nothing ran)", failure = { exception_type = Type.REFUSED, provider_type = kind, retry_safe = true } }
  end
  if res.status == 502 then
    if conn and conn:alive() == false then
      return ER { status = Status.TIMEOUT, error = msg .. " (the sandbox was killed or reached its end of life)",
        failure = { exception_type = outcome.GONE, retry_safe = false } }
    end
    return ER { status = Status.UNKNOWN, error = msg .. " (the request may have reached the sandbox)",
      failure = { exception_type = Type.SERVER, retry_safe = false } }
  end
  return ER { status = Status.ERROR, error = msg, failure = {
    exception_type = res.status >= 500 and Type.SERVER or Type.REFUSED, retry_safe = false } }
end

-- Connect error codes that prove the server refused the call before doing anything. For
-- process.Process/Start, an error before the start event means the process was never started (envd
-- sends start right after starting it: infra envd services/process/start.go), `internal` included
-- (envd could not start it); only the transport's codes (unavailable, canceled, deadline_exceeded)
-- and `unknown` leave it open.
M.CONNECT_REFUSALS = {
  invalid_argument = true, not_found = true, unauthenticated = true, permission_denied = true,
  failed_precondition = true, resource_exhausted = true, unimplemented = true, already_exists = true,
  internal = true,
}

return M
