// execd (port 44772) and the egress sidecar (port 18080) of one sandbox, behind the route the
// lifecycle API hands out (lifecycle.mjs endpoint()).
import { readBody, sendGoJson, send, sendJson } from './util.mjs';
import { runCommand, commandStatus, commandLogs, interruptCommand } from './commands.mjs';
import { handleCode } from './code.mjs';
import { handleFiles } from './files.mjs';
import { handleSessions } from './sessions.mjs';
import { EXECD_PORT, EGRESS_PORT } from './lifecycle.mjs';

// What sits in front of a sandbox that is not there (the server proxy's get_endpoint -> 404).
export function sandboxGone(res, id) {
  sendJson(res, 404, { code: 'DOCKER::SANDBOX_NOT_FOUND', message: `Sandbox ${id} not found.` });
}

// ... or whose port does not answer (not started yet, paused, nothing listening): the proxy's 502.
export function unreachable(res, id, port, why) {
  sendJson(res, 502, { code: 'GENERAL::UNKNOWN_ERROR',
    message: `Could not connect to the backend sandbox ${id}:${port}: ${why}` });
}

async function interrupt(sbx, res, id) {
  if (!id) return sendGoJson(res, 400, { code: 'MISSING_QUERY', message: "missing query parameter 'id'" });
  const ctx = sbx.contexts.get(id);
  if (ctx) {
    ctx.interrupt();
    return send(res, 200);
  }
  const cmd = sbx.commands.get(id);
  if (cmd) {
    if (!cmd.running) return sendGoJson(res, 500, { code: 'RUNTIME_ERROR', message: `error interrupting code session ${id}. command session ${id} is not running` });
    await interruptCommand(sbx, cmd);
    return send(res, 200);
  }
  return sendGoJson(res, 500, { code: 'RUNTIME_ERROR', message: `error interrupting code session ${id}. no such session` });
}

function metrics(res) {
  sendGoJson(res, 200, { cpu_count: 2, cpu_used_pct: 1.5, mem_total_mib: 2048, mem_used_mib: 256, timestamp: Date.now() });
}

export async function handleExecd(emu, sbx, req, res, url, ctx) {
  const p = url.pathname.replace(/\/+$/, '') || '/';
  const m = req.method;
  const q = url.searchParams;
  let g;
  if (p === '/ping' && m === 'GET') {
    await readBody(req);
    return send(res, 200);
  }
  if (p === '/command' && m === 'POST') return runCommand(emu, sbx, req, res, ctx);
  if (p === '/command' && m === 'DELETE') return interrupt(sbx, res, q.get('id'));
  if (p === '/code' && m === 'DELETE') return interrupt(sbx, res, q.get('id'));
  if ((g = p.match(/^\/command\/status\/([^/]+)$/)) && m === 'GET') return commandStatus(sbx, res, decodeURIComponent(g[1]));
  if ((g = p.match(/^\/command\/([^/]+)\/logs$/)) && m === 'GET') return commandLogs(sbx, res, decodeURIComponent(g[1]), q.get('cursor'));
  if (p === '/metrics' && m === 'GET') return metrics(res);
  if (p === '/session' || p.startsWith('/session/')) {
    const done = await handleSessions(emu, sbx, req, res, p, ctx);
    if (done !== null) return done;
  }
  if (p.startsWith('/code')) {
    const done = await handleCode(emu, sbx, req, res, { pathname: p, searchParams: q }, ctx,
      (body) => runCommand(emu, sbx, req, res, ctx, Buffer.from(body)));
    if (done !== null) return done;
  }
  if (p.startsWith('/files') || p.startsWith('/directories')) {
    const done = await handleFiles(sbx, req, res, { pathname: p, searchParams: q });
    if (done !== null) return done;
  }
  await readBody(req).catch(() => {});
  return send(res, 404, '404 page not found', { 'Content-Type': 'text/plain' });
}

// The egress sidecar's /policy (GET; PATCH merges rules, first wins per target; DELETE by target).
export async function handleEgress(sbx, req, res, url) {
  const p = url.pathname.replace(/\/+$/, '') || '/';
  const m = req.method;
  if (p !== '/policy') {
    await readBody(req).catch(() => {});
    return send(res, 404, '404 page not found', { 'Content-Type': 'text/plain' });
  }
  if (m === 'GET') {
    await readBody(req);
    return sendGoJson(res, 200, { status: 'ok', mode: 'dns', enforcementMode: 'dns', policy: sbx.egressPolicy });
  }
  let body;
  try { body = JSON.parse((await readBody(req)).toString('utf8')); } catch (e) {
    return sendGoJson(res, 400, { error: `invalid body: ${e.message}` });
  }
  if (!Array.isArray(body)) return sendGoJson(res, 400, { error: 'body must be an array' });
  if (m === 'PATCH') {
    const seen = new Set();
    for (const rule of body) {
      if (!rule || typeof rule.target !== 'string' || seen.has(rule.target)) continue;
      seen.add(rule.target);
      const i = sbx.egressPolicy.egress.findIndex((r) => r.target === rule.target);
      if (i >= 0) sbx.egressPolicy.egress[i] = { action: rule.action, target: rule.target };
      else sbx.egressPolicy.egress.push({ action: rule.action, target: rule.target });
    }
    sbx.hasPolicy = true;
    sbx.updateEgress(); // the sandbox's processes from now on meet the new rules
    return sendGoJson(res, 200, { status: 'ok', policy: sbx.egressPolicy });
  }
  if (m === 'DELETE') {
    const drop = new Set(body.map(String));
    sbx.egressPolicy.egress = sbx.egressPolicy.egress.filter((r) => !drop.has(r.target));
    sbx.updateEgress();
    return sendGoJson(res, 200, { status: 'ok', policy: sbx.egressPolicy });
  }
  return send(res, 405, '405 method not allowed', { 'Content-Type': 'text/plain' });
}

export { EXECD_PORT, EGRESS_PORT };
