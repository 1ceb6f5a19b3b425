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
--   M.agent_bytecode). The helper is not in the sandbox: workspace primitives
--   name it by M.HELPER_PATH and run on the control channel. Every
--   option reaches glsb-confine on its stdin (--config-fd 0), none in argv.
--   The workspace is <host_workspace_dir>/glsb-<uid>/glsb-local-XXXXXX on the host
--   (home -> /home/user, files -> /files); --cleanup makes the supervisor
--   remove it when the sandbox ends, and terminate removes whatever is left.
--   The supervisor's report (--report-fd 3, a socketpair from glsb.process's
--   spawn fd3 option, also the control channel) is read into sb.confinement.
--   The supervisor runs in a session of its own (setsid).
--
-- Finding things
--   helper: glsb.confine_helper.find(opts.confine) (opts.confine, else
--   $GLSB_CONFINE, else next to the core, else the checkout's build/).
--   agent: agent.py next to this file. python: opts.python or /usr/bin/python3
--   (the sandbox PATH has no pyenv/venv of the host).
--
-- The files of this provider (this one holds the hooks of glsb.sandbox)
--   layout.lua      where things are (in the sandbox and on the host), finding the helper, the agent
--                   and python, glsb-confine's argv and config, its reports; shared with template.lua
--   agent.lua       the request machine on the agent's stream (one at a time, interrupt, grace, kill)
--   channel.lua     frames of the agent protocol and of the control channel; mux.lua: several readers
--   result.lua      a call's events -> its ExecutionResult; background.lua: start_command's handles
--   control.lua     glsb-confine's control channel; transfer.lua: uploads, downloads, sb.files on it
--   reaper.lua      what sandboxes of dead owners left; template.lua: template layers
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
--   interrupt_grace (1 s: glsb.constants.DEADLINE_GRACE, so that the call ends within the contract's
--   timeout + DEADLINE_MARGIN) the sandbox is killed -> TIMEOUT, and the handle
--   ends (glsb.outcome.GONE): later calls raise SandboxNotInitializedError. The interpreter ending
--   during a call (os._exit, a crash, a kill) -> ERROR naming its exit code
--   or signal; the sandbox is gone. The lease ending during a call ->
--   TIMEOUT saying so, whichever of the two deadlines fires first.
--   execute_command: the agent kills the command's process group at the
--   timeout (the host waits timeout + grace as a backstop). Both draw from the
--   call's one deadline (the base's opts.deadline): the wait for an earlier
--   call to let go of the agent and the files upload count.
--
-- Lease: set_timeout(s) / create{timeout = s} arm a glsb.loop timer that
--   terminates the sandbox at expiry unless renewed. It only fires while the
--   owning process runs the loop (any glsb call waits on it); if the owner
--   dies, the supervisor gets SIGHUP (PR_SET_PDEATHSIG), kills the sandbox and
--   removes the workspace. Dropping the last reference (garbage collection, or
--   lua_close at exit) does the same through a finalizer. If owner and
--   supervisor are killed together, the next sandbox in the same root (or
--   `glsb-lua --gc`) removes what they left (reaper.lua: a glsb-owner record says
--   who owns each workspace; only glsb's own glsb-<uid> folder is ever swept).
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

local fs = require "glsb.fs"
local channel = require "glsb.providers.local.channel"
local reaper = require "glsb.providers.local.reaper"
local net = require "glsb.network"
local control = require "glsb.providers.local.control"
local mux = require "glsb.providers.local.mux"
local layout = require "glsb.providers.local.layout"
local agent = require "glsb.providers.local.agent"
local result = require "glsb.providers.local.result"
local loop = require "glsb.loop"
local process = require "glsb.process"
local errors = require "glsb.errors"
local models = require "glsb.models"
local sandbox = require "glsb.sandbox"
local shell = require "glsb.shell"
local options = require "glsb.options"
local constants = require "glsb.constants"
local output = require "glsb.output"
local registry = require "glsb.registry"
local listing = require "glsb.providers.local.listing"

-- Loaded by the first call that needs them (a script that never uploads, starts a background command,
-- pauses or snapshots does not load them: issue 26, loading what the script touches)
local function transfer() return require "glsb.providers.local.transfer" end
local function freeze() return require "glsb.providers.local.freeze" end

local Stage = models.Stage
local Status = models.ExecutionStatus

local M = { name = "local" }

M.OUTPUT_CAP = output.CAP
M.DEFAULT_START_TIMEOUT = 10
M.DEFAULT_INTERRUPT_GRACE = constants.DEADLINE_GRACE
M.DEFAULT_MAX_DOWNLOAD = layout.DEFAULT_MAX_DOWNLOAD

-- The layout's names (layout.lua), as this module has always exported them.
M.AGENT_DIR = layout.AGENT_DIR
M.AGENT_BYTECODE = layout.AGENT_BYTECODE
M.HELPER_PATH = layout.HELPER_PATH
M.FIND_LINKS_DIR = layout.FIND_LINKS_DIR
M.TEMPLATE_DIR = layout.TEMPLATE_DIR
M.find_helper = layout.find_helper
M.agent_dir = layout.agent_dir
M.agent_bytecode = layout.agent_bytecode
M.find_in_sandbox_path = layout.find_in_sandbox_path
M.confine_argv = layout.confine_argv
M.read_report = layout.read_report
M.read_exit = layout.read_exit
M.host_workspace_dir = layout.host_workspace_dir
M.python_in_sandbox = layout.python_in_sandbox
M.program_end = agent.program_end

---------------------------------------------------------------------------
-- The sandbox class
---------------------------------------------------------------------------

local Sandbox = sandbox.CodeInterpreterSandbox:extend("local", {
  languages = { python = true, bash = true, javascript = true },
  -- a local start failure is never a hiccup of the network: no retry
  create_retry = { attempts = 1 },
  -- glsb.connect from another process: a sandbox is a child process tree of its creator (glsb.list and
  -- glsb.kill reach it all the same: listing.lua)
  attach_unsupported = "local sandboxes belong to the process that created them",
  pause_on_timeout_unsupported = "a local sandbox ends with its lease",
  -- what a failed install that reads like "no network" suggests (glsb.sandbox failure_summary)
  network_hint = "pass network = true (a local sandbox is offline by default), or pip_find_links = <a directory "
    .. "of wheels>",
  -- the local provider's own options, declared once (glsb.options: checked strictly; the README's
  -- table is generated from these)
  options = {
    -- where this uid's workspaces are: create makes one there, list and kill look there
    provider = {
      host_workspace_dir = { "string", "host folder whose `glsb-<uid>` folder holds the per-sandbox workspace "
        .. "directories (`sb.workspace_root` is the path inside, `/home/user`)", default = "$TMPDIR or /tmp" },
      workspace_root = { "string", "deprecated name of `host_workspace_dir` (still works, with one warning)" },
    },
    create = {
      network = net.OPTION,
      memory_mb = { "count", "memory limit (MiB)", default = "1024" },
      cpu_seconds = { "count", "CPU time limit (s)", default = "3600" },
      max_processes = { "count", "process limit", default = "256" },
      max_file_mb = { "count", "largest file the sandbox may write (MiB)", default = "512" },
      disk_mb = { "count", "size of the sandbox's storage (MiB): /tmp, /home/user and /files are one private "
        .. "tmpfs of this size, with 64 inodes per MiB (at least 4096); full, a write fails with ENOSPC",
        default = "1024" },
      cpus = { "number", "CPU quota in CPUs (cgroup: v2 cpu.max, v1 CFS quota)", min = 0.01, max = 4096,
        default = "1" },
      max_open_files = { "count", "open file limit", default = "1024" },
      allow_degraded = { "boolean", "start even if a kernel feature is missing (listed in `sb.missing`)",
        default = "false" },
      ro_binds = { "table", "extra read-only binds `{ {host_path, sandbox_path}, ... }`" },
      python = { "string", "the kernel's interpreter (the host's, bound read-only with /usr)",
        default = "/usr/bin/python3" },
      confine = { "string", "path of glsb-confine", default = "$GLSB_CONFINE, else next to the core" },
      start_timeout = { "seconds", "seconds for the sandbox agent to start; `<= 0`: none", default = "10" },
      interrupt_grace = { "positive", "seconds code may ignore an interrupt at its timeout before the sandbox is "
        .. "killed (the call ends within timeout + this)", default = "1" },
      pip_index_url = { "string", "pip `--index-url` for `additional_packages`" },
      pip_find_links = { "string", "a directory of wheels for `additional_packages` (bound read-only; implies "
        .. "`--no-index`)" },
      max_download_bytes = { "count", "larger downloads return nil (counted on the host: whatever the sandbox "
        .. "sends, no more is kept)", default = "268435456" },
      cache_dir = { "string", "where `template` layers are looked up (as the builder's)",
        default = "$XDG_CACHE_HOME/glsb or ~/.cache/glsb" },
    },
    snapshot = {
      timeout = { "seconds", "the whole snapshot (archiving the files, making the layer); `<= 0`: none",
        default = "300" },
    },
  },
})
M.Sandbox = Sandbox

