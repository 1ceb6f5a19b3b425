// envd (port 49983): Connect RPC process.Process / filesystem.Filesystem and the /files REST API.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import { spawnSync } from 'node:child_process';
import { readBody, parseJson, send, sendJson, randomId } from './util.mjs';
import { killTree, terminalOf } from './runtime.mjs';
import { USERS, vmPath as hostPath, resolvePath as normalizeSandboxPath, writeFileAs, ensureDirs, ownerName, evalSymlinks, vmPathResolved } from './vm.mjs';
import { readMetadata, writeMetadata } from './xattr.mjs';
import { RpcError, parseEnvelope, unaryError, unaryOk, ServerStream } from './connect.mjs';
import { boundaryOf, parseMultipart } from './multipart.mjs';

const UNAUTHORIZED = 'unauthorized access, please provide a valid access token or method signing if supported';
const SIGNAL_NAMES = { SIGKILL: 'killed', SIGTERM: 'terminated', SIGINT: 'interrupt', SIGHUP: 'hangup', SIGQUIT: 'quit' };
const MIME = {
  '.txt': 'text/plain; charset=utf-8', '.json': 'application/json', '.html': 'text/html; charset=utf-8',
  '.py': 'text/x-python; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.png': 'image/png',
  '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.csv': 'text/csv; charset=utf-8', '.md': 'text/markdown; charset=utf-8',
  '.gz': 'application/gzip', '.tar': 'application/x-tar', '.zip': 'application/zip', '.pdf': 'application/pdf',
};

// ---- processes ----------------------------------------------------------------------------

const SCRIPT = '/usr/bin/script';

// envd starts every process through `/bin/sh -c '<wrapper>' -- cmd args...`: the wrapper raises its
// oom_score_adj and execs the command under ionice and nice where the image has them (infra envd
// services/process/handler/handler.go New, ioniceNicePrefix). So a missing executable is the shell's
// (or nice's) "not found" and exit 127, after a start event, not an RPC error.
const WRAPPER = (() => {
  let prefix = '';
  if (fs.existsSync('/usr/bin/ionice')) prefix += '/usr/bin/ionice -c 2 -n 4 ';
  if (fs.existsSync('/usr/bin/nice')) prefix += '/usr/bin/nice -n 0 ';
  return `echo 100 > /proc/$$/oom_score_adj && exec ${prefix}"\${@}"`;
})();

