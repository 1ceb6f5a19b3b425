// Conformance: the official MCP client of the v1 line (@modelcontextprotocol/sdk, pinned in
// spec/package.json) over StdioClientTransport against `glsb-lua --mcp`. What the client rejects is a
// server bug. The session scenario runs on local and on the E2B, OpenSandbox and Bedrock emulators.
//
//   cd spec && npm ci && node --test conformance/mcp.test.mjs
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import Ajv2020 from 'ajv/dist/2020.js';
import { until, sleep } from './emulator.mjs';
import {
  ROOT, tempdir, rm, serverParams, keepStderr, workspaces, owners, alive, hasMatplotlib, text, jsonBlock,
  PROVIDERS, scenario,
} from './mcp_common.mjs';

const SDK_VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'spec', 'node_modules', '@modelcontextprotocol', 'sdk',
  'package.json'), 'utf8')).version;

const dirs = [];
after(() => dirs.forEach(rm));

async function connect(opts = {}) {
  const tmp = opts.tmp || tempdir();
  if (!opts.tmp) dirs.push(tmp);
  const transport = new StdioClientTransport(serverParams(tmp, opts));
  const stderr = keepStderr(transport);
  const client = new Client({ name: 'glsb-conformance', version: '1.0.0' });
  await client.connect(transport);
  await client.listTools(); // the client checks structured results only once it has the schemas
  return { client, transport, tmp, stderr };
}

async function create(client, args = {}) {
  const r = await client.callTool({ name: 'sandbox_create', arguments: args });
  assert.ok(!r.isError, text(r));
  return r.structuredContent.sandbox_id;
}

