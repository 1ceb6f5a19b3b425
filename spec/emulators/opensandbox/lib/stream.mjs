// execd's event stream (controller/sse.go, docs/protocols/opensandbox.md §2.2): every event is one
// compact Go-encoded JSON object followed by "\n\n" (no "data:" prefix). The 200 and the SSE headers
// are committed lazily with the first event, so an error before it is a plain JSON error. Right after
// `init` and then every 3 s, a {"type":"ping","text":"pong"} event (wait.Until runs its function first).
import { goJson, sendGoJson, sleep } from './util.mjs';

const SSE_HEADERS = {
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache',
  Connection: 'keep-alive',
  'X-Accel-Buffering': 'no',
};

export class EventStream {
  // ctx: {eventDelayMs, cutAfterEvents, pingIntervalMs}
  constructor(res, ctx = {}) {
    this.res = res;
    this.ctx = ctx;
    this.started = false;
    this.sent = 0;
    this.chain = Promise.resolve();
    this.pinger = null;
    this.closed = false;
    res.on('close', () => {
      this.closed = true;
      this.stopPing();
    });
  }

  get gone() { return this.closed || this.res.destroyed; }

  // Queue one event; events leave in order (spaced by eventDelayMs under a slow_stream fault).
  event(ev) {
    // Field order of model.ServerStreamEvent; empty fields omitted (omitempty).
    const obj = {};
    for (const k of ['type', 'text', 'execution_count', 'execution_time']) if (ev[k]) obj[k] = ev[k];
    obj.timestamp = ev.timestamp || Date.now();
    if (ev.results) obj.results = ev.results;
    if (ev.error) obj.error = ev.error;
    this.chain = this.chain.then(async () => {
      if (this.ctx.eventDelayMs) await sleep(this.ctx.eventDelayMs);
      if (this.gone) return;
      if (!this.started) {
        this.started = true;
        this.res.writeHead(200, SSE_HEADERS);
      }
      if (this.ctx.cutAfterEvents !== undefined && this.sent >= this.ctx.cutAfterEvents) {
        // cut_after_events: the request ran; the connection drops after N events, once they have left
        // (a destroy() at once could drop the last ones still in the socket's buffer: a cut after an
        // /code error event sometimes lost the error event itself).
        this.closed = true;
        const s = this.res.socket;
        if (s && !s.destroyed) s.write('', () => s.destroy());
        return;
      }
      this.res.write(goJson(obj) + '\n\n');
      this.sent++;
    });
    if (ev.type === 'init' && !this.pinger) this.startPing();
    return this.chain;
  }

  startPing() {
    const every = this.ctx.pingIntervalMs || 3000;
    this.event({ type: 'ping', text: 'pong' });
    this.pinger = setInterval(() => this.event({ type: 'ping', text: 'pong' }), every);
    this.pinger.unref?.();
  }

  stopPing() {
    if (this.pinger) clearInterval(this.pinger);
    this.pinger = null;
  }

  // A synchronous failure before any event: a plain JSON error, as RespondError does.
  async fail(status, code, message) {
    await this.chain;
    this.stopPing();
    if (this.started || this.gone) {
      this.res.end();
      return;
    }
    sendGoJson(this.res, status, { code, message });
  }

  // After the last event: hold the stream open graceMs (execd's ApiGracefulShutdownTimeout), then EOF.
  async end(graceMs = 0) {
    await this.chain;
    this.stopPing();
    if (graceMs > 0 && !this.gone) await sleep(graceMs);
    if (this.gone) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, SSE_HEADERS);
    }
    this.res.end();
  }
}
