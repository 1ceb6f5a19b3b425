-- glsb.lm.anthropic: the Anthropic Messages API with tool_use / tool_result blocks. Wire facts:
-- docs/protocols/llm.md.
--
--   POST {base_url}/v1/messages   x-api-key: <key>, anthropic-version: <date>
--   (stream: SSE message_start, content_block_start/delta/stop..., message_delta, message_stop)
local client = require "glsb.lm.client"
local options = require "glsb.options"

local M = {}

M.DEFAULT_BASE_URL = "https://api.anthropic.com"
-- The version the API reference and anthropic-sdk-python send; the wire shapes used here are its own.
M.DEFAULT_VERSION = "2023-06-01"
-- The API requires max_tokens; this is what a request gets when neither it nor the client says.
M.DEFAULT_MAX_TOKENS = 4096

local Anthropic = setmetatable({}, { __index = client.Client })
Anthropic.__index = Anthropic
Anthropic.__tostring = client.Client.__tostring
M.Anthropic = Anthropic

M.OPTIONS = options.merge(client.COMMON, {
  api_key = { "string", "sent as `x-api-key`; default `ANTHROPIC_API_KEY`" },
  base_url = { "string", "default `ANTHROPIC_BASE_URL`, else https://api.anthropic.com" },
  anthropic_version = { "string", "the `anthropic-version` header", default = M.DEFAULT_VERSION },
  beta = { "string_list", "`anthropic-beta` features" },
  max_tokens = { "count", "most tokens of an answer (the API requires one)", default = tostring(M.DEFAULT_MAX_TOKENS) },
})

function M.new(opts)
  local self = client.new_client(Anthropic, opts, M.OPTIONS, "glsb.lm.anthropic")
  self.name, self.provider_name = "glsb.lm.anthropic", "anthropic"
  self.base_url = (self.base_url or client.env("ANTHROPIC_BASE_URL") or M.DEFAULT_BASE_URL):gsub("/+$", "")
  local key = (opts or {}).api_key or client.env("ANTHROPIC_API_KEY")
  if not key then client.raise(self, "auth", "no API key: pass api_key or set ANTHROPIC_API_KEY") end
  client.set_secret(self, key)
  self.anthropic_version = self.anthropic_version or M.DEFAULT_VERSION
  self.max_tokens = self.max_tokens or M.DEFAULT_MAX_TOKENS
  return self
end

---------------------------------------------------------------------------------------------------
-- Request: the normalised conversation -> messages of user and assistant turns

-- every string sent is valid UTF-8: cjson writes bytes as they are, and an API refuses the request
local utf8clean = require("glsb.codec").repair_utf8

local function image_block(p)
  return { type = "image", source = { type = "base64", media_type = p.media_type,
    data = require("glsb.codec").b64encode(p.data) } }
end

