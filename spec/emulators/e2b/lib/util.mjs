// Small HTTP and id helpers shared by the E2B emulator modules.
import crypto from 'node:crypto';

export function randomId(prefix = '', n = 19) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = crypto.randomBytes(n);
  let s = prefix;
  for (let i = 0; i < n; i++) s += alphabet[bytes[i] % alphabet.length];
  return s;
}

export function uuid() {
  return crypto.randomUUID();
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

export function parseJson(buf) {
  if (!buf || buf.length === 0) return {};
  return JSON.parse(buf.toString('utf8'));
}

// Every non-204 2xx response carries an explicit Content-Length (protocol page, must-do 2).
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

export function sendJson(res, status, obj, headers = {}) {
  send(res, status, JSON.stringify(obj), { 'Content-Type': 'application/json', ...headers });
}

// The control plane's error body: {"code": <int>, "message": "..."} with the same HTTP status.
export function apiError(res, status, message, headers = {}) {
  sendJson(res, status, { code: status, message }, headers);
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