-- What the declarations cannot say, checked before anything starts (an argument error at the caller's
-- line, as every misuse): host_workspace_dir must not be empty.
function Sandbox._prepare_create(sopts)
  sandbox.CodeInterpreterSandbox._prepare_create(sopts)
  if sopts.host_workspace_dir == "" or sopts.workspace_root == "" then
    options.arg_error("create: option '%s' must be a non-empty string",
      sopts.host_workspace_dir == "" and "host_workspace_dir" or "workspace_root")
  end
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
  local task
  task = loop.spawn(function()
    loop.sleep(seconds)
    if self._lease_task ~= task then return end
    self._lease_task = nil
    -- a call that ends because of it knows by the base's lease clock, and waits for self._ending
    local ok, err = pcall(self.terminate, self)
    if not ok then
      require("glsb.log").error("local: terminating the sandbox at lease expiry failed: " .. tostring(err),
        { sandbox_id = self.sandbox_id })
    end
  end)
  self._lease_task = task
end

local function resolve_template(opts)
  local t = opts.template
  if t == nil then return nil end
  -- a ref (builder:ensure's res.ref, sb:snapshot's) names its layer by id, else by name
  if type(t) == "table" then t = t.template_id or t.name end
  local tmpl = require "glsb.providers.local.template"
  local dir, err = tmpl.resolve(t, opts)
  if not dir then error(layout.start_error(err), 0) end
  return dir
