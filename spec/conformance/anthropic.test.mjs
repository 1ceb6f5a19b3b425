// Conformance: the official Anthropic JS SDK (@anthropic-ai/sdk, pinned in spec/package.json) against
// glsb's Anthropic Messages API emulator. A scenario the SDK rejects is an emulator bug.
//
//   cd spec && npm ci && node --test conformance/anthropic.test.mjs
import { test, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { startEmulator, EXECUTE_CODE, HISTOGRAM, TINY_PNG } from './lm_emulator.mjs';

const KEY = 'sk-ant-glsb-conformance';
for (const k of Object.keys(process.env)) if (k.startsWith('ANTHROPIC_')) delete process.env[k];

let emu = null;
let client = null;

before(async () => {
  emu = await startEmulator('anthropic', ['--api-key', KEY]);
  client = new Anthropic({ apiKey: KEY, baseURL: emu.url, maxRetries: 2 });
});

after(async () => {
  if (emu) await emu.stop();
});

beforeEach(async () => { await emu.admin('POST', '/_emulator/reset'); });

const tools = [{ name: EXECUTE_CODE.name, description: EXECUTE_CODE.description, input_schema: EXECUTE_CODE.parameters }];

test('tool_use, then a tool_result with an image inside, then the answer (non-streaming)', async () => {
  const messages = [{ role: 'user', content: HISTOGRAM }];
  const first = await client.messages.create({ model: 'glsb-rules', max_tokens: 1024, system: 'You write Python.', messages, tools });
  assert.equal(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'execute_code');
  assert.match(use.input.code, /savefig\("hist\.png"\)/);
  assert.match(use.id, /^toolu_/);
  assert.ok(first.usage.input_tokens > 0 && first.usage.output_tokens > 0);
  messages.push({ role: 'assistant', content: first.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: [
    { type: 'text', text: 'stdout:\nsaved hist.png\n' },
    { type: 'image', source: { type: 'base64', media_type: 'image/png', data: TINY_PNG } },
  ] }] });
  const second = await client.messages.create({ model: 'glsb-rules', max_tokens: 1024, messages, tools });
  assert.equal(second.stop_reason, 'end_turn');
  assert.match(second.content[0].text, /saved it as hist\.png/);
  assert.match(second.content[0].text, /2x1 pixels/);
  const sent = await emu.admin('GET', '/_emulator/requests');
  assert.match(sent[0].headers['anthropic-version'], /^\d{4}-\d{2}-\d{2}$/);
});

test('streaming: message_start .. message_stop, text deltas, input_json_delta joined into the input', async () => {
  await emu.admin('POST', '/_emulator/config', { chunkChars: 3 });
  await emu.admin('POST', '/_emulator/scripts', { name: 'two-calls', replies: [
    { text: 'Running two cells.', tool_calls: [{ name: 'execute_code', arguments: { code: 'x = 6 * 7' } },
      { name: 'execute_code', arguments: { code: 'print(x)' } }] },
  ] });
  const stream = client.messages.stream({ model: 'script:two-calls', max_tokens: 100, messages: [{ role: 'user', content: 'go' }], tools });
  const texts = [];
  const types = [];
  stream.on('text', (t) => texts.push(t));
  stream.on('streamEvent', (e) => types.push(e.type));
  const msg = await stream.finalMessage();
  assert.ok(texts.length > 3);
  assert.equal(texts.join(''), 'Running two cells.');
  assert.deepEqual(msg.content.filter((b) => b.type === 'tool_use').map((b) => b.input.code), ['x = 6 * 7', 'print(x)']);
  assert.equal(msg.stop_reason, 'tool_use');
  assert.ok(msg.usage.output_tokens > 0);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');
  assert.ok(types.includes('message_delta'));
});

