// Shared by the MCP conformance suites (mcp.test.mjs: the official v1 client; mcp_modern.test.mjs: the v2
// client): start `glsb-lua --mcp` in a private TMPDIR, look at what its local sandboxes leave on this
// machine, and point it at a provider emulator. Not a test file itself.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, startEmulator, admin } from './emulator.mjs';

export { ROOT };
export const GLSB_LUA = path.join(ROOT, 'build', 'glsb-lua');

// tempdir() -> a fresh folder (mode 755: the sandbox user reads what glsb puts there), removed by rm().
export function tempdir(prefix = 'glsb-mcp-conf-') {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(d, 0o755);
  return d;
}
export const rm = (d) => fs.rmSync(d, { recursive: true, force: true });

// serverParams(tmp, {args, env}) -> StdioClientTransport parameters: the server, a private TMPDIR (where
// the local provider keeps its workspaces), its stderr piped (kept by the caller for diagnostics).
export function serverParams(tmp, { args = [], env = {}, command = GLSB_LUA } = {}) {
  return {
    command,
    args: ['--mcp', ...args],
    env: { PATH: process.env.PATH, HOME: process.env.HOME || '/root', TMPDIR: tmp, ...env },
    stderr: 'pipe',
  };
}

export function keepStderr(transport) {
  const s = { text: '' };
  transport.stderr?.on('data', (d) => { s.text += d; });
  return s;
}

// workspaces(tmp) -> the local sandboxes' workspace folders under a private TMPDIR.
export function workspaces(tmp) {
  const out = [];
  for (const d of fs.readdirSync(tmp)) {
    if (!/^glsb-\d+$/.test(d)) continue;
    for (const w of fs.readdirSync(path.join(tmp, d))) out.push(path.join(tmp, d, w));
  }
  return out;
}

// owners(tmp) -> what each live local sandbox's owner record names: its supervisor's pid and its cgroup
// leaves (providers/local/reaper.lua writes it), to check after the server's exit that none is left.
export function owners(tmp) {
  const out = [];
  for (const w of workspaces(tmp)) {
    const f = path.join(w, 'glsb-owner');
    if (!fs.existsSync(f)) continue;
    const text = fs.readFileSync(f, 'utf8');
    const pid = /^supervisor (\d+)/m.exec(text);
    out.push({ workspace: w, supervisor: pid ? Number(pid[1]) : null,
      cgroups: [...text.matchAll(/^cgroup (\S+)$/gm)].map((m) => m[1]) });
  }
  return out;
}

export function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

export function hasMatplotlib() {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import matplotlib'], { stdio: 'ignore' });
    return true;
  } catch { return false; }
}

// text(result) -> the first text block (status, output, error, value: what the model reads).
export const text = (r) => r.content.find((b) => b.type === 'text').text;
// The JSON text block that repeats structuredContent, for clients that do not read it.
export const jsonBlock = (r) => JSON.parse(r.content.filter((b) => b.type === 'text')[1].text);

// The four providers, each with what its server needs: the emulator to start and the environment that
// points the provider at it (the same variables a user sets: E2B_API_KEY, OPEN_SANDBOX_DOMAIN, AWS_*).
export const PROVIDERS = {
  local: { start: async () => ({ env: {}, stop: async () => {}, running: async () => 0 }) },
  e2b: {
    start: async () => {
      const emu = await startEmulator('e2b');
      const get = admin(emu.url);
      return {
        env: { E2B_API_KEY: 'e2b_test_key', E2B_API_URL: emu.url, E2B_SANDBOX_URL: emu.url },
        stop: emu.stop,
        admin: get,
        running: async () => (await get('GET', '/_emulator/state')).sandboxes
          .filter((s) => s.state === 'running' || s.state === 'paused').length,
      };
    },
  },
  opensandbox: {
    start: async () => {
      const emu = await startEmulator('opensandbox', ['--api-key', 'opensandbox_test_key']);
      const get = admin(emu.url);
      return {
        env: { OPEN_SANDBOX_DOMAIN: emu.url, OPEN_SANDBOX_API_KEY: 'opensandbox_test_key' },
        stop: emu.stop,
        running: async () => (await get('GET', '/_emulator/state')).sandboxes
          .filter((s) => !/^(Terminated|Deleted|Failed)$/i.test(s.state)).length,
      };
    },
  },
  bedrock: {
    start: async () => {
      const emu = await startEmulator('bedrock');
      const get = admin(emu.url);
      return {
        env: {
          AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
          AWS_REGION: 'us-west-2', BEDROCK_AGENTCORE_DP_ENDPOINT: emu.url, BEDROCK_AGENTCORE_CP_ENDPOINT: emu.url,
        },
        stop: emu.stop,
        running: async () => (await get('GET', '/_emulator/state')).sessions
          .filter((s) => !/^(TERMINATED|EXPIRED|STOPPED|FAILED)$/i.test(s.status || s.state || '')).length,
      };
    },
  },
};

