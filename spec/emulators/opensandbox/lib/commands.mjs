// execd commands (runtime/command.go, controller/command.go; docs/protocols/opensandbox.md §2.3):
// POST /command (foreground stream or background), GET /command/status/{id},
// GET /command/{id}/logs?cursor=<byte offset>, DELETE /command?id=.
//
// Like execd, a foreground command writes stdout and stderr to /tmp/<id>.stdout and /tmp/<id>.stderr
// inside the sandbox, and the stream tails those files every 100 ms: one event per line without its
// terminator (\n or \r), a blank line as "\n", an unterminated last line flushed at exit. A background
// command writes both to /tmp/<id>.output, read back by byte offset.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { readBody, sendGoJson, send } from './util.mjs';
import { spawnIn, signalTree, resolvePath, baseEnv, WORKDIR } from './runtime.mjs';
import { EventStream } from './stream.mjs';

const TAIL_MS = 100;

export function commandId() {
  return crypto.randomUUID().replace(/-/g, '');
}

// pathutil.ExpandPathWithEnv: ~ and $VAR / ${VAR} from the merged environment.
export function expandPath(p, env) {
  let s = String(p);
  s = s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (_, a, b) => env[a || b] ?? '');
  if (s === '~' || s.startsWith('~/')) s = (env.HOME || '/root') + s.slice(1);
  return s;
}

// The line splitter of tailStdPipe/readFromPos.
class LineTail {
  constructor(onLine) {
    this.onLine = onLine;
    this.buf = Buffer.alloc(0);
    this.cr = false;
  }

  push(chunk) {
    let start = 0;
    const data = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    this.buf = Buffer.alloc(0);
    for (let i = 0; i < data.length; i++) {
      const b = data[i];
      if (b !== 0x0a && b !== 0x0d) continue;
      if (i > start) this.onLine(data.subarray(start, i).toString('utf8'));
      else if (!(b === 0x0a && this.cr)) this.onLine('\n');
      this.cr = b === 0x0d;
      start = i + 1;
    }
    if (start < data.length) {
      this.buf = Buffer.from(data.subarray(start));
      this.cr = false;
    }
  }

  flush() {
    if (this.buf.length) this.onLine(this.buf.toString('utf8'));
    this.buf = Buffer.alloc(0);
  }
}

// Tails a file from byte 0 every TAIL_MS; stop() reads what is left.
class FileTail {
  constructor(file, onLine) {
    this.file = file;
    this.pos = 0;
    this.lines = new LineTail(onLine);
    this.timer = setInterval(() => this.read(), TAIL_MS);
    this.timer.unref?.();
  }

  read() {
    let fd;
    try { fd = fs.openSync(this.file, 'r'); } catch { return; }
    try {
      const buf = Buffer.alloc(64 * 1024);
      for (;;) {
        const n = fs.readSync(fd, buf, 0, buf.length, this.pos);
        if (n <= 0) break;
        this.pos += n;
        this.lines.push(Buffer.from(buf.subarray(0, n)));
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  stop() {
    clearInterval(this.timer);
    this.read();
    this.lines.flush();
  }
}

class Command {
  constructor(sbx, { id, content, background, child, logs }) {
    this.sbx = sbx;
    this.id = id;
    this.content = content;
    this.background = background;
    this.child = child;
    this.logs = logs;
    this.running = true;
    this.exitCode = null;
    this.error = '';
    this.startedAt = new Date();
    this.finishedAt = null;
    this.killedBy = null;      // 'SIGKILL' | 'SIGTERM' when we ended it
    this.done = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.running = false;
        this.finishedAt = new Date();
        const sig = this.killedBy || signal;
        if (sig) {
          // Go's ExitError.ExitCode() is -1 for a signal; err.Error() is "signal: killed".
          this.exitCode = -1;
          this.error = `signal: ${sig === 'SIGTERM' ? 'terminated' : sig === 'SIGINT' ? 'interrupt' : 'killed'}`;
        } else {
          this.exitCode = code;
          this.error = code === 0 ? '' : `exit status ${code}`;
        }
        resolve();
      });
      child.on('error', (e) => {
        this.running = false;
        this.finishedAt = new Date();
        this.exitCode = 255;
        this.error = e.message;
        resolve();
      });
    });
  }

  kill(why, signal = 'SIGKILL') {
    if (!this.running) return;
    if (!this.killedBy || signal === 'SIGKILL') this.killedBy = signal;
    signalTree(this.child, 'SIGCONT');
    signalTree(this.child, signal);
  }

  info() {
    return { id: this.id, content: this.content, running: this.running, background: this.background,
      pid: this.child ? this.child.pid : null };
  }

  status() {
    const out = { id: this.id, content: this.content, running: this.running };
    if (this.exitCode !== null) out.exit_code = this.exitCode;
    if (this.error) out.error = this.error;
    out.started_at = this.startedAt.toISOString();
    if (this.finishedAt) out.finished_at = this.finishedAt.toISOString();
    return out;
  }
}

