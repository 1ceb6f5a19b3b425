// OpenAI Chat Completions, as api.openai.com speaks it (tests only). Wire facts: docs/protocols/llm.md
// (the openai-openapi spec's CreateChatCompletionRequest/Response/StreamResponse, the openai-node SDK).
//
//   POST /v1/chat/completions (also /chat/completions)   Authorization: Bearer <key>
//   GET  /v1/models, /v1/models/{id}
import {
  readBody, send, sendJson, hexId, tokens, conversationTokens, applyFault, EventStream, startStream,
} from '../../lm/emulator.mjs';
import { rulesReply, replyText, pieces, RULES_MODEL } from '../../lm/models.mjs';

export const defaultKeys = ['sk-glsb-test-key'];

// The model that refuses tools with vLLM's 400 (a server started without --enable-auto-tool-choice).
const NO_TOOLS_MODEL = 'glsb-rules-notools';

const KNOWN_PARAMS = new Set(['model', 'messages', 'tools', 'tool_choice', 'parallel_tool_calls', 'max_tokens',
  'max_completion_tokens', 'stream', 'stream_options', 'temperature', 'top_p', 'stop', 'response_format', 'seed', 'n',
  'user', 'metadata', 'store', 'logprobs', 'top_logprobs', 'presence_penalty', 'frequency_penalty', 'logit_bias',
  'reasoning_effort', 'service_tier', 'modalities', 'audio', 'prediction', 'web_search_options', 'verbosity',
  'prompt_cache_key', 'safety_identifier', 'functions', 'function_call']);

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function requestId() { return `req_${hexId(32)}`; }

// The API's error body: {"error": {message, type, param, code}} (openapi.yaml ErrorResponse).
function apiError(res, status, message, { type = 'invalid_request_error', param = null, code = null, headers = {} } = {}) {
  return sendJson(res, status, { error: { message, type, param, code } }, headers);
}

const STATUS_DEFAULTS = {
  400: ['invalid_request_error', null, 'Bad request.'],
  401: ['invalid_request_error', 'invalid_api_key', 'Incorrect API key provided.'],
  403: ['invalid_request_error', 'unsupported_country_region_territory', 'Country, region, or territory not supported'],
  404: ['invalid_request_error', 'model_not_found', 'The model does not exist or you do not have access to it.'],
  408: ['server_error', null, 'Request timed out.'],
  409: ['invalid_request_error', null, 'Conflict.'],
  422: ['invalid_request_error', null, 'Unprocessable entity.'],
  429: ['requests', 'rate_limit_exceeded', 'Rate limit reached for requests. Please try again in 1s.'],
  500: ['server_error', null, 'The server had an error while processing your request. Sorry about that!'],
  502: ['server_error', null, 'Bad gateway.'],
  503: ['server_error', null, 'The engine is currently overloaded, please try again later.'],
  504: ['server_error', null, 'Gateway timeout.'],
};

function faultStatus(res, rule, key) {
  const [type, code, message] = STATUS_DEFAULTS[rule.status] || ['server_error', null, `status ${rule.status}`];
  const headers = {};
  if (rule.retryAfter !== undefined) headers['retry-after'] = String(rule.retryAfter);
  if (rule.retryAfterMs !== undefined) headers['retry-after-ms'] = String(rule.retryAfterMs);
  if (rule.shouldRetry !== undefined) headers['x-should-retry'] = String(rule.shouldRetry);
  if (rule.body !== undefined) {
    const text = typeof rule.body === 'string' ? rule.body : JSON.stringify(rule.body);
    return send(res, rule.status, text, { 'Content-Type': 'application/json', ...headers });
  }
  // echoKey: a hostile server that quotes the caller's key back in its error
  const msg = (rule.message || message) + (rule.echoKey ? ` (key: ${key})` : '');
  return apiError(res, rule.status, msg, { type: rule.type || type, code: rule.code === undefined ? code : rule.code,
    param: rule.param ?? null, headers });
}

function maskKey(k) {
  if (k.length <= 8) return '*'.repeat(k.length);
  return k.slice(0, 3) + '*'.repeat(Math.min(40, k.length - 7)) + k.slice(-4);
}

// ------------------------------------------------------------------------------------------------
// Request -> neutral conversation (models.mjs), or a 400 message

