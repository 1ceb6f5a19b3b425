// Conformance: AWS's official JS SDK clients for AgentCore (@aws-sdk/client-bedrock-agentcore,
// @aws-sdk/client-bedrock-agentcore-control; versions pinned in spec/package.json) against glsb's
// AgentCore emulator, with an endpoint override and the AWS documentation credentials. What the
// SDK signs, the emulator verifies with @smithy/signature-v4; what the emulator streams, the SDK
// decodes with its own event-stream codec. A scenario the SDK rejects is an emulator bug.
//
//   cd spec && npm ci && node --test conformance/bedrock.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  BedrockAgentCoreClient, StartCodeInterpreterSessionCommand, InvokeCodeInterpreterCommand,
  StopCodeInterpreterSessionCommand, GetCodeInterpreterSessionCommand, ListCodeInterpreterSessionsCommand,
  ThrottlingException, ResourceNotFoundException, ValidationException, InternalServerException,
  BedrockAgentCoreServiceException,
} from '@aws-sdk/client-bedrock-agentcore';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@aws-crypto/sha256-js';
import {
  BedrockAgentCoreControlClient, CreateCodeInterpreterCommand, GetCodeInterpreterCommand,
  DeleteCodeInterpreterCommand, ListCodeInterpretersCommand, ConflictException,
  ValidationException as ControlValidationException,
} from '@aws-sdk/client-bedrock-agentcore-control';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CREDS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' };
const SYSTEM = 'aws.codeinterpreter.v1';

for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_REGION',
  'AWS_DEFAULT_REGION', 'AWS_ENDPOINT_URL', 'AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE']) delete process.env[k];
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true'; // node 20 here: the SDK's notice about 2027

let emu = null;
let base = null;
let dp = null;
let cp = null;

async function startEmulator(extra = []) {
  const child = spawn(path.join(ROOT, 'scripts', 'emulator'), ['bedrock', '--port', '0', '--exit-with-parent', '--create-delay-ms', '200', ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const first = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    const t = setTimeout(() => reject(new Error(`emulator did not start in 10 s: ${stderr}`)), 10000);
    rl.once('line', (line) => { clearTimeout(t); rl.close(); resolve(line); });
    child.once('exit', (code) => { clearTimeout(t); reject(new Error(`emulator exited (${code}): ${stderr}`)); });
  });
  const m = /^listening (http:\/\/\S+)$/.exec(first);
  if (!m) throw new Error(`unexpected first line from the emulator: ${first}`);
  return { child, url: m[1] };
}

async function adminJson(method, p, body) {
  const res = await fetch(base + p, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${p} -> ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}
const fault = (spec) => adminJson('POST', '/_emulator/faults', spec);
const state = () => adminJson('GET', '/_emulator/state');
const requests = (since = 0) => adminJson('GET', `/_emulator/requests?since=${since}`);
const lastSeq = async () => { const r = await requests(); return r.length ? r[r.length - 1].seq : 0; };

function clients(credentials = CREDS, extra = {}) {
  const conf = { region: 'us-west-2', endpoint: base, credentials, ...extra };
  return { dp: new BedrockAgentCoreClient(conf), cp: new BedrockAgentCoreControlClient(conf) };
}

async function startSession(extra = {}, client = dp) {
  return client.send(new StartCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, name: 'conformance', ...extra }));
}

async function invoke(sessionId, name, args, client = dp, identifier = SYSTEM) {
  const r = await client.send(new InvokeCodeInterpreterCommand({ codeInterpreterIdentifier: identifier, sessionId, name, arguments: args }));
  const events = [];
  for await (const ev of r.stream) events.push(ev);
  return { response: r, events, result: events.find((e) => e.result)?.result };
}

async function withSession(fn, extra = {}) {
  const s = await startSession(extra);
  try {
    return await fn(s.sessionId);
  } finally {
    await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId })).catch(() => {});
  }
}

before(async () => {
  emu = await startEmulator();
  base = emu.url;
  ({ dp, cp } = clients());
});

after(async () => {
  if (!emu) return;
  const exited = new Promise((r) => emu.child.once('exit', r));
  emu.child.kill('SIGTERM');
  await exited;
});

