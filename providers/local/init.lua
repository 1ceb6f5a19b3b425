-- glsb.providers.local: sandboxes on this machine, confined by glsb-confine.
-- The embedded default: glsb.create() with no name gives one of these.
--
-- How a sandbox is made
--   create() runs `glsb-confine sandbox` (fresh user/mount/pid/net/ipc/uts
--   namespaces, private read-only root, Landlock, seccomp, rlimits, cgroup
--   limits; see `glsb-confine sandbox --help`) with PROGRAM = the host's
--   python3 running boot.py, which runs agent.py (both from this directory,
--   bound read-only one by one at /.glsb/agent: copied in, no host path in
--   mountinfo; its bytecode, compiled once per machine, at /.glsb/agent.pyc:
--   M.agent_bytecode). The helper itself is bound read-only
--   at /.glsb/glsb-confine so workspace primitives can exec it inside. Every
--   option reaches glsb-confine on its stdin (--config-fd 0), none in argv.
--   The workspace is <host_workspace_dir>/glsb-local-XXXXXX on the host
--   (home -> /home/user, files -> /files); --cleanup makes the supervisor
--   remove it when the sandbox ends, and terminate removes whatever is left.
--   The supervisor's report (--report-fd 3, a socketpair from glsb.core's
--   spawn fd3 option, also the control channel) is read into sb.confinement.
--   The supervisor runs in a session of its own (setsid).
--
-- Finding things
--   helper: glsb.confine_helper.find(opts.confine) (opts.confine, else
--   $GLSB_CONFINE, else next to the core, else the checkout's build/).
--   agent: agent.py next to this file. python: opts.python or /usr/bin/python3
--   (the sandbox PATH has no pyenv/venv of the host).
--
-- The agent protocol (PROTOCOL.md; channel.lua is the host end)
--   Frames of one JSON header line, then raw bytes when the header has "n",
--   on the PROGRAM's stdin/stdout. One request at a time per sandbox (a small
--   lock; concurrent callers queue). Output streams in "out" events; each
--   stream is capped at 10 MiB per call (the agent counts what it drops, the
--   host keeps no more whatever the sandbox sends; the result then has
--   stdout_truncated / stderr_truncated = true and a note appended). A header
--   over 1 MiB or a payload over 16 MiB is a protocol error and kills it.
--
-- Timeouts and failures
--   execute_code timeout: the host asks the agent to interrupt (SIGINT to its
--   main thread: KeyboardInterrupt; bash/node: SIGKILL to the process group)
--   -> TIMEOUT, namespace kept. If the code does not stop within
--   interrupt_grace (2 s) the sandbox is killed -> TIMEOUT, and the handle
--   ends (glsb.outcome.GONE): later calls raise SandboxNotInitializedError. The interpreter ending
--   during a call (os._exit, a crash, a kill) -> ERROR naming its exit code
--   or signal; the sandbox is gone. The lease ending during a call ->
--   TIMEOUT saying so, whichever of the two deadlines fires first.
--   execute_command: the agent kills the command's process group at the
--   timeout (the host waits timeout + grace as a backstop).
--
-- Lease: set_timeout(s) / create{timeout = s} arm a glsb.loop timer that
--   terminates the sandbox at expiry unless renewed. It only fires while the
--   owning process runs the loop (any glsb call waits on it); if the owner
--   dies, the supervisor gets SIGHUP (PR_SET_PDEATHSIG), kills the sandbox and
--   removes the workspace. Dropping the last reference (garbage collection, or
--   lua_close at exit) does the same through a finalizer. If owner and
--   supervisor are killed together, the next sandbox in the same root (or
--   `glsb-lua --gc`) removes what they left (reaper.lua: owner.json records who
--   owns each workspace).
--
-- Streaming: on_stdout / on_stderr get one call per line, without its "\n"
--   (a line longer than 64 KiB arrives in pieces).
--
-- Uploads, downloads, workspace primitives (glsb.workspace), sb.files: on
--   glsb-confine's control channel (control.lua; --control-fd 3, a socketpair
--   only we and the supervisor hold), never through the agent the code could
--   rewrite. _exec_argv of the helper's argv (/.glsb/glsb-confine write|run
--   ...) is a control call; another argv runs exactly (no shell) through the
--   agent. sb.files' list/exists/make_dir/remove run coreutils through the
--   helper's `run`.
--
-- additional_packages: pip --user inside the sandbox (PYTHONUSERBASE is
--   /home/user/.local, on sys.path in the kernel), with --no-index
--   --find-links <opts.pip_find_links> (bound read-only at /.glsb/find-links)
--   and/or --index-url <opts.pip_index_url>. Without either, pip uses its
--   default index, which needs network = true.
--
-- Options (create): language ("python" | "bash" | "javascript"), timeout,
--   template, network, memory_mb, cpu_seconds, max_processes, max_file_mb,
--   disk_mb, cpus (CPU quota, default 1), max_open_files, allow_degraded,
--   env (sandbox-wide environment), python, confine, host_workspace_dir (workspace_root: its deprecated
--   name), start_timeout (10 s), interrupt_grace,
--   pip_index_url, pip_find_links, max_download_bytes (256 MiB).

local core = require "glsb.core"
local cjson = require "cjson.safe"
local channel = require "glsb.providers.local.channel"
local reaper = require "glsb.providers.local.reaper"
local control = require "glsb.providers.local.control"
local mux = require "glsb.providers.local.mux"
local loop = require "glsb.loop"
local process = require "glsb.process"
local errors = require "glsb.errors"
local models = require "glsb.models"
local sandbox = require "glsb.sandbox"
local packages = require "glsb.packages"
local output = require "glsb.output"
local confine_helper = require "glsb.confine_helper"
local registry = require "glsb.registry"
local outcome = require "glsb.outcome"

local Stage = models.Stage
local Status = models.ExecutionStatus

local M = { name = "local" }

M.OUTPUT_CAP = output.CAP
M.MAX_FRAME = 16 * 1024 * 1024
M.DEFAULT_START_TIMEOUT = 10
M.DEFAULT_INTERRUPT_GRACE = 2
M.DEFAULT_MAX_DOWNLOAD = 256 * 1024 * 1024
M.AGENT_DIR = "/.glsb/agent"
M.AGENT_BYTECODE = "/.glsb/agent.pyc"
M.HELPER_PATH = "/.glsb/glsb-confine"
M.FIND_LINKS_DIR = "/.glsb/find-links"
M.TEMPLATE_DIR = "/opt/glsb/template"

---------------------------------------------------------------------------
-- Locating the helper, the agent, python, node
---------------------------------------------------------------------------

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local function dirname(path) return path:match("^(.*)/[^/]*$") or "." end

local THIS_DIR = (function()
  local src = debug.getinfo(1, "S").source
  if src:sub(1, 1) == "@" then return dirname(src:sub(2)) end
  return "."
end)()

