-- The Bedrock AgentCore adapter against the emulator, phase by phase: what goes on the wire (every
-- header signed, clientTokens), idempotent retries of Start/Stop, the outcome of an Invoke at each
-- point it can fail, the stages of errors, and secrets kept out of errors and logs. #bedrock
local emulator = require "bedrock.emulator"
local glsb = require "glsb"
local errors = require "glsb.errors"
local outcome = require "glsb.outcome"

local Status = glsb.ExecutionStatus

local function ops(log, op)
  local out = {}
  for _, r in ipairs(log) do if op == nil or r.op == op then out[#out + 1] = r end end
  return out
end

describe("bedrock adapter #bedrock", function()
  local emu, sb, prev_log

  setup(function()
    emu = emulator.start()
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  before_each(function() sb = nil end)
  after_each(function()
    emu:clear_faults()
    if sb then pcall(sb.terminate, sb) end
    assert.are.same({}, emu:leftovers())
  end)

  describe("create and terminate", function()
    it("starts a session with a clientToken and signs every header it sends", function()
      local since = emu:last_seq()
      sb = glsb.create("bedrock", emu:opts { name = "glsb-spec", timeout = 600 })
      assert.matches("^[0-9A-Z]+$", sb.sandbox_id)
      assert.are.equal("aws.codeinterpreter.v1", sb.identifier)
      assert.are.equal(Status.SUCCESS, sb:execute_code("print(1)").status)
      assert.are.equal(Status.SUCCESS, sb:execute_command("true").status)
      sb:terminate()
      local log = emu:requests(since)
      assert.are.same({ "StartCodeInterpreterSession", "InvokeCodeInterpreter", "InvokeCodeInterpreter",
        "StopCodeInterpreterSession" }, (function() local o = {} for i, r in ipairs(log) do o[i] = r.op end return o end)())
      for _, r in ipairs(log) do
        assert.are.equal(200, r.status)
        assert.are.same({}, r.unsignedHeaders, r.op .. " sent a header it did not sign")
        for _, h in ipairs({ "host", "x-amz-date", "x-amz-content-sha256" }) do
          assert.truthy(table.concat(r.signedHeaders, ";"):find(h, 1, true))
        end
      end
      assert.matches("^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$", log[1].clientToken)
      assert.matches("^%x+%-%x+%-4%x+%-[89ab]%x+%-%x+$", log[4].clientToken)
    end)

    it("signs the traceparent tracing adds, so that every header sent is still signed", function()
      local trace = require "glsb.trace"
      local n = 0
      local function span()
        n = n + 1
        local id = n
        return { set_attribute = function() end, add_event = function() end, set_status = function() end,
          finish = function() end, traceparent = function() return ("00-%032x-%016x-01"):format(id, id) end }
      end
      trace.set_tracer { start_span = function() return span() end }
      local since = emu:last_seq()
      local ok, err = pcall(function()
        sb = glsb.create("bedrock", emu:opts {})
        assert.are.equal("1\n", sb:execute_code("print(1)").stdout)
        sb:terminate()
      end)
      trace.set_tracer(nil)
      assert.is_true(ok, tostring(err))
      local log = emu:requests(since)
      assert.are.equal(3, #log)
      for _, r in ipairs(log) do
        assert.are.equal(200, r.status)
        assert.truthy(table.concat(r.signedHeaders, ";"):find("traceparent", 1, true), r.op)
        assert.are.same({}, r.unsignedHeaders)
      end
    end)

    it("keeps one clientToken across Start retries (5xx, a lost answer): one session", function()
      emu:fault { op = "StartCodeInterpreterSession", error = "InternalServerException", times = 1 }
      emu:fault { op = "StartCodeInterpreterSession", action = "cut_after_execute", times = 1 }
      local since = emu:last_seq()
      local warned = {}
      glsb.log.set_handler(function(level, msg) if level == "warn" then warned[#warned + 1] = msg end end)
      local ok, err = pcall(glsb.create, "bedrock", emu:opts {})
      glsb.log.set_handler(function() end)
      assert.is_true(ok, tostring(err))
      sb = err
      -- the retry after the 500 is visible at the default level (issue 14), naming the call and the reason
      -- (the lost answer may be replayed by libcurl itself on its reused connection: a PUT is idempotent)
      assert.is_true(#warned >= 1, "no retry was logged")
      assert.matches("^bedrock PUT /code%-interpreters/.-/sessions/start attempt 1 failed %(transient%), retrying in", warned[1])
      assert.truthy(warned[1]:find("InternalServerException", 1, true), warned[1])
      local starts = ops(emu:requests(since), "StartCodeInterpreterSession")
      assert.are.equal(3, #starts)
      assert.are.equal(starts[1].clientToken, starts[2].clientToken)
      assert.are.equal(starts[1].clientToken, starts[3].clientToken)
      assert.is_true(starts[3].replayed, "the service answered the retry from the first execution")
      local ready = 0
      for _, s in ipairs(emu:state().sessions) do if s.status == "READY" then ready = ready + 1 end end
      assert.are.equal(1, ready)
    end)

    it("gives up on throttling with a transient SandboxStartError[create]", function()
      emu:fault { op = "StartCodeInterpreterSession", error = "ThrottlingException", times = -1 }
      local since = emu:last_seq()
      local ok, err = pcall(glsb.create, "bedrock", emu:opts {})
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.are.equal(glsb.Stage.CREATE, err.stage)
      assert.is_true(err.transient)
      assert.matches("ThrottlingException", tostring(err), 1, true)
      assert.are.equal(3, #ops(emu:requests(since), "StartCodeInterpreterSession"))
    end)

    it("fails fast and permanently on a refused signature, with the session token redacted", function()
      local token = "FwoGZXIvYXdzEGlsYnNlY3JldHRva2Vu0123456789"
      local since = emu:last_seq()
      local ok, err = pcall(glsb.create, "bedrock", emu:opts { secret_access_key = "wrong-secret-key-0123", session_token = token })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.is_false(err.transient)
      local text = tostring(err)
      assert.matches("InvalidSignatureException: The request signature we calculated does not match", text, 1, true)
      assert.falsy(text:find(token, 1, true), "the session token leaked into the error")
      assert.falsy(text:find("wrong-secret-key-0123", 1, true))
      assert.are.equal(1, #emu:requests(since), "a 403 is not retried")
    end)

    it("names what is missing: a region, an unknown interpreter", function()
      local ok, err = pcall(glsb.create, "bedrock", emu:opts { region = false, getenv = function() return nil end })
      assert.is_false(ok)
      assert.are.equal(glsb.Stage.CREATE, err.stage)
      assert.matches("needs a region", err.message, 1, true)
      ok, err = pcall(glsb.create, "bedrock", emu:opts { template = "glsb_no_such-0123456789" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.matches("ResourceNotFoundException", tostring(err), 1, true)
      assert.is_false(err.transient)
    end)

    it("terminates with one clientToken across retries; a session already gone is terminated", function()
      sb = glsb.create("bedrock", emu:opts {})
      emu:fault { op = "StopCodeInterpreterSession", error = "InternalServerException", times = 1 }
      emu:fault { op = "StopCodeInterpreterSession", action = "cut_before_response", times = 1 }
      local since = emu:last_seq()
      sb:terminate()
      local stops = ops(emu:requests(since), "StopCodeInterpreterSession")
      assert.are.equal(3, #stops)
      assert.are.equal(stops[1].clientToken, stops[3].clientToken)
      assert.is_nil(sb.sandbox_id)
      local sb2 = glsb.create("bedrock", emu:opts {})
      emu:expire(sb2.sandbox_id)
      sb2:terminate()
      assert.is_false(sb2:is_running())
    end)

    it("keeps the handle when Stop is refused, so terminate can be called again", function()
      sb = glsb.create("bedrock", emu:opts {})
      local id = sb.sandbox_id
      emu:fault { op = "StopCodeInterpreterSession", error = "AccessDeniedException", times = -1 }
      local ok, err = pcall(sb.terminate, sb)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxTerminateError), tostring(err))
      assert.are.equal(id, sb.sandbox_id)
      emu:clear_faults()
      sb:terminate()
      assert.is_nil(sb.sandbox_id)
    end)

    it("set_timeout is a documented no-op", function()
      sb = glsb.create("bedrock", emu:opts { timeout = 30 })
      local since = emu:last_seq()
      assert.is_true(sb:set_timeout(600))
      assert.are.equal(0, #emu:requests(since), "nothing was sent")
      assert.is_true(sb:is_running())
    end)
  end)

  describe("the outcome of an execution, at each point it can fail", function()
    before_each(function()
      sb = glsb.create("bedrock", emu:opts { timeout = 600 })
      sb:execute_code("import os\nopen('/tmp/count', 'w').close()")
    end)

    -- how many times code that appends to /tmp/count ran
    local COUNTING = "open('/tmp/count', 'a').write('x')\nprint('ran')"
    local function runs()
      return #sb:execute_command("cat /tmp/count").stdout
    end

    it("a request that never left is ERROR, retry_safe, and was sent again until it did", function()
      local cfg = sb._cfg
      local saved = cfg.endpoint
      cfg.endpoint = "http://127.0.0.1:9" -- nothing listens there
      local r = sb:execute_code(COUNTING)
      cfg.endpoint = saved
      assert.are.equal(Status.ERROR, r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.are.equal(0, runs())
    end)

    it("HTTP throttling before the stream is ERROR, retry_safe, not retried, not run", function()
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", error = "ThrottlingException" }
      local since = emu:last_seq()
      local r = sb:execute_code(COUNTING)
      assert.are.equal(Status.ERROR, r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.are.same({ "RefusedError", "ThrottlingException" }, { r.failure.exception_type, r.failure.provider_type })
      assert.are.equal(1, #ops(emu:requests(since), "InvokeCodeInterpreter"))
      assert.are.equal(0, runs())
    end)

    it("an in-stream throttling exception is ERROR, retry_safe, not retried, not run", function()
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "stream_exception", error = "ThrottlingException" }
      local since = emu:last_seq()
      local r = sb:execute_code(COUNTING)
      assert.are.equal(Status.ERROR, r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.matches("ThrottlingException: Rate exceeded", r.error, 1, true)
      assert.are.equal(1, #ops(emu:requests(since), "InvokeCodeInterpreter"))
      assert.are.equal(0, runs())
    end)

    it("an internal error (HTTP 500, in-stream, an error frame) is UNKNOWN and never retried", function()
      for _, f in ipairs({
        { op = "InvokeCodeInterpreter", tool = "executeCode", error = "InternalServerException" },
        { op = "InvokeCodeInterpreter", tool = "executeCode", action = "stream_exception", error = "InternalServerException" },
        { op = "InvokeCodeInterpreter", tool = "executeCode", action = "stream_error", code = "InternalFailure" },
      }) do
        emu:fault(f)
        local since = emu:last_seq()
        local r = sb:execute_code(COUNTING)
        assert.are.equal(Status.UNKNOWN, r.status, tostring(r))
        assert.is_false(r.failure.retry_safe)
        assert.are.equal(1, #ops(emu:requests(since), "InvokeCodeInterpreter"))
      end
    end)

    it("a stream cut after the headers is UNKNOWN: it ran once and is not sent again", function()
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "cut_mid_stream", bytes = 20 }
      local since = emu:last_seq()
      local r = sb:execute_code(COUNTING)
      assert.are.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_false(r.failure.retry_safe)
      assert.are.equal(1, #ops(emu:requests(since), "InvokeCodeInterpreter"))
      assert.are.equal(1, runs())
    end)

    it("a connection dropped before any answer is UNKNOWN (the request was delivered)", function()
      emu:fault { op = "InvokeCodeInterpreter", action = "cut_before_response" }
      local r = sb:execute_code("print(1)")
      assert.are.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_false(r.failure.retry_safe)
    end)

    it("a broken CRC is UNKNOWN; a slow stream, or an exception after the result, is the result", function()
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "corrupt_crc" }
      local r = sb:execute_code("print(1)")
      assert.are.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.matches("MESSAGE_CRC", r.error, 1, true)
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "slow_stream", delayMs = 300 }
      r = sb:execute_code("print(2)")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("2\n", r.stdout)
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "stream_exception", afterResult = true,
        error = "InternalServerException" }
      r = sb:execute_code("print(3)")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("3\n", r.stdout)
    end)

    it("our deadline is TIMEOUT, and the interpreter keeps its state", function()
      sb:execute_code("kept = 'yes'")
      local r = sb:execute_code("import time\nwhile True:\n    time.sleep(0.05)", { timeout = 0.5 })
      assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
      assert.are.equal("yes\n", sb:execute_code("print(kept)").stdout)
    end)

    it("a session lost mid-run is TIMEOUT naming the sandbox gone; an expired one refuses with GONE", function()
      emu:fault { op = "InvokeCodeInterpreter", tool = "executeCode", action = "lose_session", afterMs = 300 }
      local r = sb:execute_code("import time\ntime.sleep(5)")
      assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
      assert.are.equal(outcome.GONE, r.failure.exception_type)
      local sb2 = glsb.create("bedrock", emu:opts {})
      emu:expire(sb2.sandbox_id)
      r = sb2:execute_code("print(1)")
      assert.are.equal(Status.ERROR, r.status, tostring(r))
      assert.are.equal(outcome.GONE, r.failure.exception_type)
      assert.matches("ResourceNotFoundException", r.error, 1, true)
      pcall(sb2.terminate, sb2)
    end)
  end)

  describe("code, commands and files", function()
    before_each(function() sb = glsb.create("bedrock", emu:opts { timeout = 600 }) end)

    it("runs code with a per-call environment that does not stay behind", function()
      local r = sb:execute_code("import os\nprint(os.environ['GLSB_X'])", { env = { GLSB_X = "it's \"quoted\"" } })
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("it's \"quoted\"\n", r.stdout)
      r = sb:execute_code("import os\nprint(os.environ.get('GLSB_X'))")
      assert.are.equal("None\n", r.stdout)
    end)

    it("reports the exception of failing code", function()
      local r = sb:execute_code("def f():\n    raise KeyError('k')\nf()")
      assert.are.equal(Status.ERROR, r.status)
      assert.matches("KeyError: 'k'", r.error, 1, true)
      assert.are.equal("KeyError", r.error_name)
    end)

    it("puts the last expression's value in r.text through the wrapper, never in stdout, state kept", function()
      local since = emu:last_seq()
      local r = sb:execute_code("x = 40\nx + 2")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.same({ "", "", "42" }, { r.stdout, r.stderr, r.text })
      local sent = ops(emu:requests(since), "InvokeCodeInterpreter")[1]
      assert.are.equal("python", sent.language)
      assert.truthy(sent.code:find('b"x = 40\\x0ax + 2"', 1, true), "the code travels as an exact bytes literal")
      -- output without a final newline, then a value
      r = sb:execute_code("print('no newline', end='')\n[x, 'é']")
      assert.are.same({ "no newline", "[40, 'é']" }, { r.stdout, r.text })
      -- code that replaces its stdout still reports its value; the next call is not disturbed
      r = sb:execute_code("import io, sys\nsys.stdout = io.StringIO()\nprint('hidden')\n7")
      assert.are.same({ "", "7" }, { r.stdout, r.text })
      r = sb:execute_code("import sys\nsys.stdout = sys.__stdout__\nprint('back')\nx")
      assert.are.same({ "back\n", "40" }, { r.stdout, r.text })
      -- nothing of the wrapper stays in the session's namespace
      r = sb:execute_code("sorted(k for k in globals() if 'glsb' in k)")
      assert.are.equal("[]", r.text)
    end)

    it("keeps tracebacks as Python shows them: the user's line numbers, no frame of the wrapper", function()
      local r = sb:execute_code("a = 1\n\ndef f():\n    return 1 / 0\n\nf()")
      assert.are.equal(Status.ERROR, r.status)
      assert.are.equal("ZeroDivisionError", r.error_name)
      assert.are.equal('Traceback (most recent call last):\n  File "<string>", line 6, in <module>\n'
        .. '  File "<string>", line 4, in f\nZeroDivisionError: division by zero', r.error)
      assert.are.equal(r.error .. "\n", r.stderr)
      assert.is_nil(r.text)
      r = sb:execute_code("x = 1\ny = (\n")
      assert.are.equal(Status.ERROR, r.status)
      assert.are.equal("SyntaxError", r.error_name)
      assert.matches('File "<string>", line 2', r.error, 1, true)
      -- a failing last expression: its line, and the statements before it ran
      r = sb:execute_code("z = 5\nz.nope")
      assert.are.equal("AttributeError", r.error_name)
      assert.matches('line 2, in <module>', r.error, 1, true)
      assert.are.equal("5", sb:execute_code("z").text)
    end)

    it("sends execute_code{language=...} as executeCode's own language; others are refused before sending", function()
      for _, lang in ipairs({ "javascript", "typescript" }) do
        local since = emu:last_seq()
        local r = sb:execute_code("console.log(1)", { language = lang })
        local sent = ops(emu:requests(since), "InvokeCodeInterpreter")
        assert.are.equal(1, #sent)
        assert.are.equal(lang, sent[1].language)
        assert.are.equal("console.log(1)", sent[1].code, "sent as it is, no wrapper")
        -- the emulator runs Python only and says so as a tool error (the real service runs it)
        assert.are.equal(Status.ERROR, r.status, tostring(r))
        assert.matches("emulator runs python only", r.error, 1, true)
        r = sb:execute_code("console.log(1)", { language = lang, env = { A = "1" } })
        assert.are.equal(Status.ERROR, r.status)
        assert.is_true(r.failure.retry_safe)
        assert.matches("env is not supported for language '" .. lang .. "'", r.error, 1, true)
      end
      local since = emu:last_seq()
      for _, lang in ipairs({ "bash", "cobol" }) do
        local ok, err = pcall(sb.execute_code, sb, "echo hi", { language = lang })
        assert.is_false(ok)
        assert.matches("does not run language '" .. lang .. "' %(it runs: javascript, python, typescript%)", err)
      end
      assert.are.equal(0, #emu:requests(since), "nothing was sent")
      -- a sandbox created for JavaScript runs its code as JavaScript by default, Python on request
      local js = glsb.create("bedrock", emu:opts { language = "javascript" })
      since = emu:last_seq()
      js:execute_code("1 + 1")
      local r = js:execute_code("1 + 1", { language = "python" })
      js:terminate()
      local sent = ops(emu:requests(since), "InvokeCodeInterpreter")
      assert.are.same({ "javascript", "python" }, { sent[1].language, sent[2].language })
      assert.are.equal("2", r.text)
    end)

    it("runs commands with env and cwd quoted, refuses non-UTF-8 before sending", function()
      local r = sb:execute_command("echo \"$A|$B\"; pwd", { env = { A = "x y", B = "'; exit 9" }, cwd = "/tmp" })
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("x y|'; exit 9\n/tmp\n", r.stdout)
      local since = emu:last_seq()
      r = sb:execute_command("echo \xff")
      assert.are.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe)
      assert.matches("UTF%-8", r.error)
      assert.are.equal(0, #emu:requests(since))
    end)

    it("runs background commands as AgentCore tasks: output as the polls bring it, a deadline, env and cwd", function()
      local lines = {}
      local p = sb:start_command("echo \"$GREETING from $(pwd)\"; sleep 0.5; echo later", {
        env = { GREETING = "hi" }, cwd = "/tmp", on_stdout = function(l) lines[#lines + 1] = l end })
      local deadline = glsb.now() + 5
      while #lines == 0 and glsb.now() < deadline do glsb.sleep(0.05) end
      assert.are.same({ "hi from /tmp" }, lines, "the first line arrived before the command ended")
      assert.is_false(p:done())
      local r = p:wait(10)
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("hi from /tmp\nlater\n", r.stdout)
      assert.are.same({ "hi from /tmp", "later" }, lines)
      local since = emu:last_seq()
      local slow = sb:start_command("sleep 30", { timeout = 0.5 })
      r = slow:wait(10)
      assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
      local stopped = false
      for _, x in ipairs(emu:requests(since)) do if x.tool == "stopTask" then stopped = true end end
      assert.is_true(stopped, "the task was stopped at its deadline")
      for _, t in ipairs(emu:state().sessions[1].tasks or {}) do assert.are_not.equal("working", t.status) end
    end)

    it("uploads and downloads bytes exactly, text and binary", function()
      local bin = ""
      for i = 0, 255 do bin = bin .. string.char(i) end
      local r = sb:execute_code("print(len(open('/files/b.bin','rb').read()), open('/files/t.txt').read())", {
        files = { glsb.SandboxFile.from_bytes(bin, "b.bin"), glsb.SandboxFile.from_bytes("héllo", "t.txt") } })
      assert.are.equal("256 héllo\n", r.stdout)
      assert.are.equal(bin, sb:download_file("/files/b.bin"))
      assert.are.equal("héllo", sb:download_file("/files/t.txt"))
      assert.is_nil(sb:download_file("/files/missing"))
    end)
  end)

  it("keeps the secret key and the session token out of every error, log line and tostring", function()
    local token = "IQoJb3JpZ2luX2VjEGlsYnNlY3JldC10b2tlbg-0987654321"
    local secret = emulator.SECRET_ACCESS_KEY
    local lines = {}
    glsb.log.set_handler(function(level, msg, fields)
      local parts = { level, msg }
      for k, v in pairs(fields or {}) do parts[#parts + 1] = tostring(k) .. "=" .. tostring(v) end
      lines[#lines + 1] = table.concat(parts, " ")
    end)
    local texts = {}
    local ok, err = pcall(function()
      sb = glsb.create("bedrock", emu:opts { session_token = token })
      texts[#texts + 1] = tostring(sb)
      texts[#texts + 1] = tostring(sb._cfg.credentials)
      texts[#texts + 1] = tostring(sb._cfg.credentials:get())
      texts[#texts + 1] = tostring(sb:execute_code("raise RuntimeError('x')"))
      sb:download_file("/nope")
      emu:fault { op = "InvokeCodeInterpreter", error = "AccessDeniedException", message = "denied " .. token }
      texts[#texts + 1] = tostring(sb:execute_code("print(1)"))
      local bad = pcall(glsb.create, "bedrock", emu:opts { secret_access_key = "x" .. secret, session_token = token })
      texts[#texts + 1] = tostring(bad)
      local _, e = pcall(glsb.create, "bedrock", emu:opts { secret_access_key = "x" .. secret, session_token = token })
      texts[#texts + 1] = tostring(e)
      texts[#texts + 1] = errors.describe(e.cause)
    end)
    glsb.log.set_handler(function() end)
    assert.is_true(ok, tostring(err))
    texts[#texts + 1] = table.concat(lines, "\n")
    for _, t in ipairs(texts) do
      assert.falsy(t:find(token, 1, true), "the session token leaked: " .. t)
      assert.falsy(t:find(secret, 1, true), "the secret key leaked: " .. t)
    end
    assert.matches("denied <redacted>", texts[5], 1, true)
  end)
end)
