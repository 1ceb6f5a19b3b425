#!/usr/bin/python3
"""asan_cases.py: glsb-confine's C-level cases, run against a build with AddressSanitizer,
UndefinedBehaviorSanitizer and LeakSanitizer (scripts/fuzz-confine builds it; make check-c runs
it). Each case drives the binary the way a host would and checks the result; a sanitizer finding
makes the binary fail, and so the case.

    asan_cases.py BINARY

The sandboxes get --memory-mb 16777216: RLIMIT_DATA at a real size would stop the sanitizer's
own mappings (the cgroup limit is what bounds memory in production anyway)."""
import json, os, signal, socket, subprocess, sys, tempfile, time

BIN = os.path.abspath(sys.argv[1])
BIG = ["--memory-mb", "16777216"]
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
           UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
failures = []


def case(fn):
    tmp = tempfile.mkdtemp(prefix="glsb-asan-")
    try:
        fn(tmp)
        print("ok  ", fn.__name__, flush=True)
    except Exception as e:  # a failed check or a crash: report it, go on with the others
        failures.append(fn.__name__)
        print("FAIL", fn.__name__, repr(e), flush=True)
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", tmp], stderr=subprocess.DEVNULL)
        # rm, not shutil.rmtree: a case that failed can leave its 20,000-deep chain behind, and
        # shutil.rmtree recurses once per level (RecursionError, the folder left in /tmp)
        subprocess.run(["rm", "-rf", "--one-file-system", tmp], stderr=subprocess.DEVNULL)


def run(argv, stdin=b"", env=None, check=0):
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env or ENV, timeout=120)
    if check is not None and p.returncode != check:
        raise AssertionError("%s exited %d: %s" % (argv[:3], p.returncode, p.stderr.decode()[-2000:]))
    return p


def execve_with_env(argv, envlist):
    """Runs argv with exactly envlist (duplicate names kept), through execve in a child."""
    pid = os.fork()
    if pid == 0:
        import ctypes
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        libc = ctypes.CDLL(None, use_errno=True)
        A = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
        E = (ctypes.c_char_p * (len(envlist) + 1))(*[e.encode() for e in envlist], None)
        libc.execve(argv[0].encode(), A, E)
        os._exit(127)
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st)


@case
def run_duplicate_env_names(tmp):
    asan = [k + "=" + v for k, v in ENV.items() if k.endswith("SAN_OPTIONS")]
    code = execve_with_env([BIN, "run", "--root", tmp, "--env-allow", "D", "--env-allow", "D", "--", "/bin/true"],
                           asan + ["D=%d" % i for i in range(300)])
    assert code == 0, code


@case
def write_then_read(tmp):
    # write's Landlock domain denies /proc to LeakSanitizer at exit: leaks are not checked there
    nolsan = dict(ENV, ASAN_OPTIONS=ENV["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0"))
    r = run([BIN, "write", "--root", tmp, "--path", "a/b.txt", "--max-bytes", "10"], b"payload", env=nolsan)
    assert json.loads(r.stdout)["bytes"] == 7
    r = run([BIN, "read", "--root", tmp, "--path", "a/b.txt", "--max-bytes", "10"])
    assert r.stdout == b'{"ok":true,"bytes":7}\npayload', r.stdout
    r = run([BIN, "read", "--root", tmp, "--path", "a/b.txt", "--max-bytes", "3"], check=1)
    assert json.loads(r.stdout)["error"] == "too_large"


@case
def sandbox_report_and_exit_line(tmp):
    rep = os.path.join(tmp, "rep")
    with open(rep, "wb") as f:
        p = subprocess.run([BIN, "sandbox", "--cleanup", "--workspace", tmp + "/ws", "--report-fd", "3"] + BIG +
                           ["--", "sh", "-c", "exit 3"], pass_fds=[f.fileno()] if f.fileno() == 3 else [],
                           env=ENV, capture_output=True, timeout=60,
                           preexec_fn=lambda: os.dup2(f.fileno(), 3))
    assert p.returncode == 3, p.stderr.decode()[-2000:]
    lines = [json.loads(x) for x in open(rep, "rb").read().splitlines()]
    assert lines[0]["ok"] and lines[1]["exit"]["code"] == 3, lines


@case
def sandbox_cleanup_of_a_deep_tree(tmp):
    ws = os.path.join(tmp, "ws")
    os.makedirs(ws + "/home")
    fd = os.open(ws + "/home", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)
    run([BIN, "sandbox", "--cleanup", "--workspace", ws] + BIG + ["--", "true"])
    assert not os.path.exists(ws)


@case
def sandbox_config_fd(tmp):
    words = ["--cleanup", "--workspace", tmp + "/ws"] + BIG + ["--", "sh", "-c", "cat"]
    block = b"".join(w.encode() + b"\0" for w in words)
    r = run([BIN, "sandbox", "--config-fd", "0"], str(len(block)).encode() + b"\n" + block + b"rest")
    assert r.stdout == b"rest", r.stdout
    run([BIN, "sandbox", "--config-fd", "0"], b"5\nab\0cd", check=2)


