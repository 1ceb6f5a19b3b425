-- glsb.interpreter: a language model drives a sandbox until it answers (docs/interpreter.md).
--
--   local ai = glsb.interpreter{ sandbox = sb, lm = glsb.lm.openai{ model = "gpt-4o-mini" } }
--   local r = ai:execute("Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png",
--                        { files = { glsb.SandboxFile.from_path("data.csv") }, on_step = print })
--   print(r.text, r.stop_reason, #r.images, r.files[1] and r.files[1].path)
--
-- One tool, execute_code, over the sandbox's stateful kernel; the loop runs until the model answers
-- without calling it (or, without tool calling, without a fenced code block). Every limit is explicit and
-- named in r.stop_reason (max_steps, max_duration, max_tokens, repeated_error); when one is hit, one last
-- call asks the model to answer from what it has, so a run never ends with nothing. A thin client of the
-- public API: glsb.lm for the model, sb:execute_code / sb.files / sb:set_timeout for the sandbox.
local options = require "glsb.options"
local errors = require "glsb.errors"
local observe = require "glsb.interpreter.observe"
local outputs = require "glsb.interpreter.outputs"
local result = require "glsb.interpreter.result"

local M = {}

M.Result = result.Result
M.STOP_REASONS = result.STOP_REASONS
M.TOOL_NAME = "execute_code"

-- The system prompt: short, and replaceable (option `system`). {language}, {files_dir} and {work_dir}
-- are filled in; {how} is the paragraph on how code is run (a tool call, or a fenced block).
M.SYSTEM_PROMPT = table.concat({
  "You solve the user's task by writing {language} code and running it. The code runs in a persistent",
  " {language} session: variables, imports and files stay from one run to the next. {how}\n",
  "Input files are in {files_dir}/. Write the files you make to {work_dir} (the working directory) or",
  " {files_dir}/; they are collected from there, so name them in your answer.\n",
  "When a run fails, read the error, fix the code and run it again; do not repeat code that failed.",
  " When the task is done, answer in plain text without running more code.",
})

M.HOW = {
  tools = "Run code with the execute_code tool; it returns what the code printed, the value of its last "
    .. "expression, the images it displayed and the error with its traceback.",
  fenced = "To run code, put it in one fenced block (```{fence}) in your message; you will get its output back "
    .. "in the next message.",
}

local FENCES = { python = "python", bash = "bash", javascript = "javascript", typescript = "typescript", r = "r",
  java = "java" }

-- system_prompt{language, files_dir, work_dir, mode} -> the default system prompt filled in.
function M.system_prompt(ctx)
  local language = ctx.language or "python"
  local pretty = language == "python" and "Python" or language == "javascript" and "JavaScript"
    or language == "typescript" and "TypeScript" or language == "bash" and "Bash" or language
  local how = M.HOW[ctx.mode or "tools"]:gsub("{fence}", FENCES[language] or language)
  return (M.SYSTEM_PROMPT:gsub("{(%w+)}", { language = pretty, files_dir = ctx.files_dir or "/files",
    work_dir = ctx.work_dir or "the working directory", how = how }))
end

M.OPTIONS = {
  lm = { "table|function", "the model: a `glsb.lm` client (a function is wrapped by `glsb.lm.fn`)" },
  sandbox = { "table", "the sandbox to drive (left running)" },
  provider = { "string", "without `sandbox`: create one of this provider for each execute, terminated at its end",
    default = "local" },
  create = { "table", "create options of that sandbox" },
  language = { "string", "the language of the code", default = "the sandbox's" },
  system = { "string", "the system prompt, instead of `interpreter.system_prompt`'s" },
  tools = { "boolean", "false: the model writes fenced code blocks instead of calling `execute_code`",
    default = "true (false once the server refuses tools)" },
  vision = { "boolean", "show the model the PNG/JPEG images the code displays (else a placeholder line)",
    default = "false" },
  max_steps = { "count", "model turns that run code, at most", default = "20" },
  max_duration = { "seconds", "wall clock of one execute; `<= 0`: none", default = "900" },
  max_tokens = { "count", "token budget of one execute: input + output of its model calls" },
  step_timeout = { "seconds", "per execution of code; `<= 0`: none", default = "120" },
  max_repeats = { "count", "the same failing code, or the same error, this many times in a row stops the run",
    default = "3" },
  observation_chars = { "count", "most characters of one execution's output the model sees (head and tail)",
    default = "20000" },
  history_chars = { "count", "past this many characters of conversation, older outputs are compacted",
    default = "100000" },
  max_images = { "count", "images of one execution shown to the model (with `vision`)", default = "4" },
  output_dirs = { "string_list", "where the files the run writes are looked for",
    default = "`upload_dir` and the working directory" },
  upload_dir = { "string", "where `files` land", default = "/files" },
  max_files = { "count", "output files downloaded, at most", default = "20" },
  max_file_bytes = { "count", "larger output files are listed, not downloaded", default = "10 MiB" },
  max_output_bytes = { "count", "all output files together, at most", default = "50 MiB" },
  lease = { "seconds", "the sandbox's lease is renewed to this while a run goes on (one that ends later is kept); "
    .. "`<= 0`: never",
    default = "300" },
  final_timeout = { "seconds", "the last call after a limit (it may run past `max_duration`)", default = "120" },
  capture_content = { "boolean", "code and outputs in the spans (GenAI content capture)",
    default = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" },
  on_step = { "function", "called with each step once it is done" },
  on_token = { "function", "called with each piece of the model's text as it streams" },
}

M.EXECUTE = {
  files = { "table", "`SandboxFile`s uploaded first, to `upload_dir/<filename>`" },
  on_step = { "function", "called with each step once it is done (instead of the interpreter's)" },
  on_token = { "function", "called with each piece of the model's text (instead of the interpreter's)" },
}

local DEFAULTS = { max_steps = 20, max_duration = 900, step_timeout = 120, max_repeats = 3, observation_chars = 20000,
  history_chars = 100000, max_images = 4, max_files = 20, max_file_bytes = 10 * 1024 * 1024,
  max_output_bytes = 50 * 1024 * 1024, lease = 300, final_timeout = 120, upload_dir = "/files" }

-- The images a model may be sent: what both APIs take (Anthropic caps one at 5 MB).
local MODEL_IMAGE = { ["image/png"] = "png", ["image/jpeg"] = "jpg" }
local MODEL_IMAGE_BYTES = 5 * 1000 * 1000

local Interpreter = {}
Interpreter.__index = Interpreter
M.Interpreter = Interpreter

function M.new(opts)
  opts = options.check(opts, M.OPTIONS, "glsb.interpreter")
  local lm = require "glsb.lm"
  local client = opts.lm
  if type(client) == "function" then client = lm.fn(client) end
  if not lm.is_client(client) then
    options.arg_error("glsb.interpreter: lm must be a glsb.lm client (glsb.lm.openai, .anthropic, .fn) or a function")
  end
  if opts.sandbox ~= nil and (opts.provider ~= nil or opts.create ~= nil) then
    options.arg_error("glsb.interpreter: give either sandbox or provider/create, not both")
  end
  if opts.sandbox ~= nil and type(opts.sandbox.execute_code) ~= "function" then
    options.arg_error("glsb.interpreter: sandbox must be a glsb sandbox (from glsb.create or glsb.connect)")
  end
  local self = setmetatable({ lm = client, sandbox = opts.sandbox }, Interpreter)
  for k, v in pairs(DEFAULTS) do self[k] = v end
  for k, v in pairs(opts) do
    if k ~= "lm" and k ~= "sandbox" then self[k] = v end
  end
  self.provider = opts.provider or (opts.sandbox and opts.sandbox.provider) or "local"
  self.mode = opts.tools == false and "fenced" or "tools"
  if self.capture_content == nil then
    local c = (os.getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") or ""):lower()
    self.capture_content = c == "true" or c == "span_only" or c == "span_and_event"
  end
  return self
end

function Interpreter:__tostring()
  return string.format("glsb.interpreter{lm = %s, %s}", tostring(self.lm),
    self.sandbox and ("sandbox = " .. tostring(self.sandbox)) or ("provider = " .. self.provider))
end

---------------------------------------------------------------------------------------------------
-- Spans (docs/protocols/llm.md §12): invoke_agent for the run, a step span, execute_tool per execution

local function trace() return require "glsb.trace" end

-- in_span(name, attributes, fn, ...) -> fn's results, inside a span when tracing is on.
local function in_span(name, attributes, fn, ...)
  local t = trace()
  if not t.enabled() then return fn(nil, ...) end
  local span = t.start_span(name, { kind = "internal", attributes = attributes })
  local res = table.pack(pcall(t.with_span, span, fn, span, ...))
  if not res[1] then
    local e = res[2]
    local cls = errors.is_error(e) and e.class or (require("glsb.loop").is_cancelled(e) and "Cancelled" or "LuaError")
    span:set_attribute("error.type", cls)
    span:set_status("error", errors.is_error(e) and (e.class .. "[" .. e.stage .. "]") or cls)
    span:finish()
    error(e, 0)
  end
  span:finish()
  return table.unpack(res, 2, res.n)
end

---------------------------------------------------------------------------------------------------
-- One run

local function now() return require("glsb.loop").now() end

local function tool_definition(language)
  return { name = M.TOOL_NAME,
    description = string.format("Run %s code in the persistent session and return its stdout, stderr, the value "
      .. "of its last expression, the images it displayed, the files it wrote and its error with a traceback.",
      language),
    parameters = { type = "object", properties = { code = { type = "string", description = "the code to run" } },
      required = { "code" } } }
end

-- The code blocks of a message written without tool calling: every fenced block, joined.
local function fenced_code(text)
  local blocks = {}
  for lang, body in text:gmatch("```([%w_+-]*)[^\n]*\n(.-)```") do
    if lang == "" or FENCES[lang:lower()] or lang:lower() == "py" or lang:lower() == "sh" then
      blocks[#blocks + 1] = body
    end
  end
  if #blocks == 0 then return nil end
  return table.concat(blocks, "\n")
end

-- A server that does not do tool calling says so in a 400 (vLLM without a tool parser, Ollama's "does
-- not support tools", llama.cpp without --jinja): such a run goes on with fenced blocks.
local function refuses_tools(err)
  if not errors.is(err, errors.LMError) or err.reason ~= "bad_request" then return false end
  local low = tostring(err.message):lower()
  return low:find("tool", 1, true) ~= nil
end

local Run = {}
Run.__index = Run

function Run:usage_add(u, step)
  if not u then return end
  local t = self.usage
  t.input_tokens = t.input_tokens + (u.input_tokens or 0)
  t.output_tokens = t.output_tokens + (u.output_tokens or 0)
  t.total_tokens = t.input_tokens + t.output_tokens
  if step then step.usage = u end
end

function Run:request(final)
  local req = { system = self.system, messages = self.messages }
  if self.mode == "tools" then
    req.tools = { self.tool }
    if final then req.tool_choice = "none" end
  end
  return req
end

-- call(final) -> the model's response, or nil and the limit that stopped it.
function Run:call(final)
  local ai = self.ai
  local timeout
  if final then
    timeout = ai.final_timeout
  elseif self.deadline then
    timeout = self.deadline - now()
    if timeout <= 0 then return nil, "max_duration" end
  end
  self.usage.calls = self.usage.calls + 1
  local ok, resp = pcall(ai.lm.invoke, ai.lm, self:request(final), { on_token = self.on_token,
    timeout = timeout and timeout > 0 and timeout or nil })
  if ok then return resp end
  local loop = require "glsb.loop"
  if loop.is_cancelled(resp) then error(resp, 0) end
  if not final and self.mode == "tools" and self.steps_done == 0 and refuses_tools(resp) then
    -- the server cannot call tools: the same run with fenced code blocks (the system prompt says so)
    require("glsb.log").warn("glsb.interpreter: the model server refuses tools; going on with fenced code blocks: "
      .. tostring(resp.message))
    self.mode = "fenced"
    if not ai.system then self.system = M.system_prompt(self:prompt_ctx("fenced")) end
    return self:call(final)
  end
  if errors.is(resp, errors.LMError) and resp.reason == "context_length" and not self.hard_compacted then
    self.hard_compacted = true
    observe.compact(self.messages, 1, 500)
    return self:call(final)
  end
  if not final and self.deadline and now() >= self.deadline and errors.is(resp, errors.LMError)
    and resp.reason == "timeout" then
    return nil, "max_duration"
  end
  error(resp, 0)
end

function Run:snapshot()
  local ai, sb = self.ai, self.sb
  local snap = outputs.snapshot(sb, self.output_dirs, math.max(10, ai.step_timeout > 0 and ai.step_timeout or 60),
    self.list_warned)
  return snap
end

-- An image of a result: {mime, data, name, step, width, height}.
local function image_of(im, step_index, n)
  local ext = MODEL_IMAGE[im.mime] or (im.mime == "image/svg+xml" and "svg") or "img"
  local w, h = observe.png_size(im.data)
  return { mime = im.mime, data = im.data, name = string.format("step%d-%d.%s", step_index, n, ext),
    step = step_index, width = w, height = h, source = "display" }
end

-- execute(step, code, call_id) -> execution {code, result, observation, images, files, failed, error_key}
function Run:execute(step, code, call_id)
  local ai, sb = self.ai, self.sb
  local ex = { code = code, tool_call_id = call_id, images = {}, files = {} }
  local timeout = ai.step_timeout
  if self.deadline then
    local left = self.deadline - now()
    if timeout <= 0 or left < timeout then timeout = math.max(1, left) end
  end
  local attrs = { ["gen_ai.operation.name"] = "execute_tool", ["gen_ai.tool.name"] = M.TOOL_NAME,
    ["gen_ai.tool.type"] = "function", ["gen_ai.tool.call.id"] = call_id }
  if ai.capture_content then attrs["gen_ai.tool.call.arguments"] = code end
  local r = in_span("execute_tool " .. M.TOOL_NAME, attrs, function()
    return sb:execute_code(code, { timeout = timeout > 0 and timeout or 0, language = self.language })
  end)
  ex.result = r
  local after = self:snapshot()
  for _, f in ipairs(outputs.diff(self.files_seen, after)) do
    ex.files[#ex.files + 1] = f
    if not self.written[f.path] then
      self.written[f.path] = true
      self.written_order[#self.written_order + 1] = f.path
    end
  end
  self.files_seen = after
  local placeholders, parts = {}, {}
  local shown = 0
  for _, im in ipairs(r.images and r:images() or {}) do
    local img = image_of(im, step.index, #ex.images + 1)
    ex.images[#ex.images + 1] = img
    self.images[#self.images + 1] = img
    if ai.vision and MODEL_IMAGE[img.mime] and #img.data <= MODEL_IMAGE_BYTES and shown < ai.max_images then
      shown = shown + 1
      parts[#parts + 1] = { type = "image", media_type = img.mime, data = img.data, name = img.name }
      placeholders[#placeholders + 1] = observe.placeholder(img, "attached below")
    else
      placeholders[#placeholders + 1] = observe.placeholder(img, ai.vision and "not attached (too many, too large "
        .. "or not PNG/JPEG)" or nil)
    end
  end
  local text, failed = observe.format(r, { limit = ai.observation_chars, images = placeholders, files = ex.files })
  ex.observation, ex.failed = text, failed
  ex.parts = parts
  if failed then
    local name, value = observe.exception(r)
    ex.error_key = (name or r.status) .. ": " .. tostring(value or r.error or "")
  end
  if self.ai.capture_content and trace().enabled() then ex.capture = text end
  return ex
end

-- A call the loop cannot run: an unknown tool, arguments that are not JSON, no code.
local function tool_error(call, message)
  return { code = nil, tool_call_id = call.id, images = {}, files = {}, failed = true, tool_error = message,
    observation = "error: " .. message, error_key = "tool: " .. message, parts = {} }
end

function Run:observation_message(ex)
  local content = ex.observation
  if #ex.parts > 0 then
    content = { { type = "text", text = ex.observation } }
    for _, p in ipairs(ex.parts) do content[#content + 1] = p end
  end
  if self.mode == "fenced" then
    local text = "Output of your code:\n"
    if type(content) == "string" then
      content = text .. content
    else
      content[1].text = text .. content[1].text
    end
    return { role = "user", content = content, observation = true }
  end
  return { role = "tool", tool_call_id = ex.tool_call_id, name = M.TOOL_NAME, content = content,
    is_error = ex.failed or nil, observation = true }
end

-- repeated(ex) -> true when the same failing code or the same error has now come max_repeats times in
-- a row (the loops users complain of: a model that keeps trying what failed).
function Run:repeated(ex)
  if not ex.failed then
    self.fail_code, self.fail_code_n, self.fail_err, self.fail_err_n = nil, 0, nil, 0
    return false
  end
  local code = ex.code and ex.code:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  if code and code == self.fail_code then self.fail_code_n = self.fail_code_n + 1 else
    self.fail_code, self.fail_code_n = code, 1
  end
  if ex.error_key == self.fail_err then self.fail_err_n = self.fail_err_n + 1 else
    self.fail_err, self.fail_err_n = ex.error_key, 1
  end
  local n = self.ai.max_repeats
  return (code ~= nil and self.fail_code_n >= n) or self.fail_err_n >= n
end

function Run:limit()
  local ai = self.ai
  if self.steps_done >= ai.max_steps then return "max_steps" end
  if self.deadline and now() >= self.deadline then return "max_duration" end
  if ai.max_tokens and self.usage.total_tokens >= ai.max_tokens then return "max_tokens" end
  return nil
end

-- One model turn, and the code it asks for. -> "answer" | "repeated_error" | nil (go on) | a limit
function Run:step()
  return in_span("glsb.interpreter.step", { ["glsb.step"] = #self.steps + 1 }, function(span)
    local resp, limit = self:call(false)
    if not resp then return limit end
    local step = { index = #self.steps + 1, message = resp.text, executions = {}, finish_reason = resp.finish_reason }
    self:usage_add(resp.usage, step)
    self.messages[#self.messages + 1] = resp.message
    local calls = resp.tool_calls
    if self.mode == "fenced" then
      local code = fenced_code(resp.text)
      calls = code and { { fenced = true, code = code } } or {}
    end
    if #calls == 0 then
      self.text = resp.text
      return "answer"
    end
    self.steps[#self.steps + 1] = step
    self.steps_done = self.steps_done + 1
    local stop
    for _, call in ipairs(calls) do
      local ex
      if call.fenced then
        ex = self:execute(step, call.code, nil)
      elseif call.name ~= M.TOOL_NAME then
        ex = tool_error(call, string.format("there is no tool named %q; the only tool is %s(code)", tostring(call.name),
          M.TOOL_NAME))
      elseif call.arguments == nil then
        ex = tool_error(call, (call.error or "the arguments are not a JSON object")
          .. "; call " .. M.TOOL_NAME .. " with {\"code\": \"...\"}")
      elseif type(call.arguments.code) ~= "string" or call.arguments.code == "" then
        ex = tool_error(call, M.TOOL_NAME .. " needs a non-empty string argument \"code\"")
      else
        ex = self:execute(step, call.arguments.code, call.id)
      end
      step.executions[#step.executions + 1] = ex
      if ex.error_key then step.error = ex.error_key end
      self.messages[#self.messages + 1] = self:observation_message(ex)
      if self:repeated(ex) then stop = "repeated_error" end
    end
    local first = step.executions[1]
    step.code, step.result = first.code, first.result
    if span then
      span:set_attribute("glsb.interpreter.executions", #step.executions)
      if step.usage then
        span:set_attribute("gen_ai.usage.input_tokens", step.usage.input_tokens)
        span:set_attribute("gen_ai.usage.output_tokens", step.usage.output_tokens)
      end
    end
    if observe.history_length(self.messages) > self.ai.history_chars then
      observe.compact(self.messages, 2, 1500)
    end
    if self.on_step then self.on_step(step) end
    return stop
  end)
end

-- The last call after a limit: the model answers from what it has, without tools. If even that fails,
-- the run still ends with a text: what glsb knows.
function Run:final(reason)
  self.messages[#self.messages + 1] = { role = "user", content = string.format(
    "Stop here: the run reached %s. Do not run more code. Answer the task now from what you have found so far, "
    .. "and say what is missing.", M.STOP_REASONS[reason]) }
  local ok, resp = pcall(self.call, self, true)
  if ok and resp then
    self.usage.final_call = resp.usage
    self:usage_add(resp.usage)
    self.messages[#self.messages + 1] = resp.message
    if resp.text ~= "" then
      self.text = resp.text
      return
    end
  elseif not ok and require("glsb.loop").is_cancelled(resp) then
    error(resp, 0)
  end
  local last = self.steps[#self.steps]
  local ex = last and last.executions[#last.executions]
  self.text = string.format("The run stopped at %s before the model gave an answer.%s", M.STOP_REASONS[reason],
    ex and ("\nThe last output was:\n" .. observe.cap(ex.observation, 2000)) or "")
  if not ok then self.final_error = resp end
end

-- upload(files): the input files, written before the first step.
function Run:upload(files)
  local dir = self.ai.upload_dir
  local list = {}
  for i = 1, #files do
    local okf, f = pcall(require("glsb.models").SandboxFile.normalize, files[i])
    if not okf then options.arg_error("interpreter:execute: files[%d]: %s", i, tostring(f):gsub("^[^:]*:%d+: ", "")) end
    list[#list + 1] = f
  end
  for _, f in ipairs(list) do
    self.sb.files:write(dir .. "/" .. f.filename, f.data)
  end
  return list
end

function Run:prompt_ctx(mode)
  return { language = self.language, files_dir = self.ai.upload_dir, work_dir = self.sb.workspace_root, mode = mode }
end

-- The body of execute, in the run span.
function Run:go(task, files)
  local ai = self.ai
  local sb = self.sb
  self.system = ai.system or M.system_prompt(self:prompt_ctx(self.mode))
  self.tool = tool_definition(self.language)
  self.output_dirs = ai.output_dirs or { ai.upload_dir, sb.workspace_root or "/home/user" }
  local inputs = self:upload(files)
  local text = task
  if #inputs > 0 then
    local names = {}
    for _, f in ipairs(inputs) do
      names[#names + 1] = string.format("%s/%s (%d bytes)", ai.upload_dir, f.filename, #f.data)
    end
    text = text .. "\n\nInput files: " .. table.concat(names, ", ")
  end
  self.messages = { { role = "user", content = text } }
  self.files_seen = self:snapshot()
  local stop
  repeat
    stop = self:limit() or self:step()
  until stop
  self.stop_reason = stop
  if stop ~= "answer" then
    self:final(stop)
  elseif not self.text:find("%S") then
    -- an answer with no text is no answer: say what the run has instead
    local last = self.steps[#self.steps]
    local ex = last and last.executions[#last.executions]
    self.text = "The model ended the run without an answer." .. (ex and ("\nThe last output was:\n"
      .. observe.cap(ex.observation, 2000)) or "")
  end
  -- output files: what the run wrote and is still there, read before anything is terminated
  local final = self:snapshot()
  local paths, sizes = {}, {}
  for _, p in ipairs(self.written_order) do
    if final[p] then
      paths[#paths + 1] = p
      sizes[p] = final[p].size
    end
  end
  self.files, self.skipped_files = outputs.download(sb, paths, sizes, { max_files = ai.max_files,
    max_file_bytes = ai.max_file_bytes, max_output_bytes = ai.max_output_bytes, timeout = 60 })
  -- image files the run wrote are charts too (a provider that does not send displays still has them)
  for _, f in ipairs(self.files) do
    local ext = f.filename:lower():match("%.(%w+)$")
    local mime = (ext == "png" and "image/png") or ((ext == "jpg" or ext == "jpeg") and "image/jpeg") or nil
    if mime then
      local w, h = observe.png_size(f.data)
      self.images[#self.images + 1] = { mime = mime, data = f.data, name = f.filename, path = f.path, width = w,
        height = h, source = "file" }
    end
  end
end

-- renew(sb, lease): the lease moved to end `lease` seconds from now, unless it ends later already (the
-- caller's sandbox made with a longer lease keeps it: a run never shortens it).
local function renew(sb, lease)
  local time = require "glsb.time"
  local ok, info = pcall(sb.info, sb)
  local ends = ok and type(info.ends_at) == "string" and time.parse_iso(info.ends_at)
  if ends and ends - time.wall() > lease then return end
  sb:set_timeout(lease)
end

-- A lease ticker: the sandbox's lease renewed every third of it while the run goes on.
local function start_lease(sb, lease)
  if not lease or lease <= 0 then return nil end
  local loop = require "glsb.loop"
  renew(sb, lease)
  return loop.spawn(function()
    while true do
      loop.sleep(math.max(1, lease / 3))
      renew(sb, lease)
    end
  end)
end

-- ai:execute(task, opts) -> Result. Raises what the model call raised when it cannot go on (an LMError:
-- no key, a 401, a server that stays down), argument errors for misuse, and a cancellation as it is.
function Interpreter:execute(task, opts)
  if type(task) ~= "string" or task == "" then
    options.arg_error("interpreter:execute: task must be a non-empty string")
  end
  opts = options.check(opts, M.EXECUTE, "interpreter:execute")
  local loop = require "glsb.loop"
  local started = now()
  local own = self.sandbox == nil
  local run = setmetatable({ ai = self, mode = self.mode, steps = {}, steps_done = 0, images = {}, written = {},
    written_order = {}, list_warned = {}, usage = { input_tokens = 0, output_tokens = 0, total_tokens = 0, calls = 0 },
    on_step = opts.on_step or self.on_step, on_token = opts.on_token or self.on_token,
    fail_code_n = 0, fail_err_n = 0 }, Run)
  if self.max_duration and self.max_duration > 0 then run.deadline = started + self.max_duration end
  local ticker
  local function body(span)
    if own then
      local copts = {}
      for k, v in pairs(self.create or {}) do copts[k] = v end
      if copts.timeout == nil and self.lease > 0 then copts.timeout = self.lease end
      -- glsb.create itself (its registry path: glsb's init requires this module, so not the other way)
      run.sb = require("glsb.registry").get(self.provider).Sandbox.create(copts)
    else
      run.sb = self.sandbox
    end
    run.language = self.language or run.sb.language or "python"
    if span then
      span:set_attribute("glsb.provider", run.sb.provider)
      if run.sb.sandbox_id then span:set_attribute("glsb.sandbox.id", run.sb.sandbox_id) end
    end
    ticker = start_lease(run.sb, self.lease)
    run:go(task, opts.files or {})
    if span then
      span:set_attribute("gen_ai.usage.input_tokens", run.usage.input_tokens)
      span:set_attribute("gen_ai.usage.output_tokens", run.usage.output_tokens)
      span:set_attribute("glsb.interpreter.stop_reason", run.stop_reason)
      span:set_attribute("glsb.interpreter.steps", #run.steps)
    end
  end
  local ok, err = pcall(in_span, "invoke_agent glsb.interpreter", {
    ["gen_ai.operation.name"] = "invoke_agent", ["gen_ai.agent.name"] = "glsb.interpreter",
    ["gen_ai.provider.name"] = self.lm.provider_name, ["gen_ai.request.model"] = self.lm.model,
  }, body)
  -- nothing left running, whatever happened: the ticker stops, a sandbox of our own goes
  loop.shield(function()
    if ticker then ticker:cancel() end
    if own and run.sb then pcall(run.sb.terminate, run.sb) end
  end)
  if not ok then error(err, 0) end
  return result.new({
    task = task, text = run.text or "", steps = run.steps, files = run.files or {}, images = run.images,
    skipped_files = run.skipped_files or {}, usage = run.usage, stop_reason = run.stop_reason,
    duration_ms = math.floor((now() - started) * 1000 + 0.5), model = self.lm.model, mode = run.mode,
    sandbox_id = run.sb and run.sb.sandbox_id, provider = run.sb and run.sb.provider, final_error = run.final_error,
  })
end

return setmetatable(M, { __call = function(_, opts) return M.new(opts) end })
