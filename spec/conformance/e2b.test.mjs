// Conformance: the official E2B JS SDKs (e2b, @e2b/code-interpreter; versions pinned in
// spec/package.json) against glsb's E2B emulator. A scenario the SDK rejects is an emulator bug.
//
//   cd spec && npm ci && node --test conformance/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Sandbox } from '@e2b/code-interpreter';
import {
  Sandbox as BaseSandbox, Template, AuthenticationError, CommandExitError, TimeoutError,
  RateLimitError, SandboxNotFoundError, FileNotFoundError, BuildError, ServiceBusyError,
} from 'e2b';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const KEY = 'e2b_conformance_key';

for (const k of ['E2B_API_KEY', 'E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_DOMAIN', 'E2B_DEBUG', 'E2B_ACCESS_TOKEN']) delete process.env[k];

let emu = null;
let base = null;
let opts = null;

async function startEmulator(keys = [KEY]) {
  const args = ['e2b', '--port', '0', '--exit-with-parent', ...keys.flatMap((k) => ['--api-key', k])];
  const child = spawn(path.join(ROOT, 'scripts', 'emulator'), args, {
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
  return { child, url: m[1], stderr: () => stderr };
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

async function withSandbox(fn, extra = {}) {
  const sbx = await Sandbox.create({ ...opts, ...extra });
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => {});
  }
}

before(async () => {
  emu = await startEmulator();
  base = emu.url;
  opts = { apiKey: KEY, apiUrl: base, sandboxUrl: base, requestTimeoutMs: 20000 };
});

after(async () => {
  if (!emu) return;
  const exited = new Promise((r) => emu.child.once('exit', r));
  emu.child.kill('SIGTERM');
  await exited;
});

test('the emulator runs sandboxes under bubblewrap (sandbox paths agree between files and commands)', async () => {
  const s = await state();
  assert.equal(s.bwrap, true, 'bubblewrap (bwrap) is missing or cannot create namespaces here: install it (scripts/install-deps) - '
    + 'without it, absolute paths inside commands are host paths and the file scenarios below cannot hold');
});

test('create returns a running sandbox that getInfo, list and isRunning see', async () => {
  await withSandbox(async (sbx) => {
    assert.match(sbx.sandboxId, /^i[a-z0-9]+$/);
    assert.equal(await sbx.isRunning(), true);
    const info = await BaseSandbox.getInfo(sbx.sandboxId, opts);
    assert.equal(info.sandboxId, sbx.sandboxId);
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { suite: 'conformance' });
    assert.ok(info.endAt.getTime() > Date.now() + 200_000, 'default timeout is 300 s');
    const items = await BaseSandbox.list({ ...opts, query: { metadata: { suite: 'conformance' } } }).nextItems();
    assert.ok(items.some((s) => s.sandboxId === sbx.sandboxId));
    const none = await BaseSandbox.list({ ...opts, query: { metadata: { suite: 'other' } } }).nextItems();
    assert.equal(none.length, 0);
    // Sandbox-wide env vars reach commands and the code interpreter.
    assert.equal((await sbx.commands.run('echo $GLSB_CREATE_ENV')).stdout, 'c\n');
    assert.equal((await sbx.runCode('import os\nos.environ["GLSB_CREATE_ENV"]')).text, 'c');
  }, { metadata: { suite: 'conformance' }, envs: { GLSB_CREATE_ENV: 'c' } });
});

test('runCode keeps state across calls and streams stdout', async () => {
  await withSandbox(async (sbx) => {
    const first = await sbx.runCode('x = 21\nprint("set x")');
    assert.equal(first.error, undefined);
    assert.deepEqual(first.logs.stdout, ['set x\n']);
    const seen = [];
    const second = await sbx.runCode('x * 2', { onStdout: (o) => seen.push(o.line) });
    assert.equal(second.error, undefined);
    assert.equal(second.text, '42');
    assert.equal(second.results.length, 1);
    assert.equal(second.results[0].isMainResult, true);
    assert.ok(second.executionCount >= 2);
    const third = await sbx.runCode('import sys\nprint("a"); print("b", file=sys.stderr)', { onStdout: (o) => seen.push(o.line) });
    assert.deepEqual(third.logs.stdout, ['a\n']);
    assert.deepEqual(third.logs.stderr, ['b\n']);
    assert.deepEqual(seen, ['a\n']);
  });
});

