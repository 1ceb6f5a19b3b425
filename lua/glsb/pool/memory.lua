-- glsb.pool.memory: the in-process pool state store (OpenSandbox's InMemoryPoolStateStore,
-- docs/protocols/opensandbox.md §5.3): per pool a FIFO of idle entries plus a map id -> entry, whose
-- expiry is on the loop's monotonic clock. One process only: the primary lock is always granted (there is
-- nobody to share it with), max_idle is not stored (the pool's own size is the truth), and put_idle is
-- idempotent. Entries keep the sandbox object itself, so an acquire needs no reconnect.
--
-- Every method returns at once (nothing here waits); the Redis store has the same methods and may wait.
--   entry = { id = sandbox_id, sandbox = handle, ref = sb:ref() or nil, expires_at = set by put_idle }

local loop = require "glsb.loop"

local M = {}

local Store = {}
Store.__index = Store
M.Store = Store

Store.kind = "memory"
Store.shared = false   -- entries cannot be taken by another process

function M.new() return setmetatable({ pools = {} }, Store) end

local function pool_of(self, name)
  local p = self.pools[name]
  if not p then
    p = { fifo = {}, head = 1, tail = 0, by_id = {}, count = 0, ttl = 86400 }
    self.pools[name] = p
  end
  return p
end

local function drop(p, entry)
  if p.by_id[entry.id] == entry then
    p.by_id[entry.id] = nil
    p.count = p.count - 1
  end
end

-- Pops the FIFO head that is still live (entries removed by id stay in the FIFO until popped).
local function pop(p)
  while p.head <= p.tail do
    local e = p.fifo[p.head]
    p.fifo[p.head] = nil
    p.head = p.head + 1
    if p.by_id[e.id] == e then
      drop(p, e)
      return e
    end
  end
  p.head, p.tail = 1, 0
  return nil
end

-- take_idle(name, min_ttl) -> entry | nil, discarded. The oldest entry whose remaining time exceeds
-- min_ttl seconds; entries passed over on the way (expired, or too close to expiry to hand out) are
-- removed and returned in `discarded` for the caller to kill.
function Store:take_idle(name, min_ttl)
  local p = pool_of(self, name)
  local cutoff = loop.now() + (min_ttl or 0)
  local discarded = {}
  while true do
    local e = pop(p)
    if not e then return nil, discarded end
    if e.expires_at > cutoff then return e, discarded end
    discarded[#discarded + 1] = e
  end
end

-- put_idle(name, entry) -> true, or false when the id is already idle and not expired (idempotent).
function Store:put_idle(name, entry)
  local p = pool_of(self, name)
  local now = loop.now()
  local old = p.by_id[entry.id]
  if old and old.expires_at > now then return false end
  if old then drop(p, old) end
  entry.expires_at = now + p.ttl
  p.by_id[entry.id] = entry
  p.count = p.count + 1
  p.tail = p.tail + 1
  p.fifo[p.tail] = entry
  return true
end

-- remove_idle(name, id) -> true when it was idle.
function Store:remove_idle(name, id)
  local p = pool_of(self, name)
  local e = p.by_id[id]
  if not e then return false end
  drop(p, e)
  return true
end

-- reap_expired_idle(name, min_ttl) -> discarded: every entry whose remaining time is <= min_ttl.
function Store:reap_expired_idle(name, min_ttl)
  local p = pool_of(self, name)
  local cutoff = loop.now() + (min_ttl or 0)
  local discarded, keep = {}, {}
  for i = p.head, p.tail do
    local e = p.fifo[i]
    if p.by_id[e.id] == e then
      if e.expires_at <= cutoff then
        drop(p, e)
        discarded[#discarded + 1] = e
      else
        keep[#keep + 1] = e
      end
    end
  end
  p.fifo, p.head, p.tail = keep, 1, #keep
  return discarded
end

function Store:idle_count(name) return pool_of(self, name).count end

-- idle_entries(name) -> { {id, expires_in, sandbox}, ... } in FIFO order (diagnostics and tests).
function Store:idle_entries(name)
  local p = pool_of(self, name)
  local now, out = loop.now(), {}
  for i = p.head, p.tail do
    local e = p.fifo[i]
    if p.by_id[e.id] == e then out[#out + 1] = { id = e.id, expires_in = e.expires_at - now, sandbox = e.sandbox } end
  end
  return out
end

-- One process: the lock is always ours.
function Store.try_acquire_primary_lock() return true end
function Store.renew_primary_lock() return true end
function Store.release_primary_lock() return true end

function Store.get_max_idle() return nil end
function Store.set_max_idle() end
function Store:set_idle_entry_ttl(name, ttl) pool_of(self, name).ttl = ttl end

-- destroy(name): forget the pool (its entries are the caller's to kill: take them first).
function Store:destroy(name)
  local p = pool_of(self, name)
  p.destroyed = true
end
function Store:is_destroyed(name) return pool_of(self, name).destroyed == true end

function Store.close() end

return M
