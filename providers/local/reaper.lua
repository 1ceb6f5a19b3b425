-- glsb.providers.local.reaper: what sandboxes of dead owners left behind, found and removed.
--
-- A local sandbox cleans up after itself: terminate, the supervisor's --cleanup, SIGHUP when the owner
-- dies. All of these need someone alive at the end: when the owner and its supervisor are killed
-- together (kill -9 of the whole process group), the workspace directory and the cgroup leaves stay.
-- So each workspace carries a record of who owns it (owner.json, in the host-only top directory the
-- sandbox cannot see):
--
--   {"owner": {"pid": P, "start": T}, "supervisor": {"pid": P, "start": T}, "cgroup_dirs": [...]}
--
-- start is the process's start time (field 22 of /proc/<pid>/stat), so a recycled pid is not taken
-- for the owner. A workspace is stale when neither its owner nor its supervisor is alive; sweep()
-- removes its cgroup leaves (rmdir: empty once the supervisor is gone, its sandbox died with it) and
-- the directory (core.rmtree: no symlink followed, no mount crossed). Workspaces without a record are
-- left alone (another version of glsb, or one being created).
--
-- When: the first local sandbox (or template build) of a process sweeps its workspace root (or build
-- scratch) once; `glsb-lua --gc [DIR...]` sweeps the default places (or the DIRs) now.
local core = require "glsb.core"
local cjson = require "cjson.safe"

local M = {}

M.RECORD = "owner.json"
M.PREFIXES = { "glsb-local-", "build-", "import-" }

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

local function me()
  local pid = core.getpid()
  return { pid = pid, start = M.start_time(pid) }
end

-- record(dir, fields) writes dir/owner.json: the calling process as owner, plus fields (supervisor =
-- pid of the sandbox's supervisor, cgroup_dirs). Called again as more is known; never raises. Not
-- fsynced: the record only matters while this boot lasts (a reboot takes /tmp, cgroups and processes).
function M.record(dir, fields)
  local doc = { owner = me() }
  for k, v in pairs(fields or {}) do doc[k] = v end
  if type(doc.supervisor) == "number" then
    doc.supervisor = { pid = doc.supervisor, start = M.start_time(doc.supervisor) }
  end
  local f = io.open(dir .. "/" .. M.RECORD, "wb")
  if f then
    f:write(cjson.encode(doc) or "{}")
    f:close()
  end
end

local function read_record(dir)
  local f = io.open(dir .. "/" .. M.RECORD, "rb")
  if not f then return nil end
  local doc = cjson.decode(f:read("a") or "")
  f:close()
  return type(doc) == "table" and doc or nil
end

-- Only a leaf glsb-confine names for that supervisor (.../glsb/sb-<supervisor pid>-<time>) is
-- removed: a record in /tmp can be planted by anyone, and must not make us rmdir other cgroups.
local function own_leaf(cg, supervisor)
  if type(cg) ~= "string" or type(supervisor) ~= "table" or not cg:match("^/sys/fs/cgroup/") then return false end
  if cg:find("/%.%.?/") or cg:find("/%.%.?$") then return false end
  local pid = cg:match("/glsb/sb%-(%d+)%-%d+$")
  return pid ~= nil and tonumber(pid) == supervisor.pid
end

local function has_prefix(name)
  for _, p in ipairs(M.PREFIXES) do
    if name:sub(1, #p) == p then return true end
  end
  return false
end

-- sweep(root) -> array of the directories removed (and their cgroup leaves), array of failures.
-- Only entries named like ours (glsb-local-*, build-*, import-*) with a record whose owner and
-- supervisor are both gone.
function M.sweep(root)
  local removed, failed = {}, {}
  local names = core.listdir(root)
  for _, name in ipairs(names or {}) do
    if has_prefix(name) then
      local dir = root .. "/" .. name
      local rec = read_record(dir)
      if rec and not alive(rec.owner) and not alive(rec.supervisor) then
        for _, cg in ipairs(type(rec.cgroup_dirs) == "table" and rec.cgroup_dirs or {}) do
          if own_leaf(cg, rec.supervisor) then
            os.remove(cg) -- rmdir: fails on a leaf that still has processes; gone if collected already
          end
        end
        local ok, err = core.rmtree(dir)
        if ok then removed[#removed + 1] = dir else failed[#failed + 1] = tostring(err) end
      end
    end
  end
  return removed, failed
end

local swept = {}

-- sweep_once(root): the first call per root in this process sweeps it; never raises (a sandbox start
-- must not fail because of what another process left).
function M.sweep_once(root)
  if swept[root] then return end
  swept[root] = true
  pcall(M.sweep, root)
end

-- `glsb-lua --gc [DIR...]`: sweeps the DIRs, or the default workspace root ($TMPDIR or /tmp) and the
-- template cache's scratch; prints what it removed. Returns the number removed.
function M.main(args)
  local dirs = {}
  for i = 1, #(args or {}) do dirs[#dirs + 1] = args[i] end
  if #dirs == 0 then
    local tmp = os.getenv("TMPDIR")
    dirs[1] = (tmp and tmp ~= "") and tmp or "/tmp"
    dirs[2] = require("glsb.providers.local.layout").cache_dir() .. "/local/tmp"
  end
  local n = 0
  for _, dir in ipairs(dirs) do
    local removed, failed = M.sweep(dir)
    for _, r in ipairs(removed) do
      print("removed " .. r)
      n = n + 1
    end
    for _, f in ipairs(failed) do io.stderr:write("glsb-lua --gc: ", f, "\n") end
  end
  print(string.format("glsb-lua --gc: %d stale sandbox director%s removed", n, n == 1 and "y" or "ies"))
  return n
end

return M
