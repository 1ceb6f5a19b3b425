-- glsb.pool: sandboxes ready before they are asked for (OpenSandbox's client-side pool,
-- docs/protocols/opensandbox.md §5, for every provider).
--
--   local pool = glsb.pool("e2b", { name = "agents", size = 8, create = {...}, store = "memory" })
--   pool:start()
--   local sb <close> = pool:acquire({ timeout = 5, policy = "direct_create" })   -- or "fail_fast"
--   pool:snapshot(); pool:resize(16); pool:release_all_idle(); pool:shutdown({ graceful = true })
--
-- How it works
--   Warm sandboxes are ordinary sandboxes, created with a lease of idle_timeout and listed in a state
--   store (glsb.pool.memory for one process, glsb.pool.redis for many) as idle entries that expire with
--   that lease. A reconciler task (glsb.loop) ticks every reconcile_interval, and at once when an acquire
--   took an entry: only the holder of the store's primary lock replenishes and shrinks (§5.2), so however
--   many processes share a pool, one of them creates at a time. Any process may acquire: it takes the
--   oldest entry with more than acquire_min_remaining_ttl left (the ones passed over are killed in the
--   background), reconnects to it (glsb.connect, unless this process still holds the handle), checks its
--   health, and hands it over. The caller owns it from then on: there is no release-back; leaving its
--   scope or sb:terminate() kills it.
--
-- Background work runs whenever the loop runs: inside any glsb call of a plain script, and all the time
-- under glsb.run. A script that stays in plain Lua longer than primary_lock_ttl may lose the primary lock:
-- snapshot() then says so (stalled, primary), and the next glsb call catches up (the overdue tick runs
-- first and takes the lock again).
--
-- Errors (glsb.errors, stage "pool", all PoolError < CodeInterpreterError): PoolEmptyError (fail_fast
-- found no idle sandbox), PoolAcquireFailedError (fail_fast: the idle sandbox was dead), PoolNotRunningError,
-- PoolStateStoreUnavailableError (any failure of the store), PoolDestroyedError.

local loop = require "glsb.loop"
local errors = require "glsb.errors"
local models = require "glsb.models"
local log = require "glsb.log"
local registry = require "glsb.registry"
local options = require "glsb.pool.options"
local check = require "glsb.options"
local trace_seam = require "glsb.trace.seam"
local answer = require "glsb.answer"

local Stage = models.Stage

local M = {}

local Pool = {}
Pool.__index = Pool
M.Pool = Pool

M.State = { HEALTHY = "healthy", DEGRADED = "degraded", DRAINING = "draining", STOPPED = "stopped" }
M.Policy = { DIRECT_CREATE = "direct_create", FAIL_FAST = "fail_fast" }

-- Providers whose sandboxes live and die with the process that created them: no other process can attach.
local PROCESS_BOUND = { ["local"] = true }

local function pool_error(class, message, cause)
  return errors.new(class, Stage.POOL, message, cause)
end

-- A store failure, whatever it was, reaches the caller as PoolStateStoreUnavailableError.
local function store_error(self, what, err)
  if errors.is(err, errors.PoolStateStoreUnavailableError) then return err end
  return pool_error(errors.PoolStateStoreUnavailableError,
    string.format("pool '%s': the %s store failed during %s: %s", self.name, self.store.kind, what,
      errors.describe(err)), err)
end

local function rethrow_cancel(err)
  if loop.is_cancelled(err) then error(err, 0) end
end

-- Calls store:method(self.name, ...) -> true, results... | false, PoolStateStoreUnavailableError.
local function store_call(self, method, ...)
  local res = table.pack(pcall(self.store[method], self.store, self.name, ...))
  if res[1] then
    self.store_ok = true
    return true, table.unpack(res, 2, res.n)
  end
  rethrow_cancel(res[2])
  local err = store_error(self, method, res[2])
  self.store_ok = false
  self.last_error = tostring(err)
  return false, err
end

---------------------------------------------------------------------------------------------------
-- construction

local function resolve_class(provider)
  local name = provider
  local mod
  if type(provider) == "string" then
    mod = registry.get(provider)
  elseif type(provider) == "table" and type(provider.Sandbox) == "table" then
    mod, name = provider, provider.name
  else
    check.arg_error("glsb.pool: provider must be a provider name (\"local\", \"e2b\", ...) or a provider module")
  end
  if type(mod.Sandbox) ~= "table" or type(mod.Sandbox.create) ~= "function" then
    check.arg_error("glsb.pool: provider '%s' has no Sandbox class", tostring(name))
  end
  return mod.Sandbox, tostring(name or mod.Sandbox.provider_name)
end

