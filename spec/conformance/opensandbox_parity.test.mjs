// Conformance, part two: behaviours of the real OpenSandbox server and execd (each named in
// spec/emulators/README.md with the source it follows) as the official JS SDK (pinned in
// spec/package.json) sees them against glsb's OpenSandbox emulator (issue 24). Code runs and bash
// sessions go through the SDK's own execd stream machinery (its CommandsAdapter), as
// opensandbox.test.mjs does: the code-interpreter client is not on the registry this project uses, and
// the pinned SDK has no session methods yet.
//
//   cd spec && node --test conformance/opensandbox_parity.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { Sandbox, SandboxApiException, DEFAULT_EXECD_PORT } from '@alibaba-group/opensandbox';
import { CommandsAdapter, createExecdClient } from '@alibaba-group/opensandbox/internal';
import { startEmulator, admin, sleep, until } from './emulator.mjs';

const KEY = 'opensandbox_parity_key';
const IMAGE = 'opensandbox/code-interpreter:v1.0.2';
for (const k of ['OPEN_SANDBOX_DOMAIN', 'OPEN_SANDBOX_API_KEY', 'OPENSANDBOX_DISABLE_METRICS']) delete process.env[k];

let emu = null;
let adm = null;
let conn = null;
let hostDir = null;

before(async () => {
  hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'glsb-os-parity-'));
  emu = await startEmulator('opensandbox', ['--api-key', KEY, '--allowed-host-path', hostDir]);
  adm = admin(emu.url);
  conn = { domain: emu.url, apiKey: KEY, requestTimeoutSeconds: 20 };
});

after(async () => {
  if (emu) await emu.stop();
  if (hostDir) fs.rmSync(hostDir, { recursive: true, force: true });
});

async function withSandbox(fn, extra = {}) {
  const sbx = await Sandbox.create({ connectionConfig: conn, image: IMAGE, timeoutSeconds: 600, ...extra });
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => {});
    await sbx.close();
  }
}

async function execd(sbx) {
  const baseUrl = await sbx.getEndpointUrl(DEFAULT_EXECD_PORT);
  const endpoint = await sbx.getEndpoint(DEFAULT_EXECD_PORT);
  const headers = { ...sbx.connectionConfig.headers, ...(endpoint.headers || {}) };
  const client = createExecdClient({ baseUrl, headers });
  const adapter = new CommandsAdapter(client, { baseUrl, headers, fetch });
  const stream = (pathname, body) => adapter.consumeExecutionStream(
    adapter.streamExecution({ pathname, body, fallbackErrorMessage: 'stream failed' }), undefined, false);
  return { client, baseUrl, headers, stream };
}

const out = (execution) => execution.logs.stdout.map((m) => m.text).join('');

test('writeFiles and setPermissions apply owner and group, as execd chowns them', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.writeFiles([{ path: '/tmp/owned.txt', data: 'x', mode: 644, owner: 'nobody', group: 'nogroup' }]);
    let info = (await sbx.files.getFileInfo(['/tmp/owned.txt']))['/tmp/owned.txt'];
    assert.equal(info.owner, 'nobody');
    assert.equal(info.group, 'nogroup');
    assert.equal(out(await sbx.commands.run('stat -c %U:%G /tmp/owned.txt')), 'nobody:nogroup', 'really chowned');
    await sbx.files.setPermissions([{ path: '/tmp/owned.txt', mode: 600, owner: 'root', group: 'root' }]);
    info = (await sbx.files.getFileInfo(['/tmp/owned.txt']))['/tmp/owned.txt'];
    assert.equal(info.owner, 'root');
    assert.equal(info.mode, 600);
    // an unknown owner is skipped (a warning in execd's log), the group still applied
    await sbx.files.setPermissions([{ path: '/tmp/owned.txt', mode: 644, owner: 'no-such-user', group: 'nogroup' }]);
    info = (await sbx.files.getFileInfo(['/tmp/owned.txt']))['/tmp/owned.txt'];
    assert.equal(info.owner, 'root');
    assert.equal(info.group, 'nogroup');
  });
});

test('an interrupt right after init on a fresh context stops the code (5 of 5), the kernel lives on', async () => {
  await withSandbox(async (sbx) => {
    const x = await execd(sbx);
    for (let i = 0; i < 5; i++) {
      const created = await x.client.POST('/code/context', { body: { language: 'python' } });
      const id = created.data.id;
      const started = Date.now();
      const run = x.stream('/code', { code: 'import time\nfor _ in range(100):\n    time.sleep(0.1)\nprint("not interrupted")', context: { id, language: 'python' } });
      // DELETE /code?id= as soon as the stream has said init (the SDK's interrupt)
      await sleep(30);
      const del = await fetch(`${x.baseUrl}/code?id=${id}`, { method: 'DELETE', headers: x.headers });
      assert.equal(del.status, 200);
      const result = await run;
      assert.ok(Date.now() - started < 5000, 'stopped, not run to its end');
      assert.equal(result.error?.name, 'KeyboardInterrupt', `run ${i}: ${JSON.stringify(result.error)}`);
      assert.equal(out(await x.stream('/code', { code: 'print(21 * 2)', context: { id, language: 'python' } })), '42\n', 'the kernel still answers');
    }
  });
});

