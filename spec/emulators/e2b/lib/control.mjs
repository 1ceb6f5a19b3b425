// Control plane REST API (api.<domain>): sandboxes and templates.
import fs from 'node:fs';
import { readBody, parseJson, sendJson, send, apiError, randomId, paginate, limitParam } from './util.mjs';
import { isCidr } from '../../egress/egress.mjs';

// The plan's longest sandbox life (MaxLengthHours: 1 h Hobby, 24 h Pro): create/connect/resume timeouts
// above it are a 400 (infra handlers/timeout_helper.go, sandbox_connect.go), and setTimeout never moves
// the end past start + cap (orchestrator/keep_alive.go getMaxAllowedTTL). --max-lifetime-hours sets it.

// The emulator's one team: snapshot names are "<slug>/<alias>" (id.WithNamespace).
const TEAM_SLUG = 'emulator';

function snapshotInfo({ template, tag }) {
  const name = template.names[0];
  return { snapshotID: name ? `${TEAM_SLUG}/${name}:${tag}` : `${template.templateID}:${tag}`, names: name ? [`${TEAM_SLUG}/${name}`] : [] };
}

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

function checkTimeout(emu, res, t, { zeroOk = false } = {}) {
  if (t === undefined || t === null) return true;
  if (!Number.isFinite(Number(t)) || Number(t) < 0 || (Number(t) === 0 && !zeroOk)) {
    apiError(res, 400, 'Timeout must be greater than 0');
    return false;
  }
  if (Number(t) > emu.maxLifetimeHours * 3600) {
    apiError(res, 400, `Timeout cannot be greater than ${emu.maxLifetimeHours} hours`);
    return false;
  }
  return true;
}

// ---- template names, tags and resources, as infra checks them ----------------------------------
// shared/pkg/id/id.go (ParseName, ValidateAndDeduplicateTags), api/internal/team/limits.go
// (LimitResources, constants/templates.go), spec/openapi.yml (CPUCount, MemoryMB, name maxLength).

const IDENTIFIER = /^[a-z0-9-_]+$/;
const TAG = /^[a-z0-9-_.]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// The request validator (kin-openapi) before the handler runs.
function checkBuildRequest(body) {
  const at = (field, msg) => `request body has an error: doesn't match schema #/components/schemas/TemplateBuildRequestV3: Error at "/${field}": ${msg}`;
  if (body.name !== undefined && typeof body.name !== 'string') return at('name', 'value must be a string');
  if (typeof body.name === 'string' && [...body.name].length > 128) return at('name', 'maximum string length is 128');
  for (const [field, min] of [['cpuCount', 1], ['memoryMB', 128]]) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v)) return at(field, 'value must be an integer');
    if (v < min) return at(field, `number must be at least ${min}`);
    if (v > 2147483647) return at(field, 'number must be most 2147483647');
  }
  if (body.name === undefined) return 'Name is required';
  return null;
}

function cleanAndValidate(value, what, re) {
  const cleaned = value.trim().toLowerCase();
  return re.test(cleaned) ? { value: cleaned } : { error: `invalid ${what}: ${value}` };
}

// "namespace/alias:tag" -> {alias, namespace?, tag?} | {error}. Only tags may contain dots.
export function parseName(input) {
  const s = String(input).trim();
  const colon = s.indexOf(':');
  const idPart = colon >= 0 ? s.slice(0, colon) : s;
  const tagPart = colon >= 0 ? s.slice(colon + 1) : null;
  let tag = null;
  if (tagPart !== null) {
    const t = cleanAndValidate(tagPart, 'tag', TAG);
    if (t.error) return t;
    if (t.value !== 'default') tag = t.value;
  }
  const slash = idPart.indexOf('/');
  let namespace = null;
  if (slash >= 0) {
    const n = cleanAndValidate(idPart.slice(0, slash), 'namespace', IDENTIFIER);
    if (n.error) return n;
    namespace = n.value;
  }
  const a = cleanAndValidate(slash >= 0 ? idPart.slice(slash + 1) : idPart, 'template ID', IDENTIFIER);
  if (a.error) return a;
  return { alias: a.value, namespace, tag };
}