test('start, get, stop a session; the SDK signs every request and the emulator verifies it', async () => {
  const since = await lastSeq();
  const s = await startSession({ sessionTimeoutSeconds: 120 });
  assert.equal(s.codeInterpreterIdentifier, SYSTEM);
  assert.match(s.sessionId, /^[0-9A-Z]{26}$/);
  assert.ok(s.createdAt instanceof Date && Math.abs(s.createdAt.getTime() - Date.now()) < 60000);
  const g = await dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
  assert.equal(g.status, 'READY');
  assert.equal(g.name, 'conformance');
  assert.equal(g.sessionTimeoutSeconds, 120);
  const st = await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
  assert.equal(st.sessionId, s.sessionId);
  assert.ok(st.lastUpdatedAt instanceof Date);
  const g2 = await dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
  assert.equal(g2.status, 'TERMINATED');
  // What went over the wire: signed by the SDK, accepted; the SDK leaves only user-agent unsigned.
  const log = await requests(since);
  assert.deepEqual(log.map((r) => r.op), ['StartCodeInterpreterSession', 'GetCodeInterpreterSession', 'StopCodeInterpreterSession', 'GetCodeInterpreterSession']);
  for (const r of log) {
    assert.equal(r.status, 200);
    assert.equal(r.authError, undefined);
    assert.equal(r.region, 'us-west-2');
    for (const h of ['host', 'x-amz-date', 'x-amz-content-sha256', 'amz-sdk-invocation-id', 'amz-sdk-request']) assert.ok(r.signedHeaders.includes(h), `${h} signed`);
    assert.deepEqual(r.unsignedHeaders.filter((h) => !['user-agent', 'connection'].includes(h)), [], r.op);
  }
  // Start and Stop carry a clientToken the SDK generated (a UUID).
  assert.match(log[0].clientToken, /^[0-9a-f-]{36}$/);
  assert.match(log[2].clientToken, /^[0-9a-f-]{36}$/);
});

test('a session token is signed as X-Amz-Security-Token and accepted', async () => {
  const c = clients({ ...CREDS, sessionToken: 'AQoDYXdzEPT//////////wEXAMPLEtoken' }).dp;
  const since = await lastSeq();
  const s = await startSession({}, c);
  await c.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
  const log = await requests(since);
  assert.ok(log.every((r) => r.signedHeaders.includes('x-amz-security-token') && r.sessionToken === true));
});

test('requests from another signer are rejected as AWS does (403, x-amzn-errortype)', async () => {
  const wrongSecret = clients({ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'not-the-secret' }, { maxAttempts: 1 }).dp;
  await assert.rejects(startSession({}, wrongSecret), (e) => {
    assert.equal(e.name, 'InvalidSignatureException');
    assert.equal(e.$metadata.httpStatusCode, 403);
    assert.match(e.message, /^The request signature we calculated does not match the signature you provided/);
    return true;
  });
  const unknownKey = clients({ accessKeyId: 'AKIAUNKNOWN', secretAccessKey: 'x' }, { maxAttempts: 1 }).dp;
  await assert.rejects(startSession({}, unknownKey), (e) => {
    assert.equal(e.name, 'UnrecognizedClientException');
    assert.equal(e.$metadata.httpStatusCode, 403);
    assert.equal(e.message, 'The security token included in the request is invalid.');
    return true;
  });
  // A plain unsigned request.
  const res = await fetch(`${base}/code-interpreters/${SYSTEM}/sessions/start`, { method: 'PUT', body: '{}', headers: { 'Content-Type': 'application/json' } });
  assert.equal(res.status, 403);
  assert.match(res.headers.get('x-amzn-errortype'), /^MissingAuthenticationTokenException:/);
  assert.ok(res.headers.get('x-amzn-requestid'));
  assert.deepEqual(await res.json(), { message: 'Missing Authentication Token' });
  // A correctly signed request whose body was changed afterwards: the payload hash gives it away.
  const signer = new SignatureV4({ credentials: CREDS, region: 'us-west-2', service: 'bedrock-agentcore', sha256: Sha256 });
  const u = new URL(base);
  const signed = await signer.sign({
    method: 'PUT', protocol: 'http:', hostname: u.hostname, port: Number(u.port), path: `/code-interpreters/${SYSTEM}/sessions/start`,
    query: {}, headers: { host: u.host, 'content-type': 'application/json' }, body: '{"name":"a"}',
  });
  const tampered = await fetch(`${base}/code-interpreters/${SYSTEM}/sessions/start`, { method: 'PUT', headers: signed.headers, body: '{"name":"b"}' });
  assert.equal(tampered.status, 403);
  assert.match(tampered.headers.get('x-amzn-errortype'), /^InvalidSignatureException:/);
  const ok = await fetch(`${base}/code-interpreters/${SYSTEM}/sessions/start`, { method: 'PUT', headers: signed.headers, body: '{"name":"a"}' });
  assert.equal(ok.status, 200, await ok.clone().text());
  const okSession = await ok.json();
  await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: okSession.sessionId }));
  const st = await state();
  assert.equal(st.sessions.filter((s) => s.status === 'READY').length, 0, 'no session was started by a rejected request');
});

