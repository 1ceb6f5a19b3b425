// Conformance: the official OpenAI JS SDK (openai, pinned in spec/package.json) against glsb's OpenAI Chat
// Completions emulator. A scenario the SDK rejects is an emulator bug.
//
//   cd spec && npm ci && node --test conformance/openai.test.mjs
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startEmulator, EXECUTE_CODE, HISTOGRAM, TINY_PNG } from './lm_emulator.mjs';

const KEY = 'sk-glsb-conformance';
for (const k of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'OPENAI_ORG_ID', 'OPENAI_PROJECT_ID']) delete process.env[k];

let emu = null;
let client = null;

before(async () => {
  emu = await startEmulator('openai', ['--api-key', KEY]);
  client = new OpenAI({ apiKey: KEY, baseURL: `${emu.url}/v1`, maxRetries: 2 });
});

after(async () => {
  if (emu) await emu.stop();
});

beforeEach(async () => { await emu.admin('POST', '/_emulator/reset'); });

const tools = [{ type: 'function', function: EXECUTE_CODE }];

test('a tool call, then the answer from its result (non-streaming)', async () => {
  const messages = [{ role: 'system', content: 'You write Python.' }, { role: 'user', content: HISTOGRAM }];
  const first = await client.chat.completions.create({ model: 'glsb-rules', messages, tools });
  const choice = first.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.function.name, 'execute_code');
  assert.match(JSON.parse(call.function.arguments).code, /savefig\("hist\.png"\)/);
  assert.ok(first.usage.prompt_tokens > 0 && first.usage.completion_tokens > 0);
  assert.equal(first.usage.total_tokens, first.usage.prompt_tokens + first.usage.completion_tokens);
  messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: 'stdout:\nsaved hist.png\n' });
  // the picture goes in a user message after the tool message (tool messages carry text only)
  messages.push({ role: 'user', content: [{ type: 'text', text: 'The image the code displayed:' },
    { type: 'image_url', image_url: { url: `data:image/png;base64,${TINY_PNG}` } }] });
  const second = await client.chat.completions.create({ model: 'glsb-rules', messages, tools });
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.match(second.choices[0].message.content, /saved it as hist\.png/);
  assert.match(second.choices[0].message.content, /2x1 pixels/);
});

test('streaming: text deltas, tool-call fragments joined by index, usage in the last chunk', async () => {
  await emu.admin('POST', '/_emulator/config', { chunkChars: 3 });
  await emu.admin('POST', '/_emulator/scripts', { name: 'two-calls', replies: [
    { text: 'Running two cells.', tool_calls: [{ name: 'execute_code', arguments: { code: 'x = 6 * 7' } },
      { name: 'execute_code', arguments: { code: 'print(x)' } }] },
  ] });
  const stream = client.chat.completions.stream({ model: 'script:two-calls', messages: [{ role: 'user', content: 'go' }], tools,
    stream_options: { include_usage: true } });
  const deltas = [];
  stream.on('content', (d) => deltas.push(d));
  const done = await stream.finalChatCompletion();
  assert.ok(deltas.length > 3, 'text arrived in several deltas');
  assert.equal(deltas.join(''), 'Running two cells.');
  const calls = done.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => JSON.parse(c.function.arguments).code), ['x = 6 * 7', 'print(x)']);
  assert.notEqual(calls[0].id, calls[1].id);
  assert.equal(done.choices[0].finish_reason, 'tool_calls');
  assert.ok(done.usage && done.usage.completion_tokens > 0, 'usage from the final chunk');
});

test('raw stream chunks as the SDK iterates them: [DONE] ends it, the usage chunk has no choices', async () => {
  const s = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'what is 6*7' }],
    tools, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of s) chunks.push(c);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage.prompt_tokens > 0);
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'tool_calls');
  const args = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls || []).map((t) => t.function.arguments).join('');
  assert.deepEqual(JSON.parse(args), { code: 'result = 6*7\nprint(result)' });
});

