"""glsb local provider: builds a template layer inside a confined build sandbox.

Reads /.glsb/build/build.json (written by providers/local/template.lua):
  {"files": [{"path", "data" (base64), "mode"}], "packages": [...],
   "pip_args": [...], "run": [...], "env": {...}, "workdir": str|null}
and produces, under /home/user:
  .glsb-layer/site   packages (pip install --target), added to sys.path by the agent
  everything else    the template's home, copied into each sandbox's /home/user
Output goes to stdout/stderr (the host keeps it as the build log). Exit 0 on success.
"""

import base64
import json
import os
import subprocess
import sys

HOME = "/home/user"
SITE = HOME + "/.glsb-layer/site"


def fail(msg):
    print("glsb template build: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    with open("/.glsb/build/build.json") as f:
        spec = json.load(f)
    os.makedirs(SITE, exist_ok=True)

    for entry in spec.get("files") or []:
        path = entry["path"]
        if not path.startswith("/"):
            path = os.path.join(HOME, path)
        real = os.path.normpath(path)
        if not (real == HOME or real.startswith(HOME + "/")):
            fail("files: %s is outside /home/user (local templates keep files in the home)" % entry["path"])
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, "wb") as f:
            f.write(base64.b64decode(entry["data"]))
        os.chmod(real, entry.get("mode") or 0o644)
        print("file", real, flush=True)

    env = dict(os.environ)
    env.update(spec.get("env") or {})
    env["PYTHONPATH"] = SITE + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    packages = spec.get("packages") or []
    if packages:
        argv = [sys.executable, "-m", "pip", "install", "--target", SITE, "--no-cache-dir",
                "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
                "--break-system-packages", "--retries", "0", "--timeout", "15"]
        argv += spec.get("pip_args") or []
        argv += packages
        print("pip install " + " ".join(packages), flush=True)
        r = subprocess.run(argv, env=env, cwd=HOME)
        if r.returncode != 0:
            fail("pip install failed with exit code %d" % r.returncode)

    workdir = spec.get("workdir") or HOME
    if workdir.startswith(HOME + "/"):
        os.makedirs(workdir, exist_ok=True)
    if not os.path.isdir(workdir):
        workdir = HOME
    for i, cmd in enumerate(spec.get("run") or []):
        print("run[%d]: %s" % (i + 1, cmd), flush=True)
        r = subprocess.run(["/bin/bash", "-c", cmd], env=env, cwd=workdir)
        if r.returncode != 0:
            fail("run[%d] failed with exit code %d: %s" % (i + 1, r.returncode, cmd))

    # the layer is bound read-only into sandboxes running as the same user,
    # but make it readable whoever reads it, and writable by nobody else
    for base, dirs, files in os.walk(HOME):
        for name in dirs + files:
            p = os.path.join(base, name)
            if os.path.islink(p):
                continue
            mode = os.stat(p).st_mode & 0o7777
            os.chmod(p, (mode | 0o444 | (0o111 if os.path.isdir(p) or mode & 0o100 else 0)) & ~0o022)
    os.chmod(HOME, 0o755)
    print("built", flush=True)


if __name__ == "__main__":
    main()
