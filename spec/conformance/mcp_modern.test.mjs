// Conformance: the official MCP client v2 (@modelcontextprotocol/client, pinned in spec/package.json) over
// its StdioClientTransport against `glsb-lua --mcp`, in the 2026-07-28 era: pinned to that revision (no
// fallback: server/discover, per-request _meta, resultType, cacheable lists), and in auto mode (the probe
// on a sibling process, then the same era). The session scenario runs pinned on every provider.
//
//   cd spec && npm ci && node --test conformance/mcp_modern.test.mjs
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { until, sleep } from './emulator.mjs';
import {
  ROOT, tempdir, rm, serverParams, keepStderr, workspaces, owners, alive, hasMatplotlib, text, PROVIDERS, scenario,
} from './mcp_common.mjs';

const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'spec', 'node_modules', '@modelcontextprotocol', 'client',
  'package.json'), 'utf8')).version;

const dirs = [];
after(() => dirs.forEach(rm));

async function connect(mode, opts = {}) {
  const tmp = tempdir();
  dirs.push(tmp);
  const transport = new StdioClientTransport(serverParams(tmp, opts));
  const stderr = keepStderr(transport);
  const client = new Client({ name: 'glsb-conformance-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
  await client.connect(transport);
  await client.listTools();
  return { client, transport, tmp, stderr };
}

for (const mode of [{ pin: '2026-07-28' }, 'auto']) {
  const label = typeof mode === 'string' ? mode : `pinned to ${mode.pin}`;
  describe(`MCP, official client @modelcontextprotocol/client ${VERSION} (v2, stdio, ${label})`, () => {
    test('the modern era is chosen: server/discover names the server, its revisions and its guidance', async () => {
      const { client, tmp } = await connect(mode);
      try {
        assert.equal(client.getProtocolEra(), 'modern');
        assert.equal(client.getServerVersion().name, 'glsb');
        assert.ok(client.getServerCapabilities().tools);
        assert.match(client.getInstructions(), /sandbox_create/);
        // the auto probe ran on a sibling server, which ended leaving nothing; nothing was created yet
        assert.deepEqual(workspaces(tmp), []);
      } finally { await client.close(); }
    });

    test('tools/list: the same eleven tools, in the same order', async () => {
      const { client } = await connect(mode);
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name), ['sandbox_create', 'sandbox_list', 'sandbox_kill', 'execute_code',
          'execute_command', 'files_write', 'files_read', 'files_list', 'command_start', 'command_output',
          'command_kill']);
        for (const t of tools) assert.equal(t.inputSchema.type, 'object');
      } finally { await client.close(); }
    });

    test('a stateful session, a failure with isError, and a made-up id refused', async () => {
      const { client } = await connect(mode);
      try {
        const created = await client.callTool({ name: 'sandbox_create', arguments: {} });
        const id = created.structuredContent.sandbox_id;
        await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x = 40' } });
        const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x + 2' } });
        assert.equal(r.structuredContent.status, 'success');
        assert.match(text(r), /^value: 42$/m);
        const bad = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'raise ValueError("no")' } });
        assert.equal(bad.isError, true);
        assert.match(text(bad), /ValueError: no/);
        const made = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: 'e2b-12345678', code: '1' } });
        assert.equal(made.isError, true);
        assert.match(text(made), /no sandbox 'e2b-12345678' in this session.*sandbox_list/);
      } finally { await client.close(); }
    });

    test('a chart as an image block, named and linked; the link reads the PNG', {
      skip: hasMatplotlib() ? false : 'needs python3 with matplotlib (scripts/install-deps installs it)',
    }, async () => {
      const { client } = await connect(mode);
      try {
        const id = (await client.callTool({ name: 'sandbox_create', arguments: {} })).structuredContent.sandbox_id;
        const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
          code: 'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()' } });
        const img = r.content.find((b) => b.type === 'image');
        const link = r.content.find((b) => b.type === 'resource_link' && b.mimeType === 'image/png');
        assert.ok(img && link, JSON.stringify(r.content.map((b) => b.type)));
        assert.ok(text(r).includes(link.uri));
        const read = await client.readResource({ uri: link.uri });
        assert.equal(read.contents[0].blob, img.data);
      } finally { await client.close(); }
    });

    test('progress while a run prints, and a cancel that ends the run and its sandbox', async () => {
      const { client, tmp } = await connect(mode);
      try {
        const id = (await client.callTool({ name: 'sandbox_create', arguments: {} })).structuredContent.sandbox_id;
        const seen = [];
        const r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
          code: 'import time\nfor i in range(4):\n    print("tick", i, flush=True)\n    time.sleep(0.4)' } },
        { onprogress: (p) => seen.push(p), timeout: 1500, resetTimeoutOnProgress: true });
        assert.equal(r.structuredContent.status, 'success');
        assert.ok(seen.length >= 3, `${seen.length} progress notifications`);
        assert.match(seen.map((p) => p.message).join('\n'), /tick 3/);
        const before = owners(tmp);
        const ac = new AbortController();
        const call = client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
          code: 'import time\ntime.sleep(60)' } }, { signal: ac.signal });
        await sleep(600);
        ac.abort('enough');
        await assert.rejects(call);
        await until(() => workspaces(tmp).length === 0, 'the cancelled sandbox to be gone', 10000);
        for (const o of before) if (o.supervisor) await until(() => !alive(o.supervisor), 'its supervisor to end', 5000);
        const again = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: '1' } });
        assert.match(text(again), /cancelled/);
      } finally { await client.close(); }
    });

    test('closing the client ends the server and every sandbox it made', async () => {
      const { client, transport, tmp } = await connect(mode);
      await client.callTool({ name: 'sandbox_create', arguments: {} });
      await client.callTool({ name: 'sandbox_create', arguments: {} });
      assert.equal(workspaces(tmp).length, 2);
      const pid = transport.pid;
      const t0 = Date.now();
      await client.close();
      assert.ok(Date.now() - t0 < 4000, `took ${Date.now() - t0} ms: the client had to SIGKILL it`);
      assert.ok(!alive(pid));
      assert.deepEqual(workspaces(tmp), []);
    });
  });
}

describe(`the session scenario, @modelcontextprotocol/client ${VERSION} pinned to 2026-07-28`, () => {
  for (const [provider, setup] of Object.entries(PROVIDERS)) {
    test(`on ${provider}${provider === 'local' ? '' : ' (emulator)'}`, async () => {
      const world = await setup.start();
      try {
        const { client } = await connect({ pin: '2026-07-28' }, { args: ['--provider', provider], env: world.env });
        await scenario(client, provider);
        await client.close();
        assert.equal(await world.running(), 0, 'a sandbox outlived the server');
      } finally { await world.stop(); }
    });
  }
});
