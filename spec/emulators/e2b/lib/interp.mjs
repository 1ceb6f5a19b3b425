// Code interpreter (port 49999): POST /execute NDJSON stream, /contexts. One persistent Python
// process (driver.py) per context keeps state between executions, like a Jupyter kernel.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBody, send, sendJson, uuid, sleep } from './util.mjs';
import { killTree } from './runtime.mjs';
import { resolvePath as normalizeSandboxPath, ensureDirs } from './vm.mjs';
import { KERNEL_JS, NODE, toScript } from '../../kernels/script.mjs';

const DRIVER = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'driver.py'), 'utf8');
// glsb's display module stands in for IPython's formatters, matplotlib-inline and E2B's chart extraction
const DISPLAY = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..',
  'providers', 'local', 'display.py'), 'utf8');
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
// javascript/typescript and bash kernels (../../kernels/kernel.js), run by the sandbox's node
// The server's keepalive line spacing (code-interpreter template/server/messaging.py KEEPALIVE_INTERVAL);
// POST /_emulator/config {keepaliveMs} changes it for tests.
export const config = { keepaliveMs: 5000 };

// The error lines the server sends for failures of its own (messaging.py), not the code's.
export const SERVER_ERRORS = {
  WebSocketError: 'The connections was lost, rerun the code to get the results',
  ContextRestarting: 'Context was restarted',
  ExecutionAborted: 'Execution was aborted',
  UnexpectedEndOfExecution: 'Connection to the execution was closed before the execution was finished',
};

const UNAUTHORIZED = 'unauthorized access, please provide a valid access token or method signing if supported';

// ---- env vars as the server passes them: lines of code in front of the cell ------------------------
// messaging.py ContextWebSocket.execute: on a context's first execution the sandbox's env (envd GET
// /envs, with the X-Access-Token the request carried: a wrong or missing token gets envd's 401 body,
// whose fields are then "env vars") and then the call's env_vars become
// `import os; os.environ['K'] = 'V'` lines, NOT escaped, indented like the code's first non-empty
// line, in front of the code; after the cell a silent execution deletes the call's vars (or resets
// them to the sandbox's value).

// messaging.py _set_env_var_snippet / _delete_env_var_snippet, per language
const ENV_SET = {
  python: (k, v) => `import os; os.environ['${k}'] = '${v}'`,
  javascript: (k, v) => `process.env['${k}'] = '${v}'`,
  bash: (k, v) => `export ${k}='${v}'`,
};
const ENV_DEL = {
  python: (k) => `import os; del os.environ['${k}']`,
  javascript: (k) => `delete process.env['${k}']`,
  bash: (k) => `unset ${k}`,
};
const kernelOf = (language) => (language === 'typescript' ? 'javascript' : language);

function envSnippet(vars, language) {
  return Object.entries(vars || {}).map(([k, v]) => ENV_SET[kernelOf(language)](k, v)).join('\n');
}

function indentOf(code) {
  for (const line of code.split('\n')) if (line.trim()) return line.slice(0, line.length - line.trimStart().length);
  return '';
}

function indent(code, level) {
  if (!code || !level) return code;
  return code.split('\n').map((l) => (l.trim() ? level + l : l)).join('\n');
}

const END_LINE = '{"type": "end_of_execution"}\n';

// contexts.py normalize_language: lower-cased and trimmed, js/ts spelled out, none = python. The
// kernels the emulator has (the real image also has r and java, contexts.py get_kernel_for_language
// maps typescript to the javascript kernel): what jupyter_server answers for any other kernel name
// (services/sessions/handlers.py: 501 {"message", "short_message"}) is what create_context fails with.
export function normalizeLanguage(language) {
  if (!language) return 'python';
  const l = String(language).toLowerCase().trim();
  return l === 'js' ? 'javascript' : l === 'ts' ? 'typescript' : l;
}
const KERNELS = new Set(['python', 'javascript', 'bash']);
function noKernel(language) {
  const k = kernelOf(language);
  return `Failed to create context: {"message": "The '${k}' kernel is not available. Please pick another suitable kernel instead, `
    + `or install that kernel.", "short_message": "${k} not found"}`;
}


// Python's json.dumps(): ", " and ": " separators, ensure_ascii (every char outside space..~ is
// escaped as \uXXXX UTF-16 units). The real server writes its NDJSON lines this way.
function pyStr(str) {
  let out = '"';
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    const ch = str[i];
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += ch;
  }
  return out + '"';
}

