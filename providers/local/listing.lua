-- glsb.providers.local.listing: the local sandboxes of this machine that another process of the same
-- user can see and end (glsb.list, glsb.kill; `glsb ls`, `glsb kill`). A local sandbox belongs to the
-- process that made it (its supervisor dies with that owner), so no other process can run code in it;
-- what another one can do is see it and end it.
--
-- Each workspace holds, beside the owner record (reaper.lua), a small JSON file the owner writes as the
-- sandbox starts and its lease moves (host-only, as the record: the sandbox cannot see it):
--   glsb-info   {"started_at": ISO, "ends_at": ISO | null, "template_id": s | null, "metadata": {k: v},
--                "language": s, "state": "running" | "paused"}
-- It is read as the record is (fs.read_own_file: a regular file of ours, no symlink followed, at most
-- INFO_MAX bytes) and trusted for nothing but what list shows: a sandbox is listed when its record says
-- its owner or its supervisor lives. kill signals the supervisor (SIGHUP: it kills the sandbox and
-- removes the workspace) through process.signal, which checks the supervisor's start time against the
-- record's, so a recycled pid is never signalled.
local fs = require "glsb.fs"
local process = require "glsb.process"
local loop = require "glsb.loop"
local time = require "glsb.time"
local reaper = require "glsb.providers.local.reaper"
local freeze = require "glsb.providers.local.freeze"

local M = {}

M.INFO = "glsb-info"
M.INFO_MAX = 16 * 1024
M.PREFIX = "glsb-local-"

local function encode(t) return require("cjson.safe").encode(t) end

-- write(base, sb, state[, lease]): the owner's account of its sandbox, rewritten whole: state "running"
-- or "paused", lease the seconds left of it from now (nil: sb's own lease clock). Never raises: a listing
-- is no reason for a sandbox to fail.
function M.write(base, sb, state, lease)
  if type(base) ~= "string" then return end
  if lease == nil and sb._lease_ends then lease = sb._lease_ends - loop.now() end
  local text = encode {
    started_at = time.iso(sb._started_wall or time.wall()),
    ends_at = lease and lease > 0 and time.iso(time.wall() + lease + 0.5) or nil,
    template_id = sb.template_id, metadata = next(sb.metadata or {}) and sb.metadata or nil,
    language = sb.language, state = state,
  }
  -- 0600; no fsync: the listing of a live sandbox outlives no crash (it is on every create's path, and an
  -- fsync took 1.4 ms at the median, 10 to 30 ms under others' writes)
  if text and #text <= M.INFO_MAX then pcall(fs.write_file_atomic, base .. "/" .. M.INFO, text, 384, false) end
end

local function read_info(dir)
  local text = fs.read_own_file(dir .. "/" .. M.INFO, M.INFO_MAX)
  local t = type(text) == "string" and require("cjson.safe").decode(text)
  return type(t) == "table" and t or {}
end

local function str(v) return type(v) == "string" and v or nil end

local function labels(m)
  local out = {}
  if type(m) ~= "table" then return out end
  for k, v in pairs(m) do
    if type(k) == "string" and type(v) == "string" then out[k] = v end
  end
  return out
end

-- entries(root) -> {dir, id, record} of every live sandbox of ours in root (owner or supervisor alive).
local function entries(root)
  local out = {}
  for _, name in ipairs(fs.listdir(root) or {}) do
    if name:sub(1, #M.PREFIX) == M.PREFIX then
      local dir = root .. "/" .. name
      local rec = reaper.own_record(dir)
      if rec and (reaper.alive(rec.owner) or reaper.alive(rec.supervisor)) then
        out[#out + 1] = { dir = dir, id = "local-" .. name:sub(#M.PREFIX + 1), record = rec }
      end
    end
  end
  table.sort(out, function(a, b) return a.id < b.id end)
  return out
end

local function matches(info_md, want)
  for k, v in pairs(want or {}) do
    if info_md[k] ~= tostring(v) then return false end
  end
  return true
end

local function state_ok(state, want)
  if want == nil then return true end
  if type(want) == "string" then return state == want end
  for _, w in ipairs(want) do
    if w == state then return true end
  end
  return false
end

-- list(root, opts) -> refs (the fields glsb.sandbox.list normalises), filtered by metadata, state, limit.
function M.list(root, opts)
  local out = {}
  for _, e in ipairs(entries(root)) do
    local info = read_info(e.dir)
    local md = labels(info.metadata)
    local state = info.state == "paused" and "paused" or "running"
    if matches(md, opts.metadata) and state_ok(state, opts.state) then
      out[#out + 1] = {
        sandbox_id = e.id, language = str(info.language), state = state, metadata = md,
        template_id = str(info.template_id), started_at = str(info.started_at), ends_at = str(info.ends_at),
        extra = { owner_pid = e.record.owner.pid, supervisor_pid = e.record.supervisor and e.record.supervisor.pid,
          workspace = e.dir },
      }
      if opts.limit and #out >= opts.limit then break end
    end
  end
  return out
end

-- kill(root, id, timeout) -> true, or nil and why when there is no such sandbox: the sandbox of ours
-- with that id is ended (its supervisor kills it and removes the workspace; after timeout, SIGKILL and
-- the workspace removed here). Raises when the supervisor would not end.
function M.kill(root, id, timeout)
  local e
  for _, x in ipairs(entries(root)) do
    if x.id == id then e = x end
  end
  if not e then
    return nil, string.format("local: no sandbox '%s' of uid %d in %s (it has ended, or another user's)",
      tostring(id), process.geteuid(), root)
  end
  local sup = e.record.supervisor
  if not (sup and reaper.alive(sup)) then
    -- the supervisor is gone and the owner still lives: nothing runs; what is left is the workspace
    fs.rmtree(e.dir)
    return true
  end
  -- a paused sandbox is thawed first: frozen, it could not die, and its supervisor would wait on it
  for _, leaf in ipairs(freeze.leaves()) do
    if leaf.sandbox_id == id then freeze.thaw(leaf.path) end
  end
  for _, cg in ipairs(e.record.cgroup_dirs or {}) do freeze.thaw(cg) end
  process.signal(sup.pid, sup.start, "HUP")
  local deadline = loop.deadline(timeout)
  while reaper.alive(sup) and not loop.expired(deadline) do loop.sleep(0.02) end
  if reaper.alive(sup) then
    process.signal(sup.pid, sup.start, "KILL")
    local last = loop.deadline(2)
    while reaper.alive(sup) and not loop.expired(last) do loop.sleep(0.02) end
  end
  if reaper.alive(sup) then error(string.format("local: the supervisor of %s (pid %d) did not end", id, sup.pid), 0) end
  -- the supervisor's --cleanup removed it; after a SIGKILL, nobody did
  if fs.lstat(e.dir) then fs.rmtree(e.dir) end
  return true
end

return M
