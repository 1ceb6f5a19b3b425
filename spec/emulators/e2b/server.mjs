#!/usr/bin/env node
// E2B wire-protocol emulator (tests only). See spec/emulators/README.md.
//
//   node server.mjs [--port N] [--host 127.0.0.1] [--api-key KEY]... [--domain D] [--verbose]
//
// Prints "listening <base-url>" as the first stdout line. One listener serves the control plane,
// envd (port 49983) and the code interpreter (port 49999) of every sandbox, routed by the
// E2b-Sandbox-Id / E2b-Sandbox-Port headers or by a "<port>-<sandboxId>.<domain>" Host, plus the
// /_emulator admin API.
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import net from 'node:net';
import { Emulator } from './lib/emulator.mjs';
import { handleControl, handleUpload, concurrencyLimitMessage } from './lib/control.mjs';
import { handleEnvd } from './lib/envd.mjs';
import { handleInterp, config as interpConfig } from './lib/interp.mjs';
import { limitResponseBytes } from './lib/faults.mjs';
import { readBody, parseJson, send, sendJson, apiError, sleep } from './lib/util.mjs';
import { killAllChildren, hasBwrap, liveChildren } from './lib/runtime.mjs';
import { unaryError, ServerStream } from './lib/connect.mjs';

function parseArgs(argv) {
  const o = { port: 0, host: '127.0.0.1', keys: [], domain: 'e2b.local', verbose: false, exitWithParent: false, maxSandboxes: 0, selfHosted: false, maxLifetimeHours: 24 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(val());
    else if (a.startsWith('--port=')) o.port = Number(a.slice(7));
    else if (a === '--api-key') o.keys.push(val());
    else if (a.startsWith('--api-key=')) o.keys.push(a.slice(10));
    else if (a === '--host') o.host = val();
    else if (a === '--tls-cert') o.tlsCert = val();
    else if (a === '--tls-key') o.tlsKey = val();
    else if (a === '--domain') o.domain = val();
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--exit-with-parent') o.exitWithParent = true;
    else if (a === '--max-sandboxes') o.maxSandboxes = Number(val());
    else if (a === '--state-dir') o.stateDir = val();
    else if (a === '--self-hosted') o.selfHosted = true;
    else if (a === '--max-lifetime-hours') o.maxLifetimeHours = Number(val());
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: emulator e2b [--port N] [--api-key KEY]... [--host 127.0.0.1] [--domain e2b.local] [--exit-with-parent] [--max-sandboxes N] [--max-lifetime-hours H] [--self-hosted] [--state-dir DIR] [--tls-cert PEM --tls-key PEM] [--verbose]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) throw new Error('--port must be 0..65535');
  if (!/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(o.host)) throw new Error('--host must be a loopback address (tests only)');
  if (o.keys.length === 0) o.keys.push('e2b_test_key');
  if (!Number.isInteger(o.maxSandboxes) || o.maxSandboxes < 0) throw new Error('--max-sandboxes must be an integer >= 0');
  if (!Number.isInteger(o.maxLifetimeHours) || o.maxLifetimeHours < 1) throw new Error('--max-lifetime-hours must be an integer >= 1');
  return o;
}

const INTERP_DEFAULTS = { keepaliveMs: 5000 };

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`emulator e2b: ${e.message}\n`);
  process.exit(2);
}

const log = opts.verbose ? (m) => process.stderr.write(`[e2b-emu] ${m}\n`) : () => {};
const emu = new Emulator({ keys: opts.keys, domain: opts.domain, log, maxSandboxes: opts.maxSandboxes, stateDir: opts.stateDir,
  selfHosted: opts.selfHosted, maxLifetimeHours: opts.maxLifetimeHours });