end

-- A start that failed because memory_mb is too small for the interpreter: Python dies of SIGSEGV or
-- SIGABRT, or raises MemoryError, when RLIMIT_DATA / the cgroup limit is below what it needs to start
-- (about 10-20 MB, more with a template's packages). -> a message, or nil when that is not the cause.
local function too_little_memory(self, opts)
  if opts.memory_mb == nil then return nil end
  local e = agent.program_end(self)
  local crashed = e and (e.oom or (e.signal and (e.signal == 6 or e.signal == 7 or e.signal == 9 or e.signal == 11)))
  local memerr = e and e.code and e.code ~= 0 and self._stderr_tail:find("MemoryError", 1, true)
  if not (crashed or memerr) then return nil end
  return string.format("local: memory_mb = %s is too low to start the interpreter (%s while starting); "
    .. "give the sandbox more memory (the default is 1024)", tostring(opts.memory_mb),
    crashed and (e.oom and "the OOM killer killed it" or ("it was killed by " .. e.name)) or "MemoryError")
end

function Sandbox:_init(opts)
  sandbox.CodeInterpreterSandbox._init(self, opts)
  self._network = layout.network_policy(opts.network)
  self._stderr_tail = ""
  self._next_id = 0
  self._lock = loop.lock()   -- one foreground request at a time (the agent runs one)
  self._wlock = loop.lock()  -- one frame at a time on the agent's stdin (background requests go at once)
  self._background = {}      -- id -> the handle of a running start_command
  self._ending = loop.lock() -- held while _terminate runs: a second one, and a call the lease ended, wait
  self._grace = opts.interrupt_grace or M.DEFAULT_INTERRUPT_GRACE
end

function Sandbox:_start(opts)
  local helper, herr = M.find_helper(opts.confine)
  if not helper then error(layout.start_error(herr), 0) end
  local python = layout.python_of(opts)
  if self.language == "javascript" and not M.find_in_sandbox_path("node") then
    error(layout.start_error("local: language 'javascript' needs node, which is not installed on this machine"), 0)
  end
  local template_dir = resolve_template(opts)
  -- in glsb's own folder of the host workspace folder, never beside the user's files
  local root, rerr = reaper.workspace_root(layout.host_workspace_dir(opts))
  if not root then error(layout.start_error("local: " .. rerr), 0) end
  local base, merr = fs.mkdtemp(root .. "/glsb-local-")
  if not base then error(layout.start_error("local: cannot create the workspace: " .. tostring(merr)), 0) end
  -- the workspace is the mkdtemp directory itself, so the supervisor's
  -- --cleanup (also on owner death: it gets SIGHUP) removes all of it
  self._base = base
  self.workspace = base
  self.sandbox_id = "local-" .. base:match("([^/]+)$"):gsub("^glsb%-local%-", "")

  local env = { PYTHONDONTWRITEBYTECODE = "1", PYTHONUNBUFFERED = "1" }
  -- the agent's files one by one, not its directory: small files bound read-only are copied in, so
  -- /proc/self/mountinfo inside names no host path of ours (a directory bind would show it)
  local dir = M.agent_dir()
  -- (the helper itself is not: workspace primitives, uploads and sb.files run it on the control channel,
  -- never inside; a copy of its 270 KB in every sandbox's memory served nothing)
  local ro = { { dir .. "/boot.py", M.AGENT_DIR .. "/boot.py" }, { dir .. "/agent.py", M.AGENT_DIR .. "/agent.py" },
    { dir .. "/display.py", M.AGENT_DIR .. "/display.py" } }
  if template_dir then
    ro[#ro + 1] = { template_dir, M.TEMPLATE_DIR }
    local tmeta = require("glsb.providers.local.template").read_meta(template_dir)
    for k, v in pairs(tmeta and tmeta.env or {}) do env[k] = v end
    if tmeta and tmeta.workdir then env.GLSB_WORKDIR = tmeta.workdir end
    self.template_id = tmeta and tmeta.id
    self._template_dir = template_dir
  end
  if opts.pip_find_links then
    ro[#ro + 1] = { opts.pip_find_links, M.FIND_LINKS_DIR }
  end
  for _, b in ipairs(opts.ro_binds or {}) do ro[#ro + 1] = b end
  local pyc = M.agent_bytecode(python, layout.cache_dir(opts))
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
  if not p then error(layout.start_error("local: cannot start glsb-confine: " .. tostring(serr)), 0) end
  self._proc = p
  self._chan = channel.new(p, function() agent.drain_stderr(self) end)
  self._control = control.new(p)
  self._guard = M.guard(p, base)

  local start_timeout = options.timeout(opts.start_timeout, M.DEFAULT_START_TIMEOUT)
  local deadline = loop.deadline(start_timeout)
  -- the options first on the agent's stdin (--config-fd 0), the protocol after them
  local sent, werr = self._chan:write(config, deadline)
  -- while the sandbox starts (the supervisor has its options: this process would only wait): the
  -- owner record, then what sandboxes of killed owners left in this root (once per process and root;
  -- ours has its record, so the sweep leaves it)
  reaper.record(base, { supervisor = p.pid })
  reaper.sweep_once(root)
  local ev, err
  if sent then ev, err = agent.read_event(self, deadline) else err = werr == "timeout" and "timeout" or "eof" end
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
      msg = string.format("local: the sandbox agent did not answer within %gs", start_timeout or 0)
    else
      msg = "local: the sandbox agent did not start: "
        .. tostring(err or ("unexpected event " .. tostring(ev and ev.ev)))
      local d = agent.describe_exit(self)
      if d ~= "" then msg = msg .. " (" .. d .. ")" end
      local low = too_little_memory(self, opts)
      if low then msg = low .. " [" .. msg .. "]" end
    end
    -- the helper's own failure report is the cause; a set-up that went fine explains nothing
    error(layout.start_error(msg, report and report.ok == false and report or nil, stage), 0)
  end
  local report = self._control:read_report(loop.now() + 2)
  self.confinement = report and report.applied or nil
  -- the helper's file server (sb.files in one round trip: transfer.lua); an older helper has none
  for _, verb in ipairs(report and type(report.control) == "table" and report.control or {}) do
    if verb == "files" then self._control.has_files = true end
  end
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
    local st = p:wait(math.min(deadline or math.huge, loop.now() + secs))
    return st ~= nil
  end
  if p.proc:fd("stdin") then p:close_stdin() end
  if waited(2) then return true end
  p:kill("HUP")
  if waited(2) then return true end
  p:kill("KILL")
  return waited(2)
end

-- _alive() -> false once the base says it is not running, it was marked dead or its supervisor has
-- exited, else true. Cheap (a non-blocking waitid on the supervisor's pidfd): glsb.pool asks it before
-- handing out a warm sandbox.
function Sandbox:_alive()
  if self._dead or not self._proc or not self:is_running() then return false end
  return self._proc.proc:poll() == nil
end

local function terminate_body(self, deadline)
  cancel_lease(self)
  -- a paused sandbox is thawed first: a frozen task cannot act on its end (nor die, on cgroup v1)
  if self._freezer then self._freezer.thaw() end
  -- from here no request starts, and a background command's handle says it was terminated
  if not self._dead then self._dead = "the sandbox was terminated" end
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
  -- the freezer cgroup a pause made goes with the sandbox's processes
  if self._freezer then
    self._freezer.remove()
    self._freezer = nil
    if self._guard then self._guard.frozen = nil end
  end
  if self._sink then -- transfer.lua's buffer for downloads
    self._sink:close()
    self._sink = nil
  end
  if self._base then
    -- normally gone already (--cleanup); not when the supervisor was killed
    local ok, err = fs.rmtree(self._base)
    if not ok then error("local: cannot remove the workspace " .. self._base .. ": " .. tostring(err), 0) end
    self._base = nil
  end
end

-- One terminate at a time (self._ending): the base may end the handle (a result said the sandbox is
-- gone) while the lease's own terminate runs; the second waits, then finds nothing left to stop.
function Sandbox:_terminate(opts)
  -- terminate{timeout <= 0} gives no deadline: each stage of stop_process still ends after its 2 s
  local deadline = sandbox.deadline(opts or {})
  if not self._ending:acquire(deadline) then
    error("local: another terminate of this sandbox did not end in time", 0)
  end
  local ok, err = pcall(terminate_body, self, deadline)
  self._ending:release()
  if not ok then error(err, 0) end
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
    -- a paused sandbox is thawed first (no wait: M.thaw writes the state only): a frozen task cannot
    -- die on cgroup v1; its v1 freezer leaf goes once empty (else the next sweep of a dead owner's)
    if g.frozen then pcall(function() freeze().thaw(g.frozen.path) end) end
    pcall(function()
      if not p.proc:poll() then
        p:kill("HUP")
        local t = os.clock()
        while not p.proc:poll() and os.clock() - t < 0.5 do end
      end
      p:close()
    end)
    if g.frozen and g.frozen.path:sub(1, #freeze().V1_ROOT + 1) == freeze().V1_ROOT .. "/" then
      os.remove(g.frozen.path)
    end
    pcall(fs.rmtree, workspace)
  end })
end

---------------------------------------------------------------------------
-- Code and commands, through the agent (agent.lua: the requests; result.lua: their results)
---------------------------------------------------------------------------

function Sandbox:_run_code(code, opts)
  local c = result.collector(opts)
  local deadline = sandbox.deadline(opts) -- the interrupt goes at the call's own deadline
  local ctx = opts.context
  local done, why, how = agent.request(self, {
    op = "exec", code = code, lang = opts.language or self.language, env = opts.env,
    ctx = ctx and ctx.id, cwd = ctx and ctx.cwd,
  }, { deadline = deadline, on_event = c.on_event, keep = c.keep, interrupt = true })
  if not done then return result.dead_result(self, c, "execute_code", opts.timeout, why, how) end
  if done.timeout then
    return result.finish(c, done, { status = Status.TIMEOUT, code = result.int(done.exit_code),
      error = string.format("execute_code: timed out after %gs (interrupted; the sandbox is still usable)",
        opts.timeout or 0) })
  end
  if done.ok then
    return result.finish(c, done, { status = Status.SUCCESS, code = result.int(done.exit_code), text = done.text })
  end
  local err
  if done.name then
    err = (done.traceback and done.traceback ~= "") and done.traceback:gsub("\n$", "")
      or (tostring(done.name) .. ": " .. tostring(done.value))
  else
    err = string.format("exited with code %s", tostring(result.int(done.exit_code)))
  end
  local r = result.finish(c, done, { status = Status.ERROR, code = result.int(done.exit_code), error = err })
  r.error_name, r.error_value, r.traceback = done.name, done.value, done.traceback
  return r
end


function Sandbox:_run_command(cmd, opts)
  local c = result.collector(opts)
  -- the agent enforces the call's deadline (process group kill; it gets what is left when the request
  -- goes out); the host waits a grace period more, then interrupts, then kills the sandbox
  local limit = sandbox.deadline(opts)
  local done, why, how = agent.request(self, {
    op = "cmd", cmd = cmd, env = opts.env, cwd = opts.cwd,
  }, { limit = limit, deadline = limit and limit + self._grace, on_event = c.on_event, keep = c.keep,
    interrupt = true })
  if not done then return result.dead_result(self, c, "execute_command", opts.timeout, why, how) end
  local r = result.command_result(c, done, "execute_command", opts.timeout)
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

-- start_command: background.lua (the handle, and the task that pumps the command's events).
function Sandbox:_start_command(cmd, opts)
  return require("glsb.providers.local.background").start(self, cmd, opts)
end

---------------------------------------------------------------------------
-- Ports
---------------------------------------------------------------------------

-- get_host(port): with a network (network = true or {allow, deny}) the sandbox has a net namespace of
-- its own (slirp4netns: src/confine/sb_usernet.c); glsb-confine forwards one port of the host's
-- 127.0.0.1 to that port in the sandbox (the control channel's `forward`: CONTROL.md), where a server
-- bound to 127.0.0.1 or 0.0.0.0 gets it. Only the ports asked for are forwarded; the same port twice
-- gives the same host port. Without a network nothing outside reaches its ports.
function Sandbox:_get_host(port)
  if not self._network then
    errors.raise(errors.SandboxExecutionError, Stage.GET_HOST, "get_host: provider 'local' exposes no ports: "
      .. "the sandbox has no network (a loopback of its own only); create it with network = true to have "
      .. "its ports forwarded to the host's 127.0.0.1 one by one")
  end
  local host, why, msg = self._control:forward(port, loop.now() + 5)
  if not host then
    errors.raise(errors.SandboxExecutionError, Stage.GET_HOST, string.format(
      "get_host: port %d of the sandbox could not be forwarded to the host: %s", port, msg or why))
  end
  return "127.0.0.1:" .. host
end

---------------------------------------------------------------------------
-- Uploads, downloads, sb.files: on the control channel (transfer.lua)
---------------------------------------------------------------------------

function Sandbox:_upload(files, opts) return transfer().upload(self, files, opts) end
function Sandbox:_download(path, opts) return transfer().download(self, path, opts) end
function Sandbox:_files_write(path, data, opts) return transfer().files_write(self, path, data, opts) end
function Sandbox:_files_read(path, opts) return transfer().files_read(self, path, opts) end
function Sandbox:_files_list(path, opts) return transfer().files_list(self, path, opts) end
function Sandbox:_files_exists(path, opts) return transfer().files_exists(self, path, opts) end
function Sandbox:_files_make_dir(path, opts) return transfer().files_make_dir(self, path, opts) end
function Sandbox:_files_remove(path, opts) return transfer().files_remove(self, path, opts) end

---------------------------------------------------------------------------
-- Code contexts: a namespace of its own in the agent (python); bash and javascript cells are a process
-- each anyway, so their context is a working directory and env
---------------------------------------------------------------------------

function Sandbox:_context_create(spec)
  local why = agent.unusable(self)
  if why then error("context: " .. why, 0) end
  return { id = require("glsb.ids").hex(16), language = spec.language, cwd = spec.cwd }
end

function Sandbox:_context_close(ctx)
  local done, why = agent.request(self, { op = "ctx_close", ctx = ctx.id }, { deadline = loop.now() + 10 })
  if not done then error("local: closing the context failed: " .. tostring(why), 0) end
end

---------------------------------------------------------------------------
-- Pause and resume (freeze.lua): within the process that made the sandbox
---------------------------------------------------------------------------

-- The paused sandboxes of this process, by id: glsb.connect("local", ref) resumes one of them. A local
-- sandbox is a child process tree of its creator, so it never outlives the process, paused or not.
local paused = {}

function Sandbox:_pause()
  local why = agent.unusable(self)
  if why then error("pause: " .. why, 0) end
  local group, err = freeze().freeze(self.confinement, self.sandbox_id, loop, reaper.me())
  if not group then error("local: cannot pause: " .. err, 0) end
  cancel_lease(self)
  self._freezer = group
  if self._guard then self._guard.frozen = group end
  -- the lease left, for the resume
  self._paused_lease = self._lease_ends and math.max(0, self._lease_ends - loop.now()) or nil
  paused[self.sandbox_id] = self
  listing.write(self._base, self, "paused", self._paused_lease)
end

-- connect: the paused sandbox of this process with that id, thawed; this handle takes it over (the
-- paused one is done: its terminate is a no-op). opts.timeout: a new lease, else what was left of it.
function Sandbox:_attach(ref, opts)
  local old = paused[ref.sandbox_id]
  if not old then
    error(string.format("local: no paused sandbox '%s' in this process (a local sandbox belongs to the process "
      .. "that created it; only one paused here can be resumed)", tostring(ref.sandbox_id)), 0)
  end
  paused[ref.sandbox_id] = nil
  old._freezer.thaw()
  for k, v in pairs(old) do
    if k ~= "files" and k ~= "_state" and k ~= "options" and k ~= "keep_alive" and k ~= "timeout" then
      rawset(self, k, v)
    end
  end
  -- the old handle keeps nothing to stop
  old.sandbox_id, old._proc, old._base, old._guard = nil, nil, nil, nil
  local lease = opts.timeout or self._paused_lease
  self._paused_lease = nil
  self._lease_remaining = lease
  arm_lease(self, lease)
  listing.write(self._base, self, "running", lease or false)
end

---------------------------------------------------------------------------
-- Snapshots (snapshot.lua): the sandbox's files as a template layer; processes are not kept
---------------------------------------------------------------------------

-- snapshot{name}: a name is a template name (names/<name> in the cache), checked here, at the caller's
-- line, before anything is archived.
function Sandbox:snapshot(opts)
  local name = type(opts) == "table" and opts.name or nil
  if type(name) == "string" and (not name:match("^[%w][%w._-]*$") or (#name == 64 and name:match("^%x+$"))) then
    options.arg_error("snapshot: name %q must be letters, digits, '.', '_' or '-' (starting with a letter or "
      .. "digit), and not 64 hex digits (an id)", name)
  end
  return sandbox.CodeInterpreterSandbox.snapshot(self, opts)
end

function Sandbox:_snapshot(...) return require("glsb.providers.local.snapshot").snapshot(self, ...) end

---------------------------------------------------------------------------
-- The lease, the workspace hooks, packages
---------------------------------------------------------------------------

function Sandbox:_set_timeout(seconds)
  local why = agent.unusable(self)
  if why then error("set_timeout: " .. why, 0) end
  arm_lease(self, seconds)
  listing.write(self._base, self, "running", seconds or false)
end

-- Up and leased (the base's clock): what glsb.list shows of it, before the package install.
function Sandbox:_after_start(sopts)
  listing.write(self._base, self, "running")
  return sandbox.CodeInterpreterSandbox._after_start(self, sopts)
end

-- glsb.list / glsb.kill: this uid's sandboxes on this machine, in the host workspace folder's glsb-<uid>
-- (another process's too: they can be seen and ended, not connected to).
local function own_root(opts, stage)
  local root, why = reaper.workspace_root(layout.host_workspace_dir(opts))
  if not root then errors.raise(errors.SandboxStartError, stage, "local: " .. why) end
  return root
end

function Sandbox._list(_cls, opts)
  return listing.list(own_root(opts, Stage.LIST), opts)
end

function Sandbox._kill(_cls, ref, opts)
  local ok, why = listing.kill(own_root(opts, Stage.CONNECT), ref.sandbox_id,
    options.timeout(opts.timeout, constants.DEFAULT_TERMINATE_TIMEOUT))
  if not ok then errors.raise(errors.SandboxStartError, Stage.CONNECT, why) end
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
  local limit = sandbox.deadline(opts)
  local cap = opts.max_output or M.OUTPUT_CAP
  if argv[1] == M.HELPER_PATH and (argv[2] == "write" or argv[2] == "run") then
    local args = table.move(argv, 2, #argv, 1, {})
    local r, why = self._control:call(args, opts.stdin, { deadline = limit, max_stdout = cap })
    if not r then error("local: the workspace helper failed: " .. transfer().control_failure(self, why, timeout), 0) end
    if r.error then
      error("local: the workspace helper could not run: " .. r.error .. ": " .. tostring(r.message), 0)
    end
    return {
      exit_code = r.code or (r.signal and 128 + r.signal), timed_out = r.cancelled,
      stdout = r.stdout, stderr = r.stderr, stdout_truncated = r.stdout_over or nil,
    }
  end
  local a = result.accumulator(cap)
  local done, why = agent.request(self, { op = "argv", argv = argv, max_out = cap }, {
    limit = limit, deadline = limit and limit + self._grace, interrupt = true,
    payload = opts.stdin ~= "" and opts.stdin or nil,
    keep = a.keep, on_event = a.on_event,
  })
  if not done then
    error("local: running " .. tostring(argv[1]) .. " failed: " .. transfer().control_failure(self, why, timeout), 0)
  end
  if done.name then error("local: cannot run " .. tostring(argv[1]) .. ": " .. tostring(done.value), 0) end
  local t1 = a.truncated[1] or (tonumber(done.dropped_stdout) or 0) > 0
  local t2 = a.truncated[2] or (tonumber(done.dropped_stderr) or 0) > 0
  return {
    exit_code = result.int(done.exit_code), timed_out = done.timeout == true,
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
  local r = self:_run_command(shell.join(words) .. " 2>&1", { timeout = opts.timeout })
  if r.status == Status.SUCCESS then
    -- the kernel's import system must see the new user site-packages
    self:_run_code("import importlib, site; site.addsitedir(site.getusersitepackages()); importlib.invalidate_caches()",
      { timeout = 30, language = "python" })
  end
  return r
end


---------------------------------------------------------------------------
-- Templates
---------------------------------------------------------------------------

return registry.lazy_template(M, "glsb.providers.local.template")