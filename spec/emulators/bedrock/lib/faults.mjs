// Fault rules, set per test through POST /_emulator/faults (spec/emulators/README.md, "Bedrock").
// A rule matches requests by operation, tool, session, method and path, and fires on the next
// `times` of them (default 1, -1 = until cleared).
import { MODELED, FRONT_END } from './errors.mjs';

export const ACTIONS = new Set([
  'error', 'stream_exception', 'stream_error', 'cut_on_request', 'cut_before_response', 'cut_after_execute',
  'cut_mid_stream', 'corrupt_crc', 'slow_stream', 'delay', 'lose_session', 'create_failed', 'content',
]);

let nextId = 1;

export class Faults {
  constructor() { this.rules = []; }

  add(spec) {
    if (!spec || typeof spec !== 'object') throw new Error('fault must be an object');
    const action = spec.action || (spec.error ? 'error' : undefined);
    if (!ACTIONS.has(action)) throw new Error(`unknown fault action ${JSON.stringify(spec.action)}; one of ${[...ACTIONS].join(', ')}`);
    if ((action === 'error' || action === 'stream_exception') && !(MODELED[spec.error] || FRONT_END[spec.error] || Number.isInteger(spec.status))) {
      throw new Error(`${action} needs "error": one of ${[...Object.keys(MODELED), ...Object.keys(FRONT_END)].join(', ')} (or a "status" with any error name)`);
    }
    if (action === 'stream_exception' && !MODELED[spec.error]) throw new Error('stream_exception needs a modeled error name');
    if (action === 'cut_on_request' && spec.tool !== undefined) throw new Error('cut_on_request fires before the body is read: it cannot match a tool');
    if (action === 'content' && !Array.isArray(spec.content)) throw new Error('content needs "content": a list of content blocks');
    const times = spec.times === undefined ? 1 : Number(spec.times);
    if (!Number.isInteger(times) || times === 0 || times < -1) throw new Error('times must be a positive integer or -1 (unlimited)');
    const rule = {
      id: nextId++,
      action,
      op: spec.op,
      tool: spec.tool,
      sessionId: spec.sessionId,
      method: spec.method ? String(spec.method).toUpperCase() : undefined,
      path: spec.path,
      re: spec.path !== undefined ? new RegExp(spec.path) : null,
      times,
      fired: 0,
      error: spec.error,
      status: spec.status,
      message: spec.message,
      code: spec.code,
      retryAfter: spec.retryAfter,
      bytes: spec.bytes,
      delayMs: Number(spec.delayMs) || 0,
      afterMs: Number(spec.afterMs) || 0,
      failureReason: spec.failureReason,
      afterResult: spec.afterResult === true,
      content: spec.content,
    };
    this.rules.push(rule);
    return rule;
  }

  // First live rule matching the request; consumes one use. `head`: only cut_on_request rules,
  // which fire as soon as the request head is in (the others once the body is read and checked).
  take(ctx, head = false) {
    for (const r of this.rules) {
      if (r.times !== -1 && r.fired >= r.times) continue;
      if ((r.action === 'cut_on_request') !== head) continue;
      if (r.op && r.op !== ctx.op) continue;
      if (r.tool && r.tool !== ctx.tool) continue;
      if (r.sessionId && r.sessionId !== ctx.sessionId) continue;
      if (r.method && r.method !== ctx.method) continue;
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