// Where a request goes: the control plane, or a sandbox port on the data plane, as E2B's edge proxy
// decides (infra shared/pkg/proxy/host.go): the E2b-Sandbox-Id / -Port headers count only on the shared
// host sandbox.<domain>, localhost or an IP address; otherwise the Host <port>-<sandboxId>.<domain>.
function route(req) {
  const hostPort = String(req.headers.host || '');
  const host = hostPort.replace(/^\[(.*)\](:\d+)?$/, '$1').replace(/:\d+$/, '');
  const headersCount = host === 'localhost' || net.isIP(host) !== 0 || (host.startsWith('sandbox.') && host.length > 8);
  const id = req.headers['e2b-sandbox-id'];
  const port = req.headers['e2b-sandbox-port'];
  if (headersCount && (id !== undefined || port !== undefined)) {
    if (id === undefined) return { error: 'Missing header: E2b-Sandbox-Id' };
    if (port === undefined) return { error: 'Missing header: E2b-Sandbox-Port' };
    return { sandboxId: String(id), port: Number(port), host };
  }
  const m = /^(\d+)-([a-z0-9]+)\.(.+)$/i.exec(host);
  if (m) return { sandboxId: m[2], port: Number(m[1]), host };
  return null;
}

// The body (and headers) the real service answers a status with, per plane.
// - control plane: {"code","message"}; 429 with retryAfter is the rate limiter's (api/internal/middleware/
//   ratelimit/ratelimit.go: "Rate limit exceeded", Retry-After and RateLimit-* headers), 429 without it
//   the concurrency limit's (orchestrator/create_instance.go: the billing message, no Retry-After);
// - data plane 502/409/429: E2B's edge proxy (shared/pkg/proxy/template/*.go: JSON with sandboxId);
// - code interpreter: text; envd Connect unary: {"code":"<connect code>","message"}; envd REST and
//   Connect streams: {"code":N,"message"}.
const PROXY = {
  502: (rule, sandboxId) => ({ sandboxId, message: rule.message || 'The sandbox was not found', code: 502 }),
  409: (rule, sandboxId) => ({ sandboxId, message: rule.message || 'The sandbox is still transitioning. Try again in a moment.', code: 409 }),
  429: (rule, sandboxId) => ({ sandboxId, message: rule.message || 'The sandbox has too many concurrent incoming connections (limit: 100)', code: 429, connectionLimit: 100 }),
};

function faultBody(rule, plane, sandboxId, isConnect, isStream) {
  const status = rule.status;
  const headers = {};
  if (rule.retryAfter !== undefined && rule.retryAfter !== null) headers['Retry-After'] = String(rule.retryAfter);
  if (rule.body !== undefined) return { type: 'text/plain', body: typeof rule.body === 'string' ? rule.body : JSON.stringify(rule.body), headers };
  if (plane !== 'api' && plane !== 'upload' && PROXY[status]) return { type: 'application/json', body: JSON.stringify(PROXY[status](rule, sandboxId)), headers };
  let msg = rule.message || ({
    401: plane === 'api' ? 'Invalid API key, please visit https://e2b.dev/docs/api-key for more information.' : 'unauthorized access, please provide a valid access token or method signing if supported',
    404: 'not found (injected fault)',
    500: 'internal server error (injected fault)',
    503: 'service is temporarily unavailable (injected fault)',
  }[status] || `injected fault ${status}`);
  if (plane === 'api' && status === 429) {
    if (headers['Retry-After'] !== undefined) {
      msg = rule.message || 'Rate limit exceeded';
      Object.assign(headers, { 'RateLimit-Limit': '20', 'RateLimit-Remaining': '0', 'RateLimit-Reset': headers['Retry-After'] });
    } else {
      msg = rule.message || concurrencyLimitMessage(emu.maxSandboxes || 20);
    }
  }
  if (plane === 'jupyter') return { type: 'text/plain', body: msg, headers };
  if (isConnect && !isStream) {
    const code = { 401: 'unauthenticated', 404: 'not_found', 429: 'resource_exhausted', 500: 'internal', 503: 'unavailable', 400: 'invalid_argument', 403: 'permission_denied', 409: 'already_exists', 504: 'deadline_exceeded', 507: 'resource_exhausted' }[status] || 'unknown';
    return { type: 'application/json', body: JSON.stringify({ code, message: msg }), headers };
  }
  return { type: 'application/json', body: JSON.stringify({ code: status, message: msg }), headers };
}