local function open_store(o, provider, cls)
  local store, owned = o.store, true
  local shared = type(store) == "string" and store ~= "memory" or type(store) == "table" and store.shared
  if shared and (PROCESS_BOUND[provider] or cls.attach_unsupported) then
    check.arg_error("glsb.pool: provider '%s' cannot share sandboxes between processes (%s); use store = "
      .. "\"memory\"", provider, cls.attach_unsupported or "its sandboxes belong to the process that created them")
  end
  if store == "memory" then
    store = require("glsb.pool.memory").new()
  elseif type(store) == "string" then
    if not (store:match("^rediss?://") or store:match("^unix://")) then
      check.arg_error("glsb.pool: option 'store' must be \"memory\" or a redis://, rediss:// or unix:// URL, got %s",
        require("glsb.pool.url").redact(store))
    end
    store = require("glsb.pool.redis").new(store, { prefix = o.key_prefix, options = o.store_options })
  else
    owned = false
    for _, m in ipairs({ "take_idle", "put_idle", "remove_idle", "try_acquire_primary_lock", "renew_primary_lock",
      "release_primary_lock", "reap_expired_idle", "idle_count", "get_max_idle", "set_max_idle",
      "set_idle_entry_ttl" }) do
      if type(store[m]) ~= "function" then
        check.arg_error("glsb.pool: option 'store': the object has no method %s", m)
      end
    end
    -- a store other processes share must say whose a name is: without it two pools of one name and other
    -- options would hand out each other's sandboxes (docs/pool.md, "One name, one kind of sandbox")
    if store.shared then
      for _, m in ipairs({ "claim_identity", "release_identity" }) do
        if type(store[m]) ~= "function" then
          check.arg_error("glsb.pool: option 'store': a shared store (shared = true) must have %s(name, "
            .. "identity[, ttl]) (docs/pool.md, \"Store objects\")", m)
        end
      end
    end
  end
  return store, owned
end

local function new_owner_id()
  return "pool-owner-" .. require("glsb.ids").hex(32)
end

-- Create options that say nothing about what a sandbox is: its lease and timeouts, callbacks, and the
-- provider's own options (credentials, endpoints: another process reaches the same sandboxes with its own).
-- metadata is part of it (docs/pool.md): a sandbox carries its labels for life, so a pool handing out
-- another pool's would hand out sandboxes that glsb.list{metadata = ...} and the provider's console file
-- under someone else.
local NOT_IDENTITY = { timeout = true, keep_alive = true, retry = true, create_timeout = true,
  ready_timeout = true, health_timeout = true, session_timeout = true }

