// bench/interpreter.mjs: the JS side of bench/interpreter.lua: the same loop written with the official
// OpenAI JS SDK (openai) and E2B JS SDK (@e2b/code-interpreter), against the same emulators.
// usage: node bench/interpreter.mjs <openai-base-url> <openai-key> <model> <e2b-base-url> <e2b-key>
// Runs one task to its end (the model's answer), then prints one JSON line
// {steps, total_ms, model_ms, sandbox_ms, max_rss_kb, version}.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'spec', 'package.json'));
const OpenAI = require('openai').default;
const { Sandbox } = require('@e2b/code-interpreter');

const [lmBase, lmKey, model, e2bBase, e2bKey] = process.argv.slice(2);
// a package's version from its package.json on disk (their exports do not list package.json)
const version = (name) => JSON.parse(fs.readFileSync(path.join(root, 'spec', 'node_modules', name, 'package.json'))).version;
const client = new OpenAI({ apiKey: lmKey, baseURL: `${lmBase}/v1`, maxRetries: 2 });
const tools = [{ type: 'function', function: { name: 'execute_code', description: 'Run Python code',
  parameters: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] } } }];

const sbx = await Sandbox.create({ apiKey: e2bKey, apiUrl: e2bBase, sandboxUrl: e2bBase, requestTimeoutMs: 20000 });
let modelMs = 0;
let sandboxMs = 0;
let steps = 0;
const t0 = performance.now();
const messages = [{ role: 'system', content: 'You write Python.' }, { role: 'user', content: 'count' }];
for (;;) {
  const m0 = performance.now();
  const done = await client.chat.completions.stream({ model, messages, tools,
    stream_options: { include_usage: true } }).finalChatCompletion();
  modelMs += performance.now() - m0;
  const msg = done.choices[0].message;
  messages.push(msg);
  if (!msg.tool_calls || msg.tool_calls.length === 0) break;
  steps++;
  for (const call of msg.tool_calls) {
    const { code } = JSON.parse(call.function.arguments);
    const s0 = performance.now();
    const ex = await sbx.runCode(code);
    sandboxMs += performance.now() - s0;
    let obs = '';
    if (ex.logs.stdout.length) obs += 'stdout:\n' + ex.logs.stdout.join('');
    if (ex.logs.stderr.length) obs += 'stderr:\n' + ex.logs.stderr.join('');
    if (ex.text) obs += 'value: ' + ex.text;
    if (ex.error) obs += `error: ${ex.error.name}: ${ex.error.value}\n${ex.error.traceback}`;
    messages.push({ role: 'tool', tool_call_id: call.id, content: obs || '(no output)' });
  }
}
const totalMs = performance.now() - t0;
await sbx.kill();
process.stdout.write(JSON.stringify({ steps, total_ms: totalMs, model_ms: modelMs, sandbox_ms: sandboxMs,
  max_rss_kb: process.resourceUsage().maxRSS,
  version: `openai ${version('openai')}, @e2b/code-interpreter ${version('@e2b/code-interpreter')}` }) + '\n');