async function admin(req, res, url) {
  const p = url.pathname;
  const m = req.method;
  let g;
  if (p === '/_emulator/state' && m === 'GET') return sendJson(res, 200, { ...emu.state(), bwrap: hasBwrap(), baseUrl: emu.baseUrl, stateDir: emu.stateDir });
  if (p === '/_emulator/crash' && m === 'POST') {
    // an uncaught exception, for the spec that checks a crash leaves nothing behind
    send(res, 204);
    setTimeout(() => { throw new Error('crash requested through /_emulator/crash'); }, 20);
    return undefined;
  }
  if (p === '/_emulator/reset' && m === 'POST') { await readBody(req); emu.reset(); Object.assign(interpConfig, INTERP_DEFAULTS); return sendJson(res, 200, { ok: true }); }
  if (p === '/_emulator/config' && m === 'GET') return sendJson(res, 200, { ...interpConfig });
  if (p === '/_emulator/config' && m === 'POST') {
    let body;
    try { body = parseJson(await readBody(req)); } catch { return sendJson(res, 400, { error: 'invalid JSON' }); }
    if (body.keepaliveMs !== undefined) {
      if (!(Number(body.keepaliveMs) > 0)) return sendJson(res, 400, { error: 'keepaliveMs must be > 0' });
      interpConfig.keepaliveMs = Number(body.keepaliveMs);
    }
    return sendJson(res, 200, { ...interpConfig });
  }
  if (p === '/_emulator/faults' && m === 'GET') return sendJson(res, 200, emu.faults.list());
  if (p === '/_emulator/faults' && m === 'DELETE') { emu.faults.clear(); return send(res, 204); }
  if (p === '/_emulator/faults' && m === 'POST') {
    let body;
    try { body = parseJson(await readBody(req)); } catch { return sendJson(res, 400, { error: 'invalid JSON' }); }
    const specs = Array.isArray(body) ? body : Array.isArray(body.faults) ? body.faults : [body];
    try {
      const rules = specs.map((s) => emu.faults.add(s));
      return sendJson(res, 200, { ids: rules.map((r) => r.id) });
    } catch (e) {
      return sendJson(res, 400, { error: e.message });
    }
  }
  if ((g = p.match(/^\/_emulator\/sandboxes\/([^/]+)\/(kill|expire)$/)) && m === 'POST') {
    await readBody(req);
    const sbx = emu.sandboxes.get(decodeURIComponent(g[1]));
    if (!sbx) return sendJson(res, 404, { error: 'no such sandbox' });
    if (g[2] === 'kill') emu.killSandbox(sbx, 'admin');
    else emu.expire(sbx);
    return send(res, 204);
  }
  return sendJson(res, 404, { error: `no admin route ${m} ${p}` });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://emulator');
  if (url.pathname.startsWith('/_emulator/')) return admin(req, res, url);

  const r = route(req);
  if (r && r.error) return apiError(res, 400, r.error);
  if (r) emu.hostsSeen.set(r.host, (emu.hostsSeen.get(r.host) || 0) + 1);
  const plane = url.pathname.startsWith('/_upload/') ? 'upload' : r ? (r.port === 49999 ? 'jupyter' : 'envd') : 'api';
  const sandboxId = r ? r.sandboxId : (url.pathname.match(/^\/(?:v2\/)?sandboxes\/([^/]+)/) || [])[1];
  const isConnect = plane === 'envd' && /^\/(process\.Process|filesystem\.Filesystem)\//.test(url.pathname);
  const isStream = isConnect && /\/(Start|Connect|WatchDir)$/.test(url.pathname);
  const ctx = { frameDelayMs: 0 };

  const rule = emu.faults.take({ method: req.method, path: url.pathname, plane, sandboxId });
  if (rule) {
    log(`fault #${rule.id} ${rule.action} on ${req.method} ${url.pathname} (${plane})`);
    if (rule.delayMs) await sleep(rule.delayMs);
    switch (rule.action) {
      case 'status': {
        await readBody(req).catch(() => {});
        const { type, body, headers } = faultBody(rule, plane, sandboxId, isConnect, isStream);
        return send(res, rule.status, body, { 'Content-Type': type, ...headers });
      }
      case 'cut_on_request':
        // Drop the connection as soon as the request head is in, without reading the body.
        req.socket.destroy();
        return;
      case 'cut_before_response':
        await readBody(req).catch(() => {});
        res.socket?.destroy();
        return;
      case 'cut_after_bytes':
        limitResponseBytes(res, rule.bytes);
        break;
      case 'slow_stream':
        ctx.frameDelayMs = rule.frameDelayMs;
        break;
      case 'execution_error':
        ctx.executionError = rule.name;
        break;
      case 'kill_sandbox': {
        const sbx = emu.sandboxes.get(rule.sandboxId || sandboxId);
        if (sbx) {
          if (rule.afterMs > 0) setTimeout(() => emu.killSandbox(sbx, `fault #${rule.id}`), rule.afterMs);
          else emu.killSandbox(sbx, `fault #${rule.id}`);
        }
        break;
      }
      default:
        break;
    }
  }

  if (plane === 'upload') return handleUpload(emu, req, res, url);
  if (plane === 'api') return handleControl(emu, req, res, url);

  // Data plane: the edge proxy in front of the sandbox.
  const sbx = emu.sandboxes.get(r.sandboxId);
  if (!sbx || sbx.state !== 'running') {
    if (sbx && sbx.state === 'paused' && sbx.autoResume) {
      await emu.resume(sbx, 300);
    } else {
      await readBody(req).catch(() => {});
      return sendJson(res, 502, { sandboxId: r.sandboxId, message: 'The sandbox was not found', code: 502 });
    }
  }
  // The traffic access token of a sandbox created with network.allowPublicTraffic = false guards every
  // port but envd's (infra orchestrator/pkg/proxy/proxy.go: header e2b-traffic-access-token; 403 JSON
  // of shared/pkg/proxy/template/traffic_access_token_error.go).
  if (sbx.trafficAccessToken && r.port !== 49983) {
    const given = req.headers['e2b-traffic-access-token'];
    if (given !== sbx.trafficAccessToken) {
      await readBody(req).catch(() => {});
      const message = given === undefined
        ? "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing"
        : "Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid";
      return sendJson(res, 403, { sandboxId: r.sandboxId, message, code: 403 });
    }
  }
  sbx.active.add(res);
  res.on('close', () => sbx.active.delete(res));
  if (r.port === 49983) return handleEnvd(emu, sbx, req, res, url, ctx);
  // Port 49999 is the interpreter only where the sandbox's start command started Jupyter (emulator.mjs
  // CI_START); every other port is what a program in the sandbox serves, as the edge proxy forwards it
  if (r.port === 49999 && sbx.jupyter) return handleInterp(emu, sbx, req, res, url, ctx);
  return forward(sbx, r, req, res);
}