function contentText(content, where) {
  if (content === null || content === undefined) return { text: '', images: [] };
  if (typeof content === 'string') return { text: content, images: [] };
  if (!Array.isArray(content)) throw new Error(`Invalid type for '${where}': expected one of a string or array of objects, but got ${typeof content} instead.`);
  let text = '';
  const images = [];
  content.forEach((p, j) => {
    if (!p || typeof p !== 'object') throw new Error(`Invalid type for '${where}[${j}]': expected an object.`);
    if (p.type === 'text') {
      if (typeof p.text !== 'string') throw new Error(`Invalid type for '${where}[${j}].text': expected a string.`);
      text += (text ? '\n' : '') + p.text;
    } else if (p.type === 'image_url') {
      const url = p.image_url && p.image_url.url;
      const m = typeof url === 'string' && /^data:(image\/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/=]+)$/.exec(url);
      if (!m) throw new Error(`Invalid image in '${where}[${j}]': this emulator takes base64 data URIs of png, jpeg, gif or webp only.`);
      images.push({ media_type: m[1], data: m[2] });
    } else {
      throw new Error(`Invalid value: '${p.type}'. Supported values are: 'text' and 'image_url'.`);
    }
  });
  return { text, images };
}

function parseRequest(body) {
  if (typeof body.model !== 'string' || body.model === '') throw new Error('you must provide a model parameter');
  for (const k of Object.keys(body)) if (!KNOWN_PARAMS.has(k)) throw new Error(`Unrecognized request argument supplied: ${k}`);
  if (!Array.isArray(body.messages)) throw new Error("Missing required parameter: 'messages'.");
  if (body.messages.length === 0) throw new Error("[] is too short - 'messages'");
  const conv = { model: body.model, system: '', messages: [], tools: [], toolChoice: undefined,
    maxTokens: body.max_completion_tokens ?? body.max_tokens };
  let pending = null; // tool_call ids of the last assistant message still waiting for tool messages
  body.messages.forEach((m, i) => {
    const where = `messages[${i}]`;
    if (!m || typeof m !== 'object') throw new Error(`Invalid type for '${where}': expected an object.`);
    if (pending && pending.size > 0 && m.role !== 'tool') {
      throw new Error("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        + `'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(', ')}`);
    }
    switch (m.role) {
      case 'system':
      case 'developer': {
        const { text, images } = contentText(m.content, `${where}.content`);
        if (images.length) throw new Error(`Invalid '${where}': images are only allowed for messages with role 'user'.`);
        conv.system += (conv.system ? '\n' : '') + text;
        break;
      }
      case 'user': {
        const { text, images } = contentText(m.content, `${where}.content`);
        conv.messages.push({ role: 'user', text, images });
        break;
      }
      case 'assistant': {
        const { text } = contentText(m.content, `${where}.content`);
        const calls = [];
        if (m.tool_calls !== undefined) {
          if (!Array.isArray(m.tool_calls) || m.tool_calls.length === 0) throw new Error(`Invalid '${where}.tool_calls': empty array. Expected an array with minimum length 1.`);
          m.tool_calls.forEach((c, j) => {
            const w = `${where}.tool_calls[${j}]`;
            if (!c || typeof c.id !== 'string' || c.type !== 'function' || !c.function || typeof c.function.name !== 'string') {
              throw new Error(`Invalid '${w}': expected {id, type: "function", function: {name, arguments}}.`);
            }
            if (typeof c.function.arguments !== 'string') throw new Error(`Invalid type for '${w}.function.arguments': expected a string, but got ${typeof c.function.arguments} instead.`);
            let args;
            try { args = JSON.parse(c.function.arguments); } catch { args = undefined; }
            calls.push({ id: c.id, name: c.function.name, arguments: args, arguments_raw: c.function.arguments });
          });
        }
        if (!text && calls.length === 0 && m.content !== '') throw new Error(`Invalid '${where}': an assistant message needs content or tool_calls.`);
        conv.messages.push({ role: 'assistant', text, tool_calls: calls });
        pending = new Set(calls.map((c) => c.id));
        break;
      }
      case 'tool': {
        if (!pending || !pending.has(m.tool_call_id)) {
          throw new Error("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.");
        }
        pending.delete(m.tool_call_id);
        const { text, images } = contentText(m.content, `${where}.content`);
        if (images.length) throw new Error(`Invalid '${where}': image URLs are only allowed for messages with role 'user'.`);
        conv.messages.push({ role: 'tool', tool_call_id: m.tool_call_id, text });
        break;
      }
      default:
        throw new Error(`Invalid value: '${m.role}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'.`);
    }
  });
  if (pending && pending.size > 0) {
    throw new Error("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
      + `'tool_call_id'. The following tool_call_ids did not have response messages: ${[...pending].join(', ')}`);
  }
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Error("Invalid type for 'tools': expected an array.");
    body.tools.forEach((t, j) => {
      if (!t || t.type !== 'function' || !t.function || typeof t.function.name !== 'string') {
        throw new Error(`Invalid 'tools[${j}]': expected {type: "function", function: {name, description?, parameters?}}.`);
      }
      if (!TOOL_NAME.test(t.function.name)) throw new Error(`Invalid 'tools[${j}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`);
      const params = t.function.parameters;
      if (params !== undefined && (typeof params !== 'object' || Array.isArray(params) || params === null)) {
        throw new Error(`Invalid type for 'tools[${j}].function.parameters': expected an object.`);
      }
      conv.tools.push({ name: t.function.name, description: t.function.description, parameters: params });
    });
  }
  const tc = body.tool_choice;
  if (tc !== undefined) {
    if (tc === 'auto' || tc === 'none' || tc === 'required') conv.toolChoice = tc;
    else if (tc && tc.type === 'function' && tc.function && typeof tc.function.name === 'string') conv.toolChoice = { name: tc.function.name };
    else throw new Error("Invalid value for 'tool_choice'.");
    if (conv.tools.length === 0 && tc !== 'none') throw new Error("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.");
  }
  return conv;
}

