// Shared by the conformance suites: start one of glsb's emulators (scripts/emulator <provider>) on a free
// loopback port, read its "listening <url>" line, and talk to its admin API. Not a test file itself.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

// startEmulator(provider, args) -> {child, url, stderr(), stop()}: --port 0 --exit-with-parent added.
export async function startEmulator(provider, args = []) {
  const child = spawn(path.join(ROOT, 'scripts', 'emulator'), [provider, '--port', '0', '--exit-with-parent', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const first = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    const t = setTimeout(() => reject(new Error(`emulator did not start in 10 s: ${stderr}`)), 10000);
    rl.once('line', (line) => { clearTimeout(t); rl.close(); resolve(line); });
    child.once('exit', (code) => { clearTimeout(t); reject(new Error(`emulator exited (${code}): ${stderr}`)); });
  });
  const m = /^listening (https?:\/\/\S+)$/.exec(first);
  if (!m) throw new Error(`unexpected first line from the emulator: ${first}`);
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  return { child, url: m[1], stderr: () => stderr, stop };
}

// admin(base) -> (method, path, body) => parsed JSON of a 2xx answer (asserted).
export function admin(base) {
  return async (method, p, body) => {
    const res = await fetch(base + p, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.ok, `${method} ${p} -> ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// until(fn, what, ms) -> fn()'s first truthy value, polling every 50 ms; fails after ms.
export async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
