// execd's bash sessions (components/execd/pkg/web/router.go /session, controller/codeinterpreting.go
// CreateSession / RunInSession / DeleteSession, runtime/bash_session.go): POST /session {cwd?} ->
// {session_id}; POST /session/{id}/run {command, cwd?, timeout? (ms)} -> an event stream; DELETE
// /session/{id}. A session is not a running shell: it is an environment and a working directory. Each
// run writes a script (the session's variables exported, `cd` to its directory, the command, then a
// dump of `export -p` and `pwd` between markers) and runs it with `bash --noprofile --norc`, stdout
// and stderr as one stream; what the dump says becomes the session's for the next run. The stream:
// init (the session id), one stdout event per line (empty lines dropped, sse.go), then
// execution_complete, or for a non-zero status error {CommandExecError, evalue: the status,
// traceback: ["command exited with code N"]} and no completion.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { readBody, sendGoJson, send } from './util.mjs';
import { spawnIn, signalTree, resolvePath, baseEnv, WORKDIR } from './runtime.mjs';
import { EventStream } from './stream.mjs';
import { expandPath } from './commands.mjs';

const ENV_START = '__ENV_DUMP_START__';
const ENV_END = '__ENV_DUMP_END__';
const EXIT = '__EXIT_CODE__:';
const PWD = '__PWD__:';
const NOT_PERSISTED = new Set(['PS1', 'PS2', 'PS3', 'PS4', 'PROMPT_COMMAND']);

function shellEscape(v) {
  return `'${String(v).replace(/'/g, `'\\''`)}'`;
}

// buildWrappedScript
function script(command, env, cwd) {
  let s = 'exec 2>&1\n'; // cmd.Stderr = cmd.Stdout
  for (const k of Object.keys(env).sort()) {
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(k) && !NOT_PERSISTED.has(k) && String(env[k]).length <= 8192) s += `export ${k}=${shellEscape(env[k])}\n`;
  }
  if (cwd) s += `cd ${shellEscape(cwd)}\n`;
  s += command.endsWith('\n') ? command : `${command}\n`;
  s += '__USER_EXIT_CODE__=$?\n';
  s += `printf "\\n%s\\n" "${ENV_START}"\nexport -p\nprintf "%s\\n" "${ENV_END}"\n`;
  s += `printf "${PWD}%s\\n" "$(pwd)"\nprintf "${EXIT}%s\\n" "$__USER_EXIT_CODE__"\nexit "$__USER_EXIT_CODE__"\n`;
  return s;
}

// parseExportDump: bash's `declare -x K="v"` lines (bash escapes ", \, $ and ` inside the quotes)
function parseExports(lines) {
  const env = {};
  for (const l of lines) {
    const m = /^declare -x ([A-Za-z_][A-Za-z0-9_]*)(?:="((?:[^"\\]|\\.)*)")?$/.exec(l);
    if (m && m[2] !== undefined) env[m[1]] = m[2].replace(/\\(["\\$`])/g, '$1');
  }
  return env;
}

function runtimeError(res, message) {
  sendGoJson(res, 500, { code: 'RUNTIME_ERROR', message });
}

async function jsonBody(req, res, { emptyOk }) {
  const buf = await readBody(req);
  if (buf.length === 0 && emptyOk) return {};
  try {
    const v = JSON.parse(buf.toString('utf8'));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
    throw new Error('json: cannot unmarshal into Go value of type model.Request');
  } catch (e) {
    sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `error parsing request. ${e.message}` });
    return null;
  }
}

async function create(sbx, req, res) {
  const body = await jsonBody(req, res, { emptyOk: true });
  if (!body) return;
  let cwd = '';
  if (body.cwd) {
    const rp = resolvePath(sbx.root, expandPath(body.cwd, baseEnv(sbx.env)));
    try {
      if (rp.writable) fs.mkdirSync(rp.host, { recursive: true });
      else fs.statSync(rp.host);
    } catch (e) {
      return runtimeError(res, `error creating session. mkdir ${rp.path}: ${e.code === 'ENOENT' ? 'no such file or directory' : e.message}`);
    }
    cwd = rp.path;
  }
  const id = crypto.randomUUID();
  // the session starts with execd's own environment (os.Environ()): the image's and the sandbox's
  sbx.sessions.set(id, { id, env: baseEnv(sbx.env), cwd, running: null });
  return sendGoJson(res, 200, { session_id: id });
}

