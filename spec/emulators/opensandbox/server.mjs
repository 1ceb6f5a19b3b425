#!/usr/bin/env node
// OpenSandbox wire-protocol emulator (tests only). See spec/emulators/README.md.
//
//   node server.mjs [--port N] [--host 127.0.0.1] [--api-key KEY]... [--endpoint-style header|uri]
//                   [--execd-listener] [--provision-ms N] [--execd-not-ready-pings N] [--grace-ms N]
//                   [--snapshot-ms N] [--exit-with-parent] [--verbose]
//
// Prints "listening <base-url>" as the first stdout line. One listener serves the lifecycle API
// (with and without /v1), every sandbox's execd (44772) and egress sidecar (18080) at the endpoint the
// lifecycle API hands out, the server proxy route /sandboxes/{id}/proxy/{port}/..., and /_emulator.
import http from 'node:http';
import { Emulator, DEFAULT_CONFIG } from './lib/emulator.mjs';
import { handleLifecycle, EXECD_PORT, EGRESS_PORT } from './lib/lifecycle.mjs';
import { handleExecd, handleEgress, sandboxGone, unreachable } from './lib/execd.mjs';
import { limitResponseBytes } from './lib/faults.mjs';
import { readBody, send, sendJson, sendGoJson, sleep, requestIdOf } from './lib/util.mjs';
import { killAllChildren, liveChildren, hasBwrap } from './lib/runtime.mjs';

const CONFIG_FLAGS = { '--provision-ms': 'provisionMs', '--execd-not-ready-pings': 'execdNotReadyPings',
  '--grace-ms': 'graceMs', '--snapshot-ms': 'snapshotMs', '--ping-interval-ms': 'pingIntervalMs' };

function parseArgs(argv) {
  const o = { port: 0, host: '127.0.0.1', keys: [], verbose: false, exitWithParent: false, endpointStyle: 'header', config: {},
    execdListener: false, allowedHostPaths: [] };
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
    else if (a === '--endpoint-style') o.endpointStyle = val();
    else if (a === '--execd-listener') o.execdListener = true;
    else if (a === '--allowed-host-path') o.allowedHostPaths.push(val());
    else if (CONFIG_FLAGS[a]) o.config[CONFIG_FLAGS[a]] = Number(val());
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--exit-with-parent') o.exitWithParent = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: emulator opensandbox [--port N] [--api-key KEY]... [--host 127.0.0.1] [--endpoint-style header|uri] [--execd-listener] [--allowed-host-path P]...\n'
        + '         [--provision-ms N] [--execd-not-ready-pings N] [--grace-ms N] [--snapshot-ms N] [--exit-with-parent] [--verbose]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) throw new Error('--port must be 0..65535');
  if (!/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(o.host)) throw new Error('--host must be a loopback address (tests only)');
  if (!['header', 'uri'].includes(o.endpointStyle)) throw new Error('--endpoint-style must be header or uri');
  for (const [k, n] of Object.entries(o.config)) {
    if (!Number.isInteger(n) || n < 0) throw new Error(`${k} must be an integer >= 0`);
  }
  if (o.keys.length === 0) o.keys.push('opensandbox_test_key');
  return o;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`emulator opensandbox: ${e.message}\n`);
  process.exit(2);
}

const log = opts.verbose ? (m) => process.stderr.write(`[opensandbox-emu] ${m}\n`) : () => {};
const emu = new Emulator({ keys: opts.keys, log, config: opts.config, allowedHostPaths: opts.allowedHostPaths });
emu.initialConfig = { ...emu.config };
emu.endpointStyle = opts.endpointStyle;

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

// Which plane a request is for: a sandbox port (through the ingress header, the uri route or the
// server proxy) or the lifecycle API.
function route(req, url) {
  const ingress = req.headers['opensandbox-ingress-to'];
  if (ingress !== undefined) {
    const m = /^(.+)-(\d+)$/.exec(String(ingress));
    if (!m) return { bad: `malformed OpenSandbox-Ingress-To header: ${ingress}` };
    return { sandboxId: m[1], port: Number(m[2]), path: url.pathname, proxied: false };
  }
  let m = url.pathname.match(/^(?:\/v1)?\/sandboxes\/([^/]+)\/proxy\/(\d+)(\/.*)?$/);
  if (m) return { sandboxId: decodeURIComponent(m[1]), port: Number(m[2]), path: m[3] || '/', proxied: true };
  m = url.pathname.match(new RegExp(`^/(${UUID})/(\\d+)(/.*)?$`));
  if (m) return { sandboxId: m[1], port: Number(m[2]), path: m[3] || '/', proxied: false };
  return null;
}

