-- confine_cgroup_spec.lua: what the sandbox's cgroup bounds beyond memory and processes:
--   socket buffers (a memory_mb = 128 sandbox queued 1.2 GB of TCP buffers on its own loopback
--     while its memory cgroup showed 6 MiB: v1 now gets memory.kmem.tcp.limit_in_bytes, v2
--     charges sockets to memory.max);
--   CPU (only RLIMIT_CPU per process before: --cpus sets a cgroup quota, default 1 CPU);
--   an OOM kill is reported as such in the exit line of --report-fd (it was indistinguishable
--     from any SIGKILL, so the host said "timed out");
--   the cgroup v2 path (this machine's v2 hierarchy has no controllers): checked through
--     GLSB_CONFINE_CGROUP2_ROOT, a directory standing for the hierarchy, by the files it writes.
local cjson = require "cjson"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

local function require_cgroup(report)
  assert(report and report.applied and report.applied.cgroup,
    "no cgroup limits on this machine (glsb-confine doctor says why); these specs need them")
end

-- Opens loopback TCP connections whose receiver never reads and sends into each until the
-- kernel refuses, up to cap MiB; prints how much the kernel accepted.
local TCP_FILL = [[
import socket, errno, sys, time
CAP = int(sys.argv[1]) << 20
total = 0; pairs = []; stalled = 0
chunk = b"x" * 65536
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1024)
while total < CAP and stalled < 10:
    try:
        c = socket.create_connection(srv.getsockname()); a, _ = srv.accept()
    except OSError as e:
        print("stop", errno.errorcode.get(e.errno)); break
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    pairs.append((c, a)); c.setblocking(False)
    n = 0
    for _ in range(3):
        try:
            while total < CAP:
                k = c.send(chunk); n += k; total += k
        except BlockingIOError:
            time.sleep(0.002)
    stalled = stalled + 1 if n < 65536 else 0
print("queued_mib", total >> 20)
]]

local MMAP_BOMB = [[
import mmap
m = mmap.mmap(-1, 400 << 20)
for i in range(0, 400 << 20, 4096): m[i] = 1
print("survived")
]]