test('errors: 401, 404 model, context length, a tool_use without its tool_result', async () => {
  const bad = new Anthropic({ apiKey: 'sk-ant-wrong-000000', baseURL: emu.url, maxRetries: 0 });
  const e401 = await bad.messages.create({ model: 'glsb-rules', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.ok(e401 instanceof Anthropic.AuthenticationError);
  assert.equal(e401.type, 'authentication_error');
  assert.match(e401.requestID, /^req_/);

  const e404 = await client.messages.create({ model: 'claude-nope', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((e) => e);
  assert.ok(e404 instanceof Anthropic.NotFoundError);

  await emu.admin('POST', '/_emulator/config', { contextWindow: 10 });
  const eCtx = await client.messages.create({ model: 'glsb-rules', max_tokens: 10, messages: [{ role: 'user', content: 'x'.repeat(400) }] }).catch((e) => e);
  assert.ok(eCtx instanceof Anthropic.BadRequestError);
  assert.match(eCtx.message, /prompt is too long/);

  const ePair = await client.messages.create({ model: 'glsb-rules', max_tokens: 10, tools, messages: [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'execute_code', input: { code: '1' } }] },
    { role: 'user', content: 'no result here' },
  ] }).catch((e) => e);
  assert.ok(ePair instanceof Anthropic.BadRequestError);
  assert.match(ePair.message, /tool_use` ids were found without `tool_result` blocks immediately after: toolu_1/);
});

test('429 and 529 with retry-after are retried by the SDK; a persisting 529 is an OverloadedError', async () => {
  await emu.admin('POST', '/_emulator/faults', [{ path: 'messages$', status: 429, retryAfterMs: 40 },
    { path: 'messages$', status: 529, retryAfter: 0 }]);
  const ok = await client.messages.create({ model: 'glsb-rules', max_tokens: 100, messages: [{ role: 'user', content: 'what is 2+2' }], tools });
  assert.equal(ok.stop_reason, 'tool_use');
  assert.equal((await emu.admin('GET', '/_emulator/requests')).length, 3);

  await emu.admin('POST', '/_emulator/faults', { path: 'messages$', status: 529, retryAfter: 0, times: -1 });
  const e = await client.messages.create({ model: 'glsb-rules', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }).catch((x) => x);
  assert.ok(e instanceof Anthropic.OverloadedError || e instanceof Anthropic.InternalServerError);
  assert.equal(e.status, 529);
  assert.equal(e.type, 'overloaded_error');
});

test('an error event mid-stream rejects the stream with the API error; a cut stream rejects too', async () => {
  await emu.admin('POST', '/_emulator/faults', { path: 'messages$', action: 'stream_error', events: 3 });
  const s = client.messages.stream({ model: 'glsb-rules', max_tokens: 100, messages: [{ role: 'user', content: HISTOGRAM }], tools });
  const e = await s.finalMessage().catch((x) => x);
  assert.ok(e instanceof Anthropic.APIError);
  assert.match(e.message, /Overloaded/);

  await emu.admin('POST', '/_emulator/faults', { path: 'messages$', action: 'cut_after_events', events: 3 });
  const s2 = client.messages.stream({ model: 'glsb-rules', max_tokens: 100, messages: [{ role: 'user', content: HISTOGRAM }], tools });
  const e2 = await s2.finalMessage().catch((x) => x);
  assert.ok(e2 instanceof Error);
});

test('an is_error tool_result reaches the model: the rule model reports the failure', async () => {
  const messages = [{ role: 'user', content: 'what is 1/0' }];
  const first = await client.messages.create({ model: 'glsb-rules', max_tokens: 100, messages, tools });
  const use = first.content.find((b) => b.type === 'tool_use');
  messages.push({ role: 'assistant', content: first.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, is_error: true,
    content: 'ZeroDivisionError: division by zero' }] });
  const second = await client.messages.create({ model: 'glsb-rules', max_tokens: 100, messages, tools });
  assert.match(second.content[0].text, /ZeroDivisionError: division by zero/);
});

test('models.list names the rule model', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('glsb-rules'));
});
