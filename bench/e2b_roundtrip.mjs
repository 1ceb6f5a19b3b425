// bench/e2b_roundtrip.mjs: the official E2B JS SDK's side of bench/e2b_roundtrip.lua.
// usage: node bench/e2b_roundtrip.mjs <base-url> <api-key>
// Creates one code-interpreter sandbox against the emulator, then for every "go" line on stdin
// runs one cell and answers one JSON line {ms, ok}; at EOF kills the sandbox and exits.
// Prints {"ready":true} once the sandbox is up.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'spec', 'package.json'));
const { Sandbox } = require('@e2b/code-interpreter');

const [base, apiKey] = process.argv.slice(2);
const CODE = process.env.BENCH_CODE || 'x = 1\nx';
const sbx = await Sandbox.create({ apiKey, apiUrl: base, sandboxUrl: base, requestTimeoutMs: 20000 });
process.stdout.write(JSON.stringify({ ready: true, version: require('e2b/package.json').version }) + '\n');

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() !== 'go') continue;
  const t0 = performance.now();
  const ex = await sbx.runCode(CODE);
  const ms = performance.now() - t0;
  process.stdout.write(JSON.stringify({ ms, ok: !ex.error && ex.text === '1' }) + '\n');
}
await sbx.kill();
