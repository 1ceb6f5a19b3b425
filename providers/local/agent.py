"""glsb local provider: the agent that runs inside each sandbox.

Started by glsb-confine as the sandbox's PROGRAM (uid 1000, cwd /home/user).
It speaks NDJSON with the host on the stdin/stdout it was started with; the
code it runs never sees those descriptors at fds 0/1/2: at startup the agent
moves the protocol to private close-on-exec descriptors, gives fd 0 /dev/null
and makes fds 1 and 2 pipes it drains in threads, so `print`, `os.system` and
child processes all stream through the same path, in order per stream.

Requests (host -> agent), one JSON object per line:
  {"id":N,"op":"exec","code":S,"lang":"python"|"bash"|"javascript","env":{..}}
  {"id":N,"op":"cmd","cmd":S,"env":{..},"cwd":S|null,"timeout":secs|null}
  {"id":N,"op":"write","path":S,"data":B64,"mode":int|null}
  {"id":N,"op":"read","path":S,"max":bytes}
  {"id":N,"op":"argv","argv":[..],"stdin":B64|null,"timeout":secs|null}
                                exact argv, no shell; whole output returned
  {"id":N,"op":"ping"}
  {"op":"interrupt","id":N}     handled at once by the reader thread
Events (agent -> host):
  {"ev":"ready","pid":P,"python":V,"node":bool}
  {"ev":"out","id":N,"s":1|2,"d":B64}      complete lines (or a piece of a long one)
  {"ev":"chunk","id":N,"d":B64}            a piece of a file being read
  {"ev":"done","id":N,...}                 the result of request N

Output of one request is capped per stream (OUTPUT_CAP bytes); what is dropped
is counted and reported in "done" as dropped_stdout / dropped_stderr.
Everything here is written for the Python the host has (3.8+), stdlib only.
Start-up time is most of create(): the agent imports only C modules at start
(_json, binascii, _ast, _thread, _queue, _signal; site, os and io are loaded
by the interpreter anyway) and defers subprocess, traceback, linecache and
shutil to the first request that needs them. `json` alone (re, enum) would
cost more than the whole sandbox set-up.
"""

import _ast
import _json
import _queue
import _signal
import _thread
import binascii
import builtins
import io
import os
import site
import sys
import time

OUTPUT_CAP = 10 * 1024 * 1024
LINE_PIECE = 64 * 1024
WRITABLE = ("/home/user", "/files", "/tmp")
TEMPLATE_DIR = "/opt/glsb/template"

# ---------------------------------------------------------------- protocol fds

_proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
_proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
_diag = os.fdopen(os.dup(2), "w", buffering=1)
_send_lock = _thread.allocate_lock()
_enc_str = _json.encode_basestring_ascii


