"""glsb local provider: the agent that runs inside each sandbox.

Started by glsb-confine as the sandbox's PROGRAM (uid 1000, cwd /home/user).
It speaks the protocol of PROTOCOL.md (this directory) with the host on the
stdin/stdout it was started with: frames of one JSON header line, then, when
the header has "n", exactly n raw bytes (uploads, downloads and output are
never base64 or JSON). The code it runs never sees those descriptors at fds
0/1/2: at startup the agent moves the protocol to private close-on-exec
descriptors, gives fd 0 /dev/null and makes fds 1 and 2 pipes it drains in
threads, so `print`, `os.system` and child processes all stream through the
same path, in order per stream.

Output of one request is capped per stream (OUTPUT_CAP bytes, or the request's
"max_out"); what is dropped is counted and reported in "done" as
dropped_stdout / dropped_stderr.
Everything here is written for the Python the host has (3.8+), stdlib only.
Start-up time is most of create(): the agent imports only C modules at start
(_json, _ast, _thread, _queue, _signal; site, os and io are loaded
by the interpreter anyway) and defers subprocess, traceback, linecache and
shutil to the first request that needs them. `json` alone (re, enum) would
cost more than the whole sandbox set-up.
"""

import _ast
import _json
import _queue
import _signal
import _thread
import builtins
import io
import os
import site
import sys
import time

OUTPUT_CAP = 10 * 1024 * 1024
RESULTS_CAP = 10 * 1024 * 1024   # bytes of rich results per request (glsb.results.CAP)
LINE_PIECE = 64 * 1024
TEMPLATE_DIR = "/opt/glsb/template"

# ---------------------------------------------------------------- protocol fds

_proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
_proto_out_fd = os.dup(1)
_diag = os.fdopen(os.dup(2), "w", buffering=1)
_send_lock = _thread.allocate_lock()
_enc_str = _json.encode_basestring_ascii
MAX_TEXT = 256 * 1024      # error texts in a "done" header (the host reads headers up to 1 MiB)
PAYLOAD_PIECE = 1024 * 1024

# Bulk data moves through these pipes: a 1 MiB pipe (the unprivileged maximum) takes a whole piece
# per write instead of 64 KiB. F_SETPIPE_SZ is 1031 on Linux; failing is harmless.
try:
    import fcntl
    for _fd in (_proto_in.fileno(), _proto_out_fd):
        try:
            fcntl.fcntl(_fd, 1031, PAYLOAD_PIECE)
        except OSError:
            pass
except ImportError:
    pass


