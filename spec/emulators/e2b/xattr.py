#!/usr/bin/env python3
# The E2B emulator's xattr helper (tests only): envd keeps a file's user metadata in `user.e2b.*`
# extended attributes (infra packages/shared/pkg/filesystem/xattr.go), and Node has no xattr API.
# One JSON request a line on stdin, one answer a line on stdout:
#   {"id": 1, "op": "get", "paths": ["/host/path", ...]} -> {"id": 1, "meta": [{"k": "v"} | null, ...]}
#   {"id": 2, "op": "set", "path": "/host/path", "meta": {"k": "v"}} -> {"id": 2, "ok": true} | {"id": 2, "error": "..."}
# "set" replaces the whole set, as WriteMetadata does. Exits at EOF (the emulator went away).
import json
import os
import sys

PREFIX = "user.e2b."


def get(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return None
    out = None
    for name in names:
        if not name.startswith(PREFIX):
            continue
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
            text = value.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # ReadMetadata skips what is not UTF-8
        out = out or {}
        out[name[len(PREFIX):]] = text
    return out


def put(path, meta):
    for name in os.listxattr(path):
        if name.startswith(PREFIX) and name[len(PREFIX):] not in meta:
            os.removexattr(path, name)
    for k, v in meta.items():
        os.setxattr(path, PREFIX + k, v.encode("utf-8"))


for line in sys.stdin:
    req = json.loads(line)
    try:
        if req["op"] == "get":
            ans = {"id": req["id"], "meta": [get(p) for p in req["paths"]]}
        else:
            put(req["path"], req["meta"] or {})
            ans = {"id": req["id"], "ok": True}
    except OSError as e:
        ans = {"id": req["id"], "error": e.strerror or str(e)}
    sys.stdout.write(json.dumps(ans) + "\n")
    sys.stdout.flush()