// A request for a port the sandbox's own program serves: proxied to it (on the sandbox's own loopback
// address, where its servers bind: Sandbox.loopback; without one, this machine's 127.0.0.1:<port>), with
// the sandbox's maskRequestHost as Host (${PORT} replaced; shared/pkg/proxy/pool/client.go). Nothing
// listening: the proxy's 502 port_closed.
function forward(sbx, r, req, res) {
  return new Promise((resolve) => {
    // the client's header names as sent (a Go proxy writes them canonical: Host, User-Agent, ...)
    const headers = {};
    const mask = sbx.network && typeof sbx.network.maskRequestHost === 'string' ? sbx.network.maskRequestHost : null;
    headers.Host = mask ? mask.split('${PORT}').join(String(r.port)) : `localhost:${r.port}`;
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i];
      if (['host', 'e2b-sandbox-id', 'e2b-sandbox-port', 'e2b-traffic-access-token'].includes(name.toLowerCase())) continue;
      const canon = name.toLowerCase().replace(/(^|-)([a-z])/g, (_, d, c) => d + c.toUpperCase());
      headers[canon] = headers[canon] === undefined ? req.rawHeaders[i + 1] : `${headers[canon]}, ${req.rawHeaders[i + 1]}`;
    }
    const up = http.request({ host: sbx.loopback || '127.0.0.1', port: r.port, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
      ur.on('end', resolve);
      ur.on('error', () => { res.socket?.destroy(); resolve(); });
    });
    up.on('error', (e) => {
      if (!res.headersSent) {
        if (e.code === 'ECONNREFUSED') sendJson(res, 502, { sandboxId: r.sandboxId, message: 'The sandbox is running but port is not open', port: r.port, code: 502 });
        else sendJson(res, 502, { sandboxId: r.sandboxId, message: `error proxying to the sandbox: ${e.code || e.message}`, code: 502 });
      } else res.socket?.destroy();
      resolve();
    });
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
}