test('the same clientToken starts one session; other parameters with it are refused', async () => {
  const token = 'glsb-conformance-token-0000000000001';
  const a = await startSession({ clientToken: token });
  const b = await startSession({ clientToken: token });
  assert.equal(b.sessionId, a.sessionId);
  await assert.rejects(startSession({ clientToken: token, sessionTimeoutSeconds: 60 }), (e) => {
    assert.ok(e instanceof ValidationException, e.name);
    assert.equal(e.reason, 'IdempotentParameterMismatchException');
    return true;
  });
  await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: a.sessionId }));
});

test('executeCode keeps state in one python process; clearContext starts afresh; errors are isError', async () => {
  await withSession(async (id) => {
    const one = await invoke(id, 'executeCode', { code: 'import os\nx = 20\nprint(os.getpid())', language: 'python' });
    assert.equal(one.response.sessionId, id, 'x-amzn-code-interpreter-session-id comes back');
    assert.equal(one.events.length, 1);
    assert.equal(one.result.isError, false);
    const pid = one.result.structuredContent.stdout.trim();
    const two = await invoke(id, 'executeCode', { code: 'import os, sys\nprint(x * 2 + 2, os.getpid(), sys.executable)', language: 'python' });
    assert.equal(two.result.structuredContent.stdout, `42 ${pid} /usr/bin/python3\n`);
    assert.equal(two.result.structuredContent.exitCode, 0);
    assert.equal(two.result.content[0].type, 'text');
    assert.equal(two.result.content[0].text, `42 ${pid} /usr/bin/python3\n`);
    const bad = await invoke(id, 'executeCode', { code: "print('before')\nraise ValueError('bad value 7')" });
    assert.equal(bad.result.isError, true);
    assert.equal(bad.result.structuredContent.stdout, 'before\n');
    assert.match(bad.result.structuredContent.stderr, /ValueError: bad value 7/);
    assert.equal(bad.result.structuredContent.exitCode, 1);
    const kept = await invoke(id, 'executeCode', { code: 'print(x)' });
    assert.equal(kept.result.structuredContent.stdout, '20\n');
    const cleared = await invoke(id, 'executeCode', { code: 'print(x)', clearContext: true });
    assert.equal(cleared.result.isError, true);
    assert.match(cleared.result.structuredContent.stderr, /NameError/);
    // Output of child processes is captured too.
    const sub = await invoke(id, 'executeCode', { code: "import subprocess\nsubprocess.run(['echo', 'from child'])" });
    assert.equal(sub.result.structuredContent.stdout, 'from child\n');
  });
});

const HAS_MATPLOTLIB = spawnSync('/usr/bin/python3', ['-c', 'import matplotlib']).status === 0;

test('a figure left open at the end of executeCode is an image content block the SDK decodes to PNG bytes',
  { skip: HAS_MATPLOTLIB ? false : 'needs python3-matplotlib (scripts/install-deps)' }, async () => {
  await withSession(async (id) => {
    const r = await invoke(id, 'executeCode', { code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint("drawn")' });
    assert.equal(r.result.isError, false);
    assert.equal(r.result.content[0].type, 'text');
    assert.equal(r.result.content[0].text, 'drawn\n');
    const img = r.result.content[1];
    assert.equal(img.type, 'image');
    assert.equal(img.mimeType, 'image/png');
    assert.ok(img.data instanceof Uint8Array);
    assert.equal(Buffer.from(img.data).subarray(0, 8).toString('latin1'), '\x89PNG\r\n\x1a\n');
    // the figure was closed: the next run shows nothing
    const next = await invoke(id, 'executeCode', { code: 'print(1)' });
    assert.equal(next.result.content.length, 1);
  });
});

test('a caller that goes away interrupts its code; the session and its state live on', async () => {
  await withSession(async (id) => {
    await invoke(id, 'executeCode', { code: 'kept = "yes"' });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    await assert.rejects(dp.send(new InvokeCodeInterpreterCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: id, name: 'executeCode',
      arguments: { code: 'import time\nwhile True:\n    time.sleep(0.05)' } }), { abortSignal: ac.signal }));
    const t0 = Date.now();
    const r = await invoke(id, 'executeCode', { code: 'print(kept)' });
    assert.equal(r.result.structuredContent.stdout, 'yes\n');
    assert.ok(Date.now() - t0 < 3000, 'the interrupted code does not hold the interpreter');
  });
});

