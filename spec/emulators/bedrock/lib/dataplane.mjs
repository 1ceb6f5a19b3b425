// Data plane (bedrock-agentcore, docs/protocols/bedrock.md §1): Start, Invoke (an event stream
// of `result` events), Stop, Get and List code-interpreter sessions.
import { Session } from './session.mjs';
import { TOOLS } from './tools.mjs';
import { AwsError, validation, notFound, MODELED } from './errors.mjs';
import { resultFrame, exceptionFrame, errorFrame, corruptCrc } from './eventstream.mjs';
import { iso, ulid, uuid, sleep, send } from './util.mjs';

const MAX_TIMEOUT = 28800;

function json(body) {
  if (body.length === 0) return {};
  try {
    const v = JSON.parse(body.toString('utf8'));
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not an object');
    return v;
  } catch {
    throw new AwsError('SerializationException', 'Could not parse the request body as a JSON object.');
  }
}

function readyInterpreter(emu, identifier) {
  const it = emu.control.find(identifier);
  if (!it || it.status === 'DELETED' || it.status === 'DELETING') throw notFound(`Code interpreter ${identifier} not found.`);
  if (it.status !== 'READY') {
    throw new AwsError('ConflictException', `Code interpreter ${it.id} is not ready (status ${it.status}).`);
  }
  return it;
}

// The session a request names, on the interpreter of its path.
function sessionOf(emu, identifier, sessionId, { live = true } = {}) {
  if (typeof sessionId !== 'string' || sessionId === '') {
    throw validation("1 validation error detected: Value at 'sessionId' failed to satisfy constraint: Member must not be null", 'FieldValidationFailed', [{ name: 'sessionId', message: 'Member must not be null' }]);
  }
  const it = emu.control.find(identifier);
  const s = emu.sessions.get(sessionId);
  if (!it || !s || s.interpreter !== it) throw notFound(`Session ${sessionId} not found for code interpreter ${identifier}.`);
  if (live && s.status !== 'READY') throw notFound(`Session ${sessionId} is not active (status ${s.status}).`);
  return s;
}

export function start(emu, ctx, identifier, body) {
  const b = json(body);
  const it = readyInterpreter(emu, identifier);
  let timeout = 900;
  if (b.sessionTimeoutSeconds !== undefined) {
    timeout = b.sessionTimeoutSeconds;
    if (!Number.isInteger(timeout) || timeout < 1 || timeout > MAX_TIMEOUT) {
      throw validation(`1 validation error detected: Value '${timeout}' at 'sessionTimeoutSeconds' failed to satisfy constraint: Member must have value less than or equal to ${MAX_TIMEOUT}`,
        'FieldValidationFailed', [{ name: 'sessionTimeoutSeconds', message: `Member must be between 1 and ${MAX_TIMEOUT}` }]);
    }
  }
  if (b.name !== undefined && (typeof b.name !== 'string' || b.name.length < 1 || b.name.length > 100)) {
    throw validation("1 validation error detected: Value at 'name' failed to satisfy constraint: Member must have length between 1 and 100", 'FieldValidationFailed', [{ name: 'name', message: 'Member must have length between 1 and 100' }]);
  }
  const token = b.clientToken || uuid();
  ctx.entry.clientToken = token;
  const params = { name: b.name, timeout, certificates: b.certificates, fs: b.filesystemConfigurations };
  return emu.idempotent('start', it.id, token, params, () => {
    if (emu.maxSessions > 0 && emu.liveSessions().length >= emu.maxSessions) {
      throw new AwsError('ServiceQuotaExceededException', `You have reached the maximum number of active sessions (${emu.maxSessions}) for this account.`);
    }
    const s = new Session(emu, { id: ulid(), interpreter: it, name: b.name, timeoutSeconds: timeout, region: ctx.region });
    emu.sessions.set(s.id, s);
    emu.log(`session ${s.id} started on ${it.id} (timeout ${timeout}s)`);
    return { codeInterpreterIdentifier: it.id, sessionId: s.id, createdAt: iso(s.createdAt) };
  });
}