describe(`MCP, official client @modelcontextprotocol/sdk ${SDK_VERSION} (v1, stdio)`, () => {
  test('initialize: the newest revision the client has, the server named, its guidance given', async () => {
    const { client } = await connect();
    try {
      assert.equal(client.getServerVersion().name, 'glsb');
      const caps = client.getServerCapabilities();
      assert.ok(caps.tools && caps.resources && caps.logging);
      assert.match(client.getInstructions(), /sandbox_create/);
      assert.deepEqual(await client.ping(), {});
      await client.setLoggingLevel('warning');
    } finally { await client.close(); }
  });

  test('tools/list: eleven tools with valid schemas, annotations, in the same order every time', async () => {
    const a = await connect();
    const b = await connect();
    try {
      const one = await a.client.listTools();
      const again = await a.client.listTools();
      const other = await b.client.listTools();
      assert.deepEqual(one, again);
      assert.deepEqual(one, other);
      assert.deepEqual(one.tools.map((t) => t.name), ['sandbox_create', 'sandbox_list', 'sandbox_kill', 'execute_code',
        'execute_command', 'files_write', 'files_read', 'files_list', 'command_start', 'command_output', 'command_kill']);
      // strict: an unknown keyword (a glsb.options word leaking into a schema) fails the compile
      const ajv = new Ajv2020({ strict: true, allErrors: true });
      for (const t of one.tools) {
        assert.match(t.name, /^[A-Za-z0-9_.-]{1,128}$/);
        assert.equal(t.inputSchema.type, 'object');
        assert.equal(t.inputSchema.additionalProperties, false);
        assert.doesNotThrow(() => ajv.compile(t.inputSchema), t.name);
        assert.equal(t.outputSchema.type, 'object');
        assert.doesNotThrow(() => ajv.compile(t.outputSchema), t.name);
        assert.ok(t.title && t.description, t.name);
        assert.equal(typeof t.annotations.readOnlyHint, 'boolean', t.name);
      }
      const byName = Object.fromEntries(one.tools.map((t) => [t.name, t]));
      assert.equal(byName.sandbox_kill.annotations.destructiveHint, true);
      assert.equal(byName.files_read.annotations.readOnlyHint, true);
      assert.deepEqual(byName.execute_code.inputSchema.required, ['code', 'sandbox_id']);
    } finally { await a.client.close(); await b.client.close(); }
  });

  test('a stateful session: x = 40, then x + 2', async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x = 40' } });
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x + 2' } });
      assert.equal(r.isError, undefined);
      assert.equal(r.structuredContent.status, 'success');
      assert.match(text(r), /^value: 42$/m);
      assert.deepEqual(jsonBlock(r), r.structuredContent);
    } finally { await client.close(); }
  });

  test('a matplotlib chart: an image block, a line naming it, and a resource link that reads the PNG', {
    skip: hasMatplotlib() ? false : 'needs python3 with matplotlib (scripts/install-deps installs it)',
  }, async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'import matplotlib.pyplot as plt\nplt.bar(["a", "b"], [3, 5])\nplt.title("bars")\nplt.show()' } });
      assert.equal(r.structuredContent.status, 'success', text(r));
      assert.equal(r.structuredContent.images, 1);
      const img = r.content.find((b) => b.type === 'image');
      assert.equal(img.mimeType, 'image/png');
      const png = Buffer.from(img.data, 'base64');
      assert.deepEqual(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      const link = r.content.find((b) => b.type === 'resource_link' && b.mimeType === 'image/png');
      assert.match(link.uri, new RegExp(`^glsb://sandbox/${id}/runs/1/image-1\\.png$`));
      assert.equal(link.size, png.length);
      assert.ok(text(r).includes(`image 1: image/png, ${png.length} bytes (shown): ${link.uri}`), text(r));
      const read = await client.readResource({ uri: link.uri });
      assert.equal(read.contents[0].mimeType, 'image/png');
      assert.deepEqual(Buffer.from(read.contents[0].blob, 'base64'), png);
    } finally { await client.close(); }
  });

  test('code that fails: isError, the status, the traceback', async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'def f():\n    return 1 / 0\nf()' } });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.status, 'error');
      assert.match(text(r), /^status: error/);
      assert.match(text(r), /ZeroDivisionError: division by zero/);
      assert.match(text(r), /line 2, in f/);
    } finally { await client.close(); }
  });

  test('a timeout: isError, the status in words, and the sandbox still serves', async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      const t0 = Date.now();
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'import time\ntime.sleep(20)', timeout: 1 } });
      assert.ok(Date.now() - t0 < 10000);
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.status, 'timeout');
      assert.match(text(r), /did not finish within its timeout/);
      const after_ = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'print(7)' } });
      assert.match(text(after_), /stdout:\n7/);
    } finally { await client.close(); }
  });

  test('30 MB of output: the result fits the client, the cut is stated, the whole is a resource', async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'import sys\nfor i in range(300000):\n    sys.stdout.write("%099d\\n" % i)' } });
      const size = JSON.stringify(r).length;
      assert.ok(size < 100000, `result of ${size} characters`);
      assert.equal(r.structuredContent.stdout_truncated, true);
      assert.equal(r.structuredContent.stdout_clipped, true);
      const all = text(r);
      assert.match(all, /\[glsb: \d+ bytes cut here to fit the result; the whole output: glsb:\/\/sandbox\/\S+\/stdout\/part-1 \.\.\. \S+\/stdout\/part-\d \(\d parts\)\]/);
      assert.match(all, /^0{99}$/m); // the head
      assert.ok(all.includes('[glsb: output truncated at 10485760 bytes'), 'the tail (glsb\'s own cap note) is kept');
      // the whole is more than one message may carry (the client drops the connection past 10 MiB): it is
      // read in parts, each linked
      const uri = r.structuredContent.stdout_uri;
      const parts = r.content.filter((b) => b.type === 'resource_link' && b.uri.startsWith(`${uri}/part-`));
      assert.ok(parts.length >= 3, `${parts.length} parts`);
      const total = parts.reduce((n, b) => n + b.size, 0);
      assert.ok(total > 10 * 1024 * 1024);
      await assert.rejects(client.readResource({ uri }), /read it in \d+ parts/);
      let whole = '';
      for (const b of parts) {
        const got = await client.readResource({ uri: b.uri });
        assert.equal(Buffer.byteLength(got.contents[0].text), b.size);
        whole += got.contents[0].text;
      }
      assert.equal(whole.length, total);
      assert.ok(whole.startsWith('0'.repeat(99) + '\n' + '0'.repeat(98) + '1\n'));
      assert.ok(whole.endsWith('more bytes dropped]\n'));
    } finally { await client.close(); }
  });

  test('progress: the stages of sandbox_create, and the output of a 3 s run, which keeps a short client timeout from firing', async () => {
    const { client } = await connect();
    try {
      const stages = [];
      const made = await client.callTool({ name: 'sandbox_create', arguments: {} }, undefined,
        { onprogress: (p) => stages.push(p.message) });
      const id = made.structuredContent.sandbox_id;
      assert.ok(stages.includes('creating a local sandbox'), stages.join(' | '));
      const seen = [];
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'import time\nfor i in range(6):\n    print("step", i, flush=True)\n    time.sleep(0.5)' } },
      undefined, { onprogress: (p) => seen.push(p), timeout: 2000, resetTimeoutOnProgress: true });
      assert.equal(r.structuredContent.status, 'success', text(r));
      assert.ok(seen.length >= 5, `${seen.length} progress notifications`);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress);
      const messages = seen.map((p) => p.message).join('\n');
      for (let i = 0; i < 6; i++) assert.match(messages, new RegExp(`step ${i}`));
    } finally { await client.close(); }
  });

  test('cancel mid-run: the run and its sandbox end, nothing is left, the session says why', async () => {
    const { client, tmp } = await connect();
    try {
      const id = await create(client);
      const keep = await create(client);
      const before = owners(tmp);
      assert.equal(before.length, 2);
      const ac = new AbortController();
      const call = client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'import time\ntime.sleep(60)' } }, undefined, { signal: ac.signal });
      await sleep(800);
      ac.abort('enough');
      await assert.rejects(call);
      await until(() => workspaces(tmp).length === 1, 'the cancelled sandbox to be gone', 10000);
      const gone = before.filter((o) => !workspaces(tmp).includes(o.workspace));
      assert.equal(gone.length, 1);
      if (gone[0].supervisor) await until(() => !alive(gone[0].supervisor), 'its supervisor to end', 5000);
      for (const cg of gone[0].cgroups) assert.ok(!fs.existsSync(cg), `${cg} is left`);
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: '1' } });
      assert.equal(r.isError, true);
      assert.match(text(r), /cancelled/);
      const ok = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: keep, code: 'print(1)' } });
      assert.equal(ok.structuredContent.status, 'success');
    } finally { await client.close(); }
  });

  test('a made-up id is refused, and the error names sandbox_list', async () => {
    const { client } = await connect();
    try {
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: 'local-deadbeef', code: '1' } });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent, undefined);
      assert.match(text(r), /no sandbox 'local-deadbeef' in this session/);
      assert.match(text(r), /sandbox_list/);
      const bad = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: 7 } });
      assert.equal(bad.isError, true);
      assert.match(text(bad), /argument 'code' is required|argument 'sandbox_id' must be a string/);
      await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /Unknown tool: no_such_tool/);
    } finally { await client.close(); }
  });

  test('files: a large file comes back cut, with a link that reads it whole', async () => {
    const { client } = await connect();
    try {
      const id = await create(client);
      await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
        code: 'with open("/tmp/big.txt", "w") as f:\n    for i in range(20000):\n        f.write("line %06d\\n" % i)' } });
      const r = await client.callTool({ name: 'files_read', arguments: { sandbox_id: id, path: '/tmp/big.txt' } });
      assert.equal(r.structuredContent.complete, false);
      assert.equal(r.structuredContent.bytes, 20000 * 12);
      assert.match(r.content[1].text, /^line 000000\n/);
      assert.match(r.content[1].text, /line 019999\n$/);
      const link = r.content.find((b) => b.type === 'resource_link');
      assert.equal(link.uri, `glsb://sandbox/${id}/files/tmp/big.txt`);
      const whole = await client.readResource({ uri: link.uri });
      assert.equal(whole.contents[0].text.length, 20000 * 12);
      const templates = await client.listResourceTemplates();
      assert.equal(templates.resourceTemplates[0].uriTemplate, 'glsb://sandbox/{sandbox_id}/files{+path}');
      await assert.rejects(client.readResource({ uri: `glsb://sandbox/${id}/files/no/such/file` }), /Resource not found/);
      await assert.rejects(client.readResource({ uri: 'glsb://sandbox/local-00000000/files/etc/passwd' }),
        /no sandbox 'local-00000000' in this session/);
    } finally { await client.close(); }
  });

  test('closing stdin: the server exits within the grace, and nothing is left (workspaces, cgroups, processes)',
    async () => {
      const { client, transport, tmp } = await connect();
      const a = await create(client);
      await create(client);
      await client.callTool({ name: 'command_start', arguments: { sandbox_id: a, command: 'sleep 600' } });
      const live = owners(tmp);
      assert.equal(live.length, 2);
      const pid = transport.pid;
      const t0 = Date.now();
      await client.close(); // ends stdin; the client sends SIGTERM after 2 s without an exit, SIGKILL after 4
      const took = Date.now() - t0;
      assert.ok(took < 4000, `exited after ${took} ms: the client had to SIGKILL it`);
      assert.ok(!alive(pid));
      assert.deepEqual(workspaces(tmp), []);
      for (const o of live) {
        if (o.supervisor) assert.ok(!alive(o.supervisor), `supervisor ${o.supervisor} still runs`);
        for (const cg of o.cgroups) assert.ok(!fs.existsSync(cg), `${cg} is left`);
      }
    });

  for (const [provider, setup] of Object.entries(PROVIDERS)) {
    test(`the session scenario on ${provider}${provider === 'local' ? '' : ' (emulator)'}, and nothing left after`,
      async () => {
        const world = await setup.start();
        try {
          const { client } = await connect({ args: ['--provider', provider], env: world.env });
          const left = await scenario(client, provider);
          assert.ok(left);
          assert.equal(await world.running(), provider === 'local' ? 0 : 1);
          await client.close();
          assert.equal(await world.running(), 0, 'a sandbox outlived the server');
        } finally { await world.stop(); }
      });
  }

  test('an answer lost mid-run (E2B emulator cuts the stream): isError, status unknown, "do not retry blindly"',
    async () => {
      const world = await PROVIDERS.e2b.start();
      try {
        const { client } = await connect({ args: ['--provider', 'e2b'], env: world.env });
        const id = await create(client);
        await world.admin('POST', '/_emulator/faults', { plane: 'jupyter', path: '^/execute$', action: 'cut_after_bytes',
          bytes: 60 });
        const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
          code: 'print("a" * 1000)' } });
        assert.equal(r.isError, true);
        assert.equal(r.structuredContent.status, 'unknown', text(r));
        assert.equal(r.structuredContent.retry_safe, false);
        assert.match(text(r), /^status: unknown/);
        assert.match(text(r), /Do not retry it blindly/);
        await client.close();
        assert.equal(await world.running(), 0);
      } finally { await world.stop(); }
    });

  test('keep_alive: that sandbox outlives the server (its lease still ends it), the others do not', async () => {
    const world = await PROVIDERS.e2b.start();
    try {
      const { client } = await connect({ args: ['--provider', 'e2b'], env: world.env });
      const kept = await client.callTool({ name: 'sandbox_create', arguments: { keep_alive: true, timeout: 60 } });
      assert.match(text(kept), /it stays when this server exits/);
      await create(client);
      assert.equal(await world.running(), 2);
      await client.close();
      assert.equal(await world.running(), 1);
    } finally { await world.stop(); }
  });

  test('the README set-up works as written from a fresh make install', async () => {
    const prefix = tempdir('glsb-mcp-install-');
    dirs.push(prefix);
    execFileSync('make', ['-s', 'install', `PREFIX=${prefix}`], { cwd: ROOT, stdio: 'ignore' });
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    // the words after `--`, up to a shell comment (the README may say "# or: glsb mcp" after them)
    const claude = /^claude mcp add glsb -- ([^#\n]+)/m.exec(readme)[1].trim().split(/\s+/);
    const json = JSON.parse(/```json\n(\{\n {2}"mcpServers"[\s\S]*?)```/.exec(readme)[1]).mcpServers.glsb;
    const ways = [
      { command: claude[0], args: claude.slice(1), PATH: `${prefix}/bin:${process.env.PATH}` },
      { command: json.command.replace('/usr/local', prefix), args: json.args, PATH: process.env.PATH },
    ];
    assert.deepEqual(claude.slice(1), ['--mcp']);
    assert.deepEqual(json.args, ['--mcp']);
    // the comment's other way, the glsb command (issue 27): what the README names, the install has
    const alt = /^claude mcp add glsb -- [^#\n]*# or: (.+)$/m.exec(readme);
    if (alt) {
      const words = alt[1].trim().split(/\s+/);
      assert.ok(fs.existsSync(path.join(prefix, 'bin', words[0])), `make install has no ${words[0]}`);
      ways.push({ command: words[0], args: words.slice(1), PATH: `${prefix}/bin:${process.env.PATH}` });
    }
    for (const w of ways) {
      const tmp = tempdir();
      dirs.push(tmp);
      const transport = new StdioClientTransport({ command: w.command, args: w.args,
        env: { PATH: w.PATH, HOME: process.env.HOME || '/root', TMPDIR: tmp }, cwd: '/', stderr: 'pipe' });
      const client = new Client({ name: 'readme', version: '1' });
      await client.connect(transport);
      const id = (await client.callTool({ name: 'sandbox_create', arguments: {} })).structuredContent.sandbox_id;
      await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x = 40' } });
      const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x + 2' } });
      assert.match(text(r), /^value: 42$/m);
      await client.close();
      assert.deepEqual(workspaces(tmp), []);
    }
  });
});