test('executeCommand, the file tools and listFiles', async () => {
  await withSession(async (id) => {
    const cmd = await invoke(id, 'executeCommand', { command: 'echo out; echo err >&2; pwd; exit 3' });
    assert.equal(cmd.result.isError, true);
    assert.deepEqual(
      { stdout: cmd.result.structuredContent.stdout, stderr: cmd.result.structuredContent.stderr, exitCode: cmd.result.structuredContent.exitCode },
      { stdout: 'out\n/opt/amazon/genesis1p-tools/var\n', stderr: 'err\n', exitCode: 3 });
    const bin = Buffer.from([0, 1, 2, 255, 254, 10]);
    const w = await invoke(id, 'writeFiles', { content: [{ path: 'dir/a.txt', text: 'hello é' }, { path: 'b.bin', blob: bin }] });
    assert.equal(w.result.isError ?? false, false, JSON.stringify(w.result));
    const r = await invoke(id, 'readFiles', { paths: ['dir/a.txt', 'b.bin'] });
    const [a, b] = r.result.content;
    assert.equal(a.type, 'resource');
    assert.equal(a.resource.text, 'hello é');
    assert.equal(a.resource.uri, 'file:///opt/amazon/genesis1p-tools/var/dir/a.txt');
    assert.equal(b.resource.type, 'blob');
    assert.deepEqual(Buffer.from(b.resource.blob), bin, 'the SDK decodes blobs from base64');
    const seen = await invoke(id, 'executeCode', { code: "print(open('dir/a.txt').read())" });
    assert.equal(seen.result.structuredContent.stdout, 'hello é\n', 'file tools and code see the same files');
    const ls = await invoke(id, 'listFiles', { directoryPath: '' });
    const names = ls.result.content.map((c) => `${c.type}:${c.name}:${c.description}`).sort();
    assert.deepEqual(names, ['resource_link:b.bin:File', 'resource_link:dir:Directory']);
    assert.equal(ls.result.content.find((c) => c.name === 'b.bin').size, 6);
    const rm = await invoke(id, 'removeFiles', { paths: ['b.bin'] });
    assert.equal(rm.result.isError ?? false, false);
    const missing = await invoke(id, 'readFiles', { paths: ['b.bin'] });
    assert.equal(missing.result.isError, true);
    assert.match(missing.result.content.at(-1).text, /not found/i);
    // absolute paths are sandbox paths
    await invoke(id, 'writeFiles', { content: [{ path: '/tmp/abs.txt', text: 'abs' }] });
    const abs = await invoke(id, 'executeCommand', { command: 'cat /tmp/abs.txt' });
    assert.equal(abs.result.structuredContent.stdout, 'abs');
  });
});

