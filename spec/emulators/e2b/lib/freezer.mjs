// A sandbox's processes held still for a pause, as a VM snapshot (E2B) or `docker pause` (OpenSandbox's
// Docker runtime, which uses the cgroup freezer) holds them: every process of the sandbox is in one
// freezer cgroup (v1 `freezer.state`, or v2 `cgroup.freeze`), so they stop without a signal their
// parents could see (a shell whose child got SIGSTOP takes it as a stopped job and moves on). Needs
// root and a writable freezer hierarchy; without one, freezeTree's SIGSTOP/SIGCONT walk stands in.
// Each emulator's groups live under one directory named after it, removed on every exit path the
// process sees; empty leftovers of a SIGKILLed emulator are removed by the next one.
import fs from 'node:fs';
import path from 'node:path';
import { atExit } from './runtime.mjs';

const V1 = '/sys/fs/cgroup/freezer';
const V2_CANDIDATES = ['/sys/fs/cgroup', '/sys/fs/cgroup/unified'];

let hierarchy; // {version, root} | null
function detect() {
  if (hierarchy !== undefined) return hierarchy;
  hierarchy = null;
  if (process.getuid?.() !== 0 || process.env.E2B_EMULATOR_NO_FREEZER === '1') return hierarchy;
  if (fs.existsSync(path.join(V1, 'cgroup.procs'))) return (hierarchy = { version: 1, root: V1 });
  for (const dir of V2_CANDIDATES) {
    // a v2 hierarchy we may write into (cgroup.freeze exists in its non-root groups only)
    if (fs.existsSync(path.join(dir, 'cgroup.controllers')) && fs.existsSync(path.join(dir, 'cgroup.procs'))) {
      return (hierarchy = { version: 2, root: dir });
    }
  }
  return hierarchy;
}

let base = null;
function baseDir(prefix) {
  if (base) return base;
  const h = detect();
  if (!h) return null;
  // leftovers of emulators that are gone (SIGKILL): rmdir succeeds only on empty groups
  for (const name of fs.readdirSync(h.root)) {
    const m = new RegExp(`^${prefix}(\\d+)$`).exec(name);
    if (!m || fs.existsSync(`/proc/${m[1]}`)) continue;
    removeTree(path.join(h.root, name));
  }
  const dir = path.join(h.root, `${prefix}${process.pid}`);
  try {
    fs.mkdirSync(dir, { recursive: true });
  } catch {
    hierarchy = null; // not writable after all
    return null;
  }
  base = dir;
  atExit(() => removeTree(dir));
  return base;
}

function removeTree(dir) {
  let names = [];
  try { names = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
  for (const d of names) if (d.isDirectory()) removeTree(path.join(dir, d.name));
  try { fs.rmdirSync(dir); } catch { /* still has processes, or gone */ }
}

// makeFreezer(prefix, name) -> {procs (the file a process writes its pid into to join), freeze(on),
// remove()} | null when there is no freezer to use.
export function makeFreezer(prefix, name) {
  const b = baseDir(prefix);
  if (!b) return null;
  const dir = path.join(b, name);
  try { fs.mkdirSync(dir); } catch { return null; }
  const h = hierarchy;
  return {
    dir,
    procs: path.join(dir, 'cgroup.procs'),
    // resolves once the kernel says every task is frozen (or thawed)
    async freeze(on) {
      const [file, value, doneFile, done] = h.version === 1
        ? ['freezer.state', on ? 'FROZEN' : 'THAWED', 'freezer.state', (s) => s.trim() === (on ? 'FROZEN' : 'THAWED')]
        : ['cgroup.freeze', on ? '1' : '0', 'cgroup.events', (s) => new RegExp(`^frozen ${on ? 1 : 0}$`, 'm').test(s)];
      fs.writeFileSync(path.join(dir, file), value);
      for (let i = 0; i < 200; i++) {
        if (done(fs.readFileSync(path.join(dir, doneFile), 'utf8'))) return;
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    remove() {
      // a frozen group's tasks cannot die: thaw first, then the (now empty) group goes
      try { fs.writeFileSync(path.join(dir, h.version === 1 ? 'freezer.state' : 'cgroup.freeze'), h.version === 1 ? 'THAWED' : '0'); } catch { /* gone */ }
      removeTree(dir);
    },
  };
}