test('code contexts, env vars, rich results, child-process output, syntax errors', async () => {
  await withSandbox(async (sbx) => {
    const ctx = await sbx.createCodeContext({ cwd: '/tmp' });
    assert.ok(ctx.id);
    assert.ok((await sbx.listCodeContexts()).some((c) => c.language === 'python' && c.id !== ctx.id), 'default python context');
    assert.equal(ctx.cwd, '/tmp');
    await sbx.runCode('only_here = 1', { context: ctx });
    assert.equal((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text, '/tmp');
    const other = await sbx.runCode('only_here');
    assert.equal(other.error.name, 'NameError');
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    await sbx.restartCodeContext(ctx);
    assert.equal((await sbx.runCode('"only_here" in dir()', { context: ctx })).text, 'False');
    await sbx.removeCodeContext(ctx);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
    // (A short requestTimeoutMs: on an error status the SDK leaves its request timer running,
    // which would keep this process alive for the default 20 s used here.)
    await assert.rejects(sbx.runCode('1', { context: ctx, requestTimeoutMs: 1000 }), /404|not found/i);

    const env = await sbx.runCode('import os\nos.environ.get("GLSB_X")', { envs: { GLSB_X: 'from-env' } });
    assert.equal(env.text, 'from-env');
    assert.equal((await sbx.runCode('import os\nos.environ.get("GLSB_X")')).text, undefined, 'env_vars last one execution');

    const rich = await sbx.runCode('class H:\n    def _repr_html_(self):\n        return "<b>hi</b>"\n    def __repr__(self):\n        return "H()"\ndisplay(H())\nH()');
    assert.equal(rich.results.length, 2);
    assert.equal(rich.results[0].isMainResult, false);
    assert.equal(rich.results[1].isMainResult, true);
    assert.equal(rich.results[1].html, '<b>hi</b>');
    assert.equal(rich.text, 'H()');

    const sub = await sbx.runCode('import subprocess\nsubprocess.run(["echo", "from-child"])\nprint("after")');
    assert.equal(sub.logs.stdout.join(''), 'from-child\nafter\n');

    const syn = await sbx.runCode('def broken(:\n    pass');
    assert.equal(syn.error.name, 'SyntaxError');

    const uni = await sbx.runCode('print("h\u00e9llo \u{1F600}")\n"\u00fc"');
    assert.deepEqual(uni.logs.stdout, ['h\u00e9llo \u{1F600}\n']);
    assert.equal(uni.text, '\u00fc');
  });
});

// matplotlib and pandas for the kernel's python3 (this machine's): scripts/install-deps installs them
const HAS_PLOTTING = spawnSync('/usr/bin/python3', ['-c', 'import matplotlib, pandas']).status === 0;

test('a figure left open comes back as the SDK reads E2B\'s: base64 png, chart with E2B\'s fields, DataFrame data',
  { skip: HAS_PLOTTING ? false : 'needs python3-matplotlib and python3-pandas (scripts/install-deps)' }, async () => {
  await withSandbox(async (sbx) => {
    const fig = await sbx.runCode('import matplotlib.pyplot as plt\n'
      + 'plt.bar(["Author A", "Author B"], [100, 200], label="Books Sold")\nplt.title("Sales")\nplt.xlabel("Authors")');
    assert.equal(fig.error, undefined);
    assert.equal(fig.results.length, 2); // the main result (the xlabel's Text), then the figure at the end
    const shown = fig.results[1];
    assert.equal(shown.isMainResult, false);
    assert.equal(Buffer.from(shown.png, 'base64').subarray(0, 8).toString('latin1'), '\x89PNG\r\n\x1a\n');
    assert.deepEqual(shown.formats(), ['png']); // the SDK lists neither text nor chart
    assert.equal(shown.text, '<Figure size 640x480 with 1 Axes>');
    assert.equal(shown.chart.type, 'bar');
    assert.equal(shown.chart.title, 'Sales');
    assert.equal(shown.chart.x_label, 'Authors');
    assert.deepEqual(shown.chart.elements, [{ label: 'Author A', group: 'Books Sold', value: 100 },
      { label: 'Author B', group: 'Books Sold', value: 200 }]);
    const df = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})');
    assert.deepEqual(df.results[0].data, { a: [1, 2] });
    assert.match(df.results[0].html, /<table/);
  });
});

