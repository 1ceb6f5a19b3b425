#!/usr/bin/env node
// AWS Bedrock AgentCore Code Interpreter emulator (tests only). See spec/emulators/README.md.
//
//   node server.mjs [--port N] [--host 127.0.0.1] [--credentials AKID:SECRET[:TOKEN]]...
//                   [--create-delay-ms N] [--max-sessions N] [--exit-with-parent] [--verbose]
//
// Prints "listening <base-url>" as the first stdout line. One listener serves both planes
// (bedrock-agentcore and bedrock-agentcore-control: their paths do not overlap) and the
// /_emulator admin API. Every request's SigV4 signature is verified with @smithy/signature-v4.
import http from 'node:http';
import { killAllChildren, liveChildren } from '../e2b/lib/runtime.mjs';
import { Emulator } from './lib/emulator.mjs';
import { verify, parseCredential, DEFAULT_CREDENTIALS } from './lib/sigv4.mjs';
import { AwsError, sendError } from './lib/errors.mjs';
import * as data from './lib/dataplane.mjs';
import * as control from './lib/control.mjs';
import { readBody, sendJson, send, sleep, uuid } from './lib/util.mjs';

function parseArgs(argv) {
  const o = { port: 0, host: '127.0.0.1', credentials: [], createDelayMs: 300, maxSessions: 0, verbose: false, exitWithParent: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(val());
    else if (a.startsWith('--port=')) o.port = Number(a.slice(7));
    else if (a === '--host') o.host = val();
    else if (a === '--credentials') o.credentials.push(parseCredential(val()));
    else if (a === '--create-delay-ms') o.createDelayMs = Number(val());
    else if (a === '--max-sessions') o.maxSessions = Number(val());
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--exit-with-parent') o.exitWithParent = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: emulator bedrock [--port N] [--host 127.0.0.1] [--credentials AKID:SECRET[:TOKEN]]... [--create-delay-ms N] [--max-sessions N] [--exit-with-parent] [--verbose]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) throw new Error('--port must be 0..65535');
  if (!/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(o.host)) throw new Error('--host must be a loopback address (tests only)');
  if (!Number.isInteger(o.createDelayMs) || o.createDelayMs < 0) throw new Error('--create-delay-ms must be an integer >= 0');
  if (!Number.isInteger(o.maxSessions) || o.maxSessions < 0) throw new Error('--max-sessions must be an integer >= 0');
  if (o.credentials.length === 0) o.credentials = DEFAULT_CREDENTIALS;
  return o;
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`emulator bedrock: ${e.message}\n`);
  process.exit(2);
}

const log = opts.verbose ? (m) => process.stderr.write(`[bedrock-emu] ${m}\n`) : () => {};
const emu = new Emulator({ credentials: opts.credentials, log, createDelayMs: opts.createDelayMs, maxSessions: opts.maxSessions });

// method + path -> the operation and its path parameters.
function route(method, pathname) {
  const seg = pathname.split('/').slice(1);
  if (seg[0] !== 'code-interpreters') return null;
  let id;
  try { id = seg[1] === undefined ? undefined : decodeURIComponent(seg[1]); } catch { return null; }
  if (seg.length === 1) {
    if (method === 'PUT') return { op: 'CreateCodeInterpreter', plane: 'control' };
    if (method === 'POST') return { op: 'ListCodeInterpreters', plane: 'control' };
    return null;
  }
  if (seg.length === 2 && id) {
    if (method === 'GET') return { op: 'GetCodeInterpreter', plane: 'control', id };
    if (method === 'DELETE') return { op: 'DeleteCodeInterpreter', plane: 'control', id };
    return null;
  }
  const rest = seg.slice(2).join('/');
  const ops = {
    'PUT sessions/start': 'StartCodeInterpreterSession',
    'PUT sessions/stop': 'StopCodeInterpreterSession',
    'GET sessions/get': 'GetCodeInterpreterSession',
    'POST sessions/list': 'ListCodeInterpreterSessions',
    'POST tools/invoke': 'InvokeCodeInterpreter',
  };
  const op = ops[`${method} ${rest}`];
  return op && id ? { op, plane: 'data', id } : null;
}