// ------------------------------------------------------------------------------------------------
// Neutral reply -> the wire

const FINISH = { stop: 'stop', length: 'length', tool_calls: 'tool_calls', content_filter: 'content_filter',
  refusal: 'content_filter', pause: 'stop' };

function rendered(reply) {
  const calls = (reply.tool_calls || []).map((c, i) => ({
    index: i,
    id: c.id ?? `call_${hexId(24)}`,
    name: c.name,
    arguments: c.arguments_raw ?? JSON.stringify(c.arguments ?? {}),
  }));
  const finish = reply.finish ? (FINISH[reply.finish] || reply.finish) : calls.length ? 'tool_calls' : 'stop';
  return { calls, finish };
}

function usageOf(conv, reply) {
  const prompt = reply.usage?.input_tokens ?? conversationTokens(conv);
  const completion = reply.usage?.output_tokens ?? tokens(replyText(reply));
  return {
    prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function completion(id, conv, reply) {
  const { calls, finish } = rendered(reply);
  const message = { role: 'assistant', content: reply.text || (calls.length ? null : ''), refusal: null, annotations: [] };
  if (calls.length) {
    message.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  }
  const out = {
    id, object: 'chat.completion', created: Math.floor(Date.now() / 1000), model: conv.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    service_tier: 'default', system_fingerprint: 'fp_glsb_emu',
  };
  if (!reply.no_usage) out.usage = usageOf(conv, reply);
  return out;
}

async function stream(res, emu, ctx, id, conv, reply, includeUsage, headers) {
  startStream(res, headers);
  const es = new EventStream(res, ctx, () => [null, { error: { message: ctx.errorMessage || 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } }]);
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta, finish = null) => {
    const c = { id, object: 'chat.completion.chunk', created, model: conv.model, system_fingerprint: 'fp_glsb_emu',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] };
    if (includeUsage) c.usage = null;
    return c;
  };
  if (Array.isArray(reply.raw_events)) {
    for (const e of reply.raw_events) if (!(await es.event(null, e))) return;
    return es.end();
  }
  if (!(await es.event(null, chunk({ role: 'assistant', content: '', refusal: null })))) return;
  if (ctx.endless) {
    while (await es.event(null, chunk({ content: 'more '.repeat(200) })));
    return;
  }
  const n = emu.config.chunkChars;
  for (const p of pieces(reply.text || '', n)) if (!(await es.event(null, chunk({ content: p })))) return;
  const { calls, finish } = rendered(reply);
  for (const c of calls) {
    if (!(await es.event(null, chunk({ tool_calls: [{ index: c.index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] })))) return;
    for (const p of pieces(c.arguments, n)) {
      if (!(await es.event(null, chunk({ tool_calls: [{ index: c.index, function: { arguments: p } }] })))) return;
    }
  }
  if (!(await es.event(null, chunk({}, finish)))) return;
  if (includeUsage && !reply.no_usage) {
    const u = { id, object: 'chat.completion.chunk', created, model: conv.model, system_fingerprint: 'fp_glsb_emu', choices: [], usage: usageOf(conv, reply) };
    if (!(await es.event(null, u))) return;
  }
  if (!(await es.event(null, '[DONE]'))) return;
  es.end();
}

// ------------------------------------------------------------------------------------------------

function models(emu) {
  const ids = [RULES_MODEL, NO_TOOLS_MODEL, ...emu.scripts.names().map((n) => `script:${n}`)];
  return ids.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'glsb-emulator' }));
}

function bearer(req) {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer\s+(.+)$/i.exec(h);
  return m ? m[1].trim() : '';
}