test('a failing cell resolves with name, value and traceback (not thrown)', async () => {
  await withSandbox(async (sbx) => {
    let fromCallback = null;
    const ex = await sbx.runCode('def f():\n    return 1 / 0\nf()', { onError: (e) => { fromCallback = e; } });
    assert.ok(ex.error, 'execution.error is set');
    assert.equal(ex.error.name, 'ZeroDivisionError');
    assert.equal(ex.error.value, 'division by zero');
    assert.match(ex.error.traceback, /ZeroDivisionError/);
    assert.match(ex.error.traceback, /in f/);
    assert.equal(fromCallback && fromCallback.name, 'ZeroDivisionError');
    const after = await sbx.runCode('"still alive"');
    assert.equal(after.text, 'still alive');
  });
});

test('commands.run reports stdout, stderr and exit code; non-zero throws CommandExitError', async () => {
  await withSandbox(async (sbx) => {
    const ok = await sbx.commands.run('echo out; echo err >&2; pwd');
    assert.equal(ok.exitCode, 0);
    assert.equal(ok.stdout, 'out\n/home/user\n');
    assert.equal(ok.stderr, 'err\n');
    const streamed = [];
    await sbx.commands.run('printf "1\\n"; printf "2\\n"', { onStdout: (d) => streamed.push(d) });
    assert.equal(streamed.join(''), '1\n2\n');
    await assert.rejects(sbx.commands.run('echo partial; echo bad >&2; exit 3'), (e) => {
      assert.ok(e instanceof CommandExitError, `got ${e && e.constructor.name}: ${e}`);
      assert.equal(e.exitCode, 3);
      assert.equal(e.stdout, 'partial\n');
      assert.equal(e.stderr, 'bad\n');
      return true;
    });
    const env = await sbx.commands.run('echo "$GREETING from $(whoami 2>/dev/null || echo someone)"', { envs: { GREETING: 'hello' }, cwd: '/tmp' });
    assert.match(env.stdout, /^hello from /);
  });
});