function badRequest(res, message) {
  sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message });
}

// Body of POST /command, validated as model.RunCommandRequest.Validate(); null after a 400.
function parseRunCommand(res, buf, sbx) {
  let body;
  try {
    body = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    badRequest(res, `error parsing request, MAYBE invalid body format. ${e.message}`);
    return null;
  }
  if (!body || typeof body !== 'object' || typeof body.command !== 'string' || body.command === '') {
    badRequest(res, "invalid request, validation error Key: 'RunCommandRequest.Command' Error:Field validation for 'Command' failed on the 'required' tag");
    return null;
  }
  if (body.timeout !== undefined && body.timeout !== null && !(Number.isInteger(body.timeout) && body.timeout >= 0)) {
    badRequest(res, "invalid request, validation error Key: 'RunCommandRequest.TimeoutMs' Error:Field validation for 'TimeoutMs' failed on the 'gte' tag");
    return null;
  }
  if (body.gid != null && body.uid == null) {
    badRequest(res, 'invalid request, validation error uid is required when gid is provided');
    return null;
  }
  if (body.envs != null && (typeof body.envs !== 'object' || Array.isArray(body.envs))) {
    badRequest(res, 'error parsing request, MAYBE invalid body format. json: cannot unmarshal into Go struct field RunCommandRequest.envs of type map[string]string');
    return null;
  }
  const env = baseEnv({ ...sbx.env, ...(body.envs || {}) });
  let cwd = WORKDIR;
  if (body.cwd) {
    const expanded = expandPath(body.cwd, env);
    const rp = resolvePath(sbx.root, expanded);
    let st = null;
    try { st = fs.statSync(rp.host); } catch { /* missing */ }
    if (!st) {
      badRequest(res, `invalid request, validation error working directory does not exist: ${body.cwd}: stat ${expanded}: no such file or directory`);
      return null;
    }
    if (!st.isDirectory()) {
      badRequest(res, `invalid request, validation error working directory path is not a directory: ${body.cwd}`);
      return null;
    }
    cwd = rp.path;
  }
  return { body, env, cwd };
}

function logFile(sbx, name) {
  return path.join(sbx.root, 'tmp', name);
}

// The shell execd uses: bash, else sh.
const SHELL = fs.existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';

