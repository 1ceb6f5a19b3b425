-- glsb.trace.redact: what may leave the process in a span. URLs lose their credentials and every query
-- value (signed URLs carry their signature there: E2B's signature=, AWS's X-Amz-Signature=, ...), and
-- free text (error messages) loses the same, plus any secret the caller's options hold.
--
-- OpenTelemetry's HTTP conventions ask for https://REDACTED:REDACTED@host/ in place of userinfo and
-- REDACTED in place of sensitive query values; glsb treats every query value as sensitive, because it
-- cannot know which of a provider's parameters are.
local M = {}

M.MARK = "REDACTED"

-- url(u) -> u without userinfo, query values or fragment.
function M.url(u)
  if type(u) ~= "string" then return nil end
  local scheme, rest = u:match("^(%a[%w+.-]*://)(.*)$")
  if not scheme then scheme, rest = "", u end
  local authority, tail = rest:match("^([^/?#]*)(.*)$")
  if authority:find("@", 1, true) then
    authority = M.MARK .. ":" .. M.MARK .. "@" .. authority:match("@([^@]*)$")
  end
  tail = tail:gsub("#.*$", "")
  local path, query = tail:match("^([^?]*)%?(.*)$")
  if path then
    local parts = {}
    for member in query:gmatch("[^&]+") do
      local k = member:match("^([^=]*)=") or member
      parts[#parts + 1] = k .. "=" .. M.MARK
    end
    tail = path .. (#parts > 0 and ("?" .. table.concat(parts, "&")) or "")
  end
  return scheme .. authority .. tail
end

-- Option names whose values are secrets (api_key, token, secret_access_key, password, ...).
local function is_secret_name(k)
  local low = type(k) == "string" and k:lower() or ""
  return low:find("key", 1, true) or low:find("token", 1, true) or low:find("secret", 1, true)
    or low:find("password", 1, true) or low:find("credential", 1, true) or low:find("auth", 1, true)
end

-- secrets(options) -> list of the secret strings in an options table (one level, plus nested tables
-- such as credentials = {...}), longest first; short values (< 6 bytes) are left alone.
function M.secrets(options)
  local out = {}
  local function scan(t, depth, inherited)
    if type(t) ~= "table" or depth > 2 then return end
    for k, v in pairs(t) do
      local secret = inherited or is_secret_name(k)
      if type(v) == "string" and secret and #v >= 6 then
        out[#out + 1] = v
      elseif type(v) == "table" then
        scan(v, depth + 1, secret)
      end
    end
  end
  scan(options, 0, false)
  table.sort(out, function(a, b) return #a > #b end)
  return out
end

M.is_secret_name = is_secret_name

-- environment() -> the values (6 bytes or more, longest first) of this process's environment variables
-- whose names say they are secrets (E2B_API_KEY, OPEN_SANDBOX_API_KEY, AWS_SECRET_ACCESS_KEY,
-- AWS_SESSION_TOKEN, ...): what a provider may send without its options naming it. Read from
-- /proc/self/environ (Lua has no other way to list the environment); {} where there is none.
function M.environment()
  local out = {}
  local f = io.open("/proc/self/environ", "rb")
  if not f then return out end
  local all = f:read("a") or ""
  f:close()
  for name, value in all:gmatch("([^%z=]+)=([^%z]*)") do
    if is_secret_name(name) and #value >= 6 then out[#out + 1] = value end
  end
  table.sort(out, function(a, b) return #a > #b end)
  return out
end

-- text(s, secrets) -> s with URLs redacted and each secret replaced.
function M.text(s, secrets)
  s = require("glsb.secrets").scrub(s)
  s = s:gsub("(%a[%w+.-]*://[^%s\"'<>]+)", function(u) return M.url(u) end)
  for _, secret in ipairs(secrets or {}) do
    s = s:gsub(secret:gsub("%W", "%%%0"), M.MARK)
  end
  return s
end

return M
