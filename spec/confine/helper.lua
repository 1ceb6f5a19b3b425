-- helper.lua: shared helpers for the glsb-confine specs: run the built binary through the
-- shell, temporary workspaces, JSON reports. Every helper that starts something stops it.
local cjson = require "cjson"

local M = require("support.shell").extend({})

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.root = here .. "/../.."
-- GLSB_CONFINE runs the specs against another build (e.g. main's, to see a new spec fail there).
M.bin = os.getenv("GLSB_CONFINE") or (M.root .. "/build/glsb-confine")

function M.require_binary()
  local f = io.open(M.bin, "rb")
  assert(f, "glsb-confine is not built: run `make build/glsb-confine` first (" .. M.bin .. ")")
  f:close()
end

local shell_mktemp = M.mktemp_dir
function M.mktemp_dir() return shell_mktemp("confine") end

-- Run `glsb-confine sandbox OPTS -- ARGV` with stdout+stderr captured. opts.workspace defaults
-- to a fresh temporary directory (removed afterwards unless keep is set; the caller then owns it);
-- opts.env adds variables to its environment.
-- Returns output, exit code, the parsed --report-fd set-up line (or nil), the workspace, and the
-- parsed exit line's "exit" object (or nil; REPORT.md).
function M.sandbox(argv, opts)
  opts = opts or {}
  local ws = opts.workspace or M.mktemp_dir()
  local report_file = os.tmpname()
  local words = { M.bin, "sandbox", "--workspace", ws, "--report-fd", "3" }
  for _, o in ipairs(opts.args or {}) do words[#words + 1] = o end
  words[#words + 1] = "--"
  for _, a in ipairs(argv) do words[#words + 1] = a end
  local cmd = M.join(words) .. " 3>" .. M.q(report_file) .. " 2>&1"
  if opts.env then cmd = M.env_prefix(opts.env) .. cmd end
  if opts.stdin then cmd = "printf %s " .. M.q(opts.stdin) .. " | " .. cmd end
  if opts.timeout then cmd = "timeout -s KILL " .. opts.timeout .. " " .. cmd end
  local out, code = M.sh(cmd)
  local report, exit = M.decode_report(M.read(report_file))
  os.remove(report_file)
  if not opts.workspace and not opts.keep then M.rm_rf(ws) end
  return out, code, report, ws, exit
end

-- "env NAME=VALUE ... " for a command line, from a table (sorted, so commands are reproducible).
function M.env_prefix(env)
  local words = {}
  for k, v in pairs(env) do words[#words + 1] = k .. "=" .. tostring(v) end
  table.sort(words)
  return "env " .. M.join(words) .. " "
end

-- The lines of a --report-fd stream: the set-up line (ok true/false) and, after a start, the exit
-- line. Returns the set-up object and the exit line's "exit" object (either may be nil).
function M.decode_report(text)
  local report, exit
  for line in (text or ""):gmatch("[^\n]+") do
    local doc = cjson.decode(line)
    if doc.exit then exit = doc.exit else report = report or doc end
  end
  return report, exit
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
