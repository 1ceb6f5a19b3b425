// h2_server.mjs: an HTTP/2 loopback server for the transport specs: TLS (ALPN h2) with the key and
// certificate given as arguments (cleartext h2c without them). Every response (but /reset's)
// names the HTTP version and the connection (session) it came on, so a spec can see multiplexing.
import http2 from "node:http2";
import fs from "node:fs";

const [keyFile, certFile] = process.argv.slice(2);
let sessions = 0;
const server = keyFile
  ? http2.createSecureServer({ key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile) })
  : http2.createServer();
server.on("session", (session) => { session.glsbId = ++sessions; });
server.on("stream", (stream, headers) => {
  // /reset: the server resets the stream (RST_STREAM INTERNAL_ERROR) before any response: libcurl reports
  // CURLE_HTTP2_STREAM, an HTTP/2 failure a retry may well get past.
  if (headers[":path"] === "/reset") {
    stream.on("error", () => {}); // node reports the reset it sent as a stream error: expected here
    return stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
  }
  stream.respond({ ":status": 200, "content-type": "application/json" });
  // A short delay keeps concurrent streams in flight together.
  setTimeout(() => stream.end(JSON.stringify({ version: "2", session: stream.session.glsbId, path: headers[":path"] })), 50);
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening ${keyFile ? "https" : "http"}://127.0.0.1:${server.address().port}\n`);
});
const stop = () => { server.close(); setTimeout(() => process.exit(0), 200).unref(); };
process.on("SIGTERM", stop);
process.stdin.on("end", stop);
process.stdin.resume();