test('a command past its timeout is killed and the SDK raises TimeoutError', async () => {
  await withSandbox(async (sbx) => {
    const t0 = Date.now();
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 700 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e && e.constructor.name}: ${e}`);
      return true;
    });
    assert.ok(Date.now() - t0 < 5000);
    // The emulator killed the process (Connect-Timeout-Ms is the process lifetime).
    let procs = null;
    for (let i = 0; i < 20; i++) {
      const s = await state();
      procs = s.sandboxes.find((x) => x.sandboxID === sbx.sandboxId).processes;
      if (procs.length === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(procs, []);
  });
});

test('background command: list, kill', async () => {
  await withSandbox(async (sbx) => {
    const h = await sbx.commands.run('sleep 30', { background: true, timeoutMs: 0 });
    const listed = await sbx.commands.list();
    assert.ok(listed.some((p) => p.pid === h.pid));
    assert.equal(await sbx.commands.kill(h.pid), true);
    await assert.rejects(h.wait(), (e) => e instanceof CommandExitError);
    assert.equal(await sbx.commands.kill(999999), false);
  });
});

test('stdin: sendStdin then closeStdin reach the process; connect() attaches to a running one', async () => {
  await withSandbox(async (sbx) => {
    const h = await sbx.commands.run('cat; echo "<eof>"', { background: true, stdin: true });
    await sbx.commands.sendStdin(h.pid, 'line one\n');
    await sbx.commands.closeStdin(h.pid);
    const r = await h.wait();
    assert.equal(r.stdout, 'line one\n<eof>\n');

    const bg = await sbx.commands.run('sleep 0.4; echo late', { background: true });
    const attached = await sbx.commands.connect(bg.pid);
    const done = await attached.wait();
    assert.equal(done.exitCode, 0);
    assert.match(done.stdout, /late/);
  });
});

test('pty: a terminal of the asked size, input through sendInput', async () => {
  await withSandbox(async (sbx) => {
    let out = '';
    const h = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => { out += Buffer.from(d).toString(); }, timeoutMs: 10000 });
    await sbx.pty.sendInput(h.pid, new TextEncoder().encode('echo "pty-$((6*7))"; stty size; exit\n'));
    const r = await h.wait();
    assert.equal(r.exitCode, 0);
    assert.match(out, /pty-42\r\n/);
    assert.match(out, /30 100\r\n/);
  });
});

test('pause keeps files; connect resumes; a paused sandbox is not reachable', async () => {
  const sbx = await BaseSandbox.create(opts);
  try {
    await sbx.files.write('/home/user/keep.txt', 'kept');
    assert.equal(await sbx.pause(), true);
    assert.equal(await BaseSandbox.pause(sbx.sandboxId, opts), false, 'already paused -> false');
    assert.equal((await BaseSandbox.getInfo(sbx.sandboxId, opts)).state, 'paused');
    assert.equal(await sbx.isRunning(), false);
    const again = await BaseSandbox.connect(sbx.sandboxId, opts);
    assert.equal((await BaseSandbox.getInfo(sbx.sandboxId, opts)).state, 'running');
    assert.equal(await again.files.read('/home/user/keep.txt'), 'kept');
  } finally {
    await BaseSandbox.kill(sbx.sandboxId, opts);
  }
});

test('lifecycle onTimeout pause: expiry pauses; autoResume wakes it on traffic', async () => {
  const sbx = await BaseSandbox.create({ ...opts, timeoutMs: 1000, lifecycle: { onTimeout: 'pause', autoResume: true } });
  try {
    await sbx.files.write('/home/user/p.txt', 'persisted');
    await new Promise((r) => setTimeout(r, 1600));
    const info = await BaseSandbox.getInfo(sbx.sandboxId, opts);
    assert.equal(info.state, 'paused');
    assert.equal(info.lifecycle.onTimeout, 'pause');
    assert.equal(await sbx.files.read('/home/user/p.txt'), 'persisted');
    assert.equal((await BaseSandbox.getInfo(sbx.sandboxId, opts)).state, 'running');
  } finally {
    await BaseSandbox.kill(sbx.sandboxId, opts);
  }
});

test('files: write then read, list, exists, makeDir, rename, remove; commands see the same files', async () => {
  await withSandbox(async (sbx) => {
    const w = await sbx.files.write('/home/user/hello.txt', 'hi there\n');
    assert.equal(w.path, '/home/user/hello.txt');
    assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hi there\n');
    const bytes = await sbx.files.read('hello.txt', { format: 'bytes' });
    assert.equal(Buffer.from(bytes).toString(), 'hi there\n');
    assert.equal((await sbx.commands.run('cat /home/user/hello.txt')).stdout, 'hi there\n');
    await sbx.commands.run('mkdir -p /home/user/d && echo made > /home/user/d/by-cmd.txt');
    assert.equal(await sbx.files.read('/home/user/d/by-cmd.txt'), 'made\n');
    const many = await sbx.files.write([
      { path: '/home/user/d/a.txt', data: 'A' },
      { path: '/home/user/d/b.bin', data: new Uint8Array([0, 1, 2, 255]) },
    ]);
    assert.equal(many.length, 2);
    assert.deepEqual([...(await sbx.files.read('/home/user/d/b.bin', { format: 'bytes' }))], [0, 1, 2, 255]);
    const entries = await sbx.files.list('/home/user');
    const names = entries.map((e) => e.name).sort();
    assert.ok(names.includes('hello.txt') && names.includes('d'), names.join(','));
    const hello = entries.find((e) => e.name === 'hello.txt');
    assert.equal(hello.type, 'file');
    assert.equal(hello.size, 9);
    assert.equal(hello.path, '/home/user/hello.txt');
    assert.equal(entries.find((e) => e.name === 'd').type, 'dir');
    assert.equal(await sbx.files.exists('/home/user/hello.txt'), true);
    assert.equal(await sbx.files.exists('/home/user/nope.txt'), false);
    assert.equal(await sbx.files.makeDir('/home/user/newdir'), true);
    assert.equal(await sbx.files.makeDir('/home/user/newdir'), false);
    const moved = await sbx.files.rename('/home/user/hello.txt', '/home/user/newdir/hello.txt');
    assert.equal(moved.path, '/home/user/newdir/hello.txt');
    await sbx.files.remove('/home/user/newdir');
    assert.equal(await sbx.files.exists('/home/user/newdir'), false);
    await assert.rejects(sbx.files.read('/home/user/missing.txt'), (e) => e instanceof FileNotFoundError);
    const info = await sbx.files.getInfo('/home/user/d/a.txt');
    assert.equal(info.size, 1);
  });
});

test('files.watchDir streams create/write/remove events', async () => {
  await withSandbox(async (sbx) => {
    await sbx.files.makeDir('/home/user/w');
    const events = [];
    const handle = await sbx.files.watchDir('/home/user/w', (e) => events.push(e), { timeoutMs: 0 });
    await sbx.files.write('/home/user/w/new.txt', 'data');
    await sbx.commands.run('rm /home/user/w/new.txt');
    for (let i = 0; i < 50 && !events.some((e) => e.type === 'remove'); i++) await new Promise((r) => setTimeout(r, 50));
    await handle.stop();
    const kinds = events.filter((e) => e.name === 'new.txt').map((e) => e.type);
    assert.ok(kinds.includes('create'), JSON.stringify(events));
    assert.ok(kinds.includes('write'), JSON.stringify(events));
    assert.ok(kinds.includes('remove'), JSON.stringify(events));
  });
});

test('setTimeout moves the end of life; the sandbox expires at its timeout', async () => {
  await withSandbox(async (sbx) => {
    await sbx.setTimeout(120_000);
    const info = await sbx.getInfo();
    const left = info.endAt.getTime() - Date.now();
    assert.ok(left > 110_000 && left <= 121_000, `endAt in ${left} ms`);
    await sbx.runCode('1');
    await sbx.commands.run('sleep 60', { background: true, timeoutMs: 0 });
    const root = (await state()).sandboxes.find((s) => s.sandboxID === sbx.sandboxId).root;
    await sbx.setTimeout(1000);
    await new Promise((r) => setTimeout(r, 1800));
    assert.equal(await sbx.isRunning(), false);
    assert.ok(!fs.existsSync(root), 'expired sandbox temp dir removed');
    await assert.rejects(BaseSandbox.getInfo(sbx.sandboxId, opts), (e) => e instanceof SandboxNotFoundError);
  });
});

test('kill removes the sandbox; kill of an unknown sandbox returns false', async () => {
  const sbx = await Sandbox.create(opts);
  await sbx.runCode('1');
  await sbx.commands.run('sleep 30', { background: true });
  const root = (await state()).sandboxes.find((s) => s.sandboxID === sbx.sandboxId).root;
  assert.ok(fs.existsSync(root));
  assert.equal(await sbx.kill(), true);
  assert.equal(await BaseSandbox.kill(sbx.sandboxId, opts), false);
  assert.equal(await BaseSandbox.kill('inotasandbox0000000', opts), false);
  assert.ok(!fs.existsSync(root), 'sandbox temp dir removed');
  assert.equal((await state()).sandboxes.some((s) => s.sandboxID === sbx.sandboxId), false);
  await assert.rejects(sbx.commands.run('true'));
});

test('the code interpreter port is open only on code-interpreter templates', async () => {
  const plain = await BaseSandbox.create('base', opts);
  try {
    const asCi = await Sandbox.connect(plain.sandboxId, opts);
    await assert.rejects(asCi.runCode('1', { requestTimeoutMs: 2000 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e && e.constructor.name}: ${e}`);
      assert.match(e.message, /port is not open/);
      return true;
    });
    assert.equal((await plain.commands.run('echo envd-ok')).stdout, 'envd-ok\n');
  } finally {
    await plain.kill();
  }
});

