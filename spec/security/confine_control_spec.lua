-- confine_control_spec.lua: the control channel of `glsb-confine sandbox` (src/confine/CONTROL.md).
-- The workspace primitives and transfers ran through the sandbox's own program (the local agent),
-- so code in the sandbox could replace them and forge their results. Through --control-fd the
-- supervisor runs `glsb-confine write|run|read|pack` in a confined child of its own: the sandbox's
-- view, user, limits and seccomp filter, but a Landlock domain the code's is not an ancestor of,
-- non-dumpable, so the code can neither signal, trace, nor read or write its memory or pipes;
-- and the result reaches the host on a descriptor only the host holds. Driven here directly, by a
-- Python host on a socketpair.
local cjson = require "cjson"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

-- The host side (Sandbox, frames, calls): spec/confine/control_driver.py.
local DRIVER = H.read(H.root .. "/spec/confine/control_driver.py")

local HOSTILE = [=[
import os, signal, errno, time, sys
me, seen, end = os.getpid(), {}, time.time() + float(sys.argv[1])
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in (1, me): continue
        pid = int(p)
        try: cmd = open("/proc/%d/cmdline" % pid, "rb").read()
        except OSError: continue
        if b"hostile" in cmd: continue
        r = seen.setdefault(pid, {"cmd": cmd.split(b"\0")[0].decode(errors="replace")})
        for name, fn in (("kill", lambda: os.kill(pid, signal.SIGKILL)),
                         ("mem", lambda: open("/proc/%d/mem" % pid, "r+b").close()),
                         ("stdout", lambda: open("/proc/%d/fd/1" % pid, "wb").close())):
            try: fn(); r[name] = "OK"
            except OSError as e: r[name] = errno.errorcode.get(e.errno)
    time.sleep(0.001)
for pid, r in sorted(seen.items()): print("seen", r, flush=True)
]=]

describe("glsb-confine sandbox --control-fd #security #confine", function()
  local base
  setup(H.require_binary)
  before_each(function() base = H.mktemp_dir() end)
  after_each(function() H.rm_rf(base) end)

  -- Runs script (after DRIVER) as the host; returns the JSON objects it printed, and all output.
  local function host(script, opts)
    opts = opts or {}
    H.write(base .. "/host.py", DRIVER .. script)
    local bin = H.sh("realpath " .. H.q(H.bin)):gsub("\n$", "")
    if opts.prefix then
      -- an unprivileged host runs its own copy: the checkout may sit where that user cannot go (a clone
      -- under /root, mode 700)
      H.sh("cp " .. H.q(bin) .. " " .. H.q(base .. "/glsb-confine") .. " && chmod 755 " .. H.q(base .. "/glsb-confine"))
      bin = base .. "/glsb-confine"
    end
    local cmd = "GLSB_BIN=" .. H.q(bin) .. " WS=" .. H.q(base .. "/ws") .. " BASE=" .. H.q(base) .. " timeout 120 " ..
      (opts.prefix or "") .. "/usr/bin/python3 " .. H.q(base .. "/host.py") .. " 2>&1"
    local out = H.sh(cmd)
    local docs = {}
    for line in out:gmatch("[^\n]+") do
      local ok, doc = pcall(cjson.decode, line)
      if ok and type(doc) == "table" then docs[#docs + 1] = doc end
    end
    return docs, out
  end

  it("writes, runs and reads in the sandbox's view, as its user", function()
    local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"]], ["sh", "-c", "sleep 3; cat /home/user/notes/a.txt"])
h, o, e = sb.call(1, ["write", "--root", "/home/user", "--path", "notes/a.txt", "--max-bytes", "100"], b"from the host\n")
emit(step="write", h=h, r=result(o))
h, o, e = sb.call(2, ["run", "--root", "/home/user", "--", "sh", "-c", "id -u; cat notes/a.txt; ls /proc | grep -c '^[0-9]'"])
emit(step="run", h=h, r=result(o))
h, o, e = sb.call(3, ["read", "--root", "/home/user", "--path", "notes/a.txt", "--max-bytes", "100"])
emit(step="read", h=h, data=o.decode())
emit(step="end", status=sb.end(), ok=sb.report["ok"])
]=])
    assert.are.equal(4, #docs, out)
    assert.are.same({ ok = true, bytes = 14, path = "notes/a.txt", replaced = false }, docs[1].r)
    assert.are.equal(0, docs[1].h.code)
    local run = docs[2].r
    assert.is_true(run.ok)
    assert.are.equal(0, run.exit_code)
    local stdout = H.sh("printf %s " .. H.q(run.stdout) .. " | base64 -d")
    local uid, text, nprocs = stdout:match("^(%d+)\n(.-\n)(%d+)\n$")
    assert.are.equal("1000", uid)
    assert.are.equal("from the host\n", text)
    assert.is_true(tonumber(nprocs) <= 8, stdout) -- the sandbox's pid namespace
    assert.are.equal('{"ok":true,"bytes":14}\nfrom the host\n', docs[3].data)
    assert.are.equal(0, docs[4].status)
  end)

  for _, mode in ipairs({ "root", "unprivileged" }) do
    it("cannot be reached by the code in the sandbox (" .. mode .. ")", function()
      H.write(base .. "/hostile.py", HOSTILE)
      local prefix = ""
      if mode == "unprivileged" then
        os.execute("chown -R nobody:nogroup " .. H.q(base))
        prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups "
      end
      local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"], "--ro-bind", os.environ["BASE"] + "/hostile.py",
              "/opt/hostile.py"], ["python3", "/opt/hostile.py", "4"])
