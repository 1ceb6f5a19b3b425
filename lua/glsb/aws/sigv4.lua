-- glsb.aws.sigv4: AWS Signature Version 4 for HTTP requests (header form, AWS4-HMAC-SHA256).
--
-- Builds the canonical request exactly as docs/protocols/bedrock.md §4.1 says and as AWS's own
-- signer (@smithy/signature-v4) does for every service but S3, so the same request signed here and
-- there gets the same Authorization header (spec/bedrock/sigv4_differential_spec.lua proves it):
--   * path: dot segments resolved, empty segments dropped, then the already-encoded path encoded
--     once more ("%3A" -> "%253A"), "/" kept;
--   * query: each key and value percent-decoded, then RFC 3986-encoded (A-Z a-z 0-9 - _ . ~ kept,
--     upper-case hex), pairs sorted by key then value, always "k=v"; X-Amz-Signature left out;
--   * headers: lower-case names, sorted; CR/LF become spaces, runs of spaces and tabs one space,
--     one leading and trailing space dropped; repeated names joined with ","; the hop-by-hop and
--     client-identity headers AWS never signs (authorization, user-agent, expect, connection, ...)
--     are left out of the signature;
--   * payload: hex sha256 of the body (or the x-amz-content-sha256 value when the caller set one).
-- The caller sends exactly the headers sign() returns: every one of them is covered by the
-- signature (host, x-amz-date, x-amz-content-sha256, x-amz-security-token included).
local core = require "glsb.core"

local M = {}

M.ALGORITHM = "AWS4-HMAC-SHA256"
M.EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