test('startCommandExecution, getTask and stopTask', async () => {
  await withSession(async (id) => {
    const started = await invoke(id, 'startCommandExecution', { command: 'echo begun; sleep 0.3; echo done' });
    const taskId = started.result.structuredContent.taskId;
    assert.ok(taskId);
    assert.equal(started.result.structuredContent.taskStatus, 'working');
    let t;
    for (let i = 0; i < 50; i++) {
      t = (await invoke(id, 'getTask', { taskId })).result.structuredContent;
      if (t.taskStatus !== 'working') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(t.taskStatus, 'completed');
    assert.equal(t.stdout, 'begun\ndone\n');
    assert.equal(t.exitCode, 0);
    const long = await invoke(id, 'startCommandExecution', { command: 'sleep 30' });
    const stopped = await invoke(id, 'stopTask', { taskId: long.result.structuredContent.taskId });
    assert.equal(stopped.result.structuredContent.taskStatus, 'canceled');
  });
});

test('errors inside the stream: an exception as the first frame is thrown from send() and retried; after a result, not', async () => {
  await withSession(async (id) => {
    // The SDK reads the first event inside send(), within its retry loop: a throttlingException
    // frame there is retried like an HTTP 429 (same invocation id), and raised once all 3 failed.
    await fault({ op: 'InvokeCodeInterpreter', tool: 'executeCode', action: 'stream_exception', error: 'ThrottlingException', times: 3 });
    let since = await lastSeq();
    await assert.rejects(invoke(id, 'executeCode', { code: 'open("/tmp/ran", "a").write("x")' }), (e) => {
      assert.ok(e instanceof ThrottlingException, `${e.name}: ${e.message}`);
      assert.equal(e.$fault, 'client');
      assert.equal(e.message, 'Rate exceeded');
      return true;
    });
    let log = await requests(since);
    assert.deepEqual(log.map((r) => r.sdkRequest), ['attempt=1; max=3', 'attempt=2; max=3', 'attempt=3; max=3']);
    assert.equal(new Set(log.map((r) => r.invocationId)).size, 1);
    const ran = await invoke(id, 'executeCommand', { command: 'test -e /tmp/ran && echo yes || echo no' });
    assert.equal(ran.result.structuredContent.stdout, 'no\n', 'the refused calls did not run');
    // After a result event the stream is past send(): the exception reaches the consumer, once.
    await fault({ op: 'InvokeCodeInterpreter', action: 'stream_exception', error: 'InternalServerException', message: 'boom', afterResult: true });
    since = await lastSeq();
    const seen = [];
    await assert.rejects((async () => {
      const r = await dp.send(new InvokeCodeInterpreterCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: id, name: 'executeCode', arguments: { code: 'print(3)' } }));
      for await (const ev of r.stream) seen.push(ev);
    })(), (e) => e instanceof InternalServerException && e.message === 'boom');
    assert.equal(seen.length, 1);
    assert.equal(seen[0].result.structuredContent.stdout, '3\n');
    assert.equal((await requests(since)).length, 1);
    // An unmodeled error frame becomes an Error named after :error-code (not retried).
    await fault({ op: 'InvokeCodeInterpreter', action: 'stream_error', code: 'InternalFailure', message: 'the tool broke' });
    since = await lastSeq();
    await assert.rejects(invoke(id, 'executeCode', { code: '1' }), (e) => e.name === 'InternalFailure' && e.message.startsWith('the tool broke'));
    assert.equal((await requests(since)).length, 1);
    // An unknown tool is refused before the stream opens.
    await assert.rejects(invoke(id, 'frobnicate', {}), (e) => e instanceof ValidationException && e.$metadata.httpStatusCode === 400);
  });
});

test('HTTP throttling and 5xx before the stream are retried by the SDK with one invocation id', async () => {
  await withSession(async (id) => {
    await fault({ op: 'InvokeCodeInterpreter', error: 'ThrottlingException', times: 2 });
    const since = await lastSeq();
    const r = await invoke(id, 'executeCode', { code: 'print(7)' });
    assert.equal(r.result.structuredContent.stdout, '7\n');
    assert.equal(r.response.$metadata.attempts, 3);
    const log = await requests(since);
    assert.deepEqual(log.map((x) => x.status), [429, 429, 200]);
    assert.equal(new Set(log.map((x) => x.invocationId)).size, 1);
    assert.deepEqual(log.map((x) => x.sdkRequest), ['attempt=1; max=3', 'attempt=2; max=3', 'attempt=3; max=3']);
    await fault({ op: 'StartCodeInterpreterSession', error: 'InternalServerException', times: 1 });
    const since2 = await lastSeq();
    const s = await startSession();
    await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
    const log2 = await requests(since2);
    assert.deepEqual(log2.map((x) => x.status), [500, 200, 200]);
    assert.match(log2[0].clientToken, /^[0-9a-f-]{36}$/);
    assert.equal(log2[0].clientToken, log2[1].clientToken, 'one clientToken across retries of one Start');
  });
});

