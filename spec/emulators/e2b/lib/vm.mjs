// An E2B sandbox's view of the machine: its own root file system and its two users, as a template
// built by E2B has them (infra orchestrator/pkg/template/build/phases/finalize/configure.sh: user
// `user` (uid 1000, home /home/user, passwordless sudo) besides root; /home/user owned by user; /code
// writable by all; envd/internal/permissions/path.go EnsureDirs and api/upload.go: envd, as root,
// writes any path, making missing parents owned by the requesting user).
//
// The sandbox's `/` is its own directory (so a new top-level directory, /files or /data, appears in
// every process at once), with the host's system directories bound over it read-only (/usr, /etc,
// /bin, ...: the "image"). Each process runs in a private mount and pid namespace (bubblewrap) as the
// user it was started for: when the emulator runs as root, `user` is uid 1000 (setpriv), root is
// root, and the sandbox's /etc/passwd says so, so permissions are real: `user` cannot write /opt,
// /root or a directory root's code made. Otherwise (not root) every process runs as the emulator's
// own uid, and without bubblewrap on the host itself with cwd and HOME mapped into the tree, as the
// shared runtime does. This is a test double for E2B's VM, not a security boundary.
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { hasBwrap, liveChildren, DEFAULT_PATH } from './runtime.mjs';

export const USERS = {
  root: { uid: 0, gid: 0, home: '/root' },
  user: { uid: 1000, gid: 1000, home: '/home/user' },
};

