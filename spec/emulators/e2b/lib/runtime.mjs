// Per-sandbox file tree and process spawning.
//
// Each sandbox owns a temp directory on the host. When bubblewrap is available, every process
// of the sandbox runs in a private mount view where the host's / is read-only and the sandbox's
// own directories are bound over /home, /tmp, /root, /opt, /app, ... so that absolute paths used
// by the file API and by commands agree. This is a test double for E2B's VM, not a security
// boundary. Without bubblewrap, processes run directly on the host with cwd/HOME mapped into
// the sandbox tree (absolute paths inside commands then refer to the host).
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';

// 'files': glsb's upload_dir default (API.md); a code-interpreter template for glsb provides it.
export const WRITABLE_TOPS = ['home', 'tmp', 'root', 'opt', 'app', 'code', 'workspace', 'data', 'srv', 'mnt', 'files'];
export const USERS = { user: '/home/user', root: '/root' };
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

let bwrapOk = null;
export function hasBwrap() {
  if (bwrapOk !== null) return bwrapOk;
  if (process.env.E2B_EMULATOR_NO_BWRAP === '1') return (bwrapOk = false);
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

// Signal a sandbox process. Under bubblewrap the tree is: bwrap (our child) -> the command, which
// is pid 1 of its own pid namespace. The signal goes to the command: SIGKILL makes the kernel kill
// everything in the namespace while our direct child stays alive to reap it and exit, so nothing
// is orphaned (a container's pid 1 may never reap orphans). As a namespace init the command
// ignores signals it has no handler for (e.g. SIGTERM for bash); callers back that up with
// SIGKILL. Without bubblewrap, or before the tree exists, the process group is signalled.
export function killTree(child, signal = 'SIGKILL') {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  if (child.isBwrap) {
    const targets = childrenOf(child.pid);
    let sent = 0;
    for (const p of targets) {
      try { process.kill(p, signal); sent++; } catch { /* gone */ }
    }
    if (sent > 0) {
      if (signal === 'SIGKILL') {
        // Backstop: if bwrap did not exit on its own, kill it too.
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
  try { child.kill(signal); } catch { /* already dead */ }
}

export function killAllChildren() {
  for (const c of liveChildren) killTree(c);
}

// A tmpfs / holding read-only binds of the host's top-level entries (so that sandbox-only
// directories such as /app can be created), then /dev and /proc.
let rootArgs = null;
function hostRootArgs() {
  if (rootArgs) return rootArgs;
  const args = ['--tmpfs', '/'];
  for (const e of fs.readdirSync('/', { withFileTypes: true })) {
    const name = e.name;
    if (WRITABLE_TOPS.includes(name) || name === 'proc' || name === 'dev') continue;
    const p = '/' + name;
    if (e.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(p), p);
    else if (e.isDirectory()) args.push('--ro-bind', p, p);
    else if (e.isFile()) args.push('--ro-bind', p, p);
  }
  args.push('--dev', '/dev', '--proc', '/proc');
  rootArgs = args;
  return args;
}

export function makeTree(root) {
  for (const top of WRITABLE_TOPS) fs.mkdirSync(path.join(root, top), { recursive: true });
  fs.mkdirSync(path.join(root, 'home', 'user'), { recursive: true });
  fs.chmodSync(path.join(root, 'tmp'), 0o1777);
}

export function normalizeSandboxPath(p, user = 'user') {
  const home = USERS[user] || USERS.user;
  if (typeof p !== 'string' || p === '') return home;
  return path.posix.resolve(home, p);
}

// Map a sandbox path to a host path. Paths under WRITABLE_TOPS live in the sandbox tree;
// anything else is the host's (read-only) file.
export function hostPath(root, sbxPath) {
  const norm = path.posix.resolve('/', sbxPath);
  const top = norm.split('/')[1] || '';
  if (WRITABLE_TOPS.includes(top)) return { host: path.join(root, norm), writable: true, path: norm };
  return { host: norm, writable: false, path: norm };
}

export function baseEnv(user) {
  const home = USERS[user] || USERS.user;
  return {
    PATH: DEFAULT_PATH,
    HOME: home,
    USER: user,
    LOGNAME: user,
    SHELL: '/bin/bash',
    LANG: 'C.UTF-8',
    LC_ALL: 'C.UTF-8',
    PYTHONUNBUFFERED: '1',
  };
}

// Spawn argv inside the sandbox tree rooted at `root`. `cwd` is a sandbox path.
export function spawnIn(root, argv, { env = {}, cwd = '/home/user', stdio = ['pipe', 'pipe', 'pipe'] } = {}) {
  let child;
  if (hasBwrap()) {
    const args = [...hostRootArgs()];
    for (const top of WRITABLE_TOPS) args.push('--bind', path.join(root, top), '/' + top);
    // --as-pid-1: bwrap's own init would be left unreaped when bwrap exits (a zombie under a
    // container's pid 1); the command is the namespace's pid 1 instead.
    args.push('--remount-ro', '/', '--unshare-pid', '--as-pid-1', '--die-with-parent', '--chdir', cwd, '--', ...argv);
    child = spawn('bwrap', args, { env, stdio, detached: true });
    child.isBwrap = true;
  } else {
    const mapped = hostPath(root, cwd).host;
    const henv = { ...env };
    if (henv.HOME) henv.HOME = hostPath(root, henv.HOME).host;
    child = spawn(argv[0], argv.slice(1), { env: henv, cwd: mapped, stdio, detached: true });
  }
  liveChildren.add(child);
  child.on('exit', () => liveChildren.delete(child));
  child.on('error', () => liveChildren.delete(child));
  return child;
}

export function rmrf(p) {
  try { fs.rmSync(p, { recursive: true, force: true, maxRetries: 3 }); } catch { /* best effort */ }
}