-- M.find_helper([explicit]) -> absolute path, or nil, message listing what was tried
-- (glsb.confine_helper: opts.confine, $GLSB_CONFINE, next to the core, the source checkout's build/).
M.find_helper = confine_helper.find

function M.agent_dir()
  local dir = core.realpath and core.realpath(THIS_DIR) or THIS_DIR
  return dir
end

-- M.agent_bytecode(python, cache_dir) -> host path of agent.py compiled by that interpreter, or nil.
-- Python compiles agent.py (some 900 lines) on every start of a sandbox, about 6 ms of each cold
-- create (its directory is read-only and it runs with -B). The host compiles it once, with the
-- sandbox's own interpreter, into <cache_dir>/local/agent/<key>.pyc (key: the source's sha256 and the
-- interpreter's real path), which every later process finds; sandboxes get it read-only at
-- /.glsb/agent.pyc and boot.py runs it when its magic number is the interpreter's, else compiles the
-- source as before: a stale or missing cache costs time, never correctness. The cache is the host
-- user's own; nothing a sandbox writes ever lands there.
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
    local key = core.sha256(text .. "\0" .. (core.realpath(python) or python)):sub(1, 40)
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

---------------------------------------------------------------------------
-- The sandbox class
---------------------------------------------------------------------------

local Sandbox = sandbox.CodeInterpreterSandbox:extend("local", {
  languages = { python = true, bash = true, javascript = true },
  -- a local start failure is never a hiccup of the network: no retry
  create_retry = { attempts = 1 },
  -- glsb.connect / glsb.list: a sandbox is a child process tree of its creator
  attach_unsupported = "local sandboxes belong to the process that created them",
  -- what a failed install that reads like "no network" suggests (glsb.sandbox failure_summary)
  network_hint = "pass network = true (a local sandbox is offline by default), or pip_find_links = <a directory "
    .. "of wheels>",
  -- the local provider's own options, declared once (glsb.options: checked strictly; the README's
  -- table is generated from these)
  options = {
    create = {
      network = { "boolean", "share the host network; otherwise loopback only", default = "false" },
      memory_mb = { "count", "memory limit (MiB)", default = "1024" },
      cpu_seconds = { "count", "CPU time limit (s)", default = "3600" },
      max_processes = { "count", "process limit", default = "256" },
      max_file_mb = { "count", "largest file the sandbox may write (MiB)", default = "512" },
      disk_mb = { "count", "size of the sandbox's storage (MiB): /tmp, /home/user and /files are one private "
        .. "tmpfs of this size, with 64 inodes per MiB (at least 4096); full, a write fails with ENOSPC",
        default = "1024" },
      cpus = { "positive", "CPU quota in CPUs (cgroup: v2 cpu.max, v1 CFS quota), 0.01 to 4096", default = "1" },
      max_open_files = { "count", "open file limit", default = "1024" },
      allow_degraded = { "boolean", "start even if a kernel feature is missing (listed in `sb.missing`)",
        default = "false" },
      ro_binds = { "table", "extra read-only binds `{ {host_path, sandbox_path}, ... }`" },
      python = { "string", "the kernel's interpreter (the host's, bound read-only with /usr)",
        default = "/usr/bin/python3" },
      host_workspace_dir = { "string", "host folder where the per-sandbox workspace directory is created "
        .. "(`sb.workspace_root` is the path inside, `/home/user`)", default = "$TMPDIR or /tmp" },
      workspace_root = { "string", "deprecated name of `host_workspace_dir` (still works, with one warning)" },
      confine = { "string", "path of glsb-confine", default = "$GLSB_CONFINE, else next to the core" },
      start_timeout = { "positive", "seconds for the sandbox agent to start", default = "10" },
      interrupt_grace = { "positive", "seconds code may ignore an interrupt before the sandbox is killed",
        default = "2" },
      pip_index_url = { "string", "pip `--index-url` for `additional_packages`" },
      pip_find_links = { "string", "a directory of wheels for `additional_packages` (bound read-only; implies "
        .. "`--no-index`)" },
      max_download_bytes = { "count", "larger downloads return nil (counted on the host: whatever the sandbox "
        .. "sends, no more is kept)", default = "268435456" },
      cache_dir = { "string", "where `template` layers are looked up (as the builder's)",
        default = "$XDG_CACHE_HOME/glsb or ~/.cache/glsb" },
    },
  },
})
M.Sandbox = Sandbox

local function start_error(message, cause, stage)
  return errors.new(errors.SandboxStartError, stage or Stage.CREATE, message, cause)
end

