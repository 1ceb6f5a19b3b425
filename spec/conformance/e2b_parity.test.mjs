// Conformance, part two: behaviours of the real E2B service (each named in spec/emulators/README.md with
// the infra or code-interpreter source it follows) as the official SDKs (pinned in spec/package.json)
// see them against glsb's E2B emulator. Written from the SDKs' documented behaviour (issue 24).
//
//   cd spec && node --test conformance/e2b_parity.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import http from 'node:http';
import path from 'node:path';
import { Sandbox as BaseSandbox, Template, BuildError, FilesystemEventType, SandboxNotFoundError } from 'e2b';
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter';
import { startEmulator, admin, until } from './emulator.mjs';

const KEY = 'e2b_parity_key';
for (const k of ['E2B_API_KEY', 'E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_DOMAIN', 'E2B_DEBUG', 'E2B_ACCESS_TOKEN']) delete process.env[k];

let emu = null;
let opts = null;
let adm = null;

before(async () => {
  emu = await startEmulator('e2b', ['--api-key', KEY]);
  adm = admin(emu.url);
  opts = { apiKey: KEY, apiUrl: emu.url, sandboxUrl: emu.url, requestTimeoutMs: 20000 };
});

after(async () => { if (emu) await emu.stop(); });

async function withSandbox(fn, extra = {}) {
  const sbx = await BaseSandbox.create('base', { ...opts, ...extra });
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => {});
  }
}

// A file URL the SDK signed, fetched through the shared sandbox host (the routing headers are the
// edge proxy's, which the SDK sends on its own requests; a plain fetch of the URL carries none).
function fetchFileUrl(sbx, url, init = {}) {
  return fetch(url, { ...init, headers: { ...(init.headers || {}), 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } });
}

test('file info: a directory reports permission bits only, a symlink its resolved target, xattrs as metadata', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.makeDir('/home/user/d');
    const dir = await sbx.files.getInfo('/home/user/d');
    assert.equal(dir.type, 'dir');
    assert.equal(dir.mode, 0o755, 'Go\'s ModeDir bit is not part of mode');
    assert.equal(dir.permissions, 'drwxr-xr-x');
    const listed = (await sbx.files.list('/home/user')).find((e) => e.name === 'd');
    assert.equal(listed.mode, 0o755);

    await sbx.files.write('/home/user/d/t.txt', 'x');
    await sbx.commands.run('ln -s t.txt /home/user/d/rel && ln -s /home/user/d /home/user/dl && ln -s nowhere /home/user/d/dangling');
    const rel = await sbx.files.getInfo('/home/user/d/rel');
    assert.equal(rel.symlinkTarget, '/home/user/d/t.txt', 'the target, resolved and absolute');
    assert.equal(rel.type, 'file', 'a link to a file has the file\'s type');
    assert.equal(rel.mode, 0o644, 'and the file\'s permission bits');
    assert.equal(rel.permissions, 'Lrwxrwxrwx');
    const viaDirLink = await sbx.files.getInfo('/home/user/dl/rel');
    assert.equal(viaDirLink.symlinkTarget, '/home/user/d/t.txt');
    const dangling = await sbx.files.getInfo('/home/user/d/dangling');
    assert.equal(dangling.symlinkTarget, '/home/user/d/dangling', 'unresolvable: the link\'s own path');

    await sbx.commands.run(`python3 -c "import os; os.setxattr('/home/user/d/t.txt', 'user.e2b.author', b'ada'); os.setxattr('/home/user/d/t.txt', 'user.other', b'no')"`);
    assert.deepEqual((await sbx.files.getInfo('/home/user/d/t.txt')).metadata, { author: 'ada' });
    assert.deepEqual((await sbx.files.list('/home/user/d')).find((e) => e.name === 't.txt').metadata, { author: 'ada' });
    // an upload with metadata sets the xattrs; an overwrite without replaces the whole set
    await sbx.files.write('/home/user/m.txt', 'a', { metadata: { Owner: 'bob' } });
    const xattr = await sbx.commands.run(`python3 -c "import os; print(os.getxattr('/home/user/m.txt', 'user.e2b.owner').decode())"`);
    assert.equal(xattr.stdout.trim(), 'bob', 'keys lower-cased, stored as user.e2b.* xattrs');
    await sbx.files.write('/home/user/m.txt', 'b');
    assert.equal((await sbx.files.getInfo('/home/user/m.txt')).metadata, undefined);
  });
});

