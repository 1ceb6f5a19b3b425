"""control_driver.py: the host side of glsb-confine sandbox --control-fd (src/confine/CONTROL.md),
for specs: Sandbox(args, program) runs a sandbox with fd 3 a socketpair serving both --report-fd
and --control-fd; call() sends one call and collects its frames. Specs prepend this file to
their own host script."""
import json, os, socket, sys, time
BIN = os.environ["GLSB_BIN"]
class Sandbox:
    def __init__(self, args, program):
        a, b = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:
            os.dup2(b.fileno(), 3)
            os.execv(BIN, [BIN, "sandbox", "--report-fd", "3", "--control-fd", "3"] + args + ["--"] + program)
        b.close()
        self.sock, self.f = a, a.makefile("rb")
        self.report = self.frame()[0]
    def frame(self):
        line = self.f.readline()
        if not line: return None, b""
        h = json.loads(line)
        return h, (self.f.read(h["len"]) if "len" in h else b"")
    def send_call(self, i, args, stdin=b""):
        ab = b"".join(x.encode() + b"\0" for x in args)
        self.sock.sendall(("call %d %d %d %d\n" % (i, len(args), len(ab), len(stdin))).encode() + ab + stdin)
    def wait_call(self):
        out, err = b"", b""
        while True:
            h, d = self.frame()
            if h is None: return {"eof": True}, out, err
            if h.get("ev") == "stdout": out += d
            elif h.get("ev") == "stderr": err += d
            else: return h, out, err
    def call(self, i, args, stdin=b""):
        self.send_call(i, args, stdin)
        return self.wait_call()
    def end(self):
        self.sock.shutdown(socket.SHUT_WR)
        _, st = os.waitpid(self.pid, 0)
        return st
def result(out):
    return json.loads(out.split(b"\n", 1)[0])
def emit(**kw):
    print(json.dumps(kw), flush=True)
