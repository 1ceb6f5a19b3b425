// Connect protocol (JSON codec) framing helpers.
import { sleep } from './util.mjs';

export const CODE_STATUS = {
  canceled: 499, unknown: 500, invalid_argument: 400, deadline_exceeded: 504, not_found: 404,
  already_exists: 409, permission_denied: 403, resource_exhausted: 429, failed_precondition: 400,
  aborted: 409, out_of_range: 400, unimplemented: 501, internal: 500, unavailable: 503,
  data_loss: 500, unauthenticated: 401,
};

export class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

export function envelope(flags, obj) {
  const json = Buffer.from(JSON.stringify(obj), 'utf8');
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

// First envelope of a streaming request body.
export function parseEnvelope(buf) {
  if (buf.length < 5) throw new RpcError('invalid_argument', 'protocol error: incomplete envelope');
  const flags = buf[0];
  const len = buf.readUInt32BE(1);
  if (flags & 0x01) throw new RpcError('internal', 'protocol error: compressed messages are not supported');
  if (buf.length < 5 + len) throw new RpcError('invalid_argument', 'protocol error: promised ' + len + ' bytes in enveloped message, got fewer');
  const payload = buf.subarray(5, 5 + len);
  return payload.length ? JSON.parse(payload.toString('utf8')) : {};
}

export function unaryError(res, code, message) {
  if (res.headersSent) { res.socket?.destroy(); return; }
  const body = JSON.stringify({ code, message });
  res.writeHead(CODE_STATUS[code] || 500, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

export function unaryOk(res, obj) {
  const body = JSON.stringify(obj || {});
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// A server stream: message frames, then exactly one end-stream frame. Frames are written in
// order through a promise chain so a slow_stream fault can space them out.
export class ServerStream {
  constructor(res, frameDelayMs = 0) {
    this.res = res;
    this.delay = frameDelayMs;
    this.chain = Promise.resolve();
    this.ended = false;
    this.closed = false;
    this.onClose = null;
    res.on('close', () => {
      this.closed = true;
      if (this.onClose) this.onClose();
    });
  }

  start() {
    this.res.writeHead(200, { 'Content-Type': 'application/connect+json' });
    this.res.flushHeaders();
  }

  push(buf) {
    this.chain = this.chain.then(async () => {
      if (this.delay) await sleep(this.delay);
      if (!this.closed && !this.res.destroyed) this.res.write(buf);
    });
    return this.chain;
  }

  send(obj) {
    if (this.ended) return this.chain;
    return this.push(envelope(0, obj));
  }

  end(error, metadata) {
    if (this.ended) return this.chain;
    this.ended = true;
    const trailer = {};
    if (error) trailer.error = { code: error.code, message: error.message };
    if (metadata) trailer.metadata = metadata;
    if (!this.res.headersSent) this.start();
    this.push(envelope(0x02, trailer));
    this.chain = this.chain.then(() => { if (!this.res.destroyed) this.res.end(); });
    return this.chain;
  }
}
