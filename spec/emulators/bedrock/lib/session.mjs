// One code-interpreter session: a file tree, a persistent Python interpreter (kernel.py) for
// executeCode, shell commands and background tasks, and its hard time-to-live. Processes run
// through the E2B emulator's sandbox runtime (bubblewrap when present: the session's own /opt,
// /tmp, /home, /files... over a read-only view of the host), so absolute paths agree between
// the file tools and the code.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnIn, killTree, makeTree, hostPath, rmrf, DEFAULT_PATH } from '../../e2b/lib/runtime.mjs';
import { iso } from './util.mjs';

const KERNEL = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'kernel.py');
const KERNEL_SRC = fs.readFileSync(KERNEL, 'utf8');
// glsb's display module stands in for matplotlib-inline (kernel.py)
const DISPLAY_SRC = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..',
  'providers', 'local', 'display.py'), 'utf8');
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

// The session user's working directory on AgentCore; relative file-tool paths resolve here.
export const WORKDIR = '/opt/amazon/genesis1p-tools/var';
export const HOME = '/home/genesis1ptools';

export function sessionEnv() {
  return {
    PATH: DEFAULT_PATH, HOME, USER: 'genesis1ptools', LOGNAME: 'genesis1ptools', SHELL: '/bin/bash',
    LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', PYTHONUNBUFFERED: '1',
    // AgentCore's image lets pip install into its Python; Debian's marks its own "externally managed"
    PIP_BREAK_SYSTEM_PACKAGES: '1',
  };
}

// The persistent interpreter: one request at a time, in order.
class Kernel {
  constructor(session) {
    this.session = session;
    this.child = null;
    this.queue = Promise.resolve();
    this.current = null;
  }

  ensure() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const child = spawnIn(this.session.root, [PYTHON, '-c', 'import sys; exec(compile(sys.argv[1], "<kernel>", "exec"))', KERNEL_SRC, DISPLAY_SRC], {
      env: sessionEnv(), cwd: WORKDIR, stdio: ['pipe', 'ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    let buf = '';
    child.stdio[3].on('data', (d) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const cur = this.current;
        this.current = null;
        if (cur) {
          try { cur.resolve(JSON.parse(line)); } catch (e) { cur.resolve({ stdout: '', stderr: '', error: { name: 'EmulatorError', value: e.message, traceback: '' } }); }
        }
      }
    });
    child.stdin.on('error', () => {});
    child.on('exit', () => {
      if (this.child !== child) return;
      this.child = null;
      const cur = this.current;
      this.current = null;
      if (cur) cur.resolve({ stdout: '', stderr: '', error: { name: 'KernelDied', value: 'the interpreter process exited', traceback: '' } });
    });
  }

  // run(code, clear, ticket) -> {stdout, stderr, error}. ticket.cancelled before its turn: skipped;
  // set while running: the code is interrupted (SIGINT), as when the caller went away.
  run(code, clear, ticket = {}) {
    const job = this.queue.then(() => new Promise((resolve) => {
      if (this.session.status !== 'READY' || ticket.cancelled) { resolve(null); return; }
      this.ensure();
      this.current = { resolve };
      ticket.interrupt = () => { if (this.child) killTree(this.child, 'SIGINT'); };
      this.child.stdin.write(JSON.stringify({ code, clear: !!clear }) + '\n');
    }));
    this.queue = job.catch(() => {});
    return job;
  }

  close() {
    if (this.child) killTree(this.child);
    this.child = null;
    const cur = this.current;
    this.current = null;
    if (cur) cur.resolve(null);
  }
}

export class Session {
  constructor(emu, { id, interpreter, name, timeoutSeconds, region }) {
    this.emu = emu;
    this.id = id;
    this.interpreter = interpreter; // the Interpreter record (control.mjs) or the system one
    this.name = name;
    this.timeoutSeconds = timeoutSeconds;
    this.region = region;
    this.createdAt = Date.now();
    this.lastUpdatedAt = this.createdAt;
    this.status = 'READY';
    this.root = path.join(emu.stateDir, 'sessions', id);
    fs.mkdirSync(this.root, { recursive: true });
    makeTree(this.root);
    fs.mkdirSync(hostPath(this.root, WORKDIR).host, { recursive: true });
    fs.mkdirSync(hostPath(this.root, HOME).host, { recursive: true });
    this.kernel = new Kernel(this);
    this.commands = new Set(); // running executeCommand children
    this.tasks = new Map(); // taskId -> Task
    this.active = new Set(); // in-flight Invoke responses
    this.timer = setTimeout(() => emu.terminate(this, 'timeout'), Math.min(timeoutSeconds * 1000, 2 ** 31 - 1));
    this.timer.unref?.();
  }

  // A sandbox path (absolute, or relative to the working directory) -> {host, path, writable}.
  resolve(p) {
    const abs = path.posix.resolve(WORKDIR, String(p));
    return hostPath(this.root, abs);
  }

  spawn(argv, stdio = ['ignore', 'pipe', 'pipe']) {
    return spawnIn(this.root, argv, { env: sessionEnv(), cwd: WORKDIR, stdio });
  }

  stop(why) {
    if (this.status === 'TERMINATED') return;
    this.status = 'TERMINATED';
    this.lastUpdatedAt = Date.now();
    this.stoppedBecause = why;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.kernel.close();
    for (const c of this.commands) killTree(c);
    this.commands.clear();
    for (const t of this.tasks.values()) t.kill('canceled');
    // The microVM is gone: connections to it drop.
    for (const res of this.active) res.socket?.destroy();
    this.active.clear();
    rmrf(this.root);
  }

  summary() {
    return {
      codeInterpreterIdentifier: this.interpreter.id,
      sessionId: this.id,
      name: this.name,
      status: this.status,
      createdAt: iso(this.createdAt),
      lastUpdatedAt: iso(this.lastUpdatedAt),
    };
  }

  detail() {
    return {
      codeInterpreterIdentifier: this.interpreter.id,
      sessionId: this.id,
      name: this.name,
      createdAt: iso(this.createdAt),
      sessionTimeoutSeconds: this.timeoutSeconds,
      status: this.status,
    };
  }

  info() {
    return {
      sessionId: this.id,
      codeInterpreterIdentifier: this.interpreter.id,
      status: this.status,
      root: this.root,
      kernelPid: this.kernel.child ? this.kernel.child.pid : null,
      commands: this.commands.size,
      tasks: [...this.tasks.values()].map((t) => ({ taskId: t.id, status: t.status })),
      activeRequests: this.active.size,
      endsAt: iso(this.createdAt + this.timeoutSeconds * 1000),
    };
  }
}
