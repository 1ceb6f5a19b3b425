-- glsb.secrets: the one place secrets are known, and the one scrubber. A secret a provider sends (an API
-- key from its options, its environment variable or a file; a token a server handed out; a password in a
-- URL) is registered once, and every text that leaves the library is scrubbed of every secret registered:
-- error messages and their causes (glsb.errors), log lines (glsb.log), exported spans (glsb.trace), an
-- execution's error (the base class). A server that quotes the request's headers back in a 401 then shows
-- REDACTED where the key was, wherever the key came from.
--
--   local secrets = require "glsb.secrets"
--   secrets.register(cfg.api_key)        -- before the request that carries it; returns the value
--   secrets.scrub(text) -> text          -- every registered secret (and URL userinfo) replaced by REDACTED
--
-- glsb.http registers on its own the values of the request headers that carry credentials
-- (secrets.HEADERS: X-API-KEY, OPEN-SANDBOX-API-KEY, X-Access-Token, Bearer and Basic tokens, ...), so a
-- provider that sends a secret only in such a header is covered without a call. Values shorter than
-- MIN_LENGTH bytes are not registered: scrubbing "abc" would mangle ordinary text.
local M = {}

M.MARK = "REDACTED"
M.MIN_LENGTH = 8
-- Registered secrets live for the process (a handful: keys, tokens, passwords). Bounded all the same: a
-- process that registers more than MAX (a bug, or per-request tokens) forgets the oldest.
M.MAX = 256

local list = {}      -- longest first
local known = {}     -- value -> true

-- Request headers whose values are credentials (lower case): registered by glsb.http as it sends them.
M.HEADERS = {
  ["x-api-key"] = true, ["open-sandbox-api-key"] = true, ["x-access-token"] = true,
  ["e2b-traffic-access-token"] = true, ["x-amz-security-token"] = true, ["api-key"] = true,
  ["x-goog-api-key"] = true, ["proxy-authorization"] = true, ["authorization"] = true, ["cookie"] = true,
}

local function add(value)
  if known[value] then return end
  if #list >= M.MAX then
    local oldest = table.remove(list, #list) -- the shortest (and so the least likely to be a key) goes
    known[oldest] = nil
  end
  known[value] = true
  list[#list + 1] = value
end

-- A secret as it stands inside a JSON string: quote, backslash and control bytes escaped, and "/" as "\/"
-- too when slash is true (lua-cjson writes it so; most encoders leave it). A line already encoded (an MCP
-- message, an OTLP export) is scrubbed in these forms as well as in the raw one.
local SHORT = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r",
  ["\t"] = "\\t" }
local function json_form(v, slash)
  return (v:gsub(slash and '[%c"\\/]' or '[%c"\\]', function(c)
    if c == "/" then return "\\/" end
    return SHORT[c] or string.format("\\u%04x", c:byte())
  end))
end

-- register(value) -> value. Strings shorter than MIN_LENGTH, and anything else, are left alone. Its JSON
-- forms (json_form) are registered with it.
function M.register(value)
  if type(value) ~= "string" or #value < M.MIN_LENGTH or known[value] then return value end
  add(value)
  add(json_form(value, false))
  add(json_form(value, true))
  table.sort(list, function(a, b) return #a > #b end)
  return value
end

-- register_header(name, value): a request header's value, when the header carries a credential. An
-- Authorization's scheme is kept out (the token after "Bearer ", the base64 after "Basic "); AWS's
-- signature changes with every request and is no credential by itself: not registered.
function M.register_header(name, value)
  if type(name) ~= "string" or type(value) ~= "string" then return end
  local low = name:lower()
  if not M.HEADERS[low] then return end
  if low == "authorization" or low == "proxy-authorization" then
    local scheme, token = value:match("^(%S+)%s+(%S+)")
    if not scheme or scheme:upper():find("^AWS4") then return end
    M.register(token)
    return
  end
  M.register(value)
end

-- Userinfo of URLs (scheme://user:password@host): replaced wherever a URL appears.
local function strip_userinfo(s)
  return (s:gsub("(%a[%w+.-]*://)([^/%s@\"'<>]+)@", function(scheme, info)
    return scheme .. M.MARK .. (info:find(":", 1, true) and (":" .. M.MARK) or "") .. "@"
  end))
end

-- without_userinfo(url) -> the URL without its user:password@ (what a ref keeps of an endpoint: a
-- reconnect takes credentials from its options, as it takes keys). Anything else is returned as it is.
function M.without_userinfo(v)
  if type(v) ~= "string" or not v:find("@", 1, true) then return v end
  return (v:gsub("^(%a[%w+.-]*://)[^/%s@]+@", "%1"))
end

-- scrub(s) -> s (tostring'd) with each registered secret and each URL's userinfo replaced by MARK.
function M.scrub(s)
  if s == nil then return nil end
  s = tostring(s)
  if s:find("@", 1, true) then s = strip_userinfo(s) end
  for _, secret in ipairs(list) do
    local i = s:find(secret, 1, true)
    if i then
      local parts, pos = {}, 1
      while i do
        parts[#parts + 1] = s:sub(pos, i - 1)
        parts[#parts + 1] = M.MARK
        pos = i + #secret
        i = s:find(secret, pos, true)
      end
      parts[#parts + 1] = s:sub(pos)
      s = table.concat(parts)
    end
  end
  return s
end

-- registered() -> a copy of the secrets registered, longest first (for specs and tools: never print it).
function M.registered()
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

return M
