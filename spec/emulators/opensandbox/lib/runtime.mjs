// A sandbox's file tree and processes.
//
// Each sandbox owns a directory on the host. With bubblewrap, every process of the sandbox runs in
// a private mount view: a read-only view of the host's /, with the sandbox's own writable /root,
// /workspace, /tmp, /home, ... bound over it, in its own pid namespace. The file API maps the same
// paths, so what execd's /files/upload writes to /workspace/a.txt is what `cat /workspace/a.txt`
// reads. This is a test double for a container, not a security boundary. Without bubblewrap,
// processes run on the host with cwd and HOME mapped into the sandbox tree.
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';

// The container's writable top-level directories; every other absolute path is the host's, read-only.
// /workspace is the WORKDIR of the opensandbox/code-interpreter image; /files is glsb's upload_dir.
export const WRITABLE_TOPS = ['root', 'workspace', 'tmp', 'home', 'opt', 'app', 'code', 'data', 'srv', 'mnt', 'files'];
export const HOME = '/root';
export const WORKDIR = '/workspace';
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

let bwrapOk = null;
export function hasBwrap() {
  if (bwrapOk !== null) return bwrapOk;
  if (process.env.OPENSANDBOX_EMULATOR_NO_BWRAP === '1') return (bwrapOk = false);
  const r = spawnSync('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--unshare-pid', '--as-pid-1', '--die-with-parent', '/bin/true'],
    { stdio: 'ignore', timeout: 10000 });
  bwrapOk = r.status === 0;
  return bwrapOk;
}

// Every child process the emulator started, so shutdown can kill all of them.
export const liveChildren = new Set();

function childrenOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

// Signal a process tree. Under bubblewrap our child is bwrap and the program is pid 1 of its own pid
// namespace: SIGKILL to it makes the kernel kill the whole namespace, and bwrap reaps it and exits;
// SIGINT reaches it when it has a handler (python: KeyboardInterrupt). Without bubblewrap, and for every
// other signal, the process group is signalled (bwrap and everything it started share it unless a program
// made its own).
export function signalTree(child, signal = 'SIGKILL') {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  // SIGTERM goes to the group, as execd sends it: the program, as its namespace's init, would ignore it
  // (no handler), but bwrap in the same group ends on it and takes the namespace with it.
  if (child.isBwrap && (signal === 'SIGKILL' || signal === 'SIGINT')) {
    let sent = 0;
    for (const p of childrenOf(child.pid)) {
      try { process.kill(p, signal); sent++; } catch { /* gone */ }
    }
    if (sent > 0) {
      if (signal === 'SIGKILL') {
        const t = setTimeout(() => {
          if (child.exitCode === null && child.signalCode === null) {
            try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
          }
        }, 1000);
        t.unref();
      }
      return;
    }
  }
  try { process.kill(-child.pid, signal); } catch { /* group gone */ }
  if (signal !== 'SIGSTOP' && signal !== 'SIGCONT') {
    try { child.kill(signal); } catch { /* already dead */ }
  }
}

export function killAllChildren() {
  for (const c of liveChildren) {
    signalTree(c, 'SIGCONT');
    signalTree(c, 'SIGKILL');
  }
}

// A tmpfs / holding read-only binds of the host's top-level entries, then /dev and /proc.
let rootArgs = null;
function hostRootArgs() {
  if (rootArgs) return rootArgs;
  const args = ['--tmpfs', '/'];
  for (const e of fs.readdirSync('/', { withFileTypes: true })) {
    const name = e.name;
    if (WRITABLE_TOPS.includes(name) || name === 'proc' || name === 'dev') continue;
    const p = '/' + name;
    if (e.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(p), p);
    else if (e.isDirectory() || e.isFile()) args.push('--ro-bind', p, p);
  }
  args.push('--dev', '/dev', '--proc', '/proc');
  rootArgs = args;
  return args;
}

// What else a sandbox's processes get, by its root: volume mounts [{host, path, readOnly}], the
// variables and library directory of its egress rules (../../egress), the freezer cgroup they join.
const extras = new Map();
export function registerSandbox(root, { mounts = [], egress = null, cgroupProcs = null } = {}) {
  extras.set(root, { mounts, egress, cgroupProcs });
}
export function updateSandbox(root, fields) {
  extras.set(root, { ...(extras.get(root) || { mounts: [] }), ...fields });
}
export function unregisterSandbox(root) {
  extras.delete(root);
}
function mountOf(root, norm) {
  const x = extras.get(root);
  if (!x) return null;
  let best = null;
  for (const m of x.mounts) {
    if ((norm === m.path || norm.startsWith(m.path + '/')) && (!best || m.path.length > best.path.length)) best = m;
  }
  return best;
}

