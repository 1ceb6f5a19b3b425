-- spec/support/shell.lua: what the specs that drive programs through the shell share: quoting, running
-- a command for its output and status, small file helpers. Per-area helpers (spec/*/helper.lua) build
-- on it.
local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
do -- absolute, so that commands may cd first
  local p = io.popen("cd '" .. here:gsub("'", "'\\''") .. "/../..' && pwd", "r")
  M.repo = p and p:read("l") or (here .. "/../..")
  if p then p:close() end
end

-- Single-quotes a word for sh.
function M.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Quotes a list of words into one command line.
function M.join(words)
  local out = {}
  for i, w in ipairs(words) do out[i] = M.q(w) end
  return table.concat(out, " ")
end

-- Runs a shell command; returns its stdout and exit status (128 + signal when killed).
function M.sh(cmd)
  local f = assert(io.popen(cmd, "r"))
  local out = f:read("a")
  local _, how, code = f:close()
  if how == "signal" then code = 128 + code end
  return out, code
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function M.write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- True when path exists, a dangling symlink included.
function M.exists(path)
  local _, code = M.sh("test -e " .. M.q(path) .. " || test -L " .. M.q(path))
  return code == 0
end

-- This process's pid and start time (clock ticks since boot): read in-process, so they are the spec
-- process's own, not a shell's.
local function self_id()
  local f = io.open("/proc/self/stat", "r")
  if not f then return nil end
  local s = f:read("a") or ""
  f:close()
  local pid, rest = s:match("^(%d+) %b() (.*)$")
  if not pid then return nil end
  local fields = {}
  for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
  return pid, fields[20] -- starttime is field 22; rest starts at field 3
end

-- The start time of a live process with this pid, nil when none (or a zombie).
local function start_of(pid)
  local f = io.open("/proc/" .. pid .. "/stat", "r")
  if not f then return nil end
  local s = f:read("a") or ""
  f:close()
  local state, rest = s:match("^%d+ %b() (%a) (.*)$")
  if not state or state == "Z" or state == "X" then return nil end
  local fields = {}
  for w in rest:gmatch("%S+") do fields[#fields + 1] = w end
  return fields[19]
end

-- A spec process that was killed (SIGKILL, a timeout) runs no clean-up: its directories carry its pid
-- and start time in their names (/tmp/glsb-AREA-spec.pPID-START.XXXXXX), and the first directory the
-- next spec process makes removes those whose process is gone (the same pid with another start time is
-- another process). Directories of live processes, and of older names, are left alone, and so are
-- those changed in the last `min_age_minutes` (default 10): a spec process in another pid namespace
-- sharing /tmp would look dead from here.
local swept = false
function M.sweep_dead_spec_dirs(min_age_minutes)
  local removed = {}
  local age = min_age_minutes or 10
  local p = io.popen("find /tmp -maxdepth 1 -type d -name 'glsb-*-spec.p*-*.*'"
    .. (age > 0 and (" -mmin +" .. math.floor(age)) or "") .. " 2>/dev/null")
  if not p then return removed end
  for dir in p:lines() do
    local pid, start = dir:match("^/tmp/glsb%-[%w_]+%-spec%.p(%d+)%-(%d+)%.[%w]+$")
    if pid and start_of(pid) ~= start then
      os.execute("rm -rf --one-file-system " .. M.q(dir))
      removed[#removed + 1] = dir
    end
  end
  p:close()
  return removed
end

-- A fresh directory under /tmp named for the spec area (and, see above, for this process); rm_rf
-- removes only such directories.
function M.mktemp_dir(area)
  if not swept then
    swept = true
    M.sweep_dead_spec_dirs()
  end
  local pid, start = self_id()
  local tag = pid and ("p" .. pid .. "-" .. start .. ".") or ""
  local out, code = M.sh("mktemp -d /tmp/glsb-" .. area .. "-spec." .. tag .. "XXXXXX")
  assert(code == 0, "mktemp failed")
  return (out:gsub("%s+$", ""))
end

function M.rm_rf(path)
  if path and path:match("^/tmp/glsb%-[%w_]+%-spec%.") then
    os.execute("rm -rf " .. M.q(path))
  end
end

-- Makes a module's helper table start from these functions.
function M.extend(t)
  for k, v in pairs(M) do
    if k ~= "extend" and t[k] == nil then t[k] = v end
  end
  return t
end

return M
