-- glsb.pool.url: parse a Redis URL into connection parameters, and print one without its password.
--
--   redis://[user[:password]@]host[:port][/db]   TCP (default port 6379, db 0)
--   rediss://...                                 the same over TLS (verified against the system CAs, or
--                                                store_options.tls_ca)
--   unix://[user[:password]@]/path/redis.sock[?db=N]
--   redis://:password@host  (password only: AUTH <password>, as redis-cli -u does)
-- Percent-escapes in user and password are decoded. A password is never part of an error message: every
-- message built here shows redact(url).

local M = {}

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- redact(url) -> the URL with its password replaced by "***" (safe to log).
function M.redact(url)
  if type(url) ~= "string" then return tostring(url) end
  return (url:gsub("^(%a[%w+.-]*://)([^@/]*)@", function(scheme, userinfo)
    local user = userinfo:match("^([^:]*):") or userinfo
    if userinfo:find(":", 1, true) then return scheme .. user .. ":***@" end
    return scheme .. userinfo .. "@"
  end))
end

local function bad(url, why) return nil, string.format("bad Redis URL %s: %s", M.redact(url), why) end

-- parse(url) -> { scheme, tls, host, port, path, user, password, db } | nil, message (password-free)
function M.parse(url)
  if type(url) ~= "string" then return nil, "a Redis URL must be a string" end
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return bad(url, "expected redis://, rediss:// or unix://") end
  scheme = scheme:lower()
  if scheme ~= "redis" and scheme ~= "rediss" and scheme ~= "unix" then
    return bad(url, "unknown scheme " .. scheme .. " (expected redis, rediss or unix)")
  end
  local r = { scheme = scheme, tls = scheme == "rediss", db = 0 }
  local query
  rest, query = rest:match("^([^?]*)%??(.*)$")
  local userinfo, hostpart = rest:match("^(.*)@(.*)$")
  if not userinfo then hostpart = rest end
  if userinfo then
    local user, password = userinfo:match("^([^:]*):(.*)$")
    if user then
      r.user, r.password = unescape(user), unescape(password)
      require("glsb.secrets").register(r.password) -- sent with AUTH: known to the one scrubber
      if r.user == "" then r.user = nil end
    else
      r.user = unescape(userinfo)
    end
  end
  for k, v in query:gmatch("([^&=]+)=([^&]*)") do
    if k == "db" then
      if not v:match("^%d+$") then return bad(url, "db must be a number") end
      r.db = tonumber(v)
    end
  end
  if scheme == "unix" then
    if hostpart:sub(1, 1) ~= "/" then return bad(url, "unix:// needs an absolute socket path") end
    r.path = unescape(hostpart)
    return r
  end
  local host, port, db
  if hostpart:sub(1, 1) == "[" then
    host, port, db = hostpart:match("^%[([^%]]+)%]:?(%d*)/?(.*)$")
  else
    host, port, db = hostpart:match("^([^:/]*):?(%d*)/?(.*)$")
  end
  if not host or host == "" then return bad(url, "no host") end
  r.host = host
  r.port = port ~= "" and tonumber(port) or 6379
  if r.port < 1 or r.port > 65535 then return bad(url, "port out of range") end
  if db and db ~= "" then
    if not db:match("^%d+$") then return bad(url, "the path must be a database number (/0 .. /15)") end
    r.db = tonumber(db)
  end
  return r
end

return M