test('a Start whose answer is lost and is retried with its clientToken yields one session', async () => {
  await fault({ op: 'StartCodeInterpreterSession', action: 'cut_after_execute' });
  const before = (await state()).sessions.filter((s) => s.status === 'READY').length;
  const s = await startSession({ clientToken: 'glsb-conformance-lost-answer-00000001' });
  const after = (await state()).sessions.filter((s) => s.status === 'READY');
  assert.equal(after.length, before + 1, 'exactly one session started');
  assert.ok(after.some((x) => x.sessionId === s.sessionId));
  await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
});

test('a broken stream: a bad CRC is an error; a cut inside the first frame is retried by the SDK, so the code runs twice', async () => {
  await withSession(async (id) => {
    await fault({ op: 'InvokeCodeInterpreter', action: 'corrupt_crc' });
    let since = await lastSeq();
    await assert.rejects(invoke(id, 'executeCode', { code: 'print(1)' }), /checksum/i);
    assert.equal((await requests(since)).length, 1, 'a checksum failure is not retried');
    // The request was delivered and ran; the SDK sees a dropped connection inside send() and sends
    // it again. glsb must not do this (an Invoke is retried only when it provably never went out).
    await fault({ op: 'InvokeCodeInterpreter', action: 'cut_mid_stream', bytes: 20 });
    since = await lastSeq();
    const twice = await invoke(id, 'executeCode', { code: 'open("/tmp/count", "a").write("x\\n")\nprint(open("/tmp/count").read().count("x"))' });
    assert.equal(twice.result.structuredContent.stdout, '2\n');
    assert.equal((await requests(since)).length, 2);
    // A slow stream (a frame split over two writes) still decodes.
    await fault({ op: 'InvokeCodeInterpreter', action: 'slow_stream', delayMs: 300 });
    const t0 = Date.now();
    const slow = await invoke(id, 'executeCode', { code: 'print(5)' });
    assert.equal(slow.result.structuredContent.stdout, '5\n');
    assert.ok(Date.now() - t0 >= 280);
  });
});

test('sessions end at their timeout; a lost session is gone', async () => {
  const s = await startSession({ sessionTimeoutSeconds: 1 });
  await new Promise((r) => setTimeout(r, 1300));
  const g = await dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: s.sessionId }));
  assert.equal(g.status, 'TERMINATED');
  await assert.rejects(invoke(s.sessionId, 'executeCode', { code: '1' }), (e) => e instanceof ResourceNotFoundException);
  await withSession(async (id) => {
    await fault({ op: 'InvokeCodeInterpreter', action: 'lose_session', afterMs: 200 });
    await assert.rejects(invoke(id, 'executeCode', { code: 'import time\ntime.sleep(5)' }));
    const g2 = await dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: id }));
    assert.equal(g2.status, 'TERMINATED');
  });
});

test('ListCodeInterpreterSessions pages through the sessions of an interpreter', async () => {
  const started = [];
  for (let i = 0; i < 3; i++) started.push((await startSession({ name: `list-${i}` })).sessionId);
  const seen = [];
  let nextToken;
  let pages = 0;
  do {
    const page = await dp.send(new ListCodeInterpreterSessionsCommand({ codeInterpreterIdentifier: SYSTEM, maxResults: 2, status: 'READY', nextToken }));
    for (const it of page.items) {
      assert.equal(it.status, 'READY');
      assert.ok(it.createdAt instanceof Date);
      seen.push(it.sessionId);
    }
    nextToken = page.nextToken;
    pages++;
  } while (nextToken);
  assert.ok(pages >= 2);
  for (const id of started) assert.ok(seen.includes(id));
  for (const id of started) await dp.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: id }));
});