export function makeTree(root) {
  for (const top of WRITABLE_TOPS) fs.mkdirSync(path.join(root, top), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
}

// Map a sandbox path to a host path: paths under WRITABLE_TOPS live in the sandbox tree, anything
// else is the host's (read-only) file. `~` and relative paths resolve against HOME (execd expands
// `~`; a relative path is relative to execd's working directory, the image WORKDIR).
export function resolvePath(root, p) {
  let s = String(p);
  if (s === '~' || s.startsWith('~/')) s = HOME + s.slice(1);
  const norm = path.posix.resolve(WORKDIR, s);
  // a volume's files are the volume's (read-only when mounted so)
  const m = mountOf(root, norm);
  if (m) return { host: path.join(m.host, norm.slice(m.path.length)), writable: !m.readOnly, path: norm };
  const top = norm.split('/')[1] || '';
  if (WRITABLE_TOPS.includes(top)) return { host: path.join(root, norm), writable: true, path: norm };
  return { host: norm, writable: false, path: norm };
}

// The sandbox path of a host path inside the tree (or the host path itself).
export function sandboxPathOf(root, host) {
  const x = extras.get(root);
  for (const m of (x && x.mounts) || []) {
    const r = path.relative(m.host, host);
    if (!r.startsWith('..') && !path.isAbsolute(r)) return r ? path.posix.join(m.path, r.split(path.sep).join('/')) : m.path;
  }
  const rel = path.relative(root, host);
  if (!rel.startsWith('..') && !path.isAbsolute(rel)) return '/' + rel.split(path.sep).join('/');
  return host;
}

export function baseEnv(sbxEnv) {
  return {
    PATH: DEFAULT_PATH,
    HOME,
    USER: 'root',
    LOGNAME: 'root',
    SHELL: '/bin/bash',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    HOSTNAME: 'opensandbox',
    ...sbxEnv,
  };
}

// Spawn argv inside the sandbox tree rooted at `root`; `cwd` is a sandbox path. The child leads its
// own process group (execd runs every command with Setpgid).
export function spawnIn(root, argv, { env = {}, cwd = WORKDIR, stdio = ['pipe', 'pipe', 'pipe'] } = {}) {
  let child;
  const x = extras.get(root) || { mounts: [] };
  if (hasBwrap()) {
    const args = [...hostRootArgs()];
    for (const top of WRITABLE_TOPS) args.push('--bind', path.join(root, top), '/' + top);
    for (const m of x.mounts) args.push(m.readOnly ? '--ro-bind' : '--bind', m.host, m.path);
    if (x.egress && x.egress.bind) args.push('--ro-bind', x.egress.bind[0], x.egress.bind[1]);
    for (const [k, v] of Object.entries((x.egress && x.egress.env) || {})) args.push('--setenv', k, v);
    args.push('--remount-ro', '/', '--unshare-pid', '--as-pid-1', '--die-with-parent', '--chdir', cwd, '--', ...argv);
    if (x.cgroupProcs) {
      // join the sandbox's freezer cgroup before bwrap starts (e2b/lib/freezer.mjs)
      child = spawn('/bin/sh', ['-c', 'echo $$ > "$0" && exec bwrap "$@"', x.cgroupProcs, ...args], { env, stdio, detached: true });
    } else {
      child = spawn('bwrap', args, { env, stdio, detached: true });
    }
    child.isBwrap = true;
  } else {
    const henv = { ...env, ...((x.egress && x.egress.env) || {}) };
    if (henv.HOME) henv.HOME = resolvePath(root, henv.HOME).host;
    child = spawn(argv[0], argv.slice(1), { env: henv, cwd: resolvePath(root, cwd).host, stdio, detached: true });
  }
  liveChildren.add(child);
  child.on('exit', () => liveChildren.delete(child));
  child.on('error', () => liveChildren.delete(child));
  return child;
}

export function rmrf(p) {
  try { fs.rmSync(p, { recursive: true, force: true, maxRetries: 3 }); } catch { /* best effort */ }
}
