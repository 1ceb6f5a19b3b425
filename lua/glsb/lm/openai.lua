-- glsb.lm.openai: OpenAI Chat Completions with tools, for api.openai.com and the servers that speak it
-- (vLLM, llama.cpp's llama-server, Ollama's /v1, LiteLLM). Wire facts: docs/protocols/llm.md.
--
--   POST {base_url}/chat/completions   Authorization: Bearer <key>   (stream: SSE "data: {chunk}" ... "data: [DONE]")
local client = require "glsb.lm.client"
local options = require "glsb.options"

local M = {}

M.DEFAULT_BASE_URL = "https://api.openai.com/v1"

local OpenAI = setmetatable({}, { __index = client.Client })
OpenAI.__index = OpenAI
OpenAI.__tostring = client.Client.__tostring
M.OpenAI = OpenAI

M.OPTIONS = options.merge(client.COMMON, {
  api_key = { "string", "sent as `Authorization: Bearer`; default `OPENAI_API_KEY`" },
  base_url = { "string", "default `OPENAI_BASE_URL`, else https://api.openai.com/v1" },
  organization = { "string", "`OpenAI-Organization` header; default `OPENAI_ORG_ID`" },
  project = { "string", "`OpenAI-Project` header; default `OPENAI_PROJECT_ID`" },
  stream_usage = { "boolean", "ask for usage in the last stream chunk (`stream_options.include_usage`)",
    default = "true" },
  max_tokens_field = { "string", "`max_completion_tokens` or `max_tokens` (what local servers read)",
    default = "max_completion_tokens on api.openai.com, else max_tokens" },
  system_role = { "string", "role of the system prompt: `system` or `developer`", default = "system" },
  parallel_tool_calls = { "boolean", "sent as is when set" },
})

-- new(opts) -> a client. The key and base URL are read as the official SDKs read them: the option,
-- else OPENAI_API_KEY / OPENAI_BASE_URL (trimmed; empty is unset), else the default URL. A key is
-- required for api.openai.com; other servers are sent none when none is given.
function M.new(opts)
  local self = client.new_client(OpenAI, opts, M.OPTIONS, "glsb.lm.openai")
  self.name, self.provider_name = "glsb.lm.openai", "openai"
  self.base_url = (self.base_url or client.env("OPENAI_BASE_URL") or M.DEFAULT_BASE_URL):gsub("/+$", "")
  self.organization = self.organization or client.env("OPENAI_ORG_ID")
  self.project = self.project or client.env("OPENAI_PROJECT_ID")
  local key = (opts or {}).api_key or client.env("OPENAI_API_KEY")
  local official = self.base_url == M.DEFAULT_BASE_URL
  if not key and official then
    client.raise(self, "auth", "no API key: pass api_key or set OPENAI_API_KEY")
  end
  client.set_secret(self, key)
  if self.stream_usage == nil then self.stream_usage = true end
  self.max_tokens_field = self.max_tokens_field or (official and "max_completion_tokens" or "max_tokens")
  if self.max_tokens_field ~= "max_completion_tokens" and self.max_tokens_field ~= "max_tokens" then
    options.arg_error("glsb.lm.openai: max_tokens_field must be max_completion_tokens or max_tokens")
  end
  self.system_role = self.system_role or "system"
  if self.system_role ~= "system" and self.system_role ~= "developer" then
    options.arg_error("glsb.lm.openai: system_role must be system or developer")
  end
  return self
end

---------------------------------------------------------------------------------------------------
-- Request: the normalised conversation -> messages (ChatCompletionRequestMessage)

-- every string sent is valid UTF-8: cjson writes bytes as they are, and an API refuses the request
local utf8clean = require("glsb.codec").repair_utf8

local function data_uri(p)
  return "data:" .. p.media_type .. ";base64," .. require("glsb.codec").b64encode(p.data)
end

