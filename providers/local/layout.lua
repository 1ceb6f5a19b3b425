-- glsb.providers.local.layout: where things are, and how glsb-confine is started. Shared by the
-- provider (init.lua) and the template builder (template.lua), which start sandboxes the same way.
--
-- Inside a sandbox: the agent's files at AGENT_DIR (boot.py, agent.py, bound read-only one by one),
-- its bytecode at AGENT_BYTECODE, pip's wheels at FIND_LINKS_DIR, a template layer at TEMPLATE_DIR.
-- HELPER_PATH names the helper in the workspace primitives' argv (init.lua's _exec_argv runs them on
-- the control channel); nothing is there. On the host: the helper (glsb.confine_helper), the agent's
-- directory (this one), the interpreter (opts.python, else /usr/bin/python3), programs the sandbox's
-- PATH has, and the folder the workspaces are made in (host_workspace_dir). confine_argv turns a
-- sandbox's options into glsb-confine's argv and config; read_report / read_exit read what the
-- supervisor writes on fd 3.

local codec = require "glsb.codec"
local fs = require "glsb.fs"
local cjson = require "cjson.safe"
local loop = require "glsb.loop"
local process = require "glsb.process"
local errors = require "glsb.errors"
local models = require "glsb.models"
local confine_helper = require "glsb.confine_helper"
local net = require "glsb.network"
local options = require "glsb.options"

local Stage = models.Stage

local M = {}

