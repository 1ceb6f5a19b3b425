-- sandbox_spec.lua: `glsb-confine sandbox` confines a program: identity, filesystem, network,
-- pid namespace, limits, seccomp, Landlock, lifetime and reporting. Runs as root, as CI does.
local cjson = require "cjson"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/helper.lua")

describe("glsb-confine sandbox #confine", function()
  setup(function()
    H.require_binary()
  end)

  describe("identity and reporting", function()
    it("runs PROGRAM as uid 1000 'user' with generated /etc files", function()
      local out, code = H.sandbox({ "sh", "-c", "id; hostname; grep ^user: /etc/passwd; pwd" })
      assert.are.equal(0, code, out)
      assert.matches("uid=1000%(user%) gid=1000%(user%) groups=1000%(user%)", out)
      assert.matches("\nsandbox\n", out)
      assert.matches("user:x:1000:1000:user:/home/user:/bin/bash", out, 1, true)
      assert.matches("\n/home/user\n", out)
    end)

    it("writes one JSON line to --report-fd saying what was applied", function()
      local out, code, report = H.sandbox({ "true" })
      assert.are.equal(0, code, out)
      assert.is_table(report, "no report line")
      assert.is_true(report.ok)
      assert.is_number(report.pid)
      local a = report.applied
      for _, ns in ipairs({ "userns", "mountns", "pidns", "netns", "ipcns", "utsns" }) do
        assert.is_true(a[ns], ns)
      end
      assert.is_true(a.seccomp)
      assert.is_true(a.no_new_privs)
      assert.is_true(a.landlock_abi >= 1)
      assert.are.same({}, report.missing)
      assert.are.equal(1000, a.uid)
    end)

    it("maps the sandbox user to an unprivileged host id (root caller) and owns the workspace", function()
      local out, code, report, ws = H.sandbox({ "sh", "-c", "echo x > /home/user/f" },
        { keep = true, args = { "--id-base", "1500000000" } })
      finally(function() H.rm_rf(ws) end)
      assert.are.equal(0, code, out)
      assert.are.equal(1500001000, report.applied.host_uid)
      local owner = H.sh("stat -c %u:%g " .. H.q(ws .. "/home/f") .. " " .. H.q(ws .. "/files"))
      assert.are.equal("1500001000:1500001000\n1500001000:1500001000\n", owner)
    end)

    it("works for an unprivileged caller, mapping uid 1000 to the caller", function()
      local base = H.mktemp_dir()
      finally(function() H.rm_rf(base) end)
      os.execute("chown nobody:nogroup " .. H.q(base))
      local report_file = base .. "/report"
      local out, code = H.sh("setpriv --reuid=65534 --regid=65534 --clear-groups " ..
        H.join({ H.bin, "sandbox", "--workspace", base .. "/ws", "--report-fd", "3", "--",
          "sh", "-c", "id -u; echo hi > /home/user/f" }) .. " 3>" .. H.q(report_file) .. " 2>&1")
      assert.are.equal(0, code, out)
      assert.are.equal("1000\n", out)
      local report = H.decode_report(H.read(report_file))
      assert.are.equal(65534, report.applied.host_uid)
      assert.are.equal("65534\n", H.sh("stat -c %u " .. H.q(base .. "/ws/home/f")))
    end)

    it("reports a failure as ok=false and exits 125", function()
      local out, code, report = H.sandbox({ "no-such-program-xyz" })
      assert.are.equal(125, code, out)
      assert.is_false(report.ok)
      assert.matches("no%-such%-program%-xyz", report.error)
    end)

    it("fails closed, naming the missing features, where namespaces are denied", function()
      -- Inside a sandbox the seccomp filter denies new namespaces: a nested sandbox must refuse
      -- to start, also with --allow-degraded (user, mount and pid namespaces are essential).
      for _, extra in ipairs({ "", "--allow-degraded " }) do
        local out, code = H.sandbox({ "sh", "-c", "/opt/glsb-confine sandbox " .. extra ..
          "--workspace /tmp/w --report-fd 3 -- true 3>&1; echo rc=$?" },
          { args = { "--ro-bind", H.bin, "/opt/glsb-confine" } })
        assert.are.equal(0, code, out)
        assert.matches("rc=125\n$", out)
        local report = require("cjson").decode(out:match("^[^\n]+"))
        assert.is_false(report.ok)
        assert.matches("missing userns", report.error)
        assert.are.equal("userns", report.missing[1])
      end
    end)

    -- A kernel without Landlock or seccomp filters, simulated by running glsb-confine under
    -- bubblewrap with a seccomp filter that makes those calls fail (bwrap shares everything
    -- else: --dev-bind / /).
    local function without(feature)
      local _, has_bwrap = H.sh("command -v bwrap >/dev/null")
      assert(has_bwrap == 0, "this test needs bubblewrap (apt-get install bubblewrap)")
      local function ins(code, jt, jf, k) return string.pack("<I2BBI4", code, jt, jf, k) end
      local LD, JEQ, RET, ALLOW = 0x20, 0x15, 0x06, 0x7fff0000
      local function errno(e) return 0x00050000 | e end
      local prog = ins(LD, 0, 0, 0) -- syscall number
      if feature == "landlock" then
        for _, nr in ipairs({ 444, 445, 446 }) do
          prog = prog .. ins(JEQ, 0, 1, nr) .. ins(RET, 0, 0, errno(38)) -- ENOSYS
        end
      elseif feature == "netns" then -- clone/unshare with CLONE_NEWNET fail with EPERM
        prog = prog .. ins(JEQ, 1, 0, 56) .. ins(JEQ, 0, 3, 272) .. ins(LD, 0, 0, 16) ..
          ins(0x45, 0, 1, 0x40000000) .. ins(RET, 0, 0, errno(1))
      else -- seccomp(2) and prctl(PR_SET_SECCOMP, ...) fail with EINVAL
        prog = prog .. ins(JEQ, 0, 1, 317) .. ins(RET, 0, 0, errno(22)) ..
          ins(JEQ, 0, 3, 157) .. ins(LD, 0, 0, 16) .. ins(JEQ, 0, 1, 22) .. ins(RET, 0, 0, errno(22))
      end
      local path = os.tmpname()
      local fh = assert(io.open(path, "wb"))
      fh:write(prog .. ins(RET, 0, 0, ALLOW))
      fh:close()
      return path
    end

    for _, feature in ipairs({ "landlock", "seccomp", "netns" }) do
      it("fails closed without " .. feature .. ", and --allow-degraded starts and says so", function()
        local filter = without(feature)
        local base = H.mktemp_dir()
        finally(function() os.remove(filter); H.rm_rf(base) end)
        for _, degraded in ipairs({ false, true }) do
          local words = { "bwrap", "--dev-bind", "/", "/", "--seccomp", "9", "--", H.bin, "sandbox",
            "--cleanup", "--workspace", base .. "/ws", "--report-fd", "3" }
          if degraded then words[#words + 1] = "--allow-degraded" end
          words[#words + 1] = "--"
          words[#words + 1] = "true"
          local out, code = H.sh(H.join(words) .. " 9<" .. H.q(filter) .. " 3>&1 2>/dev/null")
          local report = H.decode_report(out)
          assert.are.same({ feature }, report.missing)
          if degraded then
            assert.are.equal(0, code, out)
            assert.is_true(report.ok)
            if feature == "landlock" then assert.are.equal(0, report.applied.landlock_abi) end
            if feature == "seccomp" then assert.is_false(report.applied.seccomp) end
            if feature == "netns" then assert.is_false(report.applied.netns) end
          else
            assert.are.equal(125, code, out)
            assert.is_false(report.ok)
            local expect = { landlock = "Landlock unavailable", seccomp = "seccomp filter unavailable",
              netns = "missing netns" }
            assert.matches(expect[feature], report.error)
          end
        end
      end)
    end

    it("fails with usage errors as 2", function()
      local _, code = H.sh(H.q(H.bin) .. " sandbox --bogus -- true 2>&1")
      assert.are.equal(2, code)
      local help, hcode = H.sh(H.q(H.bin) .. " sandbox --help")
      assert.are.equal(0, hcode)
      assert.matches("--report-fd", help, 1, true)
      assert.matches("NOT bounded", help, 1, true)
      assert.matches("--storage private|workspace", help, 1, true)
    end)

    it("exits with PROGRAM's code, or 128+signal", function()
      local _, code = H.sandbox({ "sh", "-c", "exit 7" })
      assert.are.equal(7, code)
      _, code = H.sandbox({ "sh", "-c", "kill -TERM $$" })
      assert.are.equal(143, code)
    end)

    it("gives PROGRAM exactly the --env entries plus HOME, PATH and LANG", function()
      local out, code = H.sandbox({ "/usr/bin/env" }, { args = { "--env", "FOO=bar" } })
      assert.are.equal(0, code, out)
      local keys = {}
      for k in out:gmatch("([%w_]+)=[^\n]*\n") do keys[#keys + 1] = k end
      table.sort(keys)
      assert.are.same({ "FOO", "HOME", "LANG", "PATH" }, keys)
      assert.matches("HOME=/home/user", out, 1, true)
    end)

    it("lets PROGRAM reopen its stdout/stderr pipes through /dev/stdout and /dev/stderr", function()
      local out, code = H.sandbox({ "sh", "-c", "echo one > /dev/stdout; echo two > /dev/stderr" })
      assert.are.equal(0, code, out)
      assert.are.equal("one\ntwo\n", out)
    end)

    it("passes stdin through and no other descriptor", function()
      local out, code = H.sandbox({ "sh", "-c", "cat; ls /proc/self/fd | tr '\\n' ' '" },
        { stdin = "hello-stdin\n" })
      assert.are.equal(0, code, out)
      assert.matches("hello%-stdin", out)
      -- 0 1 2 and ls's own directory fd (3); the report fd and anything else are closed.
      assert.matches("^hello%-stdin\n0 1 2 3 $", out)
    end)
  end)

  describe("filesystem", function()
    it("cannot read /etc/shadow, absent or bound in", function()
      local out, code = H.sandbox({ "cat", "/etc/shadow" })
      assert.are_not.equal(0, code)
      assert.matches("No such file", out)
      out, code = H.sandbox({ "cat", "/opt/shadow" }, { args = { "--ro-bind", "/etc/shadow", "/opt/shadow" } })
      assert.are_not.equal(0, code)
      assert.matches("Permission denied", out)
    end)

    it("cannot write the system or the root", function()
      local out, code = H.sandbox({ "sh", "-c", "touch /usr/x; touch /etc/x; touch /x; echo done" })
      assert.are.equal(0, code, out)
      local _, n = out:gsub("Read%-only file system", "")
      assert.are.equal(3, n, out)
    end)

    it("writes to /home/user and /files land in the host workspace; /tmp does not", function()
      local out, code, _, ws = H.sandbox({ "sh", "-c",
        "echo home > /home/user/h.txt && echo files > /files/f.txt && echo tmp > /tmp/t.txt && cat /tmp/t.txt" },
        { keep = true })
      finally(function() H.rm_rf(ws) end)
      assert.are.equal(0, code, out)
      assert.matches("tmp", out)
      assert.are.equal("home\n", H.read(ws .. "/home/h.txt"))
      assert.are.equal("files\n", H.read(ws .. "/files/f.txt"))
      assert.is_false(H.exists(ws .. "/t.txt"))
      assert.is_false(H.exists(ws .. "/home/t.txt"))
    end)

    it("Landlock denies writes outside the allowed trees (/proc/self/comm)", function()
      local out, code = H.sandbox({ "sh", "-c", "echo x > /proc/self/comm" })
      assert.are_not.equal(0, code)
      assert.matches("Permission denied", out)
    end)

    it("--cleanup removes the workspace; without it the workspace stays", function()
      local ws = H.mktemp_dir()
      finally(function() H.rm_rf(ws) end)
      local out, code = H.sandbox({ "sh", "-c", "mkdir -p a/b && ln -s /etc a/b/link && echo x > a/f" },
        { workspace = ws })
      assert.are.equal(0, code, out)
      assert.is_true(H.exists(ws .. "/home/a/f"))
      out, code = H.sandbox({ "true" }, { workspace = ws, args = { "--cleanup" } })
      assert.are.equal(0, code, out)
      assert.is_false(H.exists(ws))
      assert.is_true(H.exists("/etc/passwd")) -- the symlink was not followed
    end)

    it("extra --ro-bind is readable, not writable", function()
      local out, code = H.sandbox({ "sh", "-c", "ls /opt/doc >/dev/null && touch /opt/doc/x" },
        { args = { "--ro-bind", "/usr/share/doc", "/opt/doc" } })
      assert.are_not.equal(0, code)
      assert.matches("Read%-only file system", out)
    end)
  end)

  describe("processes and kernel surface", function()
    it("has its own pid namespace: PROGRAM is pid 2 under our init", function()
      local out, code = H.sandbox({ "sh", "-c", "echo $$; cat /proc/1/comm; ls /proc | grep -c '^[0-9]'" })
      assert.are.equal(0, code, out)
      local pid, init, n = out:match("^(%d+)\n(%S+)\n(%d+)\n$")
      assert.are.equal("2", pid, out)
      assert.are.equal("glsb-confine", init)
      assert.is_true(tonumber(n) <= 5, out)
    end)

    it("sees its own cgroup as the root of its cgroup namespace", function()
      local out, code, report = H.sandbox({ "cat", "/proc/self/cgroup" })
      assert.are.equal(0, code, out)
      assert.is_true(report.applied.cgroupns)
      for line in out:gmatch("[^\n]+") do assert.matches(":/$", line) end
    end)

    it("has no capabilities, no_new_privs and a seccomp filter", function()
      local out, code = H.sandbox({ "grep", "-E", "^(CapEff|CapBnd|NoNewPrivs|Seccomp):", "/proc/self/status" })
      assert.are.equal(0, code, out)
      assert.matches("CapEff:%s+0000000000000000", out)
      assert.matches("CapBnd:%s+0000000000000000", out)
      assert.matches("NoNewPrivs:%s+1", out)
      assert.matches("Seccomp:%s+2", out)
    end)

    it("denies mount, unshare, setns, ptrace and clone3 (ENOSYS)", function()
      local out, code = H.python([[
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def err(r): return "%d/%d" % (r, ctypes.get_errno())
print("mount", err(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
print("unshare", err(libc.unshare(0x10000000)))
print("setns", err(libc.setns(os.open("/proc/self/ns/net", os.O_RDONLY), 0)))
print("ptrace", err(libc.ptrace(0, 0, 0, 0)))
print("clone3", err(libc.syscall(435, 0, 0)))
print("clone_newuser", err(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)))
]])
      assert.are.equal(0, code, out)
      assert.matches("mount %-1/1\n", out)
      assert.matches("unshare %-1/1\n", out)
      assert.matches("setns %-1/1\n", out)
      assert.matches("ptrace %-1/1\n", out)
      assert.matches("clone3 %-1/38\n", out)
      assert.matches("clone_newuser %-1/1\n", out)
    end)

    it("still lets programs fork and run threads", function()
      local out, code = H.python([[
import os, threading, subprocess
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
]])
      assert.are.equal(0, code, out)
      assert.matches("^child\n$", out)
    end)
  end)

  describe("network", function()
    local server_pid, port, logfile

    setup(function()
      logfile = os.tmpname()
      local out = H.sh("python3 -u -m http.server --bind 127.0.0.1 0 >" .. H.q(logfile) ..
        " 2>&1 & echo $!")
      server_pid = assert(tonumber(out), "could not start the loopback server")
      assert(H.wait_until(function()
        port = (H.read(logfile) or ""):match("port (%d+)")
        return port ~= nil
      end, 10), "loopback http.server did not start")
    end)

    teardown(function()
      if server_pid then os.execute("kill " .. server_pid .. " 2>/dev/null; wait " .. server_pid .. " 2>/dev/null") end
      if logfile then os.remove(logfile) end
    end)

    local fetch = [[
import sys, urllib.request
try:
    print("status", urllib.request.urlopen("http://127.0.0.1:%s/", timeout=3).status)
except Exception as e:
    print("error", type(e).__name__)
]]

    it("cannot reach a host loopback server by default", function()
      local out, code = H.python(fetch:format(port))
      assert.are.equal(0, code, out)
      assert.matches("^error", out)
    end)

    it("cannot reach it with --network either: the network is the sandbox's own (slirp4netns)", function()
      local out, code = H.python(fetch:format(port), { args = { "--network" } })
      assert.are.equal(0, code, out)
      assert.matches("^error", out)
      -- nor through slirp4netns's alias of the host's loopback
      out, code = H.python(fetch:format(port):gsub("127%.0%.0%.1", "10.0.2.2"), { args = { "--network" } })
      assert.are.equal(0, code, out)
      assert.matches("^error", out)
    end)

    it("cannot connect to the host's abstract unix sockets, even with --network", function()
      local name = "glsb-spec-" .. tostring(math.random(100000, 999999))
      local listener = tonumber((H.sh("python3 -c " .. H.q(
        "import socket,time\ns=socket.socket(socket.AF_UNIX)\ns.bind('\\0" .. name ..
        "')\ns.listen()\ntime.sleep(20)") .. " >/dev/null 2>&1 & echo $!")))
      finally(function() os.execute("kill " .. listener .. " 2>/dev/null") end)
      local probe = ("import socket,time\nfor i in range(40):\n  s=socket.socket(socket.AF_UNIX)\n" ..
        "  try:\n    s.connect('\\0%s'); print('connected'); break\n  except OSError as e:\n" ..
        "    err=e.errno; time.sleep(0.05)\nelse: print('errno', err)\n"):format(name)
      -- the probe itself proves the listener is up from the host
      local host_out = H.sh("python3 -c " .. H.q(probe))
      assert.matches("^connected", host_out)
      local out, code = H.python(probe, { args = { "--network" } })
      assert.are.equal(0, code, out)
      -- abstract names are per net namespace, and --network's is the sandbox's own: no such name
      -- there (ECONNREFUSED; when --network shared the host's, the Landlock scope refused it: EPERM)
      assert.matches("^errno 111\n", out)
    end)

    it("has a working loopback of its own", function()
      local out, code = H.python([[
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept(); c.send(b"ok"); print(a.recv(2).decode())
]])
      assert.are.equal(0, code, out)
      assert.matches("^ok\n$", out)
    end)
  end)

  describe("limits", function()
    it("stops a heap memory bomb", function()
      local out, code = H.python([[
a = []
while True: a.append(bytearray(10 << 20))
]], { args = { "--memory-mb", "100" }, timeout = 60 })
      assert.are_not.equal(0, code)
      assert.matches("MemoryError", out)
    end)

    it("the cgroup limit stops shared memory that rlimits do not count", function()
      local _, _, report = H.sandbox({ "true" })
      assert(report.applied.cgroup, "no cgroup limits on this machine (doctor tells why)")
      local out, code = H.python([[
import mmap
m = mmap.mmap(-1, 400 << 20)
for i in range(0, 400 << 20, 4096): m[i] = 1
print("survived")
]], { args = { "--memory-mb", "100" }, timeout = 60 })
      assert.are.equal(137, code, out) -- OOM-killed
      assert.is_nil(out:match("survived"))
    end)

    it("stops a fork bomb at --max-processes", function()
      -- every fork's command line carries the marker (processes of other sandboxes on this
      -- machine do not)
      local marker = "fork-bomb-" .. tostring(math.random(100000, 999999))
      local out, code = H.python("# " .. marker .. [[

import os, time
n = 0
try:
    while n < 200:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
except OSError as e:
    print("stopped", n, e.errno)
]], { args = { "--max-processes", "20" }, timeout = 60 })
      assert.are.equal(0, code, out)
      local n, errno = out:match("stopped (%d+) (%d+)")
      assert.is_truthy(n, out)
      assert.is_true(tonumber(n) < 20)
      assert.are.equal("11", errno) -- EAGAIN
      -- the sleepers died with the sandbox's init
      assert.are.equal(0, H.count_procs(marker))
    end)

    it("stops a busy loop at --cpu-seconds", function()
      local out, code = H.sandbox({ "sh", "-c", "while :; do :; done" },
        { args = { "--cpu-seconds", "1" }, timeout = 30 })
      assert.are.equal(128 + 24, code, out) -- SIGXCPU
    end)

    it("caps open files at --max-open-files", function()
      local out, code = H.python([[
import os
fds = []
try:
    while len(fds) < 1000: fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(len(fds) + 3, e.errno)
]], { args = { "--max-open-files", "32" } })
      assert.are.equal(0, code, out)
      local n, errno = out:match("(%d+) (%d+)")
      assert.is_true(tonumber(n) <= 32, out)
      assert.are.equal("24", errno) -- EMFILE
    end)

    it("caps file size and /tmp", function()
      local out, code = H.sandbox({ "sh", "-c",
        "head -c 3000000 /dev/zero > /home/user/big; echo big=$?; head -c 9000000 /dev/zero > /tmp/t; " ..
        "echo tmp=$?; df -m /tmp | tail -1; wc -c < /home/user/big" },
        { args = { "--max-file-mb", "2", "--disk-mb", "5" } })
      assert.are.equal(0, code, out)
      assert.is_nil(out:match("big=0"), out) -- killed by SIGXFSZ at 2 MB
      assert.is_nil(out:match("tmp=0"), out) -- /tmp full at 5 MB
      assert.matches("\ntmpfs%s+5%s", out)
      assert.matches("\n2097152\n$", out)
    end)

    it("removes its cgroup when done", function()
      local _, code, report = H.sandbox({ "sh", "-c", "cat /proc/self/cgroup" })
      assert.are.equal(0, code)
      assert(report.applied.cgroup, "no cgroup limits on this machine (doctor tells why)")
      assert.is_true(#report.applied.cgroup_dirs >= 1)
      for _, dir in ipairs(report.applied.cgroup_dirs) do
        assert.matches("/glsb/sb%-", dir)
        assert.is_false(H.exists(dir), "left behind: " .. dir)
      end
    end)
  end)

  describe("cgroup leftovers", function()
    it("the next sandbox removes empty leaves of dead supervisors", function()
      local _, code, report = H.sandbox({ "true" })
      assert.are.equal(0, code)
      assert(report.applied.cgroup, "no cgroup limits on this machine (doctor tells why)")
      local dead = tonumber((H.sh("sh -c 'echo $$'")))
      local stale = {}
      for _, dir in ipairs(report.applied.cgroup_dirs) do
        local leaf = dir:gsub("/sb%-[^/]+$", "/sb-" .. dead .. "-1")
        assert.is_true(os.execute("mkdir " .. H.q(leaf)))
        stale[#stale + 1] = leaf
      end
      finally(function() for _, leaf in ipairs(stale) do os.execute("rmdir " .. H.q(leaf) .. " 2>/dev/null") end end)
      _, code = H.sandbox({ "true" })
      assert.are.equal(0, code)
      for _, leaf in ipairs(stale) do assert.is_false(H.exists(leaf), leaf) end
    end)
  end)

  describe("lifetime", function()
    it("forwards SIGTERM to PROGRAM", function()
      local ws = H.mktemp_dir()
      finally(function() H.rm_rf(ws) end)
      local out = H.sh(H.join({ H.bin, "sandbox", "--workspace", ws, "--", "sleep", "100" }) ..
        " & p=$!; sleep 0.5; kill -TERM $p; wait $p; echo rc=$?")
      assert.matches("rc=143", out)
    end)

    it("ends when the reported init pid is killed, and cleans up", function()
      local base = H.mktemp_dir()
      finally(function() H.rm_rf(base) end)
      local ws, rep = base .. "/ws", base .. "/report"
      local out = H.sh(H.join({ H.bin, "sandbox", "--cleanup", "--workspace", ws, "--report-fd", "3",
        "--", "sleep", "100" }) .. " 3>" .. H.q(rep) .. " & p=$!; " ..
        "for i in $(seq 100); do grep -q pid " .. H.q(rep) .. " && break; sleep 0.05; done; " ..
        "kill -9 $(sed 's/.*\"pid\":\\([0-9]*\\).*/\\1/' " .. H.q(rep) .. "); wait $p; echo rc=$?")
      assert.matches("rc=137", out)
      assert.is_false(H.exists(ws))
    end)

    it("kills every sandbox process when the supervisor itself is SIGKILLed", function()
      local ws = H.mktemp_dir()
      local sup
      -- busted keeps one finally per test: it does all the cleaning
      finally(function()
        if sup then os.execute("kill -9 " .. sup .. " 2>/dev/null") end
        H.rm_rf(ws)
      end)
      local marker = "sleep 4" .. tostring(math.random(100000, 999999))
      -- The supervisor's parent must outlive it (else PDEATHSIG ends the test early): a shell
      -- that records the supervisor's pid and waits.
      local pidfile = ws .. "/sup.pid"
      local inner = H.join({ H.bin, "sandbox", "--workspace", ws, "--", "sh", "-c",
        marker .. " & " .. marker }) .. " & echo $! > " .. H.q(pidfile) .. "; wait"
      os.execute("sh -c " .. H.q(inner) .. " >/dev/null 2>&1 &")
      assert.is_true(H.wait_until(function() return tonumber(H.read(pidfile)) ~= nil end, 5))
      sup = tonumber(H.read(pidfile))
      assert.is_true(H.wait_until(function() return H.count_procs(marker) >= 4 end, 10),
        "sandbox did not start")
      os.execute("kill -9 " .. sup)
      assert.is_true(H.wait_until(function() return H.count_procs(marker) == 0 end, 5),
        "sandbox processes survived the supervisor")
      -- Its cgroup leaves could not be removed by it; the next sandbox collects them.
      local _, code, report = H.sandbox({ "true" })
      assert.are.equal(0, code)
      for _, dir in ipairs(report.applied.cgroup_dirs or {}) do
        local parent = dir:match("^(.*)/[^/]+$")
        local left = H.sh("ls " .. H.q(parent) .. " | grep -c '^sb-" .. sup .. "-'")
        assert.are.equal("0\n", left, parent)
      end
    end)

    it("kills every sandbox process and cleans up when its parent is killed", function()
      local ws = H.mktemp_dir()
      local parent
      finally(function()
        if parent then os.execute("kill -9 " .. parent .. " 2>/dev/null") end
        H.rm_rf(ws)
      end)
      local marker = "sleep 3" .. tostring(math.random(100000, 999999))
      -- The parent is a shell that waits for glsb-confine (the trailing `; true` keeps it from
      -- exec'ing), and the sandbox starts two sleepers.
      local inner = H.join({ H.bin, "sandbox", "--cleanup", "--workspace", ws, "--", "sh", "-c",
        marker .. " & " .. marker })
      parent = tonumber((H.sh("sh -c " .. H.q(inner .. "; true") .. " >/dev/null 2>&1 & echo $!")))
      assert.is_number(parent)
      -- outer sh, glsb-confine, init, inner sh, two sleepers
      assert.is_true(H.wait_until(function() return H.count_procs(marker) >= 5 end, 10),
        "sandbox did not start")
      os.execute("kill -9 " .. parent)
      assert.is_true(H.wait_until(function() return H.count_procs(marker) == 0 end, 5),
        "sandbox processes survived their parent")
      assert.is_true(H.wait_until(function() return not H.exists(ws) end, 5),
        "workspace not cleaned up")
    end)
  end)

  it("starts quickly (under 100 ms for /bin/true, median of 5)", function()
    local ws = H.mktemp_dir()
    finally(function() H.rm_rf(ws) end)
    local out = H.sh("for i in 1 2 3 4 5; do s=$(date +%s%N); " .. H.join({ H.bin, "sandbox",
      "--workspace", ws, "--", "/bin/true" }) .. "; e=$(date +%s%N); echo $(( (e - s) / 1000 )); done")
    local t = {}
    for us in out:gmatch("%d+") do t[#t + 1] = tonumber(us) end
    table.sort(t)
    assert.are.equal(5, #t)
    assert.is_true(t[3] < 100000, "median " .. t[3] .. " us")
  end)

  it("report JSON parses with cjson", function()
    local _, _, report = H.sandbox({ "true" })
    assert.is_string(cjson.encode(report))
  end)
end)
