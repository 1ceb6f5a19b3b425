// Control plane (bedrock-agentcore-control, docs/protocols/bedrock.md §2): custom code
// interpreters. Create answers 202 with CREATING; the interpreter turns READY (or CREATE_FAILED with
// a failureReason) after --create-delay-ms. Delete answers 202 with DELETING and forgets it after
// the same delay. The system interpreter aws.codeinterpreter.v1 always exists.
import crypto from 'node:crypto';
import { AwsError, validation, notFound } from './errors.mjs';
import { iso, suffix10 } from './util.mjs';

export const SYSTEM_ID = 'aws.codeinterpreter.v1';
export const ACCOUNT = '123456789012';

export class Interpreter {
  constructor({ id, name, system = false, region, description, executionRoleArn, networkConfiguration, certificates, filesystemConfigurations, tags }) {
    this.id = id;
    this.name = name;
    this.system = system;
    this.region = region;
    this.description = description;
    this.executionRoleArn = executionRoleArn;
    this.networkConfiguration = networkConfiguration || { networkMode: 'SANDBOX' };
    this.certificates = certificates;
    this.filesystemConfigurations = filesystemConfigurations;
    this.tags = tags;
    this.createdAt = system ? Date.UTC(2025, 6, 16) : Date.now();
    this.lastUpdatedAt = this.createdAt;
    this.status = system ? 'READY' : 'CREATING';
    this.failureReason = undefined;
    this.timer = null;
  }

  arn(region) {
    const kind = this.system ? 'code-interpreter' : 'code-interpreter-custom';
    return `arn:aws:bedrock-agentcore:${region || this.region}:${this.system ? 'aws' : ACCOUNT}:${kind}/${this.id}`;
  }

  setStatus(status, reason) {
    this.status = status;
    this.failureReason = reason;
    this.lastUpdatedAt = Date.now();
  }

  detail(region) {
    const d = {
      codeInterpreterId: this.id,
      codeInterpreterArn: this.arn(region),
      name: this.name,
      description: this.description,
      executionRoleArn: this.executionRoleArn,
      networkConfiguration: this.networkConfiguration,
      status: this.status,
      failureReason: this.failureReason,
      createdAt: iso(this.createdAt),
      lastUpdatedAt: iso(this.lastUpdatedAt),
      certificates: this.certificates,
      filesystemConfigurations: this.filesystemConfigurations,
    };
    for (const k of Object.keys(d)) if (d[k] === undefined) delete d[k];
    return d;
  }

  summary(region) {
    const s = {
      codeInterpreterId: this.id,
      codeInterpreterArn: this.arn(region),
      name: this.name,
      description: this.description,
      status: this.status,
      createdAt: iso(this.createdAt),
      lastUpdatedAt: iso(this.lastUpdatedAt),
    };
    for (const k of Object.keys(s)) if (s[k] === undefined) delete s[k];
    return s;
  }
}

const NAME = /^[a-zA-Z][a-zA-Z0-9_]{0,47}$/;
const ROLE = /^arn:aws(-[^:]+)?:iam::(\d{12})?:role\/.+$/;
const MODES = new Set(['PUBLIC', 'SANDBOX', 'VPC']);

function checkCreate(body) {
  const fields = [];
  if (typeof body.name !== 'string' || !NAME.test(body.name)) {
    fields.push({ name: 'name', message: "Value failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][a-zA-Z0-9_]{0,47}" });
  }
  const nc = body.networkConfiguration;
  if (!nc || typeof nc !== 'object') fields.push({ name: 'networkConfiguration', message: 'Member must not be null' });
  else if (!MODES.has(nc.networkMode)) fields.push({ name: 'networkConfiguration.networkMode', message: 'Member must satisfy enum value set: [PUBLIC, SANDBOX, VPC]' });
  else if (nc.networkMode === 'VPC' && !nc.vpcConfig) fields.push({ name: 'networkConfiguration.vpcConfig', message: 'vpcConfig is required when networkMode is VPC' });
  if (body.executionRoleArn !== undefined && (typeof body.executionRoleArn !== 'string' || !ROLE.test(body.executionRoleArn))) {
    fields.push({ name: 'executionRoleArn', message: 'Member must satisfy regular expression pattern: arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+' });
  }
  if (body.description !== undefined && (typeof body.description !== 'string' || body.description.length < 1 || body.description.length > 4096)) {
    fields.push({ name: 'description', message: 'Member must have length between 1 and 4096' });
  }
  if (fields.length) {
    throw validation(`${fields.length} validation error${fields.length > 1 ? 's' : ''} detected: ${fields.map((f) => `Value at '${f.name}' failed to satisfy constraint: ${f.message}`).join('; ')}`,
      'FieldValidationFailed', fields);
  }
}

export class ControlPlane {
  constructor(emu, { createDelayMs = 300 } = {}) {
    this.emu = emu;
    this.createDelayMs = createDelayMs;
    this.interpreters = new Map();
    this.system = new Interpreter({ id: SYSTEM_ID, name: SYSTEM_ID, system: true, networkConfiguration: { networkMode: 'SANDBOX' } });
  }

  // An interpreter by identifier (id or ARN); the system one included.
  find(identifier) {
    const id = String(identifier).startsWith('arn:') ? String(identifier).split('/').pop() : String(identifier);
    if (id === SYSTEM_ID) return this.system;
    return this.interpreters.get(id) || null;
  }