M.AGENT_DIR = "/.glsb/agent"
M.AGENT_BYTECODE = "/.glsb/agent.pyc"
M.HELPER_PATH = "/.glsb/glsb-confine"
M.FIND_LINKS_DIR = "/.glsb/find-links"
M.TEMPLATE_DIR = "/opt/glsb/template"
-- larger downloads return nil (max_download_bytes' default; transfer.lua)
M.DEFAULT_MAX_DOWNLOAD = 256 * 1024 * 1024

local exists = fs.exists

local THIS_DIR = fs.source_dir() or "."

-- M.find_helper([explicit]) -> absolute path, or nil, message listing what was tried
-- (glsb.confine_helper: opts.confine, $GLSB_CONFINE, next to the core, the source checkout's build/).
M.find_helper = confine_helper.find

function M.agent_dir()
  local dir = fs.realpath(THIS_DIR) or THIS_DIR
  return dir
end

-- M.agent_bytecode(python, cache_dir) -> host path of agent.py compiled by that interpreter, or nil.
-- Python compiles agent.py (some 1,100 lines) on every start of a sandbox, about 6 ms of each cold
-- create (its directory is read-only and it runs with -B). The host compiles it once, with the
-- sandbox's own interpreter, into <cache_dir>/local/agent/<key>.pyc, which every later process finds;
-- sandboxes get it read-only at /.glsb/agent.pyc and boot.py runs it when its magic number is the
-- interpreter's, else compiles the source as before: a stale or missing cache costs time, never
-- correctness. The key: the source's CRC-32 and length, and the interpreter's real path, size and
-- modification time (a Python upgraded in place gets its own). CRC-32 rather than SHA-256: the cache is
-- the host user's own (nothing a sandbox writes lands there), so the key only tells versions of our own
-- file apart, and SHA-256 loaded libcrypto into the process, 2.6 ms of its first create.
local bytecode = {}

function M.agent_bytecode(python, cache_dir)
  local memo = python .. "\0" .. cache_dir
  if bytecode[memo] ~= nil then return bytecode[memo] or nil end
  local source = M.agent_dir() .. "/agent.py"
  local f = io.open(source, "rb")
  local text = f and f:read("a")
  if f then f:close() end
  local path
  if text then
    local real = fs.realpath(python) or python
    local st = fs.lstat(real) or {}
    local key = string.format("%08x-%d-%08x", codec.crc32(text), #text,
      codec.crc32(real .. "\0" .. tostring(st.size) .. "\0" .. tostring(st.mtime)))
    local dir = cache_dir .. "/local/agent"
    path = dir .. "/" .. key .. ".pyc"
    if not exists(path) then
      -- once per machine, agent and interpreter: py_compile writes the file atomically
      local out = process.run({ "mkdir", "-p", "-m", "0755", dir }, { timeout = 10 })
      out = out and process.run({ python, "-I", "-c",
        "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)", source, path },
        { timeout = 30 })
      if not out or not exists(path) then path = nil end
    end
  end
  bytecode[memo] = path or false
  return path
end

local SANDBOX_PATH = { "/usr/local/bin", "/usr/bin", "/bin" }

-- M.find_in_sandbox_path(name) -> host path of a program the sandbox can run.
function M.find_in_sandbox_path(name)
  for _, d in ipairs(SANDBOX_PATH) do
    local p = d .. "/" .. name
    if exists(p) then return p end
  end
  return nil
end

-- cache_dir(opts) -> the host folder of this user's glsb cache: opts.cache_dir, else $XDG_CACHE_HOME/glsb,
-- else ~/.cache/glsb. Its local/ holds template layers (template.lua), their scratch and the agent's
-- bytecode (agent_bytecode).
function M.cache_dir(opts)
  if opts and opts.cache_dir then return opts.cache_dir end
  local xdg = os.getenv("XDG_CACHE_HOME")
  if xdg and xdg ~= "" then return xdg .. "/glsb" end
  local home = os.getenv("HOME")
  if not home or home == "" then home = "/tmp" end
  return home .. "/.cache/glsb"
end

---------------------------------------------------------------------------
-- How glsb-confine is started
---------------------------------------------------------------------------

-- start_error(message[, cause[, stage]]) -> the SandboxStartError of a start that failed (stage:
-- create unless given).
local function start_error(message, cause, stage)
  return errors.new(errors.SandboxStartError, stage or Stage.CREATE, message, cause)
end


-- network_policy(value) -> glsb.network's policy of a create's `network` (nil: none), checked at the
-- caller's line. A local sandbox pins each name of allow when it starts (glsb-confine resolves it and
-- writes it in the sandbox's /etc/hosts): a wildcard, which no lookup can list, is refused.
function M.network_policy(value)
  local policy = net.policy(value, "create")
  for _, d in ipairs(policy and policy.allow_domains or {}) do
    if d:sub(1, 2) == "*." then
      options.arg_error("create: network.allow %q: a local sandbox pins each name when it starts (its "
        .. "addresses then are allowed): list the names, not a wildcard", d)
    end
  end
  return policy
end

local LIMITS = {
  { "memory_mb", "--memory-mb" }, { "cpu_seconds", "--cpu-seconds" },
  { "max_processes", "--max-processes" }, { "max_file_mb", "--max-file-mb" },
  { "disk_mb", "--disk-mb" }, { "max_open_files", "--max-open-files" },
}

-- Builds how glsb-confine is started for a sandbox (exported for the template builder) -> argv,
-- config. spec: {helper, workspace, program (array), ro_binds, binds, env (map), opts (limits,
-- network, allow_degraded)}. Every option goes in config, not in argv: the supervisor reads it from
-- its stdin (--config-fd 0: a decimal length, a newline, then NUL-ended words; exactly that much, then
-- PROGRAM's stdin follows), so its /proc/PID/cmdline shows no workspace or bind path of the host and
-- no value of env (src/confine/sb_options.c). Spawn argv with stdin = "pipe" and write config first.
-- The supervisor's report comes on fd 3: spawn it with fd3 = "pipe" and read it with M.read_report;
-- with spec.control, fd 3 is also the control channel: spawn it with fd3 = "socket" (control.lua).
function M.confine_argv(spec)
  local words = { "--workspace", spec.workspace, "--report-fd", "3" }
  if spec.control then words[#words + 1] = "--control-fd" words[#words + 1] = "3" end
  if spec.cleanup ~= false then words[#words + 1] = "--cleanup" end
  local opts = spec.opts or {}
  -- the limits and cpus come declared (glsb.options checked their type and range at the caller's line:
  -- the sandbox's and the builder's options, a TemplateSpec's memory_mb)
  for _, l in ipairs(LIMITS) do
    local v = opts[l[1]]
    if v ~= nil then words[#words + 1] = l[2] words[#words + 1] = tostring(math.tointeger(v)) end
  end
  if opts.cpus ~= nil then words[#words + 1] = "--cpus" words[#words + 1] = string.format("%.6g", opts.cpus) end
  local policy = spec.network
  if policy == nil then policy = M.network_policy(opts.network) end
  if policy then
    words[#words + 1] = "--network"
    for _, c in ipairs(policy.allow) do words[#words + 1] = "--net-allow" words[#words + 1] = c end
    for _, d in ipairs(policy.allow_domains) do words[#words + 1] = "--net-allow" words[#words + 1] = d end
    for _, c in ipairs(policy.deny) do words[#words + 1] = "--net-deny" words[#words + 1] = c end
  end
  if opts.allow_degraded then words[#words + 1] = "--allow-degraded" end
  for _, b in ipairs(spec.ro_binds or {}) do
    words[#words + 1] = "--ro-bind" words[#words + 1] = b[1] words[#words + 1] = b[2]
  end
  for _, b in ipairs(spec.binds or {}) do
    words[#words + 1] = "--bind" words[#words + 1] = b[1] words[#words + 1] = b[2]
  end
  local keys = {}
  for k in pairs(spec.env or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    words[#words + 1] = "--env" words[#words + 1] = k .. "=" .. tostring(spec.env[k])
  end
  words[#words + 1] = "--"
  for _, w in ipairs(spec.program) do words[#words + 1] = w end
  for i, w in ipairs(words) do
    if type(w) ~= "string" or w:find("\0", 1, true) then
      error(start_error(string.format("local: a sandbox option contains a NUL byte or is not a string (%s)",
        tostring(w):gsub("%z", "\\0"))), 0)
    end
    words[i] = w .. "\0"
  end
  local block = table.concat(words)
  return { spec.helper, "sandbox", "--config-fd", "0" }, #block .. "\n" .. block
end

-- Reads the supervisor's one-line report from the process's fd 3 (nil when it wrote none: it writes
-- it just before starting the program, or when the set-up failed, then closes the pipe).
function M.read_report(p, deadline)
  local line = p:read_line("fd3", deadline or loop.now() + 2)
  if not line or line == "" then return nil end
  return cjson.decode(line)
end

-- Reads the supervisor's exit line from fd 3 (it writes one when PROGRAM has ended, before it removes
-- the cgroup: src/confine/REPORT.md): {code, signal, oom_kills, oom_killed}, or nil when there is
-- none (an older helper, or the supervisor was killed). Lines before it are skipped.
function M.read_exit(p, deadline)
  deadline = deadline or loop.now() + 1
  while true do
    local line = p:read_line("fd3", deadline)
    if not line then return nil end
    local doc = cjson.decode(line)
    if type(doc) == "table" and type(doc.exit) == "table" then return doc.exit end
  end
end

-- The host folder in which each sandbox's workspace directory is made: opts.host_workspace_dir, else
-- $TMPDIR, else /tmp. opts.workspace_root is its old name (it clashed with the class field
-- Sandbox.workspace_root, a path inside the sandbox): still honoured, with one warning per process.
local warned_workspace_root = false

local function host_workspace_dir(opts)
  local dir = opts.host_workspace_dir
  if dir == nil and opts.workspace_root ~= nil then
    dir = opts.workspace_root
    if not warned_workspace_root then
      warned_workspace_root = true
      require("glsb.log").warn("local: the create option workspace_root is deprecated: use host_workspace_dir "
        .. "(Sandbox.workspace_root is the path inside the sandbox)")
    end
  end
  dir = dir or os.getenv("TMPDIR")
  if not dir or dir == "" then dir = "/tmp" end
  return dir
end

M.host_workspace_dir = host_workspace_dir
M.start_error = start_error

-- python_of(opts) -> the host path of the kernel's interpreter, or raises a start error.
function M.python_of(opts)
  local py = opts.python or "/usr/bin/python3"
  if not exists(py) then
    error(start_error("local: python not found at " .. py .. " (set opts.python to the host's python3)"), 0)
  end
  return py
end

function M.python_in_sandbox(opts)
  return (opts and opts.python) or "/usr/bin/python3"
end

return M