async function runForeground(emu, sbx, req, res, parsed, ctx) {
  const { body, env, cwd } = parsed;
  const id = commandId();
  const stream = new EventStream(res, ctx);
  const outPath = logFile(sbx, `${id}.stdout`);
  const errPath = logFile(sbx, `${id}.stderr`);
  const outFd = fs.openSync(outPath, 'w+', 0o777);
  const errFd = fs.openSync(errPath, 'w+', 0o777);
  let child;
  try {
    child = spawnIn(sbx.root, [SHELL, '-c', body.command], { env, cwd, stdio: ['ignore', outFd, errFd] });
  } finally {
    fs.closeSync(outFd);
    fs.closeSync(errFd);
  }
  const cmd = new Command(sbx, { id, content: body.command, background: false, child });
  sbx.commands.set(id, cmd);
  stream.event({ type: 'init', text: id });
  const tails = [
    new FileTail(outPath, (text) => stream.event({ type: 'stdout', text })),
    new FileTail(errPath, (text) => stream.event({ type: 'stderr', text })),
  ];
  let timer = null;
  if (body.timeout > 0) timer = setTimeout(() => cmd.kill('timeout'), body.timeout);
  // The request's context ends when the client goes away: the process group is killed.
  const onClose = () => { if (!res.writableEnded) cmd.kill('client gone'); };
  res.on('close', onClose);
  const started = Date.now();
  await cmd.done;
  if (timer) clearTimeout(timer);
  for (const t of tails) t.stop();
  if (cmd.exitCode === 0) {
    const ms = Date.now() - started;
    stream.event(ms > 0 ? { type: 'execution_complete', execution_time: ms } : { type: 'execution_complete' });
  } else if (cmd.exitCode === 255 && !cmd.child.pid) {
    stream.event({ type: 'error', error: { ename: 'CommandExecError', evalue: cmd.error, traceback: [cmd.error] } });
  } else {
    // A non-zero exit ends the stream with `error` (evalue = the exit code) and no completion.
    stream.event({ type: 'error', error: { ename: 'CommandExecError', evalue: String(cmd.exitCode), traceback: [cmd.error] } });
  }
  await stream.end(emu.config.graceMs);
  res.off('close', onClose);
}

async function runBackground(emu, sbx, req, res, parsed, ctx) {
  const { body, env, cwd } = parsed;
  const id = commandId();
  const stream = new EventStream(res, ctx);
  const outPath = logFile(sbx, `${id}.output`);
  const fd = fs.openSync(outPath, 'w+', 0o777);
  let child;
  try {
    child = spawnIn(sbx.root, [SHELL, '-c', body.command], { env, cwd, stdio: ['ignore', fd, fd] });
  } finally {
    fs.closeSync(fd);
  }
  const cmd = new Command(sbx, { id, content: body.command, background: true, child, logs: outPath });
  sbx.commands.set(id, cmd);
  if (body.timeout > 0) {
    const t = setTimeout(() => cmd.kill('timeout'), body.timeout);
    cmd.done.then(() => clearTimeout(t));
  }
  stream.event({ type: 'init', text: id });
  stream.event({ type: 'execution_complete', execution_time: 1 });
  await stream.end(emu.config.graceMs);
}

// preBuf: a body already read (POST /code without a language runs its code as a command).
export async function runCommand(emu, sbx, req, res, ctx, preBuf) {
  const buf = preBuf || await readBody(req);
  const parsed = parseRunCommand(res, buf, sbx);
  if (!parsed) return;
  if (parsed.body.background) return runBackground(emu, sbx, req, res, parsed, ctx);
  return runForeground(emu, sbx, req, res, parsed, ctx);
}

export function commandStatus(sbx, res, id) {
  const cmd = sbx.commands.get(id);
  if (!cmd) return sendGoJson(res, 404, { code: 'INVALID_REQUEST_BODY', message: `command not found: ${id}` });
  return sendGoJson(res, 200, cmd.status());
}

export function commandLogs(sbx, res, id, cursorRaw) {
  const cmd = sbx.commands.get(id);
  if (!cmd) return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `command not found: ${id}` });
  if (!cmd.background) return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `command ${id} is not running in background` });
  const cursor = /^\d+$/.test(cursorRaw || '') ? Number(cursorRaw) : 0;
  let data = Buffer.alloc(0);
  let end = cursor;
  try {
    const all = fs.readFileSync(cmd.logs);
    data = all.subarray(Math.min(cursor, all.length));
    end = Math.max(cursor, all.length);
  } catch (e) {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `error open combined output file for command ${id}: ${e.message}` });
  }
  return send(res, 200, data, { 'Content-Type': 'text/plain; charset=utf-8', 'EXECD-COMMANDS-TAIL-CURSOR': String(end) });
}

// DELETE /command?id= (and /code?id=): SIGTERM to the group, SIGKILL after 3 s, answer once it is gone.
export async function interruptCommand(sbx, cmd) {
  cmd.kill('interrupt', 'SIGTERM');
  const t = setTimeout(() => cmd.kill('interrupt', 'SIGKILL'), 3000);
  await cmd.done;
  clearTimeout(t);
}