test('errors: 401, 404 model, 400 context length, 400 tool message without a call', async () => {
  const bad = new OpenAI({ apiKey: 'sk-wrong-key-123456', baseURL: `${emu.url}/v1`, maxRetries: 0 });
  const e401 = await bad.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.ok(e401 instanceof OpenAI.AuthenticationError);
  assert.equal(e401.code, 'invalid_api_key');
  assert.match(e401.requestID, /^req_/);
  assert.ok(!e401.message.includes('sk-wrong-key-123456'), 'the key is masked in the message');

  const e404 = await client.chat.completions.create({ model: 'gpt-nope', messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.ok(e404 instanceof OpenAI.NotFoundError);
  assert.equal(e404.code, 'model_not_found');

  await emu.admin('POST', '/_emulator/config', { contextWindow: 10 });
  const eCtx = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'x'.repeat(400) }] }).catch((e) => e);
  assert.ok(eCtx instanceof OpenAI.BadRequestError);
  assert.equal(eCtx.code, 'context_length_exceeded');

  const eTool = await client.chat.completions.create({ model: 'glsb-rules',
    messages: [{ role: 'user', content: 'hi' }, { role: 'tool', tool_call_id: 'call_1', content: 'x' }] }).catch((e) => e);
  assert.ok(eTool instanceof OpenAI.BadRequestError);
  assert.match(eTool.message, /must be a response to a preceeding message with 'tool_calls'/);

  const eImg = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'hi' },
    { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'execute_code', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${TINY_PNG}` } }] }],
  tools }).catch((e) => e);
  assert.ok(eImg instanceof OpenAI.BadRequestError, 'tool messages carry no images');
});

test('429 with retry-after-ms is retried by the SDK; one that persists is a RateLimitError', async () => {
  await emu.admin('POST', '/_emulator/faults', { path: 'chat/completions$', status: 429, retryAfterMs: 50, times: 2 });
  const t0 = Date.now();
  const ok = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'what is 1+1' }], tools });
  assert.equal(ok.choices[0].finish_reason, 'tool_calls');
  assert.ok(Date.now() - t0 >= 100, 'the SDK waited retry-after-ms twice');
  const reqs = await emu.admin('GET', '/_emulator/requests');
  assert.equal(reqs.length, 3);

  await emu.admin('POST', '/_emulator/faults', { path: 'chat/completions$', status: 429, retryAfter: 0, times: -1 });
  const e = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'hi' }] }).catch((x) => x);
  assert.ok(e instanceof OpenAI.RateLimitError);
  assert.equal(e.code, 'rate_limit_exceeded');
  await emu.admin('DELETE', '/_emulator/faults');

  await emu.admin('POST', '/_emulator/faults', { path: 'chat/completions$', status: 500, times: -1 });
  const noRetry = new OpenAI({ apiKey: KEY, baseURL: `${emu.url}/v1`, maxRetries: 0 });
  const e500 = await noRetry.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: 'hi' }] }).catch((x) => x);
  assert.ok(e500 instanceof OpenAI.InternalServerError);
  assert.equal(e500.type, 'server_error');
});

test('a stream that carries an error event, and one cut mid-way, both reject', async () => {
  await emu.admin('POST', '/_emulator/faults', { path: 'chat/completions$', action: 'stream_error', events: 2 });
  const s1 = await client.chat.completions.create({ model: 'glsb-rules', messages: [{ role: 'user', content: HISTOGRAM }], tools, stream: true });
  const e1 = await (async () => { for await (const _ of s1) { /* drain */ } })().catch((e) => e);
  assert.ok(e1 instanceof OpenAI.APIError);
  assert.match(e1.message, /server had an error/);

  await emu.admin('POST', '/_emulator/faults', { path: 'chat/completions$', action: 'cut_after_events', events: 2 });
  const stream = client.chat.completions.stream({ model: 'glsb-rules', messages: [{ role: 'user', content: HISTOGRAM }], tools });
  const e2 = await stream.finalChatCompletion().catch((e) => e);
  assert.ok(e2 instanceof Error, 'a cut stream gives no completion');
});

test('a scripted reply with invalid tool arguments reaches the client as the server sent them', async () => {
  await emu.admin('POST', '/_emulator/scripts', { name: 'bad-args', replies: [
    { tool_calls: [{ name: 'execute_code', arguments_raw: '{"code": "print(1)"', id: 'call_..' }] }] });
  const r = await client.chat.completions.create({ model: 'script:bad-args', messages: [{ role: 'user', content: 'go' }], tools });
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.id, 'call_..');
  assert.throws(() => JSON.parse(call.function.arguments));
});

test('models.list names the rule model and the scripts', async () => {
  await emu.admin('POST', '/_emulator/scripts', { name: 'listed', replies: [{ text: 'x' }] });
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('glsb-rules'));
  assert.ok(ids.includes('script:listed'));
});