time.sleep(0.3)
good = 0
for i in range(25):
    h, o, e = sb.call(i, ["run", "--root", "/home/user", "--", "sh", "-c", "sleep 0.05; echo call-%d" % i])
    r = result(o)
    good += h.get("code") == 0 and r["ok"] and r["stdout"] == __import__("base64").b64encode(b"call-%d\n" % i).decode()
emit(good=good, status=sb.end())
]=], { prefix = prefix })
      assert.are.equal(25, docs[1] and docs[1].good, out)
      assert.are.equal(0, docs[1].status, out)
      -- the hostile program saw the calls' processes and could do nothing to them
      local seen = 0
      for line in out:gmatch("seen ([^\n]+)") do
        seen = seen + 1
        assert.is_nil(line:find("'OK'", 1, true), line)
      end
      assert.is_true(seen >= 25, out)
      assert.matches("'cmd': 'glsb%-confine'", out)
      assert.is_nil(out:find("--workspace", 1, true), out) -- no host command line, ever
    end)
  end

  it("answers ping and stats, refuses a second call and other commands, cancels", function()
    local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"]], ["sleep", "30"])
sb.sock.sendall(b"ping 1\nstats 2\n")
emit(a=sb.frame()[0]); emit(a=sb.frame()[0])
h, o, e = sb.call(5, ["sandbox", "--workspace", "/tmp/x", "--", "true"])
emit(a=h)
sb.send_call(3, ["run", "--root", "/home/user", "--", "sleep", "30"])
h, o, e = sb.call(4, ["run", "--root", "/home/user", "--", "true"])
emit(a=h)
t = time.time()
sb.sock.sendall(b"cancel 3\n")
h, o, e = sb.wait_call()
emit(a=h, r=result(o), secs=time.time() - t)
sb.sock.sendall(b"bogus request\n")
emit(a=sb.frame()[0])
os.kill(sb.pid, 1)
emit(status=sb.end())
]=])
    assert.are.same({ id = 1, ev = "pong" }, docs[1].a, out)
    assert.are.equal("stats", docs[2].a.ev)
    assert.is_number(docs[2].a.memory_bytes)
    assert.are.equal("not_allowed", docs[3].a.error)
    assert.are.equal("busy", docs[4].a.error)
    assert.are.equal(4, docs[4].a.id)
    assert.is_table(docs[5], out)
    assert.are.equal("exit", docs[5].a.ev)
    assert.are.equal(3, docs[5].a.id)
    assert.are.equal("interrupted", docs[5].r.error) -- run killed its command on SIGTERM
    assert.is_true(docs[5].secs < 5)
    assert.are.equal("protocol_error", docs[6].a.ev)
  end)

  it("carries 8 MiB of output with --max-output 8 MiB whole", function()
    local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"]], ["sleep", "30"])
h, o, e = sb.call(1, ["run", "--root", "/home/user", "--max-output", str(8 << 20), "--", "head", "-c", str(8 << 20), "/dev/zero"])
r = result(o)
emit(code=h["code"], count=r["stdout_byte_count"], kept=len(__import__("base64").b64decode(r["stdout"])), trunc=r["stdout_truncated"])
os.kill(sb.pid, 1); sb.end()
]=])
    assert.are.same({ code = 0, count = 8388608, kept = 8388608, trunc = false }, docs[1], out)
  end)

  -- A helper that a signal ends (SIGTERM of a cancelled read, SIGXFSZ past --max-file-mb) ends
  -- its call only. The relay between supervisor and helper is a raw clone(): glibc's raise()
  -- there signalled the supervisor (its cached thread id), which passed SIGTERM on to PROGRAM
  -- or died of SIGXFSZ. The host script restores SIGXFSZ's default action, as glsb-lua has it
  -- (Python ignores it, which hid the second case).
  it("a call ended by a signal ends only that call: the sandbox goes on", function()
    local docs, out = host([=[
import signal; signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"], "--disk-mb", "512"],
             ["sh", "-c", "head -c 300000000 /dev/zero > /tmp/big; echo made > /home/user/made; sleep 30"])
while sb.call(1, ["read", "--root", "/home/user", "--path", "made", "--max-bytes", "10"])[0]["code"]:
    time.sleep(0.05)
sb.send_call(2, ["read", "--root", "/tmp", "--path", "big", "--max-bytes", str(400 << 20)])
emit(first=sb.frame()[0]["ev"])
sb.sock.sendall(b"cancel 2\n")
h, o, e = sb.wait_call()
emit(read=h)
h, o, e = sb.call(3, ["run", "--root", "/home/user", "--", "echo", "still here"])
emit(after=h, out=o.decode(errors="replace")[:300])
os.kill(sb.pid, 1)
emit(status=sb.end())
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"] + "2", "--max-file-mb", "8"], ["sleep", "30"])
h, o, e = sb.call(1, ["write", "--root", "/files", "--path", "q", "--max-bytes", str(10 << 20)], b"z" * (10 << 20))
emit(write=h, r=o.decode(errors="replace")[:300])
h, o, e = sb.call(2, ["run", "--root", "/home/user", "--", "echo", "still here"])
emit(after=h, out=o.decode(errors="replace")[:300])
os.kill(sb.pid, 1)
emit(status=sb.end())
]=])
    assert.are.equal("stdout", docs[1] and docs[1].first, out)
    assert.are.equal("exit", docs[2].read.ev, out)
    assert.are.equal(15, docs[2].read.signal, out) -- the cancel's SIGTERM ended the read helper
    for _, i in ipairs({ 3, 6 }) do
      assert.are.equal(0, docs[i] and docs[i].after and docs[i].after.code, out)
      assert.truthy(docs[i].out:find("c3RpbGwgaGVyZQo=", 1, true), out) -- base64 of "still here\n"
      -- exit 137: PROGRAM killed on our SIGHUP, as usual (not 143: a SIGTERM passed on to it)
      assert.are.equal(137 << 8, docs[i + 1].status, out)
    end
    assert.are.equal("exit", docs[5].write.ev, out)
    assert.are.equal(1, docs[5].write.code, out)
    assert.truthy(docs[5].r:find('"error":"too_large"', 1, true), out)
    assert.truthy(docs[5].r:find("file size limit", 1, true), out)
  end)

  it("read refuses a FIFO at once, a symlink, and a file over --max-bytes", function()
    local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"]],
             ["sh", "-c", "mkfifo /home/user/fifo; ln -s /etc/passwd /home/user/link; "
                          "head -c 1000 /dev/zero > /home/user/big; sleep 30"])