async function run(emu, sbx, req, res, id, ctx) {
  const body = await jsonBody(req, res, { emptyOk: false });
  if (!body) return;
  if (typeof body.command !== 'string' || body.command === '') {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: "invalid request. Key: 'RunInSessionRequest.Command' Error:Field validation for 'Command' failed on the 'required' tag" });
  }
  if (body.timeout !== undefined && body.timeout !== null && !(Number.isInteger(body.timeout) && body.timeout >= 0)) {
    return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: "invalid request. Key: 'RunInSessionRequest.Timeout' Error:Field validation for 'Timeout' failed on the 'gte' tag" });
  }
  const s = sbx.sessions.get(id);
  if (!s) return runtimeError(res, 'error running in session. context not found');
  let cwd = s.cwd;
  if (body.cwd) {
    const rp = resolvePath(sbx.root, expandPath(body.cwd, s.env));
    let st = null;
    try { st = fs.statSync(rp.host); } catch { st = null; }
    if (!st || !st.isDirectory()) {
      return sendGoJson(res, 400, { code: 'INVALID_REQUEST_BODY', message: `invalid request. working directory does not exist: ${body.cwd}` });
    }
    cwd = rp.path;
  }
  const name = `execd_bash_${crypto.randomBytes(6).toString('hex')}.sh`;
  const file = path.join(sbx.root, 'tmp', name);
  fs.writeFileSync(file, script(body.command, s.env, cwd), { mode: 0o600 });
  const stream = new EventStream(res, ctx);
  stream.event({ type: 'init', text: s.id });
  const started = Date.now();
  const child = spawnIn(sbx.root, ['/bin/bash', '--noprofile', '--norc', `/tmp/${name}`], { env: s.env, cwd: cwd || WORKDIR, stdio: ['ignore', 'pipe', 'ignore'] });
  s.running = child;
  let timedOut = false;
  const timer = body.timeout > 0 ? setTimeout(() => { timedOut = true; signalTree(child, 'SIGKILL'); }, body.timeout) : null;
  const onClose = () => { if (!res.writableEnded) signalTree(child, 'SIGKILL'); };
  res.on('close', onClose);
  const envLines = [];
  let inEnv = false;
  let pwd = null;
  let exit = null;
  let pending = '';
  const onLine = (line) => {
    if (line === ENV_START) inEnv = true;
    else if (line === ENV_END) inEnv = false;
    else if (line.startsWith(EXIT)) exit = Number(line.slice(EXIT.length));
    else if (line.startsWith(PWD)) pwd = line.slice(PWD.length);
    else if (inEnv) envLines.push(line);
    else if (line !== '') stream.event({ type: 'stdout', text: line });
  };
  child.stdout.on('data', (d) => {
    pending += d.toString('utf8');
    let i;
    while ((i = pending.indexOf('\n')) >= 0) { onLine(pending.slice(0, i)); pending = pending.slice(i + 1); }
  });
  const code = await new Promise((resolve) => {
    child.on('close', (c, sig) => resolve(sig ? -1 : c));
    child.on('error', () => resolve(-1));
  });
  if (pending) onLine(pending);
  if (timer) clearTimeout(timer);
  res.off('close', onClose);
  s.running = null;
  fs.rmSync(file, { force: true });
  if (timedOut) {
    // RunInBashSession's error after the stream began: the JSON error goes out after the events
    await stream.chain;
    if (!res.destroyed) res.end(JSON.stringify({ code: 'RUNTIME_ERROR', message: `error running in session. timeout after ${body.timeout}ms` }));
    return;
  }
  const env = parseExports(envLines);
  if (Object.keys(env).length > 0) s.env = env;
  if (pwd) s.cwd = pwd;
  const status = exit !== null && Number.isFinite(exit) ? exit : code;
  if (status !== 0) {
    stream.event({ type: 'error', error: { ename: 'CommandExecError', evalue: String(status), traceback: [`command exited with code ${status}`] } });
  } else {
    const ms = Date.now() - started;
    stream.event(ms > 0 ? { type: 'execution_complete', execution_time: ms } : { type: 'execution_complete' });
  }
  await stream.end(0);
}

function remove(sbx, res, id) {
  const s = sbx.sessions.get(id);
  if (!s) return sendGoJson(res, 404, { code: 'CONTEXT_NOT_FOUND', message: `session ${id} not found` });
  if (s.running) signalTree(s.running, 'SIGKILL');
  sbx.sessions.delete(id);
  return send(res, 200);
}

export async function handleSessions(emu, sbx, req, res, p, ctx) {
  const m = req.method;
  let g;
  if (p === '/session' && m === 'POST') return create(sbx, req, res);
  if ((g = p.match(/^\/session\/([^/]+)\/run$/)) && m === 'POST') return run(emu, sbx, req, res, decodeURIComponent(g[1]), ctx);
  if ((g = p.match(/^\/session\/([^/]+)$/)) && m === 'DELETE') { await readBody(req); return remove(sbx, res, decodeURIComponent(g[1])); }
  return null;
}

export function closeSessions(sbx) {
  for (const s of sbx.sessions.values()) if (s.running) signalTree(s.running, 'SIGKILL');
  sbx.sessions.clear();
}
