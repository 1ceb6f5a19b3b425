// Conformance: the official OpenSandbox JS SDK (@alibaba-group/opensandbox, pinned in spec/package.json)
// against glsb's OpenSandbox emulator. A scenario the SDK rejects is an emulator bug.
//
//   cd spec && npm ci && node --test conformance/opensandbox.test.mjs
//
// The SDK ships no code-interpreter client (that is a separate package, not on the registry this
// project uses); code runs are driven through the SDK's own execd stream machinery instead: its
// CommandsAdapter posts to /code and parses the stream with the same parseJsonEventStream and
// ExecutionEventDispatcher its code-interpreter clients use.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  Sandbox, SandboxManager, SandboxApiException, SandboxReadyTimeoutException, DEFAULT_EXECD_PORT,
} from '@alibaba-group/opensandbox';
import { CommandsAdapter, createExecdClient } from '@alibaba-group/opensandbox/internal';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const KEY = 'opensandbox_conformance_key';
const IMAGE = 'opensandbox/code-interpreter:v1.0.2';

for (const k of ['OPEN_SANDBOX_DOMAIN', 'OPEN_SANDBOX_API_KEY', 'OPENSANDBOX_DISABLE_METRICS']) delete process.env[k];

let emu = null;
let base = null;
let conn = null;

