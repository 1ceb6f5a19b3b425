"""glsb local provider: builds a template layer inside a confined build sandbox.

Reads /.glsb/build/build.json (written by providers/local/template.lua):
  {"files": [{"path", "data" (base64), "mode"}], "packages": [...],
   "pip_args": [...], "run": [...], "env": {...}, "workdir": str|null,
   "base": bool}
With "base", the parent layer is bound read-only at /.glsb/base: its site/ and
home/ are copied first (symlinks as symlinks, never followed; only regular
files, directories and symlinks), then the child's packages, files and run
apply on top (env and workdir arrive already merged with the parent's).
It produces, under /home/user:
  .glsb-layer/site   packages (pip install --target), added to sys.path by the agent
  everything else    the template's home, copied into each sandbox's /home/user
Output goes to stdout/stderr (the host keeps it as the build log and shows each line as it comes).
Each step starts with a line "[glsb step I/N] TITLE" on stdout (the host's progress names the step
running, and a failure names the step it happened in). Exit 0 on success.
"""

import base64
import json
import os
import re
import shutil
import stat
import subprocess
import sys

HOME = "/home/user"
SITE = HOME + "/.glsb-layer/site"
BASE = "/.glsb/base"


def fail(msg):
    print("glsb template build: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def copy_regular(src, dst):
    if not stat.S_ISREG(os.lstat(src).st_mode):
        print("base: skipped %s (not a regular file)" % src, flush=True)
        return dst
    return shutil.copy2(src, dst, follow_symlinks=False)


def copy_base():
    """The parent layer's home and site into this build's home (owned by the build user)."""
    for src, dst in ((BASE + "/home", HOME), (BASE + "/site", SITE)):
        if os.path.isdir(src) and not os.path.islink(src):
            shutil.copytree(src, dst, symlinks=True, copy_function=copy_regular, dirs_exist_ok=True)
    # the copies keep the parent's modes: let the child's steps replace what it had
    for base, dirs, _files in os.walk(HOME):
        for name in dirs:
            p = os.path.join(base, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o700)
    os.chmod(HOME, 0o755)
    print("base: copied the parent layer", flush=True)


def dist_infos():
    """{normalized project name: set of its .dist-info directory names} in SITE."""
    out = {}
    for name in os.listdir(SITE):
        if name.endswith(".dist-info"):
            project = re.sub(r"[-_.]+", "-", name[:-len(".dist-info")].rsplit("-", 1)[0]).lower()
            out.setdefault(project, set()).add(name)
    return out


def drop_replaced(before):
    """pip --target --upgrade leaves the parent's metadata of another version: drop it."""
    for project, names in dist_infos().items():
        old = before.get(project, set())
        if not names - old:
            continue  # not (re)installed in another version
        for name in old & names:
            path = os.path.join(SITE, name)
            print("base: replaced %s" % name, flush=True)
            if os.path.islink(path) or not os.path.isdir(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)


class Steps:
    """Numbers the build's steps: "[glsb step I/N] TITLE" before each."""

    def __init__(self, spec):
        self.n = (1 if spec.get("base") else 0) + (1 if spec.get("files") else 0) \
            + (1 if spec.get("packages") else 0) + len(spec.get("run") or [])
        self.i = 0

    def start(self, title):
        self.i += 1
        print("[glsb step %d/%d] %s" % (self.i, self.n, title.replace("\n", " ")), flush=True)


def main():
    with open("/.glsb/build/build.json") as f:
        spec = json.load(f)
    steps = Steps(spec)
    os.makedirs(SITE, exist_ok=True)
    if spec.get("base"):
        steps.start("copy the base template")
        copy_base()

    if spec.get("files"):
        steps.start("write %d file%s" % (len(spec["files"]), "" if len(spec["files"]) == 1 else "s"))
    for entry in spec.get("files") or []:
        path = entry["path"]
        if not path.startswith("/"):
            path = os.path.join(HOME, path)
        real = os.path.normpath(path)
        if not (real == HOME or real.startswith(HOME + "/")):
            fail("files: %s is outside /home/user (local templates keep files in the home)" % entry["path"])
        os.makedirs(os.path.dirname(real), exist_ok=True)
        if os.path.lexists(real) and not os.path.isdir(real):
            os.unlink(real)  # a file of the parent layer (maybe read-only, maybe a symlink)
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
        if spec.get("base"):
            argv.append("--upgrade")  # the child's packages replace the parent's copies
        argv += spec.get("pip_args") or []
        argv += packages
        steps.start("pip install " + " ".join(packages))
        before = dist_infos()
        r = subprocess.run(argv, env=env, cwd=HOME)
        if r.returncode != 0:
            fail("pip install failed with exit code %d" % r.returncode)
        if spec.get("base"):
            drop_replaced(before)

    workdir = spec.get("workdir") or HOME
    if workdir.startswith(HOME + "/"):
        os.makedirs(workdir, exist_ok=True)
    if not os.path.isdir(workdir):
        workdir = HOME
    for i, cmd in enumerate(spec.get("run") or []):
        steps.start("run[%d]: %s" % (i + 1, cmd))
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