-- A stable text of a value: keys sorted at every depth, functions and userdata left out.
local function canonical(v, out)
  local t = type(v)
  if t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    out[#out + 1] = "{"
    for _, k in ipairs(keys) do
      local x = v[k]
      if type(x) ~= "function" and type(x) ~= "userdata" then
        out[#out + 1] = string.format("%q=", tostring(k))
        canonical(x, out)
        out[#out + 1] = ","
      end
    end
    out[#out + 1] = "}"
  elseif t == "string" then
    out[#out + 1] = string.format("%q", v)
  elseif t ~= "function" and t ~= "userdata" then
    out[#out + 1] = tostring(v)
  end
  return out
end

-- identity(provider, cls, create) -> "<provider>/<16 hex>": the provider and a hash of the create options
-- that make its sandboxes what they are (template, image, env, packages, resources, language, ...). Two
-- pools of one name in one store must have the same identity: another one's sandbox would not be the
-- one asked for (another template), or not even one this provider can reach.
function M.identity(provider, cls, create)
  local own = type(cls.options) == "table" and type(cls.options.provider) == "table" and cls.options.provider or {}
  local kept = {}
  for k, v in pairs(create or {}) do
    if not NOT_IDENTITY[k] and own[k] == nil and type(v) ~= "function" then kept[k] = v end
  end
  local digest = require("glsb.codec").sha256(table.concat(canonical(kept, {})))
  return provider .. "/" .. digest:sub(1, 16)
end

-- M.new(provider, opts) -> a pool that is not started yet (glsb.pool).
function M.new(provider, opts)
  local cls, provider_name = resolve_class(provider)
  local o = options.check(opts)
  local store, owned = open_store(o, provider_name, cls)
  if store.shared and type(cls.connect) ~= "function" then
    if owned and store.close then store:close() end
    check.arg_error("glsb.pool: provider '%s' cannot reconnect to a sandbox (no Sandbox.connect), so it "
      .. "cannot use a shared store; use store = \"memory\"", provider_name)
  end
  local self = setmetatable({
    name = o.name, provider = provider_name, cls = cls, opts = o, store = store, owns_store = owned,
    identity = M.identity(provider_name, cls, o.create),
    size = o.size, owner = o.owner_id or new_owner_id(),
    lifecycle = "new",            -- new | running | draining | stopped | destroyed
    failures = 0, backoff_until = nil, last_error = nil, store_ok = true,
    primary = false, lock_until = nil, last_tick = nil, stalled_for = 0,
    creating = 0, acquiring = 0, background = {},  -- background: task -> true (kills, connects)
    handles = {},                 -- sandbox_id -> handle this process made and put idle (shared stores)
    wake = loop.condition(),      -- the reconciler sleeps on it between ticks
    arrived = loop.condition(),   -- broadcast when a warm sandbox was put idle
    settled = loop.condition(),   -- broadcast when in-flight work drops to zero
    stats = { created = 0, create_failures = 0, hits = 0, misses = 0, direct = 0, discarded = 0, dead = 0 },
  }, Pool)
  return self
end

---------------------------------------------------------------------------------------------------
-- the sandboxes themselves

-- Options for one create: the user's create opts with the lease the pool wants. A warm sandbox in a
-- shared store must outlive this process (keep_alive): another process may acquire it.
local function create_opts(self, lease, warm)
  local c = {}
  for k, v in pairs(self.opts.create) do c[k] = v end
  if lease then c.timeout = lease end
  if warm and self.store.shared then c.keep_alive = true end
  return c
end

-- Options for glsb.connect: opts.connect, else the provider options of this process's own create options
-- (api_key, URLs, region, ...: never from the store): exactly the keys the class declares for connect
-- (glsb.sandbox.schema), but its lease and keep_alive.
local function connect_opts(self)
  if self.opts.connect then return self.opts.connect end
  local c = {}
  local schema = require("glsb.sandbox").schema(self.cls, "connect")
  for k, v in pairs(self.opts.create) do
    if schema[k] ~= nil and k ~= "timeout" and k ~= "keep_alive" then c[k] = v end
  end
  return c
end

-- Puts an entry this process cannot use or end back in the store, for a process (or a later try) that can:
-- dropped, its sandbox would run on with nobody to end it.
local function put_back(self, entry, why)
  log.warn(string.format("pool '%s': idle sandbox %s put back in the store (%s)", self.name, tostring(entry.id), why),
    { pool = self.name, sandbox_id = entry.id })
  store_call(self, "put_idle", entry)
  return "put back"
end

local function other_provider(self, entry)
  local ref = entry.ref
  return type(ref) == "table" and ref.provider ~= nil and ref.provider ~= self.provider
end

-- Ends the sandbox a ref names, without a handle: the provider's kill of its id when it has one (E2B's and
-- OpenSandbox's DELETE: a connect first would resume a paused sandbox only to end it), else connect and
-- terminate (glsb.kill's default). Raises what failed.
local function kill_ref(self, ref)
  local copts = connect_opts(self)
  if type(self.cls._kill) == "function" then
    local k = {}
    local schema = require("glsb.sandbox").schema(self.cls, "kill")
    for key, v in pairs(copts) do
      if schema[key] ~= nil and key ~= "timeout" then k[key] = v end
    end
    return self.cls.kill(ref, k)
  end
  local c = {}
  for key, v in pairs(copts) do c[key] = v end
  c.keep_alive = true -- a failed terminate leaves it to the store, not to this process's exit
  local sb = self.cls.connect(ref, c)
  sb:terminate()
end

-- Kills a sandbox named by an entry -> "killed", "gone", "put back" or "dropped". With a handle, through it;
-- else through kill_ref. Only the provider's word that it has no such sandbox (errors.is_no_such_sandbox)
-- makes it "gone"; any other failure (a key this process lacks, a server that fails, a transient one, a
-- terminate that failed) leaves the sandbox possibly alive, so the entry is put back for a process (or a
-- later try) that can end it, never dropped. One of another provider is put back too. An entry whose ref
-- names no sandbox of this provider's (an id outside its grammar: the provider never made it) is dropped:
-- nothing could reach it.
local function kill_entry(self, entry)
  local sb = entry.sandbox or self.handles[entry.id]
  self.handles[entry.id] = nil
  if not sb then
    if not entry.ref or type(self.cls.connect) ~= "function" then return "dropped" end
    if other_provider(self, entry) then
      return put_back(self, entry, "it is provider " .. tostring(entry.ref.provider) .. "'s")
    end
    local grammar = self.cls.id_grammar or answer.ANY
    if type(entry.ref) ~= "table" or not grammar:holds(entry.ref.sandbox_id) then
      log.warn(string.format("pool '%s': idle entry %s names no %s sandbox (its id is not %s); dropped", self.name,
        answer.shown(entry.ref and entry.ref.sandbox_id), self.provider, grammar:describe()), { pool = self.name })
      return "dropped"
    end
    local ok, err = pcall(kill_ref, self, entry.ref)
    rethrow_cancel(err)
    if ok then return "killed" end
    if errors.is_no_such_sandbox(err) then return "gone" end
    return put_back(self, entry, "it could not be killed: " .. (errors.is_error(err) and tostring(err)
      or errors.describe(err)))
  end
  local ok, err = pcall(sb.terminate, sb)
  rethrow_cancel(err)
  if ok then return "killed" end
  -- a failed terminate keeps the handle (the sandbox may run on): back in the store, to be killed later
  return put_back(self, entry, "its kill failed: " .. tostring(err))
end

---------------------------------------------------------------------------------------------------
-- the pool's identity in a shared store (M.identity)

-- How long the name stays this identity's after the last claim: as long as a sandbox it put idle may live.
local function identity_ttl(self) return self.opts.idle_timeout + 2 * self.opts.primary_lock_ttl end

-- claim(self) -> true (the name is this pool's), false, holder (another identity holds it), or nil, err (the
-- store failed). A store of one process (memory, or a store object without shared = true) has no
-- claim_identity and needs none: every pool of the name is this process's; a shared one must have it.
local function claim(self)
  if type(self.store.claim_identity) ~= "function" then return true end
  local ok, mine, holder = store_call(self, "claim_identity", self.identity, identity_ttl(self))
  if not ok then return nil, mine end
  return mine == true, holder
end

local function conflict_message(self, holder)
  return string.format("pool '%s': the store holds this name for a pool of %s, this one is %s: another provider "
    .. "or other create options (template, image, env, packages, resources) under one name would hand out "
    .. "sandboxes other than the ones asked for; use another name, or end that pool's idle sandboxes "
    .. "(release_all_idle() or destroy() there) and let its claim lapse (%gs after its last use)", self.name,
    tostring(holder), self.identity, identity_ttl(self))
end

-- An entry of a shared store this pool may hand out: its ref carries this pool's identity.
local function foreign(self, entry)
  if not self.store.shared or entry.sandbox then return false end
  return type(entry.ref) ~= "table" or entry.ref.pool_identity ~= self.identity
end

-- Runs fn(...) as a background task of the pool: shutdown waits for it (graceful) or cancels it.
local function background(self, fn, ...)
  local task
  task = loop.spawn(function(...)
    local ok, err = pcall(fn, ...)
    self.background[task] = nil
    if next(self.background) == nil and self.creating == 0 and self.acquiring == 0 then self.settled:broadcast() end
    if not ok and not loop.is_cancelled(err) then
      log.warn("pool: background work failed: " .. tostring(err), { pool = self.name })
    end
  end, ...)
  self.background[task] = true
  return task
end

-- Kills run shielded: a cancel (a non-graceful shutdown) waits for them rather than leak the sandbox.
local function kill_in_background(self, entries)
  if not entries or #entries == 0 then return end
  self.stats.discarded = self.stats.discarded + #entries
  for _, e in ipairs(entries) do background(self, loop.shield, kill_entry, self, e) end
end

local function record_failure(self, err)
  self.failures = self.failures + 1
  self.stats.create_failures = self.stats.create_failures + 1
  self.last_error = errors.is_error(err) and tostring(err) or errors.describe(err)
  local wait = options.backoff(self.opts, self.failures)
  if wait > 0 then
    self.backoff_until = loop.now() + wait
    log.warn(string.format("pool '%s' is degraded after %d failures in a row; next warm-up in %gs: %s", self.name,
      self.failures, wait, self.last_error), { pool = self.name })
  end
end

local function record_success(self)
  self.failures = 0
  self.backoff_until = nil
end

local function degraded(self) return self.failures >= self.opts.degraded_threshold end

-- health(sb) -> true | false, why. A provider's _alive() probe when it has one (false = gone), then the
-- handle's own view (a lease that ended, a terminated handle).
local function health(sb)
  if type(sb.is_running) == "function" and not sb:is_running() then return false, "the sandbox is not running" end
  if type(sb._alive) == "function" then
    local ok, alive = pcall(sb._alive, sb)
    rethrow_cancel(alive)
    if ok and alive == false then return false, "the sandbox is gone (its health check failed)" end
  end
  return true
end

-- The prepare hook; a failure kills the sandbox and is raised.
local function prepare(self, sb)
  local fn = self.opts.prepare
  if not fn then return end
  local ok, err = pcall(fn, sb)
  if ok then return end
  rethrow_cancel(err)
  local id = sb.sandbox_id
  pcall(sb.terminate, sb)
  error(errors.wrap(errors.SandboxStartError, Stage.CREATE, err,
    string.format("pool '%s': prepare failed for sandbox %s: %s", self.name, tostring(id), errors.describe(err))), 0)
end

---------------------------------------------------------------------------------------------------
-- the reconciler (only the primary creates and shrinks)

local function renew_lock(self)
  local t0 = loop.now()
  local ok, held = store_call(self, "renew_primary_lock", self.owner, self.opts.primary_lock_ttl)
  if ok and held then
    self.lock_until = t0 + self.opts.primary_lock_ttl
    return true
  end
  self.primary = false
  return false
end

-- Creates one warm sandbox and puts it idle. Returns true when it was put.
local function warm_one(self)
  -- The create runs shielded: cancelled while its request is in flight, a remote provider may have made a
  -- sandbox whose id we never learn (a leak until its lease ends). A shutdown waits for it and kills it.
  local ok, sb = pcall(loop.shield, self.cls.create, create_opts(self, self.opts.idle_timeout, true))
  rethrow_cancel(sb)
  if not ok then
    record_failure(self, sb)
    return false
  end
  self.stats.created = self.stats.created + 1
  if self.abandon then
    loop.shield(function() pcall(sb.terminate, sb) end)
    return false
  end
  local pok, perr = pcall(prepare, self, sb)
  rethrow_cancel(perr)
  if not pok then
    record_failure(self, perr)
    return false
  end
  local function orphan(why)
    log.warn(string.format("pool '%s': killing a new warm sandbox: %s", self.name, why), { sandbox_id = sb.sandbox_id })
    loop.shield(function() pcall(sb.terminate, sb) end)
    return false
  end
  if self.opts.prepare then sb:set_timeout(self.opts.idle_timeout) end -- the lease starts after prepare (§5.2)
  if not renew_lock(self) then return orphan("the primary lock was lost") end
  local entry = { id = sb.sandbox_id, sandbox = nil, ref = nil }
  if self.store.shared then
    entry.ref = type(sb.ref) == "function" and sb:ref() or { provider = self.provider, sandbox_id = sb.sandbox_id }
    entry.ref.pool_identity = self.identity -- what another process checks before it hands the sandbox out
    self.handles[entry.id] = sb
  else
    entry.sandbox = sb
  end
  local sok, put = store_call(self, "put_idle", entry)
  if not sok then return orphan(put.message) end
  record_success(self)
  if put then self.arrived:broadcast() end
  return true
end

-- Kills up to n idle sandboxes over the target (renewing the lock before each, §5.2 step 3).
local function shrink(self, n)
  for _ = 1, n do
    if not renew_lock(self) then return end
    local ok, entry, discarded = store_call(self, "take_idle", -math.huge)
    if not ok or not entry then return end
    kill_in_background(self, discarded)
    kill_in_background(self, { entry })
  end
end

-- Forgets the handles of sandboxes no longer idle in a shared store (another process took them: they are
-- its now). Without this a long-running process would keep a handle of every sandbox it ever warmed.
local function prune_handles(self)
  if next(self.handles) == nil then return end
  local ok, entries = store_call(self, "idle_entries")
  if not ok then return end
  local idle = {}
  for _, e in ipairs(entries) do idle[e.id] = true end
  for id in pairs(self.handles) do
    if not idle[id] then self.handles[id] = nil end
  end
end

-- One tick (§5.2). Returns true when there is more to do right away.
local function tick(self)
  local now = loop.now()
  if self.last_tick and now - self.last_tick > self.opts.primary_lock_ttl then
    self.stalled_for = now - self.last_tick
    log.warn(string.format("pool '%s': the loop did not run for %.1fs (longer than primary_lock_ttl %gs); the "
      .. "primary lock may have lapsed; catching up", self.name, self.stalled_for, self.opts.primary_lock_ttl),
      { pool = self.name })
  end
  self.last_tick = now
  local mine, holder = claim(self)
  if mine == false then
    -- the name went to another identity (this pool's claim lapsed): this one neither creates nor kills there
    self.last_error = conflict_message(self, holder)
    if not self.conflict_logged then log.error(self.last_error, { pool = self.name }) end
    self.conflict_logged = true
    return false
  end
  self.conflict_logged = nil
  if self.store.shared and self.store.idle_entries then prune_handles(self) end
  local ok, got, left = store_call(self, "try_acquire_primary_lock", self.owner, self.opts.primary_lock_ttl)
  if not ok or not got then
    self.primary = false
    -- another process holds it: look again the moment it would lapse, if that is before the next tick
    if ok and type(left) == "number" then self.lock_free_at = loop.now() + left + 0.005 end
    return false
  end
  self.lock_free_at = nil
  self.primary, self.lock_until = true, now + self.opts.primary_lock_ttl
  if self.store.is_destroyed then
    local dok, destroyed = store_call(self, "is_destroyed")
    if dok and destroyed then
      self.lifecycle = "destroyed"
      return false
    end
  end
  local rok, discarded = store_call(self, "reap_expired_idle", self.opts.acquire_min_remaining_ttl)
  if rok then kill_in_background(self, discarded) end
  local mok, max = store_call(self, "get_max_idle")
  if mok and max then self.size = max end
  local cok, idle = store_call(self, "idle_count")
  if not cok then return false end
  if idle > self.size then
    shrink(self, math.min(idle - self.size, self.opts.warmup_concurrency))
    return false
  end
  local deficit = self.size - idle
  if deficit <= 0 or self.lifecycle ~= "running" then return false end
  if self.backoff_until and loop.now() < self.backoff_until then return false end
  if not renew_lock(self) then return false end
  local n = math.min(deficit, self.opts.warmup_concurrency)
  local tasks = {}
  self.creating = self.creating + n
  for i = 1, n do tasks[i] = loop.spawn(warm_one, self) end
  local made = 0
  local gok, gerr = pcall(function()
    for i = 1, n do
      if tasks[i]:wait() then made = made + 1 end
    end
  end)
  self.creating = self.creating - n
  if not gok then
    -- cancelled (a non-graceful shutdown): the creates in flight tear their sandboxes down; wait for that
    loop.shield(function()
      for i = 1, n do tasks[i]:cancel() end
      for i = 1, n do pcall(tasks[i].wait, tasks[i]) end
    end)
    error(gerr, 0)
  end
  return made > 0 and deficit - made > 0
end

-- kick(): asks for a tick now. The flag is the memory a Condition lacks: an acquire during a tick (while the
-- reconciler is not waiting) must still make the reconciler look again right after it.
local function kick(self)
  self.kicked = true
  self.wake:notify()
end

local function reconcile(self)
  while self.lifecycle == "running" do
    -- an acquire kicked us: let its caller's first request go first (a create's spawn on this thread would
    -- delay it by a millisecond or more; bench/pool_local.lua measures both)
    if self.kicked and self.opts.replenish_delay > 0 then loop.sleep(self.opts.replenish_delay) end
    self.kicked = false
    local ok, more = pcall(tick, self)
    if not ok then
      rethrow_cancel(more)
      self.last_error = tostring(more)
      log.warn("pool: reconcile tick failed: " .. tostring(more), { pool = self.name })
      more = false
    end
    if self.lifecycle ~= "running" then break end
    if not more and not self.kicked then
      local wake_at = loop.now() + self.opts.reconcile_interval
      if self.lock_free_at and self.lock_free_at < wake_at then wake_at = math.max(loop.now(), self.lock_free_at) end
      if self.backoff_until and self.backoff_until < wake_at then wake_at = math.max(loop.now(), self.backoff_until) end
      self.wake:wait(wake_at)
    end
  end
end

---------------------------------------------------------------------------------------------------
-- public methods

local function running(self, what)
  if self.lifecycle == "running" then return end
  if self.lifecycle == "destroyed" then
    error(pool_error(errors.PoolDestroyedError, string.format("pool '%s' was destroyed (%s)", self.name, what)), 0)
  end
  error(pool_error(errors.PoolNotRunningError, string.format("pool '%s' is not running (%s; state %s)%s", self.name,
    what, self.lifecycle, self.lifecycle == "new" and ": call pool:start() first" or "")), 0)
end

-- pool:start() -> pool. Writes the idle TTL and the target size to the store and starts the reconciler,
-- whose first tick runs as soon as the loop runs. Raises PoolStateStoreUnavailableError when the store
-- cannot be reached, PoolDestroyedError when the pool was destroyed.
function Pool:start()
  if self.lifecycle == "running" then return self end
  if self.lifecycle == "destroyed" then running(self, "start") end
  loop.run(function()
    local ok, err = store_call(self, "set_idle_entry_ttl", self.opts.idle_timeout)
    if not ok then error(err, 0) end
    if self.store.is_destroyed then
      local dok, destroyed = store_call(self, "is_destroyed")
      if not dok then error(destroyed, 0) end
      if destroyed then
        self.lifecycle = "destroyed"
        running(self, "start")
      end
    end
    local mine, holder = claim(self)
    if mine == nil then error(holder, 0) end
    if not mine then error(pool_error(errors.PoolError, conflict_message(self, holder)), 0) end
    ok, err = store_call(self, "set_max_idle", self.size)
    if not ok then error(err, 0) end
  end)
  self.lifecycle = "running"
  self.abandon = false
  self.reconciler = loop.spawn(reconcile, self)
  return self
end

local function direct_create(self, lease)
  self.stats.direct = self.stats.direct + 1
  local sb = self.cls.create(create_opts(self, lease, false))
  prepare(self, sb)
  return sb
end

-- Reconnects to a taken entry and checks its health. -> sb | nil, why
local function checkout(self, entry, deadline)
  local sb = entry.sandbox or self.handles[entry.id]
  if not sb then
    local copts = connect_opts(self)
    if loop.expired(deadline) then return nil, "the acquire timeout passed before the sandbox could be reached" end
    local c = {}
    for k, v in pairs(copts) do c[k] = v end
    local ok, got = pcall(self.cls.connect, entry.ref, c)
    rethrow_cancel(got)
    if not ok then return nil, got end
    sb = got
  end
  local alive, why = health(sb)
  if not alive then return nil, why, sb end
  return sb
end

local function hand_over(self, sb, lease)
  if self.store.shared then
    self.handles[sb.sandbox_id] = nil
    rawset(sb, "keep_alive", false)
    require("glsb.sandbox").track(sb)
  end
  if lease then sb:set_timeout(lease) end
  return sb
end

local function acquire_body(self, policy, deadline, lease)
  local ok, entry, discarded, destroyed = store_call(self, "take_idle", self.opts.acquire_min_remaining_ttl)
  if ok and destroyed == "destroyed" then
    self.lifecycle = "destroyed"
    running(self, "acquire")
  end
  if not ok then
    if policy == M.Policy.FAIL_FAST then error(entry, 0) end
    log.warn("pool: the store is unavailable; creating a sandbox directly: " .. entry.message, { pool = self.name })
    return hand_over(self, direct_create(self, lease), nil)
  end
  kill_in_background(self, discarded)
  kick(self) -- a deficit now: the reconciler replenishes without waiting for its interval
  if entry and foreign(self, entry) then
    -- not this pool's to hand out (an older configuration's, or another provider's): killed when this
    -- provider can, else put back; never dropped
    if other_provider(self, entry) then
      put_back(self, entry, "it is provider " .. tostring(entry.ref.provider) .. "'s")
    else
      kill_in_background(self, { entry })
    end
    entry = nil
  end
  if entry then
    local sb, why, handle = checkout(self, entry, deadline)
    if sb then
      self.stats.hits = self.stats.hits + 1
      return hand_over(self, sb, lease)
    end
    self.stats.dead = self.stats.dead + 1
    store_call(self, "remove_idle", entry.id)
    if handle then entry.sandbox = handle end
    kill_in_background(self, { entry })
    if policy == M.Policy.FAIL_FAST then
      error(pool_error(errors.PoolAcquireFailedError, string.format("pool '%s': idle sandbox %s is not usable: %s",
        self.name, entry.id, errors.describe(why)), why), 0)
    end
    log.info(string.format("pool '%s': idle sandbox %s is not usable (%s); creating one directly", self.name,
      entry.id, errors.describe(why)), { pool = self.name })
  else
    self.stats.misses = self.stats.misses + 1
    if policy == M.Policy.FAIL_FAST then
      error(pool_error(errors.PoolEmptyError, string.format("pool '%s' has no idle sandbox (fail_fast)", self.name)), 0)
    end
  end
  return hand_over(self, direct_create(self, lease), nil)
end

-- pool:acquire(opts) -> a running sandbox the caller owns. opts (options.ACQUIRE): timeout (seconds for
-- reaching and checking an idle sandbox; default acquire_timeout; <= 0: no limit), policy
-- ("direct_create", the default: create one when no idle sandbox is usable, or "fail_fast"),
-- sandbox_timeout (the lease of the acquired sandbox; default the create opts' timeout, else the warm
-- lease of idle_timeout is left as it is).
function Pool:acquire(opts)
  opts = check.check(opts, options.ACQUIRE, "pool:acquire")
  local policy = opts.policy or M.Policy.DIRECT_CREATE
  local timeout = check.timeout(opts.timeout, self.opts.acquire_timeout)
  running(self, "acquire")
  local lease = opts.sandbox_timeout or self.opts.create.timeout
  if type(lease) == "number" then lease = check.timeout(lease) end -- create checks its own timeout
  self.acquiring = self.acquiring + 1
  local deadline = loop.deadline(timeout)
  local res
  if trace_seam.on then -- tracing's choke point: a glsb.pool.acquire span (one field read when off)
    res = table.pack(pcall(trace_seam.operation, "glsb.pool.acquire", self,
      { ["glsb.pool.name"] = self.name, ["glsb.pool.policy"] = policy }, loop.run, acquire_body, self, policy,
      deadline, lease))
  else
    res = table.pack(pcall(loop.run, acquire_body, self, policy, deadline, lease))
  end
  self.acquiring = self.acquiring - 1
  if not res[1] then error(res[2], 0) end
  return res[2]
end

-- pool:snapshot() -> { state, lifecycle, idle, size, failures, backoff, backoff_active, last_error, in_flight,
-- primary, stalled, store, store_ok, owner, stats }. idle is nil when the store cannot be reached.
function Pool:snapshot()
  local idle
  if self.lifecycle ~= "new" or not self.store.shared then
    local ok, sok, n = pcall(loop.run, store_call, self, "idle_count")
    if ok and sok then idle = n end
  end
  local state
  if self.lifecycle == "draining" then state = M.State.DRAINING
  elseif self.lifecycle ~= "running" then state = M.State.STOPPED
  elseif degraded(self) then state = M.State.DEGRADED
  else state = M.State.HEALTHY end
  local now = loop.now()
  local backoff = self.backoff_until and math.max(0, self.backoff_until - now) or 0
  -- the reconciler is overdue when the loop has not run it for longer than a tick and a margin
  local stalled = self.lifecycle == "running" and self.last_tick ~= nil
    and now - self.last_tick > 2 * self.opts.reconcile_interval + 1
  local in_flight = self.creating + self.acquiring
  for _ in pairs(self.background) do in_flight = in_flight + 1 end
  local stats = {}
  for k, v in pairs(self.stats) do stats[k] = v end
  return {
    state = state, lifecycle = self.lifecycle, idle = idle, size = self.size, failures = self.failures,
    backoff = backoff, backoff_active = backoff > 0, last_error = self.last_error, in_flight = in_flight,
    primary = self.primary and self.lock_until ~= nil and now < self.lock_until,
    lock_lapsed = self.primary and self.lock_until ~= nil and now >= self.lock_until,
    stalled = stalled, store = self.store.kind, store_ok = self.store_ok, owner = self.owner, stats = stats,
  }
end

-- pool:resize(n): the new target (in a shared store, for every process of the pool).
function Pool:resize(n)
  check.check_value(n, options.SCHEMA.size, "pool:resize", "size")
  self.size = math.tointeger(n)
  local ok, err = loop.run(store_call, self, "set_max_idle", self.size)
  if not ok then error(err, 0) end
  kick(self)
  return self.size
end

-- pool:wait_idle([n], [timeout]) -> true once at least n (default: size) sandboxes are idle, false when
-- timeout seconds (default warmup_ready_timeout; <= 0: no limit) passed first. With a shared store other
-- processes' puts are not seen as events: the count is then re-read every 0.2 s.
function Pool:wait_idle(n, timeout)
  check.check_value(n, options.WAIT_IDLE.n, "pool:wait_idle", "n")
  check.check_value(timeout, options.WAIT_IDLE.timeout, "pool:wait_idle", "timeout")
  n = n or self.size
  local deadline = loop.deadline(check.timeout(timeout, self.opts.warmup_ready_timeout))
  return loop.run(function()
    while true do
      local ok, count = store_call(self, "idle_count")
      if ok and count >= n then return true end
      if loop.expired(deadline) then return false end
      local until_ = deadline
      if self.store.shared or not ok then until_ = math.min(deadline or math.huge, loop.now() + 0.2) end
      self.arrived:wait(until_)
    end
  end)
end

-- pool:release_all_idle() -> how many idle sandboxes it killed. Works in any state (also after
-- shutdown), from any process of the pool.
function Pool:release_all_idle()
  return loop.run(function()
    local entries = {}
    while true do
      local ok, entry, discarded = store_call(self, "take_idle", -math.huge)
      if not ok then error(entry, 0) end
      for _, e in ipairs(discarded or {}) do entries[#entries + 1] = e end
      if not entry then break end
      entries[#entries + 1] = entry
    end
    local tasks = {}
    for i, e in ipairs(entries) do tasks[i] = loop.spawn(kill_entry, self, e) end
    local killed, left = 0, false
    for _, t in ipairs(tasks) do
      local ok, what = pcall(t.wait, t)
      if ok and what == "killed" then killed = killed + 1 end
      if not ok or what == "put back" then left = true end
    end
    -- nothing of this pool is idle any more: the name is free for a pool of other options (not while an
    -- entry is back in the store: its sandbox may still run, under this identity)
    if not left and type(self.store.release_identity) == "function" then
      store_call(self, "release_identity", self.identity)
    end
    return killed
  end)
end

local function in_flight_count(self)
  local n = self.creating + self.acquiring
  for _ in pairs(self.background) do n = n + 1 end
  return n
end

-- pool:shutdown({graceful = true, release_idle = ?}): DRAINING, then STOPPED. graceful waits up to
-- drain_timeout for warm-ups and background kills in flight (then cancels them); graceful = false cancels
-- them at once. The primary lock is released. release_idle (default: true for a memory store the pool
-- made itself, whose idle sandboxes nobody else can use; false for a shared store) kills the idle ones.
function Pool:shutdown(opts)
  opts = check.check(opts, options.SHUTDOWN, "pool:shutdown")
  if self.lifecycle == "stopped" or self.lifecycle == "new" then
    self.lifecycle = "stopped"
    return
  end
  local graceful = opts.graceful ~= false
  local release_idle = opts.release_idle
  if release_idle == nil then release_idle = self.owns_store and not self.store.shared end
  self.lifecycle = self.lifecycle == "destroyed" and "destroyed" or "draining"
  loop.run(function()
    self.wake:broadcast()
    -- graceful: one drain budget for the reconciler and the work in flight (none: wait for them)
    local deadline = loop.now()
    if graceful then deadline = loop.deadline(self.opts.drain_timeout) end
    local r = self.reconciler
    if r and not r:done() then
      if graceful then r:wait(loop.remaining(deadline)) end
      if not r:done() then
        self.abandon = true -- creates in flight finish, then kill what they made
        r:cancel()
        pcall(r.wait, r, self.opts.drain_timeout)
      end
    end
    while graceful and in_flight_count(self) > 0 and not loop.expired(deadline) do
      self.settled:wait(deadline)
    end
    -- background work is kills (shielded: a cancel waits for them); never leave one half done
    for t in pairs(self.background) do t:cancel() end
    for t in pairs(self.background) do pcall(t.wait, t, self.opts.drain_timeout) end
    if self.primary then store_call(self, "release_primary_lock", self.owner) end
    self.primary = false
    if release_idle then pcall(self.release_all_idle, self) end
  end)
  if self.lifecycle ~= "destroyed" then self.lifecycle = "stopped" end
  if self.owns_store and self.store.close and release_idle then self.store:close() end
end

-- pool:destroy() -> killed count: stops this pool, kills every idle sandbox and marks the pool destroyed in
-- the store, so every process of the pool stops at its next tick and raises PoolDestroyedError.
function Pool:destroy()
  if self.lifecycle ~= "stopped" and self.lifecycle ~= "new" and self.lifecycle ~= "destroyed" then
    self:shutdown({ graceful = false, release_idle = false })
  end
  local killed = self:release_all_idle()
  if self.store.destroy then
    local ok, err = loop.run(store_call, self, "destroy", self.owner)
    if not ok then error(err, 0) end
  end
  self.lifecycle = "destroyed"
  return killed
end

Pool.__close = function(self)
  local ok, err = pcall(self.shutdown, self, { graceful = false })
  if not ok then log.error("pool shutdown on scope exit failed: " .. tostring(err), { pool = self.name }) end
end

Pool.__tostring = function(self)
  return string.format("glsb.Pool(%s, %s, size=%d, %s)", self.name, self.provider, self.size, self.lifecycle)
end

return M
