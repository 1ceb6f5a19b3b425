// The E2B emulator's kernels for javascript/typescript and bash (tests only), one process per code
// context, run inside the sandbox with `node -e <this file> <mode>`. The same wire as driver.py:
// requests on stdin as JSON lines {"code", "silent"}; events on fd 3 as JSON lines ({"type": "stdout" |
// "stderr", "text"}, {"type": "result", "text", "is_main_result"}, {"type": "error", "name", "value",
// "traceback"}, {"type": "number_of_executions", "execution_count"}, {"type": "done"}); an interrupt
// is SIGINT. It says {"type": "ready"} once it takes requests and {"type": "started"} as each cell
// begins, so an interrupt that came earlier can be held until the cell runs (OpenSandbox's code.mjs).
//
// javascript (E2B's kernel is its ijavascript fork): each cell runs as a script in one context, so
// top-level declarations stay for the next cell; the last expression's value is the result (a
// promise is awaited first), shown as util.inspect does, one pair of outer quotes dropped as the
// server's Result model drops them (code-interpreter template/server/api/models/result.py). The
// emulator has already turned TypeScript into JavaScript and `import` statements into require().
// A cell with a top-level `await` runs as an async function: its declarations stay in that cell.
//
// bash (bash_kernel): one bash process for the context's life, so `cd` and `export` carry over; a
// cell's output streams as it comes; a non-zero status is an error, as bash_kernel reports it.
'use strict';
const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');
const { spawn } = require('node:child_process');
const { createRequire } = require('node:module');
const readline = require('node:readline');

const mode = process.argv[1] || process.argv[2];
const ctl = 3;
let count = 0;

function emit(obj) {
  fs.writeSync(ctl, JSON.stringify(obj) + '\n');
}

function stripQuotes(text) {
  if (text.length >= 2 && ((text[0] === "'" && text.endsWith("'")) || (text[0] === '"' && text.endsWith('"')))) return text.slice(1, -1);
  return text;
}

// ---- javascript ---------------------------------------------------------------------------------

function jsKernel() {
  globalThis.require = createRequire(process.cwd() + '/');
  const out = (type) => (...args) => emit({ type, text: util.format(...args) + '\n' });
  for (const k of ['log', 'info', 'debug']) console[k] = out('stdout');
  for (const k of ['error', 'warn', 'trace']) console[k] = out('stderr');
  process.stdout.write = (chunk) => { emit({ type: 'stdout', text: String(chunk) }); return true; };
  process.stderr.write = (chunk) => { emit({ type: 'stderr', text: String(chunk) }); return true; };

  // the last expression of an async cell is what it returns
  function asAsync(code) {
    const lines = code.replace(/\s+$/, '').split('\n');
    let i = lines.length - 1;
    while (i >= 0 && lines[i].trim() === '') i--;
    const last = i >= 0 ? lines[i].trim().replace(/;$/, '') : '';
    if (last && !/^(const|let|var|function|class|if|for|while|do|switch|try|return|throw|import|export|}|\/\/)/.test(last) && !/[{]$/.test(last)) {
      lines[i] = lines[i].replace(lines[i].trim(), `return (${last});`);
    }
    return `(async () => {\n${lines.join('\n')}\n})()`;
  }

  async function run(code) {
    let script;
    try {
      script = new vm.Script(code, { filename: `<cell-${count}>` });
    } catch (e) {
      if (!(e instanceof SyntaxError) || !/await/.test(e.message)) throw e;
      script = new vm.Script(asAsync(code), { filename: `<cell-${count}>` });
    }
    let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') value = await value;
    if (value !== undefined) emit({ type: 'result', text: stripQuotes(util.inspect(value)), is_main_result: true });
  }

  return async (code) => {
    try {
      await run(code);
    } catch (e) {
      const err = e instanceof Error ? e : new Error(String(e));
      emit({ type: 'error', name: err.name, value: err.message, traceback: err.stack || String(err) });
    }
  };
}

// ---- bash ---------------------------------------------------------------------------------------

const MARK = '\u001eE2B-CELL-END\u001e';

function bashKernel() {
  const sh = spawn('/bin/bash', ['--norc', '--noprofile'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let waiting = null; // {streams left, status}
  const streams = { stdout: '', stderr: '' };
  const onData = (name) => (d) => {
    let text = streams[name] + d.toString('utf8');
    let at;
    while ((at = text.indexOf(MARK)) >= 0) {
      const before = text.slice(0, at);
      if (before) emit({ type: name, text: before });
      text = text.slice(at + MARK.length);
      const nl = text.indexOf('\n');
      const status = Number(text.slice(0, nl));
      text = text.slice(nl + 1);
      if (waiting) {
        if (name === 'stdout') waiting.status = status;
        if (--waiting.left === 0) { const w = waiting; waiting = null; w.resolve(w.status); }
      }
    }
    // hold back only what could be the start of a mark
    const hold = text.lastIndexOf('\u001e');
    streams[name] = hold >= 0 ? text.slice(hold) : '';
    const free = hold >= 0 ? text.slice(0, hold) : text;
    if (free) emit({ type: name, text: free });
  };
  sh.stdout.on('data', onData('stdout'));
  sh.stderr.on('data', onData('stderr'));
  sh.on('exit', () => process.exit(0));
  // an interrupt stops the cell's commands, not the shell (a non-interactive bash would exit with them)
  process.on('SIGINT', () => {
    let kids = [];
    try { kids = fs.readFileSync(`/proc/${sh.pid}/task/${sh.pid}/children`, 'utf8').split(/\s+/).filter(Boolean); } catch { kids = []; }
    for (const k of kids) { try { process.kill(Number(k), 'SIGINT'); } catch { /* gone */ } }
  });

  return (code) => new Promise((resolve) => {
    waiting = { left: 2, status: 0, resolve };
    sh.stdin.write(`{\n${code}\n} </dev/null\n__e2b_status=$?; printf '${MARK}%s\\n' "$__e2b_status"; printf '${MARK}%s\\n' "$__e2b_status" >&2\n`);
  }).then((status) => {
    if (status !== 0) emit({ type: 'error', name: 'Error', value: `exit status ${status}`, traceback: '' });
  });
}

// ---- the request loop ---------------------------------------------------------------------------

const runCell = mode === 'bash' ? bashKernel() : jsKernel();
// SIGINT interrupts a running script (breakOnSigint); idle, it is ignored, as by an idle kernel
process.on('SIGINT', () => {});
const requests = readline.createInterface({ input: process.stdin });
emit({ type: 'ready' });
let queue = Promise.resolve();
requests.on('line', (line) => {
  let req;
  try { req = JSON.parse(line); } catch { return; }
  queue = queue.then(async () => {
    const silent = req.silent === true;
    if (!silent) emit({ type: 'number_of_executions', execution_count: ++count });
    emit({ type: 'started' });
    await runCell(String(req.code || ''));
    emit({ type: 'done' });
  });
});
requests.on('close', () => process.exit(0));