function shQuote(s) {
  return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

class Proc {
  constructor(sbx, child, config, tag, pty) {
    this.sbx = sbx;
    this.child = child;
    this.pid = child.pid;
    this.config = config;
    this.tag = tag;
    this.pty = pty;
    this.subscribers = new Set();
    this.endEvent = null;
    this.killSignal = null;
    this.killReason = null;
    this.timer = null;
    this.stdinOpen = child.stdin && !child.stdin.destroyed;
    const emit = (kind) => (chunk) => this.publish({ data: { [pty ? 'pty' : kind]: chunk.toString('base64') } });
    child.stdout?.on('data', emit('stdout'));
    child.stderr?.on('data', emit('stderr'));
    child.stdin?.on('error', () => { this.stdinOpen = false; });
    child.on('close', (code, signal) => this.finish(code, signal));
    child.on('error', (e) => this.finish(null, null, e));
  }

  publish(ev) {
    for (const s of [...this.subscribers]) s(ev);
  }

  finish(code, signal, err) {
    if (this.endEvent) return;
    if (this.timer) clearTimeout(this.timer);
    let end;
    const sig = this.killSignal || signal;
    if (err) end = { exitCode: -1, exited: false, status: 'error', error: String(err.message || err) };
    else if (sig) {
      const what = `signal: ${SIGNAL_NAMES[sig] || sig}`;
      end = { exitCode: -1, exited: false, status: what, error: what };
    } else if (code === 0) end = { exited: true, status: 'exit status 0' };
    else end = { exitCode: code, exited: true, status: `exit status ${code}`, error: `exit status ${code}` };
    this.endEvent = end;
    this.sbx.processes.delete(this.pid);
    this.publish({ end });
    this.subscribers.clear();
  }

  kill(signal = 'SIGKILL', reason = 'signal') {
    if (this.endEvent) return;
    if (!this.killSignal) { this.killSignal = signal; this.killReason = reason; }
    killTree(this.child, signal);
    if (signal !== 'SIGKILL') {
      // bubblewrap dies on SIGTERM and takes the namespace with it; make sure nothing lingers.
      setTimeout(() => killTree(this.child, 'SIGKILL'), 2000).unref();
    }
  }

  info() {
    const out = { config: { cmd: this.config.cmd, args: this.config.args, envs: this.config.envs, cwd: this.config.cwd }, pid: this.pid };
    if (this.tag !== undefined) out.tag = this.tag;
    return out;
  }
}

// The request's user: Basic auth names one; none means envd's default, the template's USER (infra
// envd execcontext.ResolveDefaultUsername; `user` on the code-interpreter template, root on one built
// from an image: orchestrator/pkg/template/build/phases/base/builder.go defaultUser).
function userFromBasic(req, sbx) {
  const auth = req.headers.authorization;
  if (!auth) return { user: sbx.templateUser };
  const m = /^Basic\s+(.+)$/i.exec(auth);
  if (!m) return { error: 'invalid authorization header' };
  const dec = Buffer.from(m[1], 'base64').toString('utf8');
  const user = dec.split(':')[0];
  if (!USERS[user]) return { error: `invalid username: '${user}'` };
  return { user };
}

function findProc(sbx, selector) {
  if (!selector) return null;
  if (selector.pid !== undefined) return sbx.processes.get(Number(selector.pid)) || null;
  if (selector.tag !== undefined) {
    for (const p of sbx.processes.values()) if (p.tag === selector.tag) return p;
  }
  return null;
}

function keepaliveMs(req) {
  const v = Number(req.headers['keepalive-ping-interval']);
  return (Number.isFinite(v) && v > 0 ? v : 90) * 1000;
}

function connectTimeoutMs(req) {
  const v = Number(req.headers['connect-timeout-ms']);
  return Number.isFinite(v) && v > 0 ? v : 0;
}

// Attach a stream to a process: forwards events, keepalives, one end, then the end-stream.
function attach(proc, stream, req, { deadlineMs, ownsDeadline }) {
  const kaMs = keepaliveMs(req);
  let ka = null;
  let streamTimer = null;
  const armKa = () => {
    if (ka) clearTimeout(ka);
    ka = setTimeout(() => { stream.send({ event: { keepalive: {} } }); armKa(); }, kaMs);
    ka.unref();
  };
  const cleanup = () => {
    if (ka) clearTimeout(ka);
    if (streamTimer) clearTimeout(streamTimer);
    proc.subscribers.delete(sub);
  };
  const sub = (ev) => {
    if (ev.end) {
      cleanup();
      stream.send({ event: ev });
      const deadline = proc.killReason === 'deadline';
      stream.end(deadline ? { code: 'deadline_exceeded', message: 'context deadline exceeded' } : undefined);
      return;
    }
    stream.send({ event: ev });
    armKa();
  };
  proc.subscribers.add(sub);
  stream.onClose = cleanup;
  armKa();
  if (deadlineMs > 0 && !ownsDeadline) {
    streamTimer = setTimeout(() => {
      cleanup();
      stream.end({ code: 'deadline_exceeded', message: 'context deadline exceeded' });
    }, deadlineMs);
  }
}

async function processRpc(emu, sbx, method, req, res, ctx) {
  const streaming = method === 'Start' || method === 'Connect';
  const raw = await readBody(req);
  let msg;
  try {
    msg = streaming ? parseEnvelope(raw) : parseJson(raw);
  } catch (e) {
    throw e instanceof RpcError ? e : new RpcError('invalid_argument', `unmarshal message: ${e.message}`);
  }
  const u = userFromBasic(req, sbx);
  if (u.error) throw new RpcError('unauthenticated', u.error);
  const user = u.user;

  if (method === 'Start') {
    const pc = msg.process || {};
    if (typeof pc.cmd !== 'string' || pc.cmd === '') throw new RpcError('invalid_argument', 'process.cmd is required');
    const args = Array.isArray(pc.args) ? pc.args.map(String) : [];
    const envs = pc.envs && typeof pc.envs === 'object' ? pc.envs : {};
    const cwd = normalizeSandboxPath(pc.cwd || sbx.templateWorkdir || USERS[user].home, user);
    const env = { ...sbx.env(user), ...envs };
    const cwdHost = hostPath(sbx.root, cwd).host;
    let cwdOk = false;
    try { cwdOk = fs.statSync(cwdHost).isDirectory(); } catch { cwdOk = false; }
    if (!cwdOk) throw new RpcError('invalid_argument', `cwd '${cwd}' does not exist`);
    const pty = !!msg.pty;
    const wantStdin = msg.stdin === true || pty;
    let argv = ['/bin/sh', '-c', WRAPPER, '--', pc.cmd, ...args];
    if (pty && fs.existsSync(SCRIPT)) {
      // A real terminal through util-linux script(1), sized as asked.
      const size = (msg.pty && msg.pty.size) || {};
      const cols = Number(size.cols) || 80;
      const rows = Number(size.rows) || 24;
      argv = [SCRIPT, '-qfec', `stty cols ${cols} rows ${rows} 2>/dev/null; exec ${argv.map(shQuote).join(' ')}`, '/dev/null'];
    }
    const child = sbx.spawn(argv, { user, env, cwd });
    if (!wantStdin) child.stdin.end();
    const proc = new Proc(sbx, child, { cmd: pc.cmd, args, envs, cwd }, msg.tag, pty);
    if (!proc.pid) throw new RpcError('internal', 'error starting process');
    sbx.processes.set(proc.pid, proc);
    const deadline = connectTimeoutMs(req);
    if (deadline > 0) proc.timer = setTimeout(() => proc.kill('SIGKILL', 'deadline'), deadline);
    const stream = new ServerStream(res, ctx.frameDelayMs);
    stream.start();
    stream.send({ event: { start: { pid: proc.pid } } });
    attach(proc, stream, req, { deadlineMs: deadline, ownsDeadline: true });
    return;
  }

  if (method === 'Connect') {
    const proc = findProc(sbx, msg.process);
    if (!proc) throw new RpcError('not_found', `process with ${msg.process && msg.process.tag !== undefined ? 'tag ' + msg.process.tag : 'pid ' + (msg.process && msg.process.pid)} not found`);
    const stream = new ServerStream(res, ctx.frameDelayMs);
    stream.start();
    stream.send({ event: { start: { pid: proc.pid } } });
    attach(proc, stream, req, { deadlineMs: connectTimeoutMs(req), ownsDeadline: false });
    return;
  }

  if (method === 'List') {
    return unaryOk(res, { processes: [...sbx.processes.values()].map((p) => p.info()) });
  }

  const proc = findProc(sbx, msg.process);
  if (['SendInput', 'SendSignal', 'CloseStdin', 'Update'].includes(method) && !proc) {
    throw new RpcError('not_found', `process with ${msg.process && msg.process.tag !== undefined ? 'tag ' + msg.process.tag : 'pid ' + (msg.process && msg.process.pid)} not found`);
  }
  if (method === 'SendInput') {
    const input = msg.input || {};
    const data = input.stdin ?? input.pty;
    if (data === undefined) throw new RpcError('invalid_argument', 'input is required');
    if (!proc.stdinOpen || proc.child.stdin.writableEnded) throw new RpcError('failed_precondition', 'stdin is closed or was not enabled for this process');
    proc.child.stdin.write(Buffer.from(String(data), 'base64'));
    return unaryOk(res, {});
  }
  if (method === 'SendSignal') {
    const s = msg.signal;
    const sig = (s === 'SIGNAL_SIGTERM' || s === 15) ? 'SIGTERM' : (s === 'SIGNAL_SIGKILL' || s === 9) ? 'SIGKILL' : null;
    if (!sig) throw new RpcError('invalid_argument', `invalid signal: ${s}`);
    proc.kill(sig, 'signal');
    return unaryOk(res, {});
  }
  if (method === 'CloseStdin') {
    if (proc.child.stdin && !proc.child.stdin.writableEnded) proc.child.stdin.end();
    proc.stdinOpen = false;
    return unaryOk(res, {});
  }
  // Update with a pty size resizes the process's terminal, as envd's pty.Setsize on its master does
  // (infra envd services/process/update.go, handler.go ResizeTty): the kernel then sends SIGWINCH to
  // the terminal's foreground group. A process without a pty: envd's internal error. The size is set
  // here on the terminal script(1) made for it (stty -F through /proc/<pid>/fd/0: TIOCSWINSZ).
  if (method === 'Update') {
    if (msg.pty) {
      if (!proc.pty) throw new RpcError('internal', 'error resizing tty: tty not assigned to process');
      const size = (msg.pty && msg.pty.size) || {};
      const rows = (Number(size.rows) >>> 0) & 0xffff;
      const cols = (Number(size.cols) >>> 0) & 0xffff;
      const tty = terminalOf(proc.child);
      const r = tty ? spawnSync('stty', ['-F', tty, 'rows', String(rows), 'cols', String(cols)], { encoding: 'utf8' }) : null;
      if (!r || r.status !== 0) {
        throw new RpcError('internal', `error resizing tty: ${r ? (r.stderr || '').trim() || `stty exit ${r.status}` : 'the terminal is gone'}`);
      }
    }
    return unaryOk(res, {});
  }
  if (method === 'StreamInput') throw new RpcError('unimplemented', 'StreamInput needs a bidirectional transport; use SendInput');
  throw new RpcError('unimplemented', `process.Process/${method} is not implemented`);
}

// ---- filesystem ---------------------------------------------------------------------------

// Go's os.FileMode.String(): the type letter (d, L, p, S, D, c) then rwx, as envd reports
// `permissions` from the entry's own lstat.
function permString(st) {
  const kind = st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'L' : st.isFIFO() ? 'p' : st.isSocket() ? 'S'
    : st.isCharacterDevice() ? 'Dc' : st.isBlockDevice() ? 'D' : '-';
  const rwx = 'rwxrwxrwx';
  let s = kind;
  for (let i = 0; i < 9; i++) s += (st.mode & (1 << (8 - i))) ? rwx[i] : '-';
  return s;
}

function fileType(st) {
  if (st.isFile()) return 'FILE_TYPE_FILE';
  if (st.isDirectory()) return 'FILE_TYPE_DIRECTORY';
  return 'FILE_TYPE_UNSPECIFIED';
}

// envd's EntryInfo (infra packages/shared/pkg/filesystem/entry.go GetEntryInfo, envd services/
// filesystem/utils.go entryInfo): `mode` is the permission bits only (Perm(): 0o755 for a directory,
// not Go's ModeDir bit); a symlink reports its resolved absolute target (filepath.EvalSymlinks; the
// link's own path when that fails) and the target's type and permission bits; `metadata` is read
// from the file's user.e2b.* xattrs (xattr.go ReadMetadata). `meta` is what readMetadata answered.
function entryInfo(sbx, sbxPath, hostP, meta) {
  const st = fs.lstatSync(hostP);
  // real owners (getFileOwnership), or, with one uid for everything, where the file lives
  const owner = ownerName(st.uid) || (sbxPath.startsWith('/root') || !hostPath(sbx.root, sbxPath).writable ? 'root' : 'user');
  let type = fileType(st);
  let mode = st.mode & 0o777;
  let symlinkTarget;
  if (st.isSymbolicLink()) {
    symlinkTarget = evalSymlinks(sbx.root, sbxPath) || sbxPath;
    let target = null;
    try { target = fs.statSync(hostPath(sbx.root, symlinkTarget).host); } catch { target = null; }
    type = target ? fileType(target) : 'FILE_TYPE_UNSPECIFIED';
    mode = target ? target.mode & 0o777 : 0;
  }
  const e = {
    name: path.posix.basename(sbxPath) || '/',
    type,
    path: sbxPath,
    size: String(st.size),
    mode,
    permissions: permString(st),
    owner,
    group: owner,
    modifiedTime: st.mtime.toISOString(),
  };
  if (symlinkTarget !== undefined) e.symlinkTarget = symlinkTarget;
  if (meta) e.metadata = meta;
  return e;
}

// entryInfo with the file's xattr metadata read first.
async function entryWithMeta(sbx, sbxPath, hostP) {
  const [meta] = await readMetadata([hostP]);
  return entryInfo(sbx, sbxPath, hostP, meta);
}

function exists(p) {
  try { fs.lstatSync(p); return true; } catch { return false; }
}

// inotify -> FilesystemEvent{name (relative to the watched dir), type, entry?}. A recursive watch is
// one watcher per directory, and a directory created under it gets its own at once, so writes in a
// folder made after the watch began are reported (infra envd services/filesystem/watch.go: fsnotify's
// recursive "dir/..." path, utils/rfsnotify.go; node's recursive fs.watch misses them). Entries of
// create/write events carry EntryInfo when asked (opCarriesEntry), read after the event (best effort).
class TreeWatcher extends EventEmitter {
  constructor(sbx, sp, host, recursive, includeEntry, onEvent) {
    super();
    Object.assign(this, { sbx, sp, host, recursive: !!recursive, includeEntry, onEvent });
    this.watchers = new Map(); // relative dir ('' = the root) -> fs.FSWatcher
    this.closed = false;
    this.add('', true);
  }

  add(rel, first = false) {
    if (this.closed || this.watchers.has(rel)) return;
    const dir = path.join(this.host, rel);
    let w;
    try {
      w = fs.watch(dir, (evt, filename) => this.event(rel, evt, filename));
    } catch (e) {
      if (first) throw e;
      return; // raced away
    }
    w.on('error', (e) => { if (rel === '') this.emit('error', e); else this.drop(rel); });
    this.watchers.set(rel, w);
    if (!this.recursive) return;
    let names = [];
    try { names = fs.readdirSync(dir, { withFileTypes: true }); } catch { names = []; }
    for (const d of names) {
      const child = rel ? `${rel}/${d.name}` : d.name;
      // what a new folder already holds when its watch begins (made in the same instant, mkdir -p
      // && echo > ...) is reported as created, not lost in the gap
      if (!first) this.event(rel, 'rename', d.name);
      else if (d.isDirectory()) this.add(child);
    }
  }

  drop(rel) {
    for (const [k, w] of this.watchers) {
      if (k === rel || k.startsWith(rel + '/')) { try { w.close(); } catch { /* closed */ } this.watchers.delete(k); }
    }
  }

  event(rel, evt, filename) {
    if (this.closed || !filename) return;
    const name = rel ? `${rel}/${filename}` : String(filename);
    const full = path.join(this.host, name);
    let st = null;
    try { st = fs.lstatSync(full); } catch { st = null; }
    const type = evt === 'change' ? 'EVENT_TYPE_WRITE' : st ? 'EVENT_TYPE_CREATE' : 'EVENT_TYPE_REMOVE';
    if (this.recursive && type === 'EVENT_TYPE_CREATE' && st.isDirectory()) this.add(name);
    if (this.recursive && type === 'EVENT_TYPE_REMOVE') this.drop(name);
    const ev = { name, type };
    if (!this.includeEntry || !st) { this.onEvent(ev); return; }
    entryWithMeta(this.sbx, path.posix.join(this.sp, name), full)
      .then((entry) => { ev.entry = entry; }, () => { /* raced away */ })
      .finally(() => { if (!this.closed) this.onEvent(ev); });
  }

  close() {
    this.closed = true;
    this.drop('');
    for (const w of this.watchers.values()) { try { w.close(); } catch { /* closed */ } }
    this.watchers.clear();
  }
}

function startWatch(sbx, sp, host, recursive, includeEntry, onEvent) {
  return new TreeWatcher(sbx, sp, host, recursive, includeEntry, onEvent);
}

function watchTarget(sbx, p, user) {
  const sp = normalizeSandboxPath(p, user);
  const { host } = vmPathResolved(sbx.root, sp);
  let st;
  try { st = fs.statSync(host); } catch { throw new RpcError('not_found', `directory not found: ${sp}`); }
  if (!st.isDirectory()) throw new RpcError('invalid_argument', `path is not a directory: ${sp}`);
  return { sp, host };
}

async function filesystemRpc(emu, sbx, method, req, res, ctx) {
  const raw = await readBody(req);
  let msg;
  try {
    msg = method === 'WatchDir' ? parseEnvelope(raw) : parseJson(raw);
  } catch (e) {
    throw e instanceof RpcError ? e : new RpcError('invalid_argument', `unmarshal message: ${e.message}`);
  }
  const u = userFromBasic(req, sbx);
  if (u.error) throw new RpcError('unauthenticated', u.error);
  const user = u.user;
  const resolve = (p) => {
    const sp = normalizeSandboxPath(p, user);
    return { sp, ...vmPathResolved(sbx.root, sp) };
  };

  switch (method) {
    case 'Stat': {
      const { sp, host } = resolve(msg.path);
      if (!exists(host)) throw new RpcError('not_found', `file not found: ${sp}`);
      return unaryOk(res, { entry: await entryWithMeta(sbx, sp, host) });
    }
    case 'MakeDir': {
      const { sp, host, writable } = resolve(msg.path);
      if (exists(host)) {
        if (fs.statSync(host).isDirectory()) throw new RpcError('already_exists', `directory already exists: ${sp}`);
        throw new RpcError('invalid_argument', `path already exists but it is not a directory: ${sp}`);
      }
      if (!writable) throw new RpcError('permission_denied', `permission denied: ${sp}`);
      // envd (root) makes it and its missing parents for the user (filesystem/dir.go: EnsureDirs)
      ensureDirs(sbx.root, sp, user);
      return unaryOk(res, { entry: await entryWithMeta(sbx, sp, host) });
    }
    case 'ListDir': {
      const { sp, host } = resolve(msg.path);
      let st;
      try { st = fs.statSync(host); } catch { throw new RpcError('not_found', `directory not found: ${sp}`); }
      if (!st.isDirectory()) throw new RpcError('invalid_argument', `path is not a directory: ${sp}`);
      const depth = Number(msg.depth) > 0 ? Number(msg.depth) : 1;
      const found = [];
      const walk = (dirSp, dirHost, level) => {
        let names;
        try { names = fs.readdirSync(dirHost, { withFileTypes: true }).sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)); } catch { return; }
        for (const d of names) {
          const csp = path.posix.join(dirSp, d.name);
          const chost = path.join(dirHost, d.name);
          found.push({ csp, chost });
          // a link to a directory is listed, not followed (ListDir walks with lstat)
          if (level < depth && d.isDirectory()) walk(csp, chost, level + 1);
        }
      };
      walk(sp, host, 1);
      const metas = await readMetadata(found.map((f) => f.chost));
      const entries = [];
      found.forEach((f, i) => {
        try { entries.push(entryInfo(sbx, f.csp, f.chost, metas[i])); } catch { /* raced away */ }
      });
      return unaryOk(res, { entries });
    }
    case 'Remove': {
      const { sp, host, writable } = resolve(msg.path);
      if (!writable) throw new RpcError('permission_denied', `permission denied: ${sp}`);
      fs.rmSync(host, { recursive: true, force: true });
      return unaryOk(res, {});
    }
    case 'Move': {
      const src = resolve(msg.source);
      const dst = resolve(msg.destination);
      if (!exists(src.host)) throw new RpcError('not_found', `source file not found: ${src.sp}`);
      if (!src.writable || !dst.writable) throw new RpcError('permission_denied', `permission denied: ${src.writable ? dst.sp : src.sp}`);
      ensureDirs(sbx.root, path.posix.dirname(dst.sp), user);
      fs.renameSync(src.host, dst.host);
      return unaryOk(res, { entry: await entryWithMeta(sbx, dst.sp, dst.host) });
    }
    case 'WatchDir': {
      const { sp, host } = watchTarget(sbx, msg.path, user);
      const stream = new ServerStream(res, ctx.frameDelayMs);
      stream.start();
      stream.send({ start: {} });
      const kaMs = keepaliveMs(req);
      let ka = null;
      const armKa = () => {
        if (ka) clearTimeout(ka);
        ka = setTimeout(() => { stream.send({ keepalive: {} }); armKa(); }, kaMs);
        ka.unref();
      };
      let watcher;
      let deadline = null;
      const stop = () => {
        if (ka) clearTimeout(ka);
        if (deadline) clearTimeout(deadline);
        try { watcher.close(); } catch { /* closed */ }
      };
      try {
        watcher = startWatch(sbx, sp, host, msg.recursive, msg.includeEntry, (ev) => { stream.send({ filesystem: ev }); armKa(); });
      } catch (e) {
        stream.end({ code: 'internal', message: `error watching ${sp}: ${e.message}` });
        return;
      }
      watcher.on('error', () => { stop(); stream.end({ code: 'internal', message: `watch on ${sp} failed` }); });
      stream.onClose = stop;
      armKa();
      const dl = connectTimeoutMs(req);
      if (dl > 0) deadline = setTimeout(() => { stop(); stream.end({ code: 'deadline_exceeded', message: 'context deadline exceeded' }); }, dl);
      return;
    }
    case 'CreateWatcher': {
      const { sp, host } = watchTarget(sbx, msg.path, user);
      const id = randomId('', 16);
      const w = { events: [], watcher: null };
      w.watcher = startWatch(sbx, sp, host, msg.recursive, msg.includeEntry, (ev) => { if (w.events.length < 10000) w.events.push(ev); });
      w.watcher.on('error', () => {});
      if (!sbx.watchers) sbx.watchers = new Map();
      sbx.watchers.set(id, w);
      return unaryOk(res, { watcherId: id });
    }
    case 'GetWatcherEvents': {
      const w = sbx.watchers && sbx.watchers.get(msg.watcherId);
      if (!w) throw new RpcError('not_found', `watcher with id ${msg.watcherId} not found`);
      const events = w.events;
      w.events = [];
      return unaryOk(res, { events });
    }
    case 'RemoveWatcher': {
      const w = sbx.watchers && sbx.watchers.get(msg.watcherId);
      if (!w) throw new RpcError('not_found', `watcher with id ${msg.watcherId} not found`);
      try { w.watcher.close(); } catch { /* closed */ }
      sbx.watchers.delete(msg.watcherId);
      return unaryOk(res, {});
    }
    default:
      throw new RpcError('unimplemented', `filesystem.Filesystem/${method} is not implemented`);
  }
}