def encode(v):
    """JSON for the few types the events carry (ASCII output)."""
    if isinstance(v, str):
        return _enc_str(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else "null"
    if isinstance(v, dict):
        return "{" + ",".join(_enc_str(str(k)) + ":" + encode(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(encode(x) for x in v) + "]"
    return _enc_str(str(v))


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = None
    memo = None


_scan = _json.make_scanner(_ScanContext())


def decode(line):
    """One JSON object from a request line, or None when it is not one."""
    try:
        obj, end = _scan(line.decode("utf-8", "surrogateescape"), 0)
    except (StopIteration, ValueError, UnicodeDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def send(obj):
    data = (encode(obj) + "\n").encode("ascii")
    with _send_lock:
        _proto_out.write(data)


def b64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


class Event:
    """threading.Event on a bare lock (threading costs start-up time)."""

    def __init__(self):
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self):
        try:
            self._lock.release()
        except RuntimeError:
            pass

    def clear(self):
        self._lock.acquire(False)

    def wait(self, timeout):
        if self._lock.acquire(True, max(0.0, timeout)):
            self._lock.release()
            return True
        return False


def start_thread(fn, *args):
    _thread.start_new_thread(fn, args)


_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)

# ---------------------------------------------------------------- output capture


class Capture:
    """Counts and forwards one request's output; both streams share the id."""

    def __init__(self, rid):
        self.rid = rid
        self.sent = {1: 0, 2: 0}
        self.dropped = {1: 0, 2: 0}
        self.lock = _thread.allocate_lock()

    def emit(self, stream, data):
        with self.lock:
            room = OUTPUT_CAP - self.sent[stream]
            if room <= 0:
                self.dropped[stream] += len(data)
                return
            if len(data) > room:
                self.dropped[stream] += len(data) - room
                data = data[:room]
            self.sent[stream] += len(data)
        for i in range(0, len(data), LINE_PIECE):
            send({"ev": "out", "id": self.rid, "s": stream, "d": b64(data[i:i + LINE_PIECE])})

    def fields(self):
        return {"dropped_stdout": self.dropped[1], "dropped_stderr": self.dropped[2]}


class LineReader:
    """Reads a pipe, splits it into lines and hands them to the current capture.
    A sync marker written by the agent itself ends a request's output."""

    def __init__(self, fd, stream, owner):
        self.fd, self.stream, self.owner = fd, stream, owner
        self.marker = None
        self.marker_seen = Event()

    def start(self):
        start_thread(self.run)

    def run(self):
        # complete lines go out in bulk (one event for many fast lines); the host
        # splits them again for the per-line callbacks
        buf = b""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                data = b""
            if not data:
                if buf:
                    self.deliver(buf)
                return
            buf += data
            m = self.marker
            if m is not None:
                k = buf.find(m)
                if k >= 0:
                    head, buf = buf[:k], buf[k + len(m):]
                    if head:
                        self.deliver(head)
                    self.marker = None
                    self.marker_seen.set()
            nl = buf.rfind(b"\n")
            if nl >= 0:
                self.deliver(buf[:nl + 1])
                buf = buf[nl + 1:]
            # a long line without newline: forward in pieces, but keep a tail
            # that could be the start of a marker (markers hold no newline)
            if len(buf) > LINE_PIECE:
                keep = 64
                self.deliver(buf[:-keep])
                buf = buf[-keep:]

    def deliver(self, data):
        cap = self.owner.capture
        if cap is not None:
            cap.emit(self.stream, data)


class Output:
    """fds 1 and 2 of the agent are pipes drained by LineReaders."""

    def __init__(self):
        self.capture = None
        self.readers = {}
        for fd, stream in ((1, 1), (2, 2)):
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            reader = LineReader(r, stream, self)
            reader.start()
            self.readers[stream] = reader
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)

    def sync(self, timeout=2.0):
        """Waits until everything written to fds 1 and 2 so far was forwarded."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        token = ("\x00glsb-sync-%s\x00" % b64(os.urandom(9))).encode("ascii")
        for stream, fd in ((1, 1), (2, 2)):
            reader = self.readers[stream]
            reader.marker_seen.clear()
            reader.marker = token
            try:
                os.write(fd, token)
            except OSError:
                reader.marker_seen.set()
        deadline = time.monotonic() + timeout
        for reader in self.readers.values():
            reader.marker_seen.wait(max(0.0, deadline - time.monotonic()))
            reader.marker = None


# ---------------------------------------------------------------- state

class State:
    def __init__(self):
        self.lock = _thread.allocate_lock()
        self.current = None        # id of the request running in the main thread
        self.in_user_code = False
        self.interrupted = False
        self.child = None          # Popen of a running command / per-call interpreter


STATE = State()
OUT = None
NAMESPACE = {"__name__": "__main__", "__builtins__": builtins}
CELL = [0]
CELLS = {}                 # filename -> source, for tracebacks (linecache is loaded lazily)
BASE_ENV = dict(os.environ)
MAIN_THREAD = _thread.get_ident()
AGENT_PID = os.getpid()


def on_sigint(signum, frame):
    if STATE.in_user_code:
        raise KeyboardInterrupt()


def interrupt(rid):
    with STATE.lock:
        if STATE.current != rid:
            return
        STATE.interrupted = True
        child = STATE.child
        in_code = STATE.in_user_code
    if child is not None:
        kill_group(child)
    elif in_code:
        _signal.pthread_kill(MAIN_THREAD, _signal.SIGINT)


def kill_group(proc):
    try:
        os.killpg(proc.pid, _signal.SIGKILL)
    except OSError:
        pass


# ---------------------------------------------------------------- python cells

def run_python(rid, code, env):
    CELL[0] += 1
    filename = "<cell-%d>" % CELL[0]
    CELLS[filename] = code
    saved_env = None
    if env:
        saved_env = dict(os.environ)
        os.environ.update(env)
    result = {"ok": True}
    try:
        try:
            tree = compile(code, filename, "exec", _ast.PyCF_ONLY_AST)
        except (SyntaxError, ValueError) as e:
            return error_result(e, skip=0)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec")
        tail = compile(last, filename, "eval") if last is not None else None
        STATE.in_user_code = True
        try:
            exec(body, NAMESPACE)
            if tail is not None:
                value = eval(tail, NAMESPACE)
                if value is not None:
                    print(repr(value))
        finally:
            STATE.in_user_code = False
            if os.getpid() != AGENT_PID:
                # a child the cell forked came back here: it is not the agent
                for f in (sys.stdout, sys.stderr):
                    try:
                        f.flush()
                    except Exception:
                        pass
                os._exit(0)
    except KeyboardInterrupt as e:
        STATE.in_user_code = False
        if STATE.interrupted:
            result = {"ok": False, "timeout": True, "name": "KeyboardInterrupt",
                      "value": "interrupted on timeout", "traceback": format_tb(e)}
        else:
            result = error_result(e)
    except BaseException as e:  # noqa: B902 - SystemExit too: the kernel survives
        STATE.in_user_code = False
        result = error_result(e)
    finally:
        if saved_env is not None:
            os.environ.clear()
            os.environ.update(saved_env)
    return result


def tb_modules():
    import linecache
    import traceback
    for name, code in CELLS.items():
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    return traceback


def format_tb(e):
    traceback = tb_modules()
    tb = e.__traceback__
    # drop the agent's own frames: keep from the first frame of a cell
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb))


def error_result(e, skip=None):
    name = type(e).__name__
    try:
        value = str(e)
    except Exception:
        value = "<unprintable>"
    if isinstance(e, SyntaxError) and skip == 0:
        tb = "".join(tb_modules().format_exception_only(type(e), e))
    else:
        tb = format_tb(e)
    return {"ok": False, "name": name, "value": value, "traceback": tb}


# ---------------------------------------------------------------- processes

def which(name):
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def run_process(argv, env, cwd, timeout, cap):
    """Runs argv in its own session, streaming its output to cap. Returns the result."""
    import subprocess
    full_env = dict(BASE_ENV)
    if env:
        full_env.update(env)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=full_env, cwd=cwd or None,
                                start_new_session=True)
    except OSError as e:
        return {"ok": False, "name": type(e).__name__, "value": str(e), "traceback": "", "exit_code": 127}
    with STATE.lock:
        STATE.child = proc
        if STATE.interrupted:
            kill_group(proc)
    finished = []
    for pipe, stream in ((proc.stdout, 1), (proc.stderr, 2)):
        ev = Event()
        finished.append(ev)
        start_thread(pump, pipe, stream, cap, ev)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        proc.wait()
    # the group is gone; stragglers that escaped it may still hold the pipes
    kill_group(proc)
    for ev in finished:
        ev.wait(2.0)
    for pipe in (proc.stdout, proc.stderr):
        try:
            pipe.close()
        except Exception:
            pass
    with STATE.lock:
        STATE.child = None
        interrupted = STATE.interrupted
    code = proc.returncode
    if code is not None and code < 0:
        code = 128 - code
    if timed_out or interrupted:
        return {"ok": False, "timeout": True, "exit_code": code}
    return {"ok": code == 0, "exit_code": code}


def pump(pipe, stream, cap, finished):
    try:
        pump_lines(pipe, stream, cap)
    finally:
        finished.set()


def pump_lines(pipe, stream, cap):
    buf = b""
    while True:
        try:
            data = pipe.read1(65536)
        except (OSError, ValueError):
            data = b""
        if not data:
            break
        buf += data
        nl = buf.rfind(b"\n")
        if nl >= 0:
            cap.emit(stream, buf[:nl + 1])
            buf = buf[nl + 1:]
        if len(buf) > LINE_PIECE:
            cap.emit(stream, buf)
            buf = b""
    if buf:
        cap.emit(stream, buf)


def op_argv(req):
    """Runs an exact argv (workspace primitives): stdin given, output returned whole."""
    import subprocess
    argv = req.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return {"ok": False, "name": "ValueError", "value": "argv must be a non-empty list of strings"}
    stdin = binascii.a2b_base64(req["stdin"]) if req.get("stdin") else b""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(BASE_ENV), start_new_session=True)
    except OSError as e:
        return {"ok": False, "name": type(e).__name__, "value": str(e), "exit_code": 127}
    with STATE.lock:
        STATE.child = proc
    timed_out = False
    try:
        out, err = proc.communicate(stdin, timeout=req.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        out, err = proc.communicate()
    with STATE.lock:
        STATE.child = None
        interrupted = STATE.interrupted
    code = proc.returncode
    if code is not None and code < 0:
        code = 128 - code
    return {"ok": not (timed_out or interrupted), "timeout": timed_out or interrupted, "exit_code": code,
            "stdout": b64(out[:OUTPUT_CAP]), "stderr": b64(err[:OUTPUT_CAP])}


# ---------------------------------------------------------------- files

def inside_writable(path):
    real = os.path.realpath(path)
    for root in WRITABLE:
        if real == root or real.startswith(root + "/"):
            return real
    return None


def op_write(req):
    path = req["path"]
    if not path.startswith("/"):
        path = os.path.join("/home/user", path)
    real_dir = inside_writable(os.path.dirname(path) or "/")
    if real_dir is None:
        return {"ok": False, "value": "outside the writable area: " + path}
    os.makedirs(real_dir, exist_ok=True)
    target = os.path.join(real_dir, os.path.basename(path))
    tmp = "%s.glsb-%d.tmp" % (target, os.getpid())
    data = binascii.a2b_base64(req["data"])
    # O_NONBLOCK: a FIFO planted at the temp name fails the open (ENXIO) instead of hanging the agent
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 req.get("mode") or 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return {"ok": True, "path": target, "size": len(data)}


def op_read(req):
    rid = req["id"]
    path = req["path"]
    if not path.startswith("/"):
        path = os.path.join("/home/user", path)
    real = inside_writable(path)
    if real is None:
        return {"ok": False, "name": "PermissionError", "value": "outside the writable area: " + path}
    limit = int(req.get("max") or 0)
    total = 0
    # O_NONBLOCK: a FIFO planted where a file was expected must not hang the agent in open();
    # the type is checked on the open descriptor, not on the path.
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if os.fstat(fd).st_mode & 0o170000 != 0o100000:  # S_ISREG, without importing stat
            return {"ok": False, "name": "IsADirectoryError", "value": "not a regular file: " + path}
        os.set_blocking(fd, True)
        while True:
            piece = f.read(1024 * 1024)
            if not piece:
                break
            total += len(piece)
            if limit and total > limit:
                return {"ok": False, "name": "FileTooLarge", "value": "larger than %d bytes" % limit}
            send({"ev": "chunk", "id": rid, "d": b64(piece)})
    return {"ok": True, "size": total}


# ---------------------------------------------------------------- dispatch

def handle(req):
    op = req.get("op")
    rid = req.get("id")
    if op == "ping":
        return {"ok": True}
    if op == "write":
        return op_write(req)
    if op == "read":
        return op_read(req)
    if op == "argv":
        return op_argv(req)
    cap = Capture(rid)
    OUT.capture = cap
    try:
        if op == "exec":
            lang = req.get("lang") or "python"
            code = req.get("code", "")
            if lang == "python":
                res = run_python(rid, code, req.get("env"))
            elif lang == "bash":
                res = run_process(["/bin/bash", "-c", code], req.get("env"), None, None, cap)
            elif lang == "javascript":
                path = "/tmp/.glsb-cell-%d.js" % rid
                with open(path, "w") as f:
                    f.write(code)
                try:
                    res = run_process([which("node") or "node", path], req.get("env"), None, None, cap)
                finally:
                    os.unlink(path)
            else:
                res = {"ok": False, "name": "ValueError", "value": "unsupported language " + str(lang)}
        elif op == "cmd":
            res = run_process(["/bin/bash", "-c", req["cmd"]], req.get("env"), req.get("cwd"),
                              req.get("timeout"), cap)
        else:
            res = {"ok": False, "name": "ValueError", "value": "unknown op " + str(op)}
        OUT.sync()
    finally:
        OUT.capture = None
    res.update(cap.fields())
    return res


def reader(queue_put):
    """Reads requests; handles interrupts at once, queues the rest. EOF = host gone."""
    buf = b""
    while True:
        try:
            data = _proto_in.read(65536)
        except OSError:
            data = b""
        if not data:
            # the host closed our stdin (terminate) or died: stop now if busy,
            # else after the requests already queued
            with STATE.lock:
                if STATE.current is not None:
                    os._exit(0)
            queue_put(None)
            return
        buf += data
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            line, buf = buf[:nl], buf[nl + 1:]
            req = decode(line)
            if req is None:
                continue
            if req.get("op") == "interrupt":
                interrupt(req.get("id"))
            else:
                queue_put(req)


def install_template():
    if not os.path.isdir(TEMPLATE_DIR):
        return
    sitedir = os.path.join(TEMPLATE_DIR, "site")
    if os.path.isdir(sitedir):
        site.addsitedir(sitedir)
    home = os.path.join(TEMPLATE_DIR, "home")
    if os.path.isdir(home):
        import shutil
        shutil.copytree(home, "/home/user", symlinks=True, dirs_exist_ok=True)
    workdir = os.environ.get("GLSB_WORKDIR")
    if workdir:
        os.makedirs(workdir, exist_ok=True)
        os.chdir(workdir)


def main():
    global OUT
    _signal.signal(_signal.SIGINT, on_sigint)
    try:
        user_site = site.getusersitepackages()
        os.makedirs(user_site, exist_ok=True)
        site.addsitedir(user_site)
    except OSError:
        pass
    install_template()
    sys.path.insert(0, "")
    OUT = Output()
    q = _queue.SimpleQueue()
    start_thread(reader, q.put)
    send({"ev": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
    while True:
        req = q.get()
        if req is None:
            os._exit(0)
        rid = req.get("id")
        with STATE.lock:
            STATE.current = rid
            STATE.interrupted = False
        try:
            res = handle(req)
        except BaseException as e:  # noqa: B902 - never die on a bad request
            res = {"ok": False, "name": type(e).__name__, "value": str(e), "traceback": ""}
        if os.getpid() != AGENT_PID:
            # a child the cell forked (os.fork() and no exit) came back here: it is not the agent
            os._exit(0)
        with STATE.lock:
            STATE.current = None
        res["ev"] = "done"
        res["id"] = rid
        send(res)


if __name__ == "__main__":
    try:
        main()
    except BaseException as e:  # noqa: B902
        _diag.write("glsb agent: fatal: %r\n" % (e,))
        os._exit(70)
