// execd code interpreting (controller/codeinterpreting.go, runtime/jupyter.go;
// docs/protocols/opensandbox.md §2.4): POST /code/context, GET /code/contexts[?language=], GET/DELETE
// /code/contexts/{id}, DELETE /code/contexts?language=, POST /code (stream), DELETE /code?id=.
//
// One persistent kernel process per context (driver.py for python, ../../kernels/kernel.js for
// javascript, typescript and bash) stands in for a Jupyter kernel, so state survives between runs.
// The stream is what execd makes of the kernel's messages: init(context id), stdout/stderr chunks as the kernel sent them (newlines kept), execution_count +
// result for a trailing expression (MIME "text/plain" renamed "text"), status "error" + error for an
// exception, then execution_complete (sent after an error too). A busy context is refused with 500.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBody, sendGoJson, send } from './util.mjs';
import { spawnIn, signalTree, resolvePath, baseEnv, WORKDIR } from './runtime.mjs';
import { EventStream } from './stream.mjs';
import { commandId, expandPath } from './commands.mjs';
import { KERNEL_JS, NODE, toScript } from '../../kernels/script.mjs';

const DRIVER = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'driver.py');
// glsb's display module stands in for IPython's formatters and matplotlib-inline (driver.py)
const DISPLAY = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'providers', 'local',
  'display.py');
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
// The image's kernels (sandboxes/code-interpreter/README.md: ipykernel, tslab for javascript and
// typescript, bash_kernel, IJava, gonb) that the machine can stand in for: python (driver.py),
// javascript/typescript and bash (../../kernels/kernel.js on node). java and go find no kernel spec
// (components/execd/pkg/runtime/jupyter.go searchKernel: "no kernel specs found").
const LANGUAGES = new Set(['python', 'javascript', 'typescript', 'bash']);

// kernel.js's events as driver.py sends them
function fromKernelJs(ev, state) {
  switch (ev.type) {
    case 'stdout': case 'stderr': return { type: 'stream', name: ev.type, text: ev.text };
    case 'number_of_executions': state.count = ev.execution_count; return null;
    case 'result': return { type: 'result', count: state.count, data: { 'text/plain': ev.text } };
    case 'error': return { type: 'error', ename: ev.name, evalue: ev.value, traceback: ev.traceback ? [ev.traceback] : [] };
    case 'done': return { type: 'done', count: state.count };
    default: return ev; // ready, started
  }
}

class Context {
  constructor(sbx, language, cwd) {
    this.sbx = sbx;
    this.id = commandId();
    this.language = language;
    this.cwd = cwd;
    this.child = null;
    this.current = null;   // the run in progress: {onMessage, onDeath}
    this.closed = false;
    this.ready = null;     // resolves once the kernel said "ready"
  }

  info() {
    return { id: this.id, language: this.language, cwd: this.cwd, pid: this.child ? this.child.pid : null, busy: !!this.current };
  }

  ensure() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const argv = this.language === 'python'
      ? [PYTHON, '-u', '-c', fs.readFileSync(DRIVER, 'utf8'), fs.readFileSync(DISPLAY, 'utf8')]
      : [NODE, '-e', KERNEL_JS, this.language === 'bash' ? 'bash' : 'javascript'];
    const jsState = this.language === 'python' ? null : { count: 0 };
    const child = spawnIn(this.sbx.root, argv, {
      env: baseEnv({ ...this.sbx.env, PYTHONUNBUFFERED: '1' }), cwd: this.cwd,
      stdio: ['pipe', 'ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    let onReady;
    this.ready = new Promise((r) => { onReady = r; });
    let buf = '';
    child.stdio[3].on('data', (d) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        let msg;
        try { msg = JSON.parse(line); } catch { continue; }
        if (jsState) msg = fromKernelJs(msg, jsState);
        if (!msg) continue;
        if (msg.type === 'ready') { onReady(true); continue; }
        if (this.current && this.child === child) this.current.onMessage(msg);
      }
    });
    child.stdin.on('error', () => {});
    child.on('exit', () => {
      onReady(false);
      if (this.child !== child) return;
      this.child = null;
      if (this.current) this.current.onDeath();
    });
  }

