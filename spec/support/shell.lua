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

-- A fresh directory under /tmp named for the spec area; rm_rf removes only such directories.
function M.mktemp_dir(area)
  local out, code = M.sh("mktemp -d /tmp/glsb-" .. area .. "-spec.XXXXXX")
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