const FAULT_CODES = {
  lifecycle: { 400: 'SANDBOX::INVALID_PARAMETER', 401: 'INVALID_API_KEY', 403: 'FORBIDDEN', 404: 'DOCKER::SANDBOX_NOT_FOUND',
    409: 'DOCKER::SANDBOX_NOT_RUNNING', 429: 'RATE_LIMITED', 500: 'GENERAL::UNKNOWN_ERROR', 502: 'BAD_GATEWAY',
    503: 'SERVICE_UNAVAILABLE', 504: 'KUBERNETES::POD_READY_TIMEOUT' },
  execd: { 400: 'INVALID_REQUEST_BODY', 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 404: 'FILE_NOT_FOUND', 409: 'RUNTIME_ERROR',
    429: 'RATE_LIMITED', 500: 'RUNTIME_ERROR', 502: 'BAD_GATEWAY', 503: 'SERVICE_UNAVAILABLE', 504: 'GATEWAY_TIMEOUT' },
};

async function injectStatus(rule, plane, req, res) {
  await readBody(req).catch(() => {});
  const headers = {};
  if (rule.retryAfter !== undefined && rule.retryAfter !== null) headers['Retry-After'] = String(rule.retryAfter);
  if (rule.body !== undefined) {
    const text = typeof rule.body === 'string' ? rule.body : JSON.stringify(rule.body);
    return send(res, rule.status, text, { 'Content-Type': typeof rule.body === 'string' ? 'text/plain' : 'application/json', ...headers });
  }
  const message = rule.message || `injected fault ${rule.status}`;
  if (rule.status === 422) {
    return sendJson(res, 422, { detail: [{ type: 'value_error', loc: ['body'], msg: `Value error, ${message}`, input: null, ctx: { error: {} } }] }, headers);
  }
  if (plane === 'execd' && rule.status === 401) {
    // execd's own token check answers {"error": ...} (docs/protocols/opensandbox.md §2.1).
    return sendGoJson(res, 401, { error: 'Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN' }, headers);
  }
  const code = rule.code || FAULT_CODES[plane][rule.status] || 'GENERAL::UNKNOWN_ERROR';
  return sendJson(res, rule.status, { code, message }, headers);
}

async function admin(req, res, url) {
  const p = url.pathname;
  const m = req.method;
  let g;
  const json = async () => {
    const buf = await readBody(req);
    return buf.length ? JSON.parse(buf.toString('utf8')) : {};
  };
  if (p === '/_emulator/state' && m === 'GET') return sendJson(res, 200, emu.state());
  if (p === '/_emulator/reset' && m === 'POST') { await readBody(req); emu.reset(); return sendJson(res, 200, { ok: true }); }
  // named volumes, for `docker volume create` (volumes.mjs): {name, files?: {path: content}}
  if (p === '/_emulator/volumes' && m === 'GET') return sendJson(res, 200, emu.volumes.list());
  if (p === '/_emulator/volumes' && m === 'POST') {
    try {
      const body = await json();
      emu.volumes.create(String(body.name || ''), body.files || {});
      return sendJson(res, 200, emu.volumes.list());
    } catch (e) {
      return sendJson(res, 400, { error: e.message });
    }
  }
  if ((g = p.match(/^\/_emulator\/volumes\/([^/]+)$/)) && m === 'DELETE') {
    await readBody(req);
    return emu.volumes.remove(decodeURIComponent(g[1])) ? send(res, 204) : sendJson(res, 404, { error: 'no such volume' });
  }
  if (p === '/_emulator/faults' && m === 'GET') return sendJson(res, 200, emu.faults.list());
  if (p === '/_emulator/faults' && m === 'DELETE') { await readBody(req); emu.faults.clear(); return send(res, 204); }
  if (p === '/_emulator/faults' && m === 'POST') {
    try {
      const body = await json();
      const specs = Array.isArray(body) ? body : Array.isArray(body.faults) ? body.faults : [body];
      const rules = specs.map((s) => emu.faults.add(s));
      return sendJson(res, 200, { ids: rules.map((r) => r.id) });
    } catch (e) {
      return sendJson(res, 400, { error: e.message });
    }
  }
  if (p === '/_emulator/config' && m === 'GET') return sendJson(res, 200, emu.config);
  if (p === '/_emulator/config' && m === 'POST') {
    try {
      const body = await json();
      for (const [k, v] of Object.entries(body)) {
        if (!(k in DEFAULT_CONFIG)) throw new Error(`unknown config key ${k}; one of ${Object.keys(DEFAULT_CONFIG).join(', ')}`);
        if (!Number.isInteger(v) || v < 0) throw new Error(`${k} must be an integer >= 0`);
        emu.config[k] = v;
      }
      return sendJson(res, 200, emu.config);
    } catch (e) {
      return sendJson(res, 400, { error: e.message });
    }
  }
  if (p === '/_emulator/execd-listener' && m === 'POST') {
    if (!execdServer) return sendJson(res, 400, { error: 'started without --execd-listener' });
    const body = await json();
    await setExecdListener(body.up !== false);
    return sendJson(res, 200, { up: execdServer.listening, endpoint: emu.execdHost });
  }
  if ((g = p.match(/^\/_emulator\/sandboxes\/([^/]+)\/(kill|expire)$/)) && m === 'POST') {
    await readBody(req);
    const sbx = emu.sandboxes.get(decodeURIComponent(g[1]));
    if (!sbx) return sendJson(res, 404, { error: 'no such sandbox' });
    emu.killSandbox(sbx, g[2] === 'kill' ? 'lost' : 'expired');
    return send(res, 204);
  }
  return sendJson(res, 404, { error: `no admin route ${m} ${p}` });
}

