// Per-sandbox file tree and process spawning.
//
// Each sandbox owns a temp directory on the host. When bubblewrap is available, every process
// of the sandbox runs in a private mount view where the host's / is read-only and the sandbox's
// own directories are bound over /home, /tmp, /root, /opt, /app, ... so that absolute paths used
// by the file API and by commands agree. This is a test double for E2B's VM, not a security
// boundary. Without bubblewrap, processes run directly on the host with cwd/HOME mapped into
// the sandbox tree (absolute paths inside commands then refer to the host).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';

// 'files': glsb's upload_dir default (docs/contract.md §8); a code-interpreter template for glsb provides it.
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

// Every process a child started (itself included unless it is bubblewrap, which is not the sandbox's),
// parents before their children: what SIGSTOP must reach, top down, so a stopped parent forks no more.
function treePids(child) {
  const out = [];
  const queue = child.isBwrap ? childrenOf(child.pid) : [child.pid];
  while (queue.length > 0 && out.length < 100000) {
    const pid = queue.shift();
    out.push(pid);
    queue.push(...childrenOf(pid));
  }
  return out;
}

// terminalOf(child) -> /proc/<pid>/fd/0 of the first process of the child's tree (parents first) whose
// stdin is a terminal (a pty's slave, made in the sandbox's own /dev/pts), or null. Opening that magic
// link reaches the terminal from outside the sandbox's mount namespace.
export function terminalOf(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return null;
  for (const pid of treePids(child)) {
    let target = '';
    try { target = fs.readlinkSync(`/proc/${pid}/fd/0`); } catch { continue; }
    if (/^\/dev\/(pts\/\d+|tty\w*)$/.test(target)) return `/proc/${pid}/fd/0`;
  }
  return null;
}

// freezeTree(child, true|false): SIGSTOP (or SIGCONT) everything the child started, as `docker pause`
// and a VM snapshot hold a sandbox: its processes keep their memory and pids, and use no CPU.
export function freezeTree(child, frozen) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const pids = treePids(child);
  if (!frozen) pids.reverse();
  for (const pid of pids) {
    try { process.kill(pid, frozen ? 'SIGSTOP' : 'SIGCONT'); } catch { /* gone */ }
  }
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

// ---- the emulator's state directory, removed on every exit path ----------------------------------
//
// A state directory holds an OWNER file naming the process that made it (pid and its start time, so
// a reused pid does not count). It is removed when the process exits normally (process.exit, the
// servers' SIGTERM/SIGINT/SIGHUP handlers), on an uncaught exception or unhandled rejection (Node
// runs no 'exit' listener then), and on SIGQUIT. Only SIGKILL leaves it behind: the next emulator
// started with the same prefix removes every directory whose owner is gone (sweepStale), and a
// parent that chose the directory (--state-dir) removes it itself.

const OWNER = 'OWNER';
const exitCleanups = new Set();

function startTime(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // field 22 (starttime), counted after the ")" that closes the command name
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return null;
  }
}

// Wall-clock start times (ms) of running processes whose command line names this server script.
function serverStarts() {
  const script = process.argv[1] ? path.join(path.basename(path.dirname(process.argv[1])), path.basename(process.argv[1])) : null;
  if (!script) return [];
  let btime = 0;
  let hz = 100;
  try { btime = Number(/^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))[1]); } catch { return []; }
  try { hz = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100; } catch { /* 100 */ }
  const out = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    let cmd;
    try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8'); } catch { continue; }
    if (!cmd.includes(script)) continue;
    const ticks = Number(startTime(pid));
    if (Number.isFinite(ticks)) out.push((btime + ticks / hz) * 1000);
  }
  return out;
}

function legacyOwnerAlive(dir) {
  let made;
  try {
    const st = fs.statSync(dir);
    made = st.birthtimeMs || st.mtimeMs;
  } catch {
    return true; // racing with its owner: leave it
  }
  return serverStarts().some((t) => t <= made + 1000 && made - t < 60000);
}

function runExitCleanups() {
  killAllChildren();
  for (const fn of [...exitCleanups]) {
    try { fn(); } catch { /* best effort: the rest still run */ }
  }
  exitCleanups.clear();
}

let handlersInstalled = false;
function installExitHandlers() {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', runExitCleanups);
  const crash = (what) => (e) => {
    process.stderr.write(`emulator: ${what}: ${(e && e.stack) || e}\n`);
    runExitCleanups();
    process.exit(1);
  };
  process.on('uncaughtException', crash('uncaught exception'));
  process.on('unhandledRejection', crash('unhandled rejection'));
  process.on('SIGQUIT', () => process.exit(0));
}

// atExit(fn): run fn (synchronously) on every exit path above. Returns a function that cancels it.
export function atExit(fn) {
  installExitHandlers();
  exitCleanups.add(fn);
  return () => exitCleanups.delete(fn);
}

// Removes <tmpdir>/<prefix>* directories whose owner process is gone. A directory from before the
// OWNER file (no such file) is kept while an emulator process running this same server script was
// started up to a minute before the directory was made (its owner, as far as one can tell).
export function sweepStale(prefix) {
  let names;
  try { names = fs.readdirSync(os.tmpdir()); } catch { return []; }
  const removed = [];
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const dir = path.join(os.tmpdir(), name);
    let stale = false;
    try {
      const owner = JSON.parse(fs.readFileSync(path.join(dir, OWNER), 'utf8'));
      const alive = owner.pid === process.pid || startTime(owner.pid) === owner.start;
      stale = !alive;
    } catch (e) {
      if (e && e.code === 'ENOENT') stale = !legacyOwnerAlive(dir);
    }
    if (stale) {
      rmrf(dir);
      removed.push(dir);
    }
  }
  return removed;
}

// makeStateDir(prefix[, given]) -> a directory owned by this process, removed on every exit path.
// given: a directory the parent made (--state-dir): used as is (created when missing) and removed too.
export function makeStateDir(prefix, given) {
  sweepStale(prefix);
  let dir;
  if (given) {
    dir = path.resolve(given);
    fs.mkdirSync(dir, { recursive: true });
  } else {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  }
  fs.writeFileSync(path.join(dir, OWNER), JSON.stringify({ pid: process.pid, start: startTime(process.pid) }));
  atExit(() => rmrf(dir));
  return dir;
}
