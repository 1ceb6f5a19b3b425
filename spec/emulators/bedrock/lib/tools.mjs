// The tools of InvokeCodeInterpreter (docs/protocols/bedrock.md §1.2): each takes the session
// and the request's `arguments` and returns a CodeInterpreterResult {content, structuredContent?,
// isError?}. Results mirror MCP's CallToolResult: text blocks, resource blocks for file contents,
// resource_link blocks for listings, structuredContent for stdout/stderr/exitCode and tasks.
import fs from 'node:fs';
import path from 'node:path';
import { killTree } from '../../e2b/lib/runtime.mjs';
import { uuid } from './util.mjs';
import { validation } from './errors.mjs';

const utf8 = new TextDecoder('utf-8', { fatal: true });

function text(t) {
  return { type: 'text', text: t };
}

function failed(message) {
  return { content: [text(message)], isError: true };
}

function stringArg(args, name, required = true) {
  const v = args[name];
  if (v === undefined || v === null) {
    if (required) throw validation(`1 validation error detected: Value at 'arguments.${name}' failed to satisfy constraint: Member must not be null`, 'FieldValidationFailed', [{ name: `arguments.${name}`, message: 'Member must not be null' }]);
    return undefined;
  }
  if (typeof v !== 'string') throw validation(`Value at 'arguments.${name}' must be a string`, 'CannotParse');
  return v;
}

function pathList(args) {
  const v = args.paths;
  if (!Array.isArray(v) || v.length === 0 || v.some((p) => typeof p !== 'string')) {
    throw validation("1 validation error detected: Value at 'arguments.paths' failed to satisfy constraint: Member must not be null", 'FieldValidationFailed', [{ name: 'arguments.paths', message: 'Member must not be null' }]);
  }
  return v;
}

// executeCode: Python in the session's persistent interpreter. clearContext starts from a fresh
// namespace. `ticket` lets the caller interrupt the code when the client goes away.
async function executeCode(session, args, ticket) {
  const code = stringArg(args, 'code');
  const language = args.language === undefined ? 'python' : args.language;
  if (!['python', 'javascript', 'typescript'].includes(language)) {
    throw validation(`1 validation error detected: Value '${language}' at 'arguments.language' failed to satisfy constraint: Member must satisfy enum value set: [python, javascript, typescript]`, 'FieldValidationFailed', [{ name: 'arguments.language', message: 'Member must satisfy enum value set' }]);
  }
  if (language !== 'python') return failed(`The emulator runs python only (language ${language} was asked for).`);
  const started = Date.now();
  const r = await session.kernel.run(code, args.clearContext === true, ticket);
  if (r === null) return null; // the session ended or the caller went away
  const isError = r.error !== null && r.error !== undefined;
  // figures shown or left open: one image block each (ContentBlock type image, data base64 in JSON)
  const images = (r.images || []).map((img) => ({ type: 'image', data: img.data, mimeType: img.mimeType }));
  return {
    content: [text(r.stdout + r.stderr), ...images],
    structuredContent: { stdout: r.stdout, stderr: r.stderr, exitCode: isError ? 1 : 0, executionTime: Date.now() - started },
    isError,
  };
}

// Runs a shell command to its end; the caller's disconnect kills it (ticket.interrupt).
function runCommand(session, command, ticket) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = session.spawn(['/bin/bash', '-c', command]);
    session.commands.add(child);
    const out = [];
    const err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    if (ticket) ticket.interrupt = () => killTree(child);
    child.on('close', (code, signal) => {
      session.commands.delete(child);
      resolve({
        stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
        exitCode: code === null ? 128 + (signal === 'SIGKILL' ? 9 : 15) : code, executionTime: Date.now() - started,
      });
    });
    child.on('error', (e) => {
      session.commands.delete(child);
      resolve({ stdout: '', stderr: String(e.message), exitCode: 127, executionTime: Date.now() - started });
    });
  });
}

async function executeCommand(session, args, ticket) {
  const command = stringArg(args, 'command');
  const r = await runCommand(session, command, ticket);
  if (session.status !== 'READY') return null;
  return {
    content: [text(r.stdout + r.stderr)],
    structuredContent: r,
    isError: r.exitCode !== 0,
  };
}

function mimeOf(p) {
  const ext = path.extname(p).toLowerCase();
  return {
    '.txt': 'text/plain', '.py': 'text/x-python', '.json': 'application/json', '.csv': 'text/csv',
    '.png': 'image/png', '.jpg': 'image/jpeg', '.html': 'text/html', '.md': 'text/markdown',
  }[ext] || 'application/octet-stream';
}

// readFiles: one resource block per file, text when the bytes are UTF-8, else a base64 blob.
async function readFiles(session, args) {
  const paths = pathList(args);
  const content = [];
  const errors = [];
  for (const p of paths) {
    const r = session.resolve(p);
    let data;
    try {
      const st = fs.statSync(r.host);
      if (st.isDirectory()) { errors.push(`Path is a directory: ${p}`); continue; }
      data = fs.readFileSync(r.host);
    } catch {
      errors.push(`File not found: ${p}`);
      continue;
    }
    const resource = { type: 'text', uri: `file://${r.path}`, mimeType: mimeOf(p) };
    try {
      resource.text = utf8.decode(data);
    } catch {
      resource.type = 'blob';
      resource.blob = data.toString('base64');
    }
    content.push({ type: 'resource', resource });
  }
  if (errors.length) return { content: [...content, text(errors.join('\n'))], isError: true };
  return { content };
}