export async function handle(emu, req, res, url) {
  const rid = requestId();
  res.setHeader('x-request-id', rid);
  const path = url.pathname.replace(/^\/v1(?=\/)/, '');
  const raw = await readBody(req).catch(() => null);
  if (raw === null) return;
  const key = bearer(req);
  if (key === null) {
    return apiError(res, 401, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).");
  }
  if (!emu.keys.includes(key)) {
    return apiError(res, 401, `Incorrect API key provided: ${maskKey(key)}. You can find your API key at https://platform.openai.com/account/api-keys.`, { code: 'invalid_api_key' });
  }
  if (req.method === 'GET' && path === '/models') return sendJson(res, 200, { object: 'list', data: models(emu) });
  let g;
  if (req.method === 'GET' && (g = path.match(/^\/models\/(.+)$/))) {
    const m = models(emu).find((x) => x.id === decodeURIComponent(g[1]));
    return m ? sendJson(res, 200, m) : apiError(res, 404, `The model '${decodeURIComponent(g[1])}' does not exist`, { code: 'model_not_found', param: 'model' });
  }
  if (!(req.method === 'POST' && path === '/chat/completions')) {
    return apiError(res, 404, `Invalid URL (${req.method} ${url.pathname})`);
  }
  let body;
  try {
    body = JSON.parse(raw.toString('utf8'));
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('not an object');
  } catch {
    return apiError(res, 400, 'We could not parse the JSON body of your request. (HINT: This likely means you aren\'t using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)');
  }
  const model = typeof body.model === 'string' ? body.model : '';
  emu.record({ path: url.pathname, model, stream: body.stream === true, api_key: key, bytes: raw.length,
    headers: { 'content-type': req.headers['content-type'], accept: req.headers.accept, 'user-agent': req.headers['user-agent'],
      'openai-organization': req.headers['openai-organization'], 'openai-project': req.headers['openai-project'] },
    body });
  const fault = await applyFault(emu, req, res, { path: url.pathname, model }, (rule) => faultStatus(res, rule, key));
  if (fault.handled) return;
  const ctx = fault.ctx;

  let conv;
  try {
    conv = parseRequest(body);
  } catch (e) {
    return apiError(res, 400, e.message, { param: null });
  }
  if (model === NO_TOOLS_MODEL && conv.tools.length > 0) {
    // vLLM's answer when it was started without a tool-call parser
    return apiError(res, 400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      { type: 'BadRequestError', code: 400 });
  }
  let reply;
  if (model.startsWith('script:')) {
    const name = model.slice(7);
    if (!emu.scripts.has(name)) return apiError(res, 404, `The model '${model}' does not exist or you do not have access to it.`, { code: 'model_not_found' });
    reply = emu.scripts.next(name);
    if (!reply) return apiError(res, 500, `emulator: script ${name} has no reply left for this request`, { type: 'server_error' });
    if (reply.rules) reply = { ...reply, ...rulesReply(conv) };
  } else if (model === RULES_MODEL || model === NO_TOOLS_MODEL) {
    reply = rulesReply(conv);
  } else {
    return apiError(res, 404, `The model '${model}' does not exist or you do not have access to it.`, { code: 'model_not_found' });
  }
  if (reply.error) return faultStatus(res, { status: 500, ...reply.error }, key);
  const inTokens = conversationTokens(conv);
  if (ctx.contextLength || inTokens > (reply.context_window || emu.config.contextWindow)) {
    const window = reply.context_window || emu.config.contextWindow;
    return apiError(res, 400, `This model's maximum context length is ${window} tokens. However, your messages resulted in ${inTokens} tokens. Please reduce the length of the messages.`,
      { param: 'messages', code: 'context_length_exceeded' });
  }
  if (reply.delay_ms) await new Promise((r) => setTimeout(r, reply.delay_ms));
  if (reply.event_delay_ms) ctx.eventDelayMs = reply.event_delay_ms;
  if (reply.cut_after_events !== undefined) ctx.cutAfterEvents = reply.cut_after_events;
  if (reply.stream_error_after_events !== undefined) ctx.errorAfterEvents = reply.stream_error_after_events;
  const id = `chatcmpl-${hexId(29)}`;
  const headers = { 'openai-processing-ms': '1', 'x-request-id': rid };
  if (body.stream === true) {
    const includeUsage = !!(body.stream_options && body.stream_options.include_usage);
    return stream(res, emu, ctx, id, conv, reply, includeUsage, headers);
  }
  if (reply.raw_body !== undefined) {
    return send(res, 200, typeof reply.raw_body === 'string' ? reply.raw_body : JSON.stringify(reply.raw_body), { 'Content-Type': 'application/json' });
  }
  return sendJson(res, 200, completion(id, conv, reply), headers);
}
