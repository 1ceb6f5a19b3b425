-- glsb.sandbox: the contract classes end to end through a scriptable fake provider.
local glsb = require "glsb"
local errors = require "glsb.errors"
local sandbox = require "glsb.sandbox"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"

local E = errors
local function transient() return E.new(E.SandboxStartError, "create", "busy", E.http_failure(503)) end
local function unauthorized() return E.new(E.SandboxStartError, "create", "bad key", E.http_failure(401)) end

describe("glsb.sandbox contract #unit", function()
  local provider, backend, logs, prev_handler, sleeps

  local function create(opts)
    opts = opts or {}
    opts.retry = opts.retry or { sleep = function(s) sleeps[#sleeps + 1] = s end }
    return glsb.create("fake", opts)
  end

  before_each(function()
    provider, backend = fake_provider.new("fake")
    registry.register("fake", provider)
    logs, sleeps = {}, {}
    prev_handler = glsb.log.set_handler(function(level, msg) logs[#logs + 1] = level .. ": " .. msg end)
  end)

  after_each(function()
    glsb.log.set_handler(prev_handler)
    registry.unregister("fake")
  end)

  describe("create", function()
    it("starts the sandbox with resolved options", function()
      local sb = create({ api_key = "k" })
      assert.are.equal("fake-1", sb.sandbox_id)
      assert.is_true(sb:is_running())
      assert.are.equal("python", sb.language)
      local o = backend.last("_start").opts
      assert.are.equal("k", o.api_key)
      assert.are.equal(300, o.timeout)
      assert.are.equal("python", o.language)
      assert.are.equal(1, backend.count("_start"))
      assert.truthy(tostring(sb):find("Sandbox(fake, id=fake-1, running)", 1, true))
    end)

    it("works as Provider.Sandbox.create(opts) too", function()
      local sb = provider.Sandbox.create({ retry = false })
      assert.is_true(sb:is_running())
    end)

    it("retries transient start failures with backoff", function()
      backend.start_failures = { transient(), { phase = "connect", code = "COULDNT_CONNECT", retry_safe = true } }
      local sb = create({ retry = { base_delay = 0.5, jitter = 0, sleep = function(s) sleeps[#sleeps + 1] = s end } })
      assert.are.equal(3, backend.count("_start"))
      assert.are.same({ 0.5, 1 }, sleeps)
      assert.are.equal("fake-3", sb.sandbox_id)
    end)

    it("waits as long as a 429's Retry-After asks (capped)", function()
      backend.start_failures = {
        E.new(E.SandboxStartError, "create", "slow down", E.http_failure(429, { ["retry-after"] = "2" })),
        E.new(E.SandboxStartError, "create", "slow down", E.http_failure(429, { ["retry-after"] = "3600" })),
      }
      create({ retry = { base_delay = 0.1, jitter = 0, max_retry_after = 10,
        sleep = function(s) sleeps[#sleeps + 1] = s end } })
      assert.are.same({ 2, 10 }, sleeps)
    end)

    it("does not retry a 401 and keeps the cause", function()
      backend.start_failures = { unauthorized() }
      local ok, err = pcall(create)
      assert.is_false(ok)
      assert.are.equal(1, backend.count("_start"))
      assert.is_true(E.is(err, E.SandboxStartError))
      assert.are.equal("create", err.stage)
      assert.is_false(err.transient)
      assert.are.equal(401, err.cause.http_status)
    end)

    it("raises the last transient error once the attempts are spent", function()
      backend.start_failures = { transient(), transient(), transient(), transient() }
      local ok, err = pcall(create)
      assert.is_false(ok)
      assert.are.equal(3, backend.count("_start"))
      assert.is_true(err.transient)
      assert.are.equal("create", err.stage)
    end)

    it("tears down a half-created sandbox before retrying", function()
      backend.id_before_failure = true
      backend.start_failures = { transient() }
      local sb = create()
      assert.are.equal(1, backend.count("_terminate"))
      assert.are.equal("fake-1", backend.last("_terminate").arg)
      assert.are.equal(1, backend.live_count())
      assert.is_true(backend.live[sb.sandbox_id])
    end)

    it("wraps a non-glsb failure into SandboxStartError[create] and keeps a hook's own stage", function()
      backend.start_failures = { "socket exploded" }
      local ok, err = pcall(create)
      assert.is_false(ok)
      assert.are.equal("SandboxStartError", err.class)
      assert.are.equal("create", err.stage)
      assert.are.equal("socket exploded", err.cause)
      backend.start_failures = { E.new(E.SandboxStartError, "health_check", "envd not ready") }
      ok, err = pcall(create)
      assert.is_false(ok)
      assert.are.equal("health_check", err.stage)
    end)

    it("installs additional_packages through pip in the code kernel", function()
      local sb = create({ additional_packages = { "numpy", "pandas>=2" } })
      assert.is_true(sb:is_running())
      local code = backend.last("_run_code").arg
      assert.truthy(code:find('"-m", "pip", "install"', 1, true))
      assert.truthy(code:find('"numpy", "pandas>=2"', 1, true))
      assert.are.equal(600, backend.last("_run_code").opts.timeout)
    end)

    it("tells on_progress each stage: the template, every attempt, a retry, the install, ready", function()
      local events = {}
      backend.start_failures = { transient() }
      local sb = create({ template = "tpl-1", additional_packages = { "numpy" },
        on_progress = function(e) events[#events + 1] = e.stage .. ": " .. e.message end })
      assert.is_true(sb:is_running())
      assert.truthy(events[3]:match("^create: attempt 1 failed %(transient%), retrying in [%d.]+ s$"), events[3])
      events[3] = "retry"
      assert.are.same({ "template: template tpl-1", "create: creating a fake sandbox", "retry",
        "create: creating a fake sandbox (attempt 2)", "package_install: installing numpy",
        "ready: sandbox fake-2 is ready" }, events)
      -- a callback that fails is logged and create goes on
      sb = create({ on_progress = function() error("broken callback") end })
      assert.is_true(sb:is_running())
      assert.truthy(table.concat(logs, "\n"):find("broken callback", 1, true))
      assert.has_error(function() create({ on_progress = "no" }) end,
        "create: option 'on_progress' must be a function, got string \"no\"")
    end)

    it("tears the sandbox down and raises package_install when the install fails", function()
      backend.pip_result = { status = "error", code = 1, error = "RuntimeError: pip install failed",
        stderr = "ERROR: No matching distribution found for nosuchpkg" }
      local ok, err = pcall(create, { additional_packages = { "nosuchpkg" } })
      assert.is_false(ok)
      assert.is_true(E.is(err, E.SandboxStartError))
      assert.are.equal("package_install", err.stage)
      assert.truthy(err.message:find("No matching distribution", 1, true), err.message)
      assert.are.equal(1, backend.count("_terminate"))
      assert.are.equal(0, backend.live_count())
    end)

    it("skips additional_packages with a warning for a non-Python sandbox", function()
      local sb = create({ language = "bash", additional_packages = { "numpy" } })
      assert.are.equal("bash", sb.language)
      assert.are.equal(0, backend.count("_run_code"))
      assert.are.equal(1, #logs)
      assert.truthy(logs[1]:find("^warn: additional_packages skipped"), logs[1])
    end)

    it("rejects bad options before starting anything", function()
      assert.has_error(function() create({ additional_packages = { "numpy; rm -rf /" } }) end)
      assert.has_error(function() create({ timeout = "long" }) end)
      assert.has_error(function() glsb.create("fake", "opts") end)
      local ok, err = pcall(create, { language = "cobol" })
      assert.is_false(ok)
      assert.is_true(E.is(err, E.SandboxStartError))
      assert.truthy(err.message:find("cobol", 1, true))
      assert.are.equal(0, backend.count("_start"))
    end)
  end)

  describe("execute_code", function()
    local sb
    before_each(function() sb = create() end)

    it("returns an ExecutionResult with a duration", function()
      local lines = {}
      local r = sb:execute_code("print(1)", { on_stdout = function(l) lines[#lines + 1] = l end })
      assert.is_true(glsb.ExecutionResult.is(r))
      assert.are.equal(glsb.ExecutionStatus.SUCCESS, r.status)
      assert.are.equal("ran: print(1)\n", r.stdout)
      assert.is_number(r.duration_ms)
      assert.are.same({ "ran: print(1)" }, lines)
      assert.are.equal("python", backend.last("_run_code").opts.language)
    end)

    it("resolves timeouts: nil = provider default, <= 0 = unbounded", function()
      sb:execute_code("a")
      assert.are.equal(120, backend.last("_run_code").opts.timeout)
      sb:execute_code("b", { timeout = 5 })
      assert.are.equal(5, backend.last("_run_code").opts.timeout)
      sb:execute_code("c", { timeout = 0 })
      assert.is_nil(backend.last("_run_code").opts.timeout)
      sb:execute_code("d", { timeout = -1 })
      assert.is_nil(backend.last("_run_code").opts.timeout)
    end)

    it("uploads files to /files/<name> (or upload_dir) before running", function()
      sb:execute_code("x", { files = {
        glsb.SandboxFile.from_bytes("a,b\n", "data.csv"), { filename = "n.txt", data = "N" } } })
      assert.are.equal("a,b\n", backend.files["/files/data.csv"])
      assert.are.equal("N", backend.files["/files/n.txt"])
      assert.are.equal("_upload", backend.calls[#backend.calls - 1].hook)
      sb:execute_code("y", { files = { { filename = "z", data = "Z" } }, upload_dir = "/data/in/" })
      assert.are.equal("Z", backend.files["/data/in/z"])
      assert.has_error(function() sb:execute_code("x", { files = { { filename = "/etc/passwd", data = "" } } }) end)
      assert.has_error(function() sb:execute_code("x", { files = {}, upload_dir = "relative" }) end)
    end)

    it("one timeout, one budget: the upload draws from the call's deadline, the hook gets what is left", function()
      backend.upload_delay = 0.3
      local t0 = glsb.now()
      local r = sb:execute_code("x", { timeout = 1, files = { glsb.SandboxFile.from_bytes("d", "f") } })
      assert.are.equal("success", r.status, tostring(r))
      local up, run = backend.last("_upload").opts, backend.last("_run_code").opts
      assert.is_true(up.deadline >= t0 + 1 and up.deadline < t0 + 1.1, "the call's own deadline")
      assert.is_true(up.timeout <= 1, "no timeout of its own on top (was 60 s)")
      assert.are.equal(up.deadline, run.deadline, "one deadline for the upload and the run")
      assert.is_true(run.timeout <= 0.75 and run.timeout > 0.3, "the run gets what the upload left: " .. run.timeout)
      -- an upload that takes the whole budget: TIMEOUT at the deadline, retry-safe, the code never ran
      backend.upload_delay = 5
      local before = backend.count("_run_code")
      t0 = glsb.now()
      r = sb:execute_command("true", { timeout = 0.4, files = { glsb.SandboxFile.from_bytes("d", "f") } })
      local took = glsb.now() - t0
      assert.are.equal("timeout", r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.truthy(r.error:find("execute_command: the timeout (0.4s) passed while the files were uploaded", 1, true),
        r.error)
      assert.is_true(took >= 0.4 and took < 0.4 + require("glsb.constants").DEADLINE_MARGIN, "took " .. took)
      assert.are.equal(before, backend.count("_run_code"))
      assert.are.equal(0, backend.count("_run_command"))
      -- no limit: the upload has none either
      backend.upload_delay = nil
      sb:execute_code("x", { timeout = 0, files = { glsb.SandboxFile.from_bytes("d", "f") } })
      assert.is_nil(backend.last("_upload").opts.deadline)
      assert.is_nil(backend.last("_upload").opts.timeout)
    end)

    it("reports a failed upload as ERROR, retry-safe, without running the code", function()
      backend.upload_failure = { phase = "receive", code = "RECV_ERROR", message = "reset" }
      local r = sb:execute_code("print(1)", { files = { glsb.SandboxFile.from_bytes("d", "f") } })
      assert.are.equal("error", r.status)
      assert.is_true(r.failure.retry_safe)
      assert.truthy(r.error:find("upload failed", 1, true))
      assert.are.equal(0, backend.count("_run_code"))
    end)

    it("classifies hook failures: unsent -> ERROR retry-safe, timeout -> TIMEOUT, other -> UNKNOWN", function()
      backend.code_results = {
        unsent = { raise = { phase = "connect", code = "COULDNT_CONNECT", message = "refused", retry_safe = true } },
        sendfail = { raise = E.new(E.SandboxExecutionError, "execute", "x",
          { phase = "send", code = "SEND_ERROR", retry_safe = true }) },
        cut = { raise = { phase = "receive", code = "RECV_ERROR", message = "reset", retry_safe = false } },
        slow = { raise = { phase = "receive", code = "OPERATION_TIMEDOUT", message = "timeout", retry_safe = false } },
        bug = { raise = "attempt to index a nil value" },
        deadline = { raise = { phase = "receive", code = "CURLE_28", timeout = true, retry_safe = false } },
        connslow = { raise = { phase = "connect", code = "OPERATION_TIMEDOUT", timeout = true, retry_safe = true } },
        framing = { raise = { phase = "framing", code = "FRAME_TOO_LARGE", retry_safe = false } },
        garbage = function() return 42 end,
        lost = { raise = E.new(E.SandboxNotInitializedError, "execute", "sandbox vanished") },
        badstatus = { status = "fine" },
      }
      local function run(c) return sb:execute_code(c) end
      local r = run("unsent")
      assert.are.equal("error", r.status)
      assert.are.same({ "TransportError", true }, { r.failure.exception_type, r.failure.retry_safe })
      r = run("sendfail")
      assert.are.equal("error", r.status)
      -- the same cause, the same word, whether or not a glsb error wraps it
      assert.are.same({ "TransportError", true }, { r.failure.exception_type, r.failure.retry_safe })
      r = run("cut")
      assert.are.equal("unknown", r.status)
      assert.are.same({ "TransportError", false }, { r.failure.exception_type, r.failure.retry_safe })
      assert.are.equal("TimeoutError", run("slow").failure.exception_type)
      assert.are.equal("TimeoutError", run("deadline").failure.exception_type)
      assert.are.equal("ProviderError", run("bug").failure.exception_type)
      assert.are.equal("ProtocolError", run("framing").failure.exception_type)
      assert.are.equal("timeout", run("slow").status)
      assert.are.equal("unknown", run("bug").status)
      assert.are.equal("timeout", run("deadline").status)
      assert.are.equal("error", run("connslow").status, "a connect timeout never sent the code")
      assert.are.equal("unknown", run("framing").status)
      assert.are.equal("unknown", run("garbage").status)
      assert.are.equal("SandboxNotInitializedError", run("lost").failure.exception_type, "hooks never make it raise")
      assert.are.equal("unknown", run("badstatus").status)
      for _, c in ipairs({ "unsent", "cut", "slow", "bug", "garbage" }) do
        assert.are_not.equal("success", run(c).status)
      end
    end)

    it("keeps what the hook says about the code", function()
      backend.code_results["1/0"] = { status = "error", error = "ZeroDivisionError: division by zero", stderr = "tb" }
      local r = sb:execute_code("1/0")
      assert.are.equal("error", r.status)
      assert.is_nil(r.failure)
      assert.are.equal("ZeroDivisionError: division by zero", r.error)
    end)

    it("validates its arguments", function()
      assert.has_error(function() sb:execute_code(42) end)
      assert.has_error(function() sb:execute_code("x", "opts") end)
      assert.has_error(function() sb:execute_code("x", { timeout = "5" }) end)
      assert.has_error(function() sb:execute_code("x", { on_stdout = "print" }) end)
      assert.has_error(function() sb:execute_code("x", { env = { ["A B"] = "1" } }) end)
    end)
  end)

  describe("execute_command", function()
    it("defaults the timeout to 30 s and passes env and cwd", function()
      local sb = create()
      local r = sb:execute_command("ls -la /files", { env = { A = "1" }, cwd = "/tmp" })
      assert.are.equal("success", r.status)
      assert.are.equal(0, r.code)
      assert.are.equal("cmd: ls -la /files\n", r.stdout)
      local o = backend.last("_run_command").opts
      assert.are.equal(30, o.timeout)
      assert.are.same({ A = "1" }, o.env)
      assert.are.equal("/tmp", o.cwd)
      sb:execute_command("true", { timeout = 0 })
      assert.is_nil(backend.last("_run_command").opts.timeout)
      backend.code_results["false"] = { exit_code = 1 }
      assert.are.equal("error", sb:execute_command("false").status)
      assert.has_error(function() sb:execute_command({ "ls" }) end)
    end)

    it("reports ERROR when the provider has no command channel", function()
      provider.Sandbox._run_command = nil
      local r = create():execute_command("ls")
      assert.are.equal("error", r.status)
      assert.truthy(r.error:find("does not implement _run_command", 1, true))
    end)
  end)

  describe("download_file", function()
    it("returns the bytes, or nil on any failure, and never raises for one", function()
      local sb = create()
      backend.files["/files/out.png"] = "\137PNG"
      assert.are.equal("\137PNG", sb:download_file("/files/out.png"))
      assert.are.equal(60, backend.last("_download").opts.timeout)
      assert.is_nil(sb:download_file("/files/missing"))
      backend.download_failure = { phase = "receive", code = "OPERATION_TIMEDOUT", message = "timed out" }
      assert.is_nil(sb:download_file("/files/out.png", { timeout = 1 }))
      backend.download_failure = E.new(E.SandboxExecutionError, "download", "404 Not Found")
      assert.is_nil(sb:download_file("/files/out.png"))
      backend.download_failure = "boom"
      assert.is_nil(sb:download_file("/files/out.png"))
      assert.are.equal(3, #logs)
      assert.has_error(function() sb:download_file(nil) end)
    end)
  end)

  describe("set_timeout", function()
    it("renews the lease and never raises", function()
      local sb = create()
      assert.is_true(sb:set_timeout(600))
      assert.are.equal(600, backend.last("_set_timeout").arg)
      assert.are.equal(600, sb.timeout)
      backend.set_timeout_failure = E.new(E.CodeInterpreterError, "execute", "500")
      assert.is_false(sb:set_timeout(700))
      assert.are.equal(600, sb.timeout)
      assert.is_false(sb:set_timeout(-1))
      assert.is_false(sb:set_timeout("soon"))
    end)

    it("is a no-op where the provider cannot renew", function()
      local sb = create()
      provider.Sandbox._set_timeout = nil
      assert.is_true(sb:set_timeout(60))
      sb:terminate()
      assert.is_false(sb:set_timeout(60), "after terminate: false, no raise")
    end)
  end)

  describe("terminate", function()
    it("takes a timeout per attempt by the time rule: <= 0 is no limit, NaN and strings are refused", function()
      local sb = create()
      for _, bad in ipairs({ "10", 0 / 0 }) do
        local ok, err = pcall(sb.terminate, sb, { timeout = bad })
        assert.is_false(ok)
        assert.truthy(tostring(err):find("terminate: option 'timeout' must be a number of seconds", 1, true),
          tostring(err))
      end
      assert.is_true(sb:is_running())
      sb:terminate({ timeout = 2 })
      local o = backend.last("_terminate").opts
      assert.are.equal(2, o.timeout)
      assert.is_true(o.deadline > glsb.now() and o.deadline <= glsb.now() + 2, "its deadline: this attempt's 2 s")
      local sb2 = create()
      sb2:terminate({ timeout = 0 })
      o = backend.last("_terminate").opts
      assert.is_nil(o.timeout, "<= 0: no limit")
      assert.is_nil(o.deadline)
      assert.is_false(sb2:is_running())
    end)

    it("retries, then succeeds; a second terminate is a no-op", function()
      local sb = create()
      backend.terminate_failures = { "connection reset", E.http_failure(503) }
      sb:terminate()
      assert.are.equal(3, backend.count("_terminate"))
      assert.is_nil(sb.sandbox_id)
      assert.are.equal(0, backend.live_count())
      sb:terminate()
      assert.are.equal(3, backend.count("_terminate"))
    end)

    it("keeps the handle when every attempt fails, so the caller can retry", function()
      local sb = create()
      backend.terminate_failures = { "connection reset", "connection reset", "connection reset" }
      local ok, err = pcall(sb.terminate, sb)
      assert.is_false(ok)
      assert.is_true(E.is(err, E.SandboxTerminateError))
      assert.are.equal("terminate", err.stage)
      assert.are.equal("fake-1", sb.sandbox_id)
      assert.is_true(sb:is_running())
      sb:terminate()
      assert.is_nil(sb.sandbox_id)
      assert.are.equal(0, backend.live_count())
    end)

    it("does not retry a permanent failure", function()
      local sb = create()
      backend.terminate_failures = { E.http_failure(403) }
      assert.has_error(function() sb:terminate() end)
      assert.are.equal(1, backend.count("_terminate"))
    end)

    it("before start is a no-op", function()
      local sb = provider.Sandbox.new({})
      sb:terminate()
      assert.are.equal(0, backend.count("_terminate"))
    end)

    it("runs on scope exit with <close>", function()
      do
        local sb <close> = create()
        assert.is_true(sb:is_running())
      end
      assert.are.equal(1, backend.count("_terminate"))
      assert.are.equal(0, backend.live_count())
    end)

    it("gives way to a close handler (a lease wrapper's hook) on <close> and at the script's end", function()
      local function leave_scope(x)
        local held <close> = x
        assert.is_not_nil(held)
      end
      local lent = {}
      local sb = create()
      assert.is_nil(sb:_set_close_handler(function(s) lent[#lent + 1] = s end))
      leave_scope(sb)
      assert.are.equal(1, #lent)
      assert.are.equal(sb, lent[1])
      glsb.close_all()
      assert.are.equal(2, #lent)
      assert.are.equal(sb, lent[2])
      assert.are.equal(0, backend.count("_terminate"))
      assert.is_true(sb:is_running())
      -- a handler that fails is logged, never raised from the close
      sb:_set_close_handler(function() error("the pool is gone") end)
      leave_scope(sb)
      assert.matches("the pool is gone", logs[#logs])
      -- taking the handler away gives terminate back; anything but a function or nil is misuse
      assert.is_function(sb:_set_close_handler(nil))
      assert.has_error(function() sb:_set_close_handler("pool") end)
      leave_scope(sb)
      assert.are.equal(1, backend.count("_terminate"))
      assert.is_false(sb:is_running())
    end)
  end)

  describe("use after terminate or before start", function()
    it("raises SandboxNotInitializedError with stage not_initialized", function()
      local sb = create()
      sb:terminate()
      for _, call in ipairs({
        function() return sb:execute_code("print(1)") end,
        function() return sb:execute_command("ls") end,
        function() return sb:download_file("/files/x") end,
      }) do
        local ok, err = pcall(call)
        assert.is_false(ok)
        assert.is_true(E.is(err, E.SandboxNotInitializedError))
        assert.are.equal("not_initialized", err.stage)
        assert.truthy(err.message:find("terminated", 1, true))
      end
      local fresh = provider.Sandbox.new({})
      local ok, err = pcall(fresh.execute_code, fresh, "x")
      assert.is_false(ok)
      assert.truthy(err.message:find("has not been started", 1, true))
    end)
  end)

  describe("cancellation", function()
    local loop = require "glsb.loop"

    it("terminates the sandbox when the task using it is cancelled, and re-raises", function()
      local sb = create()
      backend.code_delay = 5
      local err, elapsed
      glsb.run(function()
        local t0 = loop.now()
        local t = glsb.spawn(function() return sb:execute_code("while True: pass") end)
        glsb.sleep(0.02)
        t:cancel()
        local ok, e = pcall(t.wait, t)
        assert.is_false(ok)
        err, elapsed = e, loop.now() - t0
      end)
      assert.is_true(loop.is_cancelled(err))
      assert.is_true(elapsed < 2, "cancel was immediate")
      assert.are.equal(1, backend.count("_terminate"))
      assert.are.equal(0, backend.live_count())
      assert.is_false(sb:is_running())
    end)

    it("tears down a sandbox whose creation is cancelled", function()
      backend.start_delay = 5
      local err
      glsb.run(function()
        local t = glsb.spawn(function() return create() end)
        glsb.sleep(0.02)
        t:cancel()
        err = select(2, pcall(t.wait, t))
      end)
      assert.is_true(loop.is_cancelled(err))
      assert.are.equal(1, backend.count("_terminate"))
      assert.are.equal(0, backend.live_count())
    end)

    it("runs sandboxes concurrently in tasks", function()
      backend.code_delay = 0.05
      local t0 = loop.now()
      local r1, r2 = glsb.run(function()
        local t1 = glsb.spawn(function() return create():execute_code("print(1)") end)
        local t2 = glsb.spawn(function() return create():execute_code("print(2)") end)
        return glsb.gather(t1, t2)
      end)
      assert.are.equal("ran: print(1)\n", r1.stdout)
      assert.are.equal("ran: print(2)\n", r2.stdout)
      assert.is_true(loop.now() - t0 < 0.095, "the two runs overlapped")
    end)
  end)

  describe("helpers", function()
    it("resolve_timeout", function()
      assert.are.equal(7, sandbox.resolve_timeout(nil, 7))
      assert.is_nil(sandbox.resolve_timeout(0, 7))
      assert.is_nil(sandbox.resolve_timeout(-3, 7))
      assert.are.equal(2.5, sandbox.resolve_timeout(2.5, 7))
      assert.is_nil(sandbox.resolve_timeout(nil, nil))
      assert.has_error(function() sandbox.resolve_timeout("1", 7) end)
    end)
  end)
end)
