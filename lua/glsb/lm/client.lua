-- glsb.lm.client: what the model clients share. The normalised request and response (docs/lm.md), the
-- client class and its invoke (option checks, retries through glsb.retry, a GenAI span, the API key kept
-- out of every error, log line, span and tostring), one HTTP attempt with an SSE or buffered body, and
-- glsb.lm.fn. The wire formats live in glsb.lm.openai and glsb.lm.anthropic.
local errors = require "glsb.errors"
local options = require "glsb.options"
local retry = require "glsb.retry"
local log = require "glsb.log"
local redact = require "glsb.trace.redact"

local M = {}

M.STAGE = "lm"

-- An answer bigger than this (text and tool arguments together) ends the call: a server that streams
-- forever costs this much host memory, no more.
M.MAX_RESPONSE_BYTES = 16 * 1024 * 1024
-- An error answer is read up to this many bytes (core.http error_body); an API's error is a few hundred.
M.ERROR_BODY = 64 * 1024
-- One SSE event at most (core.http max_frame): a chunk carries a few tokens.
M.MAX_EVENT = 4 * 1024 * 1024

-- The official SDKs' policy (openai-node and anthropic-sdk-typescript client.ts: 2 retries, 0.5 s doubling
-- to at most 8 s, up to 25 % jitter), the wait a server asks for honoured up to a minute.
M.RETRY = { attempts = 3, base_delay = 0.5, factor = 2, max_delay = 8, jitter = 0.25, max_retry_after = 60 }

-- The API key of each client, out of the object: it is in no field a dump or errors.compact could show.
local SECRETS = setmetatable({}, { __mode = "k" })

function M.set_secret(client, key)
  SECRETS[client] = key
  require("glsb.secrets").register(key) -- scrubbed from every error, log line and span (glsb.secrets)
end
function M.secret(client) return SECRETS[client] end

-- scrub(client, s) -> s with every secret glsb.secrets knows (the client's key among them: set_secret
-- registers it) and URL credentials and query values replaced by REDACTED. glsb.secrets is the one
-- redaction point: no key is scrubbed here that it would not scrub everywhere else.
function M.scrub(_client, s)
  if s == nil then return nil end
  return redact.text(tostring(s)) -- glsb.secrets' scrub, then URLs
end

---------------------------------------------------------------------------------------------------
-- The normalised request

local REQUEST = {
  system = { "string", "system prompt" },
  messages = { "table", "the conversation: {role, content, tool_calls, tool_call_id, is_error}" },
  tools = { "table", "tools the model may call: {name, description, parameters}" },
  tool_choice = { "string|table", "`auto`, `none`, `required` or `{name = ...}`" },
  max_tokens = { "count", "most tokens of the answer" },
  temperature = { "number", "sampling temperature" },
  stop = { "string_list", "stop sequences" },
}
M.REQUEST = REQUEST

local ROLES = { user = true, assistant = true, tool = true, system = true }

