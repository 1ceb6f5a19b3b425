// bench/scale_e2b.mjs: the official E2B JS SDK's side of bench/scale_e2b.lua.
// usage: node bench/scale_e2b.mjs <base-url> <api-key> <sandboxes>
// Creates <sandboxes> code-interpreter sandboxes against the emulator, prints {"ready":true,...}; then for
// every "go N" line on stdin runs N runCode calls at once (call i on sandbox i % sandboxes, as glsb's side
// does) and answers one JSON line: per-call milliseconds, how many came back right, wall time, CPU time
// and peak RSS of this process. At EOF kills the sandboxes and exits.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'spec', 'package.json'));
const { Sandbox } = require('@e2b/code-interpreter');

const [base, apiKey, count] = process.argv.slice(2);
const opts = { apiKey, apiUrl: base, sandboxUrl: base, requestTimeoutMs: 120000 };
const sandboxes = [];
for (let i = 0; i < Number(count); i++) sandboxes.push(await Sandbox.create(opts));
for (const s of sandboxes) await s.runCode('x = 0\nx', { timeoutMs: 120000 });
process.stdout.write(JSON.stringify({ ready: true, version: require('e2b/package.json').version }) + '\n');

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const m = line.match(/^go (\d+)$/);
  if (!m) continue;
  const n = Number(m[1]);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const ms = new Array(n);
  let ok = 0;
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const t = performance.now();
    try {
      const ex = await sandboxes[i % sandboxes.length].runCode(`x = ${i + 1}\nx`, { timeoutMs: 120000 });
      if (!ex.error && ex.text === String(i + 1)) ok++;
    } catch {
      // counted as not ok
    }
    ms[i] = performance.now() - t;
  }));
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(JSON.stringify({ ms, ok, wall_ms: wall, cpu_ms: (cpu.user + cpu.system) / 1000,
    peak_rss_kb: process.resourceUsage().maxRSS }) + '\n');
}
await Promise.all(sandboxes.map((s) => s.kill()));
