-- helper.lua: shared helpers for the glsb-confine specs: run the built binary through the
-- shell, temporary workspaces, JSON reports. Every helper that starts something stops it.
local cjson = require "cjson"

local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.root = here .. "/../.."
M.bin = M.root .. "/build/glsb-confine"

function M.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- Shell-quote a list of words into one command line.
function M.join(words)
  local out = {}
  for i, w in ipairs(words) do out[i] = M.q(w) end
  return table.concat(out, " ")
end

function M.sh(cmd)
  local f = assert(io.popen(cmd, "r"))
  local out = f:read("a")
  local _, how, code = f:close()
  if how == "signal" then code = 128 + code end
  return out, code
end

function M.require_binary()
  local f = io.open(M.bin, "rb")
  assert(f, "glsb-confine is not built: run `make build/glsb-confine` first (" .. M.bin .. ")")
  f:close()
end

function M.mktemp_dir()
  local out, code = M.sh("mktemp -d /tmp/glsb-confine-spec.XXXXXX")
  assert(code == 0, "mktemp failed")
  return (out:gsub("%s+$", ""))
end

function M.exists(path)
  local _, code = M.sh("test -e " .. M.q(path))
  return code == 0
end

function M.rm_rf(path)
  if path and path:match("^/tmp/glsb%-confine%-spec%.") then
    os.execute("rm -rf " .. M.q(path))
  end
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Run `glsb-confine sandbox OPTS -- ARGV` with stdout+stderr captured. opts.workspace defaults
-- to a fresh temporary directory (removed afterwards unless keep is set; the caller then owns it).
-- Returns output, exit code, the parsed --report-fd line (or nil), the workspace.
function M.sandbox(argv, opts)
  opts = opts or {}
  local ws = opts.workspace or M.mktemp_dir()
  local report_file = os.tmpname()
  local words = { M.bin, "sandbox", "--workspace", ws, "--report-fd", "3" }
  for _, o in ipairs(opts.args or {}) do words[#words + 1] = o end
  words[#words + 1] = "--"
  for _, a in ipairs(argv) do words[#words + 1] = a end
  local cmd = M.join(words) .. " 3>" .. M.q(report_file) .. " 2>&1"
  if opts.stdin then cmd = "printf %s " .. M.q(opts.stdin) .. " | " .. cmd end
  if opts.timeout then cmd = "timeout -s KILL " .. opts.timeout .. " " .. cmd end
  local out, code = M.sh(cmd)
  local line = M.read(report_file)
  os.remove(report_file)
  local report = line and line ~= "" and cjson.decode(line) or nil
  if not opts.workspace and not opts.keep then M.rm_rf(ws) end
  return out, code, report, ws
end

function M.python(code, opts)
  return M.sandbox({ "python3", "-c", code }, opts)
end

function M.doctor()
  local out, code = M.sh(M.q(M.bin) .. " doctor")
  assert(code == 0, "doctor exited " .. tostring(code))
  return cjson.decode(out)
end

-- Poll fn() every 50 ms until it returns true or seconds pass.
function M.wait_until(fn, seconds)
  local tries = math.floor(seconds * 20)
  for _ = 1, tries do
    if fn() then return true end
    os.execute("sleep 0.05")
  end
  return fn()
end

-- Number of processes whose command line contains marker (literal). The first character is
-- bracketed so the pattern does not match the shell that runs pgrep.
function M.count_procs(marker)
  local re = marker:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?|\\{}]", "\\%0")
  re = "[" .. re:sub(1, 1) .. "]" .. re:sub(2)
  local out = M.sh("pgrep -f -- " .. M.q(re) .. " | wc -l")
  return tonumber(out) or 0
end

return M