  // A Jupyter interrupt: the running cell gets KeyboardInterrupt. One that comes before the kernel took
  // the cell (right after init) is held until it does, so it is never lost nor kills a kernel starting up.
  interrupt() {
    if (!this.child || !this.current) return;
    if (this.current.started) signalTree(this.child, 'SIGINT');
    else this.current.interruptPending = true;
  }

  close() {
    this.closed = true;
    if (this.child) {
      signalTree(this.child, 'SIGCONT');
      signalTree(this.child, 'SIGKILL');
    }
    this.child = null;
    if (this.current) this.current.onDeath();
  }

  // Runs one cell, forwarding events to `stream`; resolves when the kernel is idle again.
  async run(code, stream) {
    if (this.language === 'javascript' || this.language === 'typescript') {
      try {
        code = await toScript(code, this.language);
      } catch (e) {
        stream.event({ type: 'status', text: 'error' });
        stream.event({ type: 'error', error: { ename: 'SyntaxError', evalue: String(e.message), traceback: [String(e.message)] } });
        stream.event({ type: 'execution_complete' });
        return true;
      }
    }
    this.ensure();
    const started = Date.now();
    return new Promise((resolve) => {
      let errored = false;
      const finish = () => {
        this.current = null;
        resolve(errored);
      };
      this.current = {
        started: false,
        interruptPending: false,
        onMessage: (msg) => {
          if (msg.type === 'started') {
            this.current.started = true;
            if (this.current.interruptPending) signalTree(this.child, 'SIGINT');
          } else if (msg.type === 'stream') {
            stream.event({ type: msg.name === 'stderr' ? 'stderr' : 'stdout', text: msg.text });
          } else if (msg.type === 'display') {
            // display_data (display(), figures shown or left open): execd's ExecuteCodeStream registers no
            // handler for it (components/execd/pkg/jupyter/execute/execute.go
            // registerExecuteCodeStreamHandlers: execute_reply, execute_result, stream, error, status),
            // so it never reaches the client
          } else if (msg.type === 'result') {
            if (msg.count > 0) stream.event({ type: 'execution_count', execution_count: msg.count });
            const results = {};
            for (const [k, v] of Object.entries(msg.data || {})) results[k === 'text/plain' ? 'text' : k] = v;
            stream.event({ type: 'result', results });
          } else if (msg.type === 'error') {
            errored = true;
            stream.event({ type: 'status', text: 'error' });
            stream.event({ type: 'error', error: { ename: msg.ename, evalue: msg.evalue, traceback: msg.traceback } });
          } else if (msg.type === 'done') {
            // Idle: execd sends execution_complete (also after an error; execution_time in ms, omitted when 0).
            const ms = Date.now() - started;
            stream.event(ms > 0 ? { type: 'execution_complete', execution_time: ms } : { type: 'execution_complete' });
            finish();
          }
        },
        onDeath: () => {
          errored = true;
          stream.event({ type: 'error', error: { ename: 'DeadKernelError', evalue: 'Kernel died', traceback: [] } });
          finish();
        },
      };
      this.child.stdin.write(JSON.stringify({ code }) + '\n');
    });
  }
}

function runtimeError(res, message) {
  sendGoJson(res, 500, { code: 'RUNTIME_ERROR', message });
}

function requireInterpreter(sbx, res) {
  if (sbx.interpreter) return true;
  // execd without a Jupyter server (any image but opensandbox/code-interpreter).
  runtimeError(res, 'error creating code context. language runtime server not configured, please check your image runtime');
  return false;
}

function newContext(sbx, language, cwdRaw) {
  let cwd = WORKDIR;
  if (cwdRaw) {
    const rp = resolvePath(sbx.root, expandPath(cwdRaw, baseEnv(sbx.env)));
    if (rp.writable) fs.mkdirSync(rp.host, { recursive: true });
    cwd = rp.path;
  }
  const c = new Context(sbx, language, cwd);
  sbx.contexts.set(c.id, c);
  c.ensure();
  return c;
}

// Started with the context, as execd starts the kernel on context creation; resolves once it is up.
async function readyContext(c) {
  c.ensure();
  await c.ready;
  return c;
}

function defaultContext(sbx, language) {
  let c = sbx.defaultContexts.get(language);
  if (!c || c.closed) {
    c = newContext(sbx, language, '');
    sbx.defaultContexts.set(language, c);
  }
  return c;
}