test('bash sessions keep their working directory and env across runs; a non-zero status is CommandExecError', async () => {
  await withSandbox(async (sbx) => {
    const x = await execd(sbx);
    const created = await x.client.POST('/session', { body: { cwd: '/tmp' } });
    const sid = created.data.session_id;
    assert.match(sid, /^[0-9a-f-]{36}$/);
    const run = (command, extra = {}) => x.stream(`/session/${sid}/run`, { command, ...extra });
    assert.equal(out(await run('pwd')).trim(), '/tmp');
    assert.equal(out(await run('pwd', { cwd: '/workspace' })).trim(), '/workspace');
    assert.equal(out(await run('pwd')).trim(), '/workspace', 'a run\'s cwd becomes the session\'s');
    await run('export PARITY_SESSION=kept; cd /tmp');
    assert.equal(out(await run('echo $PARITY_SESSION $PWD')).trim(), 'kept /tmp');
    const failed = await run("sh -c 'echo to-stderr >&2; exit 7'");
    assert.equal(failed.error.name, 'CommandExecError');
    assert.equal(failed.error.value, '7');
    assert.equal(out(failed).trim(), 'to-stderr', 'stderr comes in the one stream');
    const other = await x.client.POST('/session', { body: {} });
    assert.equal(out(await x.stream(`/session/${other.data.session_id}/run`, { command: 'echo ${PARITY_SESSION:-unset}' })).trim(), 'unset', 'sessions are separate');
    assert.equal((await fetch(`${x.baseUrl}/session/${sid}`, { method: 'DELETE', headers: x.headers })).status, 200);
    const gone = await fetch(`${x.baseUrl}/session/${sid}`, { method: 'DELETE', headers: x.headers });
    assert.equal(gone.status, 404);
    assert.equal((await gone.json()).code, 'CONTEXT_NOT_FOUND');
  });
});

test('volumes: host and PVC, read-write and read-only, subPath; the server\'s VOLUME:: errors', async () => {
  fs.writeFileSync(path.join(hostDir, 'marker.txt'), 'host-marker');
  await adm('POST', '/_emulator/volumes', { name: 'parity-pvc', files: { 'marker.txt': 'pvc-marker', 'sub/deep.txt': 'in-sub' } });
  await withSandbox(async (sbx) => {
    assert.equal(out(await sbx.commands.run('cat /mnt/host/marker.txt')), 'host-marker');
    await sbx.commands.run('echo from-sandbox > /mnt/host/written.txt');
    assert.equal(fs.readFileSync(path.join(hostDir, 'written.txt'), 'utf8'), 'from-sandbox\n', 'the write reaches the host directory');
    assert.equal(out(await sbx.commands.run('cat /mnt/pvc/marker.txt')), 'pvc-marker');
    const ro = await sbx.commands.run('echo no > /mnt/pvc/x.txt');
    assert.ok(ro.error, 'read-only mount refuses writes');
    assert.equal(out(await sbx.commands.run('cat /mnt/sub/deep.txt')), 'in-sub');
    const info = await sbx.files.getFileInfo(['/mnt/host/marker.txt']);
    assert.equal(info['/mnt/host/marker.txt'].size, 11, 'the file API sees the volume too');
    assert.equal(await sbx.files.readFile('/mnt/sub/deep.txt'), 'in-sub');
  }, {
    volumes: [
      { name: 'h', host: { path: hostDir }, mountPath: '/mnt/host', readOnly: false },
      { name: 'p', pvc: { claimName: 'parity-pvc' }, mountPath: '/mnt/pvc', readOnly: true },
      { name: 's', pvc: { claimName: 'parity-pvc' }, mountPath: '/mnt/sub', subPath: 'sub' },
    ],
  });
  const refused = async (volumes, code, status = 400) => {
    await assert.rejects(Sandbox.create({ connectionConfig: conn, image: IMAGE, volumes }),
      (e) => e instanceof SandboxApiException && e.statusCode === status && e.error?.code === code, code);
  };
  await refused([{ name: 'x', pvc: { claimName: 'no-such-volume' }, mountPath: '/mnt/x' }], 'VOLUME::PVC_NOT_FOUND');
  await refused([{ name: 'x', host: { path: '/etc' }, mountPath: '/mnt/x' }], 'VOLUME::HOST_PATH_NOT_ALLOWED');
  await refused([{ name: 'x', host: { path: hostDir }, mountPath: 'relative' }], 'VOLUME::INVALID_MOUNT_PATH');
  await refused([{ name: 'x', host: { path: hostDir }, mountPath: '/mnt/x', subPath: '../up' }], 'VOLUME::INVALID_SUB_PATH');
  // the SDK checks the backend count itself; the server's answer, on the wire
  const raw = await fetch(`${emu.url}/v1/sandboxes`, { method: 'POST', headers: { 'OPEN-SANDBOX-API-KEY': KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ image: { uri: IMAGE }, entrypoint: ['tail', '-f', '/dev/null'], resourceLimits: { cpu: '1' }, timeout: 60,
      volumes: [{ name: 'y', mountPath: '/mnt/y' }] }) });
  assert.equal(raw.status, 400);
  assert.deepEqual(await raw.json(), { code: 'VOLUME::INVALID_BACKEND', message: "Volume 'y' must specify exactly one backend (host, pvc, ossfs), but none was provided." });
  await refused([{ name: 'x', host: { path: hostDir }, mountPath: '/a' }, { name: 'x', host: { path: hostDir }, mountPath: '/b' }], 'VOLUME::DUPLICATE_NAME');
});

