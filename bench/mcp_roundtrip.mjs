// bench/mcp_roundtrip.mjs: the MCP clients' side of bench/mcp_roundtrip.lua.
// usage: node bench/mcp_roundtrip.mjs <glsb-lua>
// Starts two `glsb-lua --mcp` servers: one driven by the official v1 client (@modelcontextprotocol/sdk over
// StdioClientTransport), one by raw JSON-RPC lines (no SDK: the server's own cost, without the client's).
// Each gets a warm local sandbox. Then for every "sdk" or "raw" line on stdin it makes one
// tools/call execute_code print(1) and answers one JSON line {ms, ok}; "cpu" answers the CPU seconds each
// server process has used so far. At EOF it closes both (the servers end their sandboxes) and exits.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sdk = path.join(root, 'spec', 'node_modules', '@modelcontextprotocol', 'sdk');
const { Client } = await import(path.join(sdk, 'dist', 'esm', 'client', 'index.js'));
const { StdioClientTransport } = await import(path.join(sdk, 'dist', 'esm', 'client', 'stdio.js'));
const version = JSON.parse(fs.readFileSync(path.join(sdk, 'package.json'), 'utf8')).version;

const [glsbLua] = process.argv.slice(2);
const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', TMPDIR: process.env.TMPDIR || '/tmp' };
const ARGS = (id) => ({ name: 'execute_code', arguments: { sandbox_id: id, code: 'print(1)' } });

// the official client
const transport = new StdioClientTransport({ command: glsbLua, args: ['--mcp'], env, stderr: 'inherit' });
const client = new Client({ name: 'glsb-bench', version: '1.0.0' });
await client.connect(transport);
await client.listTools();
const sdkId = (await client.callTool({ name: 'sandbox_create', arguments: {} })).structuredContent.sandbox_id;

// raw lines
const raw = spawn(glsbLua, ['--mcp'], { env, stdio: ['pipe', 'pipe', 'inherit'] });
let buf = '';
const waiting = new Map();
raw.stdout.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const msg = JSON.parse(buf.slice(0, i));
    buf = buf.slice(i + 1);
    const w = waiting.get(msg.id);
    if (w) { waiting.delete(msg.id); w(msg); }
  }
});
let next = 0;
const rawCall = (method, params) => new Promise((resolve) => {
  const id = ++next;
  waiting.set(id, resolve);
  raw.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
});
await rawCall('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });
raw.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
const rawId = (await rawCall('tools/call', { name: 'sandbox_create', arguments: {} })).result.structuredContent.sandbox_id;

function cpu(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 10 ms
}

process.stdout.write(JSON.stringify({ ready: true, version, pids: { sdk: transport.pid, raw: raw.pid } }) + '\n');

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const what = line.trim();
  if (what === 'sdk') {
    const t0 = performance.now();
    const r = await client.callTool(ARGS(sdkId));
    const ms = performance.now() - t0;
    process.stdout.write(JSON.stringify({ ms, ok: r.structuredContent?.status === 'success' }) + '\n');
  } else if (what === 'raw') {
    const t0 = performance.now();
    const r = await rawCall('tools/call', ARGS(rawId));
    const ms = performance.now() - t0;
    process.stdout.write(JSON.stringify({ ms, ok: r.result?.structuredContent?.status === 'success' }) + '\n');
  } else if (what === 'cpu') {
    process.stdout.write(JSON.stringify({ sdk: cpu(transport.pid), raw: cpu(raw.pid) }) + '\n');
  }
}
await client.close();
raw.stdin.end();
await new Promise((r) => raw.once('exit', r));
