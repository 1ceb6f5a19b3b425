-- glsb.aws.credentials: AWS credentials and region, found as the AWS SDKs find them.
--
--   local credentials = require "glsb.aws.credentials"
--   local provider = credentials.chain(opts)     -- opts: access_key_id, secret_access_key,
--                                                -- session_token, profile, region
--   local creds = provider:get()                 -- fresh enough to sign with (refreshed
--                                                -- REFRESH_WINDOW seconds before they expire)
--   local region = credentials.region(opts)      -- or nil
--
-- The chain, first source that has credentials wins:
--   1. options: access_key_id + secret_access_key (+ session_token)
--   2. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
--   3. shared files: the profile (opts.profile, AWS_PROFILE, "default") in the credentials file
--      (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials) then the config file (AWS_CONFIG_FILE,
--      ~/.aws/config, section "[profile NAME]" or "[default]")
--   4. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on 169.254.170.2) or
--      AWS_CONTAINER_CREDENTIALS_FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
--      AWS_CONTAINER_AUTHORIZATION_TOKEN as the Authorization header
--   5. EC2 instance metadata, IMDSv2 only: PUT /latest/api/token, then the role's credentials
--      (AWS_EC2_METADATA_SERVICE_ENDPOINT overrides the endpoint; AWS_EC2_METADATA_DISABLED=true
--      skips it)
-- Not supported (a clear error when a profile needs them): assume-role profiles (role_arn),
-- credential_process, SSO, web identity; nor AWS_WEB_IDENTITY_TOKEN_FILE (the SDKs try it after the
-- profile, before container credentials and IMDS): when it is set and nothing before it matched, the
-- chain stops there with a clear error instead of taking the container's or instance's role.
--
-- Secrets never reach a log line, an error message or tostring(): Credentials print as
-- "AwsCredentials(AKID…, source=…)", errors name the source and the status, never a body, and
-- redact(text, creds) scrubs a secret out of text that came from elsewhere (a server's message).
local http = require "glsb.http"
local time = require "glsb.time"
local loop = require "glsb.loop"
local errors = require "glsb.errors"

local M = {}

M.REFRESH_WINDOW = 300       -- seconds before expiry when temporary credentials are fetched again
M.METADATA_TIMEOUT = 2       -- seconds per request to the container / instance metadata endpoints
M.CONTAINER_HOST = "http://169.254.170.2"
M.IMDS_ENDPOINT = "http://169.254.169.254"
M.IMDS_TOKEN_TTL = 21600

---------------------------------------------------------------------------
-- Credentials objects
---------------------------------------------------------------------------

local Credentials = {}
Credentials.__index = Credentials
Credentials.__name = "glsb.aws.Credentials"
Credentials.__tostring = function(c)
  local exp = c.expiration and (", expires " .. time.iso(c.expiration)) or ""
  return string.format("AwsCredentials(%s, source=%s%s%s)", tostring(c.access_key_id), tostring(c.source),
    c.session_token and ", temporary" or "", exp)
end

-- new{access_key_id, secret_access_key, session_token?, expiration? (epoch seconds), source}
function M.new(t)
  return setmetatable({ access_key_id = t.access_key_id, secret_access_key = t.secret_access_key,
    session_token = t.session_token, expiration = t.expiration, source = t.source }, Credentials)
end

function M.is_credentials(x) return getmetatable(x) == Credentials end

-- redact(text, creds) -> text with the secret key and the session token replaced.
function M.redact(text, creds)
  if type(text) ~= "string" or type(creds) ~= "table" then return text end
  for _, secret in ipairs({ creds.secret_access_key, creds.session_token }) do
    if type(secret) == "string" and #secret >= 4 then
      local from = 1
      while true do
        local i, j = text:find(secret, from, true)
        if not i then break end
        text = text:sub(1, i - 1) .. "<redacted>" .. text:sub(j + 1)
        from = i + 10
      end
    end
  end
  return text
end

local function fail(source, message)
  -- a plain failure table (errors.describe reads `message`): the caller wraps it with its stage
  return { source = source, message = "AWS credentials (" .. source .. "): " .. message }
end

local function nonempty(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil
end

---------------------------------------------------------------------------
-- Shared files (INI)
---------------------------------------------------------------------------

local function home_file(getenv, ...)
  local home = nonempty(getenv("HOME"))
  if not home then return nil end
  return home .. "/" .. table.concat({ ... }, "/")
end

-- parse_ini(text) -> {section = {key = value}}; comments (# ;) and sub-properties ignored.
function M.parse_ini(text)
  local sections, current = {}, nil
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do
    local stripped = line:gsub("^%s+", ""):gsub("%s+$", "")
    if stripped == "" or stripped:match("^[#;]") then -- luacheck: ignore 542
    elseif stripped:match("^%[.*%]$") then
      local name = stripped:sub(2, -2):gsub("^%s+", ""):gsub("%s+$", "")
      sections[name] = sections[name] or {}
      current = sections[name]
    elseif current and not line:match("^%s") then
      local k, v = stripped:match("^([^=]-)%s*=%s*(.-)$")
      if k and k ~= "" then current[k:lower()] = v end
    end
  end
  return sections
end

local function read_ini(path)
  if not path then return nil end
  local f = io.open(path, "r")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  return M.parse_ini(text)
end

local function shared_files(getenv)
  local creds_path = nonempty(getenv("AWS_SHARED_CREDENTIALS_FILE")) or home_file(getenv, ".aws", "credentials")
  local config_path = nonempty(getenv("AWS_CONFIG_FILE")) or home_file(getenv, ".aws", "config")
  return read_ini(creds_path) or {}, read_ini(config_path) or {}, creds_path, config_path
end

local function env_of(opts)
  return opts.getenv or os.getenv
end

local function profile_name(opts)
  local explicit = nonempty(opts.profile) or nonempty(env_of(opts)("AWS_PROFILE"))
  return explicit or "default", explicit ~= nil
end

-- The profile's merged settings: the credentials file wins over the config file for the same key.
local function profile(opts)
  local name, explicit = profile_name(opts)
  local cfile, conf = shared_files(env_of(opts))
  local from_config = conf[name == "default" and "default" or ("profile " .. name)]
  if name == "default" and not from_config then from_config = conf["profile default"] end
  local from_creds = cfile[name]
  if not from_config and not from_creds then return nil, name, explicit end
  local merged = {}
  for k, v in pairs(from_config or {}) do merged[k] = v end
  for k, v in pairs(from_creds or {}) do merged[k] = v end
  return merged, name, explicit
end

---------------------------------------------------------------------------
-- Sources: each returns Credentials, or nil (no claim: try the next), or raises a failure
---------------------------------------------------------------------------

local function from_options(opts)
  local id, secret = nonempty(opts.access_key_id), nonempty(opts.secret_access_key)
  if not id and not secret then return nil end
  if not id or not secret then
    error("aws credentials: access_key_id and secret_access_key go together", 4)
  end
  return M.new { access_key_id = id, secret_access_key = secret, session_token = nonempty(opts.session_token),
    source = "options" }
end

local function from_env(opts)
  local getenv = env_of(opts)
  local id, secret = nonempty(getenv("AWS_ACCESS_KEY_ID")), nonempty(getenv("AWS_SECRET_ACCESS_KEY"))
  if not id or not secret then return nil end
  return M.new { access_key_id = id, secret_access_key = secret,
    session_token = nonempty(getenv("AWS_SESSION_TOKEN")), source = "environment" }
end

local function from_profile(opts)
  local p, name, explicit = profile(opts)
  if not p then
    if explicit then error(fail("profile", ("the profile '%s' is in neither shared file"):format(name)), 0) end
    return nil
  end
  local id, secret = nonempty(p.aws_access_key_id), nonempty(p.aws_secret_access_key)
  if id and secret then
    return M.new { access_key_id = id, secret_access_key = secret, session_token = nonempty(p.aws_session_token),
      source = "profile " .. name }
  end
  for _, k in ipairs({ "role_arn", "credential_process", "sso_session", "sso_start_url", "web_identity_token_file" }) do
    if p[k] then
      error(fail("profile", ("the profile '%s' gets its credentials through %s, which glsb does not support; "
        .. "give keys (options, environment or the profile) instead"):format(name, k)), 0)
    end
  end
  if explicit then
    error(fail("profile", ("the profile '%s' has no aws_access_key_id/aws_secret_access_key"):format(name)), 0)
  end
  return nil
end

-- A JSON credentials document of the container endpoint or IMDS -> Credentials.
local function from_document(doc, source)
  if type(doc) ~= "table" then error(fail(source, "the answer is not a JSON object"), 0) end
  if doc.Code ~= nil and doc.Code ~= "Success" then
    error(fail(source, "the endpoint says " .. tostring(doc.Code)), 0)
  end
  local id, secret = nonempty(doc.AccessKeyId), nonempty(doc.SecretAccessKey)
  if not id or not secret then error(fail(source, "the answer has no AccessKeyId/SecretAccessKey"), 0) end
  local expiration = doc.Expiration and time.parse_iso(doc.Expiration)
  if doc.Expiration and not expiration then error(fail(source, "the answer's Expiration is not ISO-8601"), 0) end
  return M.new { access_key_id = id, secret_access_key = secret, session_token = nonempty(doc.Token),
    expiration = expiration, source = source }
end

local function metadata_get(source, req)
  req.connect_timeout = req.connect_timeout or M.METADATA_TIMEOUT
  req.timeout = req.timeout or M.METADATA_TIMEOUT
  local res = http.request(req)
  if res.error then
    error(fail(source, ("%s %s: %s"):format(req.method or "GET", (req.url:gsub("%?.*$", "")),
      errors.describe(res.error))), 0)
  end
  if res.status < 200 or res.status >= 300 then
    error(fail(source, ("%s %s answered HTTP %d"):format(req.method or "GET", (req.url:gsub("%?.*$", "")),
      res.status)), 0)
  end
  return res.body or ""
end

-- Full URIs over plain HTTP may only name the local container agents (as the AWS SDKs require).
local function allowed_full_uri(uri)
  if uri:match("^https://") then return true end
  local host = uri:match("^http://%[([^%]]+)%]") or uri:match("^http://([^/:]+)")
  if not host then return false end
  return host == "localhost" or host:match("^127%.%d+%.%d+%.%d+$") ~= nil or host == "::1"
    or host == "169.254.170.2" or host == "169.254.170.23" or host:lower() == "fd00:ec2::23"
end

local function from_container(opts)
  local getenv = env_of(opts)
  local rel, full = nonempty(getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")),
    nonempty(getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"))
  if not rel and not full then return nil end
  local url
  if rel then
    url = (opts.container_host or M.CONTAINER_HOST) .. (rel:sub(1, 1) == "/" and rel or "/" .. rel)
  else
    if not allowed_full_uri(full) then
      error(fail("container", "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http on a loopback or "
        .. "container-agent address"), 0)
    end
    url = full
  end
  local headers = {}
  local token_file = nonempty(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))
  local token
  if token_file then
    local f = io.open(token_file, "r")
    if not f then error(fail("container", "cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), 0) end
    token = f:read("a"):gsub("%s+$", "")
    f:close()
  else
    token = nonempty(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"))
  end
  if token then
    if token:find("[\r\n]") then error(fail("container", "the authorization token contains a line break"), 0) end
    headers.Authorization = token
  end
  local body = metadata_get("container", { method = "GET", url = url, headers = headers })
  return from_document(http.decode_json(body), "container")
end

local function from_imds(opts)
  local getenv = env_of(opts)
  local disabled = (getenv("AWS_EC2_METADATA_DISABLED") or ""):lower()
  if disabled == "true" then return nil end
  local base = (nonempty(opts.imds_endpoint) or nonempty(getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"))
    or M.IMDS_ENDPOINT):gsub("/+$", "")
  local token = metadata_get("imds", { method = "PUT", url = base .. "/latest/api/token",
    headers = { ["X-aws-ec2-metadata-token-ttl-seconds"] = tostring(M.IMDS_TOKEN_TTL) }, body = "", idempotent = true })
  local h = { ["X-aws-ec2-metadata-token"] = token }
  local roles = metadata_get("imds", { method = "GET", url = base .. "/latest/meta-data/iam/security-credentials/",
    headers = h })
  local role = roles:match("^%s*([^\r\n]+)")
  if not role then error(fail("imds", "the instance has no IAM role"), 0) end
  role = role:gsub("%s+$", "")
  local doc = metadata_get("imds", { method = "GET", url = base .. "/latest/meta-data/iam/security-credentials/"
    .. http.escape(role), headers = h })
  return from_document(http.decode_json(doc), "imds")
end

-- The SDKs' web-identity source (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN: an EKS service account's
-- role, assumed through STS) comes before container credentials and IMDS. glsb calls no STS; going on
-- down the chain would sign with another identity (on EKS, IMDS answers with the node's role).
local function from_web_identity(opts)
  if not nonempty(env_of(opts)("AWS_WEB_IDENTITY_TOKEN_FILE")) then return nil end
  error(fail("web identity", "AWS_WEB_IDENTITY_TOKEN_FILE is set (a role assumed with a web identity token, "
    .. "as on EKS), which glsb does not support; give keys (options, environment or a profile) instead"), 0)
end

M.SOURCES = {
  { name = "options", fn = from_options },
  { name = "environment", fn = from_env },
  { name = "profile", fn = from_profile },
  { name = "web identity", fn = from_web_identity },
  { name = "container", fn = from_container },
  { name = "imds", fn = from_imds },
}

---------------------------------------------------------------------------
-- The provider: resolve once, refresh temporary credentials before they expire
---------------------------------------------------------------------------

local Provider = {}
Provider.__index = Provider
Provider.__name = "glsb.aws.CredentialProvider"
Provider.__tostring = function(p)
  return "AwsCredentialProvider(" .. (p.current and tostring(p.current) or "unresolved") .. ")"
end

-- chain(opts) -> a provider. opts as above; for tests: opts.getenv (function name -> value, instead
-- of os.getenv), opts.now (function -> epoch seconds), opts.container_host (instead of
-- http://169.254.170.2), opts.imds_endpoint.
function M.chain(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("aws credentials: opts must be a table", 2) end
  -- options are checked now (misuse is an argument error at the call that made it)
  if (nonempty(opts.access_key_id) == nil) ~= (nonempty(opts.secret_access_key) == nil) then
    error("aws credentials: access_key_id and secret_access_key go together", 2)
  end
  local copy = {}
  for _, k in ipairs({ "access_key_id", "secret_access_key", "session_token", "profile", "container_host",
    "imds_endpoint", "now", "getenv" }) do copy[k] = opts[k] end
  return setmetatable({ opts = copy, current = nil, lock = loop.lock() }, Provider)
end

function Provider:_now()
  return self.opts.now and self.opts.now() or os.time()
end

local function resolve(opts)
  local tried = {}
  for _, src in ipairs(M.SOURCES) do
    local creds = src.fn(opts)
    if creds then return creds end
    tried[#tried + 1] = src.name
  end
  error(fail("chain", "none found (tried " .. table.concat(tried, ", ")
    .. "): pass access_key_id/secret_access_key, set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    .. "or configure a profile"), 0)
end

function Provider:_fresh()
  local c = self.current
  return c and (c.expiration == nil or c.expiration - self:_now() > M.REFRESH_WINDOW)
end

-- get() -> Credentials. Raises a failure table {source, message} (never containing a secret)
-- when no source has credentials. Temporary credentials are fetched again REFRESH_WINDOW seconds
-- before they expire; if that fails while the old ones are still valid, the old ones are used.
function Provider:get()
  if self:_fresh() then return self.current end
  local ok, res = self.lock:with(nil, function()
    if self:_fresh() then return self.current end -- another task refreshed meanwhile
    local good, creds = pcall(resolve, self.opts)
    if good then
      self.current = creds
      return creds
    end
    if loop.is_cancelled(creds) then error(creds, 0) end
    local old = self.current
    if old and old.expiration and old.expiration > self:_now() then
      require("glsb.log").warn("refreshing AWS credentials failed; using the current ones until they expire: "
        .. errors.describe(creds), { source = old.source })
      return old
    end
    error(creds, 0)
  end)
  if not ok then error(fail("chain", "could not take the refresh lock"), 0) end
  return res
end

-- region(opts) -> region, where it came from; or nil.
function M.region(opts)
  opts = opts or {}
  local getenv = env_of(opts)
  if nonempty(opts.region) then return opts.region, "options" end
  if nonempty(getenv("AWS_REGION")) then return getenv("AWS_REGION"), "AWS_REGION" end
  if nonempty(getenv("AWS_DEFAULT_REGION")) then return getenv("AWS_DEFAULT_REGION"), "AWS_DEFAULT_REGION" end
  local p, name = profile(opts)
  if p and nonempty(p.region) then return p.region, "profile " .. name end
  return nil
end

return M