time.sleep(0.3)
for i, (path, mx) in enumerate([("fifo", "10"), ("link", "100000"), ("big", "999")]):
    t = time.time()
    h, o, e = sb.call(i + 1, ["read", "--root", "/home/user", "--path", path, "--max-bytes", mx])
    emit(code=h["code"], error=result(o)["error"], secs=time.time() - t)
os.kill(sb.pid, 1); sb.end()
]=])
    assert.are.equal(3, #docs, out)
    assert.are.same({ 1, "not_regular_file" }, { docs[1].code, docs[1].error })
    assert.is_true(docs[1].secs < 2)
    assert.are.same({ 1, "symlink" }, { docs[2].code, docs[2].error })
    assert.are.same({ 1, "too_large" }, { docs[3].code, docs[3].error })
  end)

  it("pack archives the roots as the sandbox sees them: no link followed, TAR_OPTIONS ignored", function()
    local docs, out = host([=[
import io, tarfile
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"], "--env", "TAR_OPTIONS=--dereference"], ["sleep", "30"])
h, o, e = sb.call(1, ["run", "--root", "/home/user", "--", "sh", "-c",
    "mkdir d && echo secret > d/f && chmod 600 d/f && ln -s /etc/passwd link && ln -s d dirlink && "
    "mkdir /files/up && echo u > /files/up/x && truncate -s 200M sparse && ln d/f hard"])
emit(step="setup", code=result(o)["exit_code"])
h, o, e = sb.call(2, ["pack", "--root", "/home/user", "--root", "/files"])
tf = tarfile.open(fileobj=io.BytesIO(o))
emit(step="pack", code=h["code"], bytes=len(o), members={m.name: {"type": m.type.decode(), "mode": m.mode,
     "uid": m.uid, "link": m.linkname, "size": m.size} for m in tf.getmembers()},
     f=tf.extractfile("home/user/d/f").read().decode())
for i, root in enumerate(["/home/user/../etc", "/home/user/", "home/user", "/home/user/link", "/home/user/d/f"]):
    h, o, e = sb.call(10 + i, ["pack", "--root", root])
    emit(step="refused", root=root, code=h["code"], out=len(o), err=e.decode())
h, o, e = sb.call(20, ["pack"])
emit(step="none", code=h["code"], err=e.decode())
os.kill(sb.pid, 1); sb.end()
]=])
    assert.are.equal(8, #docs, out)
    assert.are.equal(0, docs[1].code, out)
    local p = docs[2]
    assert.are.equal(0, p.code, out)
    local m = p.members
    assert.are.same({ type = "2", mode = 511, uid = 1000, link = "/etc/passwd", size = 0 }, m["home/user/link"])
    assert.are.equal("2", m["home/user/dirlink"].type) -- a link to a directory stays a link
    assert.is_nil(m["home/user/dirlink/f"])
    assert.are.same({ type = "0", mode = 384, uid = 1000, link = "", size = 7 }, m["home/user/d/f"])
    assert.are.equal("secret\n", p.f)
    assert.are.equal("1", m["home/user/hard"].type) -- a hard link is a link entry, not the bytes again
    assert.are.equal("home/user/d/f", m["home/user/hard"].link)
    assert.are.equal("S", m["home/user/sparse"].type) -- 200 MB of hole, a few KiB of archive
    assert.is_true(p.bytes < 1024 * 1024, out)
    assert.is_not_nil(m["files/up/x"])
    for name in pairs(m) do assert.is_nil(name:match("passwd$"), name) end
    for i = 3, 7 do
      assert.are.equal(2, docs[i].code, out)
      assert.are.equal(0, docs[i].out)
      assert.matches("^glsb%-confine pack: %-%-root '", docs[i].err)
    end
    assert.are.equal(2, docs[8].code)
    assert.matches("--root is required", docs[8].err, 1, true)
  end)

  it("holds calls to the sandbox's limits and reports an OOM kill in the call", function()
    local docs, out = host([=[
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"], "--memory-mb", "64"], ["sleep", "30"])
h, o, e = sb.call(1, ["run", "--root", "/home/user", "--", "python3", "-c",
    "import mmap\nm = mmap.mmap(-1, 400 << 20)\nfor i in range(0, 400 << 20, 4096): m[i] = 1"])
emit(h=h, r=result(o))
os.kill(sb.pid, 1); sb.end()
]=])
    assert.are.equal(0, docs[1].h.code, out)
    assert.are.equal(9, docs[1].r.signal, out)
    assert.is_true(docs[1].h.oom_kills >= 1, out)
  end)
end)