async function admin(req, res, url) {
  const p = url.pathname;
  const m = req.method;
  let g;
  if (p === '/_emulator/state' && m === 'GET') return sendJson(res, 200, emu.state());
  if (p === '/_emulator/reset' && m === 'POST') { await readBody(req); emu.reset(); return sendJson(res, 200, { ok: true }); }
  if (p === '/_emulator/requests' && m === 'GET') {
    const since = Number(url.searchParams.get('since') || 0);
    return sendJson(res, 200, emu.requests.filter((r) => r.seq > since));
  }
  if (p === '/_emulator/requests' && m === 'DELETE') { emu.requests = []; return send(res, 204); }
  if (p === '/_emulator/faults' && m === 'GET') return sendJson(res, 200, emu.faults.list());
  if (p === '/_emulator/faults' && m === 'DELETE') { emu.faults.clear(); return send(res, 204); }
  if (p === '/_emulator/faults' && m === 'POST') {
    let body;
    try { body = JSON.parse((await readBody(req)).toString('utf8') || '{}'); } catch { return sendJson(res, 400, { error: 'invalid JSON' }); }
    const specs = Array.isArray(body) ? body : Array.isArray(body.faults) ? body.faults : [body];
    try {
      return sendJson(res, 200, { ids: specs.map((s) => emu.faults.add(s).id) });
    } catch (e) {
      return sendJson(res, 400, { error: e.message });
    }
  }
  if ((g = p.match(/^\/_emulator\/sessions\/([^/]+)\/(expire|lose)$/)) && m === 'POST') {
    await readBody(req);
    const s = emu.sessions.get(decodeURIComponent(g[1]));
    if (!s) return sendJson(res, 404, { error: 'no such session' });
    emu.terminate(s, g[2] === 'expire' ? 'timeout' : 'lost');
    return send(res, 204);
  }
  return sendJson(res, 404, { error: `no admin route ${m} ${p}` });
}

let seq = 0;