test('a wrong API key raises AuthenticationError', async () => {
  await assert.rejects(Sandbox.create({ ...opts, apiKey: 'e2b_wrong_key' }), (e) => {
    assert.ok(e instanceof AuthenticationError, `got ${e && e.constructor.name}: ${e}`);
    assert.match(e.message, /Invalid API key/);
    return true;
  });
  await assert.rejects(BaseSandbox.kill('ixxxxxxxxxxxxxxxxxxx', { ...opts, apiKey: 'e2b_wrong_key' }), AuthenticationError);
});

test('429 with Retry-After is retried by the SDK; without it, RateLimitError', async () => {
  await fault({ method: 'POST', path: '^/v2/sandboxes$', action: 'status', status: 429, retryAfter: 1 });
  const t0 = Date.now();
  const sbx = await BaseSandbox.create(opts);
  const took = Date.now() - t0;
  await sbx.kill();
  assert.ok(took >= 900, `retried after Retry-After (took ${took} ms)`);
  assert.equal((await adminJson('GET', '/_emulator/faults'))[0].remaining, 0);

  await adminJson('DELETE', '/_emulator/faults');
  await fault({ method: 'POST', path: '^/v2/sandboxes$', status: 429 });
  await assert.rejects(BaseSandbox.create(opts), (e) => {
    assert.ok(e instanceof RateLimitError, `got ${e && e.constructor.name}: ${e}`);
    return true;
  });

  assert.equal((await adminJson('GET', '/_emulator/faults'))[0].fired, 1, 'no Retry-After: no retry');

  // 429s all the way: 1 attempt + 3 retries (the SDK default), then RateLimitError.
  await adminJson('DELETE', '/_emulator/faults');
  await fault({ method: 'POST', path: '^/v2/sandboxes$', status: 429, retryAfter: 0, times: -1 });
  await assert.rejects(BaseSandbox.create(opts), RateLimitError);
  assert.equal((await adminJson('GET', '/_emulator/faults'))[0].fired, 4);

  // 503 is never retried.
  await adminJson('DELETE', '/_emulator/faults');
  await fault({ method: 'POST', path: '^/v2/sandboxes$', status: 503, retryAfter: 1, times: -1 });
  await assert.rejects(BaseSandbox.create(opts), ServiceBusyError);
  assert.equal((await adminJson('GET', '/_emulator/faults'))[0].fired, 1);
  await adminJson('DELETE', '/_emulator/faults');
});

