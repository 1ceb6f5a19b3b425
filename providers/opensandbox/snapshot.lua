-- glsb.providers.opensandbox.snapshot: snapshots, the template of OpenSandbox
-- (docs/protocols/opensandbox.md §3):
--   POST /sandboxes/{id}/snapshots {name}   202 {id, status: Creating}; poll GET /snapshots/{sid}
--   GET /snapshots?name=<exact>             there is no name -> id endpoint; names are not unique
--   create a sandbox with {snapshotId} (no image) to restore one
--
-- resolve() picks deterministically among duplicates: the newest Ready one (createdAt, then id). It
-- filters by name itself too: a server older than the name= filter ignores the parameter and answers
-- every snapshot.

local errors = require "glsb.errors"
local loop = require "glsb.loop"
local paging = require "glsb.paging"
local answer = require "glsb.answer"
local http = require "glsb.http"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"

local M = {}

M.PAGE_SIZE = 200
-- What glsb's template builder puts between a spec's name and its content hash in a snapshot name
-- ('@' never occurs in a spec name): "<name>@glsb-<hash>".
M.SEPARATOR = "@glsb-"
M.POLL_INTERVAL = 0.2

-- Snapshot ids are UUIDs (docs/protocols/opensandbox.md §6): one a server answers outside it is refused
-- before it goes into a path or a create.
local ID = lifecycle.IDS.snapshot

