# The OpenSandbox emulator's stand-in for a Jupyter kernel: one persistent Python process per code
# context, so names defined by one run are there for the next. Requests arrive on stdin as JSON lines
# {"code": str}; messages leave on fd 3 as JSON lines, shaped after Jupyter's IOPub messages that execd
# forwards:
#   {"type": "stream", "name": "stdout"|"stderr", "text": str}     (what fd 1 / fd 2 received)
#   {"type": "result", "count": n, "data": {"text/plain": repr, "text/html": ..., ...}}
#   {"type": "error", "ename": str, "evalue": str, "traceback": [str, ...]}
#   {"type": "done", "count": n}                                   (the kernel went idle)
# fd 1 and fd 2 are pipes read by threads here, so output of child processes is captured like print()'s.
# SIGINT interrupts the running cell (KeyboardInterrupt), like a Jupyter interrupt.
import ast
import base64
import codecs
import json
import os
import signal
import sys
import threading
import traceback

_requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.close(_devnull)
_out = os.fdopen(3, "w", encoding="utf-8", buffering=1)
os.set_inheritable(3, False)
_out_lock = threading.Lock()
_MARK = b"\x00\x1bglsb-cell-end\x1b\x00"


def _send(msg):
    with _out_lock:
        _out.write(json.dumps(msg) + "\n")
        _out.flush()


class _Pipe:
    # fd `fd` becomes the write end of a pipe; a thread forwards what arrives as stream messages and
    # notices the end-of-cell mark written after the cell.
    def __init__(self, fd, name):
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        os.set_inheritable(r, False)
        self.fd, self.name, self.r = fd, name, r
        self.marked = threading.Event()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        held = b""
        while True:
            chunk = os.read(self.r, 65536)
            if not chunk:
                return
            data = held + chunk
            held = b""
            while True:
                i = data.find(_MARK)
                if i < 0:
                    break
                self._emit(dec.decode(data[:i]) + dec.decode(b"", True))
                data = data[i + len(_MARK):]
                self.marked.set()
            # keep back a tail that could be the start of a mark split across reads
            for k in range(min(len(_MARK) - 1, len(data)), 0, -1):
                if _MARK.startswith(data[-k:]):
                    held = data[-k:]
                    data = data[:-k]
                    break
            self._emit(dec.decode(data))

    def _emit(self, text):
        if text:
            _send({"type": "stream", "name": self.name, "text": text})

    def sync(self):
        self.marked.clear()
        os.write(self.fd, _MARK)
        self.marked.wait(5)


_pipes = [_Pipe(1, "stdout"), _Pipe(2, "stderr")]
sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
sys.stdin = open(os.devnull, "r", encoding="utf-8")

# IPython's display formatters and matplotlib-inline are stood in for by glsb's display module
# (providers/local/display.py, its source given as argv[1]):
# the same forms, figures drawn the same way. What the kernel sends is Jupyter's: a MIME bundle, binary
# forms base64.
_display = type(sys)("glsb_display")
exec(compile(sys.argv[1], "display.py", "exec"), _display.__dict__)
_MIME_OF = {form: mime for mime, form in _display.FORM_OF_MIME.items()}


def _data(forms, extra, obj=None):
    data = {"text/plain": repr(obj) if obj is not None else forms.get("text", "")}
    for form, value in forms.items():
        if form == "text":
            continue
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")
        data[_MIME_OF[form]] = value
    for mime, value in extra.items():
        if "/" in mime:
            data[mime] = value
    return data


def _bundle(obj):
    forms, extra = _display.bundle(obj)
    return _data(forms, extra, obj)


# display_data: sent as the kernel sends it; execd drops it (code.mjs)
_display.set_publisher(lambda forms, extra, _main: _send({"type": "display", "data": _data(forms, extra)}))
display = _display.display


# ipykernel starts the kernel with MPLBACKEND=module://matplotlib_inline.backend_inline: here the
# stand-in backend is selected as soon as the code imports matplotlib; IPython.display is the stand-in's
# (the real kernel runs in IPython)
_display.install_backend_hook()
_display.install_ipython_shim()
_count = 0


class StdinNotImplementedError(RuntimeError):
    pass


def _no_stdin(prompt=""):
    raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")


_ns = {"__name__": "__main__", "__builtins__": __builtins__, "display": display, "input": _no_stdin}
_HERE = sys._getframe().f_code.co_filename
_RED, _GREEN, _CYAN, _RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0;36m", "\x1b[0m"


def _traceback(exc):
    # IPython's shape (ANSI colours included): the kernel's own frames left out.
    name = type(exc).__name__
    lines = [_RED + "-" * 75 + _RESET,
             _RED + name + _RESET + " " * max(1, 42 - len(name)) + "Traceback (most recent call last)"]
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == _HERE:
            continue
        where = frame.filename
        if where.startswith("<cell-"):
            where = "Cell " + _GREEN + "In[%s], line %d" % (where[6:-1], frame.lineno) + _RESET
        else:
            where = "File " + _GREEN + "%s:%d" % (where, frame.lineno) + _RESET
        if frame.name != "<module>":
            where += ", in " + _CYAN + frame.name + _RESET
        lines.append(where + "\n" + _GREEN + "----> %d " % frame.lineno + _RESET + (frame.line or ""))
    lines.append(_RED + name + _RESET + ": " + str(exc))
    return lines


def _run(code):
    global _count
    _count += 1
    fname = "<cell-%d>" % _count
    import linecache
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
    try:
        tree = ast.parse(code, fname, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, fname, "exec"), _ns)
        if last is not None:
            value = eval(compile(last, fname, "eval"), _ns)
            if value is not None:
                _ns["_"] = value
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                _send({"type": "result", "count": _count, "data": _bundle(value)})
    except BaseException as exc:  # a cell may raise anything, SystemExit and KeyboardInterrupt too
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        _send({"type": "error", "ename": type(exc).__name__, "evalue": str(exc), "traceback": _traceback(exc)})
    # matplotlib-inline's post-execute hook: every figure pyplot still has open is displayed and closed
    try:
        _display.flush_figures()
    except BaseException:  # noqa: B902 - an interrupt while drawing ends the drawing, not the kernel
        pass


# A SIGINT while no cell runs is ignored, as a Jupyter kernel ignores an interrupt while idle. It used to
# raise KeyboardInterrupt here too and end the wait with a "done" for a cell not yet read: a client that
# left right after its request (the emulator interrupts then) had its cell marked done, the cell still ran
# after, and its output and "done" went to the next request's stream.
_running = False


def _on_sigint(_signum, _frame):
    if _running:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def main():
    global _running
    # the kernel is up (execd creates a context once Jupyter's kernel answers): the emulator answers
    # POST /code/context, and sends a run's init, only after this
    _send({"type": "ready"})
    while True:
        line = _requests.readline()
        if not line:
            return
        try:
            request = json.loads(line)
        except ValueError:
            continue
        try:
            _running = True
            # from here an interrupt is the cell's KeyboardInterrupt; one that came earlier was held
            # by the emulator until this
            _send({"type": "started"})
            _run(request.get("code", ""))
        except KeyboardInterrupt:
            pass  # arrived after the cell's own handler
        finally:
            _running = False
        try:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for pipe in _pipes:
                pipe.sync()
        except KeyboardInterrupt:
            pass
        _send({"type": "done", "count": _count})


main()