async function createContext(sbx, req, res) {
  let body;
  try { body = JSON.parse((await readBody(req)).toString('utf8') || '{}'); } catch (e) {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `error parsing request, MAYBE invalid body format. ${e.message}` });
  }
  if (!requireInterpreter(sbx, res)) return;
  const language = String(body.language || '');
  if (!LANGUAGES.has(language)) return runtimeError(res, 'error creating code context. no kernel specs found');
  const c = await readyContext(newContext(sbx, language, body.cwd));
  const out = { id: c.id, language };
  if (body.cwd) out.cwd = body.cwd;
  return sendGoJson(res, 200, out);
}

async function runCode(emu, sbx, req, res, ctx, runCommandFn) {
  const buf = await readBody(req);
  let body;
  try { body = JSON.parse(buf.toString('utf8')); } catch (e) {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `error parsing request, MAYBE invalid body format. ${e.message}` });
  }
  if (!body || typeof body.code !== 'string' || body.code === '') {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: "invalid request, validation error Key: 'RunCodeRequest.Code' Error:Field validation for 'Code' failed on the 'required' tag" });
  }
  const c0 = body.context || {};
  let context;
  if (c0.id) {
    context = sbx.contexts.get(c0.id);
    if (!context || context.closed) return runtimeError(res, 'error running codes context not found');
  } else if (!c0.language) {
    // Without a language the code runs as a shell command (a foreground /command).
    return runCommandFn(JSON.stringify({ command: body.code }));
  } else {
    if (!requireInterpreter(sbx, res)) return;
    if (!LANGUAGES.has(c0.language)) return runtimeError(res, 'error running codes no kernel specs found');
    context = defaultContext(sbx, c0.language);
  }
  if (context.current) return runtimeError(res, 'error running codes session is busy');
  await readyContext(context);
  if (context.current) return runtimeError(res, 'error running codes session is busy');
  const stream = new EventStream(res, ctx);
  stream.event({ type: 'init', text: context.id });
  // The request's context ends when the client goes away: the kernel is interrupted.
  const onClose = () => { if (!res.writableEnded) context.interrupt(); };
  res.on('close', onClose);
  await context.run(body.code, stream);
  res.off('close', onClose);
  // /code returns as soon as the completion is flushed (no grace period).
  await stream.end(0);
}

export async function handleCode(emu, sbx, req, res, url, ctx, runCommandFn) {
  const p = url.pathname;
  const m = req.method;
  const q = url.searchParams;
  let g;
  if (p === '/code/context' && m === 'POST') return createContext(sbx, req, res);
  if (p === '/code' && m === 'POST') return runCode(emu, sbx, req, res, ctx, runCommandFn);
  if (p === '/code/contexts' && m === 'GET') {
    const lang = q.get('language') || '';
    if (lang === 'command' || lang === 'background-command' || lang === 'sql') {
      return runtimeError(res, `unsupported language context operation: ${lang}`);
    }
    const list = [...sbx.contexts.values()].filter((c) => !c.closed && (!lang || c.language === lang))
      .map((c) => ({ id: c.id, language: c.language }));
    return sendGoJson(res, 200, list);
  }
  if (p === '/code/contexts' && m === 'DELETE') {
    const lang = q.get('language') || '';
    if (!lang) return sendGoJson(res, 400, { code: 'MISSING_QUERY', message: "missing query parameter 'language'" });
    for (const c of [...sbx.contexts.values()]) {
      if (c.language !== lang) continue;
      c.close();
      sbx.contexts.delete(c.id);
      if (sbx.defaultContexts.get(lang) === c) sbx.defaultContexts.delete(lang);
    }
    return send(res, 200);
  }
  if ((g = p.match(/^\/code\/contexts\/([^/]+)$/))) {
    const id = decodeURIComponent(g[1]);
    const c = sbx.contexts.get(id);
    if (!c || c.closed) return sendGoJson(res, 404, { code: 'CONTEXT_NOT_FOUND', message: `context ${id} not found` });
    if (m === 'GET') return sendGoJson(res, 200, { id: c.id, language: c.language });
    if (m === 'DELETE') {
      c.close();
      sbx.contexts.delete(id);
      if (sbx.defaultContexts.get(c.language) === c) sbx.defaultContexts.delete(c.language);
      return send(res, 200);
    }
  }
  return null;
}