-- content(c, where) -> a string, or an array of parts {type = "text", text} | {type = "image",
-- media_type, data (bytes)}
local function check_content(c, where)
  if c == nil or type(c) == "string" then return c end
  if type(c) ~= "table" then
    options.arg_error("%s: content must be a string or an array of parts, got %s", where, type(c))
  end
  local out = {}
  for j, p in ipairs(c) do
    local w = string.format("%s[%d]", where, j)
    if type(p) ~= "table" then options.arg_error("%s: a part must be a table, got %s", w, type(p)) end
    if p.type == "text" then
      if type(p.text) ~= "string" then options.arg_error("%s: text must be a string", w) end
      out[#out + 1] = { type = "text", text = p.text }
    elseif p.type == "image" then
      if type(p.data) ~= "string" or p.data == "" then options.arg_error("%s: data must be the image's bytes", w) end
      if type(p.media_type) ~= "string" or not p.media_type:match("^image/[%w.+-]+$") then
        options.arg_error("%s: media_type must be an image MIME type (image/png, image/jpeg, ...)", w)
      end
      out[#out + 1] = { type = "image", media_type = p.media_type, data = p.data, name = p.name }
    else
      options.arg_error("%s: type must be \"text\" or \"image\", got %s", w, tostring(p.type))
    end
  end
  return out
end

local function check_tool_calls(calls, where)
  if calls == nil then return nil end
  if type(calls) ~= "table" then options.arg_error("%s: tool_calls must be an array", where) end
  local out = {}
  for j, c in ipairs(calls) do
    local w = string.format("%s.tool_calls[%d]", where, j)
    if type(c) ~= "table" or type(c.id) ~= "string" or type(c.name) ~= "string" then
      options.arg_error("%s: a tool call needs id and name (strings)", w)
    end
    if c.arguments ~= nil and type(c.arguments) ~= "table" then
      options.arg_error("%s: arguments must be a table", w)
    end
    if c.arguments_json ~= nil and type(c.arguments_json) ~= "string" then
      options.arg_error("%s: arguments_json must be a string", w)
    end
    out[#out + 1] = { id = c.id, name = c.name, arguments = c.arguments, arguments_json = c.arguments_json }
  end
  return #out > 0 and out or nil
end

-- check_request(req, what) -> a checked copy (misuse: an argument error at the caller's line).
function M.check_request(req, what)
  if type(req) ~= "table" then options.arg_error("%s: the request must be a table, got %s", what, type(req)) end
  options.check(req, REQUEST, what)
  if type(req.messages) ~= "table" or #req.messages == 0 then
    options.arg_error("%s: messages must be a non-empty array", what)
  end
  local out = { system = req.system, tools = {}, tool_choice = req.tool_choice, max_tokens = req.max_tokens,
    temperature = req.temperature, stop = req.stop, messages = {} }
  for i, m in ipairs(req.messages) do
    local where = string.format("%s: messages[%d]", what, i)
    if type(m) ~= "table" then options.arg_error("%s must be a table", where) end
    if not ROLES[m.role] then
      options.arg_error("%s: role must be user, assistant, tool or system, got %s", where, tostring(m.role))
    end
    local msg = { role = m.role, content = check_content(m.content, where) }
    if m.role == "assistant" then
      msg.tool_calls = check_tool_calls(m.tool_calls, where)
      msg.provider_blocks = m.provider_blocks
    elseif m.role == "tool" then
      if type(m.tool_call_id) ~= "string" then options.arg_error("%s: tool_call_id must be a string", where) end
      msg.tool_call_id, msg.name, msg.is_error = m.tool_call_id, m.name, m.is_error == true
    end
    if m.role == "system" then
      -- a system message anywhere is the system prompt, added to any given
      local text = type(msg.content) == "string" and msg.content or M.text_of(msg.content)
      out.system = out.system and (out.system .. "\n\n" .. text) or text
    else
      out.messages[#out.messages + 1] = msg
    end
  end
  for i, t in ipairs(req.tools or {}) do
    local where = string.format("%s: tools[%d]", what, i)
    if type(t) ~= "table" or type(t.name) ~= "string" or not t.name:match("^[%w_-]+$") or #t.name > 64 then
      options.arg_error("%s: name must be 1..64 of A-Z a-z 0-9 _ -", where)
    end
    if t.description ~= nil and type(t.description) ~= "string" then
      options.arg_error("%s: description must be a string", where)
    end
    if t.parameters ~= nil and type(t.parameters) ~= "table" then
      options.arg_error("%s: parameters must be a JSON Schema table", where)
    end
    out.tools[#out.tools + 1] = { name = t.name, description = t.description, parameters = t.parameters }
  end
  local tc = req.tool_choice
  local named = type(tc) == "table" and type(tc.name) == "string"
  if tc ~= nil and not (tc == "auto" or tc == "none" or tc == "required" or named) then
    options.arg_error("%s: tool_choice must be auto, none, required or {name = ...}", what)
  end
  return out
end

-- text_of(content) -> the text of a content (a string, or the text parts joined)
function M.text_of(content)
  if type(content) == "string" then return content end
  local out = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then out[#out + 1] = p.text end
  end
  return table.concat(out, "\n")
end

-- images_of(content) -> the image parts of a content
function M.images_of(content)
  local out = {}
  if type(content) ~= "table" then return out end
  for _, p in ipairs(content) do
    if p.type == "image" then out[#out + 1] = p end
  end
  return out
end

---------------------------------------------------------------------------------------------------
-- The normalised response

local Response = {}
Response.__index = Response
M.Response = Response

local FINISH = { stop = true, tool_calls = true, length = true, content_filter = true, refusal = true,
  pause = true, context_length = true, other = true }
M.FINISH = FINISH

-- response{text, tool_calls, finish_reason, provider_finish_reason, usage, model, id, request_id,
-- provider, provider_blocks} -> Response. tool_calls: {id, name, arguments (a table, or nil when the
-- model's JSON was not an object), arguments_json (as the model wrote it), error (why arguments is nil)}.
function M.response(t)
  local calls = t.tool_calls or {}
  local finish = t.finish_reason
  if #calls > 0 and (finish == nil or finish == "stop") then finish = "tool_calls" end
  if not FINISH[finish] then finish = finish == nil and "stop" or "other" end
  local r = setmetatable({
    text = t.text or "", tool_calls = calls, finish_reason = finish, provider_finish_reason = t.provider_finish_reason,
    usage = t.usage, model = t.model, id = t.id, request_id = t.request_id, provider = t.provider,
  }, Response)
  r.message = { role = "assistant", content = r.text, tool_calls = #calls > 0 and calls or nil,
    provider_blocks = t.provider_blocks }
  return r
end

-- usage(input, output[, extra]) -> {input_tokens, output_tokens, total_tokens, ...} or nil
function M.usage(input, output, extra)
  input, output = M.int(input), M.int(output)
  if not input and not output then return nil end
  input, output = input or 0, output or 0
  local u = { input_tokens = input, output_tokens = output, total_tokens = input + output }
  for k, v in pairs(extra or {}) do u[k] = v end
  return u
end

-- A tool call's arguments from the JSON the model wrote: a table for a JSON object, else nil and why.
function M.arguments(json)
  if json == nil or json:match("^%s*$") then return {}, nil end
  local v = require("glsb.http").decode_json(json)
  if type(v) ~= "table" or not json:match("^%s*{") then
    local snippet = #json > 120 and (json:sub(1, 120) .. "...") or json
    return nil, "the arguments are not a JSON object: " .. snippet
  end
  return v, nil
end

function Response.__tostring(self)
  local names = {}
  for _, c in ipairs(self.tool_calls) do names[#names + 1] = c.name end
  local text = self.text
  if #text > 80 then text = text:sub(1, 77) .. "..." end
  local u = self.usage
  text = text:gsub("[%c\\\"]", function(c)
    return ({ ["\n"] = "\\n", ["\t"] = "\\t", ["\\"] = "\\\\", ['"'] = '\\"' })[c] or string.format("\\%03d", c:byte())
  end)
  return string.format('lm.Response(%s, text="%s"%s%s)', self.finish_reason, text,
    #names > 0 and (", tool_calls=[" .. table.concat(names, ", ") .. "]") or "",
    u and string.format(", usage=%d in/%d out", u.input_tokens or 0, u.output_tokens or 0) or "")
end

---------------------------------------------------------------------------------------------------
-- Errors: LMError, stage "lm", with reason, http_status, request_id, error_type, error_code

-- lm_error(client, reason, message, cause, fields) -> an LMError (not raised). The message and the
-- cause's texts are scrubbed of the client's key here, the one place an LMError is made.
function M.error(client, reason, message, cause, fields)
  if type(cause) == "table" and not errors.is_error(cause) then
    for _, k in ipairs({ "message", "body" }) do
      if type(rawget(cause, k)) == "string" then cause[k] = M.scrub(client, cause[k]) end
    end
  end
  local rid = fields and fields.request_id
  local text = string.format("%s: %s%s", client and client.name or "lm", message,
    rid and string.format(" (request id %s)", rid) or "")
  local e = errors.new(errors.LMError, M.STAGE, M.scrub(client, text), cause)
  e.reason = reason
  for k, v in pairs(fields or {}) do e[k] = v end
  return e
end

function M.raise(...) error(M.error(...), 0) end

-- What the reason of an HTTP failure is, by status (the context length is found by the wire module).
function M.reason_of_status(status)
  if status == 401 or status == 403 then return "auth" end
  if status == 404 then return "not_found" end
  if status == 408 or status == 504 then return "timeout" end
  if status == 429 then return "rate_limit" end
  if status == 413 then return "request_too_large" end
  if status >= 500 then return "server" end
  return "bad_request"
end

---------------------------------------------------------------------------------------------------
-- The client class

local Client = {}
Client.__index = Client
M.Client = Client

function M.is_client(x)
  return type(x) == "table" and x._lm == true and type(x.invoke) == "function"
end

Client._lm = true

-- Options every HTTP client takes (glsb.lm.openai and glsb.lm.anthropic add their own).
M.COMMON = {
  model = { "string", "model id (required)" },
  api_key = { "string", "the API key (default: the provider's environment variable)" },
  base_url = { "string", "API base URL" },
  headers = { "string_map", "extra request headers" },
  stream = { "boolean", "stream the answer over SSE (false: one JSON body)", default = "true" },
  max_tokens = { "count", "most tokens of an answer, unless the request says" },
  temperature = { "number", "sampling temperature, unless the request says" },
  timeout = { "seconds", "whole request, per attempt; `<= 0`: none", default = "600" },
  connect_timeout = { "seconds", "connection set-up", default = "10" },
  idle_timeout = { "seconds", "the answer stops moving for this long: failed, retried" },
  retry = { "boolean|table", "`false`: one attempt; a table: retry policy fields over the default" },
  extra_body = { "table", "fields added to every request body (the server's own parameters)" },
  capture_content = { "boolean", "prompts and answers in spans (GenAI content capture)",
    default = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" },
  max_response_bytes = { "count", "the most text and tool arguments one answer may hold", default = "16 MiB" },
}

M.INVOKE = {
  on_token = { "function", "called with each piece of text as it streams (and the attempt number)" },
  stream = { "boolean", "override the client's `stream` for this call" },
  timeout = { "seconds", "override the client's `timeout` for this call" },
}

local function env(name)
  local v = os.getenv(name)
  if v == nil then return nil end
  v = v:gsub("^%s+", ""):gsub("%s+$", "")
  return v ~= "" and v or nil
end
M.env = env

-- new_client(cls, opts, schema, what) -> a client with the options checked (model required).
function M.new_client(cls, opts, schema, what)
  opts = options.check(opts, schema, what)
  if type(opts.model) ~= "string" or opts.model == "" then
    options.arg_error("%s: model is required (a string)", what)
  end
  local self = setmetatable({}, cls)
  for k, v in pairs(opts) do
    if k ~= "api_key" then self[k] = v end
  end
  if self.stream == nil then self.stream = true end
  self.timeout = self.timeout or 600
  self.connect_timeout = self.connect_timeout or 10
  self.max_response_bytes = self.max_response_bytes or M.MAX_RESPONSE_BYTES
  if self.capture_content == nil then
    local c = (env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") or ""):lower()
    self.capture_content = c == "true" or c == "span_only" or c == "span_and_event"
  end
  local policy = {}
  for k, v in pairs(M.RETRY) do policy[k] = v end
  if opts.retry == false then
    policy.attempts = 1
  elseif type(opts.retry) == "table" then
    for k, v in pairs(opts.retry) do policy[k] = v end
  end
  self.retry = policy
  return self
end

function Client:__tostring()
  return string.format("%s{model = %q%s}", self.name, self.model,
    self.base_url and string.format(", base_url = %q", redact.url(self.base_url)) or "")
end

---------------------------------------------------------------------------------------------------
-- Spans (OpenTelemetry GenAI conventions: an inference span "chat <model>", kind client)

local CONTENT_CAP = 32 * 1024

local function capped_json(v)
  local ok, s = pcall(require("glsb.http").encode_json, v)
  if not ok or type(s) ~= "string" then return nil end
  if #s > CONTENT_CAP then s = s:sub(1, CONTENT_CAP) .. "...[cut]" end
  return s
end

-- The conversation without image bytes (a placeholder names each), for content capture.
local function content_view(req)
  local out = {}
  for _, m in ipairs(req.messages) do
    local parts = {}
    if type(m.content) == "string" then
      parts[1] = { type = "text", content = m.content }
    else
      for _, p in ipairs(m.content or {}) do
        parts[#parts + 1] = p.type == "text" and { type = "text", content = p.text }
          or { type = "blob", mime_type = p.media_type, content = string.format("[%d bytes]", #p.data) }
      end
    end
    for _, c in ipairs(m.tool_calls or {}) do
      parts[#parts + 1] = { type = "tool_call", id = c.id, name = c.name, arguments = c.arguments }
    end
    out[#out + 1] = { role = m.role, parts = parts }
  end
  return out
end

local function start_span(self, req)
  local trace = require "glsb.trace"
  if not trace.enabled() then return nil end
  local attrs = {
    ["gen_ai.operation.name"] = "chat", ["gen_ai.provider.name"] = self.provider_name,
    ["gen_ai.request.model"] = self.model,
    ["gen_ai.request.max_tokens"] = req.max_tokens or self.max_tokens,
    ["gen_ai.request.temperature"] = req.temperature or self.temperature,
  }
  local authority = (self.base_url or ""):match("^%a[%w+.-]*://([^/?#]*)") or ""
  authority = authority:gsub("^.*@", "")
  local host, port = authority:match("^(.*):(%d+)$")
  host = host or authority
  if host ~= "" then
    attrs["server.address"] = host
    attrs["server.port"] = tonumber(port)
  end
  if self.capture_content then
    attrs["gen_ai.system_instructions"] = req.system and capped_json({ { type = "text", content = req.system } })
    attrs["gen_ai.input.messages"] = capped_json(content_view(req))
  end
  return trace.start_span("chat " .. self.model, { kind = "client", attributes = attrs })
end

local function end_span(self, span, ok, res)
  if not span then return end
  if ok then
    span:set_attribute("gen_ai.response.finish_reasons", { res.provider_finish_reason or res.finish_reason })
    if res.model then span:set_attribute("gen_ai.response.model", res.model) end
    if res.id then span:set_attribute("gen_ai.response.id", M.scrub(self, res.id)) end
    if res.usage then
      span:set_attribute("gen_ai.usage.input_tokens", res.usage.input_tokens)
      span:set_attribute("gen_ai.usage.output_tokens", res.usage.output_tokens)
    end
    if self.capture_content then
      local parts = { { type = "text", content = res.text } }
      for _, c in ipairs(res.tool_calls) do
        parts[#parts + 1] = { type = "tool_call", id = c.id, name = c.name, arguments = c.arguments }
      end
      local s = capped_json({ { role = "assistant", parts = parts, finish_reason = res.finish_reason } })
      if s then span:set_attribute("gen_ai.output.messages", s) end
    end
  else
    local e = res
    local msg = M.scrub(self, errors.is_error(e) and tostring(e) or tostring(e and e.message or e))
    span:set_attribute("error.type", errors.is_error(e) and (e.reason or e.class) or "LuaError")
    span:add_event("exception", { ["exception.type"] = errors.is_error(e) and e.class or "LuaError",
      ["exception.message"] = msg })
    span:set_status("error", msg)
  end
  span:finish()
end

-- Client:invoke(request, opts) -> Response. Raises LMError (stage "lm") when the model cannot be reached
-- or answers with an error; retries what is transient (429, 5xx, a dropped connection, a cut stream).
function Client:invoke(request, opts)
  local what = self.name .. ":invoke"
  opts = options.check(opts, M.INVOKE, what)
  local req = M.check_request(request, what)
  local call = { stream = self.stream, timeout = self.timeout, on_token = opts.on_token }
  if opts.stream ~= nil then call.stream = opts.stream end
  if opts.timeout ~= nil then call.timeout = opts.timeout end
  local span = start_span(self, req)
  local attempt = 0
  local policy = setmetatable({
    on_retry = function(err, n, delay)
      log.warn(string.format("%s; attempt %d failed, retrying in %.1f s",
        M.scrub(self, errors.is_error(err) and err.message or tostring(err)), n, delay))
    end,
  }, { __index = self.retry })
  local function body()
    return retry.call(function()
      attempt = attempt + 1
      call.attempt = attempt
      return self:_call(req, call)
    end, policy)
  end
  local ok, res
  if span then
    ok, res = pcall(require("glsb.trace").with_span, span, body)
  else
    ok, res = pcall(body)
  end
  end_span(self, span, ok, res)
  if not ok then error(res, 0) end
  res.attempts = attempt
  return res
end

---------------------------------------------------------------------------------------------------
-- One HTTP attempt

local function header(headers, name)
  return type(headers) == "table" and headers[name] or nil
end
M.header = header

-- post(client, spec, call) -> decoded JSON (buffered) or whatever spec.finish() returns (streamed).
-- spec: url, headers, body (a table), stream (boolean), on_event(ev) -> true when the stream is complete
-- (streamed), complete_at_end() -> true when a stream that ended without its last event still holds a
-- whole answer, finish(request_id) -> the response (streamed), parse_error(status, headers, json, body) -> {message,
-- type, code, request_id, context_length}, request_id(headers).
function M.post(client, spec, call)
  local http = require "glsb.http"
  local body = http.encode_json(spec.body)
  local headers = { ["Content-Type"] = "application/json",
    Accept = spec.stream and "text/event-stream" or "application/json",
    ["User-Agent"] = "glsb/" .. require("glsb.constants").VERSION }
  for k, v in pairs(spec.headers) do headers[k] = v end
  for k, v in pairs(client.headers or {}) do headers[k] = tostring(v) end
  local state = { status = nil, complete = false, failed = nil }
  local req = {
    method = "POST", url = spec.url, headers = headers, body = body,
    timeout = call.timeout > 0 and call.timeout or 0,
    connect_timeout = client.connect_timeout > 0 and client.connect_timeout or nil,
    idle_timeout = client.idle_timeout, error_body = M.ERROR_BODY, max_body = client.max_response_bytes + M.ERROR_BODY,
  }
  if spec.stream then
    req.framer, req.max_frame = "sse", M.MAX_EVENT
    req.on_headers = function(status) state.status = status end
    req.on_frame = function(ev)
      if state.status ~= 200 then return end
      local ok, done = pcall(spec.on_event, ev)
      if not ok then
        state.failed = done
        return false
      end
      if done then
        state.complete = true
        return false
      end
    end
  end
  local res = http.request(req)
  if state.failed then error(state.failed, 0) end
  local rid = spec.request_id(res.headers)
  if res.error and not state.complete then
    local e = res.error
    local what = e.timeout and "the request timed out" or "the connection failed"
    if spec.stream and state.status == 200 then what = "the stream broke" end
    M.raise(client, e.timeout and "timeout" or "transport",
      string.format("%s: %s (%s, %s)", what, tostring(e.message), tostring(e.code), tostring(e.phase)), e,
      { request_id = rid })
  end
  local status = res.status
  if type(status) ~= "number" or status < 200 or status >= 300 then
    local raw = res.body or ""
    local json = http.decode_json(raw)
    local info = spec.parse_error(status, res.headers, type(json) == "table" and json or nil, raw)
    local cause = errors.http_failure(status, res.headers, raw)
    if status >= 500 and errors.classify(cause) == nil then cause.code = "SERVER_ERROR" end
    local reason = info.context_length and "context_length" or M.reason_of_status(status)
    local message = info.context_length
      and ("the conversation is longer than the model's context window: " .. tostring(info.message))
      or string.format("%d%s: %s", status, errors.REASON[status] and (" " .. errors.REASON[status]) or "",
        tostring(info.message))
    M.raise(client, reason, message, cause, { http_status = status, request_id = info.request_id or rid,
      error_type = info.type, error_code = info.code })
  end
  if spec.stream then
    if not state.complete and not spec.complete_at_end() then
      M.raise(client, "stream", "the stream ended before the answer was complete", { phase = "receive",
        code = "PARTIAL_FILE", message = "the event stream ended early", retry_safe = false }, { request_id = rid })
    end
    return spec.finish(rid)
  end
  local json = http.decode_json(res.body or "")
  if type(json) ~= "table" then
    M.raise(client, "bad_response", "the answer is not a JSON object: " .. (res.body or ""):sub(1, 200), nil,
      { request_id = rid })
  end
  return json, rid
end

-- run(client, spec, call, parse) -> Response: one attempt, streamed (spec.finish builds the response) or
-- buffered (parse(client, json, request_id) does), the buffered answer held to max_response_bytes too.
function M.run(client, spec, call, parse)
  if call.stream then return M.post(client, spec, call) end
  local json, rid = M.post(client, spec, call)
  local r = parse(client, json, rid)
  local n = #r.text
  for _, c in ipairs(r.tool_calls) do n = n + #c.arguments_json end
  if n > client.max_response_bytes then
    M.raise(client, "response_too_large", string.format("the answer passed max_response_bytes (%d bytes)",
      client.max_response_bytes), nil, { request_id = rid })
  end
  if call.on_token and r.text ~= "" then call.on_token(r.text, call.attempt) end
  return r
end

function M.str(v) return type(v) == "string" and v or nil end
-- cjson reads every JSON number as a float: 12.0 is the integer 12
function M.int(v) return type(v) == "number" and math.tointeger(v) or nil end

-- budget(client, call) -> b: b.token(s) counts streamed text and hands it to on_token, b.add(n) counts
-- other bytes (tool arguments); both raise once the answer passes max_response_bytes.
function M.budget(client, call)
  local b = { n = 0 }
  function b.add(n)
    b.n = b.n + n
    if b.n > client.max_response_bytes then
      M.raise(client, "response_too_large", string.format(
        "the answer passed max_response_bytes (%d bytes); the stream was stopped", client.max_response_bytes))
    end
  end
  function b.token(s)
    b.add(#s)
    if call.on_token then call.on_token(s, call.attempt) end
  end
  return b
end

---------------------------------------------------------------------------------------------------
-- glsb.lm.fn: a Lua function as the model

local FnClient = setmetatable({}, { __index = Client })
FnClient.__index = FnClient
FnClient.__tostring = function(self) return string.format("glsb.lm.fn{name = %q}", self.model) end

local FN_OPTIONS = {
  name = { "string", "what spans and errors call it", default = "fn" },
  model = { "string", "the model name spans report", default = "the name" },
}

-- A function's answer: a string (the text), or a table {text, tool_calls = {{id?, name, arguments |
-- arguments_json}}, finish_reason, usage = {input_tokens, output_tokens}}.
local function fn_response(self, r)
  if type(r) == "string" then return M.response({ text = r, provider = "fn", model = self.model }) end
  if type(r) ~= "table" then
    M.raise(self, "bad_response", "the function must return a string or a response table, got " .. type(r))
  end
  if r.text ~= nil and type(r.text) ~= "string" then M.raise(self, "bad_response", "text must be a string") end
  local calls = {}
  for i, c in ipairs(type(r.tool_calls) == "table" and r.tool_calls or {}) do
    if type(c) ~= "table" or type(c.name) ~= "string" then
      M.raise(self, "bad_response", string.format("tool_calls[%d] needs a name (a string)", i))
    end
    local args, why = c.arguments, nil
    local json = c.arguments_json
    if type(args) ~= "table" then
      if type(json) == "string" then
        args, why = M.arguments(json)
      else
        args = {}
      end
    end
    if json == nil then json = require("glsb.http").encode_json(args or {}) end
    calls[#calls + 1] = { id = type(c.id) == "string" and c.id or string.format("call_%d_%d", self._calls, i),
      name = c.name, arguments = args, arguments_json = json, error = why }
  end
  local u = type(r.usage) == "table" and M.usage(r.usage.input_tokens, r.usage.output_tokens) or nil
  local finish = type(r.finish_reason) == "string" and r.finish_reason or nil
  return M.response({ text = r.text, tool_calls = calls, finish_reason = finish, provider_finish_reason = finish,
    usage = u, provider = "fn", model = self.model })
end

function FnClient:_call(req, call)
  self._calls = self._calls + 1
  local ok, r = pcall(self.fn, req, { on_token = call.on_token or function() end, attempt = call.attempt })
  if not ok then
    if errors.is_error(r) or retry.is_cancellation(r) then error(r, 0) end
    M.raise(self, "fn", "the function raised: " .. tostring(r), r)
  end
  return fn_response(self, r)
end

-- fn(f, opts) -> a client whose model is f(request, {on_token, attempt}).
function M.fn(f, opts)
  if type(f) ~= "function" then options.arg_error("glsb.lm.fn: expected a function, got %s", type(f)) end
  opts = options.check(opts, FN_OPTIONS, "glsb.lm.fn")
  local self = setmetatable({ fn = f, name = "glsb.lm.fn", provider_name = opts.name or "fn",
    model = opts.model or opts.name or "fn", stream = false, timeout = 0, _calls = 0, capture_content = false,
    retry = { attempts = 1 } }, FnClient)
  return self
end

return M
