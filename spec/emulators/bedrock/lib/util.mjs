// Small helpers shared by the AgentCore emulator modules: ids, bodies, JSON answers.
import crypto from 'node:crypto';

export function uuid() {
  return crypto.randomUUID();
}

// AgentCore session ids look like ULIDs: 26 characters of Crockford base32, time first.
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
export function ulid(now = Date.now()) {
  let t = now;
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const rnd = crypto.randomBytes(16);
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD[rnd[i] % 32];
  return time + tail;
}

// Custom code interpreter ids: "<name>-<10 alphanumerics>" (control model pattern).
export function suffix10() {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  const b = crypto.randomBytes(10);
  let s = '';
  for (let i = 0; i < 10; i++) s += alphabet[b[i] % alphabet.length];
  return s;
}

export function sha256hex(buf) {
  return crypto.createHash('sha256').update(buf).digest('hex');
}

export function readBody(req, limit = 256 * 1024 * 1024) {
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

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// ISO-8601 with milliseconds, as restJson1 serializes timestamps.
export function iso(ms) {
  return new Date(ms).toISOString();
}

// Every answer carries x-amzn-requestid, as AWS's front end adds it.
export function send(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  const buf = body === undefined || body === null ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(String(body));
  res.writeHead(status, {
    'x-amzn-requestid': res.requestId || uuid(),
    Date: new Date().toUTCString(),
    'Content-Length': String(buf.length),
    ...headers,
  });
  res.end(buf);
}

export function sendJson(res, status, obj, headers = {}) {
  send(res, status, JSON.stringify(obj), { 'Content-Type': 'application/json', ...headers });
}