-- Headers AWS signers never sign (smithy's ALWAYS_UNSIGNABLE_HEADERS, plus proxy-* and sec-*).
local UNSIGNABLE = {
  authorization = true, ["cache-control"] = true, connection = true, expect = true, from = true,
  ["keep-alive"] = true, ["max-forwards"] = true, pragma = true, referer = true, te = true, trailer = true,
  ["transfer-encoding"] = true, upgrade = true, ["user-agent"] = true, ["x-amzn-trace-id"] = true,
}

local function unsignable(name)
  return UNSIGNABLE[name] or name:sub(1, 6) == "proxy-" or name:sub(1, 4) == "sec-"
end
M.unsignable = unsignable

-- RFC 3986 percent-encoding of every byte but the unreserved ones (and "/" when keep_slash).
function M.uri_encode(s, keep_slash)
  local pattern = keep_slash and "[^%w%-%._~/]" or "[^%w%-%._~]"
  return (s:gsub(pattern, function(c) return string.format("%%%02X", c:byte()) end))
end

-- Percent-decoding (no "+" to space: SigV4 reads queries as RFC 3986, not as forms). A "%" not
-- followed by two hex digits stays as it is.
function M.uri_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- The canonical URI of a path as it goes on the wire.
function M.canonical_path(path)
  if path == nil or path == "" then path = "/" end
  local segments = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      segments[#segments] = nil
    elseif seg ~= "." then
      segments[#segments + 1] = seg
    end
  end
  local out = (path:sub(1, 1) == "/" and "/" or "") .. table.concat(segments, "/")
  if #segments > 0 and path:sub(-1) == "/" then out = out .. "/" end
  return M.uri_encode(out, true)
end

-- Query pairs {{key, value}, ...} (decoded) from a raw query string.
function M.parse_query(raw)
  local pairs_ = {}
  if raw == nil or raw == "" then return pairs_ end
  for part in raw:gmatch("[^&]+") do
    local eq = part:find("=", 1, true)
    local k, v
    if eq then k, v = part:sub(1, eq - 1), part:sub(eq + 1) else k, v = part, "" end
    pairs_[#pairs_ + 1] = { M.uri_decode(k), M.uri_decode(v) }
  end
  return pairs_
end

-- The canonical query string of decoded pairs (or of a raw query string).
function M.canonical_query(query)
  if type(query) == "string" then query = M.parse_query(query) end
  local encoded = {}
  for _, kv in ipairs(query or {}) do
    if kv[1]:lower() ~= "x-amz-signature" then
      encoded[#encoded + 1] = { M.uri_encode(kv[1]), M.uri_encode(kv[2] or "") }
    end
  end
  table.sort(encoded, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  local out = {}
  for i, kv in ipairs(encoded) do out[i] = kv[1] .. "=" .. kv[2] end
  return table.concat(out, "&")
end

-- The query string to put on the wire for decoded pairs: the canonical form itself, so what is
-- sent and what is signed cannot differ.
M.encode_query = M.canonical_query

local function canonical_value(v)
  v = tostring(v):gsub("[\r\n]", " "):gsub("[ \t]+", " ")
  if v:sub(1, 1) == " " then v = v:sub(2) end
  if v:sub(-1) == " " then v = v:sub(1, -2) end
  return v
end

-- headers: a map {Name = value} or an array of {name, value} pairs (repeats allowed) ->
-- names (sorted, lower case, signable only), map name -> canonical value.
local function collect(headers)
  local values, names = {}, {}
  local function add(name, value)
    local lname = name:lower()
    if unsignable(lname) then return end
    local cv = canonical_value(value)
    if values[lname] == nil then
      names[#names + 1] = lname
      values[lname] = cv
    else
      values[lname] = values[lname] .. "," .. cv
    end
  end
  if headers[1] ~= nil or next(headers) == nil then
    for _, h in ipairs(headers) do add(h[1], h[2]) end
  else
    local keys = {}
    for k in pairs(headers) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do add(k, headers[k]) end
  end
  table.sort(names)
  return names, values
end

function M.canonical_request(method, path, query, headers, payload_hash)
  local names, values = collect(headers)
  local lines = {}
  for i, n in ipairs(names) do lines[i] = n .. ":" .. values[n] end
  return table.concat({
    method:upper(), M.canonical_path(path), M.canonical_query(query),
    table.concat(lines, "\n") .. "\n", table.concat(names, ";"), payload_hash,
  }, "\n"), table.concat(names, ";")
end

function M.amz_date(t)
  return os.date("!%Y%m%dT%H%M%SZ", math.floor(t or os.time()))
end

-- The signing key: HMAC chain over "AWS4" .. secret, date, region, service, "aws4_request".
-- Four HMACs per request cost microseconds; no cache keeps derived keys around.
function M.signing_key(secret, date, region, service)
  local k = core.hmac_sha256("AWS4" .. secret, date, true)
  k = core.hmac_sha256(k, region, true)
  k = core.hmac_sha256(k, service, true)
  return core.hmac_sha256(k, "aws4_request", true)
end

-- headers here are arrays of {name, value} pairs
local function header_value(headers, lname)
  for _, h in ipairs(headers) do if h[1]:lower() == lname then return h[2] end end
  return nil
end

local function add_header(headers, name, value)
  headers[#headers + 1] = { name, value }
end

-- sign(req, creds, opts) -> signed {headers = {{name, value}...}, authorization, canonical_request,
-- string_to_sign, signed_headers, signature}.
--   req:   method, path (as on the wire, already encoded), query (raw string or decoded pairs),
--          headers (map or array of pairs; must include host), body (string or nil)
--   creds: access_key_id, secret_access_key, session_token (optional)
--   opts:  region, service, time (epoch seconds; default now), content_sha256 (true: send
--          x-amz-content-sha256, as AWS's SDKs do), token_signed (default true: the session token
--          goes in the signed headers)
function M.sign(req, creds, opts)
  if type(req) ~= "table" then error("sigv4.sign: req must be a table", 2) end
  if type(creds) ~= "table" or type(creds.access_key_id) ~= "string" or type(creds.secret_access_key) ~= "string" then
    error("sigv4.sign: creds need access_key_id and secret_access_key", 2)
  end
  if type(opts) ~= "table" or type(opts.region) ~= "string" or type(opts.service) ~= "string" then
    error("sigv4.sign: opts need region and service", 2)
  end
  local headers = {}
  local src = req.headers or {}
  if src[1] ~= nil then
    for i, h in ipairs(src) do headers[i] = { h[1], h[2] } end
  else
    for k, v in pairs(src) do headers[#headers + 1] = { k, v } end
    table.sort(headers, function(a, b) return a[1] < b[1] end)
  end
  if not header_value(headers, "host") then error("sigv4.sign: req.headers must include host", 2) end
  local long = opts.amz_date or M.amz_date(opts.time)
  local short = long:sub(1, 8)
  -- drop what the signer writes itself
  local kept = {}
  for _, h in ipairs(headers) do
    local l = h[1]:lower()
    if l ~= "authorization" and l ~= "x-amz-date" and l ~= "date" then kept[#kept + 1] = h end
  end
  headers = kept
  add_header(headers, "X-Amz-Date", long)
  if creds.session_token and creds.session_token ~= "" and opts.token_signed ~= false then
    if not header_value(headers, "x-amz-security-token") then
      add_header(headers, "X-Amz-Security-Token", creds.session_token)
    end
  end
  local payload_hash = header_value(headers, "x-amz-content-sha256")
  if not payload_hash then
    payload_hash = (req.body == nil or req.body == "") and M.EMPTY_SHA256 or core.sha256(req.body)
    if opts.content_sha256 then add_header(headers, "X-Amz-Content-Sha256", payload_hash) end
  end
  local creq, signed = M.canonical_request(req.method or "GET", req.path or "/", req.query, headers, payload_hash)
  local scope = short .. "/" .. opts.region .. "/" .. opts.service .. "/aws4_request"
  local sts = table.concat({ M.ALGORITHM, long, scope, core.sha256(creq) }, "\n")
  local signature = core.hmac_sha256(M.signing_key(creds.secret_access_key, short, opts.region, opts.service), sts)
  local authorization = string.format("%s Credential=%s/%s, SignedHeaders=%s, Signature=%s",
    M.ALGORITHM, creds.access_key_id, scope, signed, signature)
  if creds.session_token and creds.session_token ~= "" and opts.token_signed == false then
    add_header(headers, "X-Amz-Security-Token", creds.session_token)
  end
  add_header(headers, "Authorization", authorization)
  return {
    headers = headers, authorization = authorization, canonical_request = creq, string_to_sign = sts,
    signed_headers = signed, signature = signature,
  }
end

return M