test('signed file URLs: valid, expired and bad signatures get envd\'s own answers', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.write('/home/user/s.txt', 'signed');
    const ok = await fetchFileUrl(sbx, await sbx.downloadUrl('/home/user/s.txt', { useSignatureExpiration: 60 }));
    assert.equal(ok.status, 200);
    assert.equal(await ok.text(), 'signed');
    const expired = await fetchFileUrl(sbx, await sbx.downloadUrl('/home/user/s.txt', { useSignatureExpiration: -10 }));
    assert.equal(expired.status, 401);
    assert.deepEqual(await expired.json(), { code: 401, message: 'signature is already expired' });
    const url = new URL(await sbx.uploadUrl('/home/user/u.txt', { useSignatureExpiration: 60 }));
    url.searchParams.set('signature', 'v1_' + 'A'.repeat(43));
    const form = new FormData();
    form.append('file', new Blob(['x']), 'u.txt');
    const bad = await fetchFileUrl(sbx, url.toString(), { method: 'POST', body: form });
    assert.equal(bad.status, 401);
    assert.deepEqual(await bad.json(), { code: 401, message: 'invalid signature' });
    url.searchParams.delete('signature');
    const missing = await fetchFileUrl(sbx, url.toString(), { method: 'POST', body: form });
    assert.deepEqual(await missing.json(), { code: 401, message: 'missing signature query parameter' });
    const up = await fetchFileUrl(sbx, await sbx.uploadUrl('/home/user/u.txt', { useSignatureExpiration: 60 }), { method: 'POST', body: form });
    assert.equal(up.status, 200);
    assert.equal(await sbx.files.read('/home/user/u.txt'), 'x');
  }, { secure: true });
});

test('list(startedAfter) is at or after; metrics honour start and end', async () => {
  await withSandbox(async (sbx) => {
    const info = await sbx.getInfo();
    const items = await BaseSandbox.list({ ...opts, query: { startedAfter: info.startedAt } }).nextItems();
    assert.ok(items.some((s) => s.sandboxId === sbx.sandboxId), 'a sandbox started exactly at the bound is listed');
    const later = await BaseSandbox.list({ ...opts, query: { startedAfter: new Date(info.startedAt.getTime() + 1000) } }).nextItems();
    assert.ok(!later.some((s) => s.sandboxId === sbx.sandboxId));
    const now = await sbx.getMetrics();
    assert.ok(now.length > 0);
    const before = await sbx.getMetrics({ start: new Date(Date.now() - 3600_000), end: new Date(Date.now() - 1800_000) });
    assert.deepEqual(before, [], 'nothing before the sandbox existed');
    const start = new Date(Date.now() - 1000);
    const recent = await sbx.getMetrics({ start, end: new Date() });
    assert.ok(recent.length > 0 && recent.every((m) => m.timestamp.getTime() >= start.getTime() - 5000));
  });
});

test('a recursive watch reports writes in a folder made after it began', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.makeDir('/home/user/w');
    const events = [];
    const handle = await sbx.files.watchDir('/home/user/w', (e) => events.push(e), { recursive: true });
    try {
      await sbx.files.makeDir('/home/user/w/new');
      await until(() => events.some((e) => e.name === 'new' && e.type === FilesystemEventType.CREATE), 'the folder\'s create');
      await sbx.files.write('/home/user/w/new/f.txt', 'hello');
      await until(() => events.some((e) => e.name === 'new/f.txt' && e.type === FilesystemEventType.WRITE), 'the write in the new folder');
      await sbx.commands.run('mkdir -p /home/user/w/new/deeper && echo x > /home/user/w/new/deeper/g.txt');
      await until(() => events.some((e) => e.name === 'new/deeper/g.txt'), 'a write two levels down');
    } finally {
      await handle.stop();
    }
  });
});