// writeFiles: text or base64 blob per entry; parent directories are created.
async function writeFiles(session, args) {
  const entries = args.content;
  if (!Array.isArray(entries) || entries.length === 0) {
    throw validation("1 validation error detected: Value at 'arguments.content' failed to satisfy constraint: Member must not be null", 'FieldValidationFailed', [{ name: 'arguments.content', message: 'Member must not be null' }]);
  }
  const written = [];
  for (const e of entries) {
    if (!e || typeof e.path !== 'string' || e.path === '') {
      throw validation("Value at 'arguments.content.member.path' failed to satisfy constraint: Member must not be null", 'FieldValidationFailed');
    }
    const r = session.resolve(e.path);
    let data;
    if (typeof e.text === 'string') data = Buffer.from(e.text, 'utf8');
    else if (typeof e.blob === 'string') data = Buffer.from(e.blob, 'base64');
    else data = Buffer.alloc(0);
    if (!r.writable) return failed(`Failed to write ${e.path}: permission denied`);
    try {
      fs.mkdirSync(path.dirname(r.host), { recursive: true });
      fs.writeFileSync(r.host, data);
    } catch (err) {
      return failed(`Failed to write ${e.path}: ${err.code || err.message}`);
    }
    written.push(e.path);
  }
  return { content: [text(`Successfully wrote ${written.length} file(s): ${written.join(', ')}`)] };
}

async function listFiles(session, args) {
  const dir = args.directoryPath === undefined || args.directoryPath === '' ? '.' : stringArg(args, 'directoryPath');
  const r = session.resolve(dir);
  let names;
  try {
    names = fs.readdirSync(r.host, { withFileTypes: true });
  } catch {
    return failed(`Directory not found: ${dir}`);
  }
  const content = names.map((d) => {
    const full = path.posix.join(r.path, d.name);
    let size = 0;
    try { size = fs.statSync(path.join(r.host, d.name)).size; } catch { /* vanished */ }
    const block = { type: 'resource_link', uri: `file://${full}`, name: d.name, description: d.isDirectory() ? 'Directory' : 'File' };
    if (!d.isDirectory()) {
      block.mimeType = mimeOf(d.name);
      block.size = size;
    }
    return block;
  });
  return { content };
}

async function removeFiles(session, args) {
  const paths = pathList(args);
  const errors = [];
  for (const p of paths) {
    const r = session.resolve(p);
    if (!fs.existsSync(r.host)) { errors.push(`File not found: ${p}`); continue; }
    if (!r.writable) { errors.push(`Failed to remove ${p}: permission denied`); continue; }
    fs.rmSync(r.host, { recursive: true, force: true });
  }
  if (errors.length) return failed(errors.join('\n'));
  return { content: [text(`Successfully removed ${paths.length} file(s)`)] };
}

// Background commands: startCommandExecution returns a task id; getTask / stopTask use it.
class Task {
  constructor(session, command) {
    this.id = uuid();
    this.session = session;
    this.status = 'working';
    this.out = [];
    this.err = [];
    this.exitCode = undefined;
    this.child = session.spawn(['/bin/bash', '-c', command]);
    this.child.stdout.on('data', (d) => this.out.push(d));
    this.child.stderr.on('data', (d) => this.err.push(d));
    this.child.on('close', (code) => {
      if (this.status === 'working') {
        this.exitCode = code === null ? 137 : code;
        this.status = code === 0 ? 'completed' : 'failed';
      }
    });
    this.child.on('error', () => { this.status = 'failed'; this.exitCode = 127; });
  }

  kill(status = 'canceled') {
    if (this.status === 'working') this.status = status;
    killTree(this.child);
  }

  structured() {
    const s = { taskId: this.id, taskStatus: this.status, stdout: Buffer.concat(this.out).toString('utf8'), stderr: Buffer.concat(this.err).toString('utf8') };
    if (this.exitCode !== undefined) s.exitCode = this.exitCode;
    return s;
  }
}

async function startCommandExecution(session, args) {
  const command = stringArg(args, 'command');
  const task = new Task(session, command);
  session.tasks.set(task.id, task);
  return { content: [text(`Task ${task.id} started`)], structuredContent: { taskId: task.id, taskStatus: 'working' } };
}

function taskOf(session, args) {
  const id = stringArg(args, 'taskId');
  return session.tasks.get(id) || null;
}

async function getTask(session, args) {
  const t = taskOf(session, args);
  if (!t) return failed(`Task not found: ${args.taskId}`);
  return { content: [text(`Task ${t.id} is ${t.status}`)], structuredContent: t.structured() };
}

async function stopTask(session, args) {
  const t = taskOf(session, args);
  if (!t) return failed(`Task not found: ${args.taskId}`);
  t.kill('canceled');
  return { content: [text(`Task ${t.id} stopped`)], structuredContent: { taskId: t.id, taskStatus: t.status } };
}

export const TOOLS = {
  executeCode, executeCommand, readFiles, writeFiles, listFiles, removeFiles,
  startCommandExecution, getTask, stopTask,
};