// scenario(client, provider) -> runs the session every provider must serve the same way: create, state
// kept across calls, an error, a command, files both ways, a background command, kill. Returns the id of
// a sandbox it leaves running (the server's exit must end it).
export async function scenario(client, provider) {
  const created = await client.callTool({ name: 'sandbox_create', arguments: { provider } });
  assert.ok(!created.isError, text(created));
  const id = created.structuredContent.sandbox_id;
  assert.match(id, new RegExp(`^${provider}-[0-9a-f]{8}$`));
  assert.deepEqual(jsonBlock(created), created.structuredContent);

  let r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x = 40' } });
  assert.equal(r.structuredContent.status, 'success', text(r));
  r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'x + 2' } });
  assert.equal(r.isError, undefined);
  assert.match(text(r), /^value: 42$/m);

  r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: 'print("out")\nundefined_name' } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, 'error');
  assert.match(text(r), /NameError/);
  assert.match(text(r), /stdout:\nout/);

  r = await client.callTool({ name: 'execute_command', arguments: { sandbox_id: id, command: 'echo "$GREETING"; exit 3',
    env: { GREETING: 'hi' } } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.exit_code, 3);
  assert.match(text(r), /stdout:\nhi/);

  r = await client.callTool({ name: 'files_write', arguments: { sandbox_id: id, path: 'notes/a.txt', content: 'héllo\n' } });
  assert.ok(!r.isError, text(r));
  const bytes = Buffer.from([0, 1, 2, 250, 255]);
  r = await client.callTool({ name: 'files_write', arguments: { sandbox_id: id, path: '/tmp/b.bin',
    content: bytes.toString('base64'), encoding: 'base64' } });
  assert.equal(r.structuredContent.bytes, 5, text(r));
  r = await client.callTool({ name: 'files_read', arguments: { sandbox_id: id, path: 'notes/a.txt' } });
  assert.equal(r.structuredContent.encoding, 'text');
  assert.equal(r.content[1].text, 'héllo\n');
  r = await client.callTool({ name: 'files_read', arguments: { sandbox_id: id, path: '/tmp/b.bin' } });
  assert.equal(r.structuredContent.encoding, 'base64');
  assert.deepEqual(Buffer.from(r.content[1].text, 'base64'), bytes);
  r = await client.callTool({ name: 'files_list', arguments: { sandbox_id: id, path: 'notes' } });
  assert.deepEqual(r.structuredContent.entries.map((e) => [e.name, e.type, e.size]), [['a.txt', 'file', 7]]);
  r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id,
    code: 'print(open("notes/a.txt").read().strip())' } });
  assert.match(text(r), /stdout:\nhéllo/);

  r = await client.callTool({ name: 'command_start', arguments: { sandbox_id: id,
    command: 'for i in 1 2 3; do echo line$i; sleep 0.2; done' } });
  assert.ok(!r.isError, text(r));
  const cmd = r.structuredContent.command_id;
  r = await client.callTool({ name: 'command_output', arguments: { command_id: cmd, wait: 20 } });
  assert.equal(r.structuredContent.done, true, text(r));
  assert.equal(r.structuredContent.exit_code, 0);
  assert.match(text(r), /line1\nline2\nline3/);

  const list = await client.callTool({ name: 'sandbox_list', arguments: {} });
  assert.ok(list.structuredContent.sandboxes.some((s) => s.sandbox_id === id && s.state === 'running'));
  r = await client.callTool({ name: 'sandbox_kill', arguments: { sandbox_id: id } });
  assert.equal(r.structuredContent.state, 'killed');
  r = await client.callTool({ name: 'execute_code', arguments: { sandbox_id: id, code: '1' } });
  assert.equal(r.isError, true);
  assert.match(text(r), /killed with sandbox_kill/);

  const left = await client.callTool({ name: 'sandbox_create', arguments: { provider } });
  assert.ok(!left.isError, text(left));
  return left.structuredContent.sandbox_id;
}
