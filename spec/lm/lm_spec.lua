-- glsb.lm against the OpenAI and Anthropic emulators over real loopback HTTP: the normalised request and
-- response on both wire formats, streamed and not; retries of what is transient (429 with retry-after-ms,
-- 5xx, 529, cut streams) and none of the rest; errors in the taxonomy (stage lm, reason, request id);
-- hostile servers (endless streams and error bodies, 1-byte frames, wrong JSON types, echoed keys); the
-- key in no error, log line, span or tostring; spans with the GenAI conventions; glsb.lm.fn.
local lm = require "glsb.lm"
local errors = require "glsb.errors"
local loop = require "glsb.loop"
local core = require "glsb.core"
local trace = require "glsb.trace"
local log = require "glsb.log"
local process = require "glsb.process"
local span_mod = require "glsb.trace.span"
local sampler = require "glsb.trace.sampler"
local emulator = require "lm.emulator"

local TOOLS = { { name = "execute_code", description = "Run Python code in a stateful kernel.",
  parameters = { type = "object", properties = { code = { type = "string" } }, required = { "code" } } } }
local HISTOGRAM = "Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png"
local PNG = core.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4z8AARAAI/gH/xp559wAAAABJRU5ErkJggg==")

local function task(text) return { system = "You write Python.", messages = { { role = "user", content = text } }, tools = TOOLS } end