test('Template.build (fromImage, copy, runCmd, setEnvs) then create from it', async () => {
  const ctx = fs.mkdtempSync(path.join(os.tmpdir(), 'glsb-e2b-conf-ctx-'));
  try {
    fs.writeFileSync(path.join(ctx, 'hello.txt'), 'hello from the build context\n');
    fs.mkdirSync(path.join(ctx, 'pkg'));
    fs.writeFileSync(path.join(ctx, 'pkg', 'mod.py'), 'VALUE = 7\n');
    const tpl = Template({ fileContextPath: ctx })
      .fromImage('python:3.12')
      .copy('hello.txt', '/app/hello.txt')
      .copy('pkg', '/app/pkg')
      .setEnvs({ GLSB_TEMPLATE: 'yes' })
      .runCmd('cat /app/hello.txt > /app/copied.txt && echo built-step-output');
    const logs = [];
    const name = 'glsb-conformance-tpl';
    const built = await Template.build(tpl, name, { ...opts, onBuildLogs: (l) => logs.push(l.message) });
    assert.equal(built.name, name);
    assert.ok(built.templateId && built.buildId);
    assert.ok(logs.some((m) => m.includes('built-step-output')), logs.join('\n'));
    assert.equal(await Template.exists(name, opts), true);
    assert.equal(await Template.exists('glsb-no-such-template', opts), false);

    const sbx = await BaseSandbox.create(name, opts);
    try {
      assert.equal(await sbx.files.read('/app/copied.txt'), 'hello from the build context\n');
      assert.equal(await sbx.files.read('/app/pkg/mod.py'), 'VALUE = 7\n');
      assert.equal((await sbx.commands.run('echo $GLSB_TEMPLATE')).stdout, 'yes\n');
    } finally {
      await sbx.kill();
    }

    // A template on top of it: files inherited, workdir, start command awaited via the ready command.
    const child = Template()
      .fromTemplate(name)
      .setWorkdir('/app')
      .runCmd('echo two > two.txt')
      .setStartCmd('sleep 0.3; echo started > /tmp/started.txt', 'test -f /tmp/started.txt');
    await Template.build(child, 'glsb-conformance-child', opts);
    const sbx2 = await BaseSandbox.create('glsb-conformance-child', opts);
    try {
      assert.equal(await sbx2.files.read('/app/copied.txt'), 'hello from the build context\n');
      assert.equal(await sbx2.files.read('/app/two.txt'), 'two\n');
      assert.equal((await sbx2.commands.run('pwd')).stdout, '/app\n');
      assert.equal(await sbx2.files.read('/tmp/started.txt'), 'started\n');
    } finally {
      await sbx2.kill();
    }

    // The same files again: the upload is skipped (hash already present).
    const again = [];
    await Template.build(tpl, name, { ...opts, onBuildLogs: (l) => again.push(l.message) });
    assert.ok(again.some((m) => /Skipping upload/.test(m)), again.join('\n'));

    // A failing step surfaces as BuildError.
    const bad = Template({ fileContextPath: ctx }).fromImage('python:3.12').runCmd('exit 7');
    await assert.rejects(Template.build(bad, 'glsb-conformance-bad', opts), (e) => e instanceof BuildError);
    await assert.rejects(BaseSandbox.create('glsb-conformance-bad', opts), /404|not found/);
  } finally {
    fs.rmSync(ctx, { recursive: true, force: true });
  }
});