// Loopback servers standing for the outside (127.0.0.1 is the sandbox's own).
async function targets() {
  const servers = await Promise.all(['127.0.0.2', '127.0.0.3'].map((host) => new Promise((resolve) => {
    const srv = http.createServer((q, r) => r.end(host));
    srv.listen(0, host, () => resolve(srv));
  })));
  const [a, b] = servers.map((srv) => `http://${srv.address().address}:${srv.address().port}/`);
  return { a, b, close: () => Promise.all(servers.map((srv) => new Promise((r) => srv.close(r)))) };
}

test('networkPolicy is enforced in the sandbox: default deny, allow rules, patched and deleted rules', async () => {
  const t = await targets();
  try {
    await withSandbox(async (sbx) => {
      const reach = async (url) => { const r = await sbx.commands.run(`curl -s --max-time 5 ${url}`); return r.error ? 'refused' : out(r); };
      assert.deepEqual(await sbx.getEgressPolicy(), { defaultAction: 'deny', egress: [{ action: 'allow', target: '127.0.0.2' }] });
      assert.equal(await reach(t.a), '127.0.0.2');
      assert.equal(await reach(t.b), 'refused', 'default deny');
      const dns = await sbx.commands.run('getent hosts example.com || echo unresolved');
      assert.equal(out(dns).trim(), 'unresolved', 'a name not allowed does not resolve under default deny');
      await sbx.patchEgressRules([{ action: 'allow', target: '127.0.0.3' }, { action: 'deny', target: '127.0.0.2' }]);
      assert.equal(await reach(t.b), '127.0.0.3', 'patched: allowed now');
      assert.equal(await reach(t.a), 'refused', 'patched: denied now');
    }, { networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: '127.0.0.2' }] } });
    await withSandbox(async (sbx) => {
      const r = await sbx.commands.run(`curl -s --max-time 5 ${t.b}`);
      assert.equal(out(r), '127.0.0.3', 'no policy: everything');
    });
  } finally {
    await t.close();
  }
});

test('code contexts in javascript, typescript and bash; java and go find no kernel spec', async () => {
  await withSandbox(async (sbx) => {
    const x = await execd(sbx);
    const js = (await x.client.POST('/code/context', { body: { language: 'javascript', cwd: '/tmp' } })).data;
    assert.equal(js.language, 'javascript');
    await x.stream('/code', { code: 'const kept = 20', context: { id: js.id, language: 'javascript' } });
    const r = await x.stream('/code', { code: 'console.log("from node"); kept + 22', context: { id: js.id, language: 'javascript' } });
    assert.equal(out(r), 'from node\n');
    assert.equal(r.result[0].text, '42');
    assert.equal((await x.stream('/code', { code: 'process.cwd()', context: { id: js.id, language: 'javascript' } })).result[0].text, '/tmp');
    const ts = await x.stream('/code', { code: "const n: number = 2 + 2;\nconsole.log('ts', n)", context: { language: 'typescript' } });
    assert.equal(out(ts), 'ts 4\n');
    const thrown = await x.stream('/code', { code: 'throw new RangeError("bad")', context: { id: js.id, language: 'javascript' } });
    assert.equal(thrown.error.name, 'RangeError');
    const bash = (await x.client.POST('/code/context', { body: { language: 'bash' } })).data;
    await x.stream('/code', { code: 'cd /tmp; export KEPT=yes', context: { id: bash.id, language: 'bash' } });
    assert.equal(out(await x.stream('/code', { code: 'echo $PWD $KEPT', context: { id: bash.id, language: 'bash' } })), '/tmp yes\n');
    for (const language of ['java', 'go']) {
      const res = await x.client.POST('/code/context', { body: { language } });
      assert.equal(res.response.status, 500);
      assert.deepEqual(res.error, { code: 'RUNTIME_ERROR', message: 'error creating code context. no kernel specs found' });
    }
  });
});

test('nothing leaked: no sandboxes, child processes or auto-made volumes', async () => {
  const s = await until(async () => { const x = await adm('GET', '/_emulator/state'); return x.children === 0 && x; }, 'no child processes');
  assert.deepEqual(s.sandboxes, []);
  assert.deepEqual(s.volumes.filter((v) => v.managed), []);
});
