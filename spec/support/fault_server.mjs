// fault_server.mjs: a loopback HTTP server that misbehaves on request, for the transport specs.
// Prints "listening http://127.0.0.1:<port>" first; exits on SIGTERM or when stdin closes.
import http from "node:http";

let inflight = 0;
const hits = {};
let maxInflight = 0;

function envelope(flags, obj) {
  const payload = Buffer.from(typeof obj === "string" ? obj : JSON.stringify(obj));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(payload.length, 1);
  return Buffer.concat([head, payload]);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  const q = Object.fromEntries(url.searchParams);
  const chunks = [];
  inflight++;
  maxInflight = Math.max(maxInflight, inflight);
  res.on("close", () => inflight--);

  // Decided before the body arrives.
  if (url.pathname === "/close-during-request") {
    req.socket.destroy();
    return;
  }
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    switch (url.pathname) {
      case "/ok":
        res.writeHead(200, { "Content-Type": "text/plain", "X-Multi": ["a", "b"] });
        return res.end("hello");
      case "/status":
        res.writeHead(Number(q.code || 500), { "Retry-After": q.retry_after || "1" });
        return res.end(JSON.stringify({ code: Number(q.code || 500), message: "as asked" }));
      case "/echo":
        res.writeHead(200, { "Content-Type": "application/json" });
        return res.end(JSON.stringify({ method: req.method, headers: req.headers, body: body.toString("base64"), length: body.length }));
      case "/drop-on-reuse": {
        // The keep-alive race: the first request on a connection is answered, a later one is read in
        // full and then the connection dies without a response byte.
        hits[q.key] = (hits[q.key] || 0) + 1;
        const seen = (req.socket.glsbSeen ||= {});
        seen[q.key] = (seen[q.key] || 0) + 1;
        if (seen[q.key] >= 2) return req.socket.destroy();
        res.writeHead(200);
        return res.end("first");
      }
      case "/stream-back": {
        // The request body again, a few bytes per write, so frames arrive split at odd places.
        res.writeHead(200, { "Content-Type": q.type || "application/octet-stream" });
        const size = Number(q.chunk || 3);
        let pos = 0;
        const tick = () => {
          if (pos >= body.length) return res.end();
          res.write(body.subarray(pos, pos + size));
          pos += size;
          setTimeout(tick, 1);
        };
        return tick();
      }
      case "/hits":
        res.writeHead(200);
        return res.end(String(hits[q.key] || 0));
      case "/conn":
        res.writeHead(200);
        return res.end(String(req.socket.remotePort));
      case "/close-before-response":
        return req.socket.destroy();
      case "/close-mid-body":
        res.writeHead(200, { "Content-Length": "100" });
        res.write("partial");
        return setTimeout(() => req.socket.destroy(), 50);
      case "/slow":
        return setTimeout(() => { res.writeHead(200); res.end("late"); }, Number(q.ms || 2000));
      case "/max-inflight":
        res.writeHead(200);
        return res.end(String(maxInflight));
      case "/reset-inflight":
        maxInflight = 0;
        res.writeHead(200);
        return res.end("0");
      case "/ndjson": {
        res.writeHead(200, { "Content-Type": "application/x-ndjson" });
        const n = Number(q.n || 3);
        let i = 0;
        const tick = () => {
          if (i >= n) return q.cut ? req.socket.destroy() : res.end();
          // Split each line in two writes so frames span chunks.
          const line = JSON.stringify({ i }) + "\n";
          res.write(line.slice(0, 3));
          setTimeout(() => { res.write(line.slice(3)); i++; setTimeout(tick, Number(q.gap || 5)); }, 2);
        };
        return tick();
      }
      case "/sse":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.write(": keep-alive\n\nevent: greet\ndata: hello\nid: 1\n\n");
        return setTimeout(() => res.end("data: a\ndata: b\n\n"), 20);
      case "/error-body": {
        // An error answer to a streaming request: a JSON body, or (endless=1) one that never ends.
        res.writeHead(Number(q.code || 429), { "Content-Type": "application/json" });
        if (!q.endless) return res.end(JSON.stringify({ error: { message: "as asked", type: "test" } }));
        const chunk = "x".repeat(65536);
        const pump = () => { while (res.write(chunk)); res.once("drain", pump); };
        res.on("close", () => res.removeAllListeners("drain"));
        return pump();
      }
      case "/connect":
        res.writeHead(200, { "Content-Type": "application/connect+json" });
        res.write(envelope(0, { n: 1 }));
        res.write(envelope(0, { n: 2 }).subarray(0, 4));
        return setTimeout(() => {
          res.write(envelope(0, { n: 2 }).subarray(4));
          res.end(envelope(2, {}));
        }, 10);
      case "/big-lines": {
        // Many MB of lines, written as fast as the client reads (back-pressure on both sides).
        res.writeHead(200);
        const total = Number(q.lines || 200000);
        const line = "x".repeat(99) + "\n";
        let i = 0;
        const pump = () => {
          while (i < total) {
            i++;
            if (!res.write(line)) return res.once("drain", pump);
          }
          res.end();
        };
        return pump();
      }
      case "/huge-line":
        res.writeHead(200);
        return res.end("y".repeat(Number(q.n || 100000)) + "\n");
      default:
        res.writeHead(404);
        return res.end("no such path");
    }
  });
});

server.keepAliveTimeout = 30000;
server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  process.stdout.write(`listening http://127.0.0.1:${server.address().port}\n`);
});
const stop = () => { server.closeAllConnections?.(); server.close(() => process.exit(0)); setTimeout(() => process.exit(0), 500).unref(); };
process.on("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();
