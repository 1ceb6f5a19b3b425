// Control plane REST API (api.<domain>): sandboxes and templates.
import fs from 'node:fs';
import { readBody, parseJson, sendJson, send, apiError, randomId } from './util.mjs';

const MAX_TIMEOUT_S = 24 * 3600;

export const INVALID_KEY = 'Invalid API key, please visit https://e2b.dev/docs/api-key for more information.';

function notFound(res, id) {
  apiError(res, 404, `sandbox "${id}" doesn't exist or you don't have access to it`);
}

async function jsonBody(req, res) {
  try {
    return parseJson(await readBody(req));
  } catch {
    apiError(res, 400, 'Request body has an error: failed to decode request body: invalid JSON');
    return null;
  }
}

function checkTimeout(res, t) {
  if (t === undefined || t === null) return true;
  if (!Number.isFinite(Number(t)) || Number(t) <= 0) {
    apiError(res, 400, 'Timeout must be greater than 0');
    return false;
  }
  if (Number(t) > MAX_TIMEOUT_S) {
    apiError(res, 400, `Timeout cannot be greater than ${MAX_TIMEOUT_S / 3600} hours`);
    return false;
  }
  return true;
}

function parseMetadataQuery(s) {
  // metadata=k%3Dv%26k2%3Dv2 -> {k: v, k2: v2}
  const out = {};
  if (!s) return out;
  for (const [k, v] of new URLSearchParams(s)) out[k] = v;
  return out;
}