test('runCode past its timeoutMs raises TimeoutError; the kernel is interrupted and keeps its state', async () => {
  await withSandbox(async (sbx) => {
    await sbx.runCode('kept = "yes"');
    await assert.rejects(sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 800 }), (e) => {
      assert.ok(e instanceof TimeoutError, `got ${e && e.constructor.name}: ${e}`);
      return true;
    });
    const t0 = Date.now();
    const next = await sbx.runCode('kept');
    assert.equal(next.text, 'yes');
    assert.ok(Date.now() - t0 < 5000, 'the interrupted cell did not block the next one');
  });
});

test('faults: sandbox killed behind the client\'s back, mid-execution and between calls', async () => {
  const sbx = await Sandbox.create(opts);
  await fault({ plane: 'jupyter', path: '^/execute$', action: 'kill_sandbox', afterMs: 300 });
  await assert.rejects(sbx.runCode('import time\ntime.sleep(10)'), (e) => {
    assert.ok(e instanceof TimeoutError, `got ${e && e.constructor.name}: ${e}`);
    return true;
  });
  assert.equal(await sbx.isRunning(), false);

  const other = await Sandbox.create(opts);
  await adminJson('POST', `/_emulator/sandboxes/${other.sandboxId}/kill`);
  // The proxy's 502 on the first read of a stream -> "Sandbox is probably not running anymore".
  await assert.rejects(other.commands.run('true'), (e) => {
    assert.ok(e instanceof SandboxNotFoundError, `got ${e && e.constructor.name}: ${e}`);
    return true;
  });
  await assert.rejects(other.files.read('/home/user/x'), (e) => {
    assert.ok(e instanceof TimeoutError, `got ${e && e.constructor.name}: ${e}`);
    return true;
  });
  assert.equal(await BaseSandbox.kill(other.sandboxId, opts), false);
});

