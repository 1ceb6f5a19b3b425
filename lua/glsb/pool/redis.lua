-- glsb.pool.redis: the pool state store in Redis, shared by every process (and host) of a pool. The keys
-- and atomic scripts are OpenSandbox's (docs/protocols/opensandbox.md §5.3), so the layout matches the
-- one its Redis store documents:
--
--   <prefix>:{<base64url(pool name), no padding>}:<suffix>   (the {...} hash tag keeps a pool in one slot)
--     idle:list      LIST    FIFO of idle sandbox ids
--     idle:expires   HASH    id -> expiry, epoch ms (Redis server TIME)
--     idle:refs      HASH    id -> JSON of sb:ref(): what glsb.connect needs, never an API key (glsb's own
--                            addition: OpenSandbox reconnects by id alone; an OpenSandbox client ignores it)
--     lock           STRING  the primary's owner id, with PX
--     maxIdle        STRING  the target size (pool:resize writes it for every process)
--     idleTtlMillis  STRING  the idle entry TTL
--     destroy:state, destroy:owner   STRING   set by pool:destroy()
--     identity       STRING  "<provider>/<hash of the create options>" of the pool using the name, with PX:
--                            a pool of another provider or other options is refused while it lives (glsb's)
--
-- Every script reads the clock with TIME (one clock for all hosts). The primary lock is SET NX PX with
-- owner checks on renew and release. Any failure (no connection, a timeout, an error reply) raises a
-- failure table {message, code}, which the pool reports as PoolStateStoreUnavailableError; the next call
-- reconnects (at most every 0.1 s .. 2 s while Redis stays away), so the pool recovers when Redis is back.

local cjson = require "cjson.safe"
local core = require "glsb.core"
local loop = require "glsb.loop"
local url = require "glsb.pool.url"
local options = require "glsb.options"
local redis_conn = require "glsb.pool.redis_conn"

local failure = redis_conn.failure

local M = {}

local Store = {}
Store.__index = Store
M.Store = Store

Store.kind = "redis"
Store.shared = true

-- The clock, in every script: Redis TIME as epoch milliseconds.
local NOW = [[
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
]]

-- KEYS: list, expires, refs, destroy:state. ARGV: min remaining ttl (ms). Pops from the head until an entry
-- with more than the minimum left; entries passed over that are still alive are returned to be killed
-- (flat id, ref pairs); expired ones died with their lease. -> { id | "", ref | "", {id, ref, ...} } or
-- { "!destroyed" }.
local TAKE = NOW .. [[
if redis.call('EXISTS', KEYS[4]) == 1 then return { '!destroyed' } end
local cutoff = now + tonumber(ARGV[1])
local discarded = {}
for _ = 1, 10000 do
  local id = redis.call('LPOP', KEYS[1])
  if not id then break end
  local exp = redis.call('HGET', KEYS[2], id)
  local ref = redis.call('HGET', KEYS[3], id) or ''
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  if exp then
    exp = tonumber(exp)
    if exp > cutoff then return { id, ref, discarded } end
    if exp > now then
      discarded[#discarded + 1] = id
      discarded[#discarded + 1] = ref
    end
  end
end
return { '', '', discarded }
]]

-- KEYS: list, expires, refs, idleTtlMillis. ARGV: id, ref, default ttl (ms). Idempotent: an id that is
-- idle and not expired is left alone (0). -> 1 | 0
local PUT = NOW .. [[
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and tonumber(old) > now then return 0 end
if not old then redis.call('RPUSH', KEYS[1], ARGV[1]) end
local ttl = tonumber(redis.call('GET', KEYS[4]) or ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], now + ttl)
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
]]

-- KEYS: list, expires, refs. ARGV: id. -> 1 when it was idle
local REMOVE = [[
local n = redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('LREM', KEYS[1], 0, ARGV[1])
return n
]]

-- KEYS: lock. ARGV: owner, ttl (ms). -> 1 when the caller holds the lock now, else minus the milliseconds
-- the holder's lock has left (so a waiting process can look again right when it lapses)
local LOCK = [[
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return -math.max(0, redis.call('PTTL', KEYS[1]))
]]

local RENEW = [[
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
]]

local RELEASE = [[
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
]]

-- KEYS: list, expires, refs. ARGV: min remaining ttl (ms). Removes every entry at or below the cutoff and
-- returns the ones still alive (flat id, ref pairs) to be killed.
local REAP = NOW .. [[
local cutoff = now + tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[2])
local alive = {}
for i = 1, #all, 2 do
  local id, exp = all[i], tonumber(all[i + 1])
  if exp <= cutoff then
    local ref = redis.call('HGET', KEYS[3], id) or ''
    redis.call('HDEL', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    redis.call('LREM', KEYS[1], 0, id)
    if exp > now then
      alive[#alive + 1] = id
      alive[#alive + 1] = ref
    end
  end
end
return alive
]]

-- KEYS: list, expires. -> { now, id, exp, id, exp, ... } in FIFO order
local ENTRIES = NOW .. [[
local out = { now }
for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local exp = redis.call('HGET', KEYS[2], id)
  if exp then
    out[#out + 1] = id
    out[#out + 1] = exp
  end
end
return out
]]

-- KEYS: identity. ARGV: identity, ttl (ms). The name is this identity's (now, for ttl more) unless another
-- holds it. -> 1, or the identity that holds it
local CLAIM = [[
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
]]

-- KEYS: identity, expires. ARGV: identity. Lets the name go when nothing of this identity is idle.
local UNCLAIM = [[
if redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('HLEN', KEYS[2]) == 0 then
  return redis.call('DEL', KEYS[1])
end
return 0
]]

local SCRIPTS = { take = TAKE, put = PUT, remove = REMOVE, lock = LOCK, renew = RENEW, release = RELEASE,
  reap = REAP, entries = ENTRIES, claim = CLAIM, unclaim = UNCLAIM }
M.SCRIPTS = SCRIPTS
local SCRIPT_NAMES = { "take", "put", "remove", "lock", "renew", "release", "reap", "entries", "claim", "unclaim" }

-- key(prefix, name, suffix) -> the Redis key (exported for tests and tools).
function M.key(prefix, name, suffix)
  return string.format("%s:{%s}:%s", prefix, core.b64encode(name, "url"), suffix)
end

-- glsb.pool's store_options for a Redis store (glsb.options' form). The two timeouts follow the time
-- rule: <= 0 means no limit.
M.OPTIONS = {
  connect_timeout = { "seconds", "connecting (TCP, TLS, the scripts loaded); `<= 0`: none", default = "5" },
  command_timeout = { "seconds", "one command or pipeline, a reconnect included; `<= 0`: none", default = "5" },
  tls_ca = { "string", "a CA bundle for `rediss://`" },
  tls_verify = { "boolean", "check the server's certificate and host name", default = "true" },
  tls_servername = { "string", "the name the certificate must carry", default = "the URL's host" },
}

-- new(url, {prefix, options}) -> Store. Nothing is connected until the first call.
-- options (glsb.pool's store_options, M.OPTIONS): connect_timeout (5 s), command_timeout (5 s), tls_ca,
-- tls_verify (default true), tls_servername (default the URL's host).
function M.new(u, o)
  o = o or {}
  local params, err = url.parse(u)
  if not params then options.arg_error("glsb.pool: %s", err) end
  local opts = {}
  for k, v in pairs(options.check(o.options, M.OPTIONS, "glsb.pool: store_options")) do opts[k] = v end
  opts.connect_timeout = options.timeout(opts.connect_timeout, 5)
  opts.command_timeout = options.timeout(opts.command_timeout, 5)
  return setmetatable({
    params = params, opts = opts, prefix = o.prefix or "glsb:pool", where = url.redact(u),
    conn = nil, shas = nil, lock = loop.lock(), retry_at = 0, backoff = 0.1, last_failure = nil,
  }, Store)
end

local function connect(self, deadline)
  local now = loop.now()
  if now < self.retry_at then
    error(failure(string.format("redis %s is unavailable (%s); next attempt in %.1fs", self.where,
      tostring(self.last_failure), self.retry_at - now), self.last_code or "ECONNREFUSED"), 0)
  end
  local hello = {}
  for i, name in ipairs(SCRIPT_NAMES) do hello[i] = { "SCRIPT", "LOAD", SCRIPTS[name] } end
  local ok, conn, replies = pcall(redis_conn.open, self.params, {
    -- the earlier of connect_timeout and the command's own deadline (either may be none)
    deadline = math.min(loop.deadline(self.opts.connect_timeout) or math.huge, deadline or math.huge),
    tls_ca = self.opts.tls_ca, tls_verify = self.opts.tls_verify, tls_servername = self.opts.tls_servername,
    hello = hello,
  })
  if ok then
    local shas = {}
    for i, name in ipairs(SCRIPT_NAMES) do
      local r = replies[i]
      if type(r) ~= "string" then
        conn:close()
        ok, conn = false, failure("redis: SCRIPT LOAD failed on " .. self.where .. ": " .. tostring(r and r.err),
          "REDIS_ERROR")
        break
      end
      shas[name] = r
    end
    if ok then
      self.conn, self.shas, self.backoff, self.last_failure = conn, shas, 0.1, nil
      return conn
    end
  end
  if loop.is_cancelled(conn) then error(conn, 0) end
  self.last_failure = type(conn) == "table" and conn.message or tostring(conn)
  self.last_code = type(conn) == "table" and conn.code or nil
  self.retry_at = loop.now() + self.backoff
  self.backoff = math.min(2, self.backoff * 2)
  error(conn, 0)
end

-- The live connection, opening one when there is none (one task connects; the others wait for it).
local function conn_of(self, deadline)
  local c = self.conn
  if c and not c.broken then return c end
  local got, conn = self.lock:with(deadline, function()
    if self.conn and not self.conn.broken then return self.conn end
    return connect(self, deadline)
  end)
  if not got then error(failure("redis: timed out waiting for the connection to " .. self.where, "ETIMEDOUT"), 0) end
  return conn
end

local function deadline_of(self) return loop.deadline(self.opts.command_timeout) end

local function check_reply(self, r)
  if type(r) == "table" and r.err then
    error(failure("redis " .. self.where .. ": " .. r.err, r.err:match("^(%u+)") or "REDIS_ERROR"), 0)
  end
  return r
end

-- Runs one script (EVALSHA; EVAL when the server forgot it, e.g. after SCRIPT FLUSH).
function Store:_script(name, keys, args)
  local deadline = deadline_of(self)
  local c = conn_of(self, deadline)
  local argv = { "EVALSHA", self.shas[name], #keys }
  for _, k in ipairs(keys) do argv[#argv + 1] = k end
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local r = c:call(argv, deadline)
  if type(r) == "table" and r.err and r.err:match("^NOSCRIPT") then
    argv[1], argv[2] = "EVAL", SCRIPTS[name]
    r = c:call(argv, deadline)
  end
  return check_reply(self, r)
end

function Store:_call(argv)
  local deadline = deadline_of(self)
  return check_reply(self, conn_of(self, deadline):call(argv, deadline))
end

local function keys(self, name, ...)
  local out = {}
  for i, suffix in ipairs({ ... }) do out[i] = M.key(self.prefix, name, suffix) end
  return out
end

local function ms(seconds) return math.floor(seconds * 1000 + 0.5) end

local function decode_ref(s)
  if type(s) ~= "string" or s == "" then return nil end
  local ref = cjson.decode(s)
  return type(ref) == "table" and ref or nil
end

local function entries_of(flat)
  local out = {}
  for i = 1, #flat, 2 do out[#out + 1] = { id = flat[i], ref = decode_ref(flat[i + 1]) } end
  return out
end

-- take_idle(name, min_ttl) -> entry | nil, discarded, "destroyed" | nil
function Store:take_idle(name, min_ttl)
  local cutoff = min_ttl == -math.huge and -ms(86400 * 365 * 100) or ms(min_ttl or 0)
  local r = self:_script("take", keys(self, name, "idle:list", "idle:expires", "idle:refs", "destroy:state"),
    { cutoff })
  if r[1] == "!destroyed" then return nil, {}, "destroyed" end
  local discarded = entries_of(r[3] or {})
  if r[1] == "" then return nil, discarded end
  return { id = r[1], ref = decode_ref(r[2]) }, discarded
end

function Store:put_idle(name, entry)
  local ref = entry.ref and cjson.encode(entry.ref) or ""
  local r = self:_script("put", keys(self, name, "idle:list", "idle:expires", "idle:refs", "idleTtlMillis"),
    { entry.id, ref, ms(self.ttl or 86400) })
  return r == 1
end

function Store:remove_idle(name, id)
  return self:_script("remove", keys(self, name, "idle:list", "idle:expires", "idle:refs"), { id }) == 1
end

-- try_acquire_primary_lock(name, owner, ttl) -> true, or false, seconds the holder's lock has left.
function Store:try_acquire_primary_lock(name, owner, ttl)
  local r = self:_script("lock", keys(self, name, "lock"), { owner, ms(ttl) })
  if r == 1 then return true end
  return false, -(tonumber(r) or 0) / 1000
end

function Store:renew_primary_lock(name, owner, ttl)
  return self:_script("renew", keys(self, name, "lock"), { owner, ms(ttl) }) == 1
end

function Store:release_primary_lock(name, owner)
  return self:_script("release", keys(self, name, "lock"), { owner }) == 1
end

function Store:reap_expired_idle(name, min_ttl)
  return entries_of(self:_script("reap", keys(self, name, "idle:list", "idle:expires", "idle:refs"),
    { ms(min_ttl or 0) }))
end

function Store:idle_count(name)
  return self:_call({ "HLEN", M.key(self.prefix, name, "idle:expires") })
end

-- idle_entries(name) -> { {id, expires_in}, ... } in FIFO order (seconds left on the server's clock).
function Store:idle_entries(name)
  local r = self:_script("entries", keys(self, name, "idle:list", "idle:expires"))
  local now, out = tonumber(r[1]), {}
  for i = 2, #r, 2 do out[#out + 1] = { id = r[i], expires_in = (tonumber(r[i + 1]) - now) / 1000 } end
  return out
end

function Store:get_max_idle(name)
  local r = self:_call({ "GET", M.key(self.prefix, name, "maxIdle") })
  return r and math.tointeger(tonumber(r)) or nil
end

function Store:set_max_idle(name, n)
  self:_call({ "SET", M.key(self.prefix, name, "maxIdle"), math.tointeger(n) })
end

function Store:set_idle_entry_ttl(name, ttl)
  self.ttl = ttl
  self:_call({ "SET", M.key(self.prefix, name, "idleTtlMillis"), ms(ttl) })
end

function Store:destroy(name, owner)
  local deadline = deadline_of(self)
  local replies = conn_of(self, deadline):pipeline({
    { "SET", M.key(self.prefix, name, "destroy:state"), "destroyed" },
    { "SET", M.key(self.prefix, name, "destroy:owner"), owner or "" },
  }, deadline)
  for _, r in ipairs(replies) do check_reply(self, r) end
end

-- claim_identity(name, identity, ttl) -> true, or false and the identity that holds the name.
function Store:claim_identity(name, identity, ttl)
  local r = self:_script("claim", keys(self, name, "identity"), { identity, ms(ttl) })
  if r == 1 then return true end
  return false, tostring(r)
end

-- release_identity(name, identity): the name is free again once nothing of identity is idle.
function Store:release_identity(name, identity)
  self:_script("unclaim", keys(self, name, "identity", "idle:expires"), { identity })
end

function Store:is_destroyed(name)
  return self:_call({ "EXISTS", M.key(self.prefix, name, "destroy:state") }) == 1
end

function Store:close()
  if self.conn then self.conn:close() end
  self.conn = nil
end

return M