// ---- /files REST --------------------------------------------------------------------------

function restError(res, status, message) {
  sendJson(res, status, { code: status, message });
}

// envd's validateSigning (infra envd/internal/api/auth.go), run by GET and POST /files (which the
// token middleware lets through): with a token set, a token header must match; else a signature
// must be there and match v1_<base64 sha256 of path:operation:username:token[:expiration]>, and only
// then is the expiration checked. Each failure is a 401 with its own message; null = allowed.
function signingError(sbx, req, q, op) {
  if (!sbx.envdAccessToken) return null;
  const header = req.headers['x-access-token'];
  if (header) return header === sbx.envdAccessToken ? null : 'access token present in header but does not match';
  const sig = q.get('signature');
  if (!sig) return 'missing signature query parameter';
  const exp = q.get('signature_expiration');
  const raw = `${q.get('path') || ''}:${op}:${q.get('username') || ''}:${sbx.envdAccessToken}${exp !== null ? ':' + exp : ''}`;
  const want = 'v1_' + crypto.createHash('sha256').update(raw).digest('base64').replace(/=+$/, '');
  if (sig !== want) return 'invalid signature';
  if (exp !== null && Number(exp) < Math.floor(Date.now() / 1000)) return 'signature is already expired';
  return null;
}

// envd's ValidateMetadata (shared/pkg/filesystem/xattr.go): keys and values printable ASCII, keys
// non-empty and <= 246 bytes, 4096 bytes in all (prefix + key + value per entry).
function metadataError(meta) {
  let total = 0;
  const printable = (what, v) => {
    for (let i = 0; i < v.length; i++) {
      const c = v.charCodeAt(i);
      if (c < 0x20 || c > 0x7e) return `metadata ${what} contains non-printable-ASCII byte 0x${c.toString(16).padStart(2, '0')} at offset ${i}`;
    }
    return null;
  };
  for (const [k, v] of Object.entries(meta)) {
    if (k === '') return 'metadata key must not be empty';
    if (k.length > 255 - 'user.e2b.'.length) return `metadata key "${k}" exceeds ${255 - 'user.e2b.'.length} bytes`;
    const bad = printable('key', k) || printable(`value for key "${k}"`, v);
    if (bad) return bad;
    total += 'user.e2b.'.length + k.length + v.length;
  }
  if (total > 4096) return `total metadata size ${total} exceeds 4096 bytes`;
  return null;
}