export function pyJson(v) {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return pyStr(v);
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : (Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity');
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Array.isArray(v)) return '[' + v.map(pyJson).join(', ') + ']';
  return '{' + Object.entries(v).filter(([, x]) => x !== undefined).map(([k, x]) => pyStr(k) + ': ' + pyJson(x)).join(', ') + '}';
}

const RESULT_KEYS = ['text', 'html', 'markdown', 'svg', 'png', 'jpeg', 'pdf', 'latex', 'json', 'javascript', 'data', 'chart', 'extra'];

// Field order and presence of the server's pydantic models (None fields left out).
function shape(ev) {
  switch (ev.type) {
    case 'stdout':
    case 'stderr':
      return { type: ev.type, text: ev.text, timestamp: jupyterDate() };
    case 'result': {
      const out = { type: 'result' };
      for (const k of RESULT_KEYS) if (ev[k] !== undefined && ev[k] !== null) out[k] = ev[k];
      out.is_main_result = !!ev.is_main_result;
      return out;
    }
    case 'error':
      return { type: 'error', name: ev.name, value: ev.value, traceback: ev.traceback };
    case 'number_of_executions':
      return { type: 'number_of_executions', execution_count: ev.execution_count };
    default:
      return ev;
  }
}

// Jupyter message header dates: microsecond precision, UTC, "Z".
function jupyterDate() {
  return new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

class Context {
  constructor(sbx, language, cwd) {
    this.sbx = sbx;
    this.id = uuid();
    this.language = language;
    this.cwd = cwd;
    this.child = null;
    this.queue = Promise.resolve();
    this.current = null;
    this.closed = false;
    this.globalEnv = null; // the sandbox env fetched on the first execution (messaging.py _global_env_vars)
  }

  info() {
    return { id: this.id, language: this.language, cwd: this.cwd, pid: this.child ? this.child.pid : null, busy: !!this.current };
  }

  ensure() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    // Kernels run as root: Jupyter is a systemd service without User= (e2b-dev/code-interpreter
    // template/systemd/jupyter.service), so what code writes belongs to root.
    const argv = this.language === 'python'
      ? [PYTHON, '-c', 'import sys; exec(compile(sys.argv[1], "<e2b-emulator-kernel>", "exec"))', DRIVER, DISPLAY]
      : [NODE, '-e', KERNEL_JS, kernelOf(this.language)];
    const child = this.sbx.spawn(argv, {
      user: 'root', env: this.sbx.env('root'), cwd: this.cwd, stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    // The line so far, as the chunks it came in: each chunk is searched for its newline once and
    // joined once, so a 100 MiB line costs its length, not its length squared.
    let pending = [];
    child.stdio[3].on('data', (d) => {
      let start = 0;
      let i;
      while ((i = d.indexOf(10, start)) >= 0) {
        pending.push(d.subarray(start, i));
        const line = Buffer.concat(pending).toString('utf8');
        pending = [];
        start = i + 1;
        let ev;
        try { ev = JSON.parse(line); } catch { continue; }
        if (this.current && this.child === child) this.current.onEvent(ev);
      }
      if (start < d.length) pending.push(d.subarray(start));
    });
    // fd 1/2 of the kernel are pipes it reads itself (driver.py), so output of child processes
    // reaches fd 3 in order; these carry nothing but must not fill up.
    child.stdout.resume();
    child.stderr.resume();
    child.stdin.on('error', () => {});
    child.stdio[4].on('error', () => {});
    child.on('exit', () => {
      if (this.child !== child) return; // replaced by restart: not the running kernel
      this.child = null;
      // Jupyter restarts a kernel that died and says so ("restarting"): the server ends the
      // execution with a ContextRestarting error line.
      if (this.current) this.current.onDeath('ContextRestarting');
    });
  }

  interrupt() {
    if (!this.child) return;
    if (this.language !== 'python') killTree(this.child, 'SIGINT'); // kernel.js: SIGINT stops the cell
    else if (!this.child.stdio[4].destroyed) this.child.stdio[4].write('i');
  }

  // POST /contexts/{id}/restart and DELETE close the server's websocket: a running execution ends
  // with UnexpectedEndOfExecution (messaging.py close()).
  restart() {
    const cur = this.current;
    if (this.child) killTree(this.child);
    this.child = null;
    this.globalEnv = null;
    if (cur) cur.onDeath('UnexpectedEndOfExecution');
    this.ensure();
  }

  close() {
    this.closed = true;
    const cur = this.current;
    if (this.child) killTree(this.child);
    this.child = null;
    if (cur) cur.onDeath('UnexpectedEndOfExecution');
  }

  // The code the kernel gets for a call: env lines in front of it (see envSnippet).
  withEnv(code, envVars, token) {
    let globalSnippet = '';
    if (this.globalEnv === null) {
      const sbx = this.sbx;
      this.globalEnv = !sbx.envdAccessToken || token === sbx.envdAccessToken ? sbx.initEnv() : { code: 401, message: UNAUTHORIZED };
      globalSnippet = envSnippet(this.globalEnv, this.language);
    }
    const callSnippet = envVars && Object.keys(envVars).length ? envSnippet(envVars, this.language) : '';
    if (!globalSnippet && !callSnippet) return code;
    return `${indent(`${globalSnippet}\n${callSnippet}`, indentOf(code))}\n${code}`;
  }

  // The silent clean-up after a call with env_vars (messaging.py _reset_env_vars_code).
  cleanupCode(envVars) {
    const lang = kernelOf(this.language);
    return Object.keys(envVars).map((k) => (this.globalEnv && k in this.globalEnv
      ? ENV_SET[lang](k, this.globalEnv[k]) : ENV_DEL[lang](k))).join('\n');
  }

  // Runs one cell, writing NDJSON lines through `out(line)`; resolves when the cell is done. Cells of
  // a context run one at a time, as the server's per-context lock has it. `ticket.cancelled` set
  // before the cell's turn: it is skipped; while it runs: interrupted. ticket.onTurn() is called when
  // the cell's turn comes (the server sends keepalives only from then on: while a request waits for
  // the lock, nothing is written).
  run(code, envVars, token, out, ticket = {}) {
    let ran = false;
    const cell = this.queue.then(() => this.runOne(() => {
      if (this.closed || ticket.cancelled) return null;
      ran = true;
      ticket.running = true;
      if (ticket.onTurn) ticket.onTurn();
      return { code: this.withEnv(code, envVars, token), out };
    }, ticket));
    // the clean-up runs in the background, before the next cell may start (the server awaits it
    // inside the same lock)
    const cleanup = cell.then(() => {
      if (!ran || !envVars || !Object.keys(envVars).length || this.closed) return undefined;
      return this.runOne(() => ({ code: this.cleanupCode(envVars), out: () => {}, silent: true }), {});
    });
    this.queue = cleanup.catch(() => {});
    return cell;
  }

  async runOne(prepare, ticket) {
    const job = prepare();
    if (!job) return undefined;
    let code = job.code;
    if (kernelOf(this.language) === 'javascript') {
      try {
        code = await toScript(code, this.language);
      } catch (e) {
        // what the kernel says of code it cannot compile
        if (!job.silent) job.out(pyJson(shape({ type: 'error', name: 'SyntaxError', value: String(e.message), traceback: String(e.message) })) + '\n');
        ticket.running = false;
        return undefined;
      }
    }
    return new Promise((resolve) => {
      this.ensure();
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        ticket.running = false;
        this.current = null;
        resolve();
      };
      this.current = {
        onEvent: (ev) => {
          if (ev.type === 'done') { finish(); return; }
          if (ev.type === 'ready' || ev.type === 'started') return; // kernel.js's own hand-shake
          if (!job.silent) job.out(pyJson(shape(ev)) + '\n');
        },
        onDeath: (name) => {
          if (!job.silent) job.out(pyJson(shape({ type: 'error', name, value: SERVER_ERRORS[name], traceback: '' })) + '\n');
          finish();
        },
      };
      this.child.stdin.write(JSON.stringify({ code, silent: !!job.silent }) + '\n');
    });
  }
}

function text(res, status, body) {
  send(res, status, body, { 'Content-Type': 'text/plain; charset=utf-8' });
}

// Code-interpreter templates have their default Python kernel running from the start.
// (main.py lifespan: the python and the javascript contexts are made at start-up; the javascript
// kernel process starts here on first use, as it costs a node per sandbox)
export function startDefaultKernel(sbx) {
  defaultContext(sbx, 'python').ensure();
  defaultContext(sbx, 'javascript');
}

function defaultContext(sbx, language) {
  if (!sbx.defaultContexts) sbx.defaultContexts = new Map();
  let c = sbx.defaultContexts.get(language);
  if (!c || c.closed) {
    c = new Context(sbx, language, sbx.templateWorkdir || '/home/user');
    sbx.defaultContexts.set(language, c);
    sbx.contexts.set(c.id, c);
  }
  return c;
}

async function execute(emu, sbx, req, res, ctx) {
  // The server checks no token itself (code-interpreter template/server/main.py post_execute): it
  // forwards X-Access-Token to envd's GET /envs on a context's first execution (see withEnv).
  const tok = req.headers['x-access-token'];
  let body;
  try { body = JSON.parse((await readBody(req)).toString('utf8') || '{}'); } catch { return text(res, 422, 'Invalid JSON body'); }
  if (typeof body.code !== 'string') return text(res, 422, 'Field "code" is required');
  if (body.context_id && body.language) return text(res, 400, 'Only one of context_id or language can be provided');
  let context;
  if (body.context_id) {
    context = sbx.contexts.get(body.context_id);
    if (!context || context.closed) return text(res, 404, `Context ${body.context_id} not found`);
  } else {
    const lang = normalizeLanguage(body.language);
    if (!KERNELS.has(kernelOf(lang))) return text(res, 500, noKernel(lang));
    context = defaultContext(sbx, lang);
  }
  res.writeHead(200, {});
  res.flushHeaders();
  let chain = Promise.resolve();
  const delay = ctx.frameDelayMs || 0;
  const out = (line) => {
    chain = chain.then(async () => {
      if (delay) await sleep(delay);
      if (!res.destroyed && !res.writableEnded) res.write(line);
    });
  };
  let ka = null;
  let clientGone = false;
  const ticket = { cancelled: false, running: false };
  ticket.onTurn = () => {
    ka = setInterval(() => out('{"type": "keepalive"}\n'), config.keepaliveMs);
    ka.unref();
  };
  res.on('close', () => {
    if (res.writableEnded) return;
    // Client went away: interrupt this cell if it runs, drop it if it still waits its turn.
    clientGone = true;
    if (ticket.running) context.interrupt();
    else ticket.cancelled = true;
  });
  if (ctx.executionError) {
    // fault `execution_error`: the server's own failure instead of a run (the code did not run here)
    out(pyJson({ type: 'error', name: ctx.executionError, value: SERVER_ERRORS[ctx.executionError], traceback: '' }) + '\n');
  } else {
    await context.run(body.code, body.env_vars, tok, out, ticket);
  }
  if (ka) clearInterval(ka);
  out(END_LINE);
  await chain;
  if (!clientGone && !res.destroyed) res.end();
}

export async function handleInterp(emu, sbx, req, res, url, ctx) {
  const p = url.pathname.replace(/\/+$/, '') || '/';
  const m = req.method;
  let g;
  if (p === '/health' && m === 'GET') return text(res, 200, 'OK');
  if (p === '/execute' && m === 'POST') return execute(emu, sbx, req, res, ctx);
  if (p === '/contexts' && m === 'POST') {
    let body;
    try { body = JSON.parse((await readBody(req)).toString('utf8') || '{}'); } catch { return text(res, 422, 'Invalid JSON body'); }
    const lang = normalizeLanguage(body.language);
    if (!KERNELS.has(kernelOf(lang))) return text(res, 500, noKernel(lang));
    const cwd = normalizeSandboxPath(body.cwd || '/home/user');
    try { ensureDirs(sbx.root, cwd, 'root'); } catch { /* a read-only host directory: it exists */ }
    const c = new Context(sbx, lang, cwd);
    c.ensure();
    sbx.contexts.set(c.id, c);
    return sendJson(res, 200, { id: c.id, language: c.language, cwd: c.cwd });
  }
  if (p === '/contexts' && m === 'GET') {
    return sendJson(res, 200, [...sbx.contexts.values()].filter((c) => !c.closed).map((c) => ({ id: c.id, language: c.language, cwd: c.cwd })));
  }
  if ((g = p.match(/^\/contexts\/([^/]+)(\/restart)?$/))) {
    const c = sbx.contexts.get(decodeURIComponent(g[1]));
    if (!c || c.closed) return text(res, 404, `Context ${g[1]} not found`);
    if (g[2] && m === 'POST') { c.restart(); return send(res, 204); }
    if (!g[2] && m === 'DELETE') {
      c.close();
      sbx.contexts.delete(c.id);
      return send(res, 204);
    }
  }
  return text(res, 404, 'Not Found');
}