local function raised(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return err
end

-- Everything the library logs while fn runs.
local function logged(fn)
  local lines = {}
  local prev = log.set_handler(function(level, msg, fields)
    lines[#lines + 1] = level .. " " .. tostring(msg) .. " " .. require("glsb.http").encode_json(fields or {})
  end)
  local ok, err = pcall(fn)
  log.set_handler(prev)
  return table.concat(lines, "\n"), ok, err
end

for _, kind in ipairs({ "openai", "anthropic" }) do
  describe("glsb.lm." .. kind .. " #lm", function()
    local emu, restore_log

    setup(function()
      emu = emulator.start(kind)
      -- retries are logged as warnings; the key case below reads them
      local prev = log.set_handler(function() end)
      restore_log = function() log.set_handler(prev) end
    end)
    teardown(function()
      if emu then emu:stop() end
      restore_log()
    end)
    before_each(function() emu:reset() end)

    for _, stream in ipairs({ true, false }) do
      it("a tool call, then the answer from its result " .. (stream and "(streamed)" or "(one body)"), function()
        local c = emu:client({ stream = stream })
        local req = task(HISTOGRAM)
        local r = c:invoke(req)
        assert.equal("tool_calls", r.finish_reason)
        assert.equal(1, #r.tool_calls)
        local call = r.tool_calls[1]
        assert.equal("execute_code", call.name)
        assert.truthy(call.arguments.code:find('fig.savefig("hist.png")', 1, true))
        assert.equal(call.arguments.code, require("glsb.http").decode_json(call.arguments_json).code)
        assert.truthy(r.usage.input_tokens > 0 and r.usage.output_tokens > 0)
        assert.equal(r.usage.input_tokens + r.usage.output_tokens, r.usage.total_tokens)
        assert.truthy(r.request_id:match("^req_"))
        assert.equal(kind, r.provider)
        req.messages[2] = r.message
        req.messages[3] = { role = "tool", tool_call_id = call.id, content = {
          { type = "text", text = "stdout:\nsaved hist.png\n" }, { type = "image", media_type = "image/png", data = PNG } } }
        local r2 = c:invoke(req)
        assert.equal("stop", r2.finish_reason)
        assert.truthy(r2.text:find("saved it as hist.png", 1, true))
        assert.truthy(r2.text:find("2x1 pixels", 1, true), "the model saw the image: " .. r2.text)
        assert.equal(0, #r2.tool_calls)
      end)
    end

    it("streams text to on_token and joins tool-call fragments (1 character a delta, two calls)", function()
      emu:config({ chunkChars = 1 })
      local model = emu:script("two", { { text = "Two cells.", tool_calls = {
        { name = "execute_code", arguments = { code = "x = 6 * 7" } },
        { name = "execute_code", arguments = { code = "print(x)" } } } } })
      local pieces = {}
      local r = emu:client({ model = model }):invoke(task("go"), { on_token = function(t, attempt)
        assert.equal(1, attempt)
        pieces[#pieces + 1] = t
      end })
      assert.equal(10, #pieces)
      assert.equal("Two cells.", table.concat(pieces))
      assert.equal("Two cells.", r.text)
      assert.same({ "x = 6 * 7", "print(x)" }, { r.tool_calls[1].arguments.code, r.tool_calls[2].arguments.code })
      assert.are_not.equal(r.tool_calls[1].id, r.tool_calls[2].id)
    end)

    it("reads usage from the stream's last events, and says nothing when the server sends none", function()
      local model = emu:script("u", { { text = "a", usage = { input_tokens = 11, output_tokens = 7 } },
        { text = "b", no_usage = true } })
      local c = emu:client({ model = model })
      local r = c:invoke(task("x"))
      assert.equal(11, r.usage.input_tokens)
      assert.equal(7, r.usage.output_tokens)
      local r2 = c:invoke(task("x"))
      if kind == "openai" then
        assert.is_nil(r2.usage)
      else
        -- message_start always carries the input count; the output count was 0
        assert.equal(0, r2.usage.output_tokens)
      end
    end)

    it("retries a 429 honouring retry-after-ms, then answers", function()
      emu:fault({ path = "", status = 429, retryAfterMs = 300, times = 2 })
      local t0 = loop.now()
      local r = emu:client():invoke(task("what is 6*7"))
      assert.equal("tool_calls", r.finish_reason)
      assert.equal(3, r.attempts)
      assert.equal(3, #emu:requests())
      -- two waits of the 300 ms the server asked for (a floor, not a speed claim)
      assert.truthy(loop.now() - t0 >= 0.6)
    end)

    it("a 429 that lasts ends as a transient LMError after 3 attempts; retry = false makes one", function()
      emu:fault({ path = "", status = 429, retryAfter = 0, times = -1 })
      local err = raised(function() emu:client():invoke(task("x")) end)
      assert.truthy(errors.is(err, errors.LMError))
      assert.equal("lm", err.stage)
      assert.equal("rate_limit", err.reason)
      assert.equal(429, err.http_status)
      assert.is_true(err.transient)
      assert.truthy(err.request_id:match("^req_"))
      assert.truthy(tostring(err):find("request id req_", 1, true))
      assert.equal(3, #emu:requests())
      emu:reset()
      emu:fault({ path = "", status = 429, retryAfter = 0, times = -1 })
      raised(function() emu:client({ retry = false }):invoke(task("x")) end)
      assert.equal(1, #emu:requests())
    end)

    it("5xx are transient and retried: 500, 503" .. (kind == "anthropic" and ", 529" or ""), function()
      local statuses = kind == "anthropic" and { 500, 503, 529 } or { 500, 503 }
      for _, s in ipairs(statuses) do
        emu:reset()
        emu:fault({ path = "", status = s, retryAfter = 0, times = 1 })
        local r = emu:client():invoke(task("what is 1+1"))
        assert.equal(2, r.attempts)
        emu:fault({ path = "", status = s, retryAfter = 0, times = -1 })
        local err = raised(function() emu:client({ retry = { attempts = 2, base_delay = 0 } }):invoke(task("x")) end)
        assert.equal("server", err.reason)
        assert.is_true(err.transient, tostring(err))
        assert.equal(s, err.http_status)
      end
    end)

    it("401 and 404 are permanent, not retried, and say what the server said", function()
      local bad = emu:client({ api_key = "sk-not-the-right-key-42" })
      local err = raised(function() bad:invoke(task("x")) end)
      assert.equal("auth", err.reason)
      assert.equal(401, err.http_status)
      assert.is_false(err.transient)
      -- a refused key is not recorded by the emulator: count the attempts of a 401 that a fault gives
      emu:fault({ path = "", status = 401, times = -1 })
      local e401 = raised(function() emu:client():invoke(task("x")) end)
      assert.equal("auth", e401.reason)
      assert.equal(1, #emu:requests(), "a 401 is sent once")
      emu:reset()
      local e404 = raised(function() emu:client({ model = "no-such-model" }):invoke(task("x")) end)
      assert.equal("not_found", e404.reason)
      assert.is_false(e404.transient)
      assert.equal(1, #emu:requests())
    end)

    it("a context-length error has its own reason and message, and is not retried", function()
      emu:config({ contextWindow = 50 })
      local err = raised(function() emu:client():invoke(task(string.rep("long words ", 100))) end)
      assert.equal("context_length", err.reason)
      assert.is_false(err.transient)
      assert.truthy(err.message:find("longer than the model's context window", 1, true), err.message)
      assert.equal(1, #emu:requests())
    end)

    it("a stream cut mid-way is retried (on_token learns the attempt); one that stays cut fails transient", function()
      local model = emu:script("cut", { { text = string.rep("some text ", 20) } }, { ["repeat"] = true })
      emu:fault({ path = "", action = "cut_after_events", events = 4, times = 1 })
      local attempts = {}
      local r = emu:client({ model = model }):invoke(task("x"), { on_token = function(_, a) attempts[a] = true end })
      assert.equal(2, r.attempts)
      assert.is_true(attempts[1], "the first attempt streamed some text before the cut")
      assert.is_true(attempts[2], "the second attempt streamed again")
      assert.equal(string.rep("some text ", 20), r.text)
      emu:fault({ path = "", action = "cut_after_events", events = 3, times = -1 })
      local err = raised(function() emu:client({ retry = { attempts = 2, base_delay = 0 } }):invoke(task(HISTOGRAM)) end)
      assert.truthy(err.reason == "transport" or err.reason == "stream", tostring(err))
      assert.is_true(err.transient, tostring(err))
    end)

    it("an error event inside the stream is an LMError, retried when the API calls it a server error", function()
      emu:fault({ path = "", action = "stream_error", events = 2, times = 1 })
      local r = emu:client():invoke(task(HISTOGRAM))
      assert.equal(2, r.attempts)
      emu:fault({ path = "", action = "stream_error", events = 2, times = -1 })
      local err = raised(function() emu:client({ retry = false }):invoke(task(HISTOGRAM)) end)
      assert.equal("stream", err.reason)
      assert.is_true(err.transient)
      assert.truthy(err.message:find("error event in the stream", 1, true))
    end)

    it("1-byte frames still make the whole answer", function()
      emu:fault({ path = "", action = "byte_stream", chunkBytes = 1 })
      local r = emu:client():invoke(task(HISTOGRAM))
      assert.truthy(r.tool_calls[1].arguments.code:find("plt.show()", 1, true))
    end)

    it("an endless stream stops at max_response_bytes; an endless error body at its cap", function()
      emu:fault({ path = "", action = "endless_stream" })
      local err = raised(function() emu:client({ max_response_bytes = 200000, retry = false }):invoke(task("x")) end)
      assert.equal("response_too_large", err.reason)
      assert.is_false(err.transient)
      emu:fault({ path = "", action = "endless_error_body", status = 500 })
      local e2 = raised(function() emu:client({ retry = false }):invoke(task("x")) end)
      assert.equal(500, e2.http_status)
      assert.is_true(#tostring(e2) < 2000, "the error quotes a clipped body")
      assert.equal(0, emu:in_flight())
    end)

    it("wrong JSON types and junk events are bad_response errors, not crashes", function()
      local raw = kind == "openai" and { choices = "nope", usage = { prompt_tokens = "x" } }
        or { content = "nope", usage = 3 }
      local model = emu:script("junk", { { raw_body = raw }, { raw_events = { "not json at all" } } })
      local c = emu:client({ model = model, retry = false })
      local err = raised(function() c:invoke(task("x"), { stream = false }) end)
      assert.equal("bad_response", err.reason)
      local e2 = raised(function() c:invoke(task("x")) end)
      assert.equal("bad_response", e2.reason)
    end)

    it("tool arguments that are not a JSON object come back with why; odd ids are kept as text", function()
      local model = emu:script("args", { { tool_calls = {
        { name = "execute_code", arguments_raw = '{"code": "print(1)"', id = "..\r\nX-Evil: 1" },
        { name = "execute_code", arguments_raw = '"just a string"' } } } })
      local r = emu:client({ model = model }):invoke(task("x"), { stream = kind == "openai" })
      local a, b = r.tool_calls[1], r.tool_calls[2]
      if kind == "openai" then
        assert.is_nil(a.arguments)
        assert.truthy(a.error:find("not a JSON object", 1, true))
        assert.equal("..\r\nX-Evil: 1", a.id)
        assert.is_nil(b.arguments)
      else
        -- Anthropic's input is always an object: the emulator sends {} for text that does not parse
        assert.same({}, a.arguments)
      end
    end)

    it("tool results: images ride " .. (kind == "openai" and "a following user message" or "inside tool_result")
      .. ", errors are marked", function()
      local model = emu:script("seen", { { text = "ok" } })
      local req = task("x")
      req.messages[2] = { role = "assistant", content = "", tool_calls = {
        { id = "call_a", name = "execute_code", arguments = { code = "1/0" } },
        { id = "call_b", name = "execute_code", arguments = { code = "plot()" } } } }
      req.messages[3] = { role = "tool", tool_call_id = "call_a", is_error = true,
        content = "ZeroDivisionError: division by zero" }
      req.messages[4] = { role = "tool", tool_call_id = "call_b", content = { { type = "text", text = "drawn" },
        { type = "image", media_type = "image/png", data = PNG, name = "figure 1" } } }
      emu:client({ model = model }):invoke(req)
      local body = emu:requests(model)[1].body
      if kind == "openai" then
        local m = body.messages
        assert.equal("tool", m[4].role)
        assert.equal("call_a", m[4].tool_call_id)
        assert.equal("tool", m[5].role)
        assert.equal("user", m[6].role)
        local url = m[6].content[3].image_url.url
        assert.equal("data:image/png;base64," .. core.b64encode(PNG), url)
      else
        local m = body.messages
        assert.equal(3, #m)
        assert.equal("user", m[3].role)
        local r1, r2 = m[3].content[1], m[3].content[2]
        assert.equal("tool_result", r1.type)
        assert.is_true(r1.is_error)
        assert.equal("tool_result", r2.type)
        assert.equal("image", r2.content[2].type)
        assert.equal(core.b64encode(PNG), r2.content[2].source.data)
        assert.equal("You write Python.", body.system)
      end
    end)

    it("text that is not UTF-8 is sent as valid UTF-8", function()
      local model = emu:script("utf", { { text = "ok" } })
      local r = emu:client({ model = model }):invoke(task("bytes: \255\254 and é"))
      assert.equal("ok", r.text)
      local sent = emu:requests(model)[1].body
      local content = kind == "openai" and sent.messages[2].content or sent.messages[1].content[1].text
      assert.equal("bytes: \239\191\189\239\191\189 and é", content)
    end)

    it("a request that takes too long times out (transient), per attempt", function()
      local model = emu:script("slow", { { text = "late", delay_ms = 3000 } })
      local err = raised(function() emu:client({ model = model, timeout = 0.3, retry = false }):invoke(task("x")) end)
      assert.equal("timeout", err.reason)
      assert.is_true(err.transient)
    end)

    it("cancelling the task cancels the call and leaves no request in flight", function()
      local model = emu:script("slowstream", { { text = string.rep("word ", 200), event_delay_ms = 50 } })
      local c = emu:client({ model = model })
      local got, outcome = 0, nil
      loop.run(function()
        local t = loop.spawn(function()
          local ok, err = pcall(c.invoke, c, task("x"), { on_token = function() got = got + 1 end })
          outcome = ok and "finished" or err
        end)
        loop.sleep(0.4)
        t:cancel()
        loop.sleep(0.1)
      end)
      assert.truthy(got > 0)
      assert.truthy(loop.is_cancelled(outcome), tostring(outcome))
      assert.equal(0, emu:in_flight())
    end)

    it("the key is in no error, log line, span, or tostring, even when the server echoes it", function()
      local ended = {}
      trace.set_tracer(span_mod.new_tracer { sampler = sampler.from_name("always_on"),
        processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } })
      emu:fault({ path = "", status = 500, echoKey = true, times = -1 })
      local c = emu:client({ retry = { attempts = 2, base_delay = 0 } })
      local lines, ok, err = logged(function() c:invoke(task("x")) end)
      trace.set_tracer(nil)
      assert.is_false(ok)
      local key = emu.api_key
      assert.truthy(#emu:requests() == 2)
      assert.truthy(tostring(err):find("REDACTED", 1, true), tostring(err))
      local seen = { tostring(err), errors.describe(err), errors.compact(err), lines, tostring(c), errors.compact(c),
        require("glsb.http").encode_json(err.cause.body or "") }
      for k, v in pairs(c) do seen[#seen + 1] = tostring(k) .. "=" .. tostring(v) end
      for _, s in ipairs(ended) do
        for k, v in pairs(s.attributes) do seen[#seen + 1] = k .. "=" .. tostring(v) end
        for _, e in ipairs(s.events or {}) do
          for k, v in pairs(e.attributes or {}) do seen[#seen + 1] = k .. "=" .. tostring(v) end
        end
        seen[#seen + 1] = tostring(s.status and s.status.message)
      end
      assert.truthy(#ended >= 3, "a chat span and its HTTP spans")
      for _, s in ipairs(seen) do
        assert.is_nil(s:find(key, 1, true), "the key leaked into: " .. s:sub(1, 200))
      end
    end)

    it("spans: chat <model> with the GenAI attributes, HTTP spans under it, no content unless asked", function()
      local ended = {}
      trace.set_tracer(span_mod.new_tracer { sampler = sampler.from_name("always_on"),
        processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } })
      local ok, err = pcall(function()
        emu:client():invoke(task(HISTOGRAM))
        emu:client({ capture_content = true }):invoke(task(HISTOGRAM))
      end)
      trace.set_tracer(nil)
      assert.is_true(ok, tostring(err))
      local chats, http_spans = {}, {}
      for _, s in ipairs(ended) do
        if s.name == "chat glsb-rules" then chats[#chats + 1] = s else http_spans[#http_spans + 1] = s end
      end
      assert.equal(2, #chats)
      local a = chats[1].attributes
      assert.equal("chat", a["gen_ai.operation.name"])
      assert.equal(kind, a["gen_ai.provider.name"])
      assert.equal("glsb-rules", a["gen_ai.request.model"])
      assert.equal("glsb-rules", a["gen_ai.response.model"])
      assert.same({ kind == "openai" and "tool_calls" or "tool_use" }, a["gen_ai.response.finish_reasons"])
      assert.truthy(a["gen_ai.usage.input_tokens"] > 0)
      assert.truthy(a["gen_ai.usage.output_tokens"] > 0)
      assert.equal("127.0.0.1", a["server.address"])
      assert.is_nil(a["gen_ai.input.messages"])
      assert.is_nil(a["gen_ai.output.messages"])
      assert.equal(chats[1].span_id, http_spans[1].parent_span_id)
      local b = chats[2].attributes
      assert.truthy(b["gen_ai.input.messages"]:find("histogram", 1, true))
      assert.truthy(b["gen_ai.output.messages"]:find("execute_code", 1, true))
      assert.truthy(b["gen_ai.system_instructions"]:find("You write Python", 1, true))
    end)

    it("reads the key and base URL from the environment, as the official SDKs do", function()
      local var = kind == "openai" and "OPENAI" or "ANTHROPIC"
      local chunk = string.format([[
        local c = require("glsb.lm").%s{ model = "glsb-rules" }
        local r = c:invoke({ messages = {{ role = "user", content = "what is 2+3" }}, tools = {{ name = "execute_code",
          parameters = { type = "object", properties = { code = { type = "string" } } } }} })
        io.write(r.tool_calls[1].arguments.code, "|", tostring(c))]], kind)
      local out, errout, st = process.run({ emulator.ROOT .. "/build/glsb-lua", "-e", chunk }, { timeout = 30,
        env = { var .. "_API_KEY=  " .. emu.api_key .. "\n", var .. "_BASE_URL=" .. emu:base_url(),
          "PATH=" .. os.getenv("PATH") } })
      assert.equal(0, st and st.code, tostring(errout))
      assert.truthy(out:find("result = 2+3", 1, true), out)
      assert.is_nil(out:find(emu.api_key, 1, true))
    end)
  end)
end

describe("glsb.lm clients without a server #lm", function()
  it("a missing key is an LMError before anything is sent (api.openai.com, Anthropic)", function()
    -- in a process whose environment has no key, whatever the one running the specs has
    local chunk = [[
      local errors = require "glsb.errors"
      for _, make in ipairs({ function() return glsb.lm.openai{ model = "gpt-4o", base_url = "https://api.openai.com/v1" } end,
        function() return glsb.lm.anthropic{ model = "claude" } end }) do
        local ok, err = pcall(make)
        io.write(tostring(ok), "|", tostring(errors.is(err, errors.LMError)), "|", tostring(err and err.reason), "|",
          tostring(err and err.message), "\n")
      end]]
    local out, errout, st = process.run({ emulator.ROOT .. "/build/glsb-lua", "-e", chunk }, { timeout = 30,
      env = { "PATH=" .. os.getenv("PATH") } })
    assert.equal(0, st and st.code, tostring(errout))
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.truthy(lines[1]:match("^false|true|auth|.*OPENAI_API_KEY"), lines[1])
    assert.truthy(lines[2]:match("^false|true|auth|.*ANTHROPIC_API_KEY"), lines[2])
    -- an OpenAI-compatible local server needs none
    local local_server = lm.openai({ model = "llama", base_url = "http://127.0.0.1:1/v1" })
    assert.equal("max_tokens", local_server.max_tokens_field)
  end)

  it("misuse is an argument error at the caller's line", function()
    local ok, err = pcall(lm.openai, { model = "m", base_url = "http://x/v1", temprature = 1 })
    assert.is_false(ok)
    local _ = nil
    assert.truthy(err:find("unknown option 'temprature' %(did you mean 'temperature'%?%)"), err)
    assert.truthy(err:find("lm_spec.lua:%d+:"), err)
    _, err = pcall(lm.openai, { base_url = "http://x/v1" })
    assert.truthy(err:find("model is required"), err)
    local c = lm.openai({ model = "m", base_url = "http://127.0.0.1:1/v1" })
    _, err = pcall(c.invoke, c, { messages = {} })
    assert.truthy(err:find("messages must be a non%-empty array"), err)
    _, err = pcall(c.invoke, c, { messages = { { role = "robot", content = "x" } } })
    assert.truthy(err:find("role must be user, assistant, tool or system"), err)
    _, err = pcall(c.invoke, c, { messages = { { role = "user", content = { { type = "image", data = "x" } } } } })
    assert.truthy(err:find("media_type"), err)
    _, err = pcall(c.invoke, c, { messages = { { role = "user", content = "x" } } }, { on_tokn = print })
    assert.truthy(err:find("did you mean 'on_token'"), err)
  end)

  it("a refused connection is a transient transport error, retried", function()
    local c = lm.openai({ model = "m", base_url = "http://127.0.0.1:1/v1", retry = { attempts = 2, base_delay = 0 } })
    local lines, ok, err = logged(function() c:invoke({ messages = { { role = "user", content = "x" } } }) end)
    assert.is_false(ok)
    assert.truthy(lines:find("attempt 1 failed, retrying", 1, true), lines)
    assert.equal("transport", err.reason)
    assert.is_true(err.transient)
  end)
end)

describe("glsb.lm.fn #lm", function()
  it("a function is the model: the normalised request in, a string or a response table out", function()
    local seen
    local c = lm.fn(function(req, ctx)
      seen = req
      ctx.on_token("hel")
      if #req.messages == 1 then
        return { text = "", tool_calls = { { name = "execute_code", arguments = { code = "print(1)" } } },
          usage = { input_tokens = 5, output_tokens = 2 } }
      end
      return "done"
    end, { name = "double" })
    local toks = {}
    local r = c:invoke(task("x"), { on_token = function(t) toks[#toks + 1] = t end })
    assert.equal("tool_calls", r.finish_reason)
    assert.equal("print(1)", r.tool_calls[1].arguments.code)
    assert.equal('{"code":"print(1)"}', r.tool_calls[1].arguments_json)
    assert.equal(5, r.usage.input_tokens)
    assert.equal("You write Python.", seen.system)
    assert.same({ "hel" }, toks)
    local req = task("x")
    req.messages[2] = r.message
    req.messages[3] = { role = "tool", tool_call_id = r.tool_calls[1].id, content = "1" }
    local r2 = c:invoke(req)
    assert.equal("done", r2.text)
    assert.equal("stop", r2.finish_reason)
    assert.truthy(tostring(c):find("double", 1, true))
  end)

  it("a function that raises is an LMError (reason fn); a wrong answer is bad_response; cancels pass", function()
    local err = raised(function() lm.fn(function() error("boom") end):invoke(task("x")) end)
    assert.truthy(errors.is(err, errors.LMError))
    assert.equal("fn", err.reason)
    assert.truthy(tostring(err):find("boom", 1, true))
    local e2 = raised(function() lm.fn(function() return 42 end):invoke(task("x")) end)
    assert.equal("bad_response", e2.reason)
    local e3 = raised(function() lm.fn(function() return { tool_calls = { { arguments = {} } } } end):invoke(task("x")) end)
    assert.truthy(e3.message:find("needs a name", 1, true))
    local own = errors.new(errors.LMError, "lm", "mine")
    assert.equal(own, raised(function() lm.fn(function() error(own, 0) end):invoke(task("x")) end))
  end)
end)