export function validateTags(tags) {
  const out = [];
  for (const tag of tags) {
    const t = cleanAndValidate(String(tag), 'tag', TAG);
    if (t.error) return { error: `invalid tag '${tag}': ${t.error}` };
    if (UUID.test(t.value)) return { error: `invalid tag '${tag}': tag cannot be a UUID` };
    if (!out.includes(t.value)) out.push(t.value);
  }
  return { tags: out };
}

function limitResources(cpuCount, memoryMB) {
  let cpu = 2;
  let mem = 1024;
  if (cpuCount !== undefined && cpuCount !== null) {
    cpu = cpuCount;
    if (cpu < 1) return { error: 'CPU count must be at least 1' };
    if (cpu > 32) return { error: 'CPU count must be at most 32' };
    if (cpu !== 1 && cpu % 2 !== 0) return { error: 'CPU count must be 1 or an even number' };
  }
  if (memoryMB !== undefined && memoryMB !== null) {
    mem = memoryMB;
    if (mem < 128) return { error: 'Memory must be at least 128 MiB' };
    if (mem % 2 !== 0) return { error: 'Memory must be divisible by 2' };
  }
  return { cpu, memoryMB: mem };
}

export function concurrencyLimitMessage(n) {
  return `you have reached the maximum number of concurrent E2B sandboxes (${n}). If you need more, `
    + "please visit 'https://e2b.dev/docs/billing'";
}