export function stop(emu, ctx, identifier, query, body) {
  const b = json(body);
  const s = sessionOf(emu, identifier, query.get('sessionId'), { live: false });
  const token = b.clientToken || uuid();
  ctx.entry.clientToken = token;
  ctx.entry.sessionId = s.id;
  // Stopping a stopped session answers like the first stop did (the operation is idempotent).
  emu.terminate(s, 'stopped');
  const r = emu.idempotent('stop', s.id, token, {}, () => ({
    codeInterpreterIdentifier: s.interpreter.id, sessionId: s.id, lastUpdatedAt: iso(s.lastUpdatedAt),
  }));
  delete r.replayed;
  return r;
}

export function get(emu, ctx, identifier, query) {
  const s = sessionOf(emu, identifier, query.get('sessionId'), { live: false });
  ctx.entry.sessionId = s.id;
  return s.detail();
}

export function list(emu, ctx, identifier, body) {
  const b = json(body);
  const it = emu.control.find(identifier);
  if (!it) throw notFound(`Code interpreter ${identifier} not found.`);
  const max = b.maxResults === undefined ? 10 : b.maxResults;
  if (!Number.isInteger(max) || max < 1 || max > 100) {
    throw validation(`1 validation error detected: Value '${max}' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100`, 'FieldValidationFailed', [{ name: 'maxResults', message: 'Member must be between 1 and 100' }]);
  }
  if (b.status !== undefined && b.status !== 'READY' && b.status !== 'TERMINATED') {
    throw validation(`1 validation error detected: Value '${b.status}' at 'status' failed to satisfy constraint: Member must satisfy enum value set: [READY, TERMINATED]`, 'FieldValidationFailed');
  }
  const all = [...emu.sessions.values()].filter((s) => s.interpreter === it && (b.status === undefined || s.status === b.status));
  all.sort((a, c) => c.createdAt - a.createdAt || (a.id < c.id ? 1 : -1));
  let offset = 0;
  if (b.nextToken !== undefined) {
    offset = Number(Buffer.from(String(b.nextToken), 'base64').toString('utf8'));
    if (!Number.isInteger(offset) || offset < 0) throw validation('Invalid nextToken.', 'FieldValidationFailed');
  }
  const page = all.slice(offset, offset + max);
  const out = { items: page.map((s) => s.summary()) };
  if (offset + max < all.length) out.nextToken = Buffer.from(String(offset + max)).toString('base64');
  return out;
}

