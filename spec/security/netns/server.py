# spec/security/netns/server.py ADDR:PORT:NAME...: on each address, answer every connection with NAME
# and a newline, then close (the stand-ins of the internet, the host's canaries, a sandbox's servers).
import socket
import sys
import threading


def serve(addr, port, name):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            c.sendall(name.encode() + b"\n")
        finally:
            c.close()


threads = []
for spec in sys.argv[1:]:
    addr, port, name = spec.rsplit(":", 2)
    t = threading.Thread(target=serve, args=(addr, int(port), name), daemon=True)
    t.start()
    threads.append(t)
print("listening", flush=True)
for t in threads:
    t.join()
