-- The interpreter suite: glsb.interpreter driving a real sandbox of one provider with the model API
-- emulators (spec/emulators/openai, spec/emulators/anthropic) over loopback. A provider's spec calls
--
--   require("interpreter.suite")(provider_name, opts_factory, features)
--
-- opts_factory() -> fresh create opts for one sandbox. features (all optional):
--   tag              extra busted tag
--   leftovers()      -> what a terminated sandbox left behind (must be {} after a cancelled run)
--   displays         false: figures shown with plt.show() do not come back as results (OpenSandbox)
--   renewable_lease  false: set_timeout does not move the lease (Bedrock): the lease case checks the no-op
local busted = require "busted"
local assert = require "luassert"
local describe, it = busted.describe, busted.it
local setup, teardown, before_each, after_each = busted.setup, busted.teardown, busted.before_each, busted.after_each
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local time = require "glsb.time"
local trace = require "glsb.trace"
local span_mod = require "glsb.trace.span"
local sampler = require "glsb.trace.sampler"
local emulator = require "lm.emulator"

local HISTOGRAM = "Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png"
local PNG_SIG = "\137PNG\r\n\26\n"

local function call(code, name) return { tool_calls = { { name = name or "execute_code", arguments = { code = code } } } } end
local function say(text) return { text = text } end

