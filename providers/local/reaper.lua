-- glsb.providers.local.reaper: what sandboxes of dead owners left behind, found and removed, and only that.
--
-- A local sandbox cleans up after itself: terminate, the supervisor's --cleanup, SIGHUP when the owner
-- dies. All of these need someone alive at the end: when the owner and its supervisor are killed
-- together (kill -9 of the whole process group), the workspace directory and the cgroup leaves stay.
-- So each workspace carries a record of who owns it (glsb-owner, in the host-only top directory the
-- sandbox cannot see), a few lines in a strict format:
--
--   glsb-owner 1
--   owner <pid> <start>
--   supervisor <pid> <start>
--   cgroup <leaf directory>          (zero to three lines)
--
-- start is the process's start time (field 22 of /proc/<pid>/stat; 0 when unknown), so a recycled pid
-- is not taken for the owner. A workspace is stale when neither its owner nor its supervisor is alive;
-- sweep() removes its cgroup leaves (rmdir: empty once the supervisor is gone, its sandbox died with
-- it) and the directory (fs.rmtree: no symlink followed, no mount crossed).
--
-- What may be removed is only what glsb made: the sweep looks inside glsb's own root only, never at
-- the folder the user named: <host_workspace_dir>/glsb-<uid> for workspaces (workspace_root), the
-- template cache's tmp for builds. A root is glsb's own when it is a directory (not a symlink) owned by
-- our effective uid that nobody else may write to; another is refused, never swept (and a create in it
-- fails). In it, an entry is taken only when its name is one of ours (glsb-local-*, build-*, import-*,
-- delete-*, snapshot-*), it is a directory owned by us, and its record is a regular file of ours of at most
-- RECORD_MAX bytes in exactly the format above, read without following a symlink or waiting on a FIFO
-- (fs.read_own_file). Anything else is left alone: another version of glsb, one being created, or
-- something planted.
--
-- When: the first local sandbox (or template build) of a process sweeps its root once; `glsb-lua --gc
-- [DIR...]` sweeps the default places (or the DIRs) now. Both also release the freezer leaves of dead
-- owners (sweep_freezers: a sandbox paused when its owner died).
local fs = require "glsb.fs"
local loop = require "glsb.loop"
local process = require "glsb.process"
local freeze = require "glsb.providers.local.freeze"

local M = {}

M.RECORD = "glsb-owner"
M.RECORD_MAX = 4096
M.PREFIXES = { "glsb-local-", "build-", "import-", "delete-", "snapshot-" }

-- Start time of a process (clock ticks since boot), or nil when there is no such process (a zombie
-- counts as none: a killed supervisor stays one until whoever inherited it reaps it).
function M.start_time(pid)
  local f = io.open("/proc/" .. tostring(pid) .. "/stat", "r")
  if not f then return nil end
  local s = f:read("a") or ""
  f:close()
  -- the command name may hold spaces and parentheses: the fields that follow start after the last ')'
  local rest = s:match("^.*%)%s+(.*)$")
  if not rest or rest:match("^[ZX]") then return nil end
  local i = 2 -- rest begins with field 3 (state)
  for field in rest:gmatch("%S+") do
    i = i + 1
    if i == 22 then return tonumber(field) end
  end
  return nil
end

local function alive(who)
  if type(who) ~= "table" or type(who.pid) ~= "number" or not math.tointeger(who.pid) then return false end
  local t = M.start_time(math.tointeger(who.pid))
  return t ~= nil and t == who.start
end
-- alive({pid, start}) -> whether that process (that pid, started then) still runs.
M.alive = alive

local function me()
  local pid = process.getpid()
  return { pid = pid, start = M.start_time(pid) }
end
-- me() -> {pid, start} of this process (what record writes as the owner).
M.me = me