  create(body, region, fault) {
    checkCreate(body);
    for (const it of this.interpreters.values()) {
      if (it.name === body.name && it.status !== 'DELETED') {
        throw new AwsError('ConflictException', `A code interpreter named ${body.name} already exists.`);
      }
    }
    const it = new Interpreter({
      id: `${body.name}-${suffix10()}`, name: body.name, region, description: body.description, executionRoleArn: body.executionRoleArn,
      networkConfiguration: body.networkConfiguration, certificates: body.certificates,
      filesystemConfigurations: body.filesystemConfigurations, tags: body.tags,
    });
    this.interpreters.set(it.id, it);
    const failure = fault && fault.action === 'create_failed'
      ? (fault.failureReason || 'Failed to create the code interpreter: the execution role cannot be assumed by bedrock-agentcore.amazonaws.com')
      : null;
    it.timer = setTimeout(() => {
      it.timer = null;
      if (it.status !== 'CREATING') return;
      if (failure) it.setStatus('CREATE_FAILED', failure);
      else it.setStatus('READY');
      this.emu.log(`interpreter ${it.id} ${it.status}`);
    }, this.createDelayMs);
    it.timer.unref?.();
    this.emu.log(`interpreter ${it.id} CREATING`);
    return { codeInterpreterId: it.id, codeInterpreterArn: it.arn(region), createdAt: iso(it.createdAt), status: it.status };
  }

  get(id) {
    const it = this.find(id);
    if (!it || it.status === 'DELETED') throw notFound(`Code interpreter ${id} not found.`);
    return it;
  }

  delete(id) {
    const it = this.get(id);
    if (it.system) throw new AwsError('AccessDeniedException', `You cannot delete the system code interpreter ${id}.`);
    if (it.status !== 'DELETING') {
      if (it.timer) clearTimeout(it.timer);
      it.setStatus('DELETING');
      for (const s of this.emu.sessions.values()) if (s.interpreter === it) this.emu.terminate(s, 'interpreter deleted');
      it.timer = setTimeout(() => {
        it.setStatus('DELETED');
        this.interpreters.delete(it.id);
        this.emu.log(`interpreter ${it.id} deleted`);
      }, this.createDelayMs);
      it.timer.unref?.();
    }
    return { codeInterpreterId: it.id, status: it.status, lastUpdatedAt: iso(it.lastUpdatedAt) };
  }

  list(type) {
    const out = [];
    if (type === undefined || type === 'SYSTEM') out.push(this.system);
    if (type === undefined || type === 'CUSTOM') {
      const custom = [...this.interpreters.values()].filter((i) => i.status !== 'DELETED');
      custom.sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? -1 : 1));
      out.push(...custom);
    }
    return out;
  }

  shutdown() {
    for (const it of this.interpreters.values()) if (it.timer) clearTimeout(it.timer);
  }
}

// HTTP operations of the control plane: (emu, ctx, ...) -> [status, body].
function parseJsonBody(body) {
  if (body.length === 0) return {};
  try {
    const v = JSON.parse(body.toString('utf8'));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch { /* below */ }
  throw new AwsError('SerializationException', 'Could not parse the request body as a JSON object.');
}

export function createOp(emu, ctx, body) {
  const b = parseJsonBody(body);
  const { clientToken, ...params } = b;
  const token = clientToken || crypto.randomUUID();
  ctx.entry.clientToken = token;
  const r = emu.idempotent('create', 'interpreters', token, params,
    () => emu.control.create(b, ctx.region, ctx.fault));
  delete r.replayed;
  return [202, r];
}

export function getOp(emu, ctx, id) {
  return [200, emu.control.get(id).detail(ctx.region)];
}

export function deleteOp(emu, ctx, id, query) {
  const token = query.get('clientToken') || crypto.randomUUID();
  ctx.entry.clientToken = token;
  const it = emu.control.get(id);
  const r = emu.idempotent('delete', it.id, token, {}, () => emu.control.delete(it.id));
  delete r.replayed;
  return [202, r];
}

export function listOp(emu, ctx, query) {
  const type = query.get('type') || undefined;
  if (type !== undefined && type !== 'SYSTEM' && type !== 'CUSTOM') {
    throw validation(`1 validation error detected: Value '${type}' at 'type' failed to satisfy constraint: Member must satisfy enum value set: [SYSTEM, CUSTOM]`, 'FieldValidationFailed');
  }
  const max = query.get('maxResults') === null ? 10 : Number(query.get('maxResults'));
  if (!Number.isInteger(max) || max < 1 || max > 100) {
    throw validation(`1 validation error detected: Value '${query.get('maxResults')}' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100`, 'FieldValidationFailed');
  }
  const all = emu.control.list(type);
  let offset = 0;
  if (query.get('nextToken') !== null) {
    offset = Number(Buffer.from(query.get('nextToken'), 'base64').toString('utf8'));
    if (!Number.isInteger(offset) || offset < 0) throw validation('Invalid nextToken.', 'FieldValidationFailed');
  }
  const out = { codeInterpreterSummaries: all.slice(offset, offset + max).map((i) => i.summary(ctx.region)) };
  if (offset + max < all.length) out.nextToken = Buffer.from(String(offset + max)).toString('base64');
  return [200, out];
}
