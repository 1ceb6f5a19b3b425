# spec/support/full_backlog.py: a loopback listener whose accept queue is full and never drained, so a
# new connection attempt hangs in the handshake: the way to make a connect timeout happen on loopback.
# Prints "listening http://127.0.0.1:<port>" once the queue is full; exits when stdin closes.
import socket
import sys
import time

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(0)
port = listener.getsockname()[1]
fillers = []
for _ in range(8):
    c = socket.socket()
    c.setblocking(False)
    try:
        c.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(c)
time.sleep(0.2)
print("listening http://127.0.0.1:%d" % port, flush=True)
sys.stdin.read()
