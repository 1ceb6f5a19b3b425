// Small HTTP helpers shared by the OpenSandbox emulator modules.
import crypto from 'node:crypto';

export function uuid() {
  return crypto.randomUUID();
}

// The server's X-Request-ID: echoed from the request, else uuid4 hex (middleware/request_id.py).
export function requestIdOf(req) {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && given !== '') return given;
  return crypto.randomUUID().replace(/-/g, '');
}

export function readBody(req, limit = 512 * 1024 * 1024) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > limit) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('aborted', () => reject(new Error('request aborted')));
  });
}

export function drain(req) {
  return readBody(req).catch(() => Buffer.alloc(0));
}

export function send(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  let buf;
  if (body === undefined || body === null) buf = Buffer.alloc(0);
  else if (Buffer.isBuffer(body)) buf = body;
  else buf = Buffer.from(String(body));
  const h = { ...headers };
  if (status !== 204 && status !== 304) h['Content-Length'] = String(buf.length);
  res.writeHead(status, h);
  if (status === 204 || status === 304) res.end();
  else res.end(buf);
}

// FastAPI/Starlette JSONResponse: compact JSON, non-ASCII kept as is.
export function sendJson(res, status, obj, headers = {}) {
  send(res, status, JSON.stringify(obj), { 'Content-Type': 'application/json', ...headers });
}

// Go's encoding/json (execd): compact, and <, >, &, U+2028, U+2029 escaped as \u00XX (HTML-safe default).
export function goJson(obj) {
  return JSON.stringify(obj).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

export function sendGoJson(res, status, obj, headers = {}) {
  send(res, status, goJson(obj), { 'Content-Type': 'application/json; charset=utf-8', ...headers });
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// RFC 3339 UTC with microseconds, as Python's datetime.isoformat() renders an aware datetime
// through pydantic ("2026-01-02T03:04:05.123000Z").
export function isoTime(ms) {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