test('custom interpreters: create (CREATING -> READY), get, list, run a session on it, delete', async () => {
  const name = `glsb_conformance_${Date.now()}`;
  const c = await cp.send(new CreateCodeInterpreterCommand({ name, networkConfiguration: { networkMode: 'PUBLIC' }, description: 'conformance' }));
  assert.equal(c.$metadata.httpStatusCode, 202);
  assert.equal(c.status, 'CREATING');
  assert.match(c.codeInterpreterId, new RegExp(`^${name}-[a-zA-Z0-9]{10}$`));
  assert.match(c.codeInterpreterArn, /^arn:aws:bedrock-agentcore:us-west-2:\d{12}:code-interpreter-custom\//);
  await assert.rejects(cp.send(new CreateCodeInterpreterCommand({ name, networkConfiguration: { networkMode: 'PUBLIC' } })), (e) => e instanceof ConflictException);
  let g;
  for (let i = 0; i < 50; i++) {
    g = await cp.send(new GetCodeInterpreterCommand({ codeInterpreterId: c.codeInterpreterId }));
    if (g.status !== 'CREATING') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(g.status, 'READY');
  assert.equal(g.name, name);
  assert.deepEqual(g.networkConfiguration, { networkMode: 'PUBLIC' });
  assert.equal(g.description, 'conformance');
  const listed = await cp.send(new ListCodeInterpretersCommand({ type: 'CUSTOM', maxResults: 100 }));
  assert.ok(listed.codeInterpreterSummaries.some((x) => x.codeInterpreterId === c.codeInterpreterId));
  const system = await cp.send(new ListCodeInterpretersCommand({ type: 'SYSTEM' }));
  assert.deepEqual(system.codeInterpreterSummaries.map((x) => x.codeInterpreterId), [SYSTEM]);
  const s = await dp.send(new StartCodeInterpreterSessionCommand({ codeInterpreterIdentifier: c.codeInterpreterId }));
  const r = await invoke(s.sessionId, 'executeCode', { code: 'print(6*7)' }, dp, c.codeInterpreterId);
  assert.equal(r.result.structuredContent.stdout, '42\n');
  // the same session id on another interpreter is not found
  await assert.rejects(invoke(s.sessionId, 'executeCode', { code: '1' }), (e) => e instanceof ResourceNotFoundException);
  const d = await cp.send(new DeleteCodeInterpreterCommand({ codeInterpreterId: c.codeInterpreterId }));
  assert.equal(d.$metadata.httpStatusCode, 202);
  assert.equal(d.status, 'DELETING');
  const gs = await dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: c.codeInterpreterId, sessionId: s.sessionId }));
  assert.equal(gs.status, 'TERMINATED', 'deleting the interpreter ends its sessions');
  await new Promise((r) => setTimeout(r, 400));
  await assert.rejects(cp.send(new GetCodeInterpreterCommand({ codeInterpreterId: c.codeInterpreterId })), (e) => e.name === 'ResourceNotFoundException');
});

test('a custom interpreter that fails to build is CREATE_FAILED with a reason; bad input is a ValidationException', async () => {
  await fault({ op: 'CreateCodeInterpreter', action: 'create_failed', failureReason: 'role cannot be assumed' });
  const c = await cp.send(new CreateCodeInterpreterCommand({ name: `glsb_fail_${Date.now()}`, networkConfiguration: { networkMode: 'SANDBOX' } }));
  let g;
  for (let i = 0; i < 50; i++) {
    g = await cp.send(new GetCodeInterpreterCommand({ codeInterpreterId: c.codeInterpreterId }));
    if (g.status !== 'CREATING') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.equal(g.status, 'CREATE_FAILED');
  assert.equal(g.failureReason, 'role cannot be assumed');
  await assert.rejects(dp.send(new StartCodeInterpreterSessionCommand({ codeInterpreterIdentifier: c.codeInterpreterId })), (e) => e.name === 'ConflictException');
  await cp.send(new DeleteCodeInterpreterCommand({ codeInterpreterId: c.codeInterpreterId }));
  await assert.rejects(cp.send(new CreateCodeInterpreterCommand({ name: '1-bad name', networkConfiguration: { networkMode: 'PUBLIC' } })),
    (e) => e instanceof ControlValidationException && e.reason === 'FieldValidationFailed' && e.fieldList[0].name === 'name');
});

test('a modeled error keeps its type and fields through the SDK; nothing is left running', async () => {
  await assert.rejects(dp.send(new GetCodeInterpreterSessionCommand({ codeInterpreterIdentifier: SYSTEM, sessionId: 'NOSUCHSESSION' })), (e) => {
    assert.ok(e instanceof ResourceNotFoundException);
    assert.ok(e instanceof BedrockAgentCoreServiceException);
    assert.equal(e.$metadata.httpStatusCode, 404);
    return true;
  });
  const st = await state();
  assert.deepEqual(st.sessions.filter((s) => s.status === 'READY').map((s) => s.sessionId), []);
  let children = st.children;
  for (let i = 0; i < 30 && children > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    children = (await state()).children;
  }
  assert.equal(children, 0, 'no process left behind');
});
