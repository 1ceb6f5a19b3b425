# Persistent Python "kernel" for the E2B emulator's code interpreter (one process per context).
# Requests arrive on stdin as JSON lines {"code": str, "silent": bool}; events leave on fd 3 as JSON
# lines: {"type": "stdout"|"stderr", "text"}, {"type": "result", ...}, {"type": "error", name,
# value, traceback}, {"type": "done"}. What child processes write to fd 1/2 goes through pipes this
# kernel reads itself (like ipykernel's capture_fd_output), so it reaches fd 3 in order with the
# cell's own prints: a print after subprocess.run(...) comes after the child's output.
import ast
import base64
import codecs
import io
import json
import linecache
import os
import select
import signal
import sys
import threading
import traceback

# Requests come on fd 0; move them off it so code (and its child processes) reading stdin get
# EOF instead of stealing requests, and keep the control fds out of child processes.
_requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
for _fd in (3, 4):
    os.set_inheritable(_fd, False)
sys.stdin = open(os.devnull, "r", encoding="utf-8")

_ctl = os.fdopen(3, "w", encoding="utf-8", buffering=1)
_lock = threading.Lock()


def _fd_pipe(fd):
    # fd 1 or 2 becomes the write end of a pipe whose read end only this process holds
    r, w = os.pipe()
    os.dup2(w, fd)
    os.close(w)
    os.set_blocking(r, False)
    os.set_inheritable(r, False)
    return r


_fd_streams = [(_fd_pipe(1), "stdout", codecs.getincrementaldecoder("utf-8")("replace")),
               (_fd_pipe(2), "stderr", codecs.getincrementaldecoder("utf-8")("replace"))]


def _drain_fds():
    # Called with _lock held: forwards everything child processes wrote so far, before any later
    # event, so that order on fd 3 is the order of the writes.
    for fd, name, dec in _fd_streams:
        chunks = []
        while True:
            try:
                b = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not b:
                break
            chunks.append(b)
        if chunks:
            text = dec.decode(b"".join(chunks))
            if text:
                _ctl.write(json.dumps({"type": name, "text": text}) + "\n")
    _ctl.flush()


def _fd_reader():
    # Output of children that keeps coming while the kernel waits (a long subprocess, a background
    # process): forwarded as it arrives.
    poller = select.poll()
    for fd, _, _ in _fd_streams:
        poller.register(fd, select.POLLIN)
    while True:
        poller.poll()
        with _lock:
            _drain_fds()


threading.Thread(target=_fd_reader, daemon=True).start()
_SELF = sys._getframe().f_code.co_filename
_busy = threading.Event()


def _interrupter():
    # One byte on fd 4 = interrupt the running cell (the client went away), like a kernel interrupt.
    f = os.fdopen(4, "rb", buffering=0)
    while True:
        b = f.read(1)
        if not b:
            return
        if _busy.is_set():
            os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=_interrupter, daemon=True).start()


def _emit(obj):
    with _lock:
        _drain_fds()
        _ctl.write(json.dumps(obj) + "\n")
        _ctl.flush()


class _Stream(io.TextIOBase):
    def __init__(self, name):
        self._name = name
        self._buf = ""

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self._buf += s
        i = self._buf.rfind("\n")
        if i >= 0:
            out, self._buf = self._buf[: i + 1], self._buf[i + 1:]
            _emit({"type": self._name, "text": out})
        return len(s)

    def flush(self):
        if self._buf:
            out, self._buf = self._buf, ""
            _emit({"type": self._name, "text": out})


_stdout = _Stream("stdout")
_stderr = _Stream("stderr")
sys.stdout = _stdout
sys.stderr = _stderr

# IPython's display formatters, matplotlib-inline and E2B's chart extraction (code-interpreter
# template/startup_scripts/0002_data.py, chart_data_extractor) are stood in for by glsb's own display
# module (providers/local/display.py, its source given as argv[2]): the same forms, the same figure
# rendering (PNG, bbox_inches="tight"), the same chart fields.
_display = type(sys)("glsb_display")
exec(compile(sys.argv[2], "display.py", "exec"), _display.__dict__)


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if type(v).__module__ == "numpy" and callable(getattr(v, "item", None)):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _line(forms, extra, is_main, obj=None):
    # result.py Result: MIME forms under E2B's names (binary ones base64), e2b/chart as "chart", e2b/data
    # (a DataFrame's columns, 0002_data.py E2BDataFormatter) as "data", other MIME types under "extra"
    out = {"type": "result", "is_main_result": is_main}
    for k, v in forms.items():
        if k in ("png", "jpeg", "pdf"):
            v = base64.b64encode(v).decode("ascii")
        out[k] = v
    if "chart" in extra:
        out["chart"] = extra["chart"]
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(obj, pandas.DataFrame):
        out["data"] = {k: [x.isoformat() if isinstance(x, pandas.Timestamp) else x for x in col]
                       for k, col in obj.to_dict(orient="list").items()}
    out["extra"] = {k: v for k, v in extra.items() if k != "chart"}
    return _jsonable(out)


def _format(obj, is_main):
    forms, extra = _display.bundle(obj)
    return _line(forms, extra, is_main, obj)


_display.set_publisher(lambda forms, extra, is_main: _emit(_line(forms, extra, is_main)))


def display(*objs, **kw):
    _stdout.flush()
    _stderr.flush()
    for o in objs:
        if kw.get("raw"):
            _display.display(o, raw=True)
        else:
            _emit(_format(o, False))


# ipykernel starts the kernel with MPLBACKEND=module://matplotlib_inline.backend_inline: here the
# stand-in backend is selected as soon as the code imports matplotlib; IPython.display is the stand-in's
# (the real kernel runs in IPython)
_display.install_backend_hook()
_display.install_ipython_shim()