def encode(v, cut=MAX_TEXT):
    """JSON for the few types the events carry (ASCII output). Strings longer than cut are cut there
    (headers); cut=None for JSON that travels as a payload (a result's json and extra)."""
    if isinstance(v, str):
        if cut is None or len(v) <= cut:
            return _enc_str(v)
        return _enc_str(v[:cut] + "\n[glsb: text cut at %d characters]" % cut)
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
        return "{" + ",".join(_enc_str(str(k)) + ":" + encode(x, cut) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(encode(x, cut) for x in v) + "]"
    return encode(str(v), cut)


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


def _write_all(parts):
    """writev until every byte is out (a signal may cut a pipe write short)."""
    views = [memoryview(p) for p in parts if len(p)]
    while views:
        n = os.writev(_proto_out_fd, views)
        while views and n >= len(views[0]):
            n -= len(views[0])
            views.pop(0)
        if n:
            views[0] = views[0][n:]


def send(obj, payload=None):
    """One frame: the header (obj, with "n" = the payload's size when there is one), then the payload."""
    if payload is not None:
        obj["n"] = len(payload)
    head = (encode(obj) + "\n").encode("ascii")
    with _send_lock:
        _write_all((head, payload) if payload else (head,))


def send_out(rid, stream, data):
    head = b'{"ev":"out","id":%d,"s":%d,"n":%d}\n' % (rid, stream, len(data))
    with _send_lock:
        _write_all((head, data))


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

    def wait(self, timeout=None):
        if self._lock.acquire(True, -1 if timeout is None else max(0.0, timeout)):
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
    """Counts and forwards one request's output and rich results; both streams share the id."""

    def __init__(self, rid, cap=OUTPUT_CAP):
        self.rid = rid
        self.cap = cap
        self.sent = {1: 0, 2: 0}
        self.dropped = {1: 0, 2: 0}
        self.results_room = RESULTS_CAP
        self.results_dropped = 0
        self.results_dropped_bytes = 0
        self.lock = _thread.allocate_lock()

    def result(self, forms, extra, main):
        """One result bundle as a "res" frame: its forms (and extra) as named parts of the payload, raw
        (PROTOCOL.md). Past RESULTS_CAP a bundle is counted, not sent (glsb.results counts the same:
        the bytes of the forms, json and extra as JSON text)."""
        names, parts = [], []
        for form, value in forms.items():
            if form == "json":
                data = encode(value, None).encode("ascii")
            elif isinstance(value, bytes):
                data = value
            else:
                data = str(value).encode("utf-8", "replace")
            names.append([form, len(data)])
            parts.append(data)
        if extra:
            data = encode(extra, None).encode("ascii")
            names.append(["extra", len(data)])
            parts.append(data)
        total = sum(len(p) for p in parts)
        with self.lock:
            if total > self.results_room:
                self.results_dropped += 1
                self.results_dropped_bytes += total
                return
            self.results_room -= total
        head = (encode({"ev": "res", "id": self.rid, "main": bool(main), "parts": names, "n": total}) + "\n")
        with _send_lock:
            _write_all([head.encode("ascii")] + parts)

    def emit(self, stream, data):
        with self.lock:
            room = self.cap - self.sent[stream]
            if room <= 0:
                self.dropped[stream] += len(data)
                return
            if len(data) > room:
                self.dropped[stream] += len(data) - room
                data = data[:room]
            self.sent[stream] += len(data)
        for i in range(0, len(data), PAYLOAD_PIECE):
            send_out(self.rid, stream, data[i:i + PAYLOAD_PIECE])

    def fields(self):
        f = {"dropped_stdout": self.dropped[1], "dropped_stderr": self.dropped[2]}
        if self.results_dropped:
            f["dropped_results"] = self.results_dropped
            f["dropped_results_bytes"] = self.results_dropped_bytes
        return f


class LineReader:
    """Reads a pipe (its read end non-blocking), splits it into lines and hands them to the current
    capture: complete lines in bulk (one event for many fast lines; the host splits them again for
    the per-line callbacks), a long line without newline in pieces. Whoever reads holds the lock:
    the pump thread (both pipes' one) when the pipe becomes readable, or Output.sync, which takes
    everything written so far itself."""

    def __init__(self, fd, stream, owner):
        self.fd, self.stream, self.owner = fd, stream, owner
        self.lock = _thread.allocate_lock()
        self.buf = b""           # a line not ended yet
        os.set_blocking(fd, False)

    @staticmethod
    def pump(readers):
        """One thread for both pipes (a thread less per sandbox: its stack and its start): reads each
        as it becomes readable, until both have ended."""
        import select
        poller = select.poll()
        by_fd = {}
        for r in readers:
            poller.register(r.fd, select.POLLIN)
            by_fd[r.fd] = r
        while by_fd:
            try:
                ready = poller.poll()
            except OSError:
                continue
            for fd, _ev in ready:
                r = by_fd.get(fd)
                if r is None:
                    continue
                with r.lock:
                    more = r.take(partial=False)
                if not more:
                    poller.unregister(fd)
                    del by_fd[fd]

    def take(self, partial):
        """Reads what the pipe holds now and hands it on (with partial, the line not ended yet too).
        Under the lock. Returns False at end of file."""
        buf = self.buf
        more = True
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                more = False
                partial = True
                break
            buf += data
            nl = buf.rfind(b"\n")
            if nl >= 0:
                self.deliver(buf[:nl + 1])
                buf = buf[nl + 1:]
            if len(buf) > LINE_PIECE:
                self.deliver(buf)
                buf = b""
            if len(data) < 65536:
                break  # the pipe is empty now (one read less than a full one)
        if partial and buf:
            self.deliver(buf)
            buf = b""
        self.buf = buf
        return more

    def drain(self):
        """Hands on everything written to the pipe so far, the line not ended yet included."""
        with self.lock:
            self.take(partial=True)

    def deliver(self, data):
        cap = self.owner.capture
        if cap is not None:
            cap.emit(self.stream, data)


class DirectOut(io.RawIOBase):
    """sys.stdout / sys.stderr underneath: what Python code prints goes to the capture from the
    thread that prints (no pipe, no other thread to wake), after whatever was written to the same
    fd before it (the pipe is drained first), so the order of one stream is kept. fileno() is the
    fd all the same, for code that writes to it or hands it to a child."""

    def __init__(self, fd, stream, reader, owner):
        super().__init__()
        self.fd, self.stream, self.reader, self.owner = fd, stream, reader, owner

    def writable(self):
        return True

    def fileno(self):
        return self.fd

    def isatty(self):
        return False

    def write(self, b):
        n = len(b)
        if not n:
            return 0
        if os.getpid() != AGENT_PID:
            # a process the code forked: the protocol is the agent's alone; its fd goes to the pipe
            view = memoryview(b)
            while view:
                view = view[os.write(self.fd, view):]
            return n
        self.reader.drain()
        cap = self.owner.capture
        if cap is not None:
            cap.emit(self.stream, bytes(b))
        return n


class Output:
    """fds 1 and 2 of the agent are pipes drained by LineReaders, in one thread (what children and
    os.write put there); sys.stdout and sys.stderr write to the capture directly (DirectOut)."""

    def __init__(self):
        self.capture = None
        self.readers = {}
        for fd, stream in ((1, 1), (2, 2)):
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            self.readers[stream] = LineReader(r, stream, self)
        start_thread(LineReader.pump, list(self.readers.values()))
        import select
        self.poller = select.poll()
        for r in self.readers.values():
            self.poller.register(r.fd, select.POLLIN)
        sys.stdout = io.TextIOWrapper(DirectOut(1, 1, self.readers[1], self), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        sys.stderr = io.TextIOWrapper(DirectOut(2, 2, self.readers[2], self), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)

    def sync(self):
        """Makes sure everything written to fds 1 and 2 so far was forwarded, before "done": what a
        write put in a pipe is there when the write returns, so reading each pipe until it is empty
        (under its reader's lock) takes all of it, in order."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        # one poll of both pipes instead of a read of each: a pipe with nothing in it and no line begun
        # has nothing to hand on (the usual case: Python's own prints go to DirectOut, not the pipes)
        ready = {fd for fd, _ev in self.poller.poll(0)}
        for r in (self.readers[1], self.readers[2]):
            if r.fd in ready or r.buf:
                r.drain()


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
CONTEXTS = {}              # sb:context id -> its own namespace (python); made on its first cell
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


# ---------------------------------------------------------------- rich results
#
# Jupyter's display protocol without IPython (display.py, beside this file, loaded on first use): the
# cell's last value and display() give result bundles ("res" frames); figures pyplot still has open at
# the end of a cell are shown and closed, as matplotlib-inline does. When the code imports matplotlib,
# ImportHook has display.py select the backend "module://glsb_inline" (plt.show() and fig.show()
# display) right after matplotlib's own import, unless the sandbox's env sets MPLBACKEND;
# IPython.display is display.py's stand-in where IPython is not installed. Nothing is imported before
# something needs it: the hook sits on sys.meta_path, and display.py is read on first use.

DISPLAY_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "display.py")
_display = []


def display_module():
    if not _display:
        mod = type(sys)("glsb_display")
        mod.__file__ = DISPLAY_SOURCE
        with open(DISPLAY_SOURCE, "rb") as f:
            exec(compile(f.read(), DISPLAY_SOURCE, "exec"), mod.__dict__)
        mod.set_publisher(publish_result)
        _display.append(mod)
    return _display[0]


def publish_result(forms, extra, main):
    cap = OUT.capture
    if cap is not None:  # displays outside a request (a thread of the code, later) go nowhere
        cap.result(forms, extra, main)


def display(*objs, **kwargs):
    """IPython's display(), a builtin here as in IPython."""
    display_module().display(*objs, **kwargs)


# Values of these types are shown as their text alone: no display.py, no attribute lookups.
PLAIN_TYPES = frozenset((int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, range))


def text_of(value):
    """The value's repr, without one pair of outer quotes (E2B's rule for text/plain)."""
    text = repr(value)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


def main_result(value):
    """Publishes the cell's last value as the main result; returns its text (r.text)."""
    if type(value) in PLAIN_TYPES:
        forms = {"text": text_of(value)}
        publish_result(forms, None, True)
        return forms["text"]
    forms, extra = display_module().bundle(value)
    publish_result(forms, extra, True)
    return forms.get("text")


class ImportHook:
    """On sys.meta_path: when the code imports matplotlib, display.py's MatplotlibFinder selects the
    inline backend once matplotlib has run; when it imports IPython (IPython.display...), display.py's
    IPythonFinder gives the installed one, or a stand-in where there is none. Other names cost two
    comparisons."""

    glsb_hook = True
    matplotlib_seen = False

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "matplotlib" and not ImportHook.matplotlib_seen:
            ImportHook.matplotlib_seen = True
            return display_module().MatplotlibFinder.find_spec(name, path, target)
        if name[:7] == "IPython" and (len(name) == 7 or name[7] == "."):
            return display_module().IPythonFinder.find_spec(name, path, target)
        return None


def flush_figures():
    """The inline backend's end of a cell: the figures pyplot still has open are shown, then closed."""
    if "matplotlib.pyplot" in sys.modules:
        display_module().flush_figures()


# ---------------------------------------------------------------- python cells

def run_python(rid, code, env, namespace=None, cwd=None):
    namespace = NAMESPACE if namespace is None else namespace
    CELL[0] += 1
    filename = "<cell-%d>" % CELL[0]
    CELLS[filename] = code
    saved_env = None
    if env:
        saved_env = dict(os.environ)
        os.environ.update(env)
    # a context's working directory is the cell's, and the agent's own again after it
    saved_cwd = None
    if cwd:
        saved_cwd = os.getcwd()
        try:
            os.chdir(cwd)
        except OSError as e:
            if saved_env is not None:
                os.environ.clear()
                os.environ.update(saved_env)
            return error_result(e, skip=0)
    result = {"ok": True}
    try:
        # A cell that is one expression ("df.head()", "print(x)") compiles as one, straight from the source:
        # a third of the time of the general way (the tree, then the body and the last expression compiled
        # from it), and the same result (its value shown). Anything else fails here at once and goes the
        # general way, which reports a real syntax error as it always did.
        try:
            body, tail = None, compile(code, filename, "eval")
        except (SyntaxError, ValueError):
            tail = None
        if tail is None:
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
            try:
                if body is not None:
                    exec(body, namespace)
                if tail is not None:
                    value = eval(tail, namespace)
                    if value is not None:
                        # the main result, as E2B's: its bundle, and its text as the result's text
                        # (glsb.models ExecutionResult.text)
                        text = main_result(value)
                        if text is not None:
                            result["text"] = text
            finally:
                # also after an error, as the inline backend's post-execute hook; not on a timeout
                if not STATE.interrupted:
                    flush_figures()
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
        if saved_cwd is not None:
            try:
                os.chdir(saved_cwd)
            except OSError:
                pass
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

def which(name, path=None):
    for d in (path or os.environ.get("PATH") or "/usr/bin:/bin").split(":"):
        if not d:
            continue
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


# Words bash treats itself (builtins, keywords): a command starting with one goes through bash.
# true and false are what /usr/bin/true and /usr/bin/false do; echo too unless given an option.
SHELL_WORDS = frozenset((
    ". : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs "
    "disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local "
    "logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source suspend "
    "test times trap true type typeset ulimit umask unalias unset wait if then else elif fi case esac for "
    "select while until do done in function time { } ! [[ ]] coproc").split())
SAME_AS_PROGRAM = frozenset(("true", "false", "echo"))
# Characters bash gives no meaning to in a word (no quoting, expansion, globbing, redirection, comment)
PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./:,+@=% ")


def direct_argv(cmd, env, cwd):
    """(program path, argv) when `bash -c cmd` would just run one program with cmd's words as its
    arguments (so it can be exec'd without bash: half a millisecond less per command), else None.
    A word bash would treat itself (builtin, keyword, assignment, job), a program not found (bash
    says so), or an environment that changes what bash runs (BASH_ENV, exported functions, shell
    options) goes through bash."""
    if not cmd or len(cmd) > 4096 or not PLAIN.issuperset(cmd):
        return None
    words = cmd.split()
    if not words:
        return None
    first = words[0]
    if "=" in first or first[0] == "%":
        return None
    if first in SHELL_WORDS:
        if first not in SAME_AS_PROGRAM or (first == "echo" and any(w[:1] == "-" for w in words[1:])):
            return None
    for source in (BASE_ENV, env or {}):
        for key in source:
            if key.startswith("BASH") or key in ("SHELLOPTS", "PWD"):
                return None
    if "/" in first:
        path = first if first[0] == "/" else os.path.join(cwd or os.getcwd(), first)
        ok = os.path.isfile(path) and os.access(path, os.X_OK)
    else:
        path = which(first, (env or {}).get("PATH") or BASE_ENV.get("PATH"))
        ok = path is not None
    return (path, words) if ok else None


def process_env(env):
    full = dict(BASE_ENV)
    if env:
        full.update(env)
    return full


def command_env(env, cwd, program):
    """The environment bash gives a program it execs for `bash -c 'program args'`: PWD (the
    working directory, physical), SHLVL (as inherited: bash counts itself, then uncounts the exec),
    _ (the program's path)."""
    full = process_env(env)
    full["PWD"] = os.path.realpath(os.path.join(os.getcwd(), cwd) if cwd else os.getcwd())
    full.setdefault("SHLVL", "0")
    full["_"] = program
    return full


_subprocess = None


def popen(argv, full_env, cwd, stdin, executable=None):
    global _subprocess
    if _subprocess is None:
        import subprocess as _subprocess
    return _subprocess.Popen(argv, executable=executable, stdin=stdin, stdout=_subprocess.PIPE,
                             stderr=_subprocess.PIPE, env=full_env, cwd=cwd or None,
                             start_new_session=True)


def start_command(cmd, env, cwd, stdin):
    """Popen of `/bin/bash -c cmd`, or of the program itself when bash would only exec it."""
    try:
        direct = direct_argv(cmd, env, cwd)
    except OSError:
        direct = None  # e.g. the working directory is gone: bash says so
    if direct is not None:
        path, words = direct
        return popen(words, command_env(env, cwd, path), cwd, stdin, executable=path)
    return popen(["/bin/bash", "-c", cmd], process_env(env), cwd, stdin)


def run_process(argv, env, cwd, timeout, cap, payload=None, cmd=None):
    """Runs argv (or the shell line cmd) in its own session, streaming its output to cap (and the
    request's payload, if any, to its stdin). Returns the result."""
    devnull = -3  # subprocess.DEVNULL
    try:
        if cmd is not None:
            proc = start_command(cmd, env, cwd, -1 if payload is not None else devnull)
        else:
            proc = popen(argv, process_env(env), cwd, -1 if payload is not None else devnull)
    except OSError as e:
        return {"ok": False, "name": type(e).__name__, "value": str(e), "traceback": "", "exit_code": 127}
    with STATE.lock:
        STATE.child = proc
        if STATE.interrupted:
            kill_group(proc)
    fed = None
    if payload is not None:
        fed = Event()
        start_thread(feed, payload, proc.stdin, fed)
    timed_out = pump_child(proc, cap, timeout)
    if fed is not None:
        fed.wait(2.0)
    with STATE.lock:
        STATE.child = None
        interrupted = STATE.interrupted
    code = proc.returncode
    res = {"ok": code == 0, "exit_code": code}
    if code is not None and code < 0:
        res["signal"] = -code
        res["exit_code"] = 128 - code
    if timed_out or interrupted:
        res.update({"ok": False, "timeout": True})
    return res


_select = None


def pump_child(proc, cap, timeout):
    """Forwards the child's stdout and stderr to cap until both end, in the calling thread (one poll
    loop: no thread per stream). Kills its process group at timeout; once the child has exited, kills
    what is left of its group and waits at most 2 s more for descendants that escaped it and still
    hold the pipes. Returns whether the timeout passed."""
    global _select
    if _select is None:
        import select as _select
    pipes = {}
    poller = _select.poll()
    for f, stream in ((proc.stdout, 1), (proc.stderr, 2)):
        fd = f.fileno()
        pipes[fd] = [stream, b""]
        poller.register(fd, _select.POLLIN)
    try:
        pidfd = os.pidfd_open(proc.pid)
        poller.register(pidfd, _select.POLLIN)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout if timeout else None
    drain_until = None
    timed_out = False
    exited = False
    while pipes:
        limit = drain_until if exited else (None if timed_out else deadline)
        wait = None
        if limit is not None:
            wait = limit - time.monotonic()
            if wait <= 0:
                if exited:
                    break  # descendants that escaped the group hold the pipes: stop waiting
                timed_out = True
                kill_group(proc)
                continue
        if pidfd is None and wait is None:
            wait = 0.05  # no pidfd: look at the child now and then
        for fd, _ev in poller.poll(None if wait is None else wait * 1000 + 1):
            if fd == pidfd:
                poller.unregister(pidfd)
                os.close(pidfd)
                pidfd = -1
                exited = True
                kill_group(proc)
                drain_until = time.monotonic() + 2.0
                continue
            entry = pipes.get(fd)
            if entry is None:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                poller.unregister(fd)
                if entry[1]:
                    cap.emit(entry[0], entry[1])
                del pipes[fd]
                continue
            buf = entry[1] + data
            nl = buf.rfind(b"\n")
            if nl >= 0:
                cap.emit(entry[0], buf[:nl + 1])
                buf = buf[nl + 1:]
            if len(buf) > LINE_PIECE:
                cap.emit(entry[0], buf)
                buf = b""
            entry[1] = buf
        if pidfd is None and proc.poll() is not None and not exited:
            exited = True
            kill_group(proc)
            drain_until = time.monotonic() + 2.0
    for fd, entry in pipes.items():
        if entry[1]:
            cap.emit(entry[0], entry[1])
    if pidfd is not None and pidfd >= 0:
        os.close(pidfd)
    for f in (proc.stdout, proc.stderr):
        try:
            f.close()
        except OSError:
            pass
    proc.wait()
    return timed_out


def feed(payload, pipe, finished):
    """Copies the request's payload to a child's stdin; what the child does not take is drained from
    the protocol all the same (the next frame starts right after the payload)."""
    fd = pipe.fileno()
    try:
        for piece in payload.pieces():
            while piece is not None and len(piece):
                try:
                    piece = piece[os.write(fd, piece):]
                except OSError:
                    piece = None  # the child closed its stdin or died: drain the rest
    finally:
        payload.drain()
        try:
            pipe.close()
        except OSError:
            pass
        finished.set()


def op_argv(req):
    """Runs an exact argv (workspace primitives), no shell: the payload is its stdin, its output streams
    as "out" events capped at req["max_out"] per stream."""
    argv = req.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return {"ok": False, "name": "ValueError", "value": "argv must be a non-empty list of strings"}
    cap = req["_capture"]
    res = run_process(argv, None, None, req.get("timeout"), cap, req.get("_payload") or Payload.EMPTY)
    res["ok"] = not res.get("timeout") and "name" not in res
    return res


# ---------------------------------------------------------------- background commands

BACKGROUND = {}            # request id -> Popen of a running background command (op "spawn")


def start_background(req):
    """op "spawn" (start_command), handled by the reader thread at once, whatever the main thread runs:
    the command starts in its own session and the agent answers "started" with its pid; its output
    follows as "out" events of the same id, and "done" when it has ended. "kill" signals its group."""
    rid = req.get("id")
    cmd = req.get("cmd")
    if not isinstance(cmd, str):
        send({"ev": "done", "id": rid, "ok": False, "name": "ValueError", "value": "cmd must be a string"})
        return
    try:
        proc = start_command(cmd, req.get("env"), req.get("cwd"), -3)
    except OSError as e:
        send({"ev": "done", "id": rid, "ok": False, "name": type(e).__name__, "value": str(e), "exit_code": 127})
        return
    BACKGROUND[rid] = proc
    send({"ev": "started", "id": rid, "pid": proc.pid})
    start_thread(finish_background, rid, proc, req.get("timeout"))


def finish_background(rid, proc, timeout):
    cap = Capture(rid)
    res = {"ev": "done", "id": rid}
    try:
        timed_out = pump_child(proc, cap, timeout)
        code = proc.returncode
        if code is not None and code < 0:
            res["signal"] = -code
            code = 128 - code
        res.update({"ok": code == 0 and not timed_out, "exit_code": code, "timeout": timed_out})
    except BaseException as e:  # noqa: B902 - the host must hear of the end whatever happened
        kill_group(proc)
        res.update({"ok": False, "name": type(e).__name__, "value": str(e)})
    finally:
        BACKGROUND.pop(rid, None)
    res.update(cap.fields())
    send(res)


def kill_background(rid, sig):
    proc = BACKGROUND.get(rid)
    if proc is not None:
        try:
            os.killpg(proc.pid, sig if isinstance(sig, int) and 0 < sig < 65 else _signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------- requests


class Input:
    """Frames from the host on the protocol fd: a JSON header line, then header["n"] raw bytes."""

    def __init__(self, f):
        self.f = f
        self.buf = bytearray()   # read but not consumed (deleting from the front is cheap)
        self.scan = 0            # where to look for the next newline

    def fill(self):
        try:
            data = self.f.read(PAYLOAD_PIECE)
        except OSError:
            data = b""
        if not data:
            return False
        self.buf += data
        return True

    def header(self):
        """The next header line, or None at EOF (the host closed our stdin or died)."""
        while True:
            nl = self.buf.find(b"\n", self.scan)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[:nl + 1]
                self.scan = 0
                return line
            self.scan = len(self.buf)
            if not self.fill():
                return None


class Payload:
    """The n raw bytes that follow a request's header, read in pieces by whoever handles the request
    (never held whole: an upload larger than the sandbox's memory streams through). The reader thread
    waits until the payload is consumed before it reads the next frame."""

    def __init__(self, inp, n):
        self.inp, self.left = inp, n
        self.consumed = Event()
        self.piece = bytearray(min(n, PAYLOAD_PIECE))

    def pieces(self):
        """Yields the payload in pieces (memoryviews valid until the next one)."""
        inp = self.inp
        view = memoryview(self.piece)
        while self.left > 0:
            if inp.buf:
                k = min(len(inp.buf), self.left)
                data = bytes(inp.buf[:k])
                del inp.buf[:k]
                self.left -= k
                yield data
                continue
            k = inp.f.readinto(view[:min(self.left, len(view))])
            if not k:
                os._exit(0)  # the host is gone mid-frame
            self.left -= k
            yield view[:k]

    def drain(self):
        for _ in self.pieces():
            pass
        self.consumed.set()


Payload.EMPTY = Payload(None, 0)


def handle(req):
    op = req.get("op")
    rid = req.get("id")
    if op == "ping":
        return {"ok": True}
    cap = Capture(rid, req.get("max_out") or OUTPUT_CAP)
    req["_capture"] = cap
    OUT.capture = cap
    try:
        if op == "argv":
            res = op_argv(req)
        elif op == "exec":
            lang = req.get("lang") or "python"
            code = req.get("code", "")
            ctx = req.get("ctx")
            if lang == "python":
                ns = None
                if ctx is not None:
                    ns = CONTEXTS.setdefault(str(ctx), {"__name__": "__main__", "__builtins__": builtins})
                res = run_python(rid, code, req.get("env"), ns, req.get("cwd"))
                # what the cell printed (and its children, to the agent's fds 1 and 2) is out first
                OUT.sync()
            elif lang == "bash":
                res = run_process(["/bin/bash", "-c", code], req.get("env"), req.get("cwd"), None, cap)
            elif lang == "javascript":
                path = "/tmp/.glsb-cell-%d.js" % rid
                with open(path, "w") as f:
                    f.write(code)
                try:
                    res = run_process([which("node") or "node", path], req.get("env"), req.get("cwd"), None, cap)
                finally:
                    os.unlink(path)
            else:
                res = {"ok": False, "name": "ValueError", "value": "unsupported language " + str(lang)}
        elif op == "ctx_close":
            CONTEXTS.pop(str(req.get("ctx")), None)
            res = {"ok": True}
        elif op == "cmd":
            res = run_process(None, req.get("env"), req.get("cwd"), req.get("timeout"), cap, cmd=req["cmd"])
        else:
            res = {"ok": False, "name": "ValueError", "value": "unknown op " + str(op)}
    finally:
        OUT.capture = None
    res.update(cap.fields())
    return res


def reader(queue_put):
    """Reads requests; handles interrupts at once, queues the rest. EOF = host gone."""
    inp = Input(_proto_in)
    while True:
        line = inp.header()
        if line is None:
            # the host closed our stdin (terminate) or died: stop now if busy,
            # else after the requests already queued
            with STATE.lock:
                if STATE.current is not None:
                    os._exit(0)
            queue_put(None)
            return
        req = decode(line)
        if req is None:
            continue
        n = req.get("n")
        if isinstance(n, int) and n > 0:
            payload = Payload(inp, n)
            req["_payload"] = payload
            queue_put(req)
            payload.consumed.wait()  # whoever handles the request reads it
        elif req.get("op") == "interrupt":
            interrupt(req.get("id"))
        elif req.get("op") == "spawn":
            start_background(req)
        elif req.get("op") == "kill":
            kill_background(req.get("id"), req.get("signal"))
        else:
            queue_put(req)


# A snapshot's layer (sb:snapshot, providers/local/template.lua) holds the files the sandbox could
# write as one tar archive, made by `glsb-confine pack` with these roots as its members.
SNAPSHOT_ROOTS = ("home/user", "files", "tmp")


def restore_snapshot(archive):
    """Unpacks a snapshot's archive over this sandbox's /home/user, /files and /tmp, as the sandbox
    user (tarfile: modes and times as archived, holes of sparse files kept, no owner changed). Only
    what lies below those roots, and only files, directories, symlinks and hard links to a file below
    them; the roots' own entries are skipped (their modes are this sandbox's). A failure ends the agent
    before it is ready, naming it."""
    import tarfile

    def below(name):
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "" in parts:
            return False
        return any(name.startswith(r + "/") for r in SNAPSHOT_ROOTS)

    try:
        with tarfile.open(archive, "r:") as tf:
            members = [m for m in tf
                       if below(m.name) and (m.isreg() or m.isdir() or m.issym() or (m.islnk() and below(m.linkname)))]
            tf.extractall("/", members=members, numeric_owner=True)
    except (OSError, tarfile.TarError) as e:
        sys.stderr.write("glsb: restoring the snapshot's files failed: %s\n" % e)
        sys.stderr.flush()
        os._exit(1)


def install_template():
    if not os.path.isdir(TEMPLATE_DIR):
        return
    sitedir = os.path.join(TEMPLATE_DIR, "site")
    if os.path.isdir(sitedir):
        site.addsitedir(sitedir)
    archive = os.path.join(TEMPLATE_DIR, "workspace.tar")
    if os.path.isfile(archive):
        restore_snapshot(archive)
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
    builtins.display = display
    sys.meta_path.insert(0, ImportHook)
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
        finally:
            payload = req.get("_payload")
            if payload is not None:
                payload.drain()  # whatever the handler left: the next frame starts after it
        if os.getpid() != AGENT_PID:
            # a child the cell forked (os.fork() and no exit) came back here: it is not the agent
            os._exit(0)
        with STATE.lock:
            STATE.current = None
        res["ev"] = "done"
        res["id"] = rid
        res.pop("n", None)
        send(res)


if __name__ == "__main__":
    try:
        main()
    except BaseException as e:  # noqa: B902
        _diag.write("glsb agent: fatal: %r\n" % (e,))
        os._exit(70)