// A request made inside the sandbox to its own localhost:49983 (envd) or :49999 (the interpreter, where
// Jupyter runs): the emulator listens there on the sandbox's loopback (Sandbox.listenInside) and answers
// as those services do in the VM: no edge proxy (no routing, no traffic token, no injected faults).
emu.insideHandler = (sbx, port, req, res) => {
  const url = new URL(req.url, 'http://localhost');
  sbx.active.add(res);
  res.on('close', () => sbx.active.delete(res));
  const ctx = { frameDelayMs: 0 };
  const served = port === 49983 ? handleEnvd(emu, sbx, req, res, url, ctx) : handleInterp(emu, sbx, req, res, url, ctx);
  Promise.resolve(served).catch((e) => {
    log(`error handling ${req.method} ${req.url} inside ${sbx.id}: ${e.stack || e}`);
    if (!res.headersSent) apiError(res, 500, `emulator error: ${e.message}`);
    else res.socket?.destroy();
  });
};

// --tls-cert/--tls-key: serve HTTPS, as E2B does, so clients can be tested on real host names
// (<port>-<id>.<domain>) with the name checked against the certificate.
const serverOpts = { keepAliveTimeout: 65000, requestTimeout: 0 };
if (opts.tlsCert || opts.tlsKey) {
  if (!opts.tlsCert || !opts.tlsKey) throw new Error('--tls-cert and --tls-key go together');
  serverOpts.cert = fs.readFileSync(opts.tlsCert);
  serverOpts.key = fs.readFileSync(opts.tlsKey);
}
const server = (opts.tlsCert ? https : http).createServer(serverOpts, (req, res) => {
  handle(req, res).catch((e) => {
    log(`error handling ${req.method} ${req.url}: ${e.stack || e}`);
    if (!res.headersSent) {
      if (req.headers['content-type'] === 'application/connect+json') new ServerStream(res).end({ code: 'internal', message: String(e.message) });
      else if (req.headers['content-type'] === 'application/json' && /^\/(process|filesystem)\./.test(req.url)) unaryError(res, 'internal', String(e.message));
      else apiError(res, 500, `emulator error: ${e.message}`);
    } else res.socket?.destroy();
  });
});

let stopping = false;
function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  log('shutting down');
  try { emu.shutdown(); } catch (e) { process.stderr.write(`emulator e2b: shutdown: ${e.message}\n`); }
  killAllChildren();
  server.close();
  server.closeAllConnections?.();
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
// (runtime.mjs also kills the children and removes the state directory on every other exit path)
process.on('exit', () => { killAllChildren(); emu.shutdown(); });

// --exit-with-parent: a test runner that dies without stopping us does not leave us behind.
if (opts.exitWithParent) {
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) stop(0); }, 500).unref();
}

server.on('error', (e) => {
  process.stderr.write(`emulator e2b: ${e.message}\n`);
  stop(1);
});

server.listen(opts.port, opts.host, () => {
  const { port } = server.address();
  emu.baseUrl = `${opts.tlsCert ? 'https' : 'http'}://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  process.stdout.write(`listening ${emu.baseUrl}\n`);
  log(`api keys: ${opts.keys.length}, bubblewrap: ${hasBwrap()}, state dir: ${emu.stateDir}`);
});
