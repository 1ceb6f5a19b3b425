// A file's user metadata as envd keeps it: `user.e2b.<key>` extended attributes (infra
// packages/shared/pkg/filesystem/xattr.go ReadMetadata / WriteMetadata), so metadata set inside the
// sandbox (os.setxattr) shows in Stat and ListDir like metadata sent with an upload. Node has no
// xattr API: one python3 helper (../xattr.py) per emulator answers, started on first use. It is not
// a sandbox process (not in liveChildren); it exits when its stdin closes, with the emulator.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'xattr.py');
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

let helper = null;
let nextId = 1;
const waiting = new Map();

function start() {
  const child = spawn(PYTHON, ['-u', SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
  const h = { child };
  readline.createInterface({ input: child.stdout }).on('line', (line) => {
    let ans;
    try { ans = JSON.parse(line); } catch { return; }
    const w = waiting.get(ans.id);
    waiting.delete(ans.id);
    if (w) w(ans);
  });
  const gone = () => {
    if (helper === h) helper = null;
    for (const [id, w] of waiting) { waiting.delete(id); w({ error: 'xattr helper exited' }); }
  };
  child.on('exit', gone);
  child.on('error', gone);
  child.stdin.on('error', () => {});
  child.unref();
  child.stdout.unref?.();
  return h;
}

function ask(req) {
  if (!helper) helper = start();
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    helper.child.stdin.write(JSON.stringify({ ...req, id }) + '\n');
  });
}

// readMetadata([hostPath...]) -> [{k: v} | undefined, ...]
export async function readMetadata(paths) {
  if (paths.length === 0) return [];
  const ans = await ask({ op: 'get', paths });
  return (ans.meta || paths.map(() => null)).map((m) => m || undefined);
}

// writeMetadata(hostPath, {k: v}) replaces the file's whole set (an empty one clears it); throws
// the helper's error (e.g. the file system has no xattrs).
export async function writeMetadata(hostPath, meta) {
  const ans = await ask({ op: 'set', path: hostPath, meta: meta || {} });
  if (ans.error) throw new Error(ans.error);
}

export function stopXattrHelper() {
  if (helper) { try { helper.child.kill('SIGKILL'); } catch { /* gone */ } helper = null; }
}
