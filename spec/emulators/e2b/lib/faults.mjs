// Fault rules, set per test through POST /_emulator/faults (see spec/emulators/README.md).
const ACTIONS = new Set(['status', 'delay', 'cut_after_bytes', 'cut_before_response', 'cut_on_request', 'kill_sandbox', 'slow_stream', 'execution_error']);
// the code interpreter's own failures, sent as error lines (code-interpreter template/server/messaging.py)
const EXECUTION_ERRORS = new Set(['WebSocketError', 'ContextRestarting', 'ExecutionAborted', 'UnexpectedEndOfExecution']);
const STATUSES = new Set([400, 401, 403, 404, 409, 429, 500, 502, 503, 504, 507]);
const PLANES = new Set(['api', 'envd', 'jupyter', 'upload']);

let nextId = 1;

export class Faults {
  constructor() { this.rules = []; }

  add(spec) {
    if (!spec || typeof spec !== 'object') throw new Error('fault must be an object');
    const action = spec.action || (spec.status ? 'status' : spec.delayMs ? 'delay' : undefined);
    if (!ACTIONS.has(action)) throw new Error(`unknown fault action ${JSON.stringify(spec.action)}; one of ${[...ACTIONS].join(', ')}`);
    if (action === 'status' && !STATUSES.has(Number(spec.status))) throw new Error(`status must be one of ${[...STATUSES].join(', ')}`);
    if (action === 'cut_after_bytes' && !(Number.isInteger(spec.bytes) && spec.bytes >= 0)) throw new Error('cut_after_bytes needs integer bytes >= 0');
    if (action === 'slow_stream' && !(Number(spec.frameDelayMs) > 0)) throw new Error('slow_stream needs frameDelayMs > 0');
    if (action === 'execution_error' && !EXECUTION_ERRORS.has(spec.name)) throw new Error(`execution_error needs name, one of ${[...EXECUTION_ERRORS].join(', ')}`);
    if (spec.plane !== undefined && !PLANES.has(spec.plane)) throw new Error(`plane must be one of ${[...PLANES].join(', ')}`);
    let re = null;
    if (spec.path !== undefined) re = new RegExp(spec.path);
    const times = spec.times === undefined ? 1 : Number(spec.times);
    if (!Number.isInteger(times) || times === 0 || times < -1) throw new Error('times must be a positive integer or -1 (unlimited)');
    const rule = {
      id: nextId++,
      action,
      method: spec.method ? String(spec.method).toUpperCase() : undefined,
      path: spec.path,
      re,
      plane: spec.plane,
      sandboxId: spec.sandboxId,
      times,
      fired: 0,
      status: spec.status !== undefined ? Number(spec.status) : undefined,
      retryAfter: spec.retryAfter,
      message: spec.message,
      body: spec.body,
      delayMs: Number(spec.delayMs) || 0,
      bytes: spec.bytes,
      afterMs: Number(spec.afterMs) || 0,
      frameDelayMs: Number(spec.frameDelayMs) || 0,
      name: spec.name,
    };
    this.rules.push(rule);
    return rule;
  }

  // First live rule matching the request; consumes one use.
  take(ctx) {
    for (const r of this.rules) {
      if (r.times !== -1 && r.fired >= r.times) continue;
      if (r.method && r.method !== ctx.method) continue;
      if (r.plane && r.plane !== ctx.plane) continue;
      if (r.sandboxId && r.sandboxId !== ctx.sandboxId) continue;
      if (r.re && !r.re.test(ctx.path)) continue;
      r.fired++;
      return r;
    }
    return null;
  }

  clear() { this.rules = []; }

  list() {
    return this.rules.map(({ re, ...r }) => ({ ...r, remaining: r.times === -1 ? -1 : Math.max(0, r.times - r.fired) }));
  }
}

// Let `n` body bytes of the response through, then drop the connection.
export function limitResponseBytes(res, n) {
  let left = n;
  let cut = false;
  const origWrite = res.write.bind(res);
  const origEnd = res.end.bind(res);
  const doCut = () => {
    const s = res.socket;
    if (s && !s.destroyed) {
      if (!res.headersSent) res.flushHeaders();
      s.write('', () => s.destroy());
    }
  };
  res.write = (chunk, enc, cb) => {
    if (typeof enc === 'function') { cb = enc; enc = undefined; }
    if (cut) return false;
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, enc);
    if (buf.length < left || (buf.length === 0 && left > 0)) {
      left -= buf.length;
      return origWrite(buf, cb);
    }
    cut = true;
    const part = buf.subarray(0, left);
    left = 0;
    if (part.length > 0) origWrite(part, doCut);
    else doCut();
    return false;
  };
  res.end = (chunk, enc, cb) => {
    if (typeof chunk === 'function') { cb = chunk; chunk = undefined; }
    if (typeof enc === 'function') { cb = enc; enc = undefined; }
    if (chunk !== undefined && chunk !== null && chunk.length > 0) res.write(chunk, enc);
    if (cut) return res;
    if (left === 0) { cut = true; doCut(); return res; }
    return origEnd(cb);
  };
}