async function startEmulator(args = []) {
  const child = spawn(path.join(ROOT, 'scripts', 'emulator'),
    ['opensandbox', '--port', '0', '--exit-with-parent', '--api-key', KEY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
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

async function admin(method, p, body) {
  const res = await fetch(base + p, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `${method} ${p} -> ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const fault = (spec) => admin('POST', '/_emulator/faults', spec);
const state = () => admin('GET', '/_emulator/state');
const config = (c) => admin('POST', '/_emulator/config', c);

function create(extra = {}) {
  return Sandbox.create({ connectionConfig: conn, image: IMAGE, timeoutSeconds: 600, ...extra });
}

async function withSandbox(fn, extra = {}) {
  const sbx = await create(extra);
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => {});
    await sbx.close();
  }
}

// Runs code through the SDK's execd stream machinery (see the header).
async function runCode(sbx, code, context) {
  const execdUrl = await sbx.getEndpointUrl(DEFAULT_EXECD_PORT);
  const endpoint = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
  const headers = { ...sbx.connectionConfig.headers, ...(endpoint.headers || {}) };
  const adapter = new CommandsAdapter(createExecdClient({ baseUrl: execdUrl, headers }), { baseUrl: execdUrl, headers, fetch });
  const stream = adapter.streamExecution({ pathname: '/code', body: { code, context }, fallbackErrorMessage: 'Run code failed' });
  return adapter.consumeExecutionStream(stream, undefined, false);
}

async function execdClient(sbx) {
  const endpoint = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
  return createExecdClient({ baseUrl: await sbx.getEndpointUrl(DEFAULT_EXECD_PORT),
    headers: { ...sbx.connectionConfig.headers, ...(endpoint.headers || {}) } });
}

function stdout(execution) {
  return execution.logs.stdout.map((m) => m.text);
}

before(async () => {
  emu = await startEmulator();
  base = emu.url;
  conn = { domain: base, apiKey: KEY, requestTimeoutSeconds: 20 };
});

after(async () => {
  if (!emu) return;
  const exited = new Promise((r) => emu.child.once('exit', r));
  emu.child.kill('SIGTERM');
  await exited;
});

test('the emulator runs sandboxes under bubblewrap (file and command paths agree)', async () => {
  const s = await state();
  assert.equal(s.bwrap, true, 'bubblewrap (bwrap) is missing or cannot create namespaces here: install it (scripts/install-deps)');
});

test('create waits for execd, getInfo/endpoint/health agree, metrics event reported, kill removes it', async () => {
  const sbx = await create({ metadata: { suite: 'conformance' }, env: { GLSB_CREATE_ENV: 'c' } });
  try {
    assert.match(sbx.id, /^[0-9a-f-]{36}$/);
    assert.equal(await sbx.isHealthy(), true);
    const info = await sbx.getInfo();
    assert.equal(info.id, sbx.id);
    assert.equal(info.status.state, 'Running');
    assert.deepEqual(info.metadata, { suite: 'conformance' });
    assert.equal(info.image.uri, IMAGE);
    assert.deepEqual(info.entrypoint, ['tail', '-f', '/dev/null']);
    assert.ok(info.expiresAt.getTime() > Date.now() + 500_000, 'timeout 600 s');
    const ep = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
    assert.equal(ep.headers['OpenSandbox-Ingress-To'], `${sbx.id}-${DEFAULT_EXECD_PORT}`);
    const metrics = (await state()).metricsEvents.filter((e) => e.sandboxId === sbx.id);
    assert.equal(metrics.length, 1);
    assert.equal(metrics[0].eventType, 'sandbox.create');
    assert.equal(metrics[0].success, true);
    const run = await sbx.commands.run('echo $GLSB_CREATE_ENV');
    assert.deepEqual(stdout(run), ['c']);
  } finally {
    await sbx.kill();
    await sbx.close();
  }
  await assert.rejects(SandboxManager.create({ connectionConfig: conn }).getSandboxInfo(sbx.id),
    (e) => e instanceof SandboxApiException && e.statusCode === 404);
  assert.deepEqual((await state()).sandboxes.filter((s) => s.id === sbx.id), []);
});

test('commands: exit 0 and non-zero (exit code from the error event), env, working directory, timeout', async () => {
  await withSandbox(async (sbx) => {
    const seen = [];
    const ok = await sbx.commands.run('echo out; echo err >&2; echo; printf tail', {}, { onStdout: (m) => seen.push(m.text) });
    assert.equal(ok.exitCode, 0);
    assert.ok(ok.complete, 'execution_complete');
    assert.match(ok.id, /^[0-9a-f]{32}$/);
    assert.deepEqual(stdout(ok), ['out', '\n', 'tail']);
    assert.deepEqual(ok.logs.stderr.map((m) => m.text), ['err']);
    assert.deepEqual(seen, ['out', '\n', 'tail']);
    const bad = await sbx.commands.run('echo partial; exit 3');
    assert.equal(bad.exitCode, 3);
    assert.equal(bad.complete, undefined, 'a non-zero exit ends with error and no completion');
    assert.equal(bad.error.name, 'CommandExecError');
    assert.equal(bad.error.value, '3');
    assert.deepEqual(bad.error.traceback, ['exit status 3']);
    const env = await sbx.commands.run('echo "$A-$B" && pwd', { envs: { A: 'x', B: 'y' }, workingDirectory: '/tmp' });
    assert.deepEqual(stdout(env), ['x-y', '/tmp']);
    assert.deepEqual(stdout(await sbx.commands.run('pwd')), ['/workspace'], 'the image WORKDIR');
    await assert.rejects(sbx.commands.run('true', { workingDirectory: '/no/such/dir' }),
      (e) => e instanceof SandboxApiException && e.statusCode === 400 && e.error.code === 'INVALID_REQUEST_BODY');
    const t0 = Date.now();
    const slow = await sbx.commands.run('sleep 30', { timeoutSeconds: 0.5 });
    assert.ok(Date.now() - t0 < 5000);
    assert.equal(slow.exitCode, -1);
    assert.deepEqual(slow.error.traceback, ['signal: killed']);
  });
});

test('background command: status, logs by byte cursor, interrupt', async () => {
  await withSandbox(async (sbx) => {
    const bg = await sbx.commands.run('echo one; echo two >&2; sleep 0.3; echo three', { background: true });
    assert.match(bg.id, /^[0-9a-f]{32}$/);
    assert.ok(bg.complete, 'background: init then an immediate completion');
    assert.equal(bg.exitCode, undefined);
    let st;
    for (let i = 0; i < 50; i++) {
      st = await sbx.commands.getCommandStatus(bg.id);
      if (!st.running) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(st.running, false);
    assert.equal(st.exitCode, 0);
    assert.ok(st.startedAt instanceof Date && st.finishedAt instanceof Date);
    const all = await sbx.commands.getBackgroundCommandLogs(bg.id);
    assert.equal(all.content, 'one\ntwo\nthree\n');
    assert.equal(all.cursor, 14);
    const tail = await sbx.commands.getBackgroundCommandLogs(bg.id, 4);
    assert.equal(tail.content, 'two\nthree\n');
    const none = await sbx.commands.getBackgroundCommandLogs(bg.id, all.cursor);
    assert.equal(none.content, '');
    const long = await sbx.commands.run('sleep 30', { background: true });
    await sbx.commands.interrupt(long.id);
    const killed = await sbx.commands.getCommandStatus(long.id);
    assert.equal(killed.running, false);
    assert.equal(killed.exitCode, -1);
    await assert.rejects(sbx.commands.interrupt(long.id), (e) => e instanceof SandboxApiException && e.statusCode === 500);
    await assert.rejects(sbx.commands.getCommandStatus('0'.repeat(32)), (e) => e instanceof SandboxApiException && e.statusCode === 404);
    const fg = await sbx.commands.run('true');
    await assert.rejects(sbx.commands.getBackgroundCommandLogs(fg.id), (e) => e instanceof SandboxApiException && e.statusCode === 400);
  });
});

test('code: a context keeps state across runs; results, errors, contexts API', async () => {
  await withSandbox(async (sbx) => {
    const first = await runCode(sbx, 'x = 21\nprint("set")', { language: 'python' });
    assert.deepEqual(stdout(first), ['set\n']);
    assert.ok(first.complete);
    const second = await runCode(sbx, 'x * 2', { language: 'python' });
    assert.equal(second.result.length, 1);
    assert.equal(second.result[0].text, '42');
    assert.ok(second.executionCount >= 2);
    assert.equal(second.id, first.id, 'the default python context');
    const err = await runCode(sbx, 'print("before")\n1/0', { language: 'python' });
    assert.equal(err.error.name, 'ZeroDivisionError');
    assert.equal(err.error.value, 'division by zero');
    assert.ok(err.error.traceback.some((l) => l.includes('ZeroDivisionError')));
    assert.deepEqual(stdout(err), ['before\n']);
    assert.ok(err.complete, 'execd sends execution_complete after an error from the kernel');

    const client = await execdClient(sbx);
    const made = await client.POST('/code/context', { body: { language: 'python' } });
    assert.equal(made.response.status, 200);
    const ctx = made.data;
    assert.match(ctx.id, /^[0-9a-f]{32}$/);
    assert.equal(ctx.language, 'python');
    await runCode(sbx, 'only_here = 7', { id: ctx.id, language: 'python' });
    assert.equal((await runCode(sbx, 'only_here', { id: ctx.id, language: 'python' })).result[0].text, '7');
    assert.equal((await runCode(sbx, 'only_here', { language: 'python' })).error.name, 'NameError');
    const listed = await client.GET('/code/contexts', { params: { query: { language: 'python' } } });
    assert.ok(listed.data.some((c) => c.id === ctx.id));
    assert.equal((await client.GET('/code/contexts/{context_id}', { params: { path: { context_id: ctx.id } } })).data.id, ctx.id);
    assert.equal((await client.DELETE('/code/contexts/{context_id}', { params: { path: { context_id: ctx.id } } })).response.status, 200);
    const gone = await client.GET('/code/contexts/{context_id}', { params: { path: { context_id: ctx.id } } });
    assert.equal(gone.response.status, 404);
    assert.equal(gone.error.code, 'CONTEXT_NOT_FOUND');
    const busy = runCode(sbx, 'import time\ntime.sleep(1)', { language: 'python' });
    await new Promise((r) => setTimeout(r, 300));
    await assert.rejects(runCode(sbx, '1', { language: 'python' }),
      (e) => e instanceof SandboxApiException && e.statusCode === 500 && /busy/.test(e.message));
    await busy;
    const shell = await runCode(sbx, 'echo from-shell', {});
    assert.deepEqual(stdout(shell), ['from-shell']);
  });
});

test('code needs the code-interpreter image', async () => {
  await withSandbox(async (sbx) => {
    await assert.rejects(runCode(sbx, '1', { language: 'python' }),
      (e) => e instanceof SandboxApiException && e.statusCode === 500 && e.error.code === 'RUNTIME_ERROR');
  }, { image: 'python:3.12-slim' });
});

test('files: write, read (range, lines), info, search, move, replace, permissions, directories, delete', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.writeFiles([
      { path: '/workspace/d/a.txt', data: 'line1\nline2\nline3\n', mode: 644 },
      { path: '/workspace/d/b.bin', data: new Uint8Array([0, 1, 2, 255]) },
      { path: '/tmp/elsewhere.txt', data: 'x' },
    ]);
    assert.equal(await sbx.files.readFile('/workspace/d/a.txt'), 'line1\nline2\nline3\n');
    assert.deepEqual([...(await sbx.files.readBytes('/workspace/d/b.bin'))], [0, 1, 2, 255]);
    assert.equal(await sbx.files.readFile('/workspace/d/a.txt', { range: 'bytes=6-10' }), 'line2');
    assert.equal(await sbx.files.readFile('/workspace/d/a.txt', { offset: 2, limit: 2 }), 'line2\nline3');
    assert.deepEqual(stdout(await sbx.commands.run('cat d/a.txt | wc -l')), ['3'], 'commands see uploaded files');
    const info = await sbx.files.getFileInfo(['/workspace/d/a.txt', '/workspace/d']);
    assert.equal(info['/workspace/d/a.txt'].size, 18);
    assert.equal(info['/workspace/d/a.txt'].type, 'file');
    assert.equal(info['/workspace/d/a.txt'].mode, 644);
    assert.ok(info['/workspace/d/a.txt'].modifiedAt instanceof Date);
    assert.equal(info['/workspace/d'].type, 'directory');
    assert.equal((await sbx.files.getFileInfo(['/workspace/d/b.bin']))['/workspace/d/b.bin'].mode, 755, 'new files are 0777 &^ umask');
    const found = await sbx.files.search({ path: '/workspace', pattern: '*.txt' });
    assert.deepEqual(found.map((f) => f.path), ['/workspace/d/a.txt']);
    await sbx.files.moveFiles([{ src: '/workspace/d/a.txt', dest: '/workspace/e/moved.txt' }]);
    await sbx.files.replaceContents([{ path: '/workspace/e/moved.txt', oldContent: 'line', newContent: 'L' }]);
    assert.equal(await sbx.files.readFile('/workspace/e/moved.txt'), 'L1\nL2\nL3\n');
    await sbx.files.setPermissions([{ path: '/workspace/e/moved.txt', mode: 600 }]);
    assert.equal((await sbx.files.getFileInfo(['/workspace/e/moved.txt']))['/workspace/e/moved.txt'].mode, 600);
    await sbx.files.createDirectories([{ path: '/workspace/new/deep', mode: 755 }]);
    const listing = await sbx.files.listDirectory({ path: '/workspace', depth: 2 });
    assert.ok(listing.some((f) => f.path === '/workspace/new/deep' && f.type === 'directory'));
    await sbx.files.deleteFiles(['/workspace/e/moved.txt', '/workspace/e/missing-is-ignored']);
    await assert.rejects(sbx.files.readFile('/workspace/e/moved.txt'), (e) => e instanceof SandboxApiException && e.statusCode === 404);
    await assert.rejects(sbx.files.getFileInfo(['/workspace/nope']),
      (e) => e instanceof SandboxApiException && e.statusCode === 404 && e.error.code === 'FILE_NOT_FOUND');
    await sbx.files.deleteDirectories(['/workspace/new']);
    assert.equal((await sbx.files.listDirectory({ path: '/workspace' })).some((f) => f.path === '/workspace/new'), false);
  });
});

test('renew, pause/resume (a paused sandbox is unreachable; process state survives), metadata patch', async () => {
  await withSandbox(async (sbx) => {
    const renewed = await sbx.renew(3600);
    assert.ok(renewed.expiresAt.getTime() > Date.now() + 3_500_000);
    assert.ok((await sbx.getInfo()).expiresAt.getTime() > Date.now() + 3_500_000);
    await runCode(sbx, 'kept = "across pause"', { language: 'python' });
    await sbx.pause();
    assert.equal((await sbx.getInfo()).status.state, 'Paused');
    assert.equal(await sbx.isHealthy(), false);
    await assert.rejects(sbx.pause(), (e) => e instanceof SandboxApiException && e.statusCode === 409);
    // resume() returns a new handle on the same connection config (closed with sbx).
    const again = await sbx.resume();
    assert.equal((await again.getInfo()).status.state, 'Running');
    assert.equal((await runCode(again, 'kept', { language: 'python' })).result[0].text, "'across pause'");
    const mgr = SandboxManager.create({ connectionConfig: conn });
    await assert.rejects(mgr.resumeSandbox(sbx.id),
      (e) => e instanceof SandboxApiException && e.statusCode === 409 && e.error.code === 'DOCKER::SANDBOX_NOT_PAUSED');
    await mgr.close();
    const patched = await sbx.patchMetadata({ team: 'ml', drop: 'me' });
    assert.deepEqual(patched.metadata, { team: 'ml', drop: 'me' });
    assert.deepEqual((await sbx.patchMetadata({ drop: null })).metadata, { team: 'ml' });
    await assert.rejects(sbx.patchMetadata({ 'opensandbox.io/x': 'y' }), (e) => e instanceof SandboxApiException && e.statusCode === 400);
  });
});

test('snapshot: create (Creating -> Ready), list by name, restore sees the files, delete', async () => {
  const mgr = SandboxManager.create({ connectionConfig: conn });
  let snapId;
  try {
    await withSandbox(async (sbx) => {
      await sbx.files.writeFiles([{ path: '/workspace/saved.txt', data: 'from the snapshot' }]);
      await sbx.commands.run('mkdir -p /opt/tool && echo built > /opt/tool/marker');
      const snap = await mgr.createSnapshot(sbx.id, { name: 'conformance-snap' });
      snapId = snap.id;
      assert.equal(snap.status.state, 'Creating');
      assert.equal(snap.sandboxId, sbx.id);
      await assert.rejects(mgr.deleteSnapshot(snap.id), (e) => e instanceof SandboxApiException && e.statusCode === 409);
      let s = snap;
      for (let i = 0; i < 50 && s.status.state !== 'Ready'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        s = await mgr.getSnapshot(snap.id);
      }
      assert.equal(s.status.state, 'Ready');
      const byName = await mgr.listSnapshots({ name: 'conformance-snap' });
      assert.deepEqual(byName.items.map((x) => x.id), [snap.id]);
      assert.equal((await mgr.listSnapshots({ name: 'other' })).items.length, 0);
    });
    await withSandbox(async (restored) => {
      const info = await restored.getInfo();
      assert.equal(info.snapshotId, snapId);
      assert.equal(info.image, undefined);
      assert.equal(await restored.files.readFile('/workspace/saved.txt'), 'from the snapshot');
      assert.deepEqual(stdout(await restored.commands.run('cat /opt/tool/marker')), ['built']);
    }, { image: undefined, snapshotId: snapId });
    await mgr.deleteSnapshot(snapId);
    await assert.rejects(mgr.getSnapshot(snapId), (e) => e instanceof SandboxApiException && e.statusCode === 404 && e.error.code === 'SNAPSHOT::NOT_FOUND');
    await assert.rejects(create({ image: undefined, snapshotId: snapId }), (e) => e instanceof SandboxApiException && e.statusCode === 404);
  } finally {
    await mgr.close();
  }
});

test('manager: list with state and metadata filters, pages, kill by id', async () => {
  const mgr = SandboxManager.create({ connectionConfig: conn });
  const a = await create({ metadata: { team: 'list', n: '1' } });
  const b = await create({ metadata: { team: 'list', n: '2' } });
  try {
    await mgr.pauseSandbox(b.id);
    const all = await mgr.listSandboxInfos({ metadata: { team: 'list' } });
    assert.deepEqual(all.items.map((s) => s.id), [b.id, a.id], 'newest first');
    assert.equal(all.pagination.totalItems, 2);
    const running = await mgr.listSandboxInfos({ metadata: { team: 'list' }, states: ['Running'] });
    assert.deepEqual(running.items.map((s) => s.id), [a.id]);
    const either = await mgr.listSandboxInfos({ metadata: { team: 'list' }, states: ['Running', 'Paused'] });
    assert.equal(either.items.length, 2);
    const one = await mgr.listSandboxInfos({ metadata: { team: 'list', n: '2' } });
    assert.deepEqual(one.items.map((s) => s.id), [b.id]);
    const page1 = await mgr.listSandboxInfos({ metadata: { team: 'list' }, page: 1, pageSize: 1 });
    assert.equal(page1.items.length, 1);
    assert.equal(page1.pagination.hasNextPage, true);
    assert.equal(page1.pagination.totalPages, 2);
    const page2 = await mgr.listSandboxInfos({ metadata: { team: 'list' }, page: 2, pageSize: 1 });
    assert.equal(page2.pagination.hasNextPage, false);
    await assert.rejects(mgr.listSandboxInfos({ pageSize: 500 }),
      (e) => e instanceof SandboxApiException && e.statusCode === 422 && e.error.code === 'UNEXPECTED_RESPONSE');
    await mgr.killSandbox(b.id);
    await assert.rejects(mgr.killSandbox(b.id), (e) => e instanceof SandboxApiException && e.statusCode === 404);
    assert.deepEqual((await mgr.listSandboxInfos({ metadata: { team: 'list' } })).items.map((s) => s.id), [a.id]);
  } finally {
    await a.kill().catch(() => {});
    await b.kill().catch(() => {});
    await a.close();
    await b.close();
    await mgr.close();
  }
});

test('401: a missing and a wrong key', async () => {
  await assert.rejects(Sandbox.create({ connectionConfig: { domain: base, apiKey: 'wrong', requestTimeoutSeconds: 5 }, image: IMAGE }),
    (e) => e instanceof SandboxApiException && e.statusCode === 401 && e.error.code === 'INVALID_API_KEY' && /^[0-9a-f]{32}$/.test(e.requestId));
  const mgr = SandboxManager.create({ connectionConfig: { domain: base, requestTimeoutSeconds: 5 } });
  try {
    await assert.rejects(mgr.listSandboxInfos(), (e) => e instanceof SandboxApiException && e.statusCode === 401 && e.error.code === 'MISSING_API_KEY');
  } finally {
    await mgr.close();
  }
});

test('404 is a SandboxApiException carrying the server code and X-Request-ID (echoed when the client sends one)', async () => {
  const mgr = SandboxManager.create({ connectionConfig: conn });
  const tagged = SandboxManager.create({ connectionConfig: { ...conn, headers: { 'X-Request-ID': 'glsb-req-42' } } });
  try {
    await assert.rejects(mgr.getSandboxInfo('00000000-0000-4000-8000-000000000000'), (e) => {
      assert.ok(e instanceof SandboxApiException, String(e));
      assert.equal(e.statusCode, 404);
      assert.equal(e.error.code, 'DOCKER::SANDBOX_NOT_FOUND');
      assert.match(e.requestId, /^[0-9a-f]{32}$/);
      return true;
    });
    await assert.rejects(tagged.getSandboxInfo('nope'), (e) => e.requestId === 'glsb-req-42');
  } finally {
    await mgr.close();
    await tagged.close();
  }
});

test('validation: 422 in FastAPI shape (timeout < 60, image and snapshotId together)', async () => {
  await assert.rejects(create({ timeoutSeconds: 30 }), (e) => {
    assert.ok(e instanceof SandboxApiException);
    assert.equal(e.statusCode, 422);
    assert.equal(e.rawBody.detail[0].loc.join('.'), 'body.timeout');
    return true;
  });
  const res = await fetch(`${base}/v1/sandboxes`, { method: 'POST', headers: { 'OPEN-SANDBOX-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ image: { uri: IMAGE }, snapshotId: 'x', entrypoint: ['a'], resourceLimits: { cpu: '1' } }) });
  assert.equal(res.status, 422);
  assert.match((await res.json()).detail[0].msg, /Exactly one of image or snapshotId/);
});

test('readiness: execd not ready in time -> SandboxReadyTimeoutException and the sandbox is deleted', async () => {
  await config({ execdNotReadyPings: 1000 });
  try {
    const before_ = (await state()).sandboxes.length;
    await assert.rejects(create({ readyTimeoutSeconds: 0.6, healthCheckPollingInterval: 100 }),
      (e) => e instanceof SandboxReadyTimeoutException && e.error.code === 'READY_TIMEOUT');
    assert.equal((await state()).sandboxes.length, before_);
    await config({ execdNotReadyPings: 3, provisionMs: 150 });
    await withSandbox(async (sbx) => assert.equal(await sbx.isHealthy(), true));
  } finally {
    await config({ execdNotReadyPings: 0, provisionMs: 0 });
  }
});

test('server proxy route (useServerProxy) reaches execd and carries X-Request-ID', async () => {
  await withSandbox(async (sbx) => {
    const ep = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
    assert.equal(ep.endpoint, `${base.replace('http://', '')}/sandboxes/${sbx.id}/proxy/${DEFAULT_EXECD_PORT}`);
    assert.deepEqual(stdout(await sbx.commands.run('echo proxied')), ['proxied']);
    const res = await fetch(`${base}/sandboxes/${sbx.id}/proxy/${DEFAULT_EXECD_PORT}/ping`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('x-request-id'), /^[0-9a-f]{32}$/);
  }, { connectionConfig: { ...conn, useServerProxy: true } });
});

test('faults: 503 on create, a stream cut after delivery, a sandbox lost mid-run', async () => {
  await fault({ plane: 'lifecycle', method: 'POST', path: '^/sandboxes$', status: 503, retryAfter: 1 });
  await assert.rejects(create(), (e) => e instanceof SandboxApiException && e.statusCode === 503);
  await withSandbox(async (sbx) => {
    await fault({ plane: 'execd', path: '^/command$', action: 'cut_after_events', events: 2, sandboxId: sbx.id });
    const cut = await sbx.commands.run('echo ran > /tmp/ran; echo out').catch((e) => e);
    // The SDK sees a truncated stream: no completion, no error, no exit code (or a transport error).
    assert.ok(cut instanceof Error || (cut.exitCode === null && !cut.complete), String(cut));
    assert.deepEqual(stdout(await sbx.commands.run('cat /tmp/ran')), ['ran'], 'the command ran');
    await fault({ plane: 'execd', path: '^/command$', action: 'kill_sandbox', afterMs: 300, sandboxId: sbx.id });
    const lost = await sbx.commands.run('sleep 5').catch((e) => e);
    assert.ok(lost instanceof Error || lost.exitCode === null, String(lost));
    await assert.rejects(sbx.getInfo(), (e) => e instanceof SandboxApiException && e.statusCode === 404);
  });
  const s = await state();
  assert.equal(s.faults.every((f) => f.remaining === 0), true);
  await admin('DELETE', '/_emulator/faults');
});

test('expiry: a sandbox is removed at expiresAt', async () => {
  await withSandbox(async (sbx) => {
    await sbx.renew(0.5);
    await new Promise((r) => setTimeout(r, 900));
    await assert.rejects(sbx.getInfo(), (e) => e instanceof SandboxApiException && e.statusCode === 404);
  });
});

test('egress sidecar policy through the SDK', async () => {
  await withSandbox(async (sbx) => {
    const p0 = await sbx.getEgressPolicy();
    assert.equal(p0.defaultAction, 'deny');
    await sbx.patchEgressRules([{ action: 'allow', target: 'pypi.org' }]);
    assert.deepEqual((await sbx.getEgressPolicy()).egress, [{ action: 'allow', target: 'pypi.org' }]);
    await sbx.deleteEgressRules(['pypi.org']);
    assert.deepEqual((await sbx.getEgressPolicy()).egress, []);
  }, { networkPolicy: { egress: [] } });
});

test('--execd-listener: sandbox ports on their own listener; closed, execd calls are refused', async () => {
  const other = await startEmulator(['--execd-listener']);
  const c = { domain: other.url, apiKey: KEY, requestTimeoutSeconds: 5 };
  const sbx = await Sandbox.create({ connectionConfig: c, image: IMAGE });
  try {
    const ep = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
    assert.notEqual(ep.endpoint, other.url.replace('http://', ''));
    assert.deepEqual(stdout(await sbx.commands.run('echo direct')), ['direct']);
    const down = await fetch(`${other.url}/_emulator/execd-listener`, { method: 'POST', body: '{"up": false}' });
    assert.equal(down.status, 200);
    assert.equal(await sbx.isHealthy(), false);
    await assert.rejects(sbx.commands.run('true'), (e) => /fetch failed/.test(e.message) && e.cause.code === 'ECONNREFUSED');
    assert.equal((await sbx.getInfo()).status.state, 'Running', 'the lifecycle API still answers');
    await fetch(`${other.url}/_emulator/execd-listener`, { method: 'POST', body: '{"up": true}' });
    assert.equal(await sbx.isHealthy(), true);
  } finally {
    await sbx.kill().catch(() => {});
    await sbx.close();
    const exited = new Promise((r) => other.child.once('exit', r));
    other.child.kill('SIGTERM');
    await exited;
  }
});

test('nothing is left running', async () => {
  let s = await state();
  for (let i = 0; i < 30 && (s.sandboxes.length > 0 || s.children > 0); i++) {
    await new Promise((r) => setTimeout(r, 100));
    s = await state();
  }
  assert.deepEqual(s.sandboxes.map((x) => x.id), []);
  assert.equal(s.children, 0);
});