// Any other port: what a program in the sandbox listens on. Sandboxes share the emulator's network (no
// network namespace), so the port is this machine's loopback port; nothing there -> the proxy's 502.
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'opensandbox-ingress-to',
  'open-sandbox-api-key']);
function proxyPort(sbx, port, req, res, target) {
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP.has(k)) headers[k] = v;
  return new Promise((resolve) => {
    const up = http.request({ host: '127.0.0.1', port, method: req.method, path: target.pathname + target.search, headers },
      (ures) => {
        const h = {};
        for (const [k, v] of Object.entries(ures.headers)) if (!HOP.has(k)) h[k] = v;
        res.writeHead(ures.statusCode, h);
        ures.pipe(res);
        ures.on('end', resolve);
        ures.on('error', () => { res.socket?.destroy(); resolve(); });
      });
    up.on('error', (e) => {
      if (!res.headersSent) unreachable(res, sbx.id, port, e.code === 'ECONNREFUSED' ? 'connection refused' : e.message);
      else res.socket?.destroy();
      resolve();
    });
    req.pipe(up);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://emulator');
  if (url.pathname.startsWith('/_emulator/')) return admin(req, res, url);

  const r = route(req, url);
  if (r && r.bad) {
    await readBody(req).catch(() => {});
    return sendJson(res, 400, { code: 'GATEWAY::BAD_ROUTE', message: r.bad });
  }
  const plane = r ? 'execd' : 'lifecycle';
  // The server's middleware puts X-Request-ID on every response it makes (lifecycle and proxy);
  // execd reached directly sends none.
  if (!r || r.proxied) res.setHeader('X-Request-ID', requestIdOf(req));
  const sandboxId = r ? r.sandboxId : (url.pathname.match(/^(?:\/v1)?\/sandboxes\/([^/]+)/) || [])[1];
  const faultPath = r ? r.path : url.pathname.replace(/^\/v1(?=\/)/, '');
  const ctx = { pingIntervalMs: emu.config.pingIntervalMs };

  const rule = emu.faults.take({ method: req.method, path: faultPath, plane, sandboxId });
  if (rule) {
    log(`fault #${rule.id} ${rule.action} on ${req.method} ${url.pathname} (${plane})`);
    if (rule.delayMs) await sleep(rule.delayMs);
    switch (rule.action) {
      case 'status':
        return injectStatus(rule, plane, req, res);
      case 'cut_on_request':
        req.socket.destroy();
        return;
      case 'cut_before_response':
        await readBody(req).catch(() => {});
        res.socket?.destroy();
        return;
      case 'cut_after_bytes':
        limitResponseBytes(res, rule.bytes);
        break;
      case 'cut_after_events':
        ctx.cutAfterEvents = rule.events;
        break;
      case 'slow_stream':
        ctx.eventDelayMs = rule.eventDelayMs;
        break;
      case 'kill_sandbox': {
        const sbx = emu.sandboxes.get(rule.sandboxId || sandboxId);
        if (sbx) {
          if (rule.afterMs > 0) setTimeout(() => emu.killSandbox(sbx, `lost (fault #${rule.id})`), rule.afterMs);
          else emu.killSandbox(sbx, `lost (fault #${rule.id})`);
        }
        break;
      }
      default:
        break;
    }
  }

  if (plane === 'lifecycle') return handleLifecycle(emu, req, res, url);

  const sbx = emu.sandboxes.get(r.sandboxId);
  if (!sbx) {
    await readBody(req).catch(() => {});
    return sandboxGone(res, r.sandboxId);
  }
  if (sbx.state !== 'Running') {
    await readBody(req).catch(() => {});
    return unreachable(res, sbx.id, r.port, sbx.state === 'Paused' ? 'the container is paused' : 'the container is not running yet');
  }
  if (r.port === EXECD_PORT && sbx.notReadyPings > 0 && r.path === '/ping') {
    sbx.notReadyPings--;
    await readBody(req).catch(() => {});
    return unreachable(res, sbx.id, r.port, 'connection refused (execd is starting)');
  }
  const target = new URL(r.path + url.search, 'http://sandbox');
  if (r.port !== EXECD_PORT && r.port !== EGRESS_PORT) return proxyPort(sbx, r.port, req, res, target);
  sbx.active.add(res);
  res.on('close', () => sbx.active.delete(res));
  if (r.port === EGRESS_PORT) return handleEgress(sbx, req, res, target);
  return handleExecd(emu, sbx, req, res, target, ctx);
}

function onRequest(req, res) {
  handle(req, res).catch((e) => {
    log(`error handling ${req.method} ${req.url}: ${e.stack || e}`);
    if (!res.headersSent) sendJson(res, 500, { code: 'GENERAL::UNKNOWN_ERROR', message: `emulator error: ${e.message}` });
    else res.socket?.destroy();
  });
}
const server = http.createServer({ keepAliveTimeout: 65000, requestTimeout: 0 }, onRequest);

// --execd-listener: sandbox ports on a listener of their own (as Docker maps execd to its own host port),
// which /_emulator/execd-listener {up: false} closes: execd calls are then refused while the lifecycle
// API still answers.
let execdServer = null;
let execdPort = 0;
function setExecdListener(up) {
  return new Promise((resolve) => {
    if (up === execdServer.listening) return resolve();
    if (!up) {
      execdServer.close(() => resolve());
      execdServer.closeAllConnections?.();
      return;
    }
    execdServer.listen(execdPort, opts.host, () => resolve());
  });
}

let stopping = false;
function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  log('shutting down');
  try { emu.shutdown(); } catch (e) { process.stderr.write(`emulator opensandbox: shutdown: ${e.message}\n`); }
  killAllChildren();
  server.close();
  server.closeAllConnections?.();
  if (execdServer) {
    execdServer.close();
    execdServer.closeAllConnections?.();
  }
  // Reap every child before exiting so none is left as a zombie under a non-reaping pid 1.
  const t0 = Date.now();
  const wait = () => {
    if (liveChildren.size === 0 || Date.now() - t0 > 3000) process.exit(code);
    else setTimeout(wait, 10);
  };
  wait();
}
process.on('SIGTERM', () => stop(0));
process.on('SIGINT', () => stop(0));
process.on('SIGHUP', () => stop(0));
process.on('exit', () => { killAllChildren(); emu.shutdown(); });

if (opts.exitWithParent) {
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) stop(0); }, 500).unref();
}

server.on('error', (e) => {
  process.stderr.write(`emulator opensandbox: ${e.message}\n`);
  stop(1);
});

server.listen(opts.port, opts.host, async () => {
  const { port } = server.address();
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  emu.baseUrl = `http://${host}:${port}`;
  if (opts.execdListener) {
    execdServer = http.createServer({ keepAliveTimeout: 65000, requestTimeout: 0 }, onRequest);
    await new Promise((resolve) => execdServer.listen(0, opts.host, resolve));
    execdPort = execdServer.address().port;
    emu.execdHost = `${host}:${execdPort}`;
  }
  process.stdout.write(`listening ${emu.baseUrl}\n`);
  log(`api keys: ${opts.keys.length}, bubblewrap: ${hasBwrap()}, state dir: ${emu.stateDir}`);
});
