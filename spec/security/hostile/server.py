# spec/security/hostile/server.py: a loopback HTTP server that answers as a hostile provider would, for the
# specs of spec/security/ (issue 25). It plays no provider: a spec tells it, rule by rule, what to answer.
#
#   /usr/bin/python3 server.py        prints "listening http://127.0.0.1:<port>" first; exits when stdin closes
#
# Admin (never matched by rules):
#   POST /_plan      {"rules": [rule, ...]} replaces the rules and forgets the requests seen
#   GET  /_requests  [{method, path, headers: [[name, value], ...], body_len}] (the first 2,000)
# A rule: {"method"?: "GET", "path": regex (re.search on the request target, query included), "body"?: regex
# (re.search on the request body), "times"?: n
# (default: every time), "respond": answer} or "sequence": [answer, ...] (one per matching request, the last
# repeated). An answer:
#   status (200), reason, headers {name: value}, body (text) | body_b64 | json (any JSON value)
#   echo: true           the body is the request's headers, one "name: value" line each (a server that quotes
#                        what it got: secrets included); a list of lower-case names: only those headers; with
#                        echo_into: a body text where "{{headers}}" stands for those lines, JSON-escaped
#   http10: true         an HTTP/1.0 answer without Content-Length, delimited by closing the connection
#   cut: n               only the first n bytes of the body go out, then the connection closes
#   chunked: true        Transfer-Encoding: chunked (each piece its own chunk)
#   repeat: {head_b64?, chunk_b64 | chunk, count (-1: endless), tail_b64?}   the body as pieces: head, the
#                        chunk count times, tail (with no Content-Length: chunked on HTTP/1.1, else http10)
#   delay: seconds       before answering
# In header values, body and json, "{{n}}" stands for how many requests this rule has answered (1, 2, ...).
# Each request is read whole (Content-Length or chunked) before the answer starts.
import base64
import json
import re
import socket
import sys
import threading
import time

LOCK = threading.Lock()
RULES = []
SEEN = []
MAX_SEEN = 2000


def read_request(f):
    line = f.readline(65536)
    if not line:
        return None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) < 3:
        return None
    method, target, version = parts[0], parts[1], parts[2]
    headers = []
    while True:
        h = f.readline(65536)
        if not h or h in (b"\r\n", b"\n"):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers.append([name.strip(), value.strip()])
    lower = {k.lower(): v for k, v in headers}
    body = b""
    if "content-length" in lower:
        body = f.read(int(lower["content-length"]))
    elif lower.get("transfer-encoding", "").lower() == "chunked":
        pieces = []
        while True:
            size = int(f.readline().strip().split(b";")[0], 16)
            if size == 0:
                f.readline()
                break
            pieces.append(f.read(size))
            f.readline()
        body = b"".join(pieces)
    return {"method": method, "target": target, "version": version, "headers": headers, "lower": lower,
            "body": body}


def pick(req):
    with LOCK:
        if len(SEEN) < MAX_SEEN:
            SEEN.append({"method": req["method"], "path": req["target"], "headers": req["headers"],
                         "body_len": len(req["body"])})
        for rule in RULES:
            if rule.get("method") and rule["method"] != req["method"]:
                continue
            if not re.search(rule["path"], req["target"]):
                continue
            if rule.get("body") and not re.search(rule["body"], req["body"].decode("latin-1")):
                continue
            times = rule.get("times", -1)
            if times == 0:
                continue
            if times > 0:
                rule["times"] = times - 1
            n = rule.setdefault("_n", 0)
            rule["_n"] = n + 1
            if "sequence" in rule:
                seq = rule["sequence"]
                return seq[min(n, len(seq) - 1)], n + 1
            return rule["respond"], n + 1
    return {"status": 404, "json": {"message": "no rule for " + req["method"] + " " + req["target"]}}, 0