# The template's IPython runs with colors = "NoColor" (code-interpreter template/ipython_kernel_config.py):
# tracebacks carry no ANSI codes.
_RED, _GREEN, _RESET = "", "", ""


def _where(filename, lineno, name):
    if filename.startswith("<cell-"):
        where = "Cell %sIn[%s], line %d%s" % (_GREEN, filename[6:-1], lineno, _RESET)
    else:
        where = "File %s%s:%d%s" % (_GREEN, filename, lineno, _RESET)
    if name and name != "<module>":
        where += ", in %s()" % name
    return where


def _ipython_tb(e, tb):
    # Shaped like IPython's NoColor tracebacks: what the real Jupyter-backed server sends.
    name = type(e).__name__
    parts = []
    if not (isinstance(e, SyntaxError) and str(e.filename).startswith("<cell-")):
        parts += [_RED + "-" * 75 + _RESET,
                  _RED + name + _RESET + " " * max(1, 42 - len(name)) + "Traceback (most recent call last)"]
        for fs in traceback.extract_tb(tb):
            if fs.filename == _SELF:
                continue  # the kernel's own frames
            parts.append(_where(fs.filename, fs.lineno, fs.name))
            parts.append("%s----> %d%s %s" % (_GREEN, fs.lineno, _RESET, (fs.line or "").strip()))
            parts.append("")
    if isinstance(e, SyntaxError) and e.filename:
        parts.append("  " + _where(e.filename, e.lineno or 0, None))
        if e.text:
            parts.append("    " + e.text.rstrip("\n"))
            if e.offset:
                parts.append("    " + " " * (e.offset - 1) + "^")
        parts.append("")
    parts.append(_RED + name + _RESET + ": " + str(e))
    return "\n".join(parts)


class StdinNotImplementedError(RuntimeError):
    pass


def _no_input(prompt=""):
    # Like Jupyter with allow_stdin=False.
    raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")


def _system(cmd):
    # IPython's `!cmd`: the command through the shell, its output the cell's (fd 1/2 are the kernel's
    # pipes), the exit status in _exit_code
    import subprocess
    sys.stdout.flush()
    sys.stderr.flush()
    _globals["_exit_code"] = subprocess.call(cmd, shell=True, executable="/bin/bash")


def _getoutput(cmd):
    # `x = !cmd`: the output's lines
    import subprocess
    r = subprocess.run(cmd, shell=True, executable="/bin/bash", stdout=subprocess.PIPE, text=True)
    _globals["_exit_code"] = r.returncode
    return r.stdout.splitlines()


def _shell_escapes(code):
    # IPython's line transforms for `!cmd` and `name = !cmd` (IPython.core.inputtransformer2
    # EscapedCommand, SystemAssign), line by line: a `!` that opens a line of a string is taken too
    out = []
    for line in code.split("\n"):
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("!"):
            out.append("%s__e2b_system__(%r)" % (indent, stripped[1:]))
            continue
        head, sep, rest = stripped.partition("=")
        if sep and head.strip().isidentifier() and rest.lstrip().startswith("!") and not rest.startswith("="):
            out.append("%s%s = __e2b_getoutput__(%r)" % (indent, head.strip(), rest.lstrip()[1:]))
            continue
        out.append(line)
    return "\n".join(out)


_globals = {"__name__": "__main__", "__builtins__": __builtins__, "display": display, "input": _no_input,
            "__e2b_system__": _system, "__e2b_getoutput__": _getoutput}
_count = 0


def _run(code, silent):
    # The code arrives with the env-var lines the server puts in front of it (interp.mjs), as E2B's
    # server sends it to the kernel. A silent execution (the server's env clean-up) counts no
    # execution and shows nothing.
    global _count
    if not silent:
        _count += 1
    fname = "<cell-%d>" % _count if not silent else "<silent>"
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    if "!" in code:
        code = _shell_escapes(code)
    try:
        tree = ast.parse(code, fname, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, fname, "exec"), _globals)
        if last is not None:
            val = eval(compile(last, fname, "eval"), _globals)
            if val is not None:
                _globals["_"] = val
                _stdout.flush()
                _stderr.flush()
                _emit(_format(val, True))
    except BaseException as e:  # noqa: B902 - a cell may raise anything, even SystemExit
        _stdout.flush()
        _stderr.flush()
        tb = e.__traceback__
        # Drop this driver's own frame so the traceback starts in the cell.
        if tb is not None and tb.tb_frame.f_code.co_filename == _SELF:
            tb = tb.tb_next
        _emit({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": _ipython_tb(e, tb)})
    finally:
        _stdout.flush()
        _stderr.flush()
    # matplotlib-inline's post-execute hook (flush_figures): every figure pyplot still has open is
    # displayed, then closed, also after an error
    if not silent:
        try:
            _display.flush_figures()
        except BaseException:  # noqa: B902 - an interrupt while drawing ends the drawing, not the kernel
            pass


def main():
    stdin = _requests
    while True:
        started = False
        try:
            line = stdin.readline()
            if not line:
                return
            try:
                req = json.loads(line)
            except ValueError:
                continue
            started = True
            silent = req.get("silent") is True
            if not silent:
                _emit({"type": "number_of_executions", "execution_count": _count + 1})
            _busy.set()
            try:
                _run(req.get("code", ""), silent)
            finally:
                _busy.clear()
            _emit({"type": "done"})
        except KeyboardInterrupt:
            # An interrupt that landed outside the cell's own try block.
            _busy.clear()
            if started:
                _emit({"type": "done"})


if __name__ == "__main__":
    main()
