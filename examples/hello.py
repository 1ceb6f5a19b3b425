# examples/hello.py: `build/glsb run examples/hello.py` (after make demo) runs this in a fresh local
# sandbox: its own user, filesystem and network namespace, gone when the run ends.
import os
import platform
import socket

print(f"hello from Python {platform.python_version()} in a sandbox")
print(f"user {os.getuid()} in {os.getcwd()}, files: {sorted(os.listdir('.'))}")
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("network: reachable")
except OSError as e:
    print(f"network: none ({e.strerror or e})")