@case
def control_channel(tmp):
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.dup2(b.fileno(), 3)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # as glsb-lua has it (Python ignores it)
        os.execve(BIN, [BIN, "sandbox", "--cleanup", "--workspace", tmp + "/ws", "--report-fd", "3",
                        "--control-fd", "3", "--max-file-mb", "1"] + BIG + ["--", "sleep", "30"], ENV)
    b.close()
    f = a.makefile("rb")

    def frame():
        h = json.loads(f.readline())
        return h, (f.read(h["len"]) if "len" in h else b"")

    def call(i, args, stdin=b""):
        ab = b"".join(x.encode() + b"\0" for x in args)
        a.sendall(("call %d %d %d %d\n" % (i, len(args), len(ab), len(stdin))).encode() + ab + stdin)
        out = b""
        while True:
            h, d = frame()
            if h["ev"] == "stdout":
                out += d
            elif h["ev"] != "stderr":
                return h, out

    assert frame()[0]["ok"]
    h, out = call(1, ["write", "--root", "/home/user", "--path", "x", "--max-bytes", "9"], b"abc")
    assert h["code"] == 0 and json.loads(out)["bytes"] == 3, (h, out)
    h, out = call(2, ["run", "--root", "/home/user", "--", "cat", "x"])
    assert json.loads(out)["stdout"] == "YWJj", out
    h, out = call(3, ["read", "--root", "/home/user", "--path", "x", "--max-bytes", "9"])
    assert out.endswith(b"\nabc"), out
    # past RLIMIT_FSIZE: the write says too_large (it died of SIGXFSZ, and took the supervisor along)
    h, out = call(7, ["write", "--root", "/home/user", "--path", "y", "--max-bytes", str(2 << 20)], b"y" * (2 << 20))
    assert h["code"] == 1 and json.loads(out)["error"] == "too_large", (h, out)
    a.sendall(b"ping 4\nstats 5\n")
    assert frame()[0]["ev"] == "pong" and frame()[0]["ev"] == "stats"
    a.sendall(b"call 6 1 5 0\nls\0\0\0")  # a malformed call: a protocol error, then reading stops
    assert frame()[0]["ev"] in ("error", "protocol_error")
    os.kill(pid, 1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 137, st  # SIGHUP: the sandbox is killed, and LSan ran


@case
def control_channel_large_transfers(tmp):
    # larger than a pipe and a splice: stdin spliced socket -> pipe -> file, the file spliced back
    # as stdout frames of what the pipe holds; a cap exceeded mid-stream drops the rest in step
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.dup2(b.fileno(), 3)
        os.execve(BIN, [BIN, "sandbox", "--cleanup", "--workspace", tmp + "/ws", "--report-fd", "3",
                        "--control-fd", "3"] + BIG + ["--", "sleep", "30"], ENV)
    b.close()
    f = a.makefile("rb")

    def frame():
        h = json.loads(f.readline())
        return h, (f.read(h["len"]) if "len" in h else b"")

    def call(i, args, stdin=b""):
        ab = b"".join(x.encode() + b"\0" for x in args)
        a.sendall(("call %d %d %d %d\n" % (i, len(args), len(ab), len(stdin))).encode() + ab + stdin)
        out = []
        while True:
            h, d = frame()
            if h["ev"] == "stdout":
                out.append(d)
            elif h["ev"] != "stderr":
                return h, b"".join(out)

    assert frame()[0]["ok"]
    big = bytes((i * 7) % 256 for i in range(256)) * (3 * 4096 + 1)
    h, out = call(1, ["write", "--root", "/home/user", "--path", "d/big", "--max-bytes", str(len(big))], big)
    assert h["code"] == 0 and json.loads(out)["bytes"] == len(big), (h, out)
    h, out = call(2, ["read", "--root", "/home/user", "--path", "d/big", "--max-bytes", str(len(big))])
    assert h["code"] == 0 and out == b'{"ok":true,"bytes":%d}\n' % len(big) + big, (h, len(out))
    h, out = call(3, ["write", "--root", "/home/user", "--path", "e/big", "--max-bytes", "1048576"], big)
    assert h["code"] == 1 and json.loads(out)["error"] == "too_large", (h, out)
    a.sendall(b"ping 4\n")
    assert frame()[0]["ev"] == "pong"
    os.kill(pid, 1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 137, st


@case
def file_server(tmp):
    # `files` requests: every operation of the server, a writer's refusal that leaves its data in step,
    # a write and a read past what the server answers, an unknown operation, a busy answer; the
    # server and its writer end with the sandbox (LeakSanitizer runs in both)
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.dup2(b.fileno(), 3)
        os.execve(BIN, [BIN, "sandbox", "--cleanup", "--workspace", tmp + "/ws", "--report-fd", "3",
                        "--control-fd", "3"] + BIG + ["--", "sleep", "30"], ENV)
    b.close()
    f = a.makefile("rb")

    def frame():
        h = json.loads(f.readline())
        return h, (f.read(h["len"]) if "len" in h else b"")

    def files(i, words, data=b""):
        body = b"".join(w.encode() + b"\0" for w in words) + data
        a.sendall(b"files %d %d\n" % (i, len(body)) + body)
        return frame()

    rep = frame()[0]
    assert rep["ok"] and "files" in rep["control"], rep
    h, _ = files(1, ["write", "/home/user", b"d/x".hex()], b"abc")
    assert h["ok"] and h["bytes"] == 3, h
    h, d = files(2, ["read", "/home/user/d/x", "100"])
    assert h["ok"] and d == b"abc", (h, d)
    h, d = files(3, ["list", "/home/user/d"])
    assert h["ok"] and d == b"f\t3\tx\0", (h, d)
    assert files(4, ["exists", "/home/user/d/x"])[0]["exists"] is True
    assert files(5, ["mkdir", "/home/user/e/f"])[0]["created"] is True
    h, _ = files(6, ["write", "/home/user", b"e".hex()], b"zz")  # a directory is there: refused, data dropped
    assert not h["ok"] and h["error"] == "is_directory", h
    h, _ = files(7, ["write", "/home/user", b"y".hex()], b"y" * 1000)
    assert h["ok"] and h["bytes"] == 1000, h  # the writer is still in step
    assert files(8, ["remove", "/home/user/d"])[0]["ok"]
    assert files(9, ["exists", "/home/user/d"])[0]["exists"] is False
    big = b"b" * ((1 << 20) + 10)
    h, _ = files(10, ["write", "/home/user", b"big".hex()], big[: 1 << 20])
    assert h["ok"], h
    h, _ = files(11, ["read", "/home/user/big", str(len(big))])
    assert h["ok"] and h["bytes"] == 1 << 20, h
    h, _ = files(12, ["nonsense", "x"])
    assert not h["ok"] and h["error"] == "usage", h
    # open: the answer carries a read-only descriptor of the file (SCM_RIGHTS with its first byte)
    f.close()
    body = b"".join(w + b"\0" for w in (b"open", b"/home/user", b"big".hex().encode(), b"2000000", b"beneath"))
    a.sendall(b"files 15 %d\n" % len(body) + body)
    data, fds, _, _ = socket.recv_fds(a, 4096, 4)
    line = data.split(b"\n", 1)[0]
    while b"\n" not in data:
        data += a.recv(4096)
    h = json.loads(data.split(b"\n", 1)[0])
    assert h["ok"] and h["fd"] is True and h["bytes"] == 1 << 20 and len(fds) == 1, (h, fds, line)
    with os.fdopen(fds[0], "rb") as passed:
        assert passed.read() == big[: 1 << 20]
    f = a.makefile("rb")
    h, _ = files(16, ["open", "/home/user", b"../etc".hex(), "100", "beneath"])  # a walk out: refused
    assert not h["ok"], h
    body = b"exists\0/home/user\0"
    a.sendall(b"files 13 %d\n" % len(body) + body + b"files 14 %d\n" % len(body) + body)
    answers = sorted([frame()[0], frame()[0]], key=lambda h: h["id"])
    assert answers[0]["ok"] and answers[1]["ev"] in ("files", "error"), answers
    os.kill(pid, 1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 137, st


@case
def network_forward(tmp):
    # --network: the rules (--net-allow with a CIDR, --net-deny), slirp4netns, a forward asked twice,
    # a bad one, then the end: killed, reaped, and every allocation freed (LSan at exit)
    if not all(os.path.exists(p) for p in ("/usr/bin/slirp4netns", "/usr/sbin/nft")):
        print("skip", "network_forward: no slirp4netns / nft", flush=True)
        return
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        os.dup2(b.fileno(), 3)
        os.execve(BIN, [BIN, "sandbox", "--cleanup", "--workspace", tmp + "/ws", "--report-fd", "3",
                        "--control-fd", "3", "--network", "--net-allow", "198.51.100.7/24", "--net-deny",
                        "0.0.0.0/0"] + BIG + ["--", "sleep", "30"], ENV)
    b.close()
    f = a.makefile("rb")
    rep = json.loads(f.readline())
    assert rep["ok"] and rep["applied"]["network"] == "slirp4netns", rep
    a.sendall(b"forward 1 8000\nforward 2 8000\nforward 3 0\n")
    one, two, bad = (json.loads(f.readline()) for _ in range(3))
    assert one["ev"] == "forward" and one["host_port"] == two["host_port"], (one, two)
    assert bad["ev"] == "error" and bad["error"] == "forward_failed", bad
    os.kill(pid, 1)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 137, st


print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
