# Persistent Python interpreter of one emulated AgentCore session (executeCode, language python).
# Requests arrive on fd 0 as JSON lines {"code": str, "clear": bool}; each answer leaves on fd 3 as
# one JSON line {"stdout", "stderr", "error": null | {"name", "value", "traceback"}, "images"}. During a
# run, fds 1 and 2 point at temporary files, so output of child processes is captured too. A
# SIGINT while code runs interrupts it (the client went away); while idle it is ignored.
import base64
import builtins
import json
import os
import signal
import sys
import tempfile
import traceback

_requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
os.set_inheritable(3, False)
_answers = os.fdopen(3, "w", encoding="utf-8", buffering=1)
_saved_out, _saved_err = os.dup(1), os.dup(2)
sys.stdin = open(os.devnull, "r", encoding="utf-8")
_busy = False


def _on_sigint(signum, frame):
    if _busy:
        raise KeyboardInterrupt()


signal.signal(signal.SIGINT, _on_sigint)


# Figures: the interpreter stands for a Jupyter-style one (AgentCore lists matplotlib-inline among
# its libraries): figures shown or left open at the end of a run come back as image content blocks
# (service model ContentBlock type "image", data + mimeType), drawn by glsb's display module
# (providers/local/display.py, argv[2]) standing in for matplotlib-inline.
_display = type(sys)("glsb_display")
exec(compile(sys.argv[2], "display.py", "exec"), _display.__dict__)
_display.install_backend_hook()
_images = []


def _collect(forms, extra, main):
    for form, mime in (("png", "image/png"), ("jpeg", "image/jpeg")):
        if form in forms:
            _images.append({"mimeType": mime, "data": base64.b64encode(forms[form]).decode("ascii")})
            return


_display.set_publisher(_collect)


def _fresh():
    return {"__name__": "__main__", "__builtins__": builtins}


_globals = _fresh()


def _run(code):
    global _busy
    del _images[:]
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False, buffering=1)
    sys.stderr = open(2, "w", encoding="utf-8", errors="surrogateescape", closefd=False, buffering=1)
    error = None
    try:
        _busy = True
        exec(compile(code, "<string>", "exec"), _globals)
    except BaseException as e:  # noqa: B902 - the code's own failure, reported to the client
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        # drop our own frame
        tb = [tb[0]] + tb[2:] if len(tb) > 2 else tb
        error = {"name": type(e).__name__, "value": str(e), "traceback": "".join(tb)}
        sys.stderr.write("".join(tb))
    finally:
        _busy = False
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(_saved_out, 1)
        os.dup2(_saved_err, 2)
        sys.stdout = sys.__stdout__
        sys.stderr = sys.__stderr__
    out.seek(0)
    err.seek(0)
    try:
        _display.flush_figures()
    except BaseException:  # noqa: B902 - an interrupt while drawing ends the drawing, not the interpreter
        pass
    result = {
        "stdout": out.read().decode("utf-8", "replace"),
        "stderr": err.read().decode("utf-8", "replace"),
        "error": error,
        "images": _images[:],
    }
    del _images[:]
    out.close()
    err.close()
    return result


for line in _requests:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    if req.get("clear"):
        _globals = _fresh()
    try:
        answer = _run(req.get("code", ""))
    except KeyboardInterrupt:
        # interrupted while restoring the streams: restore them again
        os.dup2(_saved_out, 1)
        os.dup2(_saved_err, 2)
        sys.stdout = sys.__stdout__
        sys.stderr = sys.__stderr__
        answer = {"stdout": "", "stderr": "", "error": {"name": "KeyboardInterrupt", "value": "", "traceback": ""}}
    _answers.write(json.dumps(answer) + "\n")
    _answers.flush()