test('template builds: a relative COPY lands in the build user\'s home; RUN as an unknown user fails the build', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'glsb-parity-'));
  try {
    fs.mkdirSync(path.join(dir, 'folder'));
    fs.writeFileSync(path.join(dir, 'folder', 'a.txt'), 'copied');
    const tpl = Template({ fileContextPath: dir }).fromImage('ubuntu:22.04').copy('folder/*', 'folder').runCmd('cat folder/a.txt');
    await Template.build(tpl, 'parity-copy', { ...opts });
    const sbx = await BaseSandbox.create('parity-copy', opts);
    try {
      assert.equal(await sbx.files.read('/root/folder/a.txt', { user: 'root' }), 'copied', 'an image build runs as root, no workdir');
    } finally {
      await sbx.kill();
    }
    const bad = Template().fromImage('ubuntu:22.04').runCmd('whoami', { user: 'root123' });
    await assert.rejects(Template.build(bad, 'parity-baduser', { ...opts }), (e) => e instanceof BuildError
      && e.message.includes("failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"));
    const failing = Template().fromImage('ubuntu:22.04').runCmd('exit 3');
    await assert.rejects(Template.build(failing, 'parity-exit', { ...opts }), (e) => e instanceof BuildError
      && e.message.includes("failed to run command 'exit 3': exit status 3"));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// A request for one of the sandbox's ports through the shared sandbox host.
function port(sbx, p, headers = {}) {
  return fetch(`${emu.url}/`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(p), ...headers } });
}

test('pause keeps running processes, their pids and kernel state; a filesystem-only pause cold-boots', async () => {
  const sbx = await CodeSandbox.create({ ...opts });
  try {
    await sbx.runCode('kept = 41');
    const bg = await sbx.commands.run('sleep 600', { background: true });
    const boot = (await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim();
    await sbx.pause();
    assert.equal(await sbx.isRunning(), false);
    const listed = await BaseSandbox.list({ ...opts, query: { state: ['paused'] } }).nextItems();
    assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId && s.state === 'paused'));
    await sbx.connect();
    assert.ok((await sbx.commands.list()).some((p) => p.pid === bg.pid), 'the process is still there, same pid');
    assert.equal((await sbx.runCode('kept + 1')).text, '42', 'the kernel kept its variables');
    assert.equal((await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim(), boot, 'no reboot');

    await sbx.files.write('/home/user/kept.txt', 'on disk');
    await sbx.pause({ keepMemory: false });
    await sbx.connect();
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === bg.pid), 'processes are gone after a cold boot');
    assert.notEqual((await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim(), boot);
    assert.equal(await sbx.files.read('/home/user/kept.txt'), 'on disk');
    assert.ok((await sbx.runCode('"kept" in dir()')).text === 'False', 'a fresh kernel');
  } finally {
    await sbx.kill();
  }
});

test('snapshots: create (named or not), list by sandbox and by name, start sandboxes from one, delete', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.write('/home/user/snap.txt', 'from the snapshot');
    const plain = await sbx.createSnapshot();
    assert.match(plain.snapshotId, /^[a-z0-9]+:default$/);
    assert.deepEqual(plain.names, []);
    const named = await sbx.createSnapshot({ name: 'parity-snap' });
    assert.equal(named.snapshotId, 'emulator/parity-snap:default');
    assert.deepEqual(named.names, ['emulator/parity-snap']);
    const mine = await sbx.listSnapshots().nextItems();
    assert.deepEqual(mine.map((x) => x.snapshotId).sort(), [plain.snapshotId, named.snapshotId].sort());
    assert.deepEqual((await BaseSandbox.listSnapshots({ ...opts, name: 'parity-snap' }).nextItems()).map((x) => x.snapshotId), [named.snapshotId]);
    assert.deepEqual(await BaseSandbox.listSnapshots({ ...opts, name: 'parity-none' }).nextItems(), []);
    await sbx.files.write('/home/user/snap.txt', 'changed after');
    const [a, b] = await Promise.all([BaseSandbox.create(named.snapshotId, opts), BaseSandbox.create(plain.snapshotId, opts)]);
    try {
      assert.equal(await a.files.read('/home/user/snap.txt'), 'from the snapshot');
      await a.files.write('/home/user/snap.txt', 'a');
      assert.equal(await b.files.read('/home/user/snap.txt'), 'from the snapshot', 'sandboxes from a snapshot are independent');
    } finally {
      await a.kill();
      await b.kill();
    }
    assert.equal(await BaseSandbox.deleteSnapshot(named.snapshotId, opts), true);
    assert.equal(await BaseSandbox.deleteSnapshot(plain.snapshotId, opts), true);
    assert.equal(await BaseSandbox.deleteSnapshot(plain.snapshotId, opts), false);
    assert.deepEqual(await sbx.listSnapshots().nextItems(), []);
  });
});

