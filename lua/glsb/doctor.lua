-- glsb.doctor: `glsb-lua --doctor`. Prints, for this machine, the confinement
-- features `glsb-confine doctor` finds, what the local provider does about
-- each, and a live check (create a sandbox, run print(1), terminate).
-- main() raises (exit status 1) when the local provider cannot start here.

local M = {}

local cjson = require "cjson.safe"

local function yes(v) return v and "yes" or "no" end

-- Each row: label, how to read the doctor JSON, what the provider does.
local ROWS = {
  { "user namespace", "userns", "required: the sandbox user (uid 1000) maps to an unprivileged host id" },
  { "mount namespace", "mountns", "required: private read-only root, tmpfs /tmp, the workspace binds" },
  { "pid namespace", "pidns", "required: sandbox processes see only each other; all die with it" },
  { "net namespace", "netns", "required: a loopback of its own; with network, slirp4netns + nftables too" },
  { "ipc namespace", "ipcns", "required: no shared memory/semaphores with the host" },
  { "uts namespace", "utsns", "required: own hostname" },
  { "cgroup namespace", "cgroupns", "optional: hides the host cgroup tree" },
  { "time namespace", "timens", "optional: own monotonic clock offsets" },
  { "seccomp filter", "seccomp_filter", "required: denies mount, ptrace, modules, bpf, keyrings, ..." },
  { "no_new_privs", "no_new_privs", "required: no setuid gains inside" },
  { "openat2", "openat2", "workspace writes: RESOLVE_BENEATH (write_workspace_file fails closed without)" },
  { "pidfd", "pidfd", "waits on sandbox processes without polling" },
}

local function run_doctor(helper)
  local p = io.popen(require("glsb.shell").quote(helper) .. " doctor 2>&1")
  if not p then return nil, "cannot run " .. helper end
  local out = p:read("a")
  p:close()
  local d = cjson.decode(out or "")
  if type(d) ~= "table" then return nil, "glsb-confine doctor printed no JSON: " .. tostring(out):sub(1, 300) end
  return d
end

local function program_version(path, flag)
  local p = io.popen("'" .. path .. "' " .. flag .. " 2>&1")
  if not p then return "" end
  local v = (p:read("l") or ""):gsub("^Python ", "")
  p:close()
  return v
end

