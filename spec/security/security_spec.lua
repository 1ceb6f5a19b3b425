-- The hostile battery against the local provider: each program tries to
-- reach the host and the spec asserts that the host is untouched, that the
-- sandbox reported an error instead of hanging, and, at the end, that no
-- sandbox process, mount, cgroup or workspace directory is left behind.
local glsb = require "glsb"
local core = require "glsb.core"
local loop = require "glsb.loop"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

-- syscall numbers (x86_64) for the programs that call the kernel directly
local SYSCALL_PRELUDE = [[
import ctypes, errno, os
assert os.uname().machine == "x86_64", os.uname().machine
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys_call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    e = ctypes.get_errno()
    return "OK" if r >= 0 else "BLOCKED " + errno.errorcode.get(e, str(e))
]]

describe("security battery #security #local", function()
  local root            -- private workspace root of every sandbox here
  local victim          -- a host directory the sandboxes must not touch
  local mounts_before
  local sandboxes = {}  -- everything created, for the leftover checks
  local sb

  local function create(extra)
    local opts = { host_workspace_dir = root }
    for k, v in pairs(extra or {}) do opts[k] = v end
    local s = glsb.create("local", opts)
    sandboxes[#sandboxes + 1] = {
      sb = s, supervisor = s._proc.pid, init = s.host_pid, workspace = s.workspace,
      cgroups = s.confinement and s.confinement.cgroup_dirs or {},
    }
    return s
  end

  local function run(code, opts)
    local r = sb:execute_code(code, opts)
    local all = r.stdout .. r.stderr .. (r.error or "")
    if os.getenv("GLSB_SPEC_VERBOSE") then io.stderr:write(tostring(r.status), "\n", all, "\n----\n") end
    return r, all
  end

  local prev_log
  setup(function()
    prev_log = glsb.log.set_handler(function() end) -- the expected download warnings
    root = helper.private_tmp()
    victim = helper.private_tmp()
    os.execute("chmod 755 " .. helper.q(victim))
    helper.write(victim .. "/secret.txt", "host secret")
    mounts_before = helper.mount_count()
  end)

  before_each(function() sb = create() end)
  after_each(function()
    if sb then sb:terminate() end
    sb = nil
    -- the host files are exactly as they were
    assert.are.equal("host secret", helper.read(victim .. "/secret.txt"))
    assert.are.same({ "secret.txt" }, helper.list_dir(victim))
  end)

  it("cannot read /etc/shadow or the host's home", function()
    local r, all = run([[
import os
for p in ["/etc/shadow", "/root/.bashrc", "/root", "/proc/1/root/etc/shadow", "/etc/sudoers"]:
    try:
        if os.path.isdir(p):
            print("READ", p, os.listdir(p))
        else:
            print("READ", p, len(open(p, "rb").read()))
    except OSError as e:
        print("BLOCKED", p, type(e).__name__)
print("home", os.listdir("/home"))
]])
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_nil(all:find("READ", 1, true), all)
    assert.truthy(all:find("BLOCKED /etc/shadow", 1, true), all)
    assert.truthy(all:find("home ['user']", 1, true), all)
  end)

  it("cannot write outside the workspace (absolute paths, '..', symlinks, hard links)", function()
    local host_path = victim .. "/secret.txt"
    local r, all = run(string.format([[
import os
targets = ["/etc/passwd", "/usr/bin/glsb-owned", "/bin/sh", "/glsb-root-file",
           "/files/../../etc/passwd", "/home/user/../../usr/x", %q, %q]
for t in targets:
    try:
        with open(t, "a") as f:
            f.write("owned")
        print("WROTE", t)
    except OSError as e:
        print("BLOCKED", t, type(e).__name__)
# a symlink planted in the workspace pointing at the host path, then written through
os.symlink(%q, "/files/evil")
os.symlink("/etc", "/home/user/etc-link")
for t in ["/files/evil", "/home/user/etc-link/passwd"]:
    try:
        with open(t, "w") as f:
            f.write("owned")
        print("WROTE", t)
    except OSError as e:
        print("BLOCKED", t, type(e).__name__)
# hard links to files of the system
for src in ["/etc/passwd", "/usr/bin/python3"]:
    try:
        os.link(src, "/files/hard-" + os.path.basename(src))
        print("LINKED", src)
    except OSError as e:
        print("BLOCKED link", src, type(e).__name__)
]], host_path, victim .. "/new.txt", host_path))
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_nil(all:find("WROTE", 1, true), all)
    assert.is_nil(all:find("LINKED", 1, true), all)
    -- the planted links are left for the host side to trip over: download
    -- follows nothing out, terminate removes the links and not their targets
    assert.is_nil(sb:download_file("/files/evil"))
    assert.is_nil(sb:download_file("/home/user/etc-link/passwd"))
    local ws = sb.workspace
    sb:terminate()
    sb = nil
    assert.is_false(helper.exists(ws))
  end)

  it("cannot connect to a server listening on the host's loopback", function()
    local marker_dir = helper.private_tmp()
    local marker = marker_dir .. "/conn"
    local server = assert(require("glsb.process").spawn {
      argv = { "/usr/bin/python3", "-c", [[
import socket, sys, select
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
print(s.getsockname()[1], flush=True)
r, _, _ = select.select([s], [], [], 6)
open(sys.argv[1], "w").write("accepted" if r else "none")
]], marker }, stdin = "null" })
    local port = server:read_line("stdout", loop.now() + 5)
    assert.truthy(tonumber(port), "server did not start")
    local r, all = run(string.format([[
import socket
for host in ["127.0.0.1", "localhost", "10.0.2.2", "8.8.8.8"]:
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, %s))
        print("CONNECTED", host)
    except OSError as e:
        print("BLOCKED", host, type(e).__name__, e)
    finally:
        s.close()
]], port), { timeout = 20 })
    server:kill("KILL")
    server:wait(loop.now() + 5)
    server:close()
    local seen = helper.read(marker)
    helper.rm_rf(marker_dir)
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_nil(all:find("CONNECTED", 1, true), all)
    assert.are_not.equal("accepted", seen)
  end)

  it("contains a fork bomb with the process limit and returns", function()
    sb:terminate()
    sb = create({ max_processes = 64 })
    local started = loop.now()
    local r = sb:execute_command(":(){ :|:& };: ; sleep 1; echo survived", { timeout = 5 })
    assert.is_true(loop.now() - started < 15, "the fork bomb hung the call")
    assert.truthy(r.status == Status.TIMEOUT or r.status == Status.SUCCESS or r.status == Status.ERROR)
    if os.getenv("GLSB_SPEC_VERBOSE") then io.stderr:write(tostring(r), "\n") end
    -- the host could still start processes all along
    assert.are.equal("ok\n", (helper.sh("echo ok")))
    local r2 = sb:execute_code("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
    -- the sandbox still answers (or, if the bomb starved it, it fails fast)
    assert.is_true(r2.status == Status.SUCCESS or r2.status == Status.TIMEOUT, tostring(r2))
    local r3 = sb:execute_code("import os\ntry:\n    [os.fork() for _ in range(200)]\nexcept OSError as e:\n"
      .. "    print('BLOCKED', type(e).__name__)\n    os._exit(0) if False else None", { timeout = 10 })
    assert.truthy((r3.stdout .. (r3.error or "")):find("BLOCKED", 1, true)
      or r3.status ~= Status.SUCCESS, tostring(r3))
  end)

  it("contains a memory bomb", function()
    sb:terminate()
    sb = create({ memory_mb = 256 })
    local started = loop.now()
    local r, all = run("chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024 * 1024))", { timeout = 20 })
    assert.is_true(loop.now() - started < 20, "memory bomb took too long")
    assert.are_not.equal(Status.SUCCESS, r.status)
    assert.truthy(all:find("MemoryError", 1, true) or r.status == Status.TIMEOUT, all)
  end)

  it("contains a disk fill (tmpfs size, file size limit)", function()
    sb:terminate()
    sb = create({ disk_mb = 16, max_file_mb = 8 })
    local r, all = run([[
import os, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
def fill(path, limit):
    n = 0
    try:
        with open(path, "wb") as f:
            while n < limit:
                f.write(b"x" * (1024 * 1024)); f.flush(); n += 1024 * 1024
        return n, None
    except OSError as e:
        return n, e.strerror
# one big file: stopped by RLIMIT_FSIZE
for path in ["/tmp/big", "/files/big", "/home/user/big"]:
    n, err = fill(path, 64 * 1024 * 1024)
    print("BIG", path, n // (1024 * 1024), "MiB", err)
    os.unlink(path)
# many files: /tmp is a 16 MiB tmpfs
total = 0
for i in range(40):
    n, err = fill("/tmp/part%d" % i, 4 * 1024 * 1024)
    total += n
    if err:
        print("TMP FULL after", total // (1024 * 1024), "MiB:", err)
        break
else:
    print("TMP NOT FULL", total)
]], { timeout = 30 })
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.truthy(all:find("BIG /tmp/big 8 MiB File too large", 1, true), all)
    assert.truthy(all:find("BIG /files/big 8 MiB File too large", 1, true), all)
    assert.truthy(all:find("BIG /home/user/big 8 MiB File too large", 1, true), all)
    local mib = tonumber(all:match("TMP FULL after (%d+) MiB: No space left on device"))
    assert.truthy(mib and mib <= 16, all)
  end)

  it("stops an infinite loop at its timeout and keeps serving", function()
    local started = loop.now()
    local r = sb:execute_code("while True:\n    pass", { timeout = 0.5 })
    assert.are.equal(Status.TIMEOUT, r.status)
    assert.is_true(loop.now() - started < 4)
    local r2 = sb:execute_command("while :; do :; done", { timeout = 0.5 })
    assert.are.equal(Status.TIMEOUT, r2.status)
    assert.are.equal("alive\n", sb:execute_code("print('alive')").stdout)
  end)

  it("cannot kill or ptrace a host process", function()
    local victim_proc = assert(require("glsb.process").spawn { argv = { "sleep", "60" }, stdin = "null" })
    local pid = victim_proc.pid
    local r, all = run(SYSCALL_PRELUDE .. string.format([[
import signal
for target in [%d, %d]:
    try:
        os.kill(target, signal.SIGKILL)
        print("KILLED", target)
    except OSError as e:
        print("BLOCKED kill", target, type(e).__name__)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
print("ptrace", sys_call(101, PTRACE_ATTACH, %d, 0, 0))
print("ptrace-seize", sys_call(101, PTRACE_SEIZE, %d, 0, 0))
print("ptrace-init", sys_call(101, PTRACE_ATTACH, 1, 0, 0))
print("visible", sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:5])
]], pid, core.getpid(), pid, pid))
    local alive = helper.pid_alive(pid)
    victim_proc:kill("KILL")
    victim_proc:wait(loop.now() + 5)
    victim_proc:close()
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_true(alive, "the host process was killed")
    assert.is_nil(all:find("KILLED", 1, true), all)
    assert.truthy(all:find("ptrace BLOCKED", 1, true), all)
    assert.truthy(all:find("ptrace-seize BLOCKED", 1, true), all)
    assert.truthy(all:find("ptrace-init BLOCKED", 1, true), all)
  end)

  it("cannot mount, unshare, load kernel modules or reboot", function()
    local r, all = run(SYSCALL_PRELUDE .. [[
print("mount", sys_call(165, b"none", b"/tmp", b"tmpfs", 0, 0))
print("umount", sys_call(166, b"/proc", 0))
print("unshare", sys_call(272, 0x00020000 | 0x10000000))
print("init_module", sys_call(175, 0, 0, b""))
print("finit_module", sys_call(313, 0, b"", 0))
print("delete_module", sys_call(176, b"ext4", 0))
print("kexec_load", sys_call(246, 0, 0, 0, 0))
print("reboot", sys_call(169, 0xfee1dead, 672274793, 0x1234567, 0))
print("swapon", sys_call(167, b"/tmp/x", 0))
print("bpf", sys_call(321, 0, 0, 0))
print("keyctl", sys_call(250, 0, 0, 0, 0, 0))
print("settimeofday", sys_call(164, 0, 0))
import subprocess
p = subprocess.run(["sh", "-c", "mount -t tmpfs none /tmp 2>&1; echo rc=$?"], capture_output=True, text=True)
print("mount-cmd", p.stdout.strip().replace("\n", " "))
]])
    assert.are.equal(Status.SUCCESS, r.status, all)
    for _, name in ipairs({ "mount", "umount", "unshare", "init_module", "finit_module", "delete_module",
      "kexec_load", "reboot", "swapon", "bpf", "keyctl", "settimeofday" }) do
      assert.truthy(all:find("\n" .. name .. " BLOCKED", 1, true) or all:find("^" .. name .. " BLOCKED"),
        name .. " was not blocked: " .. all)
    end
    assert.is_nil(all:find("rc=0", 1, true), all)
    assert.are.equal(mounts_before, helper.mount_count())
  end)

  it("cannot read another sandbox's workspace", function()
    local other = create()
    local w = other:execute_code("open('/files/theirs.txt','w').write('other secret')\n"
      .. "open('/home/user/h.txt','w').write('other home')")
    assert.are.equal(Status.SUCCESS, w.status)
    local r, all = run(string.format([[
import os
for p in [%q, %q, "/files/theirs.txt", "/home/user/h.txt", %q]:
    try:
        print("READ", p, open(p).read())
    except OSError as e:
        print("BLOCKED", p, type(e).__name__)
print("procs", len([p for p in os.listdir("/proc") if p.isdigit()]))
]], other.workspace .. "/files/theirs.txt", other.workspace .. "/home/h.txt", root))
    other:terminate()
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_nil(all:find("READ", 1, true), all)
    assert.is_nil(all:find("other secret", 1, true), all)
    assert.is_nil(sb:download_file(other.workspace .. "/files/theirs.txt"))
  end)

  it("cannot escape through /proc/self/root, /proc/1 or host pids", function()
    local me = core.getpid()
    local r, all = run(string.format([[
import os
checks = ["/proc/self/root/etc/shadow", "/proc/1/root/etc/shadow", "/proc/%d/environ",
          "/proc/%d/root/etc/shadow", "/proc/%d/cwd", "/proc/1/cwd/../../etc/shadow"]
for p in checks:
    try:
        data = os.listdir(p) if os.path.isdir(p) else open(p, "rb").read()
        print("READ", p)
    except OSError as e:
        print("BLOCKED", p, type(e).__name__)
print("root-inode", os.stat("/proc/self/root").st_ino, os.stat("/").st_ino)
print("pid1", open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode())
print("sysrq", os.path.exists("/proc/sysrq-trigger") and os.access("/proc/sysrq-trigger", os.W_OK))
]], me, me, me))
    assert.are.equal(Status.SUCCESS, r.status, all)
    assert.is_nil(all:find("READ", 1, true), all)
    assert.truthy(all:find("sysrq False", 1, true), all)
  end)

  it("is robust to garbage written on the protocol channel", function()
    local r = sb:execute_code("import os\nfor fd in range(3, 12):\n    try: os.write(fd, b'{not json}\\n' * 3)\n"
      .. "    except OSError: pass\nprint('ok')")
    -- either the agent's channel ignored it, or the sandbox was declared dead: never a hang
    assert.is_true(r.status == Status.SUCCESS or r.status == Status.TIMEOUT or r.status == Status.UNKNOWN,
      tostring(r))
  end)

  it("cannot flood the host through the protocol channel", function()
    local started = loop.now()
    local r = sb:execute_code("import __main__, os\nos.write(__main__._proto_out_fd, b'x' * (20 * 1024 * 1024))\n"
      .. "import time\ntime.sleep(30)", { timeout = 20 })
    assert.is_true(loop.now() - started < 10, "the flood was not cut short")
    -- the stream broke after the request was delivered: the outcome is unknown
    assert.are.equal(Status.UNKNOWN, r.status, tostring(r))
    assert.truthy(r.error:find("exceeded 1 MiB", 1, true), r.error)
    assert.are.equal(Status.ERROR, sb:execute_code("print(1)").status)
  end)

  teardown(function()
    glsb.log.set_handler(prev_log)
    if sb then pcall(sb.terminate, sb) end
    for _, s in ipairs(sandboxes) do pcall(s.sb.terminate, s.sb) end
    loop.sleep(0.2)
    local left = {}
    for _, s in ipairs(sandboxes) do
      if helper.pid_alive(s.supervisor) then left[#left + 1] = "supervisor " .. s.supervisor end
      if s.init and helper.pid_alive(s.init) then left[#left + 1] = "init " .. s.init end
      if helper.exists(s.workspace) then left[#left + 1] = "workspace " .. s.workspace end
      for _, dir in ipairs(s.cgroups) do
        if helper.exists(dir) then left[#left + 1] = "cgroup " .. dir end
      end
    end
    local mounts_after = helper.mount_count()
    local entries = helper.list_dir(helper.workspace_root(root))
    helper.rm_rf(root)
    helper.rm_rf(victim)
    assert.are.same({}, left)
    assert.are.same({}, entries)
    assert.are.equal(mounts_before, mounts_after)
  end)
end)
