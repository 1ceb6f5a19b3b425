// Start and drive one of the model API emulators (spec/emulators/openai, spec/emulators/anthropic) from a
// conformance test: startEmulator(kind, args) -> {child, url, admin(method, path, body), stop()}.
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export async function startEmulator(kind, args = []) {
  const child = spawn(path.join(ROOT, 'scripts', 'emulator'), [kind, '--port', '0', '--exit-with-parent', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
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
  const url = m[1];
  async function admin(method, p, body) {
    const res = await fetch(url + p, {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${p} -> ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }
  async function stop() {
    if (child.exitCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await gone;
  }
  return { child, url, admin, stop };
}

// The one tool every test offers: what glsb.interpreter offers the model.
export const EXECUTE_CODE = {
  name: 'execute_code',
  description: 'Run Python code in a stateful kernel and return its output.',
  parameters: { type: 'object', properties: { code: { type: 'string', description: 'the code' } }, required: ['code'] },
};

export const HISTOGRAM = 'Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png';

// A 2x1 PNG, base64 (signature, IHDR with width 2 height 1, IDAT, IEND).
export const TINY_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4z8AARAAI/gH/xp559wAAAABJRU5ErkJggg==';
