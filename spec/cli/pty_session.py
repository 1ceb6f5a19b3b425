"""pty_session.py: drive a program on a pseudo-terminal, as a person at a keyboard would (spec helper).

usage: pty_session.py PROGRAM [ARGS...] -- STEP...
A STEP is keystrokes to type (Python escapes: \\r Enter, \\x1b[A the Up arrow, \\x03 Ctrl-C), or
"wait:SECONDS" to let output arrive, or "until:TEXT" to wait (at most 20 s) until TEXT appeared.
Everything the program wrote is printed; the program gets Ctrl-D at the end and is killed if it lingers.
"""
import os
import pty
import select
import signal
import sys
import time

argv = sys.argv[1:sys.argv.index("--")]
steps = sys.argv[sys.argv.index("--") + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)

out = b""


def drain(seconds, until=None):
    global out
    end = time.time() + seconds
    while time.time() < end:
        if until is not None and until in out:
            return
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
        if not ready:
            return
        try:
            data = os.read(fd, 65536)
        except OSError:
            return
        if not data:
            return
        out += data


drain(20, until=b"> ")
for step in steps:
    if step.startswith("wait:"):
        drain(float(step[5:]))
    elif step.startswith("until:"):
        drain(20, until=step[6:].encode())
    else:
        os.write(fd, step.encode().decode("unicode_escape").encode("latin-1"))
        drain(0.3)
os.write(fd, b"\x04")
drain(5)
try:
    os.kill(pid, signal.SIGKILL)
except ProcessLookupError:
    pass
os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace"))