describe("glsb-confine sandbox cgroup limits #security #confine", function()
  setup(H.require_binary)

  it("charges TCP buffers to the memory limit: 128 MiB cannot queue 600 MiB", function()
    local out, code, report = H.sandbox({ "python3", "-c", TCP_FILL, "600" }, { args = { "--memory-mb", "128" },
      timeout = 60 })
    require_cgroup(report)
    assert.are.equal(0, code, out)
    local mib = tonumber(out:match("queued_mib (%d+)"))
    assert.is_number(mib, out)
    assert.is_true(mib <= 160, "the sandbox queued " .. mib .. " MiB in TCP buffers")
    assert.is_true(report.applied.cgroup_sockets)
  end)

  it("holds several busy processes to --cpus 0.1, and defaults to 1 CPU", function()
    local spin = [[
import os, time
t0 = time.time()
pids = []
for i in range(3):
    p = os.fork()
    if p == 0:
        while time.time() - t0 < 1.5: pass
        os._exit(0)
    pids.append(p)
for p in pids: os.waitpid(p, 0)
c = os.times()
print("cpu_per_wall %.3f" % ((c.children_user + c.children_system) / (time.time() - t0)))
]]
    local out, code, report = H.python(spin, { args = { "--cpus", "0.1" }, timeout = 60 })
    require_cgroup(report)
    assert.are.equal(0, code, out)
    assert.are.equal(0.1, report.applied.cgroup_cpus)
    local ratio = tonumber(out:match("cpu_per_wall ([%d.]+)"))
    assert.is_number(ratio, out)
    assert.is_true(ratio <= 0.2, "3 busy processes got " .. ratio .. " CPUs with --cpus 0.1")
    local _, _, dflt = H.sandbox({ "true" })
    assert.are.equal(1, dflt.applied.cgroup_cpus)
    local _, _, none = H.sandbox({ "true" }, { args = { "--cpus", "0" } })
    assert.is_false(none.applied.cgroup_cpus)
  end)

  it("says when PROGRAM was OOM-killed, and only then", function()
    local out, code, report, _, exit = H.python(MMAP_BOMB, { args = { "--memory-mb", "64" }, timeout = 60 })
    require_cgroup(report)
    assert.are.equal(137, code, out)
    assert.is_nil(out:match("survived"))
    assert.is_table(exit, "no exit line on --report-fd")
    assert.are.equal(9, exit.signal)
    assert.is_true(exit.oom_kills >= 1)
    assert.is_true(exit.oom_killed)
    -- a child OOM-killed under a surviving PROGRAM: counted, PROGRAM not OOM-killed
    out, code, _, _, exit = H.sandbox({ "sh", "-c", "python3 -c " .. H.q(MMAP_BOMB) .. "; echo child=$?" },
      { args = { "--memory-mb", "64" }, timeout = 60 })
    assert.are.equal(0, code, out)
    assert.matches("child=137", out)
    assert.are.same({ code = 0, oom_kills = 1, oom_killed = false }, { code = exit.code, oom_kills = exit.oom_kills,
      oom_killed = exit.oom_killed })
    -- SIGKILL for another reason, and an exit code of 137, are not OOM kills
    _, code, _, _, exit = H.sandbox({ "sh", "-c", "kill -9 $$" })
    assert.are.equal(137, code)
    assert.are.equal(9, exit.signal)
    assert.are.equal(0, exit.oom_kills)
    assert.is_false(exit.oom_killed)
    _, code, _, _, exit = H.sandbox({ "sh", "-c", "exit 137" })
    assert.are.equal(137, code)
    assert.are.equal(137, exit.code)
    assert.is_false(exit.oom_killed)
  end)

  it("writes the cgroup v2 knobs from the kernel's documentation (GLSB_CONFINE_CGROUP2_ROOT)", function()
    local fake = H.mktemp_dir()
    finally(function() H.rm_rf(fake) end)
    H.write(fake .. "/cgroup.controllers", "cpuset cpu io memory hugetlb pids\n")
    H.write(fake .. "/cgroup.subtree_control", "")
    local ws, rep = fake .. "/ws", fake .. "/report"
    -- While PROGRAM sleeps, the "kernel" (this shell) counts an OOM kill in memory.events;
    -- then PROGRAM dies of SIGKILL.
    local out = H.sh("GLSB_CONFINE_CGROUP2_ROOT=" .. H.q(fake) .. " " .. H.join({ H.bin, "sandbox", "--cleanup",
      "--workspace", ws, "--report-fd", "3", "--memory-mb", "96", "--max-processes", "50", "--cpus", "0.5", "--",
      "sh", "-c", "sleep 1; kill -9 $$" }) .. " 3>" .. H.q(rep) .. " 2>&1 & p=$!; " ..
      "for i in $(seq 200); do l=$(ls -d " .. H.q(fake) .. "/glsb/sb-* 2>/dev/null) && break; sleep 0.02; done; " ..
      "printf 'low 0\\nhigh 0\\nmax 3\\noom 1\\noom_kill 1\\n' > \"$l/memory.events\"; wait $p; echo rc=$?; echo \"$l\"")
    local leaf = out:match("rc=%d+\n(%S+)\n$")
    assert.matches("rc=137\n", out)
    assert.is_string(leaf, out)
    local report, exit = H.decode_report(H.read(rep))
    assert.are.equal("v2", report.applied.cgroup)
    assert.are.same({ leaf }, report.applied.cgroup_dirs)
    assert.are.equal(0.5, report.applied.cgroup_cpus)
    assert.is_true(report.applied.cgroup_sockets)
    -- each file holds every write, one per line
    assert.are.equal("+memory +pids\n+cpu\n", H.read(fake .. "/cgroup.subtree_control"))
    assert.are.equal("+memory +pids\n+cpu\n", H.read(fake .. "/glsb/cgroup.subtree_control"))
    assert.are.equal(tostring(96 * 1024 * 1024) .. "\n", H.read(leaf .. "/memory.max"))
    assert.are.equal("0\n", H.read(leaf .. "/memory.swap.max"))
    assert.are.equal("50\n", H.read(leaf .. "/pids.max"))
    assert.are.equal("50000 100000\n", H.read(leaf .. "/cpu.max"))
    assert.are.equal(("%d\n"):format(report.pid), H.read(leaf .. "/cgroup.procs"))
    assert.are.same({ code = cjson.null, signal = 9, oom_kills = 1, oom_killed = true }, exit)
  end)
end)