local function cgroup_text(d)
  local v2, v1 = d.cgroup_v2, d.cgroup_v1
  if type(v2) == "table" and v2.memory_and_pids then
    return "v2 (" .. tostring(v2.cgroup) .. ")", "memory_mb and max_processes enforced by cgroup v2"
  end
  if type(v1) == "table" and (v1.memory or v1.pids) then
    local have = {}
    if v1.memory then have[#have + 1] = "memory" end
    if v1.pids then have[#have + 1] = "pids" end
    return "v1 (" .. table.concat(have, ", ") .. ")",
      "memory_mb / max_processes enforced by cgroup v1 " .. table.concat(have, "+")
        .. (v1.pids and v1.memory and "" or "; the rest by rlimits only")
  end
  return "no", "optional: limits fall back to rlimits (RLIMIT_DATA, RLIMIT_NPROC) only"
end

-- M.check([opts]) -> what the doctor finds, as data (`glsb doctor --json`): {helper, helper_error, python,
-- python_version, node, node_version, features = {{name, here (bool), reason, does}}, landlock_abi,
-- cgroup, cgroup_does, ready (bool), live = {ok, ms, error} | nil, verdict}. opts.live = false skips the
-- live check (create, print(1), terminate).
function M.check(opts)
  opts = opts or {}
  local t = { features = {} }
  local lp = require("glsb.registry").get("local")
  local helper, herr = lp.find_helper(opts.confine)
  t.helper, t.helper_error = helper, herr
  if not helper then
    t.ready, t.verdict = false, "the glsb-confine helper is missing"
    return t
  end
  local python = opts.python or "/usr/bin/python3"
  local pyok = io.open(python, "rb")
  if pyok then pyok:close() end
  t.python, t.python_version = python, pyok and program_version(python, "--version") or nil
  local node = lp.find_in_sandbox_path("node")
  t.node, t.node_version = node, node and program_version(node, "--version") or nil
  local d, derr = run_doctor(helper)
  if not d then
    t.ready, t.verdict = false, derr
    return t
  end
  local reasons = type(d.reasons) == "table" and d.reasons or {}
  for _, row in ipairs(ROWS) do
    local v = d[row[2]] and true or false
    t.features[#t.features + 1] = { name = row[1], here = v,
      reason = not v and reasons[row[2]] and tostring(reasons[row[2]]) or nil, does = row[3] }
  end
  t.landlock_abi = math.tointeger(tonumber(d.landlock_abi) or 0) or 0
  t.cgroup, t.cgroup_does = cgroup_text(d)
  t.ready = d.sandbox_ready == true
  if not t.ready then
    t.verdict = "NOT READY - glsb.create(\"local\") fails closed here; allow_degraded = true starts with less."
    return t
  end
  if opts.live ~= false then
    local loop = require "glsb.loop"
    local glsb = require "glsb"
    local started = loop.now()
    local ok, res = pcall(function()
      local sb = glsb.create("local", { confine = opts.confine })
      local r = sb:execute_code("print(1)")
      sb:terminate()
      return r
    end)
    local ms = (loop.now() - started) * 1000
    if ok and res.status == "success" and res.stdout == "1\n" then
      t.live = { ok = true, ms = ms }
      t.verdict = string.format("ready - live check create -> execute_code(\"print(1)\") -> terminate: %.0f ms", ms)
    else
      t.live = { ok = false, ms = ms, error = tostring(ok and res or res) }
      t.ready, t.verdict = false, "the features are there but the live check failed: " .. t.live.error
    end
  else
    t.verdict = "ready"
  end
  return t
end

-- M.report([opts]) -> text, ready (bool): check()'s findings for a person. opts as check's.
function M.report(opts)
  local t = M.check(opts)
  local lines = {}
  local function add(s) lines[#lines + 1] = s end
  add("glsb doctor: what the local provider can do on this machine")
  if not t.helper then
    add("  helper   MISSING: " .. tostring(t.helper_error))
    return table.concat(lines, "\n") .. "\n", false
  end
  add("  helper   " .. t.helper)
  add("  python   " .. (t.python_version and (t.python .. " " .. t.python_version .. " (the code kernel)")
    or (t.python .. " MISSING: python sandboxes cannot start")))
  add("  node     " .. (t.node and (t.node .. " " .. t.node_version .. " (language = \"javascript\")")
    or "not installed: language = \"javascript\" fails at create"))
  if #t.features == 0 then
    add("  " .. tostring(t.verdict))
    return table.concat(lines, "\n") .. "\n", false
  end
  add("")
  add(string.format("  %-18s %-22s %s", "feature", "here", "local provider"))
  for _, f in ipairs(t.features) do
    local here = yes(f.here)
    if not f.here and f.reason then here = "no (" .. f.reason .. ")" end
    add(string.format("  %-18s %-22s %s", f.name, here, f.does))
  end
  local abi = t.landlock_abi
  add(string.format("  %-18s %-22s %s", "landlock", abi > 0 and ("ABI " .. abi) or "no",
    abi > 0 and ("required: read/exec on the system, read/write on home, /files, /tmp"
      .. (abi >= 6 and "; signals and abstract sockets scoped" or ""))
      or "required: sandboxes fail closed (allow_degraded = true accepts less)"))
  add(string.format("  %-18s %-22s %s", "cgroup limits", t.cgroup, t.cgroup_does))
  add(string.format("  %-18s %-22s %s", "rlimits", "yes",
    "cpu_seconds, memory_mb (data), max_file_mb, max_open_files, max_processes"))
  add("")
  add("  verdict: " .. tostring(t.verdict))
  return table.concat(lines, "\n") .. "\n", t.ready
end

function M.main()
  local text, ready = M.report()
  io.stdout:write(text)
  io.stdout:flush()
  if not ready then error("glsb doctor: the local provider cannot start sandboxes on this machine", 0) end
end

return M
