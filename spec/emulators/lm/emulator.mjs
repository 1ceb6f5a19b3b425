// The parts the OpenAI and Anthropic emulators share (tests only; see spec/emulators/README.md, "Model
// APIs"): the command line, the listener and its clean exit, the admin API (/_emulator/...), fault rules,
// scripted models, the record of requests, and an event-stream writer that faults can cut, slow down or
// break. Each wire format (openai/lib/chat.mjs, anthropic/lib/messages.mjs) plugs in with
// run(name, wire), where wire = { defaultKeys, handle(emu, req, res, url) }.
import http from 'node:http';
import crypto from 'node:crypto';
// the E2B emulator's HTTP helpers (its send also leaves a 204 without a body length)
import { sleep, readBody, send, sendJson } from '../e2b/lib/util.mjs';
import { limitResponseBytes } from '../e2b/lib/faults.mjs';

export { sleep, readBody, send, sendJson, limitResponseBytes };

export function hexId(n = 24) {
  return crypto.randomBytes(Math.ceil(n / 2)).toString('hex').slice(0, n);
}

// Rough token counts, the same for both wire formats: 4 bytes of text a token (OpenAI's rule of thumb
// for English), a fixed 100 per image. Only the arithmetic matters to tests: usage adds up, and a long
// conversation crosses the context window.
export function tokens(text) {
  if (!text) return 0;
  return Math.ceil(Buffer.byteLength(String(text)) / 4);
}

export function conversationTokens(conv) {
  let n = tokens(conv.system);
  for (const m of conv.messages) {
    n += 4 + tokens(m.text);
    n += 100 * (m.images ? m.images.length : 0);
    for (const c of m.tool_calls || []) n += tokens(c.name) + tokens(JSON.stringify(c.arguments ?? c.arguments_raw ?? ''));
  }
  if (conv.tools.length) n += tokens(JSON.stringify(conv.tools));
  return n;
}

// ------------------------------------------------------------------------------------------------
// Fault rules (POST /_emulator/faults), matched per request; the first live one fires.

const ACTIONS = new Set(['status', 'delay', 'cut_on_request', 'cut_before_response', 'cut_after_bytes', 'cut_after_events',
  'stream_error', 'slow_stream', 'byte_stream', 'endless_stream', 'endless_error_body', 'context_length']);

let nextFaultId = 1;

export class Faults {
  constructor() { this.rules = []; }

  add(spec) {
    if (!spec || typeof spec !== 'object') throw new Error('fault must be an object');
    const action = spec.action || (spec.status ? 'status' : spec.delayMs ? 'delay' : undefined);
    if (!ACTIONS.has(action)) throw new Error(`unknown fault action ${JSON.stringify(spec.action)}; one of ${[...ACTIONS].join(', ')}`);
    if (action === 'status' && !(Number.isInteger(spec.status) && spec.status >= 400 && spec.status <= 599)) {
      throw new Error('status must be an integer 400..599');
    }
    for (const k of ['bytes', 'events']) {
      if (spec[k] !== undefined && !(Number.isInteger(spec[k]) && spec[k] >= 0)) throw new Error(`${k} must be an integer >= 0`);
    }
    const times = spec.times === undefined ? 1 : Number(spec.times);
    if (!Number.isInteger(times) || times === 0 || times < -1) throw new Error('times must be a positive integer or -1 (unlimited)');
    const rule = { ...spec, id: nextFaultId++, action, times, fired: 0, re: spec.path ? new RegExp(spec.path) : null };
    this.rules.push(rule);
    return rule;
  }