-- record(dir, fields) writes dir/glsb-owner: the calling process as owner, plus fields (supervisor =
-- pid of the sandbox's supervisor, cgroup_dirs). Called again as more is known; never raises. Not
-- fsynced: the record only matters while this boot lasts (a reboot takes /tmp, cgroups and processes).
-- dir is a directory this process just made (mkdtemp, 0700): nobody else can have put a file there.
function M.record(dir, fields)
  fields = fields or {}
  local o = me()
  local lines = { "glsb-owner 1", string.format("owner %d %d", o.pid, o.start or 0) }
  local sup = math.tointeger(fields.supervisor)
  if sup then lines[#lines + 1] = string.format("supervisor %d %d", sup, M.start_time(sup) or 0) end
  for i, cg in ipairs(type(fields.cgroup_dirs) == "table" and fields.cgroup_dirs or {}) do
    if i <= 3 and type(cg) == "string" and cg:match("^/%S+$") then lines[#lines + 1] = "cgroup " .. cg end
  end
  local f = io.open(dir .. "/" .. M.RECORD, "wb")
  if f then
    f:write(table.concat(lines, "\n"), "\n")
    f:close()
  end
end

-- parse_record(text) -> {owner = {pid, start}, supervisor = {pid, start} | nil, cgroup_dirs = {...}}, or
-- nil for anything that is not exactly what record() writes.
function M.parse_record(text)
  if type(text) ~= "string" or #text > M.RECORD_MAX or text:sub(-1) ~= "\n" then return nil end
  local rec = { cgroup_dirs = {} }
  local n = 0
  for line in text:gmatch("([^\n]*)\n") do
    n = n + 1
    if n == 1 then
      if line ~= "glsb-owner 1" then return nil end
    else
      local key, pid, start = line:match("^(%l+) (%d+) (%d+)$")
      local cg = line:match("^cgroup (/%S+)$")
      if (key == "owner" or key == "supervisor") and not rec[key] and #pid <= 10 and #start <= 20 then
        rec[key] = { pid = math.tointeger(tonumber(pid)), start = math.tointeger(tonumber(start)) }
        if not rec[key].pid or not rec[key].start then return nil end
      elseif cg and #rec.cgroup_dirs < 3 then
        rec.cgroup_dirs[#rec.cgroup_dirs + 1] = cg
      else
        return nil
      end
    end
  end
  if not rec.owner then return nil end
  return rec
end

-- own(path) -> true, or nil and why: path is a directory (not a symlink) owned by our effective uid
-- that nobody else may write to.
local function own(path)
  local st, err = fs.lstat(path)
  if not st then return nil, err end
  if st.type ~= "dir" then return nil, path .. " is a " .. st.type .. ", not a directory" end
  if st.uid ~= process.geteuid() then
    return nil, string.format("%s belongs to uid %d, not to us (uid %d)", path, st.uid, process.geteuid())
  end
  if st.mode & 18 ~= 0 then return nil, string.format("%s may be written by others (mode %04o)", path, st.mode) end
  return true
end

-- own_root(dir[, make]) -> dir, or nil and a message: dir is glsb's own root (see above); made (0700)
-- when missing if make.
function M.own_root(dir, make)
  if make then
    local ok, err, code = fs.mkdir(dir, 448) -- 0700
    if not ok and code ~= "EEXIST" then return nil, "cannot create " .. dir .. ": " .. tostring(err) end
  end
  local ok, why = own(dir)
  if not ok then return nil, why end
  return dir
end

-- root_name() -> "glsb-<uid>": the folder of ours that a host workspace folder holds.
function M.root_name()
  return "glsb-" .. process.geteuid()
end

-- workspace_root(host_dir) -> host_dir/glsb-<uid> (made if missing), where this uid's workspaces are
-- made and swept; or nil and a message saying why that folder is not glsb's own.
function M.workspace_root(host_dir)
  local root, why = M.own_root(host_dir .. "/" .. M.root_name(), true)
  if not root then
    return nil, "the workspace folder " .. host_dir .. "/" .. M.root_name() .. " is not glsb's own (" .. why
      .. "): remove it, or pass another host_workspace_dir"
  end
  return root
end

local function read_record(dir)
  return M.parse_record(fs.read_own_file(dir .. "/" .. M.RECORD, M.RECORD_MAX))
end

-- Only a leaf glsb-confine names for that supervisor (.../glsb/sb-<supervisor pid>-<time>) is
-- removed: a record in /tmp can be planted by anyone, and must not make us rmdir other cgroups.
local function own_leaf(cg, supervisor)
  if type(cg) ~= "string" or type(supervisor) ~= "table" or not cg:match("^/sys/fs/cgroup/") then return false end
  if cg:find("/%.%.?/") or cg:find("/%.%.?$") then return false end
  local pid = cg:match("/glsb/sb%-(%d+)%-%d+$")
  return pid ~= nil and tonumber(pid) == supervisor.pid
end

-- own_record(dir) -> the record of dir when dir is a directory of ours holding one in the strict format,
-- else nil (what sweep takes, and glsb.list / glsb.kill of the local provider: listing.lua).
function M.own_record(dir)
  return own(dir) and read_record(dir) or nil
end

local function has_prefix(name)
  for _, p in ipairs(M.PREFIXES) do
    if name:sub(1, #p) == p then return true end
  end
  return false
end

-- sweep(root) -> array of the directories removed (and their cgroup leaves), array of failures; or
-- nil and a message when root is not glsb's own. Only entries named like ours, directories of ours,
-- with a record in the strict format whose owner and supervisor are both gone.
function M.sweep(root)
  local ok, why = own(root)
  if not ok then return nil, why end
  local removed, failed = {}, {}
  local names = fs.listdir(root)
  for _, name in ipairs(names or {}) do
    local dir = root .. "/" .. name
    local rec = has_prefix(name) and own(dir) and read_record(dir)
    if rec and not alive(rec.owner) and not alive(rec.supervisor) then
      for _, cg in ipairs(rec.cgroup_dirs) do
        if own_leaf(cg, rec.supervisor) then
          freeze.thaw(cg) -- cgroup v2: a pause froze the leaf itself
          os.remove(cg) -- rmdir: fails on a leaf that still has processes; gone if collected already
        end
      end
      local rok, err = fs.rmtree(dir)
      if rok then removed[#removed + 1] = dir else failed[#failed + 1] = tostring(err) end
    end
  end
  return removed, failed
end

-- sweep_freezers() -> array of the freezer leaves removed, array of failures. A paused sandbox whose owner
-- died stays frozen: its supervisor got SIGHUP and killed it, but a frozen task dies only once thawed
-- (cgroup v1), so the supervisor waits on it with its workspace, and nothing else would ever thaw it. Each
-- leaf freeze.lua named after a dead owner is thawed (the supervisor then ends the sandbox and removes its
-- workspace, as it would have), what is still in it after that is killed (owner and supervisor died
-- together), and the leaf goes. A leaf of a living owner is never touched.
function M.sweep_freezers()
  local removed, failed = {}, {}
  for _, leaf in ipairs(freeze.leaves()) do
    if not alive(leaf.owner) then
      local ok, err = freeze.release(leaf.path, loop, function(pid)
        local start = pid and M.start_time(pid)
        if start then process.signal(pid, start, "KILL") end
      end)
      if ok then removed[#removed + 1] = leaf.path else failed[#failed + 1] = err end
    end
  end
  return removed, failed
end

local swept, freezers_swept = {}, false

-- sweep_once(root): the first call per root in this process sweeps it (and the first call of all, the
-- freezer leaves of dead owners, first: a frozen sandbox holds its workspace); never raises (a sandbox
-- start must not fail because of what another process left).
function M.sweep_once(root)
  if not freezers_swept then
    freezers_swept = true
    pcall(M.sweep_freezers)
  end
  if swept[root] then return end
  swept[root] = true
  pcall(M.sweep, root)
end

-- The root --gc sweeps for DIR: DIR itself when it is named glsb-<uid>, else DIR/glsb-<uid> (DIR is a
-- host_workspace_dir); nil when there is none.
local function gc_root(dir)
  if dir:match("([^/]+)/*$") == M.root_name() then return dir end
  local root = dir:gsub("/+$", "") .. "/" .. M.root_name()
  local _, _, code = fs.lstat(root)
  if code == "ENOENT" then return nil end
  return root
end

-- gc(dirs) -> {removed = {dir...}, freezers = {leaf...}, failed = {message...}, refused = {message...},
-- empty = {dir...}}: sweeps the workspaces in each DIR (a host_workspace_dir, or the glsb-<uid> folder in
-- it), or in the default one ($TMPDIR or /tmp) and the template cache's scratch when dirs is empty, after
-- the freezer leaves of dead owners (sweep_freezers: freezers). refused: a folder that is not glsb's own
-- (nothing in it was touched); empty: a DIR with no glsb-<uid> in it.
function M.gc(dirs)
  local out = { removed = {}, failed = {}, refused = {}, empty = {} }
  local roots = {}
  for i = 1, #(dirs or {}) do
    local root = gc_root(dirs[i])
    if root then roots[#roots + 1] = root else out.empty[#out.empty + 1] = dirs[i] end
  end
  if #(dirs or {}) == 0 then
    local tmp = os.getenv("TMPDIR")
    roots[1] = gc_root((tmp and tmp ~= "") and tmp or "/tmp")
    local cache_tmp = require("glsb.providers.local.layout").cache_dir() .. "/local/tmp"
    if fs.lstat(cache_tmp) then roots[#roots + 1] = cache_tmp end
  end
  -- first: a paused sandbox of a dead owner holds its workspace until its freezer leaf is released
  out.freezers, out.failed = M.sweep_freezers()
  for _, root in pairs(roots) do
    local removed, failed = M.sweep(root)
    if not removed then
      out.refused[#out.refused + 1] = tostring(failed)
    else
      for _, r in ipairs(removed) do out.removed[#out.removed + 1] = r end
      for _, f in ipairs(failed) do out.failed[#out.failed + 1] = f end
    end
  end
  return out
end

-- `glsb-lua --gc [DIR...]`: gc(args), printed: what it removed, and why a folder was refused (on stderr,
-- and the exit status is 1). Returns the number removed. name: how the messages name the command
-- (default "glsb-lua --gc").
function M.main(args, name)
  name = name or "glsb-lua --gc"
  local r = M.gc(args)
  for _, d in ipairs(r.empty) do
    print(name .. ": nothing of glsb's in " .. d .. " (no " .. M.root_name() .. " in it)")
  end
  for _, why in ipairs(r.refused) do
    io.stderr:write(name, ": refused: ", why, " (not glsb's own: nothing in it was touched)\n")
  end
  for _, l in ipairs(r.freezers) do print("removed the freezer cgroup " .. l .. " (its owner is gone)") end
  for _, d in ipairs(r.removed) do print("removed " .. d) end
  for _, f in ipairs(r.failed) do io.stderr:write(name, ": ", f, "\n") end
  local n = #r.removed
  print(string.format("%s: %d stale sandbox director%s removed", name, n, n == 1 and "y" or "ies"))
  if #r.refused > 0 then
    error(string.format("%s: %d folder%s refused", name, #r.refused, #r.refused == 1 and "" or "s"), 0)
  end
  return n
end

return M