-- list(cfg, query_pairs, class, stage) -> every snapshot the query matches (all pages).
function M.list(cfg, pairs_, class, stage)
  local out, page = {}, 1
  local pager = paging.new("OpenSandbox snapshot list", class, stage)
  while true do
    local q = { table.unpack(pairs_) }
    q[#q + 1] = { "page", tostring(page) }
    q[#q + 1] = { "pageSize", tostring(M.PAGE_SIZE) }
    local res = lifecycle.request(cfg, "GET", "/snapshots", nil, { query = lifecycle.query(q) })
    lifecycle.raise_if(class, stage, res, "OpenSandbox snapshot list failed")
    local j = res.json
    if type(j) ~= "table" or type(j.items) ~= "table" then
      errors.raise(class, stage, "OpenSandbox snapshot list: unexpected answer", lifecycle.failure(res))
    end
    local a = answer.reader("OpenSandbox snapshot list", class, stage)
    for i, s in ipairs(a:list(j.items, "items")) do
      a:object(s, "items[" .. i .. "]")
      a:id(s.id, "items[" .. i .. "].id", ID)
      out[#out + 1] = s
    end
    local p = type(j.pagination) == "table" and j.pagination or {}
    if not pager:more(p.hasNextPage, #j.items) then return out end
    page = page + 1
  end
end

local function state_of(s)
  return type(s) == "table" and type(s.status) == "table" and s.status.state or nil
end

-- newest(items) -> the newest item by createdAt (RFC 3339 strings compare in time order), then id.
local function newest(items)
  table.sort(items, function(a, b)
    local ca, cb = tostring(a.createdAt or ""), tostring(b.createdAt or "")
    if ca ~= cb then return ca > cb end
    return tostring(a.id) > tostring(b.id)
  end)
  return items[1]
end

-- get(cfg, id, class, stage) -> the snapshot, or nil when there is none (404).
function M.get(cfg, id, class, stage)
  local res = lifecycle.request(cfg, "GET", "/snapshots/" .. http.segment(id))
  if not res.error and res.status == 404 then return nil end
  lifecycle.raise_if(class, stage, res, "OpenSandbox snapshot lookup failed")
  return res.json
end

-- resolve(cfg, ref, class, stage) -> snapshot id. ref: a snapshot id, a name (the newest Ready snapshot
-- of that name), or a template builder's spec name (the newest Ready "<name>@glsb-<hash>"). Raises
-- class/stage with a clear message when nothing Ready matches.
function M.resolve(cfg, ref, class, stage)
  if type(ref) ~= "string" or ref == "" then
    errors.raise(class, stage, "OpenSandbox template must be a snapshot name or id, got " .. tostring(ref))
  end
  if ID:holds(ref) then
    local s = M.get(cfg, ref, class, stage)
    if s then
      if state_of(s) ~= "Ready" then
        errors.raise(class, stage,
          string.format("OpenSandbox snapshot %s is %s, not Ready", ref, tostring(state_of(s))))
      end
      return ref
    end
  end
  local ready, other = {}, {}
  local function collect(list, match)
    for _, s in ipairs(list) do
      if type(s) == "table" and type(s.name) == "string" and match(s.name) then
        if state_of(s) == "Ready" then ready[#ready + 1] = s else other[#other + 1] = tostring(state_of(s)) end
      end
    end
  end
  collect(M.list(cfg, { { "name", ref } }, class, stage), function(n) return n == ref end)
  if #ready == 0 and not ref:find(M.SEPARATOR, 1, true) then
    -- a template's bare name: the newest Ready snapshot the builder made for it, whatever its content
    local prefix = ref .. M.SEPARATOR
    collect(M.list(cfg, {}, class, stage), function(n) return n:sub(1, #prefix) == prefix end)
  end
  if #ready == 0 then
    if #other > 0 then
      table.sort(other)
      errors.raise(class, stage, string.format("OpenSandbox: no Ready snapshot named '%s' (%d found, in state %s)",
        ref, #other, table.concat(other, ", ")))
    end
    errors.raise(class, stage, string.format("OpenSandbox: no snapshot named or with id '%s'", ref))
  end
  return newest(ready).id
end

-- create(cfg, sandbox_id, name, class, stage) -> the snapshot (202, Creating).
function M.create(cfg, sandbox_id, name, class, stage)
  local res = lifecycle.request(cfg, "POST", lifecycle.sandbox_path(sandbox_id, "/snapshots"), { name = name })
  lifecycle.raise_if(class, stage, res, "OpenSandbox snapshot create failed")
  if type(res.json) ~= "table" or res.json.id == nil then
    errors.raise(class, stage, "OpenSandbox snapshot create: the answer has no id", lifecycle.failure(res))
  end
  answer.reader("OpenSandbox snapshot create", class, stage):id(res.json.id, "id", ID)
  return res.json
end

-- wait_ready(cfg, id, timeout, class, stage[, on_state]) -> the Ready snapshot; raises when it Failed,
-- vanished or is not Ready in time.
function M.wait_ready(cfg, id, timeout, class, stage, on_state)
  local deadline = loop.now() + timeout
  local last
  while true do
    local s = M.get(cfg, id, class, stage)
    if not s then
      errors.raise(class, stage, "OpenSandbox snapshot " .. id .. " disappeared while being created")
    end
    local st = state_of(s)
    if st ~= last and on_state then on_state(st, s) end
    last = st
    if st == "Ready" then return s end
    if st == "Failed" or st == "Deleting" then
      local why = type(s.status) == "table" and (s.status.message or s.status.reason) or ""
      errors.raise(class, stage, string.format("OpenSandbox snapshot %s %s: %s", id, st:lower(), tostring(why)),
        s.status)
    end
    if loop.now() + M.POLL_INTERVAL > deadline then
      errors.raise(class, stage, string.format("OpenSandbox snapshot %s not Ready within %gs (still %s)",
        id, timeout, tostring(st)))
    end
    loop.sleep(M.POLL_INTERVAL)
  end
end

-- delete(cfg, id) -> true, or false, error (404 counts as deleted).
function M.delete(cfg, id, class, stage)
  local res = lifecycle.request(cfg, "DELETE", "/snapshots/" .. http.segment(id))
  if not res.error and res.status == 404 then return true end
  local e = lifecycle.check(class, stage, res, "OpenSandbox snapshot delete failed")
  if e then return false, e end
  return true
end

return M