// handlers/sandbox_create.go validateEgressRules: denyOut holds IPs or CIDRs; allowOut IPs, CIDRs or
// names, and names only with 0.0.0.0/0 denied
function egressError(allowOut, denyOut) {
  for (const c of denyOut || []) if (!isCidr(c)) return `invalid denied CIDR ${c}`;
  const names = (allowOut || []).filter((x) => !isCidr(x));
  for (const n of names) if (!/^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(n)) return `invalid allowed address ${n}`;
  if (names.length && !(denyOut || []).includes('0.0.0.0/0')) {
    return "When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out to block all other traffic.";
  }
  return null;
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
  // --self-hosted: the public infra's API has neither POST /v2/sandboxes nor /v2/sandboxes/{id}/connect
  // (spec/openapi.yml); its request validator answers for the missing operation.
  if (emu.selfHosted && m === 'POST' && p === '/v2/sandboxes') return apiError(res, 405, 'method not allowed');
  if (emu.selfHosted && m === 'POST' && /^\/v2\/sandboxes\/[^/]+\/connect$/.test(p)) return apiError(res, 404, 'no matching operation was found');

  if (m === 'POST' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    const legacy = p === '/sandboxes';
    const body = await jsonBody(req, res);
    if (!body) return;
    if (typeof body.templateID !== 'string' || body.templateID === '') {
      return apiError(res, 400, 'Request body has an error: doesn\'t match schema: property "templateID" is missing');
    }
    if (!checkTimeout(emu, res, body.timeout)) return;
    const badNet = egressError(body.network && body.network.allowOut, body.network && body.network.denyOut);
    if (badNet) return apiError(res, 400, badNet);
    const resolved = emu.templates.resolve(body.templateID);
    if (!resolved) return apiError(res, 404, `template '${body.templateID}' not found`);
    const running = [...emu.sandboxes.values()].filter((s) => s.state === 'running').length;
    if (emu.maxSandboxes > 0 && running >= emu.maxSandboxes) {
      // The concurrency limit: 429 without Retry-After (orchestrator/create_instance.go).
      return apiError(res, 429, concurrencyLimitMessage(emu.maxSandboxes));
    }
    const timeoutS = body.timeout !== undefined && body.timeout !== null ? Number(body.timeout) : (legacy ? 15 : 300);
    const sbx = emu.createSandbox({
      resolved,
      timeoutS,
      metadata: body.metadata,
      envVars: body.envVars,
      autoPause: body.autoPause,
      autoPauseMemory: body.autoPauseMemory,
      autoResume: body.autoResume ? !!body.autoResume.enabled : false,
      allowInternetAccess: body.allow_internet_access,
      network: body.network,
      volumeMounts: body.volumeMounts,
      // the legacy create gives an envd access token only with `secure` (handlers/sandbox_create.go);
      // v2 (E2B's cloud) always
      secure: legacy ? body.secure === true : true,
    });
    await emu.waitReady(sbx, resolved.build);
    return sendJson(res, 201, sbx.created());
  }

  if (m === 'GET' && (p === '/v2/sandboxes' || p === '/sandboxes')) {
    // handlers/sandboxes_list.go: newest first unless order=asc; v2 pages 100 at most (a larger limit is
    // the request validator's 400) with a base64 cursor in X-Next-Token
    const q = url.searchParams;
    const states = p === '/sandboxes' ? ['running'] : (q.get('state') || 'running,paused').split(',').filter(Boolean);
    const meta = parseMetadataQuery(q.get('metadata'));
    const tpl = q.get('template');
    const after = q.get('startedAfter') ? Date.parse(q.get('startedAfter')) : NaN;
    const order = q.get('order');
    if (order !== null && order !== 'asc' && order !== 'desc') return apiError(res, 400, `Invalid order parameter: unknown order "${order}"`);
    const list = [...emu.sandboxes.values()]
      .filter((s) => states.includes(s.state))
      .filter((s) => Object.entries(meta).every(([k, v]) => s.metadata && s.metadata[k] === v))
      .filter((s) => !tpl || s.templateID === tpl || s.alias === tpl)
      // at or after (handlers/sandboxes_list.go parseSandboxListStartedAfter: `started_at >= @started_after`)
      .filter((s) => Number.isNaN(after) || s.startedAt >= after);
    const keys = { time: (s) => s.startedAt, id: (s) => s.id, asc: order === 'asc' };
    if (p === '/sandboxes') return sendJson(res, 200, paginate(list, { ...keys, limit: Infinity }).page.map((s) => s.listed()));
    const lim = limitParam(q);
    if (lim.error) return apiError(res, 400, lim.error);
    const pg = paginate(list, { ...keys, limit: lim.limit, nextToken: q.get('nextToken') });
    if (pg.error) return apiError(res, 400, pg.error);
    const headers = { 'X-Total-Running': String([...emu.sandboxes.values()].filter((s) => s.state === 'running').length) };
    if (pg.next) headers['X-Next-Token'] = pg.next;
    return sendJson(res, 200, pg.page.map((s) => s.listed()), headers);
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
      // handlers/sandbox_timeout.go: no upper check here; the end never passes start + the plan's cap
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!sbx) return notFound(res, id);
      const capMs = emu.maxLifetimeHours * 3600 * 1000;
      if (Date.now() - sbx.startedAt > capMs) return apiError(res, 400, 'Max instance length exceeded');
      const want = Math.max(0, Number(body.timeout) || 0) * 1000;
      sbx.setTimeout(Math.min(want, sbx.startedAt + capMs - Date.now()) / 1000);
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
      // `memory: false`: a filesystem-only snapshot (handlers/sandbox_pause.go)
      await emu.pause(sbx, { memory: body.memory !== false });
      return send(res, 204);
    }
    if (sub === 'network' && m === 'PUT') {
      // handlers/sandbox_network_update.go: the egress rules replaced (a field left out clears it), 204;
      // processes started from now on have them
      const body = await jsonBody(req, res);
      if (!body) return;
      const bad = egressError(body.allowOut, body.denyOut);
      if (bad) return apiError(res, 400, bad);
      if (!sbx || sbx.state !== 'running') return notFound(res, id);
      sbx.network = { ...(sbx.network || {}), allowOut: body.allowOut, denyOut: body.denyOut };
      sbx.setEgress({ allowOut: body.allowOut || [], denyOut: body.denyOut || [], allowInternetAccess: body.allow_internet_access });
      return send(res, 204);
    }
    if (sub === 'snapshots' && m === 'POST') {
      // handlers/snapshot_template_create.go: 201 {snapshotID, names}; snapshotID is
      // "<namespace>/<alias>:<tag>" for a named one, else "<templateID>:<tag>"
      const body = await jsonBody(req, res);
      if (!body) return;
      let alias;
      let tag = 'default';
      if (body.name !== undefined && body.name !== null) {
        const parsed = parseName(String(body.name));
        if (parsed.error) return apiError(res, 400, `Invalid name: ${parsed.error}`);
        if (parsed.namespace && parsed.namespace !== TEAM_SLUG) return apiError(res, 400, `namespace '${parsed.namespace}' does not match the team '${TEAM_SLUG}'`);
        alias = parsed.alias;
        if (parsed.tag) tag = parsed.tag;
      }
      if (!sbx || sbx.state !== 'running') return notFound(res, id);
      const snap = await emu.templates.snapshot(sbx, { alias, tag });
      return sendJson(res, 201, snapshotInfo(snap));
    }
    if (sub === 'fork' && m === 'POST') {
      // handlers/sandbox_fork.go: 1..100 forks (fewer than the concurrency limit), 201 with one result each
      const body = await jsonBody(req, res);
      if (!body) return;
      if (!checkTimeout(emu, res, body.timeout)) return;
      const count = body.count === undefined || body.count === null ? 1 : Number(body.count);
      if (!Number.isInteger(count) || count < 1) return apiError(res, 400, 'Count must be at least 1');
      if (count > 100) return apiError(res, 400, 'Count cannot be greater than 100');
      if (emu.maxSandboxes > 0 && count >= emu.maxSandboxes) {
        return apiError(res, 400, `Count must be lower than the maximum number of concurrent sandboxes (${emu.maxSandboxes})`);
      }
      if (!sbx) return notFound(res, id);
      if (sbx.state === 'paused') return apiError(res, 409, `Sandbox '${id}' is paused and cannot be forked; resume it first`);
      const timeoutS = body.timeout !== undefined && body.timeout !== null ? Number(body.timeout) : 300;
      const { sandboxes, build } = await emu.fork(sbx, count, timeoutS);
      await Promise.all(sandboxes.map((f) => emu.waitReady(f, build)));
      return sendJson(res, 201, sandboxes.map((f) => ({ sandbox: f.created() })));
    }
    if ((sub === 'connect' || sub === 'resume') && m === 'POST') {
      const body = await jsonBody(req, res);
      if (!body) return;
      // the legacy connect requires a timeout, 0 included (the lease is only ever extended)
      if (!g[1] && sub === 'connect' && (body.timeout === undefined || body.timeout === null)) {
        return apiError(res, 400, 'request body has an error: doesn\'t match schema #/components/schemas/ConnectSandbox: property "timeout" is missing');
      }
      if (!checkTimeout(emu, res, body.timeout, { zeroOk: sub === 'connect' })) return;
      if (!sbx) return notFound(res, id);
      const t = body.timeout !== undefined && body.timeout !== null ? Number(body.timeout) : 300;
      if (sbx.state === 'paused') {
        await emu.resume(sbx, t);
        return sendJson(res, 201, sbx.created());
      }
      if (sub === 'resume') return apiError(res, 409, `Sandbox ${id} is already running`);
      // connect only extends the lifetime
      const end = Date.now() + t * 1000;
      if (end > sbx.endAt) sbx.setTimeout(t);
      return sendJson(res, 200, sbx.created());
    }
    if (sub === 'metrics' && m === 'GET') {
      // One sample per 5 s collection bucket of the sandbox's life so far, those inside [start, end]
      // (unix seconds; absent: the sandbox's own start and now; clickhouse pkg/utils/sandbox.go
      // GetSandboxStartEndTime), so a range before the sandbox existed is empty.
      if (!sbx) return notFound(res, id);
      const q = url.searchParams;
      const bound = (k, dflt) => (q.get(k) !== null && Number.isFinite(Number(q.get(k))) ? Number(q.get(k)) : dflt);
      const now = Math.floor(Date.now() / 1000);
      const from = bound('start', Math.floor(sbx.startedAt / 1000));
      const to = bound('end', now);
      const out = [];
      for (let t = Math.floor(sbx.startedAt / 5000) * 5; t <= now && out.length < 10000; t += 5) {
        if (t < from - 5 || t > to) continue;
        out.push({
          timestamp: new Date(t * 1000).toISOString(), timestampUnix: t, cpuCount: sbx.cpuCount, cpuUsedPct: 1.5,
          memUsed: 64 * 1024 * 1024, memTotal: sbx.memoryMB * 1024 * 1024, diskUsed: 1024 * 1024, diskTotal: sbx.diskSizeMB * 1024 * 1024,
        });
      }
      return sendJson(res, 200, out);
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
    const bad = checkBuildRequest(body);
    if (bad) return apiError(res, 400, bad);
    const parsed = parseName(body.name);
    if (parsed.error) return apiError(res, 400, `Invalid name: ${parsed.error}`);
    const tags = validateTags([...(parsed.tag ? [parsed.tag] : []), ...(Array.isArray(body.tags) ? body.tags : [])]);
    if (tags.error) return apiError(res, 400, `Invalid tag: ${tags.error}`);
    const limits = limitResources(body.cpuCount, body.memoryMB);
    if (limits.error) return apiError(res, 400, limits.error);
    const name = parsed.alias;
    const found = emu.templates.lookup(name);
    if (found && found.template.public && ['base', 'code-interpreter-v1'].includes(name)) {
      return apiError(res, 403, `you don't have access to template '${name}'`);
    }
    const t = found ? found.template : emu.templates.newTemplate(name);
    const b = emu.templates.newBuild(t, { cpuCount: limits.cpu, memoryMB: limits.memoryMB, tags: tags.tags });
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
    // the scheme this listener serves (an http:// URL from a TLS listener is refused by the client)
    const base = `${req.socket.encrypted ? 'https' : 'http'}://${req.headers.host}`;
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
    // infra handlers/template_tags.go: the target's build (name:tag, the latest ready one) gets new
    // assignments of the tags
    const body = await jsonBody(req, res);
    if (!body) return;
    const tagsIn = Array.isArray(body.tags) ? body.tags : [];
    if (tagsIn.length === 0) return apiError(res, 400, 'At least one tag is required');
    const parsed = parseName(String(body.target || ''));
    if (parsed.error) return apiError(res, 400, `Invalid target template format: ${parsed.error}`);
    const found = emu.templates.lookup(parsed.alias);
    const build = found && emu.templates.readyBuild(found.template, parsed.tag || 'default');
    if (!build) return apiError(res, 404, `Template '${body.target}' with tag '${parsed.tag || 'default'}' not found`);
    const tags = validateTags(tagsIn);
    if (tags.error) return apiError(res, 400, `Invalid tag: ${tags.error}`);
    for (const tag of tags.tags) emu.templates.assign(found.template, tag, build.buildID);
    return sendJson(res, 201, { buildID: build.buildID, tags: tags.tags });
  }
  if (p === '/templates/tags' && m === 'DELETE') {
    const body = await jsonBody(req, res);
    if (!body) return;
    const tags = validateTags(Array.isArray(body.tags) ? body.tags : []);
    if (tags.error) return apiError(res, 400, `Invalid tag: ${tags.error}`);
    if (tags.tags.length === 0) return apiError(res, 400, 'At least one tag is required');
    if (tags.tags.includes('default')) return apiError(res, 400, "Cannot delete the 'default' tag");
    const parsed = parseName(String(body.name || ''));
    if (parsed.error) return apiError(res, 400, `Invalid template name format: ${parsed.error}`);
    if (parsed.tag) return apiError(res, 400, "Template name should not contain a tag, use the 'tags' field instead");
    const found = emu.templates.lookup(parsed.alias);
    if (!found) return apiError(res, 404, `template '${body.name}' not found`);
    found.template.assignments = found.template.assignments.filter((a) => !tags.tags.includes(a.tag));
    return send(res, 204);
  }

  if (m === 'GET' && p === '/snapshots') {
    // handlers/snapshot_template_list.go: newest first, `sandboxID`, `name` (a bare name: any tag;
    // name:tag that tag), limit 1..100, nextToken
    const q = url.searchParams;
    let rows = emu.templates.snapshots();
    if (q.get('sandboxID')) rows = rows.filter((r) => r.build.snapshotOf === q.get('sandboxID'));
    if (q.get('name') !== null) {
      const parsed = parseName(q.get('name'));
      if (parsed.error) return apiError(res, 400, `Invalid name: ${parsed.error}`);
      const tag = parsed.tag || (q.get('name').includes(':') ? 'default' : null);
      rows = rows.filter((r) => r.template.names.includes(parsed.alias) && (!tag || r.tag === tag));
    }
    const lim = limitParam(q);
    if (lim.error) return apiError(res, 400, lim.error);
    const pg = paginate(rows, { limit: lim.limit, nextToken: q.get('nextToken'), time: (r) => r.build.createdAt, id: (r) => r.build.buildID });
    if (pg.error) return apiError(res, 400, pg.error);
    return sendJson(res, 200, pg.page.map(snapshotInfo), pg.next ? { 'X-Next-Token': pg.next } : {});
  }

  if (m === 'GET' && p === '/templates') return sendJson(res, 200, emu.templates.list().filter((x) => !emu.templates.byId.get(x.templateID).snapshot));

  if ((g = p.match(/^\/templates\/([^/]+)(?:\/(tags))?$/))) {
    const found = emu.templates.lookup(decodeURIComponent(g[1]));
    const t = found && found.template;
    if (!t) return apiError(res, 404, `template '${g[1]}' not found`);
    if (g[2] === 'tags' && m === 'GET') {
      // the latest assignment of every tag, whatever its build's status
      return sendJson(res, 200, emu.templates.tagList(t).map((a) => ({ tag: a.tag, buildID: a.buildID, createdAt: new Date(a.createdAt).toISOString() })));
    }
    if (!g[2] && m === 'GET') {
      // infra handlers/template_get.go: builds newest first, 100 a page, X-Next-Token
      const lim = limitParam(url.searchParams);
      if (lim.error) return apiError(res, 400, lim.error);
      const pg = paginate(t.builds, { limit: lim.limit, nextToken: url.searchParams.get('nextToken'), time: (b) => b.createdAt, id: (b) => b.buildID });
      if (pg.error) return apiError(res, 400, pg.error);
      return sendJson(res, 200, {
        templateID: t.templateID, public: t.public, names: t.names, aliases: t.names,
        createdAt: new Date(t.createdAt).toISOString(), updatedAt: new Date(t.updatedAt).toISOString(),
        builds: pg.page.map((b) => ({
          buildID: b.buildID, status: b.status, cpuCount: b.cpuCount, memoryMB: b.memoryMB,
          createdAt: new Date(b.createdAt).toISOString(), updatedAt: new Date(b.updatedAt).toISOString(),
          finishedAt: b.finishedAt ? new Date(b.finishedAt).toISOString() : undefined,
        })),
      }, pg.next ? { 'X-Next-Token': pg.next } : {});
    }
    if (!g[2] && m === 'DELETE') {
      // also how a snapshot is deleted (the SDK's deleteSnapshot)
      emu.templates.remove(t);
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
  // The URL is a V2 signed URL (infra shared/pkg/storage/storage_google.go UploadSignedURL: PUT, no
  // content type), and a V2 signature covers the Content-Type header: any Content-Type fails it, as
  // libcurl's default application/x-www-form-urlencoded for a body given as POSTFIELDS would.
  const ctype = req.headers['content-type'];
  if (ctype !== undefined) {
    await readBody(req).catch(() => {});
    return send(res, 403, "<?xml version='1.0' encoding='UTF-8'?><Error><Code>SignatureDoesNotMatch</Code><Message>The request "
      + 'signature we calculated does not match the signature you provided. Check your Google secret key and signing method.'
      + `</Message><StringToSign>PUT\n\n${ctype}\n...</StringToSign></Error>`, { 'Content-Type': 'application/xml; charset=UTF-8' });
  }
  if (req.headers['transfer-encoding'] && !req.headers['content-length']) {
    return send(res, 501, 'NotImplemented: Transfer-Encoding chunked is not supported, send Content-Length', { 'Content-Type': 'text/plain' });
  }
  const body = await readBody(req);
  fs.writeFileSync(emu.templates.filePath(up.templateID, up.hash), body);
  emu.templates.uploads.delete(token);
  return send(res, 200);
}
