# spec/security/netns/probe.py NAME=HOST:PORT...: connect to each (3 s), print one JSON object: NAME -> the
# line the server sent, or "blocked: <exception>".
import json
import socket
import sys

res = {}
for spec in sys.argv[1:]:
    name, target = spec.split("=", 1)
    host, port = target.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        res[name] = s.makefile().readline().strip() or "connected"
    except Exception as e:  # the kind is what the spec checks
        res[name] = "blocked: " + type(e).__name__
    finally:
        s.close()
print(json.dumps(res))
