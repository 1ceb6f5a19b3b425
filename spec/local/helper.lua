-- Shared helpers for the local provider specs (#local, #security): shell,
-- private temporary directories, and checks that nothing was left behind.
local M = require("support.shell").extend({})

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.root = here .. "/../.."

-- Private directories are removed when the spec process ends (busted closes the Lua state: this
-- table's finalizer runs), also when the spec that made one failed before its own clean-up, or was
-- filtered out by tags after the file made it at load time.
local made = setmetatable({}, { __gc = function(t)
  for _, dir in ipairs(t) do M.rm_rf(dir) end
end })

function M.private_tmp()
  local dir = M.mktemp_dir("local")
  made[#made + 1] = dir
  return dir
end

function M.list_dir(dir)
  local out = {}
  local f = io.popen("ls -1A " .. M.q(dir) .. " 2>/dev/null")
  for line in f:lines() do out[#out + 1] = line end
  f:close()
  return out
end

-- The end of a describe that gave its sandboxes a private host_workspace_dir: remove it, and fail if
-- a terminated sandbox left anything in it (a workspace, an owner file) or in glsb's own folder in it
-- (glsb-<uid>, where the workspaces are made: that folder itself stays for the next create).
function M.remove_root(root)
  local own = "glsb-" .. require("glsb.core").geteuid()
  local left = {}
  for _, name in ipairs(M.list_dir(root)) do
    if name == own then
      for _, inner in ipairs(M.list_dir(root .. "/" .. own)) do left[#left + 1] = own .. "/" .. inner end
    else
      left[#left + 1] = name
    end
  end
  M.rm_rf(root)
  require("luassert").are.same({}, left, "left behind in " .. root)
end

-- The folder of root where this uid's workspaces are made (providers/local/reaper.lua workspace_root).
function M.workspace_root(root)
  return root .. "/glsb-" .. require("glsb.core").geteuid()
end

-- Is a process with this pid alive (and not a zombie)?
function M.pid_alive(pid)
  local f = io.open("/proc/" .. tostring(pid) .. "/stat", "r")
  if not f then return false end
  local s = f:read("a") or ""
  f:close()
  local state = s:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z" and state ~= "X"
end

function M.mount_count()
  local n = 0
  for _ in io.lines("/proc/self/mountinfo") do n = n + 1 end
  return n
end

-- A tiny wheel made by hand (a zip with METADATA, WHEEL and RECORD), so
-- package installs need neither PyPI nor a build backend.
function M.make_wheel(dir, name, version, module_source)
  local script = [[
import sys, zipfile, os
d, name, ver, src = sys.argv[1:5]
di = "%s-%s.dist-info" % (name, ver)
files = {
    name + "/__init__.py": src,
    di + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, ver),
    di + "/WHEEL": "Wheel-Version: 1.0\nGenerator: glsb-spec\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
files[di + "/RECORD"] = "".join("%s,,\n" % k for k in list(files) + [di + "/RECORD"])
path = os.path.join(d, "%s-%s-py3-none-any.whl" % (name, ver))
with zipfile.ZipFile(path, "w") as z:
    for k, v in files.items():
        z.writestr(k, v)
print(path)
]]
  local out, code = M.sh("/usr/bin/python3 -c " .. M.q(script) .. " " .. M.q(dir) .. " " .. M.q(name) .. " "
    .. M.q(version) .. " " .. M.q(module_source))
  assert(code == 0, "make_wheel failed: " .. out)
  return (out:gsub("%s+$", ""))
end

return M