test('faults: status codes, delays and cut connections as the SDK sees them', async () => {
  await fault({ method: 'POST', path: '^/v2/sandboxes$', status: 503 });
  await assert.rejects(BaseSandbox.create(opts), (e) => {
    assert.ok(e instanceof ServiceBusyError, `got ${e && e.constructor.name}: ${e}`);
    return true;
  });
  await fault({ method: 'POST', path: '^/v2/sandboxes$', status: 500 });
  await assert.rejects(BaseSandbox.create(opts), /500/);
  await fault({ method: 'POST', path: '^/v2/sandboxes$', action: 'cut_before_response' });
  await assert.rejects(BaseSandbox.create(opts));
  assert.equal((await state()).sandboxes.length, 0, 'a request cut before the response created nothing');

  await withSandbox(async (sbx) => {
    // A cut in the middle of the NDJSON stream.
    await fault({ plane: 'jupyter', path: '^/execute$', action: 'cut_after_bytes', bytes: 60 });
    await assert.rejects(sbx.runCode('print("x" * 500)'));
    // Slow stream: frames of a command arrive spaced out.
    await fault({ plane: 'envd', path: 'Process/Start$', action: 'slow_stream', frameDelayMs: 150 });
    const t0 = Date.now();
    const r = await sbx.commands.run('echo a; sleep 0.05; echo b');
    assert.equal(r.stdout, 'a\nb\n');
    assert.ok(Date.now() - t0 >= 4 * 150, `slow stream took ${Date.now() - t0} ms`);
    // The edge proxy's 502 on the data plane.
    await fault({ plane: 'envd', path: '^/files$', status: 502 });
    await assert.rejects(sbx.files.read('/home/user/x'), (e) => e instanceof TimeoutError);
    // A delay longer than the request timeout.
    await fault({ method: 'GET', path: '^/sandboxes/', action: 'delay', delayMs: 1500 });
    await assert.rejects(BaseSandbox.getInfo(sbx.sandboxId, { ...opts, requestTimeoutMs: 300 }));
    assert.equal((await sbx.runCode('1 + 1')).text, '2');
  });
  await adminJson('DELETE', '/_emulator/faults');
});

test('POST /_emulator/reset kills every sandbox, clears faults, forgets built templates', async () => {
  const sbx = await Sandbox.create(opts);
  await sbx.runCode('1');
  await fault({ path: '^/never$', status: 500, times: -1 });
  assert.equal(await Template.exists('glsb-conformance-tpl', opts), true);
  await adminJson('POST', '/_emulator/reset');
  const s = await state();
  assert.deepEqual(s.sandboxes, []);
  assert.deepEqual(s.faults, []);
  assert.equal(await sbx.isRunning(), false);
  assert.equal(await Template.exists('glsb-conformance-tpl', opts), false);
  assert.equal(await Template.exists('code-interpreter-v1', opts), true);
});

test('SIGTERM stops the emulator cleanly: children killed and reaped, temp dirs removed, exit 0', async () => {
  const second = await startEmulator(['e2b_second_key', KEY]);
  const o = { ...opts, apiUrl: second.url, sandboxUrl: second.url };
  // Exactly the keys given are accepted (the default key is not among them).
  await assert.rejects(BaseSandbox.list({ ...o, apiKey: 'e2b_test_key' }).nextItems(), AuthenticationError);
  assert.deepEqual(await BaseSandbox.list({ ...o, apiKey: 'e2b_second_key' }).nextItems(), []);
  const sbx = await Sandbox.create(o);
  await sbx.runCode('x = 1');
  await sbx.commands.run('sleep 300', { background: true, timeoutMs: 0 });
  const st = await (await fetch(`${second.url}/_emulator/state`)).json();
  const s0 = st.sandboxes[0];
  const pids = [...s0.processes.map((p) => p.pid), ...s0.contexts.map((c) => c.pid)].filter(Boolean);
  assert.ok(pids.length >= 2, JSON.stringify(s0));
  assert.ok(fs.existsSync(s0.root));
  const stateDir = path.dirname(path.dirname(s0.root));
  const code = await new Promise((resolve) => {
    second.child.once('exit', (c, sig) => resolve(sig || c));
    second.child.kill('SIGTERM');
  });
  assert.equal(code, 0);
  assert.ok(!fs.existsSync(stateDir), `state dir ${stateDir} removed`);
  for (const pid of pids) assert.ok(!fs.existsSync(`/proc/${pid}`), `process ${pid} is gone (not even a zombie)`);
});

test('nothing leaked: no live sandboxes or child processes', async () => {
  let s = await state();
  for (let i = 0; i < 20 && (s.sandboxes.length || s.children); i++) {
    await new Promise((r) => setTimeout(r, 100));
    s = await state();
  }
  assert.deepEqual(s.sandboxes.map((x) => x.sandboxID), []);
  assert.equal(s.children, 0);
});
