// bench/opensandbox_roundtrip.mjs: the official OpenSandbox JS SDK's side of
// bench/opensandbox_roundtrip.lua.
// usage: node bench/opensandbox_roundtrip.mjs <base-url> <api-key>
// Creates one sandbox against the emulator, then for every "go" line on stdin runs one command
// (commands.run) and answers one JSON line {ms, ok}; at EOF kills the sandbox and exits.
// Prints {"ready":true, version} once the sandbox is up.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'spec', 'package.json'));
process.env.OPENSANDBOX_DISABLE_METRICS = '1';
const { Sandbox } = await import(require.resolve('@alibaba-group/opensandbox'));
const version = JSON.parse((await import('node:fs')).readFileSync(
  path.join(root, 'spec', 'node_modules', '@alibaba-group', 'opensandbox', 'package.json'), 'utf8')).version;

const [base, apiKey] = process.argv.slice(2);
const COMMAND = process.env.BENCH_COMMAND || 'echo 1';
const sbx = await Sandbox.create({ connectionConfig: { domain: base, apiKey }, image: 'opensandbox/code-interpreter:v1.1.0',
  timeoutSeconds: 3600 });
process.stdout.write(JSON.stringify({ ready: true, version }) + '\n');

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() !== 'go') continue;
  const t0 = performance.now();
  const ex = await sbx.commands.run(COMMAND);
  const ms = performance.now() - t0;
  const out = ex.logs.stdout.map((m) => m.text).join('\n');
  process.stdout.write(JSON.stringify({ ms, ok: ex.exitCode === 0 && out === '1' }) + '\n');
}
await sbx.kill();
await sbx.close();