// InvokeCodeInterpreter: headers go out at once (200, the session id), then one `result` event
// when the tool is done. Faults act on the stream (see faults.mjs).
export async function invoke(emu, ctx, identifier, req, res, body) {
  const b = json(body);
  const s = sessionOf(emu, identifier, req.headers['x-amzn-code-interpreter-session-id']);
  ctx.entry.sessionId = s.id;
  if (typeof b.name !== 'string') {
    throw validation("1 validation error detected: Value at 'name' failed to satisfy constraint: Member must not be null", 'FieldValidationFailed', [{ name: 'name', message: 'Member must not be null' }]);
  }
  const tool = TOOLS[b.name];
  if (!tool) {
    throw validation(`1 validation error detected: Value '${b.name}' at 'name' failed to satisfy constraint: Member must satisfy enum value set: [${Object.keys(TOOLS).join(', ')}]`,
      'FieldValidationFailed', [{ name: 'name', message: 'Member must satisfy enum value set' }]);
  }
  ctx.entry.tool = b.name;
  const fault = ctx.takeFault({ tool: b.name, sessionId: s.id });
  if (fault) await ctx.applyCommonFault(fault, s);
  if (res.destroyed) return;
  if (fault && fault.action === 'error') return ctx.sendFaultError(fault);
  const args = b.arguments && typeof b.arguments === 'object' ? b.arguments : {};
  // for the request log: what an executeCode asked for (tests check what reached the wire)
  if (b.name === 'executeCode') {
    if (typeof args.language === 'string') ctx.entry.language = args.language;
    if (typeof args.code === 'string') ctx.entry.code = args.code.length > 4096 ? `${args.code.slice(0, 4096)}...` : args.code;
  }

  const ticket = {};
  let result;
  let failure;
  const refused = fault && /^stream_/.test(fault.action) && !fault.afterResult;
  const run = (s.status === 'READY' && !refused)
    ? tool(s, args, ticket).then((r) => { result = r; }, (e) => { failure = e; })
    : Promise.resolve();
  await new Promise((r) => setImmediate(r)); // argument errors come back before the stream opens
  if (failure instanceof AwsError) throw failure;
  if (s.status !== 'READY') {
    // the microVM is gone
    throw notFound(`Session ${s.id} is not active (status ${s.status}).`);
  }

  const cutAfterExecute = fault && fault.action === 'cut_after_execute';
  if (!cutAfterExecute) {
    res.writeHead(200, {
      'Content-Type': 'application/vnd.amazon.eventstream',
      'x-amzn-code-interpreter-session-id': s.id,
      'x-amzn-requestid': res.requestId,
      Date: new Date().toUTCString(),
    });
    res.flushHeaders();
  }
  s.active.add(res);
  let finished = false;
  res.on('close', () => {
    s.active.delete(res);
    if (!finished) {
      // The caller went away: interrupt what it started, skip it if it did not start yet.
      ticket.cancelled = true;
      if (ticket.interrupt) ticket.interrupt();
    }
  });

  const exception = () => exceptionFrame(fault.error, fault.message || defaultMessage(fault.error),
    fault.error === 'ValidationException' ? { reason: 'FieldValidationFailed' } : {});
  if (fault && fault.action === 'stream_exception' && !fault.afterResult) {
    finished = true;
    res.end(exception());
    return;
  }
  if (fault && fault.action === 'stream_error' && !fault.afterResult) {
    finished = true;
    res.end(errorFrame(fault.code || 'InternalFailure', fault.message || 'An internal error occurred.'));
    return;
  }
  await run;
  if (res.destroyed || res.writableEnded) return;
  if (failure) {
    // a failure while running the tool (after the headers): an in-stream exception
    finished = true;
    const type = failure instanceof AwsError && MODELED[failure.type] ? failure.type : 'InternalServerException';
    res.end(exceptionFrame(type, failure.message || String(failure), failure.extra || {}));
    return;
  }
  if (result === null || result === undefined) {
    // the session ended under the call
    res.socket?.destroy();
    return;
  }
  finished = true;
  if (cutAfterExecute) { res.socket?.destroy(); return; }
  if (fault && fault.action === 'content') {
    // the service's other content blocks in place of the emulator's: the text blocks stay
    result = { ...result, content: [...(result.content || []).filter((c) => c.type === 'text'), ...fault.content] };
  }
  let frame = resultFrame(result);
  if (fault && fault.action === 'corrupt_crc') frame = corruptCrc(frame);
  if (fault && fault.action === 'cut_mid_stream') {
    const n = Number.isInteger(fault.bytes) ? Math.min(fault.bytes, frame.length - 1) : Math.floor(frame.length / 2);
    res.write(frame.subarray(0, n), () => res.socket?.destroy());
    return;
  }
  if (fault && fault.action === 'slow_stream') {
    const half = Math.floor(frame.length / 2);
    res.write(frame.subarray(0, half));
    await sleep(fault.delayMs || 500);
    if (res.destroyed) return;
    res.end(frame.subarray(half));
    return;
  }
  if (fault && fault.afterResult) {
    // the tool ran and its result went out; then the stream fails
    res.write(frame);
    res.end(fault.action === 'stream_exception' ? exception() : errorFrame(fault.code || 'InternalFailure', fault.message || 'An internal error occurred.'));
    return;
  }
  res.end(frame);
}

function defaultMessage(type) {
  return {
    ThrottlingException: 'Rate exceeded',
    InternalServerException: 'An internal server error occurred. Retry your request.',
    ValidationException: 'The input fails to satisfy the constraints specified by the service.',
    AccessDeniedException: 'User is not authorized to perform this action.',
    ResourceNotFoundException: 'The resource was not found.',
    ConflictException: 'The request conflicts with the current state of the resource.',
    ServiceQuotaExceededException: 'Service quota exceeded.',
  }[type] || 'error';
}
export { defaultMessage };

export function sendResult(res, obj) {
  send(res, 200, JSON.stringify(obj), { 'Content-Type': 'application/json' });
}