// The host's top-level entries a sandbox sees (read-only): the system's programs, libraries and
// configuration (the "image"). Everything else at the top is the sandbox's own.
const SYSTEM_TOPS = new Set(['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'usr', 'etc', 'var', 'run', 'sys', 'nix', 'snap']);

const KERNEL_FS = new Set(['proc', 'dev', 'sys']);

let identities = null;
// Whether processes can run as their real users: root, bubblewrap and setpriv (util-linux).
export function hasIdentities() {
  if (identities !== null) return identities;
  identities = process.getuid && process.getuid() === 0 && hasBwrap() && fs.existsSync('/usr/bin/setpriv')
    && process.env.E2B_EMULATOR_NO_IDENTITIES !== '1';
  return identities;
}

let hostTopsCache = null;
// The host's top-level entries the sandbox sees read-only: [{name, kind: 'dir'|'file'|'link', target}]
function hostTops() {
  if (hostTopsCache) return hostTopsCache;
  hostTopsCache = [];
  for (const e of fs.readdirSync('/', { withFileTypes: true })) {
    if (!SYSTEM_TOPS.has(e.name)) continue;
    const p = '/' + e.name;
    if (e.isSymbolicLink()) hostTopsCache.push({ name: e.name, kind: 'link', target: fs.readlinkSync(p) });
    else if (e.isDirectory()) hostTopsCache.push({ name: e.name, kind: 'dir' });
    else if (e.isFile()) hostTopsCache.push({ name: e.name, kind: 'file' });
  }
  return hostTopsCache;
}

function isHostTop(name) {
  return hostTops().some((t) => t.name === name);
}

export function userOf(name) {
  return USERS[name] || null;
}

// Owner name of a uid as the sandbox's /etc/passwd has it.
export function ownerName(uid) {
  if (!hasIdentities()) return null;
  for (const [name, u] of Object.entries(USERS)) if (u.uid === uid) return name;
  return String(uid);
}

function chownAs(p, user) {
  if (!hasIdentities()) return;
  const u = USERS[user] || USERS.user;
  try { fs.lchownSync(p, u.uid, u.gid); } catch { /* best effort */ }
}

function mkdirOwned(p, user, mode = 0o755) {
  fs.mkdirSync(p, { recursive: true });
  fs.chmodSync(p, mode);
  chownAs(p, user);
}

// The sandbox's root: mount points for the host's system directories, and its own directories as
// E2B's configure.sh leaves them. `files` is not there (the code-interpreter template has no /files).
export function makeVmTree(root) {
  fs.mkdirSync(root, { recursive: true });
  fs.chmodSync(root, 0o755);
  for (const t of hostTops()) {
    const p = path.join(root, t.name);
    if (fs.existsSync(p) || isLink(p)) continue;
    if (t.kind === 'dir') fs.mkdirSync(p);
    else if (t.kind === 'file') fs.writeFileSync(p, '');
    else fs.symlinkSync(t.target, p);
  }
  mkdirOwned(path.join(root, 'home'), 'root');
  mkdirOwned(path.join(root, 'home', 'user'), 'user');
  mkdirOwned(path.join(root, 'root'), 'root', 0o700);
  mkdirOwned(path.join(root, 'tmp'), 'root', 0o1777);
  mkdirOwned(path.join(root, 'opt'), 'root');
  mkdirOwned(path.join(root, 'code'), 'root', 0o777);
  for (const d of ['srv', 'mnt', 'dev', 'proc']) mkdirOwned(path.join(root, d), 'root');
}

function isLink(p) {
  try { return fs.lstatSync(p).isSymbolicLink(); } catch { return false; }
}

// A sandbox path -> {host, writable, path}: the host's own file for its system directories (read
// only), else the file in the sandbox's tree.
export function vmPath(root, sbxPath) {
  const norm = path.posix.resolve('/', sbxPath);
  const top = norm.split('/')[1] || '';
  // the host's system directories, and the kernel's file systems (nothing can be made in /proc)
  if (top && (isHostTop(top) || KERNEL_FS.has(top))) return { host: norm, writable: false, path: norm };
  return { host: path.join(root, norm), writable: true, path: norm };
}

// Go's filepath.EvalSymlinks inside the sandbox: the sandbox path with every symlink on the way
// resolved (absolute links against the sandbox's /), or null when a part is missing or the links loop.
export function evalSymlinks(root, sbxPath) {
  let todo = path.posix.resolve('/', sbxPath).split('/').filter(Boolean);
  let cur = '/';
  for (let hops = 0; todo.length > 0;) {
    const next = path.posix.join(cur, todo.shift());
    let st;
    try { st = fs.lstatSync(vmPath(root, next).host); } catch { return null; }
    if (!st.isSymbolicLink()) { cur = next; continue; }
    if (++hops > 255) return null;
    const target = fs.readlinkSync(vmPath(root, next).host);
    todo = target.split('/').filter(Boolean).concat(todo);
    if (target.startsWith('/')) cur = '/';
  }
  return cur;
}

// vmPath for what the sandbox means by sbxPath: the links on the way to its last part resolved in the
// sandbox (an absolute link names a sandbox path, not the host's), the last part itself not followed.
export function vmPathResolved(root, sbxPath) {
  const norm = path.posix.resolve('/', sbxPath);
  const parent = path.posix.dirname(norm);
  const real = parent === '/' ? '/' : evalSymlinks(root, parent);
  return vmPath(root, real ? path.posix.join(real, path.posix.basename(norm)) : norm);
}

export function resolvePath(p, user = 'user') {
  const home = (USERS[user] || USERS.user).home;
  if (typeof p !== 'string' || p === '') return home;
  return path.posix.resolve(home, p);
}

// envd's permissions.EnsureDirs: every missing directory on the way is made 0755 and owned by the user.
export function ensureDirs(root, sbxDir, user) {
  const norm = path.posix.resolve('/', sbxDir);
  const parts = norm.split('/').filter(Boolean);
  let cur = '/';
  for (const part of parts) {
    cur = path.posix.join(cur, part);
    const { host, writable } = vmPath(root, cur);
    let st = null;
    try { st = fs.statSync(host); } catch { st = null; }
    if (st) {
      if (!st.isDirectory()) throw Object.assign(new Error(`path is a file: ${cur}`), { code: 'ENOTDIR' });
      continue;
    }
    if (!writable) throw Object.assign(new Error(`${cur}: read-only file system (the host's, in the emulator)`), { code: 'EROFS' });
    fs.mkdirSync(host);
    fs.chmodSync(host, 0o755);
    chownAs(host, user);
  }
}

// envd's upload (api/upload.go processFile): parents made for the user, the file (0644 when new)
// chowned to the user, even when it existed and belonged to someone else.
export function writeFileAs(root, sbxPath, data, user) {
  const { host, writable } = vmPath(root, sbxPath);
  ensureDirs(root, path.posix.dirname(sbxPath), user);
  if (!writable) throw Object.assign(new Error(`${sbxPath}: read-only file system (the host's, in the emulator)`), { code: 'EROFS' });
  fs.writeFileSync(host, data, { mode: 0o644 });
  chownAs(host, user);
}

export function makeDirAs(root, sbxPath, user) {
  ensureDirs(root, sbxPath, user);
}

// /etc/passwd and /etc/group of the sandbox: the host's, with `user` as uid/gid 1000.
function etcFiles(stateDir) {
  const dir = path.join(stateDir, 'etc');
  if (fs.existsSync(path.join(dir, 'passwd'))) return dir;
  fs.mkdirSync(dir, { recursive: true });
  const filter = (file, line) => {
    let lines = [];
    try { lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l && !/^user:/.test(l) && l.split(':')[2] !== '1000'); } catch { /* none */ }
    return lines.concat([line]).join('\n') + '\n';
  };
  fs.writeFileSync(path.join(dir, 'passwd'), filter('/etc/passwd', 'user:x:1000:1000::/home/user:/bin/bash'));
  fs.writeFileSync(path.join(dir, 'group'), filter('/etc/group', 'user:x:1000:'));
  return dir;
}

export function baseEnv(user) {
  const home = (USERS[user] || USERS.user).home;
  return {
    PATH: DEFAULT_PATH, HOME: home, USER: user, LOGNAME: user, SHELL: '/bin/bash',
    LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', PYTHONUNBUFFERED: '1',
  };
}

// Spawn argv in the sandbox rooted at `root` as `user`; cwd is a sandbox path. stateDir holds the
// sandbox /etc files.
export function spawnVm(root, argv, { env = {}, cwd = '/home/user', user = 'user', stdio = ['pipe', 'pipe', 'pipe'], stateDir, bootFile, cgroupProcs, binds = [], setenv = {} } = {}) {
  let child;
  if (hasBwrap()) {
    const args = ['--bind', root, '/'];
    for (const t of hostTops()) {
      if (t.kind !== 'link') args.push('--ro-bind', '/' + t.name, '/' + t.name);
    }
    if (hasIdentities() && stateDir) {
      const etc = etcFiles(stateDir);
      args.push('--ro-bind', path.join(etc, 'passwd'), '/etc/passwd', '--ro-bind', path.join(etc, 'group'), '/etc/group');
    }
    // --as-pid-1: bwrap's own init would be left unreaped when bwrap exits (a zombie under a
    // container's pid 1); the command is the namespace's pid 1 instead.
    args.push('--dev', '/dev', '--proc', '/proc');
    // the sandbox's own boot id (a new one each cold boot: a VM resumed from memory keeps it)
    if (bootFile) args.push('--ro-bind', bootFile, '/proc/sys/kernel/random/boot_id');
    for (const [from, to] of binds) args.push('--ro-bind', from, to);
    for (const [k, v] of Object.entries(setenv)) args.push('--setenv', k, v);
    args.push('--unshare-pid', '--as-pid-1', '--die-with-parent', '--chdir', cwd, '--');
    if (hasIdentities()) {
      const u = USERS[user] || USERS.user;
      if (u.uid !== 0) args.push('/usr/bin/setpriv', `--reuid=${u.uid}`, `--regid=${u.gid}`, '--clear-groups', '--');
    }
    args.push(...argv);
    if (cgroupProcs) {
      // join the sandbox's freezer cgroup before bwrap starts, so everything it starts is in it
      child = spawn('/bin/sh', ['-c', 'echo $$ > "$0" && exec bwrap "$@"', cgroupProcs, ...args], { env, stdio, detached: true });
    } else {
      child = spawn('bwrap', args, { env, stdio, detached: true });
    }
    child.isBwrap = true;
  } else {
    const henv = { ...env, ...setenv };
    if (henv.HOME) henv.HOME = vmPath(root, henv.HOME).host;
    child = spawn(argv[0], argv.slice(1), { env: henv, cwd: vmPath(root, cwd).host, stdio, detached: true });
  }
  liveChildren.add(child);
  child.on('exit', () => liveChildren.delete(child));
  child.on('error', () => liveChildren.delete(child));
  return child;
}

// Copies a template's tree into a new sandbox's, keeping owners and modes.
export function copyTree(from, to) {
  if (hasIdentities()) {
    const r = spawnSync('cp', ['-a', '--', from + '/.', to], { stdio: 'ignore' });
    if (r.status === 0) return;
  }
  fs.cpSync(from, to, { recursive: true, verbatimSymlinks: true });
}

// chown -R to a user (a COPY step's owner).
export function chownTree(p, user) {
  if (!hasIdentities()) return;
  const walk = (q) => {
    chownAs(q, user);
    let st;
    try { st = fs.lstatSync(q); } catch { return; }
    if (st.isDirectory()) for (const n of fs.readdirSync(q)) walk(path.join(q, n));
  };
  walk(p);
}