local function positive_int(opts, key)
  local v = opts[key]
  if v == nil then return nil end
  if type(v) ~= "number" or v ~= math.floor(v) or v <= 0 then
    error(start_error(string.format("local: opts.%s must be a positive integer, got %s", key, tostring(v))), 0)
  end
  return math.tointeger(v)
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
  for _, l in ipairs(LIMITS) do
    local v = positive_int(opts, l[1])
    if v then words[#words + 1] = l[2] words[#words + 1] = tostring(v) end
  end
  if opts.cpus ~= nil then
    -- glsb-confine takes 0.01 to 4096 CPUs (its --cpus; 1 when not given)
    local c = opts.cpus
    if type(c) ~= "number" or not (c >= 0.01 and c <= 4096) then
      error(start_error(string.format("local: opts.cpus must be a number of CPUs from 0.01 to 4096, got %s",
        tostring(c))), 0)
    end
    words[#words + 1] = "--cpus" words[#words + 1] = string.format("%.6g", c)
  end
  if opts.network then words[#words + 1] = "--network" end
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
  if dir ~= nil and (type(dir) ~= "string" or dir == "") then
    error(start_error("local: opts.host_workspace_dir must be a non-empty string, got " .. tostring(dir)), 0)
  end
  dir = dir or os.getenv("TMPDIR")
  if not dir or dir == "" then dir = "/tmp" end
  return dir
end

M.host_workspace_dir = host_workspace_dir

---------------------------------------------------------------------------
-- Reading events from the agent
---------------------------------------------------------------------------

-- Keeps the last 4 KiB of the supervisor's stderr (diagnostics) without blocking.
local function drain_stderr(self)
  local p = self._proc
  if not p or not p.proc:fd("stderr") then return end
  for _ = 1, 16 do
    local data = p.proc:read("stderr")
    if not data or data == "" then
      if data == "" then p.proc:close_fd("stderr") end
      return
    end
    local tail = self._stderr_tail .. data
    if #tail > 4096 then tail = tail:sub(-4096) end
    self._stderr_tail = tail
  end
end

-- Reads one event: the decoded header, with ev.data = its payload (see channel.lua). keep(ev, n) may
-- refuse a payload (it is then read and dropped). Returns nil, "timeout" | "eof" | "protocol: ...".
local function read_event(self, deadline, keep)
  return self._chan:read_event(deadline, keep)
end

local SIGNAL_NAMES = { [1] = "SIGHUP", [2] = "SIGINT", [3] = "SIGQUIT", [4] = "SIGILL", [6] = "SIGABRT",
  [7] = "SIGBUS", [8] = "SIGFPE", [9] = "SIGKILL", [11] = "SIGSEGV", [13] = "SIGPIPE", [15] = "SIGTERM",
  [24] = "SIGXCPU", [25] = "SIGXFSZ", [31] = "SIGSYS" }

-- How the sandbox's program ended: from the supervisor's exit line when it wrote one (PROGRAM's own
-- wait status, and whether the OOM killer killed it), else from the supervisor's exit status (PROGRAM's
-- status: the code, or 128 + the signal; 125 when the sandbox could not be set up; see glsb-confine
-- sandbox --help). Returns {code = n} | {signal = n, name = "SIGKILL", oom = bool} | {setup = true}
-- | {supervisor_signal = n}, or nil while it runs.
local function program_end(self)
  local p = self._proc
  local st = p and p.proc:poll()
  if not st then return nil end
  if self._exit_report == nil then
    self._exit_report = (self._control and self._control:read_exit(loop.now() + 0.5)
      or not self._control and M.read_exit(p, loop.now() + 0.5)) or false
  end
  local x = self._exit_report
  if x then
    if x.oom_killed == true then return { signal = 9, name = "SIGKILL", oom = true } end
    if math.type(x.code) == "integer" or (type(x.code) == "number" and x.code == math.floor(x.code)) then
      return { code = math.tointeger(x.code) }
    end
    if type(x.signal) == "number" then
      local sig = math.tointeger(x.signal)
      return { signal = sig, name = SIGNAL_NAMES[sig] or ("signal " .. sig) }
    end
  end
  if st.signal then return { supervisor_signal = st.signal } end
  if st.code == 125 then return { setup = true } end
  if st.code > 128 then
    local sig = st.code - 128
    return { signal = sig, name = SIGNAL_NAMES[sig] or ("signal " .. sig) }
  end
  return { code = st.code }
end
M.program_end = program_end

local function describe_end(e, opts)
  if not e then return "the sandbox ended unexpectedly" end
  if e.oom then
    return string.format("the interpreter was killed by the kernel's OOM killer: the sandbox ran out of memory "
      .. "(memory_mb = %s)", tostring(opts and opts.memory_mb or 1024))
  end
  if e.code then return string.format("the interpreter exited with code %d", e.code) end
  if e.signal then return "the interpreter was killed by " .. e.name end
  if e.setup then return "the sandbox supervisor failed" end
  return "the sandbox supervisor was killed by signal " .. tostring(e.supervisor_signal)
end

local function describe_exit(self)
  local st = self._proc and self._proc.proc:poll()
  local parts = {}
  if st then
    parts[#parts + 1] = st.code and ("supervisor exit code " .. st.code)
      or ("supervisor killed by signal " .. tostring(st.signal))
  end
  drain_stderr(self)
  local tail = self._stderr_tail:gsub("%s+$", "")
  if tail ~= "" then parts[#parts + 1] = "stderr: " .. tail:sub(-500) end
  return table.concat(parts, "; ")
end

-- Marks the sandbox dead (it cannot serve requests any more) and stops it:
-- SIGHUP makes the supervisor kill it and remove the cgroup and workspace;
-- SIGKILL only if the supervisor itself does not exit.
local function mark_dead(self, why)
  if self._dead then return end
  self._dead = why
  local p = self._proc
  if not p then return end
  for _, step in ipairs({ { "HUP", 2 }, { "KILL", 1 } }) do
    if p.proc:poll() then return end
    p:kill(step[1])
    if p:wait(loop.now() + step[2]) then return end
  end
end

-- Why the sandbox cannot serve a request, or nil when it can.
local function unusable(self)
  if self._dead then
    return string.format("the local sandbox is no longer usable (%s); terminate it and create a new one", self._dead)
  end
  if not self._proc then return "the local sandbox is not running" end
  return nil
end

-- Sends one frame to the agent. Frames of background requests (spawn, kill) may be sent while a
-- foreground request runs: one frame at a time (self._wlock), never interleaved.
-- -> true, or nil, "busy" (nothing was written: the deadline passed while another frame went out) |
-- "timeout" | "closed" | a message (part of the frame may be out).
local function send(self, req, deadline, payload)
  if not self._wlock:acquire(deadline) then return nil, "busy" end
  local ok, sent, err = pcall(self._chan.send, self._chan, req, payload, deadline)
  self._wlock:release()
  if not ok then error(sent, 0) end
  return sent, err
end

-- Why the agent's stream cannot be read any more, from mux.lua's reason.
local function stream_failure(rerr)
  if rerr == "broken" then
    return "the agent's stream was left in the middle of a frame (its reader was cancelled)"
  end
  return rerr
end

-- The agent's stdout ended in the middle of a request: the lease's terminate (its own doing), or the
-- program ended. Waits for the supervisor's status and says which. -> "lease" | "exited"
local function ended(self)
  if self._lease_expired then return "lease" end
  if not self._proc then return "exited" end
  self._proc:wait(loop.now() + 2)
  local e = program_end(self)
  local desc = describe_end(e, self._opts)
  if not e or e.setup or e.supervisor_signal then
    local d = describe_exit(self)
    if d ~= "" then desc = desc .. " (" .. d .. ")" end
  end
  self._end = e or {}
  mark_dead(self, desc .. "; the sandbox is gone")
  return "exited"
end

-- request(self, req, opts) -> done event, or nil, reason:
--   "unusable" (nothing sent: the sandbox is dead or stopped), "busy" (nothing sent: the deadline
--   passed while another call held the sandbox), "lease" (the lease ended it), "exited" (the program
--   ended during the call: self._end says how), "killed" (by us: the timeout and the grace period
--   passed), "broken" (a request that could not be written whole, or a protocol violation: the
--   sandbox was killed; self._dead says which).
-- opts: deadline (interrupt at this time), payload (bytes sent after the header), on_event(ev) for
-- out/chunk events, keep(ev, n) (keep that payload? see channel.lua), grace (seconds after the
-- interrupt before the sandbox is killed), interrupt (send an interrupt at the deadline, else kill).
local function request(self, req, opts)
  if unusable(self) then return nil, "unusable" end
  self._next_id = self._next_id + 1
  req.id = self._next_id
  -- one request at a time: the others wait their turn (FIFO); whoever gets the lock after the
  -- sandbox died finds it unusable below
  if not self._lock:acquire(opts.deadline) then return nil, "busy" end
  local box
  local ok, res, why = pcall(function()
    if unusable(self) then return nil, "unusable" end
    box = self._mux:open(req.id, opts.keep)
    local sent, err = send(self, req, opts.deadline, opts.payload)
    if not sent then
      if self._lease_expired then return nil, "lease" end
      if err == "busy" then return nil, "busy" end
      -- part of the frame may be out: the stream cannot be trusted any more
      mark_dead(self, err == "timeout" and string.format("the agent did not take the %s request in time", req.op)
        or ("the agent stopped reading requests: " .. tostring(err)))
      return nil, "broken"
    end
    local deadline = opts.deadline
    local interrupted = false
    while true do
      local ev, rerr = self._mux:next(box, deadline)
      if ev then
        if ev.ev == "done" then return ev end
        if opts.on_event then opts.on_event(ev) end
      elseif rerr == "timeout" then
        if opts.interrupt and not interrupted then
          interrupted = true
          -- a failed send is fine here: the stdin was closed by terminate (the lease), or the agent
          -- is stuck, and the grace period below settles both
          send(self, { op = "interrupt", id = req.id }, loop.now() + 1)
          deadline = loop.now() + (opts.grace or self._grace)
        else
          if self._lease_expired then return nil, "lease" end
          mark_dead(self, string.format(
            "%s did not stop within its timeout and the grace period; the sandbox was killed",
            req.op == "exec" and "the code" or req.op))
          return nil, "killed"
        end
      elseif rerr == "eof" then
        return nil, ended(self)
      else
        mark_dead(self, stream_failure(rerr))
        return nil, "broken"
      end
    end
  end)
  if box then self._mux:close(box) end
  self._lock:release()
  if not ok then error(res, 0) end
  return res, why
end

---------------------------------------------------------------------------
-- Lifecycle
---------------------------------------------------------------------------

local function cancel_lease(self)
  local t = self._lease_task
  self._lease_task = nil
  if t and not t:done() and loop.current() ~= t then t:cancel() end
end

local function arm_lease(self, seconds)
  cancel_lease(self)
  if not seconds then return end
  self._lease_seconds = seconds
  local task
  task = loop.spawn(function()
    loop.sleep(seconds)
    if self._lease_task ~= task then return end
    self._lease_task = nil
    self._lease_expired = task -- a call that ends because of it waits for this teardown
    local ok, err = pcall(self.terminate, self)
    if not ok then
      require("glsb.log").error("local: terminating the sandbox at lease expiry failed: " .. tostring(err),
        { sandbox_id = self.sandbox_id })
    end
  end)
  self._lease_task = task
end

local function python_of(opts)
  local py = opts.python or "/usr/bin/python3"
  if not exists(py) then
    error(start_error("local: python not found at " .. py .. " (set opts.python to the host's python3)"), 0)
  end
  return py
end

local function resolve_template(opts)
  if opts.template == nil then return nil end
  local tmpl = require "glsb.providers.local.template"
  local dir, err = tmpl.resolve(opts.template, opts)
  if not dir then error(start_error(err), 0) end
  return dir
end

-- A start that failed because memory_mb is too small for the interpreter: Python dies of SIGSEGV or
-- SIGABRT, or raises MemoryError, when RLIMIT_DATA / the cgroup limit is below what it needs to start
-- (about 10-20 MB, more with a template's packages). -> a message, or nil when that is not the cause.
local function too_little_memory(self, opts)
  if opts.memory_mb == nil then return nil end
  local e = program_end(self)
  local crashed = e and (e.oom or (e.signal and (e.signal == 6 or e.signal == 7 or e.signal == 9 or e.signal == 11)))
  local memerr = e and e.code and e.code ~= 0 and self._stderr_tail:find("MemoryError", 1, true)
  if not (crashed or memerr) then return nil end
  return string.format("local: memory_mb = %s is too low to start the interpreter (%s while starting); "
    .. "give the sandbox more memory (the default is 1024)", tostring(opts.memory_mb),
    crashed and (e.oom and "the OOM killer killed it" or ("it was killed by " .. e.name)) or "MemoryError")
end

function Sandbox:_init(opts)
  sandbox.CodeInterpreterSandbox._init(self, opts)
  self._stderr_tail = ""
  self._next_id = 0
  self._lock = loop.lock()   -- one foreground request at a time (the agent runs one)
  self._wlock = loop.lock()  -- one frame at a time on the agent's stdin (background requests go at once)
  self._background = {}      -- id -> the handle of a running start_command
  self._grace = opts.interrupt_grace or M.DEFAULT_INTERRUPT_GRACE
end

function Sandbox:_start(opts)
  local helper, herr = M.find_helper(opts.confine)
  if not helper then error(start_error(herr), 0) end
  local python = python_of(opts)
  if self.language == "javascript" and not M.find_in_sandbox_path("node") then
    error(start_error("local: language 'javascript' needs node, which is not installed on this machine"), 0)
  end
  local template_dir = resolve_template(opts)
  -- what sandboxes of killed owners left in this root goes first (once per process and root)
  local host_dir = host_workspace_dir(opts)
  reaper.sweep_once(host_dir)
  local base, merr = core.mkdtemp(host_dir .. "/glsb-local-")
  if not base then error(start_error("local: cannot create the workspace: " .. tostring(merr)), 0) end
  -- the workspace is the mkdtemp directory itself, so the supervisor's
  -- --cleanup (also on owner death: it gets SIGHUP) removes all of it
  self._base = base
  self.workspace = base
  self.sandbox_id = "local-" .. base:match("([^/]+)$"):gsub("^glsb%-local%-", "")

  local env = { PYTHONDONTWRITEBYTECODE = "1", PYTHONUNBUFFERED = "1" }
  -- the agent's files one by one, not its directory: small files bound read-only are copied in, so
  -- /proc/self/mountinfo inside names no host path of ours (a directory bind would show it)
  local dir = M.agent_dir()
  local ro = { { dir .. "/boot.py", M.AGENT_DIR .. "/boot.py" }, { dir .. "/agent.py", M.AGENT_DIR .. "/agent.py" },
    { helper, M.HELPER_PATH } }
  if template_dir then
    ro[#ro + 1] = { template_dir, M.TEMPLATE_DIR }
    local tmeta = require("glsb.providers.local.template").read_meta(template_dir)
    for k, v in pairs(tmeta and tmeta.env or {}) do env[k] = v end
    if tmeta and tmeta.workdir then env.GLSB_WORKDIR = tmeta.workdir end
    self.template_id = tmeta and tmeta.id
  end
  if opts.pip_find_links then
    ro[#ro + 1] = { opts.pip_find_links, M.FIND_LINKS_DIR }
  end
  for _, b in ipairs(opts.ro_binds or {}) do ro[#ro + 1] = b end
  local pyc = M.agent_bytecode(python, require("glsb.providers.local.template").cache_dir(opts))
  if pyc then ro[#ro + 1] = { pyc, M.AGENT_BYTECODE } end
  if opts.env then
    for k, v in pairs(opts.env) do env[k] = tostring(v) end
  end
  local argv, config = M.confine_argv {
    helper = helper, workspace = self.workspace,
    program = { python, "-B", M.AGENT_DIR .. "/boot.py" },
    ro_binds = ro, env = env, opts = opts, control = true,
  }
  -- setsid: a session of its own, so a Ctrl-C at the owner's terminal (SIGINT to the terminal's
  -- foreground process group) does not reach the supervisor; it still dies with its owner
  -- (PR_SET_PDEATHSIG, which glsb-confine sets itself).
  local p, serr = process.spawn { argv = argv, stdin = "pipe", stdout = "pipe", stderr = "pipe", fd3 = "socket",
    setsid = true }
  if not p then error(start_error("local: cannot start glsb-confine: " .. tostring(serr)), 0) end
  self._proc = p
  reaper.record(base, { supervisor = p.pid })
  self._chan = channel.new(p, function() drain_stderr(self) end)
  self._control = control.new(p)
  self._guard = M.guard(p, base)

  local deadline = loop.now() + (opts.start_timeout or M.DEFAULT_START_TIMEOUT)
  -- the options first on the agent's stdin (--config-fd 0), the protocol after them
  local sent, werr = self._chan:write(config, deadline)
  local ev, err
  if sent then ev, err = read_event(self, deadline) else err = werr == "timeout" and "timeout" or "eof" end
  if not ev or ev.ev ~= "ready" then
    if err == "eof" then p:wait(loop.now() + 2) end
    local report = self._control:read_report(loop.now() + 2)
    local msg
    local stage = Stage.HEALTH_CHECK
    if report and report.ok == false then
      stage = Stage.CREATE -- the confinement could not be set up: fail closed
      msg = "local: glsb-confine could not set up the sandbox: " .. tostring(report.error)
      if type(report.missing) == "table" and #report.missing > 0 then
        msg = msg .. " (missing: " .. table.concat(report.missing, ", ")
          .. "; pass allow_degraded = true to accept less)"
      end
    elseif err == "timeout" then
      msg = string.format("local: the sandbox agent did not answer within %gs",
        opts.start_timeout or M.DEFAULT_START_TIMEOUT)
    else
      msg = "local: the sandbox agent did not start: "
        .. tostring(err or ("unexpected event " .. tostring(ev and ev.ev)))
      local d = describe_exit(self)
      if d ~= "" then msg = msg .. " (" .. d .. ")" end
      local low = too_little_memory(self, opts)
      if low then msg = low .. " [" .. msg .. "]" end
    end
    -- the helper's own failure report is the cause; a set-up that went fine explains nothing
    error(start_error(msg, report and report.ok == false and report or nil, stage), 0)
  end
  local report = self._control:read_report(loop.now() + 2)
  self.confinement = report and report.applied or nil
  if self.confinement and self.confinement.cgroup_dirs then
    reaper.record(base, { supervisor = p.pid, cgroup_dirs = self.confinement.cgroup_dirs })
  end
  self.missing = report and report.missing or {}
  self.host_pid = report and math.tointeger(report.pid) or nil
  self._opts = opts
  -- from now on several tasks may wait for events of the agent (background commands): mux.lua
  self._mux = mux.new(self._chan)
  arm_lease(self, opts.timeout)
end

-- Stops the supervisor: close the agent's stdin (the agent exits, the
-- supervisor cleans up), then SIGHUP (the supervisor kills the sandbox and
-- cleans up), then SIGKILL (nothing cleaned: terminate removes the workspace;
-- the next sandbox collects the empty cgroup leaf).
local function stop_process(self, deadline)
  local p = self._proc
  if not p then return true end
  local function waited(secs)
    local st = p:wait(math.min(deadline, loop.now() + secs))
    return st ~= nil
  end
  if p.proc:fd("stdin") then p:close_stdin() end
  if waited(2) then return true end
  p:kill("HUP")
  if waited(2) then return true end
  p:kill("KILL")
  return waited(2)
end

-- _alive() -> false once the sandbox was marked dead or its supervisor has exited, else true. Cheap (a
-- non-blocking waitid on the supervisor's pidfd): glsb.pool asks it before handing out a warm sandbox.
function Sandbox:_alive()
  if self._dead or not self._proc then return false end
  return self._proc.proc:poll() == nil
end

function Sandbox:_terminate(opts)
  cancel_lease(self)
  self._terminating = true
  local deadline = loop.now() + (opts and opts.timeout or 10)
  if self._proc then
    if not stop_process(self, deadline) then
      error("local: the sandbox supervisor (pid " .. tostring(self._proc.pid) .. ") did not exit", 0)
    end
    if self._guard then self._guard.done = true end
    -- background commands ended with the sandbox: their handles say so (a pump still waiting on the
    -- stream would wait on a closed descriptor)
    if self._mux then self._mux:fail("eof") end
    for _, h in pairs(self._background) do h:_stop() end
    self._proc:close()
    self._proc = nil
  end
  if self._base then
    -- normally gone already (--cleanup); not when the supervisor was killed
    local ok, err = core.rmtree(self._base)
    if not ok then error("local: cannot remove the workspace " .. self._base .. ": " .. tostring(err), 0) end
    self._base = nil
  end
  if not self._dead then self._dead = "terminated" end
end

-- M.guard(process, workspace) -> a finalizable object that stops the
-- sandbox if its handle is garbage collected (or the Lua state is closed at
-- exit) while it still runs. It is created after the process objects, so Lua
-- runs its finalizer before theirs (reverse order of marking). Nothing can
-- wait for the loop here: SIGHUP (the supervisor kills the sandbox and cleans
-- up), a short busy wait for it to finish, then close (SIGKILL if needed) and
-- remove what is left.
function M.guard(p, workspace)
  return setmetatable({}, { __gc = function(g)
    if g.done then return end
    pcall(function()
      if not p.proc:poll() then
        p:kill("HUP")
        local t = os.clock()
        while not p.proc:poll() and os.clock() - t < 0.5 do end
      end
      p:close()
    end)
    pcall(core.rmtree, workspace)
  end })
end

---------------------------------------------------------------------------
-- Results
---------------------------------------------------------------------------

-- Output of one call (glsb.output: per-line callbacks, the cap, the note). Frames of a stream already
-- at the cap are dropped unread (keep), so what the host holds stays bounded whatever the sandbox sends.
local STREAMS = { "stdout", "stderr" }

local function collector(opts)
  local out = output.capture(opts)
  local sizes = { 0, 0 }
  local c = { out = out }
  c.keep = function(ev, n)
    if ev.ev ~= "out" then return true end
    local s = ev.s == 2 and 2 or 1
    if sizes[s] >= out.cap then
      out:dropped(STREAMS[s], n)
      return false
    end
    return true
  end
  c.on_event = function(ev)
    if ev.ev ~= "out" or not ev.data then return end
    local s = ev.s == 2 and 2 or 1
    sizes[s] = sizes[s] + #ev.data
    out:push(STREAMS[s], ev.data)
  end
  -- -> the result's fields, with the agent's own drops noted
  c.finish = function(done, fields)
    if done then
      out:dropped("stdout", tonumber(done.dropped_stdout))
      out:dropped("stderr", tonumber(done.dropped_stderr))
    end
    return out:finish(fields)
  end
  return c
end

-- Whole output of a helper run, kept up to cap bytes per stream (no callbacks, no note).
local function accumulator(cap)
  local a = { parts = { {}, {} }, sizes = { 0, 0 }, truncated = { false, false } }
  a.keep = function(ev, n)
    if ev.ev ~= "out" then return true end
    local s = ev.s == 2 and 2 or 1
    if a.sizes[s] + n > cap then
      a.truncated[s] = true
      return false
    end
    a.sizes[s] = a.sizes[s] + n
    return true
  end
  a.on_event = function(ev)
    if ev.ev == "out" and ev.data then
      local parts = a.parts[ev.s == 2 and 2 or 1]
      parts[#parts + 1] = ev.data
    end
  end
  return a
end

local function finish(c, done, fields)
  return models.ExecutionResult.new(c.finish(done, fields))
end

-- The result of a call that got no "done" (see request for the reasons).
local function dead_result(self, c, what, timeout, reason)
  if reason == "unusable" then
    -- provably never sent: a known outcome
    return finish(c, nil, { status = Status.ERROR, error = what .. ": " .. unusable(self),
      failure = { exception_type = "SandboxNotInitializedError", retry_safe = true } })
  end
  if reason == "busy" then
    return finish(c, nil, { status = Status.TIMEOUT,
      error = string.format("%s: timed out after %gs waiting for another call on this sandbox to end "
        .. "(nothing was sent)", what, timeout or 0),
      failure = { exception_type = "Timeout", retry_safe = true } })
  end
  if reason == "lease" then
    -- The call saw the agent go away while the lease's terminate is still finishing: let it finish,
    -- so that the caller finds the sandbox terminated, as the message says.
    local lease = self._lease_expired
    if lease ~= loop.current() then pcall(lease.wait, lease) end
    return finish(c, nil, { status = Status.TIMEOUT, error = string.format(
      "%s: the sandbox lease expired during the call (after %gs) and the sandbox was terminated",
      what, self._lease_seconds or 0) })
  end
  if reason == "exited" then
    -- the interpreter (the sandbox's program) ended by itself: the code ran and ended it, or crashed it
    -- The sandbox is gone: the GONE marker makes the base end the handle (is_running() false, later
    -- calls raise SandboxNotInitializedError), as on every provider.
    local e = self._end or {}
    local r = finish(c, nil, { status = Status.ERROR, code = e.code,
      error = string.format("%s: %s", what, self._dead or "the sandbox ended") .. " (create a new one)",
      failure = { exception_type = outcome.GONE, retry_safe = false } })
    r.error_name = "SandboxExited"
    return r
  end
  local why = self._dead or "the sandbox is not running"
  if reason == "killed" and timeout then
    return finish(c, nil, { status = Status.TIMEOUT,
      error = string.format("%s: timed out after %gs: %s", what, timeout, why),
      failure = { exception_type = outcome.GONE, retry_safe = false } })
  end
  -- broken: the request may have been delivered and the outcome is unknown
  return finish(c, nil, { status = Status.UNKNOWN, error = what .. ": " .. why,
    failure = { exception_type = "ProtocolError", retry_safe = false } })
end

local function int(v)
  if type(v) ~= "number" then return nil end
  return math.tointeger(v) or v
end

function Sandbox:_run_code(code, opts)
  local c = collector(opts)
  local started = loop.now()
  local deadline = opts.timeout and started + opts.timeout or nil
  local done, why = request(self, {
    op = "exec", code = code, lang = opts.language or self.language, env = opts.env,
  }, { deadline = deadline, on_event = c.on_event, keep = c.keep, interrupt = true })
  if not done then return dead_result(self, c, "execute_code", opts.timeout, why) end
  if done.timeout then
    return finish(c, done, { status = Status.TIMEOUT, code = int(done.exit_code),
      error = string.format("execute_code: timed out after %gs (interrupted; the sandbox is still usable)",
        opts.timeout or 0) })
  end
  if done.ok then
    return finish(c, done, { status = Status.SUCCESS, code = int(done.exit_code), text = done.text })
  end
  local err
  if done.name then
    err = (done.traceback and done.traceback ~= "") and done.traceback:gsub("\n$", "")
      or (tostring(done.name) .. ": " .. tostring(done.value))
  else
    err = string.format("exited with code %s", tostring(int(done.exit_code)))
  end
  local r = finish(c, done, { status = Status.ERROR, code = int(done.exit_code), error = err })
  r.error_name, r.error_value, r.traceback = done.name, done.value, done.traceback
  return r
end

-- The result of a command's "done" (execute_command, start_command).
local function command_result(c, done, what, timeout)
  if done.timeout then
    return finish(c, done, { status = Status.TIMEOUT, code = int(done.exit_code),
      error = string.format("%s: timed out after %gs (process group killed)", what, timeout or 0) })
  end
  if done.name then
    return finish(c, done, { status = Status.ERROR, code = int(done.exit_code),
      error = tostring(done.name) .. ": " .. tostring(done.value) })
  end
  local code = int(done.exit_code)
  local sig = int(done.signal)
  local err
  if sig then
    err = "command ended by signal: " .. (SIGNAL_NAMES[sig] or ("signal " .. sig))
  elseif code ~= 0 then
    err = "command exited with code " .. tostring(code)
  end
  return finish(c, done, { status = code == 0 and Status.SUCCESS or Status.ERROR, code = code, error = err })
end

function Sandbox:_run_command(cmd, opts)
  local c = collector(opts)
  local started = loop.now()
  -- the agent enforces the timeout (process group kill); the host waits a
  -- grace period more, then interrupts, then kills the sandbox
  local deadline = opts.timeout and started + opts.timeout + self._grace or nil
  local done, why = request(self, {
    op = "cmd", cmd = cmd, env = opts.env, cwd = opts.cwd, timeout = opts.timeout,
  }, { deadline = deadline, on_event = c.on_event, keep = c.keep, interrupt = true })
  if not done then return dead_result(self, c, "execute_command", opts.timeout, why) end
  local r = command_result(c, done, "execute_command", opts.timeout)
  if r.code == 137 and r.status == Status.ERROR and self:_oom_killed() then
    r.error = string.format("command was killed by the kernel's OOM killer: the sandbox ran out of memory "
      .. "(memory_mb = %s)", tostring(self._opts and self._opts.memory_mb or 1024))
  end
  return r
end

-- Did the kernel's OOM killer kill in the sandbox since the last time we asked? (the supervisor's
-- count for its memory cgroup: the control channel's stats; CONTROL.md). Asked only when a command
-- died of SIGKILL, so the count seen last says which kills are new.
function Sandbox:_oom_killed()
  local st = self._control and self._control:stats(loop.now() + 2)
  local n = st and st.oom_kills
  if not n then return false end
  local new = n > (self._oom_seen or 0)
  self._oom_seen = n
  return new
end

---------------------------------------------------------------------------
-- Background commands (start_command)
---------------------------------------------------------------------------

-- The agent starts a background command at once (op "spawn", handled by its reader thread whatever
-- else runs; PROTOCOL.md) and sends its events on the same stream as every request, with the
-- command's id: a task per command (its pump) waits for them through the mux, which hands each
-- waiter its own. Output streams to on_stdout / on_stderr as it arrives and is kept up to the cap,
-- like execute_command's. The agent kills the command's process group at its timeout; kill() sends
-- SIGKILL to the group (op "kill", also handled at once). A background command ends with its sandbox.
local Background = {}
Background.__index = Background

function Background:pid() return self._pid end
function Background:output() return self.c.out:text("stdout"), self.c.out:text("stderr") end
function Background:done() return self.task:done() end
function Background:wait(timeout) return self.task:wait(timeout) end

-- kill() -> true when the signal was sent to a command still running, false when it had ended.
function Background:kill()
  local sb = self.sb
  if self.task:done() or unusable(sb) then return false end
  local sent = send(sb, { op = "kill", id = self.id, signal = 9 }, loop.now() + 5)
  return sent == true
end

-- The sandbox ended under the command (terminate, the lease, the interpreter died).
function Background:_gone(why)
  local sb = self.sb
  local msg
  if sb._lease_expired then
    msg = "the sandbox lease expired and the sandbox was terminated"
  elseif sb._terminating then
    msg = "the sandbox was terminated"
  else
    if why == "eof" then ended(sb) elseif not sb._dead then mark_dead(sb, stream_failure(why)) end
    msg = sb._dead or "the sandbox ended"
  end
  return finish(self.c, nil, { status = Status.ERROR,
    error = "start_command: " .. msg .. " (the command ended with it)",
    failure = { exception_type = outcome.GONE, retry_safe = false } })
end

function Background:_pump()
  local sb = self.sb
  while true do
    local ok, ev, why = pcall(sb._mux.next, sb._mux, self.box, nil)
    if not ok then
      if loop.is_cancelled(ev) then return self:_gone("eof") end
      error(ev, 0)
    end
    if not ev then return self:_gone(why) end
    if ev.ev == "started" then
      self._pid = int(ev.pid)
    elseif ev.ev == "done" then
      return command_result(self.c, ev, "start_command", self.timeout)
    else
      self.c.on_event(ev)
    end
  end
end

-- Ends the pump (terminate): it reports the sandbox gone.
function Background:_stop()
  if not self.task:done() then self.task:cancel() end
end

function Sandbox:_start_command(cmd, opts)
  local why = unusable(self)
  if why then error("start_command: " .. why, 0) end
  self._next_id = self._next_id + 1
  local id = self._next_id
  local c = collector(opts)
  local h = setmetatable({ sb = self, id = id, c = c, timeout = opts.timeout }, Background)
  h.box = self._mux:open(id, c.keep)
  local sent, err = send(self, { op = "spawn", id = id, cmd = cmd, env = opts.env, cwd = opts.cwd,
    timeout = opts.timeout }, loop.now() + 10)
  if not sent then
    self._mux:close(h.box)
    if err == "busy" then error("start_command: timed out waiting to send the request (nothing was sent)", 0) end
    mark_dead(self, "the agent did not take the start_command request: " .. tostring(err))
    error("start_command: " .. self._dead, 0)
  end
  self._background[id] = h
  h.task = loop.spawn(function()
    local ok, r = pcall(h._pump, h)
    self._mux:close(h.box)
    self._background[id] = nil
    if not ok then error(r, 0) end
    return r
  end)
  return h
end

---------------------------------------------------------------------------
-- Ports
---------------------------------------------------------------------------

-- get_host(port): with network = true the sandbox shares the host's network namespace (glsb-confine
-- --network: "network": "host" in the report), so a server listening inside on 127.0.0.1 or 0.0.0.0 is
-- reached from the host at 127.0.0.1:port. Without it the sandbox has a network namespace of its own
-- with only a loopback: nothing outside reaches its ports, and nothing maps them out.
function Sandbox:_get_host(port)
  if self._opts and self._opts.network then return "127.0.0.1:" .. port end
  errors.raise(errors.SandboxExecutionError, Stage.EXECUTE, "get_host: provider 'local' exposes no ports: "
    .. "the sandbox has a network namespace of its own (loopback only, nothing maps its ports out); create it "
    .. "with network = true to share the host's network, where 127.0.0.1:<port> reaches it")
end

-- Uploads, downloads and the workspace helper go through glsb-confine's control channel (control.lua):
-- the supervisor runs `glsb-confine write|read|run` in a confined child the code in the sandbox cannot
-- reach, so their results and byte counts cannot be forged by replacing the agent's handlers.

-- Why a control call failed, for the errors of uploads, downloads and helper runs.
local function control_failure(self, why, timeout)
  if why == "busy" then
    return string.format("timed out after %gs waiting for another transfer on this sandbox to end", timeout or 0)
  end
  if self._lease_expired then return "the sandbox lease expired and the sandbox was terminated" end
  if why == "gone" then return self._dead or "the sandbox has ended" end
  if why == "broken" then
    local msg = "the control channel broke: " .. tostring(self._control.broken)
    mark_dead(self, msg)
    return msg
  end
  return self._dead or unusable(self) or tostring(why)
end

-- The writable root a sandbox path is in, and the path below it (relative paths: below /home/user).
-- -> root, rel | nil, message
local WRITABLE_ROOTS = { "/home/user", "/files", "/tmp" }

local function split_root(path)
  if path:sub(1, 1) ~= "/" then return "/home/user", path end
  for _, root in ipairs(WRITABLE_ROOTS) do
    if path:sub(1, #root + 1) == root .. "/" and #path > #root + 1 then return root, path:sub(#root + 2) end
  end
  return nil, "not below /home/user, /files or /tmp: " .. path
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- The helper's one JSON line at the start of a call's stdout -> doc, the bytes after it.
local function helper_answer(stdout)
  local nl = stdout:find("\n", 1, true)
  local doc = cjson.decode(nl and stdout:sub(1, nl - 1) or stdout)
  if type(doc) ~= "table" then return nil end
  return doc, nl and stdout:sub(nl + 1) or ""
end

-- The same from a call's stdout pieces (control:call with opts.parts): the bytes after the line are
-- joined once, never copied again to cut the line off.
local function helper_answer_parts(parts)
  local head, i = {}, 1
  while i <= #parts do
    local nl = parts[i]:find("\n", 1, true)
    if nl then
      head[#head + 1] = parts[i]:sub(1, nl - 1)
      local rest = { parts[i]:sub(nl + 1) }
      table.move(parts, i + 1, #parts, 2, rest)
      local doc = cjson.decode(table.concat(head))
      if type(doc) ~= "table" then return nil end
      return doc, #rest == 1 and rest[1] or table.concat(rest)
    end
    head[#head + 1] = parts[i]
    i = i + 1
  end
  local doc = cjson.decode(table.concat(head))
  if type(doc) ~= "table" then return nil end
  return doc, ""
end

local function helper_refusal(doc, r)
  if doc then return tostring(doc.error) .. ": " .. tostring(doc.message) end
  if r.error then return tostring(r.error) .. ": " .. tostring(r.message) end
  return string.format("the helper gave no answer (exit %s, signal %s): %s", tostring(r.code), tostring(r.signal),
    r.stderr:sub(1, 300))
end

-- opts.timeout bounds the whole upload (the call is cancelled then).
function Sandbox:_upload(files, opts)
  local deadline = opts.timeout and loop.now() + opts.timeout or nil
  for _, f in ipairs(files) do
    local root, rel = split_root(f.path)
    if not root then error("upload of " .. f.path .. " failed: " .. rel, 0) end
    local r, why = self._control:call({ "write", "--root", root, "--path-hex", hex(rel),
      "--max-bytes", tostring(#f.data) }, f.data, { deadline = deadline, max_stdout = 64 * 1024 })
    if not r then error("upload of " .. f.path .. " failed: " .. control_failure(self, why, opts.timeout), 0) end
    local doc = helper_answer(r.stdout)
    if r.cancelled then error(string.format("upload of %s: timed out after %gs", f.path, opts.timeout or 0), 0) end
    if not doc or doc.ok ~= true then error("upload of " .. f.path .. " failed: " .. helper_refusal(doc, r), 0) end
    if math.tointeger(doc.bytes) ~= #f.data then
      error(string.format("upload of %s: %s bytes written of %d", f.path, tostring(doc.bytes), #f.data), 0)
    end
  end
end

-- Downloads: `glsb-confine read` prints {"ok":true,"bytes":N} and the N bytes; the host keeps at most
-- max_download_bytes (and the answer's line) whatever arrives.
function Sandbox:_download(path, opts)
  local deadline = opts.timeout and loop.now() + opts.timeout or nil
  local max = (self._opts and self._opts.max_download_bytes) or M.DEFAULT_MAX_DOWNLOAD
  local root, rel = split_root(path)
  if not root then error("download of " .. path .. ": " .. rel, 0) end
  local r, why = self._control:call({ "read", "--root", root, "--path-hex", hex(rel), "--max-bytes", tostring(max) },
    nil, { deadline = deadline, max_stdout = max + 4096, parts = true })
  if not r then error("download of " .. path .. " failed: " .. control_failure(self, why, opts.timeout), 0) end
  if r.cancelled then error(string.format("download of %s: timed out after %gs", path, opts.timeout or 0), 0) end
  if r.stdout_over then error(string.format("download of %s: larger than max_download_bytes = %d", path, max), 0) end
  local doc, data = helper_answer_parts(r.stdout_parts)
  if not doc or doc.ok ~= true then error("download of " .. path .. ": " .. helper_refusal(doc, r), 0) end
  -- the helper announces the file's size, then streams it: a file that shrank meanwhile arrives short
  -- and the helper exits 1 (src/confine/ws_read.c)
  if math.tointeger(doc.bytes) ~= #data or r.code ~= 0 then
    error(string.format("download of %s: %d bytes arrived of %s (exit %s: %s)", path, #data, tostring(doc.bytes),
      tostring(r.code), r.stderr:sub(1, 300)), 0)
  end
  return data
end

---------------------------------------------------------------------------
-- sb.files (glsb.files hooks), on the control channel too
---------------------------------------------------------------------------

-- Like uploads and downloads, sb.files never goes through the agent: what it reports comes from
-- glsb-confine's helper in the supervisor's confined child, which the code in the sandbox cannot
-- reach. write and read are the helper's own write / read (read follows symlinks, but only within
-- the sandbox's root: RESOLVE_IN_ROOT); list, exists, make_dir and remove run one exact argv of the
-- sandbox's coreutils through `glsb-confine run` (no shell, an empty environment: the C locale's
-- messages, absolute program paths). The code can change its files, as it may, but not what these
-- calls say about them.

-- Runs argv through the helper's `run`. -> {code, signal, stdout, stderr} (the program's), or raises.
local function helper_run(self, what, argv, timeout, max_out)
  max_out = max_out or 1024 * 1024
  local args = { "run", "--root", "/home/user", "--timeout", tostring(timeout or 0), "--max-output",
    tostring(max_out), "--" }
  for _, a in ipairs(argv) do args[#args + 1] = a end
  -- the helper's own timeout ends the program; the channel's deadline is a backstop past it
  local r, why = self._control:call(args, nil, { deadline = timeout and loop.now() + timeout + 5 or nil,
    max_stdout = 2 * max_out + 64 * 1024 })
  if not r then error(what .. ": " .. control_failure(self, why, timeout), 0) end
  if r.cancelled then error(string.format("%s: timed out after %gs", what, timeout or 0), 0) end
  local doc = helper_answer(r.stdout)
  if not doc or doc.ok ~= true then error(what .. ": " .. helper_refusal(doc, r), 0) end
  if doc.timed_out then error(string.format("%s: timed out after %gs", what, timeout or 0), 0) end
  if doc.stdout_truncated then error(string.format("%s: the answer is larger than %d bytes", what, max_out), 0) end
  return { code = math.tointeger(doc.exit_code), signal = math.tointeger(doc.signal),
    stdout = core.b64decode(doc.stdout or "") or "", stderr = core.b64decode(doc.stderr or "") or "" }
end

-- A failed coreutils run -> the error files.lua reports (reason = "not_found" when the path is missing).
local function run_failure(what, r)
  local msg = r.stderr:gsub("%s+$", "")
  if msg == "" then msg = r.signal and ("killed by signal " .. r.signal) or ("exit code " .. tostring(r.code)) end
  return { message = what .. ": " .. msg,
    reason = msg:find("No such file or directory", 1, true) and "not_found" or nil }
end

function Sandbox:_files_write(path, data, opts)
  self:_upload({ { path = path, data = data } }, { timeout = opts.timeout })
end

function Sandbox:_files_read(path, opts)
  local deadline = opts.timeout and loop.now() + opts.timeout or nil
  local max = (self._opts and self._opts.max_download_bytes) or M.DEFAULT_MAX_DOWNLOAD
  local r, why = self._control:call({ "read", "--root", "/", "--follow", "--path-hex", hex(path:gsub("^/+", "")),
    "--max-bytes", tostring(max) }, nil, { deadline = deadline, max_stdout = max + 4096, parts = true })
  if not r then error("read: " .. control_failure(self, why, opts.timeout), 0) end
  if r.cancelled then error(string.format("read: timed out after %gs", opts.timeout or 0), 0) end
  if r.stdout_over then error(string.format("read: larger than max_download_bytes = %d", max), 0) end
  local doc, data = helper_answer_parts(r.stdout_parts)
  if doc and doc.ok == false and doc.error == "not_found" then
    error({ message = "read: no such file: " .. path, reason = "not_found" }, 0)
  end
  if not doc or doc.ok ~= true then error("read: " .. helper_refusal(doc, r), 0) end
  if math.tointeger(doc.bytes) ~= #data or r.code ~= 0 then
    error(string.format("read: %d bytes arrived of %s (exit %s: %s)", #data, tostring(doc.bytes), tostring(r.code),
      r.stderr:sub(1, 300)), 0)
  end
  return data
end

local FILE_TYPES = { f = "file", d = "dir", l = "symlink" }

-- GNU find, NUL-ended records (any name survives): depth, type, size, path. The path itself comes
-- first (depth 0; -H: followed when it is a symlink) and must be a directory.
function Sandbox:_files_list(path, opts)
  local r = helper_run(self, "list", { "/usr/bin/find", "-H", path, "-maxdepth", "1",
    "-printf", "%d\\t%y\\t%s\\t%p\\0" }, opts.timeout, 16 * 1024 * 1024)
  if r.code ~= 0 then error(run_failure("list", r), 0) end
  local entries, top = {}, nil
  for depth, t, size, full in r.stdout:gmatch("(%d)\t(%a)\t(%d+)\t([^%z]*)%z") do
    if depth == "0" then
      top = t
    else
      entries[#entries + 1] = { name = full:match("[^/]+$"), path = full, type = FILE_TYPES[t] or "other",
        size = math.tointeger(tonumber(size)) }
    end
  end
  if top ~= "d" then error({ message = "list: not a directory: " .. path }, 0) end
  table.sort(entries, function(a, b) return a.path < b.path end)
  return entries
end

function Sandbox:_files_exists(path, opts)
  local r = helper_run(self, "exists", { "/usr/bin/test", "-e", path }, opts.timeout)
  if r.code == 0 then return true end
  if r.code == 1 then return false end
  error(run_failure("exists", r), 0)
end

-- mkdir -v names each directory it created: nothing printed means the path was a directory already.
function Sandbox:_files_make_dir(path, opts)
  local r = helper_run(self, "make_dir", { "/usr/bin/mkdir", "-p", "-v", "--", path }, opts.timeout)
  if r.code ~= 0 then error(run_failure("make_dir", r), 0) end
  return r.stdout ~= ""
end

function Sandbox:_files_remove(path, opts)
  local r = helper_run(self, "remove", { "/usr/bin/rm", "-rf", "--", path }, opts.timeout)
  if r.code ~= 0 then error(run_failure("remove", r), 0) end
end

function Sandbox:_set_timeout(seconds)
  local why = unusable(self)
  if why then error("set_timeout: " .. why, 0) end
  arm_lease(self, seconds)
end

-- glsb.workspace hooks: the helper's argv (its path, then write|run ...) goes to the control channel,
-- which runs it in the supervisor's confined child; any other argv runs exactly (no shell) through the
-- agent. Relative workspace paths land in the sandbox user's home (not opts.host_workspace_dir, which
-- is where the host keeps sandbox workspaces).
Sandbox.workspace_root = "/home/user"

function Sandbox:_workspace_helper()
  return M.HELPER_PATH
end

-- opts: stdin (bytes), timeout (seconds for the whole call: the helper is cancelled then), max_output
-- (bytes of the answer kept per stream; default OUTPUT_CAP: past it output is dropped and
-- stdout_truncated / stderr_truncated set).
function Sandbox:_exec_argv(argv, opts)
  opts = opts or {}
  local timeout = opts.timeout
  local cap = opts.max_output or M.OUTPUT_CAP
  if argv[1] == M.HELPER_PATH and (argv[2] == "write" or argv[2] == "run") then
    local args = table.move(argv, 2, #argv, 1, {})
    local r, why = self._control:call(args, opts.stdin, {
      deadline = timeout and loop.now() + timeout or nil, max_stdout = cap })
    if not r then error("local: the workspace helper failed: " .. control_failure(self, why, timeout), 0) end
    if r.error then
      error("local: the workspace helper could not run: " .. r.error .. ": " .. tostring(r.message), 0)
    end
    return {
      exit_code = r.code or (r.signal and 128 + r.signal), timed_out = r.cancelled,
      stdout = r.stdout, stderr = r.stderr, stdout_truncated = r.stdout_over or nil,
    }
  end
  local deadline = timeout and loop.now() + timeout + self._grace or nil
  local a = accumulator(cap)
  local done, why = request(self, { op = "argv", argv = argv, timeout = timeout, max_out = cap }, {
    deadline = deadline, interrupt = true, payload = opts.stdin ~= "" and opts.stdin or nil,
    keep = a.keep, on_event = a.on_event,
  })
  if not done then
    error("local: running " .. tostring(argv[1]) .. " failed: " .. control_failure(self, why, timeout), 0)
  end
  if done.name then error("local: cannot run " .. tostring(argv[1]) .. ": " .. tostring(done.value), 0) end
  local t1 = a.truncated[1] or (tonumber(done.dropped_stdout) or 0) > 0
  local t2 = a.truncated[2] or (tonumber(done.dropped_stderr) or 0) > 0
  return {
    exit_code = int(done.exit_code), timed_out = done.timeout == true,
    stdout = table.concat(a.parts[1]), stderr = table.concat(a.parts[2]),
    stdout_truncated = t1 or nil, stderr_truncated = t2 or nil,
  }
end

-- additional_packages: pip --user inside the sandbox, through the command channel.
function Sandbox:_install_packages(pkgs, opts)
  local o = self._opts or {}
  local words = { M.python_in_sandbox(o), "-m", "pip", "install", "--user", "--break-system-packages",
    "--disable-pip-version-check", "--no-input", "--no-warn-script-location", "--no-cache-dir",
    "--quiet", "--retries", "0", "--timeout", "15" }
  if o.pip_find_links then
    words[#words + 1] = "--find-links" words[#words + 1] = M.FIND_LINKS_DIR
    if not o.pip_index_url then words[#words + 1] = "--no-index" end
  end
  if o.pip_index_url then words[#words + 1] = "--index-url" words[#words + 1] = o.pip_index_url end
  for _, p in ipairs(pkgs) do words[#words + 1] = p end
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = packages.shell_quote(w) end
  local r = self:_run_command(table.concat(quoted, " ") .. " 2>&1", { timeout = opts.timeout })
  if r.status == Status.SUCCESS then
    -- the kernel's import system must see the new user site-packages
    self:_run_code("import importlib, site; site.addsitedir(site.getusersitepackages()); importlib.invalidate_caches()",
      { timeout = 30, language = "python" })
  end
  return r
end

function M.python_in_sandbox(opts)
  return (opts and opts.python) or "/usr/bin/python3"
end

---------------------------------------------------------------------------
-- Templates
---------------------------------------------------------------------------

return registry.lazy_template(M, "glsb.providers.local.template")
