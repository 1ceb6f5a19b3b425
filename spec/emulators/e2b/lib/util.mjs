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

// ---- keyset pagination as E2B's API pages (infra packages/api/internal/utils/pagination.go) -------
// limit: 1..100 (the OpenAPI `paginationLimit`: maximum 100, so more is a 400 from the request
// validator), default 100. The cursor (X-Next-Token / ?nextToken=) is base64url of
// "<RFC3339Nano time>__<id>" ("__asc" appended for ascending order) of the last item returned;
// the next page starts after it.

function rfc3339Nano(ms) {
  // Go's RFC3339Nano trims trailing zeros of the fraction
  return new Date(ms).toISOString().replace(/\.(\d*?)0*Z$/, (m, f) => (f ? `.${f}Z` : 'Z'));
}

export function cursorOf(timeMs, id, asc = false) {
  // base64.URLEncoding: the url alphabet with '=' padding
  const b = Buffer.from(`${rfc3339Nano(timeMs)}__${id}${asc ? '__asc' : ''}`).toString('base64');
  return b.replace(/\+/g, '-').replace(/\//g, '_');
}

function parseCursor(token) {
  const s = Buffer.from(token.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8');
  const parts = s.split('__');
  if (parts.length < 2 || parts.length > 3 || (parts.length === 3 && parts[2] !== 'asc')) return null;
  const t = Date.parse(parts[0]);
  if (Number.isNaN(t) || parts[1] === '') return null;
  return { time: t, id: parts[1] };
}

// limitParam(q) -> {limit} | {error}: the request validator's check of ?limit=.
export function limitParam(q, name = 'limit') {
  const raw = q.get(name);
  if (raw === null) return { limit: 100 };
  if (!/^-?\d+$/.test(raw)) return { error: `parameter "${name}" in query has an error: value ${raw}: an invalid integer: invalid syntax` };
  const n = Number(raw);
  if (n < 1) return { error: `parameter "${name}" in query has an error: number must be at least 1` };
  if (n > 100) return { error: `parameter "${name}" in query has an error: number must be at most 100` };
  return { limit: n };
}

// paginate(items, {limit, nextToken, time, id, asc}) -> {page, next} | {error: 'Invalid next token'}.
// items: in any order; time(x) ms and id(x) string order them (newest first unless asc).
export function paginate(items, { limit, nextToken, time, id, asc = false }) {
  const cmp = (a, b) => (time(a) - time(b)) || (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0);
  const sorted = [...items].sort((a, b) => (asc ? cmp(a, b) : cmp(b, a)));
  let start = 0;
  if (nextToken) {
    const c = parseCursor(nextToken);
    if (!c) return { error: 'Invalid next token' };
    const key = { t: c.time, i: c.id };
    const after = (x) => {
      const d = (time(x) - key.t) || (id(x) < key.i ? -1 : id(x) > key.i ? 1 : 0);
      return asc ? d > 0 : d < 0;
    };
    start = sorted.findIndex(after);
    if (start < 0) start = sorted.length;
  }
  const page = sorted.slice(start, start + limit);
  const more = sorted.length > start + limit;
  const last = page[page.length - 1];
  return { page, next: more && last ? cursorOf(time(last), id(last), asc) : null };
}