def body_of(ans, req, n):
    if ans.get("echo"):
        only = ans["echo"] if isinstance(ans["echo"], list) else None
        text = "".join("%s: %s\n" % (k, v) for k, v in req["headers"] if only is None or k.lower() in only)
        if "echo_into" in ans:
            # the quoted headers inside a JSON string of a body of the spec's choosing (a stream line)
            return ans["echo_into"].replace("{{headers}}", json.dumps(text)[1:-1]).encode("utf-8")
        return text.encode("latin-1")
    if "body_b64" in ans:
        return base64.b64decode(ans["body_b64"])
    if "json" in ans:
        return json.dumps(ans["json"]).replace("{{n}}", str(n)).encode()
    return ans.get("body", "").replace("{{n}}", str(n)).encode("utf-8")


def pieces(rep):
    if rep.get("head_b64"):
        yield base64.b64decode(rep["head_b64"])
    chunk = base64.b64decode(rep["chunk_b64"]) if "chunk_b64" in rep else rep.get("chunk", "").encode()
    count = rep.get("count", -1)
    # large writes: a flood of small pieces costs the server little
    per = max(1, (1 << 20) // max(1, len(chunk)))
    batch = chunk * per
    left = count
    while count < 0 or left > 0:
        if count < 0 or left >= per:
            yield batch
            left -= per
        else:
            yield chunk * left
            left = 0
    if rep.get("tail_b64"):
        yield base64.b64decode(rep["tail_b64"])


def answer(conn, req, ans, n):
    """-> True when the connection may be reused."""
    if ans.get("delay"):
        time.sleep(ans["delay"])
    status = ans.get("status", 200)
    reason = ans.get("reason", "Whatever")
    headers = dict(ans.get("headers") or {})
    if "json" in ans and not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "application/json"
    http10 = ans.get("http10", False)
    rep = ans.get("repeat")
    chunked = ans.get("chunked", False) or (rep is not None and not http10)
    if http10:
        chunked = False
    head = ("HTTP/1.0" if http10 else "HTTP/1.1") + " %d %s\r\n" % (status, reason)
    if rep is None:
        body = body_of(ans, req, n)
        if not http10 and not chunked:
            headers.setdefault("Content-Length", str(len(body)))
        gen = [body]
    else:
        gen = pieces(rep)
    if http10:
        headers["Connection"] = "close"
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
    for k, v in headers.items():
        head += "%s: %s\r\n" % (k, str(v).replace("{{n}}", str(n)))
    head = (head + "\r\n").encode("latin-1")
    cut = ans.get("cut")
    if rep is None and cut is None and not chunked:
        conn.sendall(head + gen[0])  # one write: the common small answer
        return not http10
    conn.sendall(head)
    sent = 0
    for piece in gen:
        if cut is not None:
            piece = piece[:max(0, cut - sent)]
        if chunked and piece:
            conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        elif piece:
            conn.sendall(piece)
        sent += len(piece)
        if cut is not None and sent >= cut:
            return False
    if chunked:
        conn.sendall(b"0\r\n\r\n")
    return not http10


def admin(conn, req):
    if req["target"] == "/_plan" and req["method"] == "POST":
        plan = json.loads(req["body"] or b"{}")
        with LOCK:
            RULES[:] = plan.get("rules", [])
            SEEN[:] = []
        out = b'{"ok":true}'
    else:
        with LOCK:
            out = json.dumps(SEEN).encode()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(out) + out)


def serve(conn):
    f = conn.makefile("rb")
    try:
        while True:
            req = read_request(f)
            if req is None:
                return
            if req["target"].startswith("/_plan") or req["target"].startswith("/_requests"):
                admin(conn, req)
                continue
            ans, n = pick(req)
            if not answer(conn, req, ans, n):
                return
    except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
        return
    finally:
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    print("listening http://127.0.0.1:%d" % s.getsockname()[1], flush=True)

    def accept():
        while True:
            c, _ = s.accept()
            # no 40 ms stall between a head and a body written apart (Nagle against delayed ACKs)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # the spec's end (or its death) closes our stdin


main()