local function user_content(c)
  if type(c) == "string" or c == nil then return utf8clean(c or "") end
  local parts = {}
  for _, p in ipairs(c) do
    if p.type == "text" then
      parts[#parts + 1] = { type = "text", text = utf8clean(p.text) }
    else
      parts[#parts + 1] = { type = "image_url", image_url = { url = data_uri(p) } }
    end
  end
  return parts
end

local function wire_messages(self, req)
  local http = require "glsb.http"
  local out = {}
  if req.system then out[1] = { role = self.system_role, content = utf8clean(req.system) } end
  local msgs, i = req.messages, 1
  while i <= #msgs do
    local m = msgs[i]
    if m.role == "user" then
      out[#out + 1] = { role = "user", content = user_content(m.content) }
      i = i + 1
    elseif m.role == "assistant" then
      local text = utf8clean(client.text_of(m.content))
      local w = { role = "assistant", content = text ~= "" and text or http.json_null }
      if m.tool_calls then
        w.tool_calls = {}
        for _, c in ipairs(m.tool_calls) do
          w.tool_calls[#w.tool_calls + 1] = { id = c.id, type = "function",
            ["function"] = { name = c.name, arguments = c.arguments_json or http.encode_json(c.arguments or {}) } }
        end
      elseif text == "" then
        w.content = ""
      end
      out[#out + 1] = w
      i = i + 1
    else
      -- A run of tool results. A tool message carries text only (ChatCompletionRequestToolMessage), so the
      -- images of the run follow in one user message, after the last tool message: a user message
      -- between them would leave the rest of the calls unanswered.
      local images = {}
      while msgs[i] and msgs[i].role == "tool" do
        local t = msgs[i]
        local text = utf8clean(client.text_of(t.content))
        out[#out + 1] = { role = "tool", tool_call_id = t.tool_call_id, content = text ~= "" and text or "(no output)" }
        for _, img in ipairs(client.images_of(t.content)) do images[#images + 1] = img end
        i = i + 1
      end
      if #images > 0 then
        local parts = { { type = "text", text = #images == 1 and "The image from the tool result above:"
          or string.format("The %d images from the tool results above:", #images) } }
        for _, img in ipairs(images) do
          if img.name then parts[#parts + 1] = { type = "text", text = utf8clean(img.name) .. ":" } end
          parts[#parts + 1] = { type = "image_url", image_url = { url = data_uri(img) } }
        end
        out[#out + 1] = { role = "user", content = parts }
      end
    end
  end
  return out
end

local function wire_body(self, req, call)
  local body = { model = self.model, messages = wire_messages(self, req) }
  if #req.tools > 0 then
    body.tools = {}
    for _, t in ipairs(req.tools) do
      body.tools[#body.tools + 1] = { type = "function", ["function"] = { name = t.name,
        description = t.description and utf8clean(t.description), parameters = t.parameters } }
    end
    if self.parallel_tool_calls ~= nil then body.parallel_tool_calls = self.parallel_tool_calls end
  end
  local tc = req.tool_choice
  if tc ~= nil and (#req.tools > 0 or tc == "none") then
    body.tool_choice = type(tc) == "table" and { type = "function", ["function"] = { name = tc.name } } or tc
    if #req.tools == 0 then body.tool_choice = nil end
  end
  local max = req.max_tokens or self.max_tokens
  if max then body[self.max_tokens_field] = max end
  local temp = req.temperature or self.temperature
  if temp then body.temperature = temp end
  if req.stop then body.stop = req.stop end
  if call.stream then
    body.stream = true
    if self.stream_usage then body.stream_options = { include_usage = true } end
  end
  for k, v in pairs(self.extra_body or {}) do body[k] = v end
  return body
end

local function headers(self)
  local h = {}
  local key = client.secret(self)
  if key then h.Authorization = "Bearer " .. key end
  if self.organization then h["OpenAI-Organization"] = self.organization end
  if self.project then h["OpenAI-Project"] = self.project end
  return h
end

---------------------------------------------------------------------------------------------------
-- Response

local str = client.str

local function usage_of(u)
  if type(u) ~= "table" then return nil end
  local extra = {}
  local pd, cd = u.prompt_tokens_details, u.completion_tokens_details
  if type(pd) == "table" then extra.cache_read_tokens = client.int(pd.cached_tokens) end
  if type(cd) == "table" then extra.reasoning_tokens = client.int(cd.reasoning_tokens) end
  return client.usage(u.prompt_tokens, u.completion_tokens, extra)
end

local FINISH = { stop = "stop", length = "length", tool_calls = "tool_calls", function_call = "tool_calls",
  content_filter = "content_filter" }

local function call_of(c, index)
  local json = c.arguments or ""
  local args, why = client.arguments(json)
  return { id = c.id or string.format("call_%d", index), name = c.name or "", arguments = args,
    arguments_json = json, error = why }
end

local function response(self, t)
  return client.response({ text = t.text, tool_calls = t.calls,
    finish_reason = FINISH[t.finish] or (t.finish and "other"),
    provider_finish_reason = t.finish, usage = t.usage, model = t.model, id = t.id, request_id = t.request_id,
    provider = "openai" })
end

-- A whole (non-streamed) answer: CreateChatCompletionResponse.
local function parse(self, json, rid)
  local choice = type(json.choices) == "table" and json.choices[1]
  local msg = type(choice) == "table" and choice.message
  if type(msg) ~= "table" then
    client.raise(self, "bad_response", "the answer has no choices[1].message", nil, { request_id = rid })
  end
  local calls = {}
  for i, c in ipairs(type(msg.tool_calls) == "table" and msg.tool_calls or {}) do
    local f = type(c) == "table" and c["function"]
    if type(f) == "table" then
      calls[#calls + 1] = call_of({ id = str(c.id), name = str(f.name), arguments = str(f.arguments) }, i)
    end
  end
  local text = str(msg.content) or ""
  local finish = str(choice.finish_reason)
  if text == "" and str(msg.refusal) then text, finish = msg.refusal, "content_filter" end
  return response(self, { text = text, calls = calls, finish = finish, usage = usage_of(json.usage),
    model = str(json.model), id = str(json.id), request_id = rid })
end

-- A streamed answer: CreateChatCompletionStreamResponse chunks; tool-call fragments joined by index.
local function stream_spec(self, call)
  local http = require "glsb.http"
  local budget = client.budget(self, call)
  local acc = { text = {}, calls = {}, order = {}, done = false }
  local spec = {}
  function spec.on_event(ev)
    local data = ev.data
    if data == "[DONE]" then
      acc.done = true
      return true
    end
    local chunk = http.decode_json(data)
    if type(chunk) ~= "table" then
      client.raise(self, "bad_response", "a stream event is not JSON: " .. data:sub(1, 200))
    end
    if chunk.error ~= nil then
      -- a failure after the stream started (ErrorEvent): the error object of an error body
      local e = type(chunk.error) == "table" and chunk.error or { message = tostring(chunk.error) }
      local etype = str(e.type)
      local transient = etype == nil or etype == "server_error" or etype == "requests"
        or etype:find("overloaded", 1, true)
      client.raise(self, "stream", "error event in the stream: " .. tostring(str(e.message) or data:sub(1, 200)),
        { message = str(e.message) or "error event", code = transient and "SERVER_ERROR" or nil },
        { error_type = etype, error_code = str(e.code) })
    end
    acc.id = acc.id or str(chunk.id)
    acc.model = acc.model or str(chunk.model)
    if type(chunk.usage) == "table" then acc.usage = usage_of(chunk.usage) end
    for _, ch in ipairs(type(chunk.choices) == "table" and chunk.choices or {}) do
      if type(ch) == "table" and (ch.index == nil or ch.index == 0) then
        local d = ch.delta
        if type(d) == "table" then
          local piece = str(d.content)
          if piece and piece ~= "" then
            budget.token(piece)
            acc.text[#acc.text + 1] = piece
          end
          for _, tc in ipairs(type(d.tool_calls) == "table" and d.tool_calls or {}) do
            if type(tc) == "table" then
              -- only index is required; a server that omits it continues the last call
              local i = math.tointeger(tc.index) or (acc.order[#acc.order] or 0)
              local c = acc.calls[i]
              if not c then
                c = { args = {} }
                acc.calls[i] = c
                acc.order[#acc.order + 1] = i
              end
              c.id = c.id or str(tc.id)
              local f = tc["function"]
              if type(f) == "table" then
                c.name = c.name or str(f.name)
                local a = str(f.arguments)
                if a and a ~= "" then
                  budget.add(#a)
                  c.args[#c.args + 1] = a
                end
              end
            end
          end
        end
        if str(ch.finish_reason) then acc.finish = ch.finish_reason end
      end
    end
    return false
  end
  -- Some compatible servers end the stream after the finish chunk without [DONE].
  function spec.complete_at_end() return acc.finish ~= nil end
  function spec.finish(rid)
    table.sort(acc.order)
    local calls = {}
    for n, i in ipairs(acc.order) do
      local c = acc.calls[i]
      calls[#calls + 1] = call_of({ id = c.id, name = c.name, arguments = table.concat(c.args) }, n)
    end
    return response(self, { text = table.concat(acc.text), calls = calls, finish = acc.finish, usage = acc.usage,
      model = acc.model, id = acc.id, request_id = rid })
  end
  return spec
end

-- The error body: {"error": {message, type, param, code}} (openapi.yaml ErrorResponse); Ollama sends
-- {"error": "text"}, older vLLM {"object": "error", "message", "type", "code"}.
local CONTEXT_TEXT = { "maximum context length", "context length", "context window", "context_length_exceeded",
  "exceeds the available context size", "exceed_context_size", "too many tokens" }

local function parse_error(status, hdrs, json, raw)
  local e = json and json.error
  local info = {}
  if type(e) == "table" then
    info.message, info.type = str(e.message), str(e.type)
    info.code = str(e.code) or (client.int(e.code) and tostring(client.int(e.code)))
  elseif type(e) == "string" then
    info.message = e
  elseif json then
    info.message, info.type = str(json.message), str(json.type)
  end
  info.message = info.message or (raw ~= "" and raw:gsub("%s+", " "):sub(1, 300)) or "(no body)"
  local low = (info.message .. " " .. tostring(info.code) .. " " .. tostring(info.type)):lower()
  if status == 400 or status == 413 then
    for _, frag in ipairs(CONTEXT_TEXT) do
      if low:find(frag, 1, true) then info.context_length = true break end
    end
  end
  info.request_id = client.header(hdrs, "x-request-id")
  return info
end

local function request_id(hdrs) return client.header(hdrs, "x-request-id") end

function OpenAI:_call(req, call)
  local spec = call.stream and stream_spec(self, call) or {}
  spec.url = self.base_url .. "/chat/completions"
  spec.headers = headers(self)
  spec.body = wire_body(self, req, call)
  spec.stream = call.stream
  spec.parse_error = parse_error
  spec.request_id = request_id
  return client.run(self, spec, call, parse)
end

return M