export async function handleControl(emu, req, res, url) {
  const m = req.method;
  const p = url.pathname.replace(/\/+$/, '') || '/';
  let g;

  if (!emu.checkKey(req)) return apiError(res, 401, INVALID_KEY);

  // ---- sandboxes -------------------------------------------------------------------------
  if (m === 'POST' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    const legacy = p === '/sandboxes';
    const body = await jsonBody(req, res);
    if (!body) return;
    if (typeof body.templateID !== 'string' || body.templateID === '') {
      return apiError(res, 400, 'Request body has an error: doesn\'t match schema: property "templateID" is missing');
    }
    if (!checkTimeout(res, body.timeout)) return;
    const resolved = emu.templates.resolve(body.templateID);
    if (!resolved) return apiError(res, 404, `template '${body.templateID}' not found`);
    const running = [...emu.sandboxes.values()].filter((s) => s.state === 'running').length;
    if (emu.maxSandboxes > 0 && running >= emu.maxSandboxes) {
      // The concurrency limit: 429 without Retry-After.
      return apiError(res, 429, `You have reached the maximum number of concurrent E2B sandboxes (${emu.maxSandboxes}). If you need more, please contact us at 'https://e2b.dev/docs/getting-help'`);
    }
    const timeoutS = body.timeout !== undefined && body.timeout !== null ? Number(body.timeout) : (legacy ? 15 : 300);
    const sbx = emu.createSandbox({
      resolved,
      timeoutS,
      metadata: body.metadata,
      envVars: body.envVars,
      autoPause: body.autoPause,
      autoResume: body.autoResume ? !!body.autoResume.enabled : false,
      allowInternetAccess: body.allow_internet_access,
      network: body.network,
      volumeMounts: body.volumeMounts,
    });
    await emu.waitReady(sbx, resolved.build);
    return sendJson(res, 201, sbx.created());
  }

  if (m === 'GET' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    const q = url.searchParams;
    const states = p === '/sandboxes' ? ['running'] : (q.get('state') || 'running,paused').split(',').filter(Boolean);
    const meta = parseMetadataQuery(q.get('metadata'));
    const tpl = q.get('template');
    const after = q.get('startedAfter') ? Date.parse(q.get('startedAfter')) : NaN;
    let list = [...emu.sandboxes.values()]
      .filter((s) => states.includes(s.state))
      .filter((s) => Object.entries(meta).every(([k, v]) => s.metadata && s.metadata[k] === v))
      .filter((s) => !tpl || s.templateID === tpl || s.alias === tpl)
      .filter((s) => Number.isNaN(after) || s.startedAt > after)
      .sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1));
    if (String(q.get('order') || '').toLowerCase() === 'desc') list.reverse();
    if (p === '/sandboxes') return sendJson(res, 200, list.map((s) => s.listed()));
    const headers = { 'X-Total-Running': String([...emu.sandboxes.values()].filter((s) => s.state === 'running').length) };
    const limit = Math.max(1, Math.min(1000, Number(q.get('limit')) || 100));
    const token = q.get('nextToken');
    if (token) {
      const idx = list.findIndex((s) => s.id === token);
      list = idx >= 0 ? list.slice(idx) : [];
    }
    if (list.length > limit) {
      headers['X-Next-Token'] = list[limit].id;
      list = list.slice(0, limit);
    }
    return sendJson(res, 200, list.map((s) => s.listed()), headers);
  }

  if ((g = p.match(/^\/(v2\/)?sandboxes\/([^/]+)(?:\/([a-z]+))?$/))) {
    const id = decodeURIComponent(g[2]);
    const sub = g[3];
    const sbx = emu.sandboxes.get(id);

    if (!sub && m === 'GET') {
      if (!sbx) return notFound(res, id);
      return sendJson(res, 200, sbx.detail());
    }
    if (!sub && m === 'DELETE') {
      if (!sbx) return notFound(res, id);
      emu.killSandbox(sbx, 'DELETE');
      return send(res, 204);
    }
    if (sub === 'timeout' && m === 'POST') {
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!checkTimeout(res, body.timeout)) return;
      if (!sbx) return notFound(res, id);
      sbx.setTimeout(Number(body.timeout) || 0);
      return send(res, 204);
    }
    if (sub === 'refreshes' && m === 'POST') {
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!sbx) return notFound(res, id);
      const d = Number(body.duration) || 60;
      sbx.endAt = Math.max(sbx.endAt, Date.now() + d * 1000);
      sbx.arm();
      return send(res, 204);
    }
    if (sub === 'pause' && m === 'POST') {
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!sbx) return notFound(res, id);
      if (sbx.state === 'paused') return apiError(res, 409, `Sandbox ${id} is already paused`);
      emu.pause(sbx);
      return send(res, 204);
    }
    if ((sub === 'connect' || sub === 'resume') && m === 'POST') {
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!checkTimeout(res, body.timeout)) return;
      if (!sbx) return notFound(res, id);
      const t = body.timeout !== undefined && body.timeout !== null ? Number(body.timeout) : 300;
      if (sbx.state === 'paused') {
        emu.resume(sbx, t);
        return sendJson(res, 201, sbx.created());
      }
      if (sub === 'resume') return apiError(res, 409, `Sandbox ${id} is already running`);
      // connect only extends the lifetime
      const end = Date.now() + t * 1000;
      if (end > sbx.endAt) sbx.setTimeout(t);
      return sendJson(res, 200, sbx.created());
    }
    if (sub === 'metrics' && m === 'GET') {
      if (!sbx) return notFound(res, id);
      const now = Math.floor(Date.now() / 1000);
      return sendJson(res, 200, [{
        timestamp: new Date(now * 1000).toISOString(), timestampUnix: now, cpuCount: sbx.cpuCount, cpuUsedPct: 1.5,
        memUsed: 64 * 1024 * 1024, memTotal: sbx.memoryMB * 1024 * 1024, diskUsed: 1024 * 1024, diskTotal: sbx.diskSizeMB * 1024 * 1024,
      }]);
    }
    if (sub === 'logs' && m === 'GET') {
      if (!sbx) return notFound(res, id);
      return sendJson(res, 200, { logs: [], logEntries: [] });
    }
  }

  // ---- templates -------------------------------------------------------------------------
  if (m === 'POST' && p === '/v3/templates') {
    const body = await jsonBody(req, res);
    if (!body) return;
    if (typeof body.name !== 'string' || body.name === '') return apiError(res, 400, 'Request body has an error: property "name" is missing');
    let name = body.name;
    const tags = Array.isArray(body.tags) ? [...body.tags] : [];
    const colon = name.lastIndexOf(':');
    if (colon > 0) { tags.push(name.slice(colon + 1)); name = name.slice(0, colon); }
    if (name.includes('/')) name = name.slice(name.lastIndexOf('/') + 1);
    if (!/^[a-z0-9][a-z0-9._-]*$/.test(name)) return apiError(res, 400, `Invalid template name '${name}'`);
    const found = emu.templates.lookup(name);
    if (found && found.template.public && ['base', 'code-interpreter-v1'].includes(name)) {
      return apiError(res, 403, `you don't have access to template '${name}'`);
    }
    const t = found ? found.template : emu.templates.newTemplate(name);
    const b = emu.templates.newBuild(t, { cpuCount: body.cpuCount, memoryMB: body.memoryMB, tags: tags.length ? tags : ['default'] });
    return sendJson(res, 202, {
      templateID: t.templateID, buildID: b.buildID, names: t.names, aliases: t.names, tags: b.requestedTags, public: t.public,
    });
  }

  if ((g = p.match(/^\/templates\/([^/]+)\/files\/([^/]+)$/)) && m === 'GET') {
    const t = emu.templates.byId.get(decodeURIComponent(g[1]));
    if (!t) return apiError(res, 404, `template '${g[1]}' not found`);
    const hash = decodeURIComponent(g[2]);
    if (!/^[0-9a-f]{64}$/.test(hash)) return apiError(res, 400, 'invalid files hash');
    const present = fs.existsSync(emu.templates.filePath(t.templateID, hash));
    if (present) return sendJson(res, 201, { present: true });
    const token = randomId('', 24);
    emu.templates.uploads.set(token, { templateID: t.templateID, hash });
    const base = `http://${req.headers.host}`;
    return sendJson(res, 201, { present: false, url: `${base}/_upload/${token}` });
  }

  if ((g = p.match(/^\/v2\/templates\/([^/]+)\/builds\/([^/]+)$/)) && m === 'POST') {
    const body = await jsonBody(req, res);
    if (!body) return;
    const t = emu.templates.byId.get(decodeURIComponent(g[1]));
    if (!t) return apiError(res, 404, `template '${g[1]}' not found`);
    const b = t.builds.find((x) => x.buildID === decodeURIComponent(g[2]));
    if (!b) return apiError(res, 404, `build '${g[2]}' not found`);
    if (b.status !== 'waiting') return apiError(res, 409, `build '${b.buildID}' was already started`);
    if (body.fromImage && body.fromTemplate) return apiError(res, 400, 'fromImage and fromTemplate are mutually exclusive');
    emu.templates.start(t, b, body);
    return send(res, 202);
  }

  if ((g = p.match(/^\/templates\/([^/]+)\/builds\/([^/]+)\/status$/)) && m === 'GET') {
    const t = emu.templates.byId.get(decodeURIComponent(g[1]));
    if (!t) return apiError(res, 404, `template '${g[1]}' not found`);
    const b = t.builds.find((x) => x.buildID === decodeURIComponent(g[2]));
    if (!b) return apiError(res, 404, `build '${g[2]}' not found`);
    const off = Math.max(0, Number(url.searchParams.get('logsOffset')) || 0);
    const entries = b.logEntries.slice(off, off + 100);
    const out = {
      templateID: t.templateID, buildID: b.buildID, status: b.status,
      logEntries: entries, logs: entries.map((e) => `${e.timestamp} ${e.message}`),
    };
    if (b.reason) out.reason = b.reason;
    return sendJson(res, 200, out);
  }

  if ((g = p.match(/^\/templates\/aliases\/([^/]+)$/)) && m === 'GET') {
    const found = emu.templates.lookup(decodeURIComponent(g[1]));
    if (!found) return apiError(res, 404, `template alias '${g[1]}' not found`);
    return sendJson(res, 200, { templateID: found.template.templateID, public: found.template.public });
  }

  if (p === '/templates/tags' && m === 'POST') {
    const body = await jsonBody(req, res);
    if (!body) return;
    const found = emu.templates.lookup(String(body.target || ''));
    if (!found) return apiError(res, 404, `template '${body.target}' not found`);
    const bid = found.template.tags.get(found.tag);
    if (!bid) return apiError(res, 404, `tag '${found.tag}' not found`);
    const tags = Array.isArray(body.tags) ? body.tags : [];
    for (const tag of tags) found.template.tags.set(tag, bid);
    return sendJson(res, 201, { buildID: bid, tags });
  }
  if (p === '/templates/tags' && m === 'DELETE') {
    const body = await jsonBody(req, res);
    if (!body) return;
    const found = emu.templates.lookup(String(body.name || ''));
    if (!found) return apiError(res, 404, `template '${body.name}' not found`);
    for (const tag of Array.isArray(body.tags) ? body.tags : []) found.template.tags.delete(tag);
    return send(res, 204);
  }

  if (m === 'GET' && p === '/templates') return sendJson(res, 200, emu.templates.list());

  if ((g = p.match(/^\/templates\/([^/]+)(?:\/(tags))?$/))) {
    const found = emu.templates.lookup(decodeURIComponent(g[1]));
    const t = found && found.template;
    if (!t) return apiError(res, 404, `template '${g[1]}' not found`);
    if (g[2] === 'tags' && m === 'GET') {
      return sendJson(res, 200, [...t.tags.entries()].map(([tag, buildID]) => ({ tag, buildID, createdAt: new Date(t.createdAt).toISOString() })));
    }
    if (!g[2] && m === 'GET') {
      return sendJson(res, 200, {
        templateID: t.templateID, public: t.public, names: t.names, aliases: t.names,
        createdAt: new Date(t.createdAt).toISOString(), updatedAt: new Date(t.updatedAt).toISOString(),
        builds: t.builds.map((b) => ({
          buildID: b.buildID, status: b.status, cpuCount: b.cpuCount, memoryMB: b.memoryMB,
          createdAt: new Date(b.createdAt).toISOString(), updatedAt: new Date(b.updatedAt).toISOString(),
          finishedAt: b.finishedAt ? new Date(b.finishedAt).toISOString() : undefined,
        })),
      });
    }
    if (!g[2] && m === 'DELETE') {
      emu.templates.byId.delete(t.templateID);
      return send(res, 204);
    }
  }

  return apiError(res, 404, `no route for ${m} ${url.pathname}`);
}

// PUT <upload url>: the presigned-URL stand-in for a template COPY archive.
export async function handleUpload(emu, req, res, url) {
  const token = url.pathname.slice('/_upload/'.length);
  const up = emu.templates.uploads.get(token);
  if (!up) return send(res, 403, 'AccessDenied: upload URL is unknown or expired', { 'Content-Type': 'text/plain' });
  if (req.method !== 'PUT') return send(res, 405, 'MethodNotAllowed', { 'Content-Type': 'text/plain' });
  if (req.headers['transfer-encoding'] && !req.headers['content-length']) {
    return send(res, 501, 'NotImplemented: Transfer-Encoding chunked is not supported, send Content-Length', { 'Content-Type': 'text/plain' });
  }
  const body = await readBody(req);
  fs.writeFileSync(emu.templates.filePath(up.templateID, up.hash), body);
  emu.templates.uploads.delete(token);
  return send(res, 200);
}