-- The tool messages (OpenAI) or tool_result blocks (Anthropic) of a recorded request body, as
-- {text, is_error} in order.
local function results_of(kind, body)
  local out = {}
  for _, m in ipairs(body.messages) do
    if kind == "openai" and m.role == "tool" then
      out[#out + 1] = { text = type(m.content) == "string" and m.content or "", is_error = false }
    elseif kind == "anthropic" and m.role == "user" and type(m.content) == "table" then
      for _, b in ipairs(m.content) do
        if b.type == "tool_result" then
          local t = type(b.content) == "string" and b.content or ""
          if type(b.content) == "table" then
            for _, p in ipairs(b.content) do if p.type == "text" then t = t .. p.text end end
          end
          out[#out + 1] = { text = t, is_error = b.is_error == true }
        end
      end
    end
  end
  return out
end

return function(provider, opts_factory, features)
  features = features or {}
  local tag = features.tag and (" " .. features.tag) or ""

  describe("glsb.interpreter on " .. provider .. " #interpreter" .. tag, function()
    local lms, sb, prev_log, scripts = {}, nil, nil, 0

    setup(function()
      lms.openai = emulator.start("openai")
      lms.anthropic = emulator.start("anthropic")
      prev_log = glsb.log.set_handler(function() end)
    end)
    teardown(function()
      for _, e in pairs(lms) do e:stop() end
      glsb.log.set_handler(prev_log)
    end)
    before_each(function()
      sb = glsb.create(provider, opts_factory())
    end)
    after_each(function()
      if sb then pcall(sb.terminate, sb) end
      sb = nil
      trace.set_tracer(nil)
    end)

    -- script(kind, replies) -> the emulator and a client of a fresh scripted model
    local function scripted(kind, replies, extra)
      scripts = scripts + 1
      local emu = lms[kind]
      local model = emu:script(provider .. "-" .. scripts, replies)
      return emu, emu:client({ model = model }), model, extra
    end

    local function ai(client, extra)
      local o = { sandbox = sb, lm = client }
      for k, v in pairs(extra or {}) do o[k] = v end
      return glsb.interpreter(o)
    end

    for _, kind in ipairs({ "openai", "anthropic" }) do
      it("the histogram task (" .. kind .. "): the answer, a PNG in images, hist.png in files", function()
        local steps, tokens = {}, 0
        local r = ai(lms[kind]:client(), { vision = true }):execute(HISTOGRAM, {
          on_step = function(s) steps[#steps + 1] = s.index end,
          on_token = function() tokens = tokens + 1 end })
        assert.equal("answer", r.stop_reason, tostring(r))
        assert.truthy(r.text:find("saved it as hist.png", 1, true), r.text)
        assert.same({ 1 }, steps)
        assert.truthy(tokens > 0)
        local file
        for _, f in ipairs(r.files) do if f.path:match("/hist%.png$") then file = f end end
        assert.truthy(file, "hist.png among the files: " .. tostring(r))
        assert.equal("hist.png", file.filename)
        assert.equal(PNG_SIG, file.data:sub(1, 8))
        local png
        for _, im in ipairs(r.images) do if im.mime == "image/png" and im.data:sub(1, 8) == PNG_SIG then png = im end end
        assert.truthy(png, "a PNG in images")
        if features.displays ~= false then
          assert.equal("display", r.images[1].source)
          assert.truthy(r.text:find("pixels", 1, true), "the model was shown the chart: " .. r.text)
        end
        assert.truthy(r.usage.input_tokens > 0 and r.usage.output_tokens > 0)
        assert.equal(2, r.usage.calls)
        assert.truthy(r.duration_ms > 0)
        local t = tostring(r)
        assert.truthy(t:find("step 1:", 1, true) and t:find("hist.png", 1, true), t)
      end)
    end

    it("without vision the model gets a placeholder line naming the image, not the bytes", function()
      local emu = lms.openai
      local model = emu:script(provider .. "-placeholder", { { rules = true }, { rules = true } })
      local r = ai(emu:client({ model = model })):execute(HISTOGRAM)
      assert.equal("answer", r.stop_reason)
      local body = emu:requests(model)[2].body
      for _, m in ipairs(body.messages) do
        for _, p in ipairs(type(m.content) == "table" and m.content or {}) do
          assert.is_not.equal("image_url", p.type, "no image is sent without vision")
        end
      end
      local obs = results_of("openai", body)[1].text
      if features.displays ~= false then
        assert.truthy(obs:find("[image step1-1.png: image/png", 1, true), obs)
        assert.is_nil(r.text:find("pixels", 1, true))
      end
      assert.truthy(obs:find("files written: ", 1, true) and obs:find("hist.png", 1, true), obs)
    end)

    for _, kind in ipairs({ "openai", "anthropic" }) do
      it("an error on step 1 goes back to the model as an error result and is fixed on step 2 (" .. kind .. ")", function()
        local emu, client, model = scripted(kind, { call("print(undefined_name)"),
          call("undefined_name = 42\nprint(undefined_name)"), say("It prints 42.") })
        local r = ai(client):execute("print the thing")
        assert.equal("answer", r.stop_reason)
        assert.equal("It prints 42.", r.text)
        assert.equal(2, #r.steps)
        assert.equal("error", r.steps[1].result.status)
        assert.truthy(r.steps[1].error:find("NameError", 1, true))
        assert.equal("success", r.steps[2].result.status)
        assert.equal("42\n", r.steps[2].result.stdout)
        local seen = results_of(kind, emu:requests(model)[2].body)[1]
        assert.truthy(seen.text:find("error: NameError: name 'undefined_name' is not defined", 1, true), seen.text)
        assert.truthy(seen.text:find("traceback:", 1, true), seen.text)
        if kind == "anthropic" then assert.is_true(seen.is_error) end
      end)
    end

    describe("every limit stops the run with its stop_reason, and the model still answers", function()
      local function final_request(emu, model)
        local reqs = emu:requests(model)
        return reqs[#reqs].body
      end

      it("max_steps", function()
        local emu, client, model = scripted("openai", { call("print(1)"), call("print(2)"), call("print(3)"),
          say("From what I have: 1, 2, 3.") })
        local r = ai(client, { max_steps = 3 }):execute("count")
        assert.equal("max_steps", r.stop_reason)
        assert.equal(3, #r.steps)
        assert.equal("From what I have: 1, 2, 3.", r.text)
        local last = final_request(emu, model)
        assert.equal("none", last.tool_choice)
        assert.truthy(last.messages[#last.messages].content:find("step limit", 1, true))
      end)

      it("max_duration (the execution is cut to what is left of it)", function()
        local _, client = scripted("anthropic", { call("import time\ntime.sleep(20)\nprint('late')"),
          say("It did not finish in time.") })
        local t0 = loop.now()
        local r = ai(client, { max_duration = 3 }):execute("be slow")
        assert.equal("max_duration", r.stop_reason)
        assert.equal("It did not finish in time.", r.text)
        assert.equal("timeout", r.steps[1].result.status)
        assert.truthy(loop.now() - t0 < 15, "the 20 s sleep was cut")
      end)

      it("max_tokens (from the usage the API reports)", function()
        local big = { input_tokens = 900, output_tokens = 100 }
        local _, client = scripted("openai", { { tool_calls = call("print(1)").tool_calls, usage = big },
          { tool_calls = call("print(2)").tool_calls, usage = big }, say("Budget spent; so far 1 and 2.") })
        local r = ai(client, { max_tokens = 1500 }):execute("spend")
        assert.equal("max_tokens", r.stop_reason)
        assert.equal(2, #r.steps)
        assert.equal(900, r.steps[1].usage.input_tokens)
        assert.truthy(r.usage.total_tokens >= 2000)
        assert.equal("Budget spent; so far 1 and 2.", r.text)
      end)

      it("repeated_error: the same failing code three times", function()
        local _, client = scripted("openai", { call("1/0"), call("1/0"), call("1/0"),
          say("Dividing by zero cannot work.") })
        local r = ai(client):execute("divide")
        assert.equal("repeated_error", r.stop_reason)
        assert.equal(3, #r.steps)
        assert.equal("Dividing by zero cannot work.", r.text)
      end)

      it("repeated_error: a model that loops on the same error with different code is stopped", function()
        local _, client = scripted("anthropic", { call("1/0"), call("x = 2\nx/0"), call("print(3/0)"),
          say("Every try divided by zero.") })
        local r = ai(client, { max_repeats = 3 }):execute("divide")
        assert.equal("repeated_error", r.stop_reason)
        assert.equal(3, #r.steps)
        assert.equal("Every try divided by zero.", r.text)
        assert.truthy(r.steps[3].error:find("ZeroDivisionError", 1, true))
      end)

      it("an answer with no text ends the run with glsb's account of it", function()
        local _, client = scripted("openai", { call("print('the output')"), say("") })
        local r = ai(client):execute("x")
        assert.equal("answer", r.stop_reason)
        assert.truthy(r.text:find("without an answer", 1, true) and r.text:find("the output", 1, true), r.text)
      end)

      it("when even the last call fails, the run ends with glsb's own text", function()
        local _, client = scripted("openai", { call("print('only this')"), { error = { status = 400, message = "nope" } } })
        local r = ai(client, { max_steps = 1 }):execute("x")
        assert.equal("max_steps", r.stop_reason)
        assert.truthy(r.text:find("before the model gave an answer", 1, true), r.text)
        assert.truthy(r.text:find("only this", 1, true), r.text)
        assert.truthy(errors.is(r.final_error, errors.LMError))
      end)
    end)

    it("a 30 MB output does not reach the prompt; the whole capped output stays in the step", function()
      local emu, client, model = scripted("openai", { call("print('x' * 30_000_000)"), say("A lot of x.") })
      local r = ai(client):execute("flood")
      assert.equal("answer", r.stop_reason)
      local res = r.steps[1].result
      assert.is_true(res.stdout_truncated)
      assert.truthy(#res.stdout > 5 * 1024 * 1024, "the step keeps the capped 10 MiB")
      local req = emu:requests(model)[2]
      assert.truthy(req.bytes < 64 * 1024, "the second prompt is " .. req.bytes .. " bytes")
      local obs = results_of("openai", req.body)[1].text
      assert.truthy(obs:find("characters cut here", 1, true))
    end)

    it("a tool that does not exist is an error observation, not a crash", function()
      local emu, client, model = scripted("openai", { { tool_calls = {
        { name = "run_shell", arguments = { cmd = "ls" } } } }, say("Fine, no shell.") })
      local r = ai(client):execute("list")
      assert.equal("answer", r.stop_reason)
      assert.truthy(r.steps[1].executions[1].tool_error:find("no tool named \"run_shell\"", 1, true))
      local obs = results_of("openai", emu:requests(model)[2].body)[1].text
      assert.truthy(obs:find("the only tool is execute_code", 1, true), obs)
    end)

    it("input files land at /files/<name>; the model is told where", function()
      local emu = lms.openai
      local r = ai(emu:client()):execute("What is the mean of column x in /files/data.csv?",
        { files = { glsb.SandboxFile.from_bytes("x,y\n1,2\n3,4\n", "data.csv") } })
      assert.equal("answer", r.stop_reason)
      assert.truthy(r.text:find("is 2.0", 1, true), r.text)
      local first = emu:requests("glsb-rules")
      local body = first[#first - 1].body
      local user = body.messages[2].content
      assert.truthy(user:find("/files/data.csv (12 bytes)", 1, true), user)
      for _, f in ipairs(r.files) do assert.is_not.equal("/files/data.csv", f.path) end
    end)

    it("without tool calling the model writes fenced code; a server that refuses tools is detected", function()
      local r = ai(lms.openai:client(), { tools = false }):execute("what is 6*7")
      assert.equal("answer", r.stop_reason)
      assert.equal("fenced", r.mode)
      assert.equal("6*7 = 42.", r.text)
      local r2 = ai(lms.openai:client({ model = "glsb-rules-notools" })):execute("what is 2+3")
      assert.equal("fenced", r2.mode)
      assert.equal("2+3 = 5.", r2.text)
    end)

    it("step_timeout stops one execution (the model is told) and the run goes on; system replaces the prompt", function()
      local emu, client, model = scripted("openai", { call("import time\ntime.sleep(30)\nprint('late')"),
        say("Too slow, so I stopped.") })
      local t0 = loop.now()
      local r = ai(client, { step_timeout = 1, system = "You are terse." }):execute("be slow")
      assert.equal("answer", r.stop_reason)
      assert.equal("Too slow, so I stopped.", r.text)
      assert.equal("timeout", r.steps[1].result.status)
      assert.truthy(loop.now() - t0 < 20, "the 30 s sleep was cut at 1 s")
      local reqs = emu:requests(model)
      assert.same({ role = "system", content = "You are terse." }, reqs[1].body.messages[1])
      local obs = results_of("openai", reqs[2].body)[1].text
      assert.truthy(obs:find("stopped at its time limit", 1, true), obs)
    end)

    it("output files are capped in count and bytes: the rest are listed in skipped_files with why", function()
      local _, client = scripted("openai", { call(table.concat({
        "for name, n in [('a1.txt', 100), ('a2.bin', 3000), ('a3.txt', 600), ('a4.txt', 600), ('a5.txt', 10),",
        "                ('a6.txt', 10)]:",
        "    open(name, 'w').write('x' * n)" }, "\n")), say("Six files.") })
      local r = ai(client, { max_files = 3, max_file_bytes = 2000, max_output_bytes = 1000 }):execute("write")
      assert.equal("answer", r.stop_reason)
      local got, skipped = {}, {}
      for _, f in ipairs(r.files) do got[#got + 1] = f.filename .. "=" .. #f.data end
      for _, s in ipairs(r.skipped_files) do skipped[#skipped + 1] = s.path:match("[^/]+$") .. ":" .. s.reason end
      assert.same({ "a1.txt=100", "a3.txt=600", "a5.txt=10" }, got)
      assert.same({ "a2.bin:max_file_bytes", "a4.txt:max_output_bytes", "a6.txt:max_files" }, skipped)
    end)

    it("with a sandbox of its own: the files come back before it is terminated, and nothing is left", function()
      pcall(sb.terminate, sb) -- this case makes its own sandbox: the interpreter's
      sb = nil
      local _, client = scripted("openai", { call("open('own.txt', 'w').write('made in its own sandbox')"),
        say("Written.") })
      local r = glsb.interpreter({ provider = provider, create = opts_factory(), lm = client }):execute("write")
      assert.equal("answer", r.stop_reason)
      assert.equal(provider, r.provider)
      assert.equal("own.txt", r.files[1] and r.files[1].filename)
      assert.equal("made in its own sandbox", r.files[1].data)
      if features.leftovers then assert.same({}, features.leftovers()) end
    end)

    it("older outputs are compacted when the conversation grows past history_chars", function()
      local emu, client, model = scripted("openai", { call("print('a' * 3000)"), call("print('b' * 3000)"),
        call("print('c' * 3000)"), call("print('d' * 3000)"), say("abcd") })
      local r = ai(client, { history_chars = 6000 }):execute("letters")
      assert.equal("answer", r.stop_reason)
      local reqs = emu:requests(model)
      local obs = results_of("openai", reqs[#reqs].body)
      assert.equal(4, #obs)
      assert.truthy(obs[1].text:find("compacted", 1, true), obs[1].text:sub(1, 200))
      assert.is_nil(obs[4].text:find("compacted", 1, true))
      assert.equal(3001, #r.steps[1].result.stdout, "the step keeps the whole output")
    end)

    it("cancelling the run mid-step stops the model call and the execution and leaves nothing", function()
      pcall(sb.terminate, sb) -- this case makes its own sandbox: the interpreter's
      sb = nil
      local emu, _, model = scripted("openai", { call("import time\nprint('started', flush=True)\ntime.sleep(60)") })
      local runner = glsb.interpreter({ provider = provider, create = opts_factory(), lm = emu:client({ model = model }) })
      local outcome
      loop.run(function()
        local t = loop.spawn(function()
          local ok, err = pcall(runner.execute, runner, "sleep")
          outcome = ok and "finished" or err
        end)
        local deadline = loop.now() + 30
        while #emu:requests(model) == 0 and loop.now() < deadline do loop.sleep(0.05) end
        loop.sleep(1.5) -- the code is running now
        t:cancel()
        t:wait(30)
      end)
      assert.truthy(loop.is_cancelled(outcome), tostring(outcome))
      if features.leftovers then
        local left = features.leftovers()
        assert.same({}, left)
      end
      assert.equal(0, emu:in_flight())
    end)

    it("the key is in no span, log line, result or sandbox", function()
      local ended = {}
      trace.set_tracer(span_mod.new_tracer { sampler = sampler.from_name("always_on"),
        processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } })
      local lines = {}
      glsb.log.set_handler(function(level, msg) lines[#lines + 1] = level .. " " .. tostring(msg) end)
      local emu, client = scripted("openai", { call("import os\nprint(sorted(os.environ.items()))"),
        { error = { status = 500, echoKey = true } }, say("done") })
      local r = ai(client):execute("env")
      glsb.log.set_handler(function() end)
      trace.set_tracer(nil)
      local key = emu.api_key
      local seen = { tostring(r), r.steps[1].result.stdout, table.concat(lines, "\n") }
      for _, s in ipairs(ended) do
        for k, v in pairs(s.attributes) do seen[#seen + 1] = k .. "=" .. tostring(v) end
        for _, e in ipairs(s.events or {}) do
          for k, v in pairs(e.attributes or {}) do seen[#seen + 1] = k .. "=" .. tostring(v) end
        end
      end
      assert.truthy(#lines > 0, "the retry was logged")
      for _, s in ipairs(seen) do assert.is_nil(s:find(key, 1, true), "the key leaked into: " .. s:sub(1, 300)) end
      assert.equal("answer", r.stop_reason)
    end)

    it("spans: invoke_agent, a step span per model turn, execute_tool above glsb.sandbox.execute_code", function()
      local ended = {}
      trace.set_tracer(span_mod.new_tracer { sampler = sampler.from_name("always_on"),
        processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } })
      local r = ai(lms.openai:client()):execute("what is 6*7")
      trace.set_tracer(nil)
      assert.equal("answer", r.stop_reason)
      local by_name, by_id = {}, {}
      for _, s in ipairs(ended) do
        by_name[s.name] = by_name[s.name] or {}
        table.insert(by_name[s.name], s)
        by_id[s.span_id] = s
      end
      local run = by_name["invoke_agent glsb.interpreter"][1]
      assert.equal("invoke_agent", run.attributes["gen_ai.operation.name"])
      assert.equal("openai", run.attributes["gen_ai.provider.name"])
      assert.equal("glsb-rules", run.attributes["gen_ai.request.model"])
      assert.equal("answer", run.attributes["glsb.interpreter.stop_reason"])
      assert.truthy(run.attributes["gen_ai.usage.input_tokens"] > 0)
      local steps = by_name["glsb.interpreter.step"]
      assert.equal(2, #steps) -- the turn that ran code and the one that answered
      for _, s in ipairs(steps) do assert.equal(run.span_id, s.parent_span_id) end
      local tool = by_name["execute_tool execute_code"][1]
      assert.equal(steps[1].span_id, tool.parent_span_id)
      local exec = by_name["glsb.sandbox.execute_code"][1]
      assert.equal(tool.span_id, exec.parent_span_id)
      for _, chat in ipairs(by_name["chat glsb-rules"]) do
        assert.truthy(by_id[chat.parent_span_id].name == "glsb.interpreter.step")
      end
      assert.is_nil(tool.attributes["gen_ai.tool.call.arguments"], "no code in spans unless asked")
    end)

    -- Where set_timeout cannot move the lease (Bedrock), the case checks that its no-op does not disturb
    -- the loop: the sandbox is created with a lease that outlasts the run.
    local renewable = features.renewable_lease ~= false
    it(renewable and "the lease is renewed while the run goes on"
        or "the loop's lease renewals are harmless no-ops where the provider cannot renew", function()
      pcall(sb.terminate, sb)
      local o = opts_factory()
      o.timeout = renewable and 3 or 60
      sb = glsb.create(provider, o)
      local _, client = scripted("openai", { call("import time\ntime.sleep(1.5)\nprint(1)"),
        call("import time\ntime.sleep(1.5)\nprint(2)"), call("import time\ntime.sleep(1.5)\nprint(3)"), say("123") })
      local r = ai(client, { lease = 3 }):execute("slowly")
      assert.equal("answer", r.stop_reason, tostring(r))
      for i = 1, 3 do assert.equal("success", r.steps[i].result.status, tostring(r)) end
      assert.is_true(sb:is_running())
    end)

    it("a sandbox whose lease outlasts the interpreter's keeps it: the run never shortens it", function()
      pcall(sb.terminate, sb)
      local o = opts_factory()
      o.timeout = 600
      sb = glsb.create(provider, o)
      local before = time.parse_iso(sb:info().ends_at)
      local _, client = scripted("openai", { call("print(1)"), say("1") })
      assert.equal("answer", ai(client, { lease = 60 }):execute("one").stop_reason)
      local after = time.parse_iso(sb:info().ends_at)
      assert.truthy(after >= before - 2, string.format("the lease ended at %d, now at %d", before, after))
    end)

    it("misuse is an argument error at the caller's line", function()
      local function refused(fn, ...)
        local ok, err = pcall(fn, ...)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("suite.lua:%d+:"), "at the caller's line: " .. tostring(err))
        return err
      end
      local err = refused(glsb.interpreter, { sandbox = sb, lm = lms.openai:client(), max_step = 3 })
      assert.truthy(err:find("did you mean 'max_steps'", 1, true), err)
      err = refused(glsb.interpreter, { sandbox = sb, lm = 42 })
      assert.truthy(err:find("option 'lm' must be a table or a function", 1, true), err)
      err = refused(glsb.interpreter, { sandbox = sb, lm = {} })
      assert.truthy(err:find("lm must be a glsb.lm client", 1, true), err)
      local a = ai(lms.openai:client())
      err = refused(a.execute, a, "")
      assert.truthy(err:find("task must be a non%-empty string"), err)
      err = refused(a.execute, a, "x", { files = { { filename = "../x", data = "" } } })
      assert.truthy(err:find("files%[1%]"), err)
    end)
  end)
end
