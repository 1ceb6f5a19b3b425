// The lifecycle API (FastAPI server, docs/protocols/opensandbox.md §1, §3, §4): /v1/sandboxes,
// /v1/snapshots, endpoints, the SDK's metrics events. Every route also answers without /v1.
import { readBody, sendJson, send } from './util.mjs';

export const EXECD_PORT = 44772;
export const EGRESS_PORT = 18080;
const RESERVED_PREFIX = 'opensandbox.io/';

const ERR = (code, message) => ({ code, message });

function notFound(res, id) {
  sendJson(res, 404, ERR('DOCKER::SANDBOX_NOT_FOUND', `Sandbox ${id} not found.`));
}

function snapshotNotFound(res, id) {
  sendJson(res, 404, ERR('SNAPSHOT::NOT_FOUND', `Snapshot ${id} not found`));
}

// FastAPI's request validation error: 422 {"detail": [pydantic v2 error, ...]}.
export function validation(res, errs) {
  sendJson(res, 422, { detail: errs });
}

function valueError(msg, input) {
  return { type: 'value_error', loc: ['body'], msg: `Value error, ${msg}`, input, ctx: { error: {} } };
}

// Body as JSON, or a 422 already sent (null).
async function jsonBody(req, res, { required = true } = {}) {
  const buf = await readBody(req);
  if (buf.length === 0) {
    if (!required) return {};
    validation(res, [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
    return null;
  }
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (e) {
    validation(res, [{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {}, ctx: { error: e.message } }]);
    return null;
  }
}

// Kubernetes label rules (services/validators.py ensure_metadata_labels).
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
function validLabelKey(k) {
  const i = k.lastIndexOf('/');
  const name = i >= 0 ? k.slice(i + 1) : k;
  const prefix = i >= 0 ? k.slice(0, i) : null;
  if (name.length === 0 || name.length > 63 || !LABEL_NAME.test(name)) return false;
  if (prefix !== null && (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return true;
}
function validLabelValue(v) {
  return v === '' || (v.length <= 63 && LABEL_NAME.test(v));
}

// null when fine, else the {code, message} the server answers with 400.
function metadataError(meta, reservedCode = 'SANDBOX::INVALID_METADATA_LABEL') {
  for (const [k, v] of Object.entries(meta)) {
    if (k.startsWith(RESERVED_PREFIX)) {
      return ERR(reservedCode, `Metadata key '${k}' uses the reserved prefix '${RESERVED_PREFIX}'. Keys under this prefix are managed by the system and cannot be set via metadata.`);
    }
    if (!validLabelKey(k)) return ERR('SANDBOX::INVALID_METADATA_LABEL', `Metadata key '${k}' is invalid: must be either a name or a DNS-subdomain prefix and name separated by /, where the name is up to 63 characters and matches [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, and the optional prefix is a valid DNS subdomain up to 253 characters.`);
    if (v !== null && !validLabelValue(String(v))) return ERR('SANDBOX::INVALID_METADATA_LABEL', `Metadata value '${v}' is invalid: must be 63 characters or less, start/end with an alphanumeric character, and contain only alphanumeric, '-', '_', or '.' characters.`);
  }
  return null;
}

function isStringMap(v, allowNull = false) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  return Object.values(v).every((x) => typeof x === 'string' || (allowNull && x === null));
}

// Python's parse_qsl(s, keep_blank_values=True, strict_parsing=True): "k=v&k2=v2".
function parseMetadataFilter(s) {
  const out = {};
  for (const seg of s.split('&')) {
    if (seg === '') continue;
    const i = seg.indexOf('=');
    if (i < 0) throw new Error(`bad query field: '${seg}'`);
    const dec = (x) => decodeURIComponent(x.replace(/\+/g, ' '));
    out[dec(seg.slice(0, i))] = dec(seg.slice(i + 1));
  }
  return out;
}

// page / pageSize query parameters (ge=1, pageSize le=200); null after a 422.
function pagination(res, q) {
  const errs = [];
  const num = (name, def, le) => {
    const raw = q.get(name);
    if (raw === null) return def;
    if (!/^-?\d+$/.test(raw)) {
      errs.push({ type: 'int_parsing', loc: ['query', name], msg: 'Input should be a valid integer, unable to parse string as an integer', input: raw });
      return def;
    }
    const n = Number(raw);
    if (n < 1) errs.push({ type: 'greater_than_equal', loc: ['query', name], msg: 'Input should be greater than or equal to 1', input: raw, ctx: { ge: 1 } });
    else if (le && n > le) errs.push({ type: 'less_than_equal', loc: ['query', name], msg: `Input should be less than or equal to ${le}`, input: raw, ctx: { le } });
    return n;
  };
  const page = num('page', 1);
  const pageSize = num('pageSize', 20, 200);
  if (errs.length) { validation(res, errs); return null; }
  return { page, pageSize };
}

function paginate(items, { page, pageSize }) {
  const totalItems = items.length;
  const totalPages = totalItems ? Math.ceil(totalItems / pageSize) : 0;
  return {
    items: items.slice((page - 1) * pageSize, page * pageSize),
    pagination: { page, pageSize, totalItems, totalPages, hasNextPage: page < totalPages },
  };
}

// POST /sandboxes: validation as schema.py's CreateSandboxRequest, then the service's checks.
async function createSandbox(emu, req, res) {
  const body = await jsonBody(req, res);
  if (body === null) return;
  if (typeof body !== 'object' || Array.isArray(body)) {
    return validation(res, [{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: body }]);
  }
  const errs = [];
  if (body.timeout !== undefined && body.timeout !== null) {
    if (!Number.isInteger(body.timeout)) errs.push({ type: 'int_type', loc: ['body', 'timeout'], msg: 'Input should be a valid integer', input: body.timeout });
    else if (body.timeout < 60) errs.push({ type: 'greater_than_equal', loc: ['body', 'timeout'], msg: 'Input should be greater than or equal to 60', input: body.timeout, ctx: { ge: 60 } });
  }
  if (body.entrypoint !== undefined && body.entrypoint !== null) {
    if (!Array.isArray(body.entrypoint) || !body.entrypoint.every((x) => typeof x === 'string')) {
      errs.push({ type: 'list_type', loc: ['body', 'entrypoint'], msg: 'Input should be a valid list', input: body.entrypoint });
    } else if (body.entrypoint.length < 1) {
      errs.push({ type: 'too_short', loc: ['body', 'entrypoint'], msg: 'List should have at least 1 item after validation, not 0', input: [], ctx: { field_type: 'List', min_length: 1, actual_length: 0 } });
    }
  }
  for (const f of ['env', 'metadata', 'extensions', 'resourceLimits']) {
    if (body[f] !== undefined && body[f] !== null && !isStringMap(body[f], f === 'env')) {
      errs.push({ type: 'dict_type', loc: ['body', f], msg: 'Input should be a valid dictionary', input: body[f] });
    }
  }
  if (body.image !== undefined && body.image !== null && (typeof body.image !== 'object' || typeof body.image.uri !== 'string' || body.image.uri === '')) {
    errs.push({ type: 'missing', loc: ['body', 'image', 'uri'], msg: 'Field required', input: body.image });
  }
  if (errs.length) return validation(res, errs);
  const poolRef = body.extensions && body.extensions.poolRef;
  const hasImage = body.image != null;
  const hasSnapshot = body.snapshotId != null;
  if (hasSnapshot && poolRef) return validation(res, [valueError('snapshotId cannot be used together with poolRef.', body)]);
  if (hasImage === hasSnapshot) return validation(res, [valueError('Exactly one of image or snapshotId must be provided.', body)]);
  if (hasImage && !body.entrypoint) return validation(res, [valueError('Entrypoint is required when image is provided.', body)]);
  if (!poolRef && !body.resourceLimits) return validation(res, [valueError('resourceLimits is required when poolRef is not provided.', body)]);
  if (poolRef) return sendJson(res, 400, ERR('SANDBOX::UNSUPPORTED_POOL_REF', 'extensions.poolRef is not supported by the Docker runtime.'));
  const metadata = body.metadata || {};
  const bad = metadataError(metadata);
  if (bad) return sendJson(res, 400, bad);

  let fromSnapshot = null;
  if (hasSnapshot) {
    const sid = String(body.snapshotId).trim();
    if (!sid) return sendJson(res, 400, ERR('SANDBOX::INVALID_PARAMETER', 'Either image or snapshotId must be provided.'));
    fromSnapshot = emu.snapshots.get(sid);
    if (!fromSnapshot) return snapshotNotFound(res, sid);
    if (fromSnapshot.state !== 'Ready') return sendJson(res, 409, ERR('SNAPSHOT::NOT_READY', `Snapshot ${sid} is not ready for restore.`));
  }
  if (body.volumes !== undefined && body.volumes !== null && !Array.isArray(body.volumes)) {
    return validation(res, [{ type: 'list_type', loc: ['body', 'volumes'], msg: 'Input should be a valid list', input: body.volumes }]);
  }
  let vols;
  try {
    vols = emu.volumes.prepare(body.volumes);
  } catch (e) {
    if (!e.code || !String(e.code).startsWith('VOLUME::')) throw e;
    return sendJson(res, e.status, ERR(e.code, e.message));
  }
  const env = {};
  for (const [k, v] of Object.entries({ ...(fromSnapshot ? fromSnapshot.env : {}), ...(body.env || {}) })) if (v !== null) env[k] = v;
  const sbx = emu.createSandbox({
    mounts: vols.mounts,
    volumesCreated: vols.created,
    image: hasImage ? { uri: body.image.uri } : undefined,
    snapshotId: fromSnapshot ? fromSnapshot.id : undefined,
    fromSnapshot,
    // Only the code-interpreter image runs Jupyter behind execd's /code (a restored snapshot keeps it).
    interpreter: fromSnapshot ? fromSnapshot.interpreter : /code-interpreter/.test(body.image.uri),
    entrypoint: body.entrypoint || ['tail', '-f', '/dev/null'],
    env,
    metadata: { ...metadata },
    extensions: body.extensions,
    platform: body.platform || undefined,
    resourceLimits: body.resourceLimits,
    networkPolicy: body.networkPolicy,
    timeoutS: body.timeout == null ? null : body.timeout,
  });
  return sendJson(res, 202, sbx.created());
}

function listSandboxes(emu, res, q) {
  const page = pagination(res, q);
  if (!page) return;
  let filter = {};
  const raw = q.get('metadata');
  if (raw) {
    try { filter = parseMetadataFilter(raw); } catch (e) {
      return sendJson(res, 400, ERR('INVALID_METADATA_FORMAT', `Invalid metadata format: ${e.message}`));
    }
  }
  const states = new Set(q.getAll('state').map((s) => s.toLowerCase()));
  const items = [...emu.sandboxes.values()]
    .filter((s) => states.size === 0 || states.has(s.state.toLowerCase()))
    .filter((s) => Object.entries(filter).every(([k, v]) => s.metadata[k] === v))
    .sort((a, b) => b.createdAt - a.createdAt)
    .map((s) => s.info());
  return sendJson(res, 200, paginate(items, page));
}

function listSnapshots(emu, res, q) {
  const page = pagination(res, q);
  if (!page) return;
  const states = new Set(q.getAll('state').map((s) => s.toLowerCase()));
  const sandboxId = q.get('sandboxId');
  const name = q.get('name');
  const items = [...emu.snapshots.values()]
    .filter((s) => states.size === 0 || states.has(s.state.toLowerCase()))
    .filter((s) => !sandboxId || s.sandboxId === sandboxId)
    .filter((s) => name === null || s.name === name)
    .sort((a, b) => (b.createdAt - a.createdAt) || (a.id < b.id ? 1 : -1))
    .map((s) => s.info());
  return sendJson(res, 200, paginate(items, page));
}

// GET /sandboxes/{id}/endpoints/{port}: where that port of the sandbox is reachable. The emulator
// serves every sandbox port on its own listener, addressed like a Kubernetes ingress gateway in header
// mode (endpoint = the listener, header OpenSandbox-Ingress-To: <id>-<port>) or, with --endpoint-style
// uri, in uri mode (<listener>/<id>/<port>); use_server_proxy=true gives the server proxy route.
function endpoint(emu, res, sbx, port, q) {
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    return sendJson(res, 400, ERR('DOCKER::INVALID_PORT', `Port must be between 1 and 65535, got ${port}.`));
  }
  const proxy = q.get('use_server_proxy');
  const useProxy = proxy === 'true' || proxy === '1';
  if (q.get('expires') !== null) {
    return sendJson(res, 400, ERR('SANDBOX::API_NOT_SUPPORTED', "Signed routes (expires parameter) are not supported when runtime.type='docker'. Use the Kubernetes runtime for signed routes."));
  }
  const host = emu.baseUrl.replace(/^https?:\/\//, '');
  if (useProxy) return sendJson(res, 200, { endpoint: `${host}/sandboxes/${sbx.id}/proxy/${port}` });
  const sandboxHost = emu.execdHost || host;
  if (emu.endpointStyle === 'uri') return sendJson(res, 200, { endpoint: `${sandboxHost}/${sbx.id}/${port}` });
  return sendJson(res, 200, { endpoint: sandboxHost, headers: { 'OpenSandbox-Ingress-To': `${sbx.id}-${port}` } });
}

export async function handleLifecycle(emu, req, res, url) {
  const m = req.method;
  const p = url.pathname.replace(/^\/v1(?=\/|$)/, '').replace(/\/+$/, '') || '/';
  const q = url.searchParams;
  let g;

  if (p === '/health' && m === 'GET') return sendJson(res, 200, { status: 'healthy' });

  const auth = emu.checkKey(req);
  if (auth === 'missing') {
    await readBody(req).catch(() => {});
    return sendJson(res, 401, ERR('MISSING_API_KEY', 'Authentication credentials are missing. Provide API key via OPEN-SANDBOX-API-KEY header.'));
  }
  if (auth === 'invalid') {
    await readBody(req).catch(() => {});
    return sendJson(res, 401, ERR('INVALID_API_KEY', 'Authentication credentials are invalid. Check your API key and try again.'));
  }

  if (p === '/metrics/events' && m === 'POST') {
    const body = await jsonBody(req, res);
    if (body === null) return;
    emu.metricsEvents.push(body);
    return send(res, 204);
  }
  if (p === '/sandboxes' && m === 'POST') return createSandbox(emu, req, res);
  if (p === '/sandboxes' && m === 'GET') return listSandboxes(emu, res, q);
  if (p === '/snapshots' && m === 'GET') return listSnapshots(emu, res, q);

  if ((g = p.match(/^\/snapshots\/([^/]+)$/))) {
    const snap = emu.snapshots.get(decodeURIComponent(g[1]));
    if (m === 'GET') return snap ? sendJson(res, 200, snap.info()) : snapshotNotFound(res, g[1]);
    if (m === 'DELETE') {
      if (!snap) return snapshotNotFound(res, g[1]);
      if (snap.state === 'Creating') {
        return sendJson(res, 409, ERR('SNAPSHOT::INVALID_STATE', `Snapshot ${snap.id} is still being created and cannot be deleted`));
      }
      emu.deleteSnapshot(snap);
      return send(res, 204);
    }
  }

  if ((g = p.match(/^\/sandboxes\/([^/]+)(\/.*)?$/))) {
    const id = decodeURIComponent(g[1]);
    const rest = g[2] || '';
    const sbx = emu.sandboxes.get(id);
    let e;
    if (rest === '' && m === 'GET') return sbx ? sendJson(res, 200, sbx.info()) : notFound(res, id);
    if (rest === '' && m === 'DELETE') {
      if (!sbx) return notFound(res, id);
      emu.killSandbox(sbx, 'delete');
      return send(res, 204);
    }
    if (rest === '/metadata' && m === 'PATCH') {
      const body = await jsonBody(req, res);
      if (body === null) return;
      if (!sbx) return notFound(res, id);
      if (!isStringMap(body, true)) return validation(res, [{ type: 'dict_type', loc: ['body'], msg: 'Input should be a valid dictionary', input: body }]);
      for (const k of Object.keys(body)) {
        if (k.startsWith(RESERVED_PREFIX)) return sendJson(res, 400, ERR('INVALID_METADATA_LABEL', `Metadata key '${k}' is reserved (opensandbox.io/ prefix).`));
      }
      if ((e = metadataError(body))) return sendJson(res, 400, e);
      for (const [k, v] of Object.entries(body)) {
        if (v === null) delete sbx.metadata[k];
        else sbx.metadata[k] = v;
      }
      return sendJson(res, 200, sbx.info());
    }
    if (rest === '/pause' && m === 'POST') {
      await readBody(req);
      if (!sbx) return notFound(res, id);
      if (sbx.state !== 'Running') return sendJson(res, 409, ERR('DOCKER::SANDBOX_NOT_RUNNING', `Sandbox ${id} is not running (state=${sbx.state}).`));
      await emu.pause(sbx);
      return send(res, 202);
    }
    if (rest === '/resume' && m === 'POST') {
      await readBody(req);
      if (!sbx) return notFound(res, id);
      if (sbx.state !== 'Paused') return sendJson(res, 409, ERR('DOCKER::SANDBOX_NOT_PAUSED', `Sandbox ${id} is not paused (state=${sbx.state}).`));
      await emu.resume(sbx);
      return send(res, 202);
    }
    if (rest === '/renew-expiration' && m === 'POST') {
      const body = await jsonBody(req, res);
      if (body === null) return;
      const t = body && typeof body.expiresAt === 'string' ? Date.parse(body.expiresAt) : NaN;
      if (!body || body.expiresAt === undefined) return validation(res, [{ type: 'missing', loc: ['body', 'expiresAt'], msg: 'Field required', input: body }]);
      if (Number.isNaN(t)) return validation(res, [{ type: 'datetime_from_date_parsing', loc: ['body', 'expiresAt'], msg: 'Input should be a valid datetime or date, invalid character in year', input: body.expiresAt, ctx: { error: 'invalid character in year' } }]);
      if (!sbx) return notFound(res, id);
      if (t <= Date.now()) return sendJson(res, 400, ERR('DOCKER::INVALID_EXPIRATION', 'New expiration time must be in the future.'));
      if (sbx.expiresAt == null) return sendJson(res, 409, ERR('DOCKER::INVALID_EXPIRATION', `Sandbox ${id} does not have automatic expiration enabled.`));
      sbx.expiresAt = t;
      sbx.arm();
      return sendJson(res, 200, { expiresAt: new Date(t).toISOString() });
    }
    if ((g = rest.match(/^\/endpoints\/([^/]+)$/)) && m === 'GET') {
      if (!sbx) return notFound(res, id);
      return endpoint(emu, res, sbx, g[1], q);
    }
    if (rest === '/snapshots' && m === 'POST') {
      const body = await jsonBody(req, res, { required: false });
      if (body === null) return;
      if (!sbx) return notFound(res, id);
      if (sbx.state !== 'Running') {
        return sendJson(res, 409, ERR('SNAPSHOT::INVALID_SOURCE_STATE', `Sandbox ${id} must be Running to create a snapshot (state=${sbx.state}).`));
      }
      if (body.name !== undefined && body.name !== null && typeof body.name !== 'string') {
        return validation(res, [{ type: 'string_type', loc: ['body', 'name'], msg: 'Input should be a valid string', input: body.name }]);
      }
      if (typeof body.name === 'string' && body.name.length < 1) {
        return validation(res, [{ type: 'string_too_short', loc: ['body', 'name'], msg: 'String should have at least 1 character', input: '', ctx: { min_length: 1 } }]);
      }
      const snap = emu.createSnapshot(sbx, body.name == null ? undefined : body.name);
      return sendJson(res, 202, snap.info(), { Location: `/v1/snapshots/${snap.id}` });
    }
  }
  await readBody(req).catch(() => {});
  return sendJson(res, 404, { detail: 'Not Found' });
}
