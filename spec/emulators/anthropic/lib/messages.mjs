// The Anthropic Messages API, as api.anthropic.com speaks it (tests only). Wire facts: docs/protocols/llm.md
// (anthropic-sdk-python's types, anthropic-sdk-typescript's client and MessageStream).
//
//   POST /v1/messages      x-api-key: <key>, anthropic-version: <date>
//   GET  /v1/models, /v1/models/{id}
import {
  readBody, send, sendJson, hexId, tokens, conversationTokens, applyFault, EventStream, startStream,
} from '../../lm/emulator.mjs';
import { rulesReply, replyText, pieces, RULES_MODEL } from '../../lm/models.mjs';

export const defaultKeys = ['sk-ant-glsb-test-key'];

const KNOWN_PARAMS = new Set(['model', 'messages', 'max_tokens', 'system', 'tools', 'tool_choice', 'stream',
  'stop_sequences', 'temperature', 'top_p', 'top_k', 'metadata', 'thinking', 'service_tier', 'container',
  'mcp_servers', 'context_management']);

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,128}$/;
const MEDIA = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

function requestId() { return `req_${hexId(24)}`; }

// {"type": "error", "error": {type, message}, "request_id"} (types/shared/error_response.py)
function apiError(res, status, type, message, headers = {}) {
  const rid = res.getHeader('request-id');
  return sendJson(res, status, { type: 'error', error: { type, message }, request_id: rid }, headers);
}

const STATUS_TYPES = { 400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error',
  404: 'not_found_error', 408: 'timeout_error', 413: 'request_too_large', 429: 'rate_limit_error', 500: 'api_error',
  504: 'timeout_error', 529: 'overloaded_error' };
const STATUS_MESSAGES = { 429: 'Number of request tokens has exceeded your per-minute rate limit', 500: 'Internal server error',
  529: 'Overloaded' };

function faultStatus(res, rule, key) {
  const headers = {};
  if (rule.retryAfter !== undefined) headers['retry-after'] = String(rule.retryAfter);
  if (rule.retryAfterMs !== undefined) headers['retry-after-ms'] = String(rule.retryAfterMs);
  if (rule.shouldRetry !== undefined) headers['x-should-retry'] = String(rule.shouldRetry);
  if (rule.body !== undefined) {
    const text = typeof rule.body === 'string' ? rule.body : JSON.stringify(rule.body);
    return send(res, rule.status, text, { 'Content-Type': 'application/json', ...headers });
  }
  const type = rule.type || STATUS_TYPES[rule.status] || 'api_error';
  const msg = (rule.message || STATUS_MESSAGES[rule.status] || `status ${rule.status}`) + (rule.echoKey ? ` (key: ${key})` : '');
  return apiError(res, rule.status, type, msg, headers);
}

// ------------------------------------------------------------------------------------------------
// Request -> neutral conversation (models.mjs), or a 400 message

function blocksOf(content, where) {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) throw new Error(`${where}: Input should be a valid list`);
  return content;
}

function imageOf(b, where) {
  const s = b.source;
  if (!s || s.type !== 'base64' || !MEDIA.has(s.media_type) || typeof s.data !== 'string' || !/^[A-Za-z0-9+/=]*$/.test(s.data)) {
    throw new Error(`${where}.source: this emulator takes base64 png, jpeg, gif or webp images`);
  }
  return { media_type: s.media_type, data: s.data };
}

