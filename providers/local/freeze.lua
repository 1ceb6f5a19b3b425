-- glsb.providers.local.freeze: a local sandbox held still (sb:pause) with the cgroup freezer, so every
-- process of it stops where it is, keeps its memory (the interpreter's variables) and uses no CPU, and
-- none of them sees a signal (SIGSTOP would show as a stopped job to a shell waiting on its child).
--   cgroup v2: the sandbox's own leaf (glsb-confine made it: src/confine/REPORT.md cgroup_dirs) has
--     cgroup.freeze; "1" freezes it, "0" thaws, cgroup.events says when it is done.
--   cgroup v1: the freezer is a hierarchy of its own, which glsb-confine does not join; the sandbox's
--     processes, as its memory (or pids) leaf lists them in cgroup.procs, are moved into a freezer leaf
--     of their own (until a pass finds none left to move: a child forked meanwhile is in its parent's
--     cgroup already), and freezer.state FROZEN / THAWED freezes and thaws it. The leaf is named after
--     the sandbox and its owner, glsb-<sandbox id>-<owner pid>-<owner start time>, so that whoever finds
--     it after the owner died (the next sandbox's sweep, `glsb-lua --gc`: reaper.lua) knows it is a dead
--     owner's: a frozen sandbox cannot die (its supervisor waits on it for ever), so it is thawed there,
--     its processes end, and the leaf goes (M.leaves, M.release).
local fs = require "glsb.fs"

local M = {}

M.V1_ROOT = "/sys/fs/cgroup/freezer"

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f, err = io.open(path, "wb")
  if not f then return nil, err end
  local ok, werr = f:write(text)
  local cok, cerr = f:close()
  if not ok then return nil, werr end
  if not cok then return nil, cerr end
  return true
end

local function wait_for(check, loop)
  for _ = 1, 400 do
    if check() then return true end
    loop.sleep(0.005)
  end
  return check()
end

local function procs(dir)
  local out = {}
  for pid in (read(dir .. "/cgroup.procs") or ""):gmatch("%d+") do out[#out + 1] = pid end
  return out
end

-- A v1 leaf's name: glsb-local-<suffix>-<owner pid>-<owner start> (the sandbox id is local-<suffix>).
local LEAF = "^glsb%-(local%-%w+)%-(%d+)%-(%d+)$"

-- leaves() -> {path, sandbox_id, owner = {pid, start}} for each v1 freezer leaf named like ours.
function M.leaves()
  local out = {}
  for _, name in ipairs(fs.listdir(M.V1_ROOT) or {}) do
    local id, pid, start = name:match(LEAF)
    if id and #pid <= 10 and #start <= 20 then
      out[#out + 1] = { path = M.V1_ROOT .. "/" .. name, sandbox_id = id,
        owner = { pid = math.tointeger(tonumber(pid)), start = math.tointeger(tonumber(start)) } }
    end
  end
  return out
end

-- thaw(path): the freezer leaf (v1 freezer.state) or the cgroup (v2 cgroup.freeze) at path thawed, when
-- it is one; nothing else is written.
function M.thaw(path)
  if read(path .. "/freezer.state") then
    write(path .. "/freezer.state", "THAWED")
  elseif read(path .. "/cgroup.freeze") then
    write(path .. "/cgroup.freeze", "0")
  end
end

-- release(leaf, loop, kill) -> true when the leaf is gone, or nil and why: the leaf thawed, its
-- processes given a moment to end (the supervisor's kill, pending while they were frozen, takes effect),
-- then kill(pid) for each left (a dead owner's sandbox, whose supervisor died too), then rmdir.
function M.release(path, loop, kill)
  M.thaw(path)
  local function empty() return #procs(path) == 0 end
  for round = 1, 2 do
    for _ = 1, 100 do
      if empty() then break end
      loop.sleep(0.02)
    end
    if empty() or round == 2 then break end
    for _, pid in ipairs(procs(path)) do kill(math.tointeger(tonumber(pid))) end
  end
  if os.remove(path) or not read(path .. "/cgroup.procs") then return true end
  return nil, path .. " still has processes: " .. table.concat(procs(path), " ")
end

-- freeze(confinement, name, loop, owner) -> a frozen group {path, thaw(), remove()}, or nil, why (a
-- sentence); path is what M.thaw(path) thaws without waiting (a finalizer's way: the guard in init.lua).
-- confinement: glsb-confine's report (`applied`: cgroup, cgroup_dirs, cgroup_reason); name: the sandbox id;
-- owner: {pid, start} of the process it belongs to (named in the v1 leaf).
function M.freeze(confinement, name, loop, owner)
  local c = confinement or {}
  local dirs = type(c.cgroup_dirs) == "table" and c.cgroup_dirs or {}
  if c.cgroup == "v2" and dirs[1] then
    local leaf = dirs[1]
    local ok, err = write(leaf .. "/cgroup.freeze", "1")
    if not ok then return nil, "cannot freeze its cgroup " .. leaf .. ": " .. tostring(err) end
    wait_for(function() return (read(leaf .. "/cgroup.events") or ""):match("\nfrozen 1") ~= nil
      or (read(leaf .. "/cgroup.events") or ""):match("^frozen 1") ~= nil end, loop)
    return {
      path = leaf,
      thaw = function()
        write(leaf .. "/cgroup.freeze", "0")
        wait_for(function() return not (read(leaf .. "/cgroup.events") or ""):find("frozen 1", 1, true) end, loop)
      end,
      remove = function() write(leaf .. "/cgroup.freeze", "0") end,
    }
  end
  if c.cgroup ~= "v1" then
    return nil, "a local sandbox is paused with its cgroup's freezer, and this one has no cgroup ("
      .. tostring(c.cgroup_reason or "glsb-confine made none") .. ")"
  end
  local member
  for _, d in ipairs(dirs) do
    if read(d .. "/cgroup.procs") then member = d break end
  end
  if not member then return nil, "its cgroup leaves list no processes" end
  if not read(M.V1_ROOT .. "/cgroup.procs") then
    return nil, "cgroup v1 has no freezer hierarchy at " .. M.V1_ROOT
  end
  local leaf = string.format("%s/glsb-%s-%d-%d", M.V1_ROOT, name, owner.pid, owner.start or 0)
  local ok, merr = fs.mkdir(leaf, tonumber("755", 8))
  if not ok and not read(leaf .. "/freezer.state") then
    return nil, "cannot make the freezer cgroup " .. leaf .. ": " .. tostring(merr)
  end
  for _ = 1, 50 do
    local moved = 0
    for _, pid in ipairs(procs(member)) do
      local there = false
      for _, q in ipairs(procs(leaf)) do if q == pid then there = true break end end
      if not there then
        if write(leaf .. "/cgroup.procs", pid) then moved = moved + 1 end
      end
    end
    if moved == 0 then break end
  end
  local wok, werr = write(leaf .. "/freezer.state", "FROZEN")
  if not wok then return nil, "cannot freeze " .. leaf .. ": " .. tostring(werr) end
  wait_for(function() return (read(leaf .. "/freezer.state") or ""):match("^FROZEN") ~= nil end, loop)
  local group = { path = leaf }
  function group.thaw()
    write(leaf .. "/freezer.state", "THAWED")
    wait_for(function() return (read(leaf .. "/freezer.state") or ""):match("^THAWED") ~= nil end, loop)
  end
  -- thawed (a frozen task cannot die), then the empty leaf goes; its processes die with the sandbox
  function group.remove()
    write(leaf .. "/freezer.state", "THAWED")
    for _ = 1, 100 do
      if os.remove(leaf) or not read(leaf .. "/freezer.state") then return true end
      loop.sleep(0.02)
    end
    return false
  end
  return group
end

return M