local function blocks_of(c)
  if c == nil then return {} end
  if type(c) == "string" then return c ~= "" and { { type = "text", text = utf8clean(c) } } or {} end
  local out = {}
  for _, p in ipairs(c) do
    if p.type == "text" then
      if p.text ~= "" then out[#out + 1] = { type = "text", text = utf8clean(p.text) } end
    else
      out[#out + 1] = image_block(p)
    end
  end
  return out
end

-- An object for tool_use.input (the API takes a JSON object, never a string).
local function input_of(c)
  if type(c.arguments) == "table" then return c.arguments end
  local args = c.arguments_json and client.arguments(c.arguments_json)
  return args or {}
end

local function is_empty(t) return next(t) == nil end

local function wire_messages(req)
  local out = {}
  -- Consecutive turns of one role are one turn; tool results open the user turn that follows the
  -- assistant's tool_use blocks, before any text (the API rejects them anywhere else).
  local function push(role, blocks)
    local last = out[#out]
    if last and last.role == role then
      for _, b in ipairs(blocks) do last.content[#last.content + 1] = b end
    else
      out[#out + 1] = { role = role, content = blocks }
    end
  end
  for _, m in ipairs(req.messages) do
    if m.role == "user" then
      local blocks = blocks_of(m.content)
      if #blocks == 0 then blocks = { { type = "text", text = "(empty)" } } end
      push("user", blocks)
    elseif m.role == "assistant" then
      local blocks
      if type(m.provider_blocks) == "table" and m.provider_blocks.anthropic then
        blocks = m.provider_blocks.anthropic -- exactly what the API sent (thinking signatures included)
      else
        blocks = blocks_of(m.content)
        for _, c in ipairs(m.tool_calls or {}) do
          local input = input_of(c)
          blocks[#blocks + 1] = { type = "tool_use", id = c.id, name = c.name,
            input = is_empty(input) and {} or input }
        end
      end
      if #blocks == 0 then blocks = { { type = "text", text = "(no answer)" } } end
      push("assistant", blocks)
    else
      local content = blocks_of(m.content)
      local result = { type = "tool_result", tool_use_id = m.tool_call_id }
      if #content > 0 then result.content = content end
      if m.is_error then result.is_error = true end
      push("user", { result })
    end
  end
  return out
end

local function wire_body(self, req, call)
  local body = { model = self.model, max_tokens = req.max_tokens or self.max_tokens, messages = wire_messages(req) }
  if req.system then body.system = utf8clean(req.system) end
  if #req.tools > 0 then
    body.tools = {}
    for _, t in ipairs(req.tools) do
      body.tools[#body.tools + 1] = { name = t.name, description = t.description and utf8clean(t.description),
        input_schema = t.parameters or { type = "object", properties = {} } }
    end
  end
  local tc = req.tool_choice
  if tc ~= nil and #req.tools > 0 then
    body.tool_choice = type(tc) == "table" and { type = "tool", name = tc.name }
      or ({ auto = { type = "auto" }, none = { type = "none" }, required = { type = "any" } })[tc]
  end
  local temp = req.temperature or self.temperature
  if temp then body.temperature = temp end
  if req.stop then body.stop_sequences = req.stop end
  if call.stream then body.stream = true end
  for k, v in pairs(self.extra_body or {}) do body[k] = v end
  return body
end

local function headers(self)
  local h = { ["x-api-key"] = client.secret(self), ["anthropic-version"] = self.anthropic_version }
  if self.beta and #self.beta > 0 then h["anthropic-beta"] = table.concat(self.beta, ",") end
  return h
end

---------------------------------------------------------------------------------------------------
-- Response

local str = client.str
local int = client.int

local STOP = { end_turn = "stop", stop_sequence = "stop", tool_use = "tool_calls", max_tokens = "length",
  refusal = "refusal", pause_turn = "pause", model_context_window_exceeded = "context_length" }

-- Total input is input + cache creation + cache read (the API counts cached tokens apart).
local function usage_of(u)
  if type(u) ~= "table" then return nil end
  local created, read = int(u.cache_creation_input_tokens) or 0, int(u.cache_read_input_tokens) or 0
  local input = int(u.input_tokens)
  return client.usage(input and (input + created + read), int(u.output_tokens),
    { cache_creation_tokens = created, cache_read_tokens = read })
end

-- response from content blocks (Message.content): text blocks joined, tool_use blocks as calls.
local function response(self, blocks, t)
  local http = require "glsb.http"
  local text, calls, keep = {}, {}, {}
  for i, b in ipairs(blocks) do
    if b.type == "text" and str(b.text) then
      text[#text + 1] = b.text
      keep[#keep + 1] = { type = "text", text = b.text }
    elseif b.type == "tool_use" then
      local json = b.json or (type(b.input) == "table" and http.encode_json(b.input)) or "{}"
      local args, why = client.arguments(json)
      calls[#calls + 1] = { id = str(b.id) or string.format("toolu_%d", i), name = str(b.name) or "",
        arguments = args, arguments_json = json, error = why }
      keep[#keep + 1] = { type = "tool_use", id = calls[#calls].id, name = calls[#calls].name,
        input = args and not is_empty(args) and args or {} }
    elseif (b.type == "thinking" or b.type == "redacted_thinking") then
      keep[#keep + 1] = b.raw or b
    end
  end
  local stop = str(t.stop_reason)
  return client.response({ text = table.concat(text), tool_calls = calls,
    finish_reason = STOP[stop] or (stop and "other"), provider_finish_reason = stop, usage = t.usage,
    model = t.model, id = t.id, request_id = t.request_id, provider = "anthropic",
    provider_blocks = { anthropic = keep } })
end

local function parse(self, json, rid)
  if type(json.content) ~= "table" then
    client.raise(self, "bad_response", "the answer has no content array", nil, { request_id = rid })
  end
  local blocks = {}
  for _, b in ipairs(json.content) do
    if type(b) == "table" then blocks[#blocks + 1] = b end
  end
  return response(self, blocks, { stop_reason = json.stop_reason, usage = usage_of(json.usage), model = str(json.model),
    id = str(json.id), request_id = rid })
end

local TRANSIENT_TYPES = { overloaded_error = true, api_error = true, rate_limit_error = true, timeout_error = true }

local function stream_spec(self, call)
  local http = require "glsb.http"
  local budget = client.budget(self, call)
  local acc = { blocks = {}, order = {}, done = false, usage = {} }
  local spec = {}
  local function block(i)
    local b = acc.blocks[i]
    if not b then
      b = { type = "text", text_parts = {}, json_parts = {} }
      acc.blocks[i] = b
      acc.order[#acc.order + 1] = i
    end
    return b
  end
  function spec.on_event(ev)
    local data = http.decode_json(ev.data)
    if type(data) ~= "table" then
      client.raise(self, "bad_response", "a stream event is not JSON: " .. ev.data:sub(1, 200))
    end
    local kind = str(data.type) or ev.event
    if kind == "error" or ev.event == "error" then
      local e = type(data.error) == "table" and data.error or {}
      local etype = str(e.type)
      client.raise(self, "stream", "error event in the stream: " .. tostring(str(e.message) or etype),
        { message = str(e.message) or "error event", code = TRANSIENT_TYPES[etype] and "SERVER_ERROR" or nil },
        { error_type = etype, request_id = str(data.request_id) })
    elseif kind == "message_start" then
      local m = type(data.message) == "table" and data.message or {}
      acc.id, acc.model = str(m.id), str(m.model)
      if type(m.usage) == "table" then for k, v in pairs(m.usage) do acc.usage[k] = v end end
    elseif kind == "content_block_start" then
      local i = int(data.index) or #acc.order
      local cb = type(data.content_block) == "table" and data.content_block or {}
      local b = block(i)
      b.type, b.id, b.name = str(cb.type) or "text", str(cb.id), str(cb.name)
      if b.type == "text" and str(cb.text) and cb.text ~= "" then budget.token(cb.text) b.text_parts[1] = cb.text end
      if b.type == "tool_use" and type(cb.input) == "table" and not is_empty(cb.input) then b.input = cb.input end
      if b.type == "thinking" or b.type == "redacted_thinking" then b.raw = cb end
    elseif kind == "content_block_delta" then
      local b = block(int(data.index) or acc.order[#acc.order] or 0)
      local d = type(data.delta) == "table" and data.delta or {}
      if d.type == "text_delta" and str(d.text) then
        budget.token(d.text)
        b.text_parts[#b.text_parts + 1] = d.text
      elseif d.type == "input_json_delta" and str(d.partial_json) then
        budget.add(#d.partial_json)
        b.json_parts[#b.json_parts + 1] = d.partial_json
      elseif d.type == "thinking_delta" and str(d.thinking) and b.raw then
        budget.add(#d.thinking)
        b.raw.thinking = (b.raw.thinking or "") .. d.thinking
      elseif d.type == "signature_delta" and str(d.signature) and b.raw then
        b.raw.signature = d.signature
      end
    elseif kind == "message_delta" then
      local d = type(data.delta) == "table" and data.delta or {}
      acc.stop_reason = str(d.stop_reason) or acc.stop_reason
      -- output_tokens is cumulative; the other counters, when present, are whole-message totals
      if type(data.usage) == "table" then for k, v in pairs(data.usage) do acc.usage[k] = v end end
    elseif kind == "message_stop" then
      acc.done = true
      return true
    end
    return false
  end
  function spec.complete_at_end() return false end
  function spec.finish(rid)
    table.sort(acc.order)
    local blocks = {}
    for _, i in ipairs(acc.order) do
      local b = acc.blocks[i]
      if b.type == "text" then
        blocks[#blocks + 1] = { type = "text", text = table.concat(b.text_parts) }
      elseif b.type == "tool_use" then
        local json = #b.json_parts > 0 and table.concat(b.json_parts) or (b.input and http.encode_json(b.input)) or "{}"
        blocks[#blocks + 1] = { type = "tool_use", id = b.id, name = b.name, json = json }
      elseif b.raw then
        blocks[#blocks + 1] = { type = b.type, raw = b.raw }
      end
    end
    return response(self, blocks, { stop_reason = acc.stop_reason, usage = usage_of(acc.usage), model = acc.model,
      id = acc.id, request_id = rid })
  end
  return spec
end

-- {"type": "error", "error": {type, message}, "request_id"} (types/shared/error_response.py)
local CONTEXT_TEXT = { "prompt is too long", "exceed context limit", "context window", "context length" }

local function parse_error(status, hdrs, json, raw)
  local info = {}
  local e = json and json.error
  if type(e) == "table" then
    info.message, info.type = str(e.message), str(e.type)
  end
  info.request_id = (json and str(json.request_id)) or client.header(hdrs, "request-id")
  info.message = info.message or (raw ~= "" and raw:gsub("%s+", " "):sub(1, 300)) or "(no body)"
  if status == 400 or status == 413 then
    local low = info.message:lower()
    for _, frag in ipairs(CONTEXT_TEXT) do
      if low:find(frag, 1, true) then info.context_length = true break end
    end
  end
  return info
end

local function request_id(hdrs) return client.header(hdrs, "request-id") end

function Anthropic:_call(req, call)
  local spec = call.stream and stream_spec(self, call) or {}
  spec.url = self.base_url .. "/v1/messages"
  spec.headers = headers(self)
  spec.body = wire_body(self, req, call)
  spec.stream = call.stream
  spec.parse_error = parse_error
  spec.request_id = request_id
  return client.run(self, spec, call, parse)
end

return M