test('fork: the forks get the files and env, the original keeps running; a paused or killed one is refused', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.write('/home/user/f.txt', 'before the fork');
    const forks = await sbx.fork({ count: 2, timeoutMs: 60_000 });
    try {
      assert.equal(forks.length, 2);
      for (const f of forks) {
        assert.ok(f instanceof BaseSandbox, String(f));
        assert.notEqual(f.sandboxId, sbx.sandboxId);
        assert.equal(await f.files.read('/home/user/f.txt'), 'before the fork');
        assert.equal((await f.commands.run('echo $FORK_ENV')).stdout, 'inherited\n');
      }
      await forks[0].files.write('/home/user/f.txt', 'changed');
      assert.equal(await sbx.files.read('/home/user/f.txt'), 'before the fork');
      assert.equal(await sbx.isRunning(), true);
    } finally {
      await Promise.all(forks.map((f) => f.kill?.()));
    }
    await sbx.pause();
    await assert.rejects(sbx.fork(), /is paused and cannot be forked; resume it first/);
    await sbx.kill();
    await assert.rejects(sbx.fork(), SandboxNotFoundError);
  }, { envs: { FORK_ENV: 'inherited' } });
});

test('ports: a server started in the sandbox is reached through its port; a traffic token guards all but envd', async () => {
  await withSandbox(async (sbx) => {
    assert.equal((await port(sbx, 18931)).status, 502, 'nothing listens yet');
    assert.deepEqual(await (await port(sbx, 18931)).json(), { sandboxId: sbx.sandboxId, message: 'The sandbox is running but port is not open', port: 18931, code: 502 });
    await sbx.commands.run("python3 -c \"import http.server as h\nclass H(h.BaseHTTPRequestHandler):\n  def do_GET(s):\n    b = s.headers['Host'].encode(); s.send_response(200); s.end_headers(); s.wfile.write(b)\nh.HTTPServer(('127.0.0.1', 18931), H).serve_forever()\"", { background: true });
    const res = await until(async () => { const r = await port(sbx, 18931); return r.status === 200 && r; }, 'the server');
    assert.equal(await res.text(), 'custom-18931.example', 'the Host the sandbox sees is maskRequestHost');
  }, { network: { maskRequestHost: 'custom-${PORT}.example' } });

  await withSandbox(async (sbx) => {
    assert.ok(sbx.trafficAccessToken, 'a token comes with allowPublicTraffic: false');
    const missing = await port(sbx, 18932);
    assert.equal(missing.status, 403);
    assert.match((await missing.json()).message, /Token header 'e2b-traffic-access-token' is missing/);
    assert.equal((await port(sbx, 18932, { 'e2b-traffic-access-token': 'wrong' })).status, 403);
    assert.equal((await port(sbx, 18932, { 'e2b-traffic-access-token': sbx.trafficAccessToken })).status, 502, 'through, to a closed port');
    assert.equal((await sbx.commands.run('echo envd needs no traffic token')).exitCode, 0);
  }, { network: { allowPublicTraffic: false } });
});

test('each sandbox has a localhost of its own: two serve one port at once; the interpreter\'s /health answers inside', async () => {
  const [a, b] = await Promise.all([BaseSandbox.create('base', opts), BaseSandbox.create('base', opts)]);
  const ci = await CodeSandbox.create(opts);
  try {
    for (const [sbx, name] of [[a, 'A'], [b, 'B']]) {
      await sbx.files.write('/home/user/www/who', name);
      await sbx.commands.run('python3 -m http.server 18940', { background: true, cwd: '/home/user/www' });
    }
    for (const [sbx, name] of [[a, 'A'], [b, 'B']]) {
      const get = () => fetch(`${emu.url}/who`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '18940' } });
      const res = await until(async () => { const r = await get().catch(() => null); return r && r.status === 200 && r; }, `${name}'s server`);
      assert.equal(await res.text(), name, 'each sandbox\'s port reaches its own server');
      assert.equal((await sbx.commands.run('curl -s http://localhost:18940/who')).stdout, name, 'and so does its localhost');
    }
    // the interpreter's port inside a code-interpreter sandbox, as its template's ready check asks it
    // (code-interpreter template.py: wait_for_url("http://localhost:49999/health")), and envd's
    const health = await ci.commands.run('curl -s -w " %{http_code}" http://localhost:49999/health');
    assert.equal(health.stdout, 'OK 200');
    const fromCode = await ci.runCode("import urllib.request\nprint(urllib.request.urlopen('http://localhost:49999/health').read().decode())");
    assert.deepEqual(fromCode.logs.stdout, ['OK\n'], 'and code in the kernel reaches it too');
    assert.equal((await ci.commands.run('curl -s -o /dev/null -w "%{http_code}" http://localhost:49983/health')).stdout, '204');
    // no Jupyter in a base sandbox: nothing answers there
    await assert.rejects(a.commands.run('curl -s http://localhost:49999/health'), (e) => e.exitCode === 7);
  } finally {
    await Promise.all([a.kill(), b.kill(), ci.kill()].map((p) => p.catch(() => {})));
  }
});