async function files(emu, sbx, req, res, url) {
  const q = url.searchParams;
  const op = req.method === 'GET' ? 'read' : 'write';
  const denied = signingError(sbx, req, q, op);
  if (denied) {
    await readBody(req).catch(() => {});
    return restError(res, 401, denied);
  }
  const user = q.get('username') || sbx.templateUser;
  if (!USERS[user]) return restError(res, 401, `error looking up user '${user}': user: unknown user ${user}`);

  if (req.method === 'GET') {
    const p = q.get('path');
    if (!p) return restError(res, 400, 'path is required');
    const sp = normalizeSandboxPath(p, user);
    // links followed in the sandbox (os.Stat / os.Open in download.go)
    const { host } = hostPath(sbx.root, evalSymlinks(sbx.root, sp) || sp);
    let st;
    try { st = fs.statSync(host); } catch { return restError(res, 404, `path '${sp}' does not exist`); }
    if (st.isDirectory()) return restError(res, 400, `path '${sp}' is a directory`);
    let data = fs.readFileSync(host);
    const headers = {
      'Content-Type': MIME[path.extname(sp).toLowerCase()] || 'application/octet-stream',
      'Content-Disposition': `inline; filename=${JSON.stringify(path.posix.basename(sp))}`,
    };
    if (/\bgzip\b/.test(req.headers['accept-encoding'] || '')) {
      data = zlib.gzipSync(data);
      headers['Content-Encoding'] = 'gzip';
    }
    return send(res, 200, data, headers);
  }

  if (req.method !== 'POST') return restError(res, 405, 'method not allowed');
  let body = await readBody(req);
  // X-Metadata-<key> headers, keys lower-cased (api/upload.go extractMetadataHeaders)
  const meta = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (k.startsWith('x-metadata-')) meta[k.slice('x-metadata-'.length)] = String(v);
  }
  const badMeta = metadataError(meta);
  if (badMeta) return restError(res, 400, `invalid metadata: ${badMeta}`);
  const targets = [];
  const ctype = String(req.headers['content-type'] || '');
  if (ctype.startsWith('application/octet-stream')) {
    const p = q.get('path');
    if (!p) return restError(res, 400, 'path is required for application/octet-stream uploads');
    if (/gzip/i.test(req.headers['content-encoding'] || '')) {
      try { body = zlib.gunzipSync(body); } catch { return restError(res, 400, 'invalid gzip body'); }
    }
    targets.push({ path: p, data: body });
  } else if (ctype.startsWith('multipart/form-data')) {
    const boundary = boundaryOf(ctype);
    if (!boundary) return restError(res, 400, 'missing multipart boundary');
    let parts;
    try { parts = parseMultipart(body, boundary); } catch (e) { return restError(res, 400, `error parsing multipart form: ${e.message}`); }
    const fileParts = parts.filter((x) => x.name === 'file');
    if (fileParts.length === 0) return restError(res, 400, 'no file part in the multipart form');
    const qp = q.get('path');
    if (qp && fileParts.length > 1) return restError(res, 400, 'cannot upload several files to a single path');
    for (const fp of fileParts) {
      const p = qp || fp.filename;
      if (!p) return restError(res, 400, 'file part without a filename and no path given');
      targets.push({ path: p, data: fp.data });
    }
  } else {
    return restError(res, 400, `unsupported content type '${ctype}'`);
  }
  const seen = new Set();
  const out = [];
  for (const t of targets) {
    const sp = normalizeSandboxPath(t.path, user);
    if (seen.has(sp)) return restError(res, 400, `cannot upload multiple files to the same path '${sp}'`);
    seen.add(sp);
    const hp = hostPath(sbx.root, sp);
    try {
      if (fs.existsSync(hp.host) && fs.statSync(hp.host).isDirectory()) return restError(res, 400, `path '${sp}' is a directory`);
      // envd writes as root: any path, missing parents and the file owned by the user (api/upload.go)
      writeFileAs(sbx.root, sp, t.data, user);
      // always rewritten, so an overwrite replaces the whole set (processFile, WriteMetadata)
      await writeMetadata(hp.host, meta);
    } catch (e) {
      return restError(res, 500, `error writing file '${sp}': ${e.message}`);
    }
    const info = { path: sp, name: path.posix.basename(sp), type: 'file' };
    const [persisted] = await readMetadata([hp.host]);
    if (persisted) info.metadata = persisted;
    out.push(info);
  }
  return sendJson(res, 200, out);
}