function parseUser(m, i, conv, expect) {
  const where = `messages.${i}.content`;
  const blocks = blocksOf(m.content, where);
  let sawOther = false;
  const msg = { role: 'user', text: '', images: [] };
  blocks.forEach((b, j) => {
    const w = `${where}.${j}`;
    if (!b || typeof b !== 'object') throw new Error(`${w}: Input should be a valid dictionary`);
    if (b.type === 'tool_result') {
      if (sawOther) throw new Error(`${w}: \`tool_result\` blocks must come first in the content of a user message, before any other block`);
      if (!expect.has(b.tool_use_id)) {
        throw new Error(`${w}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${b.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
      }
      expect.delete(b.tool_use_id);
      const inner = b.content === undefined ? [] : blocksOf(b.content, `${w}.content`);
      const tm = { role: 'tool', tool_call_id: b.tool_use_id, text: '', images: [], is_error: b.is_error === true };
      inner.forEach((ib, k) => {
        if (ib && ib.type === 'text' && typeof ib.text === 'string') tm.text += (tm.text ? '\n' : '') + ib.text;
        else if (ib && ib.type === 'image') tm.images.push(imageOf(ib, `${w}.content.${k}`));
        else throw new Error(`${w}.content.${k}: Input tag '${ib && ib.type}' found using 'type' does not match any of the expected tags: 'text', 'image', 'search_result', 'document'`);
      });
      conv.messages.push(tm);
      return;
    }
    sawOther = true;
    if (b.type === 'text') {
      if (typeof b.text !== 'string') throw new Error(`${w}.text: Input should be a valid string`);
      msg.text += (msg.text ? '\n' : '') + b.text;
    } else if (b.type === 'image') {
      msg.images.push(imageOf(b, w));
    } else {
      throw new Error(`${w}: Input tag '${b.type}' found using 'type' does not match any of the expected tags`);
    }
  });
  if (expect.size > 0) {
    throw new Error(`messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${[...expect].join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
  }
  if (sawOther) conv.messages.push(msg);
}

function parseAssistant(m, i, conv) {
  const blocks = blocksOf(m.content, `messages.${i}.content`);
  const msg = { role: 'assistant', text: '', tool_calls: [] };
  blocks.forEach((b, j) => {
    const w = `messages.${i}.content.${j}`;
    if (!b || typeof b !== 'object') throw new Error(`${w}: Input should be a valid dictionary`);
    if (b.type === 'text') {
      if (typeof b.text !== 'string') throw new Error(`${w}.text: Input should be a valid string`);
      msg.text += b.text;
    } else if (b.type === 'tool_use') {
      if (typeof b.id !== 'string' || typeof b.name !== 'string') throw new Error(`${w}: tool_use needs id and name`);
      if (!b.input || typeof b.input !== 'object' || Array.isArray(b.input)) throw new Error(`${w}.input: Input should be a valid dictionary`);
      msg.tool_calls.push({ id: b.id, name: b.name, arguments: b.input });
    } else if (b.type !== 'thinking' && b.type !== 'redacted_thinking') {
      throw new Error(`${w}: Input tag '${b.type}' found using 'type' does not match any of the expected tags`);
    }
  });
  conv.messages.push(msg);
  return new Set(msg.tool_calls.map((c) => c.id));
}

function parseRequest(body) {
  for (const k of Object.keys(body)) if (!KNOWN_PARAMS.has(k)) throw new Error(`${k}: Extra inputs are not permitted`);
  if (typeof body.model !== 'string' || body.model === '') throw new Error('model: Field required');
  if (!Number.isInteger(body.max_tokens)) throw new Error('max_tokens: Field required');
  if (body.max_tokens < 1) throw new Error('max_tokens: Input should be greater than or equal to 1');
  if (!Array.isArray(body.messages)) throw new Error('messages: Field required');
  if (body.messages.length === 0) throw new Error('messages: at least one message is required');
  const conv = { model: body.model, system: '', messages: [], tools: [], toolChoice: undefined, maxTokens: body.max_tokens };
  if (body.system !== undefined) {
    if (typeof body.system === 'string') conv.system = body.system;
    else if (Array.isArray(body.system)) conv.system = body.system.map((b) => (b && b.type === 'text' ? b.text : '')).join('\n');
    else throw new Error('system: Input should be a valid string or list of text blocks');
  }
  let expect = new Set();
  body.messages.forEach((m, i) => {
    if (!m || typeof m !== 'object') throw new Error(`messages.${i}: Input should be a valid dictionary`);
    if (m.role === 'user') {
      parseUser(m, i, conv, expect);
      expect = new Set();
    } else if (m.role === 'assistant') {
      if (expect.size > 0) {
        throw new Error(`messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${[...expect].join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
      }
      expect = parseAssistant(m, i, conv);
    } else if (m.role === 'system') {
      // a system turn among the messages (MessageParam = User | Assistant | SystemMessageParam in
      // anthropic-sdk-typescript 1.x); the top-level `system` is the older, still accepted, form
      const text = blocksOf(m.content, `messages.${i}.content`).map((b) => (b && b.type === 'text' ? b.text : '')).join('\n');
      conv.system += (conv.system ? '\n' : '') + text;
    } else {
      throw new Error(`messages.${i}.role: Input should be 'user', 'assistant' or 'system'`);
    }
  });
  if (expect.size > 0) {
    throw new Error(`messages: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${[...expect].join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Error('tools: Input should be a valid list');
    body.tools.forEach((t, j) => {
      if (!t || typeof t.name !== 'string') throw new Error(`tools.${j}.name: Field required`);
      if (!TOOL_NAME.test(t.name)) throw new Error(`tools.${j}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`);
      const s = t.input_schema;
      if (!s || typeof s !== 'object' || s.type !== 'object') throw new Error(`tools.${j}.custom.input_schema: input_schema must be a JSON Schema of type "object"`);
      conv.tools.push({ name: t.name, description: t.description, parameters: s });
    });
  }
  const tc = body.tool_choice;
  if (tc !== undefined) {
    if (!tc || typeof tc !== 'object') throw new Error('tool_choice: Input should be a valid dictionary');
    if (tc.type === 'auto') conv.toolChoice = 'auto';
    else if (tc.type === 'none') conv.toolChoice = 'none';
    else if (tc.type === 'any') conv.toolChoice = 'required';
    else if (tc.type === 'tool' && typeof tc.name === 'string') conv.toolChoice = { name: tc.name };
    else throw new Error("tool_choice: Input tag found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'");
  }
  return conv;
}

// ------------------------------------------------------------------------------------------------
// Neutral reply -> the wire

const STOP = { stop: 'end_turn', length: 'max_tokens', tool_calls: 'tool_use', content_filter: 'refusal', refusal: 'refusal',
  pause: 'pause_turn', context_length: 'model_context_window_exceeded' };

function blocks(reply) {
  const out = [];
  if (reply.text) out.push({ type: 'text', text: reply.text });
  for (const c of reply.tool_calls || []) {
    let input = c.arguments;
    if (input === undefined && c.arguments_raw !== undefined) {
      try { input = JSON.parse(c.arguments_raw); } catch { input = {}; }
    }
    out.push({ type: 'tool_use', id: c.id ?? `toolu_${hexId(24)}`, name: c.name, input: input ?? {},
      raw: c.arguments_raw ?? JSON.stringify(input ?? {}) });
  }
  return out;
}

function stopReason(reply, content) {
  if (reply.finish) return STOP[reply.finish] || reply.finish;
  return content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
}

function usageOf(conv, reply) {
  return { input_tokens: reply.usage?.input_tokens ?? conversationTokens(conv), cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0, output_tokens: reply.usage?.output_tokens ?? tokens(replyText(reply)), service_tier: 'standard' };
}

async function stream(res, emu, ctx, id, conv, reply, headers) {
  startStream(res, headers);
  const es = new EventStream(res, ctx, () => ['error', { type: 'error',
    error: { type: 'overloaded_error', message: ctx.errorMessage || 'Overloaded' }, request_id: res.getHeader('request-id') }]);
  if (Array.isArray(reply.raw_events)) {
    // [event name, data] pairs, or data objects whose `type` names the event
    for (const e of reply.raw_events) {
      const [name, data] = Array.isArray(e) ? e : [e && e.type, e];
      if (!(await es.event(name, data))) return;
    }
    return es.end();
  }
  const usage = usageOf(conv, reply);
  const ev = (data) => es.event(data.type, data);
  if (!(await ev({ type: 'message_start', message: { id, type: 'message', role: 'assistant', model: conv.model, content: [],
    stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } }))) return;
  if (!(await ev({ type: 'ping' }))) return;
  const n = emu.config.chunkChars;
  if (ctx.endless) {
    await ev({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
    while (await ev({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'more '.repeat(200) } }));
    return;
  }
  const content = blocks(reply);
  for (let i = 0; i < content.length; i++) {
    const b = content[i];
    if (b.type === 'text') {
      if (!(await ev({ type: 'content_block_start', index: i, content_block: { type: 'text', text: '' } }))) return;
      for (const p of pieces(b.text, n)) if (!(await ev({ type: 'content_block_delta', index: i, delta: { type: 'text_delta', text: p } }))) return;
    } else {
      if (!(await ev({ type: 'content_block_start', index: i, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } }))) return;
      for (const p of pieces(b.raw, n)) if (!(await ev({ type: 'content_block_delta', index: i, delta: { type: 'input_json_delta', partial_json: p } }))) return;
    }
    if (!(await ev({ type: 'content_block_stop', index: i }))) return;
  }
  const delta = { type: 'message_delta', delta: { stop_reason: stopReason(reply, content), stop_sequence: null },
    usage: reply.no_usage ? { output_tokens: 0 } : { output_tokens: usage.output_tokens } };
  if (!(await ev(delta))) return;
  if (!(await ev({ type: 'message_stop' }))) return;
  es.end();
}

function message(id, conv, reply) {
  const content = blocks(reply).map(({ raw, ...b }) => b);
  return { id, type: 'message', role: 'assistant', model: conv.model, content, stop_reason: stopReason(reply, content),
    stop_sequence: null, usage: usageOf(conv, reply) };
}

// ------------------------------------------------------------------------------------------------

function models(emu) {
  const ids = [RULES_MODEL, ...emu.scripts.names().map((n) => `script:${n}`)];
  return ids.map((id) => ({ type: 'model', id, display_name: id, created_at: '2026-01-01T00:00:00Z' }));
}

export async function handle(emu, req, res, url) {
  const rid = requestId();
  res.setHeader('request-id', rid);
  res.setHeader('anthropic-organization-id', '00000000-0000-4000-8000-000000000000');
  const path = url.pathname.replace(/^\/v1(?=\/)/, '');
  const raw = await readBody(req).catch(() => null);
  if (raw === null) return;
  // x-api-key (the API reference, anthropic-sdk-python), or Authorization: Bearer (anthropic-sdk-typescript 1.x)
  const bearer = /^Bearer\s+(.+)$/i.exec(String(req.headers.authorization || ''));
  const key = req.headers['x-api-key'] || (bearer && bearer[1].trim());
  if (typeof key !== 'string' || key === '') return apiError(res, 401, 'authentication_error', 'x-api-key header is required');
  if (!emu.keys.includes(key)) return apiError(res, 401, 'authentication_error', 'invalid x-api-key');
  const version = req.headers['anthropic-version'];
  if (typeof version !== 'string' || version === '') return apiError(res, 400, 'invalid_request_error', 'anthropic-version: header is required');
  if (!/^\d{4}-\d{2}-\d{2}$/.test(version)) return apiError(res, 400, 'invalid_request_error', `anthropic-version: invalid version ${JSON.stringify(version)}`);

  if (req.method === 'GET' && path === '/models') {
    const data = models(emu);
    return sendJson(res, 200, { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
  }
  let g;
  if (req.method === 'GET' && (g = path.match(/^\/models\/(.+)$/))) {
    const m = models(emu).find((x) => x.id === decodeURIComponent(g[1]));
    return m ? sendJson(res, 200, m) : apiError(res, 404, 'not_found_error', `model: ${decodeURIComponent(g[1])}`);
  }
  if (!(req.method === 'POST' && path === '/messages')) return apiError(res, 404, 'not_found_error', 'Not Found');
  let body;
  try {
    body = JSON.parse(raw.toString('utf8'));
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
  } catch {
    return apiError(res, 400, 'invalid_request_error', 'There was an issue with the format of your request: the body is not a JSON object');
  }
  const model = typeof body.model === 'string' ? body.model : '';
  emu.record({ path: url.pathname, model, stream: body.stream === true, api_key: key, bytes: raw.length,
    auth: req.headers['x-api-key'] ? 'x-api-key' : 'bearer',
    headers: { 'content-type': req.headers['content-type'], accept: req.headers.accept, 'user-agent': req.headers['user-agent'],
      'anthropic-version': version, 'anthropic-beta': req.headers['anthropic-beta'] },
    body });
  const fault = await applyFault(emu, req, res, { path: url.pathname, model }, (rule) => faultStatus(res, rule, key));
  if (fault.handled) return;
  const ctx = fault.ctx;

  let conv;
  try {
    conv = parseRequest(body);
  } catch (e) {
    return apiError(res, 400, 'invalid_request_error', e.message);
  }
  let reply;
  if (model.startsWith('script:')) {
    const name = model.slice(7);
    if (!emu.scripts.has(name)) return apiError(res, 404, 'not_found_error', `model: ${model}`);
    reply = emu.scripts.next(name);
    if (!reply) return apiError(res, 500, 'api_error', `emulator: script ${name} has no reply left for this request`);
    if (reply.rules) reply = { ...reply, ...rulesReply(conv) };
  } else if (model === RULES_MODEL) {
    reply = rulesReply(conv);
  } else {
    return apiError(res, 404, 'not_found_error', `model: ${model}`);
  }
  if (reply.error) return faultStatus(res, { status: 500, ...reply.error }, key);
  const inTokens = conversationTokens(conv);
  const window = reply.context_window || emu.config.contextWindow;
  if (ctx.contextLength || inTokens > window) {
    return apiError(res, 400, 'invalid_request_error', `prompt is too long: ${inTokens} tokens > ${window} maximum`);
  }
  if (reply.delay_ms) await new Promise((r) => setTimeout(r, reply.delay_ms));
  if (reply.event_delay_ms) ctx.eventDelayMs = reply.event_delay_ms;
  if (reply.cut_after_events !== undefined) ctx.cutAfterEvents = reply.cut_after_events;
  if (reply.stream_error_after_events !== undefined) ctx.errorAfterEvents = reply.stream_error_after_events;
  const id = `msg_${hexId(24)}`;
  if (body.stream === true) return stream(res, emu, ctx, id, conv, reply, { 'request-id': rid });
  if (reply.raw_body !== undefined) {
    return send(res, 200, typeof reply.raw_body === 'string' ? reply.raw_body : JSON.stringify(reply.raw_body), { 'Content-Type': 'application/json' });
  }
  return sendJson(res, 200, message(id, conv, reply));
}