// The clientToken of an idempotent operation (body member, or query parameter of Delete), for the
// request log: tests check that retries of one logical call reuse it.
function clientTokenOf(r, url, body) {
  if (!r) return undefined;
  if (r.op === 'DeleteCodeInterpreter') return url.searchParams.get('clientToken') || undefined;
  if (!['StartCodeInterpreterSession', 'StopCodeInterpreterSession', 'CreateCodeInterpreter'].includes(r.op)) return undefined;
  try {
    const t = JSON.parse(body.toString('utf8')).clientToken;
    return typeof t === 'string' ? t : undefined;
  } catch {
    return undefined;
  }
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://emulator');
  if (url.pathname.startsWith('/_emulator/')) return admin(req, res, url);
  res.requestId = uuid();
  const r = route(req.method, url.pathname);
  const entry = {
    seq: ++seq, time: new Date().toISOString(), method: req.method, path: req.url, op: r ? r.op : null,
    sdkRequest: req.headers['amz-sdk-request'], invocationId: req.headers['amz-sdk-invocation-id'],
  };
  emu.record(entry);
  res.on('close', () => {
    entry.status = res.headersSent ? res.statusCode : null;
    entry.completed = res.writableFinished;
  });

  const head = emu.faults.take({ op: r && r.op, method: req.method, path: url.pathname }, true);
  if (head) {
    entry.fault = head.action;
    log(`fault #${head.id} cut_on_request on ${req.method} ${url.pathname}`);
    req.socket.destroy();
    return;
  }
  const body = await readBody(req);
  entry.bodyBytes = body.length;
  let auth;
  try {
    auth = await verify(req, body, emu.credentials);
  } catch (e) {
    if (!(e instanceof AwsError)) throw e;
    entry.authError = e.type;
    log(`auth failed on ${req.method} ${req.url}: ${e.type}: ${e.message.split('\n')[0]}`);
    return sendError(res, e);
  }
  entry.accessKeyId = auth.accessKeyId;
  entry.region = auth.region;
  entry.signedHeaders = auth.signedHeaders;
  entry.unsignedHeaders = auth.unsignedHeaders;
  entry.sessionToken = auth.sessionToken !== undefined;
  entry.clientToken = clientTokenOf(r, url, body);
  if (!r) return sendError(res, new AwsError('UnknownOperationException', `No operation matches ${req.method} ${url.pathname}.`));

  const ctx = {
    entry,
    region: auth.region,
    fault: null,
    takeFault: (extra) => {
      const f = emu.faults.take({ op: r.op, method: req.method, path: url.pathname, ...extra });
      if (f) { entry.fault = f.action; log(`fault #${f.id} ${f.action} on ${r.op}`); }
      return f;
    },
    applyCommonFault: async (f, session) => {
      if (f.delayMs && f.action !== 'slow_stream') await sleep(f.delayMs);
      if (f.action === 'lose_session' && session) {
        if (f.afterMs > 0) setTimeout(() => emu.terminate(session, 'lost'), f.afterMs).unref();
        else emu.terminate(session, 'lost');
      }
      if (f.action === 'cut_before_response') res.socket?.destroy();
    },
    sendFaultError: (f) => {
      const e = new AwsError(f.error || 'InternalServerException', f.message || data.defaultMessage(f.error), f.status ? { status: f.status } : {});
      if (f.status) e.status = f.status;
      if (f.retryAfter !== undefined) res.setHeader('Retry-After', String(f.retryAfter));
      return sendError(res, e);
    },
  };

  try {
    if (r.op === 'InvokeCodeInterpreter') return await data.invoke(emu, ctx, r.id, req, res, body);
    const sessionId = url.searchParams.get('sessionId') || undefined;
    const f = ctx.takeFault({ sessionId });
    if (f) {
      await ctx.applyCommonFault(f, sessionId && emu.sessions.get(sessionId));
      if (res.destroyed) return;
      if (f.action === 'error') return ctx.sendFaultError(f);
      ctx.fault = f;
    }
    let status = 200;
    let out;
    switch (r.op) {
      case 'StartCodeInterpreterSession': out = data.start(emu, ctx, r.id, body); break;
      case 'StopCodeInterpreterSession': out = data.stop(emu, ctx, r.id, url.searchParams, body); break;
      case 'GetCodeInterpreterSession': out = data.get(emu, ctx, r.id, url.searchParams); break;
      case 'ListCodeInterpreterSessions': out = data.list(emu, ctx, r.id, body); break;
      case 'CreateCodeInterpreter': [status, out] = control.createOp(emu, ctx, body); break;
      case 'GetCodeInterpreter': [status, out] = control.getOp(emu, ctx, r.id); break;
      case 'DeleteCodeInterpreter': [status, out] = control.deleteOp(emu, ctx, r.id, url.searchParams); break;
      case 'ListCodeInterpreters': [status, out] = control.listOp(emu, ctx, url.searchParams); break;
      default: throw new AwsError('UnknownOperationException', r.op);
    }
    if (out && out.replayed) { entry.replayed = true; delete out.replayed; }
    if (ctx.fault && ctx.fault.action === 'cut_after_execute') { res.socket?.destroy(); return; }
    return sendJson(res, status, out);
  } catch (e) {
    if (e instanceof AwsError) {
      if (res.headersSent) { res.socket?.destroy(); return; }
      return sendError(res, e);
    }
    throw e;
  }
}

const server = http.createServer({ keepAliveTimeout: 65000, requestTimeout: 0 }, (req, res) => {
  handle(req, res).catch((e) => {
    log(`error handling ${req.method} ${req.url}: ${e.stack || e}`);
    if (!res.headersSent) sendError(res, new AwsError('InternalServerException', `emulator error: ${e.message}`));
    else res.socket?.destroy();
  });
});

let stopping = false;
function stop(code = 0) {
  if (stopping) return;
  stopping = true;
  log('shutting down');
  try { emu.shutdown(); } catch (e) { process.stderr.write(`emulator bedrock: shutdown: ${e.message}\n`); }
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
process.on('exit', () => { killAllChildren(); emu.shutdown(); });

if (opts.exitWithParent) {
  const parent = process.ppid;
  setInterval(() => { if (process.ppid !== parent) stop(0); }, 500).unref();
}

server.on('error', (e) => {
  process.stderr.write(`emulator bedrock: ${e.message}\n`);
  stop(1);
});

server.listen(opts.port, opts.host, () => {
  const { port } = server.address();
  emu.baseUrl = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  process.stdout.write(`listening ${emu.baseUrl}\n`);
  log(`credentials: ${opts.credentials.map((c) => c.accessKeyId).join(', ')}; state dir: ${emu.stateDir}`);
});