// ---- dispatch -----------------------------------------------------------------------------

export async function handleEnvd(emu, sbx, req, res, url, ctx) {
  const p = url.pathname;
  if (p === '/health' && req.method === 'GET') return send(res, 204);
  if (p === '/files') return files(emu, sbx, req, res, url);
  if (p === '/init' && req.method === 'POST') { await readBody(req); return send(res, 204); }
  if (sbx.envdAccessToken && req.headers['x-access-token'] !== sbx.envdAccessToken) return restError(res, 401, UNAUTHORIZED);
  if (p === '/envs' && req.method === 'GET') return sendJson(res, 200, sbx.initEnv());
  if (p === '/metrics' && req.method === 'GET') {
    return sendJson(res, 200, { ts: Math.floor(Date.now() / 1000), cpu_count: sbx.cpuCount, cpu_used_pct: 1.5, mem_total: sbx.memoryMB * 1048576, mem_used: 67108864, disk_total: 1073741824, disk_used: 1048576 });
  }
  const m = /^\/(process\.Process|filesystem\.Filesystem)\/([A-Za-z]+)$/.exec(p);
  if (!m || req.method !== 'POST') return restError(res, 404, `no route for ${req.method} ${p}`);
  const streaming = (m[1] === 'process.Process' && (m[2] === 'Start' || m[2] === 'Connect')) || m[2] === 'WatchDir';
  const ctype = String(req.headers['content-type'] || '');
  const want = streaming ? 'application/connect+json' : 'application/json';
  if (!ctype.startsWith(want)) {
    await readBody(req).catch(() => {});
    return send(res, 415, `unsupported content type ${ctype}; the emulator speaks the Connect JSON codec (${want})`, { 'Content-Type': 'text/plain', 'Accept-Post': want });
  }
  try {
    if (m[1] === 'process.Process') await processRpc(emu, sbx, m[2], req, res, ctx);
    else await filesystemRpc(emu, sbx, m[2], req, res, ctx);
  } catch (e) {
    const err = e instanceof RpcError ? e : new RpcError('internal', e.message);
    if (streaming) {
      const stream = new ServerStream(res, 0);
      stream.end(err);
    } else {
      unaryError(res, err.code, err.message);
    }
  }
}