  take(ctx) {
    for (const r of this.rules) {
      if (r.times !== -1 && r.fired >= r.times) continue;
      if (r.method && r.method.toUpperCase() !== ctx.method) continue;
      if (r.re && !r.re.test(ctx.path)) continue;
      if (r.model !== undefined && r.model !== ctx.model) continue;
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

// ------------------------------------------------------------------------------------------------
// The event-stream writer. A wire module calls event(name, data) for each SSE event and end() once;
// ctx (from a fault rule or a scripted reply) may cut the stream after N events, replace event N with
// an error, space events out, write one byte at a time, or never end.

export class EventStream {
  constructor(res, ctx, errorEvent) {
    this.res = res;
    this.ctx = ctx;
    this.errorEvent = errorEvent; // () => [name, data]: the wire format's in-stream error
    this.sent = 0;
    this.stopped = false;
    res.on('close', () => { this.stopped = true; });
  }

  async write(text) {
    if (this.ctx.chunkBytes) {
      const buf = Buffer.from(text);
      for (let i = 0; i < buf.length && !this.stopped; i += this.ctx.chunkBytes) {
        this.res.write(buf.subarray(i, i + this.ctx.chunkBytes));
        await new Promise((r) => setImmediate(r));
      }
      return;
    }
    // respect back-pressure, and give the event loop a turn: an endless stream must not pile up in
    // memory nor starve the socket (an await that never waits would run forever in microtasks)
    if (!this.res.write(text)) {
      await new Promise((r) => { this.res.once('drain', r); this.res.once('close', r); });
    } else if (this.ctx.endless) {
      await new Promise((r) => setImmediate(r));
    }
  }

  // -> false once the stream was stopped (cut, error sent, client gone)
  async event(name, data) {
    if (this.stopped) return false;
    const ctx = this.ctx;
    if (ctx.cutAfterEvents !== undefined && this.sent >= ctx.cutAfterEvents) {
      this.stopped = true;
      const s = this.res.socket;
      if (s && !s.destroyed) s.write('', () => s.destroy());
      return false;
    }
    if (ctx.errorAfterEvents !== undefined && this.sent >= ctx.errorAfterEvents) {
      const [en, ed] = this.errorEvent();
      await this.write((en ? `event: ${en}\n` : '') + `data: ${JSON.stringify(ed)}\n\n`);
      this.stopped = true;
      this.res.end();
      return false;
    }
    if (ctx.eventDelayMs && this.sent > 0) await sleep(ctx.eventDelayMs);
    if (this.stopped) return false;
    const payload = typeof data === 'string' ? data : JSON.stringify(data);
    await this.write((name ? `event: ${name}\n` : '') + `data: ${payload}\n\n`);
    this.sent++;
    return !this.stopped;
  }

  end() {
    if (!this.stopped) this.res.end();
    this.stopped = true;
  }
}

export function startStream(res, headers) {
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache', ...headers });
  res.flushHeaders();
}

// ------------------------------------------------------------------------------------------------
// Scripted models: POST /_emulator/scripts {name, replies: [...], repeat?}. A request for model
// "script:<name>" takes the next reply (see the README for the reply fields).

export class Scripts {
  constructor() { this.byName = new Map(); }

  set(spec) {
    if (!spec || typeof spec.name !== 'string' || !/^[\w.-]{1,100}$/.test(spec.name)) throw new Error('script needs a name of [A-Za-z0-9_.-]');
    if (!Array.isArray(spec.replies)) throw new Error('script needs replies: [...]');
    for (const r of spec.replies) if (!r || typeof r !== 'object') throw new Error('each reply must be an object');
    this.byName.set(spec.name, { replies: spec.replies, served: 0, repeat: spec.repeat === true });
    return { name: spec.name, model: `script:${spec.name}`, replies: spec.replies.length };
  }

  has(name) { return this.byName.has(name); }

  // -> the next reply, or null when the script is used up
  next(name) {
    const s = this.byName.get(name);
    if (!s) return null;
    if (s.served >= s.replies.length) {
      if (!s.repeat || s.replies.length === 0) return null;
      s.served++;
      return s.replies[s.replies.length - 1];
    }
    return s.replies[s.served++];
  }

  info(name) {
    const s = this.byName.get(name);
    return s && { name, served: s.served, remaining: Math.max(0, s.replies.length - s.served), repeat: s.repeat };
  }

  names() { return [...this.byName.keys()]; }

  clear() { this.byName.clear(); }
}

// ------------------------------------------------------------------------------------------------
// The emulator's state and the admin API.

export const DEFAULT_CONFIG = {
  contextWindow: 200000,   // tokens of input the emulated models take before the context-length error
  chunkChars: 16,          // characters of text (and of tool arguments) per streamed delta
};

export class Emulator {
  constructor({ name, keys, log, config }) {
    this.name = name;
    this.keys = keys;
    this.log = log;
    this.config = { ...DEFAULT_CONFIG, ...config };
    this.initialConfig = { ...this.config };
    this.faults = new Faults();
    this.scripts = new Scripts();
    this.requests = [];      // the last MAX_RECORDED requests to the API
    this.seq = 0;
    this.active = new Set(); // responses in flight
    this.baseUrl = null;
  }

  record(entry) {
    entry.seq = ++this.seq;
    this.requests.push(entry);
    if (this.requests.length > 50) this.requests.shift();
    return entry;
  }

  state() {
    return { name: this.name, baseUrl: this.baseUrl, inFlight: this.active.size, requests: this.seq,
      scripts: this.scripts.names().map((n) => this.scripts.info(n)), faults: this.faults.list(), config: this.config };
  }

  reset() {
    this.faults.clear();
    this.scripts.clear();
    this.requests = [];
    this.config = { ...this.initialConfig };
  }
}

async function admin(emu, req, res, url) {
  const p = url.pathname;
  const m = req.method;
  let g;
  const json = async () => {
    const buf = await readBody(req);
    return buf.length ? JSON.parse(buf.toString('utf8')) : {};
  };
  try {
    if (p === '/_emulator/state' && m === 'GET') return sendJson(res, 200, emu.state());
    if (p === '/_emulator/reset' && m === 'POST') { await readBody(req); emu.reset(); return sendJson(res, 200, { ok: true }); }
    if (p === '/_emulator/faults' && m === 'GET') return sendJson(res, 200, emu.faults.list());
    if (p === '/_emulator/faults' && m === 'DELETE') { await readBody(req); emu.faults.clear(); return send(res, 204); }
    if (p === '/_emulator/faults' && m === 'POST') {
      const body = await json();
      const specs = Array.isArray(body) ? body : Array.isArray(body.faults) ? body.faults : [body];
      return sendJson(res, 200, { ids: specs.map((s) => emu.faults.add(s).id) });
    }
    if (p === '/_emulator/scripts' && m === 'POST') return sendJson(res, 200, emu.scripts.set(await json()));
    if ((g = p.match(/^\/_emulator\/scripts\/([^/]+)$/)) && m === 'GET') {
      const info = emu.scripts.info(decodeURIComponent(g[1]));
      return info ? sendJson(res, 200, info) : sendJson(res, 404, { error: 'no such script' });
    }
    if (p === '/_emulator/requests' && m === 'GET') {
      const since = Number(url.searchParams.get('since') || 0);
      const model = url.searchParams.get('model');
      return sendJson(res, 200, emu.requests.filter((r) => r.seq > since && (model === null || r.model === model)));
    }
    if (p === '/_emulator/requests' && m === 'DELETE') { await readBody(req); emu.requests = []; return send(res, 204); }
    if (p === '/_emulator/config' && m === 'GET') return sendJson(res, 200, emu.config);
    if (p === '/_emulator/config' && m === 'POST') {
      const body = await json();
      for (const [k, v] of Object.entries(body)) {
        if (!(k in DEFAULT_CONFIG)) throw new Error(`unknown config key ${k}; one of ${Object.keys(DEFAULT_CONFIG).join(', ')}`);
        if (!Number.isInteger(v) || v < 1) throw new Error(`${k} must be an integer >= 1`);
        emu.config[k] = v;
      }
      return sendJson(res, 200, emu.config);
    }
  } catch (e) {
    return sendJson(res, 400, { error: e.message });
  }
  return sendJson(res, 404, { error: `no admin route ${m} ${p}` });
}

function parseArgs(name, argv) {
  const o = { port: 0, host: '127.0.0.1', keys: [], verbose: false, exitWithParent: false, config: {} };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let v;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) { v = a.slice(eq + 1); a = a.slice(0, eq); }
    const val = () => {
      if (v !== undefined) return v;
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(val());
    else if (a === '--api-key') o.keys.push(val());
    else if (a === '--host') o.host = val();
    else if (a === '--context-window') o.config.contextWindow = Number(val());
    else if (a === '--chunk-chars') o.config.chunkChars = Number(val());
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--exit-with-parent') o.exitWithParent = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`usage: emulator ${name} [--port N] [--api-key KEY]... [--host 127.0.0.1] [--context-window TOKENS] [--chunk-chars N] [--exit-with-parent] [--verbose]\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) throw new Error('--port must be 0..65535');
  if (!/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(o.host)) throw new Error('--host must be a loopback address (tests only)');
  for (const [k, n] of Object.entries(o.config)) if (!Number.isInteger(n) || n < 1) throw new Error(`${k} must be an integer >= 1`);
  return o;
}

// run(name, wire): parse the command line, listen, print "listening <url>", serve until SIGTERM.
export function run(name, wire) {
  let opts;
  try {
    opts = parseArgs(name, process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`emulator ${name}: ${e.message}\n`);
    process.exit(2);
  }
  if (opts.keys.length === 0) opts.keys.push(...wire.defaultKeys);
  const log = opts.verbose ? (msg) => process.stderr.write(`[${name}-emu] ${msg}\n`) : () => {};
  const emu = new Emulator({ name, keys: opts.keys, log, config: opts.config });

  const server = http.createServer({ keepAliveTimeout: 65000, requestTimeout: 0 }, (req, res) => {
    const url = new URL(req.url, 'http://emulator');
    emu.active.add(res);
    res.on('close', () => emu.active.delete(res));
    const work = url.pathname.startsWith('/_emulator/') ? admin(emu, req, res, url) : wire.handle(emu, req, res, url);
    work.catch((e) => {
      log(`error handling ${req.method} ${req.url}: ${e.stack || e}`);
      if (!res.headersSent) sendJson(res, 500, { error: { message: `emulator error: ${e.message}`, type: 'emulator_error' } });
      else res.socket?.destroy();
    });
  });
  server.on('connection', (s) => s.setNoDelay(true));

  let stopping = false;
  const stop = (code = 0) => {
    if (stopping) return;
    stopping = true;
    server.close();
    server.closeAllConnections?.();
    process.exit(code);
  };
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
  process.on('SIGHUP', () => stop(0));
  if (opts.exitWithParent) {
    const parent = process.ppid;
    setInterval(() => { if (process.ppid !== parent) stop(0); }, 500).unref();
  }
  server.on('error', (e) => {
    process.stderr.write(`emulator ${name}: ${e.message}\n`);
    stop(1);
  });
  server.listen(opts.port, opts.host, () => {
    const { port } = server.address();
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    emu.baseUrl = `http://${host}:${port}`;
    process.stdout.write(`listening ${emu.baseUrl}\n`);
    log(`api keys: ${opts.keys.length}`);
  });
}

// ------------------------------------------------------------------------------------------------
// What a wire module asks before answering: the fault rule for this request (consumed), applied as far
// as it is generic. -> { ctx, handled }: handled = true when the fault already answered or cut.

export async function applyFault(emu, req, res, { path, model }, answerStatus) {
  const rule = emu.faults.take({ method: req.method, path, model });
  const ctx = {};
  if (!rule) return { ctx, handled: false, rule: null };
  emu.log(`fault #${rule.id} ${rule.action} on ${req.method} ${path} (${model})`);
  if (rule.delayMs) await sleep(rule.delayMs);
  switch (rule.action) {
    case 'status':
      await answerStatus(rule);
      return { ctx, handled: true, rule };
    case 'cut_on_request':
      req.socket.destroy();
      return { ctx, handled: true, rule };
    case 'cut_before_response':
      res.socket?.destroy();
      return { ctx, handled: true, rule };
    case 'cut_after_bytes':
      limitResponseBytes(res, rule.bytes || 0);
      break;
    case 'cut_after_events':
      ctx.cutAfterEvents = rule.events || 0;
      break;
    case 'stream_error':
      ctx.errorAfterEvents = rule.events || 0;
      ctx.errorMessage = rule.message;
      break;
    case 'slow_stream':
      ctx.eventDelayMs = Number(rule.eventDelayMs) || 50;
      break;
    case 'byte_stream':
      ctx.chunkBytes = Number(rule.chunkBytes) || 1;
      break;
    case 'endless_stream':
      ctx.endless = true;
      break;
    case 'endless_error_body': {
      res.writeHead(rule.status || 500, { 'Content-Type': 'application/json' });
      const chunk = Buffer.from('{"error":' + ' '.repeat(65536));
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
      return { ctx, handled: true, rule };
    }
    case 'context_length':
      ctx.contextLength = true;
      break;
    default:
      break;
  }
  return { ctx, handled: false, rule };
}