test('pty resize: the terminal takes the new size and its program gets SIGWINCH; no pty, envd\'s internal error', async () => {
  await withSandbox(async (sbx) => {
    let out = '';
    const enc = (s) => new TextEncoder().encode(s);
    const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += Buffer.from(d).toString(); }, timeoutMs: 15000 });
    await sbx.pty.sendInput(h.pid, enc("trap 'echo got-winch' WINCH; stty size\n"));
    await until(() => /24 80\r\n/.test(out), 'the first size');
    await sbx.pty.resize(h.pid, { cols: 132, rows: 43 });
    await sbx.pty.sendInput(h.pid, enc('stty size; tput cols; exit\n'));
    assert.equal((await h.wait()).exitCode, 0);
    assert.match(out, /43 132\r\n/, out);
    assert.match(out, /\r\n132\r\n/, 'what programs ask the terminal for');
    assert.match(out, /got-winch/, 'the shell was told');
    const bg = await sbx.commands.run('sleep 30', { background: true });
    await assert.rejects(sbx.pty.resize(bg.pid, { cols: 10, rows: 10 }), /error resizing tty: tty not assigned to process/);
    await bg.kill();
  });
});

test('code contexts: javascript and typescript on node, bash, each with its cwd and env; r refused as the server would', async () => {
  const sbx = await CodeSandbox.create({ ...opts, envs: { SBX_ENV: 'sandbox-wide' } });
  try {
    const langs = (await sbx.listCodeContexts()).map((c) => c.language);
    assert.ok(langs.includes('python') && langs.includes('javascript'), `default contexts: ${langs}`);

    const js = await sbx.createCodeContext({ language: 'js', cwd: '/tmp' });
    assert.equal(js.language, 'javascript');
    assert.equal(js.cwd, '/tmp');
    await sbx.runCode('const answer = 41', { context: js });
    const r1 = await sbx.runCode('console.log("from node"); answer + 1', { context: js });
    assert.deepEqual(r1.logs.stdout, ['from node\n']);
    assert.equal(r1.text, '42', 'declarations stay for the next cell');
    assert.equal((await sbx.runCode('process.cwd()', { context: js })).text, '/tmp');
    assert.equal((await sbx.runCode('await Promise.resolve("awaited")', { context: js })).text, 'awaited');
    assert.deepEqual((await sbx.runCode("import { readFileSync } from 'fs'\nconsole.log(typeof readFileSync)", { language: 'js' })).logs.stdout, ['function\n']);
    assert.equal((await sbx.runCode('process.env.SBX_ENV + "/" + process.env.CALL_ENV', { context: js, envs: { CALL_ENV: 'call' } })).text, 'sandbox-wide/call');
    assert.equal((await sbx.runCode('String(process.env.CALL_ENV)', { context: js })).text, 'undefined', 'a call\'s env is gone after it');
    const thrown = await sbx.runCode('throw new TypeError("bad js")', { context: js });
    assert.equal(thrown.error.name, 'TypeError');
    assert.equal(thrown.error.value, 'bad js');

    const ts = await sbx.runCode('const message: string = "typed"; console.log(message)', { language: 'ts' });
    assert.deepEqual(ts.logs.stdout, ['typed\n']);

    const bash = await sbx.createCodeContext({ language: 'bash', cwd: '/home/user' });
    assert.deepEqual((await sbx.runCode('pwd', { context: bash })).logs.stdout, ['/home/user\n']);
    await sbx.runCode('cd /tmp && export KEPT=yes', { context: bash });
    assert.deepEqual((await sbx.runCode('echo $PWD $KEPT $SBX_ENV', { context: bash })).logs.stdout, ['/tmp yes sandbox-wide\n']);
    assert.deepEqual((await sbx.runCode('echo $FOO', { language: 'bash', envs: { FOO: 'bar' } })).logs.stdout, ['bar\n']);
    assert.deepEqual((await sbx.runCode('echo ${FOO:-unset}', { language: 'bash' })).logs.stdout, ['unset\n']);
    const failed = await sbx.runCode('false', { context: bash });
    assert.ok(failed.error, 'a non-zero status is an error');

    // IPython's shell escapes in a Python cell
    assert.deepEqual((await sbx.runCode('!echo escaped')).logs.stdout, ['escaped\n']);
    assert.equal((await sbx.runCode('lines = !printf "a\\nb\\n"\nlines')).text, "['a', 'b']");

    // the server's 500 carries jupyter_server's words (the SDK's error keeps only the status)
    await assert.rejects(sbx.runCode('getwd()', { language: 'r' }), /500/);
    await assert.rejects(sbx.createCodeContext({ language: 'java' }), /500/);
    const raw = await fetch(`${emu.url}/contexts`, { method: 'POST', body: JSON.stringify({ language: 'r' }),
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49999', 'Content-Type': 'application/json' } });
    assert.equal(raw.status, 500);
    assert.equal(await raw.text(), 'Failed to create context: {"message": "The \'r\' kernel is not available. Please pick another suitable '
      + 'kernel instead, or install that kernel.", "short_message": "r not found"}');
  } finally {
    await sbx.kill();
  }
});

// Loopback servers standing for the outside: 127.0.0.2 and 127.0.0.3 (127.0.0.1 is the sandbox's own).
async function targets() {
  const servers = await Promise.all(['127.0.0.2', '127.0.0.3'].map((host) => new Promise((resolve) => {
    const srv = http.createServer((q, r) => r.end(host));
    srv.listen(0, host, () => resolve(srv));
  })));
  const [a, b] = servers.map((srv) => `http://${srv.address().address}:${srv.address().port}/`);
  return { a, b, close: () => Promise.all(servers.map((srv) => new Promise((r) => srv.close(r)))) };
}

async function reach(sbx, url) {
  try {
    const r = await sbx.commands.run(`curl -s --max-time 5 ${url}`);
    return r.stdout;
  } catch (e) {
    return `refused (exit ${e.exitCode})`;
  }
}

test('egress: allowOut wins over denyOut, denyOut denies, allowInternetAccess=false denies all, updateNetwork replaces the rules', async () => {
  const t = await targets();
  try {
    await withSandbox(async (sbx) => {
      assert.equal(await reach(sbx, t.a), '127.0.0.2', 'allowed, over deny-all');
      assert.match(await reach(sbx, t.b), /^refused/);
      await sbx.updateNetwork({ denyOut: ['127.0.0.2/32'] });
      assert.match(await reach(sbx, t.a), /^refused/, 'the new rules: .2 denied');
      assert.equal(await reach(sbx, t.b), '127.0.0.3', 'and the old deny-all gone');
      await sbx.updateNetwork({});
      assert.equal(await reach(sbx, t.a), '127.0.0.2', 'no fields: no rules');
    }, { network: { denyOut: ['0.0.0.0/0'], allowOut: ['127.0.0.2'] } });
    await withSandbox(async (sbx) => {
      assert.equal(await reach(sbx, t.a), '127.0.0.2');
      assert.match(await reach(sbx, t.b), /^refused/);
      const py = await sbx.commands.run(`python3 -c "import urllib.request as u\ntry:\n  u.urlopen('${t.b}', timeout=5)\nexcept OSError as e:\n  print('blocked', e)"`);
      assert.match(py.stdout, /^blocked .*Connection refused/, 'python is held to the rules too');
    }, { network: { denyOut: ['127.0.0.3'] } });
    await withSandbox(async (sbx) => {
      assert.match(await reach(sbx, t.a), /^refused/);
      assert.match(await reach(sbx, t.b), /^refused/);
    }, { allowInternetAccess: false });
    await assert.rejects(BaseSandbox.create('base', { ...opts, network: { allowOut: ['example.com'] } }),
      /When specifying allowed domains in allow out, you must include 'ALL_TRAFFIC' in deny out/);
    await assert.rejects(BaseSandbox.create('base', { ...opts, network: { denyOut: ['example.com'] } }), /invalid denied CIDR example.com/);
  } finally {
    await t.close();
  }
});

test('nothing leaked: no live sandboxes or child processes', async () => {
  const s = await until(async () => { const x = await adm('GET', '/_emulator/state'); return x.sandboxes.length === 0 && x.children === 0 && x; }, 'an empty emulator');
  assert.deepEqual(s.sandboxes, []);
});
