-- The provider contract suite: scenarios every provider must pass, whatever
-- transport it speaks. A provider's spec calls
--
--   require("contract.suite")(provider_name, opts_factory, features)
--
-- opts_factory() -> fresh create opts for one sandbox (credentials, emulator
-- endpoint, private directories...). features (all optional):
--   tag                 extra busted tag for the describe block (e.g. "#e2b")
--   leftovers()         -> array of what a terminated sandbox left behind
--                          (workspace dirs, processes...); must be {} after
--                          every terminate and failed create
--   bad_create_opts()   -> opts that make create fail (stage create); default
--                          a template that does not exist
--   missing_package     a package name the provider cannot install (default
--                          "glsb-no-such-package-xyz")
--   package_opts()      -> opts (merged over opts_factory) under which
--                          missing_package fails fast (e.g. an empty index)
--   timeout_keeps_state interrupting code keeps the interpreter (default true)
--   lease_slack         seconds to wait past a lease before checking (default 1.5)
--   streams             output reaches on_stdout/on_stderr while the code runs (default true; false: when
--                       the answer comes);
--                       false: the callbacks must never be called and the output is still returned
--                       (docs/contract.md §7: a provider that cannot stream accepts them and never calls them)
--   renewable_lease     set_timeout changes the lease (default true); false: it is a no-op that
--                       reports success, and the lease given to create is the one that expires
--   background          false: start_command must raise a clear SandboxExecutionError instead of running
--   ports               false: get_host must raise a clear SandboxExecutionError instead of answering
--   last_value          false: the provider cannot report the value of the last expression: r.text must
--                       then be nil, stdout "" (every provider in the tree reports it)
--   delay_next(step, seconds)  makes the next `step` take `seconds` longer on the far side ("upload": the
--                       files upload of an execution; "code": the first request of execute_code, the env
--                       cell where there is one; "command": execute_command's request): an emulator's delay
--                       fault. Without it the budget case checks the bound with the provider's own speed.
--   list                false: glsb.list must raise SandboxStartError[list] (the provider's sandboxes
--                       cannot leave their process)
--   list_filters_metadata  false: the provider keeps no labels, so list is asked without a filter
--   connect_listed      false: a listed sandbox cannot be connected to (local: it belongs to the process
--                       that made it; it is seen, and glsb.kill ends it)
--   call_languages      languages besides python execute_code{language=...} runs in this test setting:
--                       "bash", "javascript", "typescript" (default {"bash"}; the emulators' interpreters
--                       run python only)
--   displays            false: only the main result (the last value's bundle) comes back: display() and
--                       figures shown at the end of a cell do not (OpenSandbox's execd forwards only the
--                       kernel's execute_result); the call's results then end with a note saying so
--   charts              false: figures come back without extra.chart (E2B's chart extraction; default true)
--   host_python         false: the code does not run with this machine's python3 (a live provider), so
--                       the rich results case does not look for matplotlib and pandas here
--   pause               false: sb:pause() must raise a clear SandboxExecutionError[pause] (and
--                       on_timeout = "pause" be refused) instead of pausing; else what was set before the
--                       pause is there after glsb.connect resumed it, and list says "paused" meanwhile
--   snapshot            false: sb:snapshot() must raise a clear SandboxExecutionError[snapshot]; else a
--                       sandbox created from the ref has the files the source had then
--   contexts            false: sb:context() must raise a clear SandboxExecutionError[context]; else a
--                       context keeps state of its own, apart from the default one
local busted = require "busted"
local assert = require "luassert"
local describe, it = busted.describe, busted.it
local before_each, after_each = busted.before_each, busted.after_each
local setup, teardown = busted.setup, busted.teardown
local glsb = require "glsb"
local errors = require "glsb.errors"
local models = require "glsb.models"
local loop = require "glsb.loop"
local constants = require "glsb.constants"

local Status = glsb.ExecutionStatus

local function merge(a, b)
  local out = {}
  for k, v in pairs(a or {}) do out[k] = v end
  for k, v in pairs(b or {}) do out[k] = v end
  return out
end

return function(provider, opts_factory, features)
  features = features or {}
  local tag = features.tag and (" " .. features.tag) or ""
  local leftovers = features.leftovers or function() return {} end

  describe("provider contract: " .. provider .. " #contract" .. tag, function()
    local sb, prev_log

    setup(function() prev_log = glsb.log.set_handler(function() end) end) -- expected warnings
    teardown(function() glsb.log.set_handler(prev_log) end)

    local function create(extra)
      return glsb.create(provider, merge(opts_factory(), extra))
    end

    before_each(function() sb = nil end)
    after_each(function()
      if sb then pcall(sb.terminate, sb) end
      sb = nil
    end)

    it("create gives a running sandbox with an id, and terminate leaves nothing behind", function()
      sb = create()
      assert.is_true(sb:is_running())
      assert.is_string(sb.sandbox_id)
      assert.are_not.equal("", sb.sandbox_id)
      local r = sb:execute_code("print(1)")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("1\n", r.stdout)
      sb:terminate()
      assert.is_false(sb:is_running())
      assert.is_nil(sb.sandbox_id)
      assert.are.same({}, leftovers())
    end)

    it("keeps state across execute_code calls", function()
      sb = create()
      assert.are.equal(Status.SUCCESS, sb:execute_code("import math\nx = 20").status)
      local r = sb:execute_code("print(x * 2 + math.floor(2.5))")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("42\n", r.stdout)
    end)

    it("reports failing code as ERROR with the exception, never raising", function()
      sb = create()
      local r = sb:execute_code("print('before')\nraise ValueError('bad value 7')")
      assert.are.equal(Status.ERROR, r.status)
      assert.are.equal("before\n", r.stdout)
      assert.truthy(r.error:find("ValueError", 1, true), r.error)
      assert.truthy(r.error:find("bad value 7", 1, true), r.error)
      assert.is_number(r.duration_ms)
      -- the exception's parts, one shape on every provider (docs/contract.md §4): name, message, the
      -- traceback as one string
      assert.are.same({ "ValueError", "bad value 7", "string" }, { r.error_name, r.error_value, type(r.traceback) })
      assert.truthy(r.traceback:find("ValueError", 1, true), r.traceback)
      -- the interpreter survives its own exceptions
      assert.are.equal(Status.SUCCESS, sb:execute_code("print('after')").status)
    end)

    if features.streams == false then
      it("gives the streaming callbacks every line when the answer comes, and returns the output", function()
        sb = create()
        local out, err = {}, {}
        local r = sb:execute_code("import sys\nprint('one')\nprint('two')\nprint('oops', file=sys.stderr)", {
          on_stdout = function(l) out[#out + 1] = l end, on_stderr = function(l) err[#err + 1] = l end })
        assert.are.equal(Status.SUCCESS, r.status, tostring(r))
        assert.are.equal("one\ntwo\n", r.stdout)
        assert.are.equal("oops\n", r.stderr)
        assert.are.same({ "one", "two" }, out)
        assert.are.same({ "oops" }, err)
        local c = {}
        sb:execute_command("echo a; echo b", { on_stdout = function(l) c[#c + 1] = l end })
        assert.are.same({ "a", "b" }, c)
      end)
    end

    if features.streams ~= false then it("streams stdout and stderr line by line while the code runs", function()
      sb = create()
      local out, err, times = {}, {}, {}
      local started = loop.now()
      local r = sb:execute_code(
        "import sys, time\nprint('one', flush=True)\ntime.sleep(0.4)\nprint('two')\nprint('oops', file=sys.stderr)",
        {
          on_stdout = function(line) out[#out + 1] = line times[#times + 1] = loop.now() - started end,
          on_stderr = function(line) err[#err + 1] = line end,
        })
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.same({ "one", "two" }, out)
      assert.are.same({ "oops" }, err)
      assert.are.equal("one\ntwo\n", r.stdout)
      assert.are.equal("oops\n", r.stderr)
      -- 'one' arrived before the sleep ended
      assert.is_true(times[1] < times[2] - 0.2, "first line was not streamed early")
    end) end

    it("returns TIMEOUT when code overruns, without hanging", function()
      sb = create()
      sb:execute_code("kept = 'yes'")
      local started = loop.now()
      local r = sb:execute_code("import time\nwhile True:\n    time.sleep(0.05)", { timeout = 0.5 })
      local took = loop.now() - started
      assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
      assert.is_true(took >= 0.45 and took < 5, "took " .. took)
      if features.timeout_keeps_state ~= false then
        local r2 = sb:execute_code("print(kept)")
        assert.are.equal(Status.SUCCESS, r2.status, tostring(r2))
        assert.are.equal("yes\n", r2.stdout)
      end
    end)

    -- One timeout, one budget (glsb.constants): from the start of the call, files upload, env and every
    -- request draw from one deadline, so a call given `timeout = T` ends within T + DEADLINE_MARGIN (1.5 s:
    -- DEADLINE_GRACE for the far side's verdict on what it killed at T, and the host's clean-up). A bound
    -- on a correctness property, not a speed figure: a provider that gives each sub-step a fresh T (the
    -- upload, an env cell, a re-send) passes T + margin as soon as the slow steps below take their time.
    it("one timeout, one budget: timeout = 2 with files and env ends within 2 s + DEADLINE_MARGIN", function()
      sb = create()
      local T, margin = 2, constants.DEADLINE_MARGIN
      local files = { glsb.SandboxFile.from_bytes(string.rep("x", 64 * 1024), "budget.bin") }
      local env = { GLSB_ONE_CALL = "set" }
      -- delays: step -> seconds, each more than the margin where it matters (a fresh budget after it overruns)
      local function bounded(what, delays, run)
        if features.delay_next then
          for _, step in ipairs({ "upload", "code", "command" }) do
            if delays[step] then features.delay_next(step, delays[step]) end
          end
        end
        local started = loop.now()
        local r = run()
        local took = loop.now() - started
        assert.are.equal(Status.TIMEOUT, r.status, what .. ": " .. tostring(r))
        assert.is_true(took <= T + margin, string.format("%s took %.2fs, over %gs + %gs", what, took, T, margin))
        return r
      end
      local code = "import time\nwhile True:\n    time.sleep(0.05)"
      bounded("execute_code (slow upload)", { upload = 1.6, code = 0.3 }, function()
        return sb:execute_code(code, { timeout = T, files = files, env = env })
      end)
      bounded("execute_code (slow first request: the env cell where there is one)", { code = 1.6 }, function()
        return sb:execute_code(code, { timeout = T, files = files, env = env })
      end)
      bounded("execute_command (slow upload)", { upload = 1.6, command = 0.3 }, function()
        return sb:execute_command("sleep 30", { timeout = T, files = files, env = env })
      end)
      -- the sandbox still serves, and the env of a call is gone in the next (also after a timeout)
      local r = sb:execute_code("import os\nprint(os.environ.get('GLSB_ONE_CALL'))")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("None\n", r.stdout)
      assert.are.equal(string.rep("x", 64 * 1024), sb:download_file("/files/budget.bin"))
    end)

    it("uploads files to /files/<name> and upload_dir, and downloads what the code wrote", function()
      sb = create()
      local bin = "\0\1\2\255binary\n"
      local r = sb:execute_code(
        "d = open('/files/in.bin','rb').read()\nopen('/files/out.bin','wb').write(d[::-1])\n"
          .. "print(open('/home/user/up/notes.txt').read())",
        { files = { glsb.SandboxFile.from_bytes(bin, "in.bin") } })
      assert.are.equal(Status.ERROR, r.status) -- notes.txt is not there yet
      r = sb:execute_code("print(open('/home/user/up/notes.txt').read(), end='')", {
        files = { glsb.SandboxFile.from_bytes("hello notes", "notes.txt") }, upload_dir = "/home/user/up" })
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("hello notes", r.stdout)
      assert.are.equal(bin:reverse(), sb:download_file("/files/out.bin"))
    end)

    it("download_file of a missing path returns nil", function()
      sb = create()
      assert.is_nil(sb:download_file("/files/does-not-exist.txt"))
      assert.is_nil(sb:download_file("/home/user/nope/nothing"))
      assert.is_true(sb:is_running())
    end)

    it("execute_command reports exit codes, env, cwd and a timeout", function()
      sb = create()
      local ok = sb:execute_command("echo hi")
      assert.are.equal(Status.SUCCESS, ok.status)
      assert.are.equal(0, ok.code)
      assert.are.equal("hi\n", ok.stdout)
      local bad = sb:execute_command("echo to-err >&2; exit 3")
      assert.are.equal(Status.ERROR, bad.status)
      assert.are.equal(3, bad.code)
      assert.are.equal("to-err\n", bad.stderr)
      local env = sb:execute_command("echo \"$GLSB_A-$GLSB_B\"", { env = { GLSB_A = "x", GLSB_B = "y" } })
      assert.are.equal("x-y\n", env.stdout)
      local cwd = sb:execute_command("mkdir -p /tmp/w && cd /tmp/w && pwd")
      assert.are.equal("/tmp/w\n", cwd.stdout)
      local started = loop.now()
      local slow = sb:execute_command("sleep 30", { timeout = 0.5 })
      assert.are.equal(Status.TIMEOUT, slow.status, tostring(slow))
      assert.is_true(loop.now() - started < 5)
      assert.are.equal(Status.SUCCESS, sb:execute_command("true").status)
    end)

    it("after the lease every call raises one error saying it expired; set_timeout renews it where it can",
      function()
      if features.renewable_lease == false then
        -- set_timeout is a no-op that reports success: the lease given to create is the one that ends
        sb = create({ timeout = 2 })
        assert.is_true(sb:set_timeout(120))
        assert.is_false(sb:set_timeout(-1)) -- bad input: logged, never raised
        glsb.sleep(2 + (features.lease_slack or 1.5))
      else
        sb = create({ timeout = 60 })
        assert.is_true(sb:set_timeout(120))
        assert.is_false(sb:set_timeout(-1)) -- bad input: logged, never raised
        assert.is_true(sb:set_timeout(1))
        glsb.sleep(1 + (features.lease_slack or 1.5))
      end
      assert.is_false(sb:is_running(), "is_running() after the lease ended")
      local calls = {
        function() return sb:execute_code("print(1)") end,
        function() return sb:execute_command("true") end,
        function() return sb:download_file("/files/x") end,
      }
      for i, call in ipairs(calls) do
        local ok, err = pcall(call)
        assert.is_false(ok, "call " .. i .. " did not raise after the lease ended")
        assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
        assert.are.equal(glsb.Stage.NOT_INITIALIZED, err.stage)
        assert.matches("lease expired", tostring(err))
      end
      assert.is_false(sb:set_timeout(60), "a lease that ended cannot be renewed")
      assert.are.same({}, leftovers())
    end)

    it("a glsb-lua script that ends, normally or by an error, leaves no sandbox running", function()
      local shell = require "support.shell"
      local cjson = require "cjson"
      for _, ending in ipairs({ "", "error('the script failed')" }) do
        local chunk = ("local glsb = require 'glsb'\nlocal a = glsb.create(%q, require('cjson').decode(%q))\n"
          .. "local b = glsb.create(%q, require('cjson').decode(%q))\nassert(a:is_running() and b:is_running())\n"
          .. "print('started')\n%s"):format(provider, cjson.encode(opts_factory()), provider,
          cjson.encode(opts_factory()), ending)
        local out, code = shell.sh(shell.join({ shell.repo .. "/build/glsb-lua", "-e", chunk }) .. " 2>&1")
        assert.matches("started", out)
        assert.are.equal(ending == "" and 0 or 1, code, out)
        assert.are.same({}, leftovers(), "after a script that ended with " .. (ending == "" and "success" or "an error"))
      end
    end)

    it("terminate twice is fine, and use after terminate raises SandboxNotInitializedError", function()
      sb = create()
      sb:terminate()
      sb:terminate()
      local ok, err = pcall(sb.execute_code, sb, "print(1)")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
      assert.are.equal(glsb.Stage.NOT_INITIALIZED, err.stage)
      ok, err = pcall(sb.execute_command, sb, "true")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
      ok, err = pcall(sb.download_file, sb, "/files/x")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
      assert.is_false(sb:set_timeout(10))
      assert.are.same({}, leftovers())
    end)

    it("a failed additional_packages install raises SandboxStartError(package_install) and tears down", function()
      local opts = merge(opts_factory(), features.package_opts and features.package_opts() or {})
      opts.additional_packages = { features.missing_package or "glsb-no-such-package-xyz" }
      local ok, err = pcall(glsb.create, provider, opts)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.are.equal(glsb.Stage.PACKAGE_INSTALL, err.stage)
      -- the tool's own words are in the message, once, without digging into err.cause
      local text = tostring(err)
      assert.are.equal(1, select(2, text:gsub("output %(last lines%)", "")), text)
      assert.is_nil(text:find("<error table>", 1, true))
      assert.are.same({}, leftovers())
    end)

    it("cancelling a task that uses the sandbox terminates the sandbox", function()
      sb = create()
      local started = loop.now()
      glsb.run(function()
        local t = glsb.spawn(function() return sb:execute_code("import time\ntime.sleep(30)") end)
        glsb.sleep(0.3)
        t:cancel()
        local ok, err = pcall(t.wait, t)
        assert.is_false(ok)
        assert.is_true(loop.is_cancelled(err), tostring(err))
      end)
      assert.is_true(loop.now() - started < 10)
      assert.is_false(sb:is_running())
      local ok, err = pcall(sb.execute_code, sb, "print(1)")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
      assert.are.same({}, leftovers())
    end)

    it("runs sandboxes concurrently from tasks", function()
      local a, b
      glsb.run(function()
        local t1 = glsb.spawn(function() return create() end)
        local t2 = glsb.spawn(function() return create() end)
        a, b = glsb.gather(t1, t2)
        -- Each execution reports when it ran by the wall clock both sandboxes share with the host.
        local code = "import time; s = time.time(); time.sleep(0.5); print(s, time.time())"
        local r1 = glsb.spawn(function() return a:execute_code(code) end)
        local r2 = glsb.spawn(function() return b:execute_code(code) end)
        local x, y = glsb.gather(r1, r2)
        local a0, a1 = x.stdout:match("^(%S+) (%S+)\n$")
        local b0, b1 = y.stdout:match("^(%S+) (%S+)\n$")
        assert.is_truthy(a0 and b0, x.stdout .. y.stdout)
        assert.is_true(tonumber(a0) < tonumber(b1) and tonumber(b0) < tonumber(a1),
          "the two executions did not overlap: " .. x.stdout .. y.stdout)
      end)
      assert.are_not.equal(a.sandbox_id, b.sandbox_id)
      a:terminate()
      b:terminate()
      assert.are.same({}, leftovers())
    end)

    it("a failed upload is ERROR with retry_safe, and the code did not run", function()
      sb = create()
      local r = sb:execute_code("open('/tmp/ran.txt', 'w').write('ran')", {
        files = { glsb.SandboxFile.from_bytes("x", "f.txt") }, upload_dir = "/proc/glsb-not-writable" })
      assert.are.equal(Status.ERROR, r.status, tostring(r))
      assert.is_table(r.failure)
      assert.is_true(r.failure.retry_safe)
      assert.truthy(r.error:find("upload", 1, true), r.error)
      local check = sb:execute_code("import os\nprint(os.path.exists('/tmp/ran.txt'))")
      assert.are.equal("False\n", check.stdout)
    end)

    it("names every failure with one word of the closed set glsb.FailureType, the same for the same cause",
      function()
      sb = create()
      local Type = glsb.FailureType
      local function check(r, want)
        assert.is_table(r.failure, tostring(r))
        assert.is_true(models.is_failure_type(r.failure.exception_type), tostring(r))
        assert.are.equal(want, r.failure.exception_type, tostring(r))
        assert.is_true(r.failure.provider_type == nil or type(r.failure.provider_type) == "string")
      end
      check(sb:execute_code("import time\nwhile True:\n    time.sleep(0.05)", { timeout = 0.5 }), Type.TIMEOUT)
      check(sb:execute_command("sleep 30", { timeout = 0.5 }), Type.TIMEOUT)
      local up = sb:execute_code("print(1)", { files = { glsb.SandboxFile.from_bytes("x", "f.txt") },
        upload_dir = "/proc/glsb-not-writable" })
      check(up, Type.UPLOAD)
      assert.is_true(up.failure.retry_safe)
      -- code that fails names no failure: its outcome is the code's own (r.error)
      assert.is_nil(sb:execute_code("raise ValueError('v')").failure)
      assert.is_nil(sb:execute_command("exit 4").failure)
    end)

    it("the value of the last expression is r.text, never printed to stdout too", function()
      sb = create()
      local r = sb:execute_code("x = 40\nx + 2")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("", r.stdout)
      if features.last_value == false then
        assert.is_nil(r.text)
        return
      end
      assert.are.equal("42", r.text)
      r = sb:execute_code("print('shown')\n'a' * 2")
      assert.are.equal("shown\n", r.stdout)
      assert.are.equal("aa", r.text) -- a string's repr without its outer quotes, as E2B shows it
      assert.is_nil(sb:execute_code("y = 1").text)
      assert.is_nil(sb:execute_code("None").text)
    end)

    -- width, height of a PNG (its IHDR), or nil when the bytes are not a PNG
    local function png_size(data)
      if type(data) ~= "string" or data:sub(1, 8) ~= "\137PNG\r\n\26\n" or data:sub(13, 16) ~= "IHDR" then return nil end
      local w, h = string.unpack(">I4I4", data, 17)
      return w, h
    end

    -- 4 x 3 inches at 50 dpi, one axes filling it, no frame, no padding: 200 x 150 pixels whether the
    -- provider draws the whole figure or its tight box (as matplotlib-inline does)
    local FIGURE = "plt.rcParams['savefig.pad_inches'] = 0\nfig = plt.figure(figsize=(4, 3), dpi=50)\n"
      .. "ax = fig.add_axes([0, 0, 1, 1])\nax.axis('off')\n"

    -- matplotlib and pandas must be importable by the python3 that runs the code: this machine's, for the
    -- local sandbox and the emulators; without them the case is registered pending with the reason
    local python = require "support.python"
    local rich_it = (features.host_python == false or python.has("matplotlib, pandas")) and it
      or function(name) busted.pending(name .. ": " .. python.REASON) end
    rich_it("rich results: a figure is one PNG of its size, a DataFrame html, display() in order, none is {}", function()
      sb = create()
      -- a figure left open at the end of the cell
      local r = sb:execute_code("import matplotlib.pyplot as plt\n" .. FIGURE .. "_ = ax.hist([10, 20, 20, 30, 40])",
        { timeout = 120 })
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.is_nil(r.text)
      if features.displays == false then
        assert.are.equal(0, #r:images(), tostring(r.results[1]))
        assert.are.equal(1, #r.results)
        assert.is_true(glsb.results.is_note(r.results[1]))
        assert.matches("figure", r.results[1].text)
      else
        assert.are.equal(1, #r.results, tostring(r.results[2]))
        local b = r.results[1]
        assert.is_false(b.is_main_result)
        assert.are.equal(1, #r:images())
        assert.are.equal("image/png", r:images()[1].mime)
        assert.are.same({ 200, 150 }, { png_size(b.png) })
        if features.charts ~= false then
          assert.are.equal("bar", b.extra.chart.type)
          assert.is_true(#b.extra.chart.elements > 0)
        end
        -- the figure was closed: the next cell shows nothing
        assert.are.same({}, sb:execute_code("x = 1").results)
      end
      -- a figure as the cell's value is the main result, on every provider
      r = sb:execute_code("import matplotlib, matplotlib.figure\nmatplotlib.rcParams['savefig.pad_inches'] = 0\n"
        .. "f = matplotlib.figure.Figure(figsize=(4, 3), dpi=50)\na = f.add_axes([0, 0, 1, 1])\na.axis('off')\n"
        .. "_ = a.plot([1, 3, 2])\nf")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal(1, #r.results, tostring(r.results[2]))
      assert.is_true(r.results[1].is_main_result)
      assert.are.same({ 200, 150 }, { png_size(r.results[1].png) })
      assert.are.equal("<Figure size 200x150 with 1 Axes>", r.text)
      -- a DataFrame: html and its text
      r = sb:execute_code("import pandas as pd\npd.DataFrame({'kind': ['a', 'b'], 'n': [3, 4]})")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal(1, #r.results)
      assert.is_true(r.results[1].is_main_result)
      assert.matches("<table", r.results[1].html)
      assert.matches("kind", r.results[1].text)
      assert.are.equal(r.text, r.results[1].text)
      -- display() of two objects: two bundles in order, then the main result
      r = sb:execute_code("class Bold:\n    def _repr_html_(self):\n        return '<b>bold</b>'\n"
        .. "display(Bold(), 'second')\n7")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      if features.displays == false then
        assert.are.equal(2, #r.results)
        assert.are.equal("7", r.results[1].text)
        assert.is_true(glsb.results.is_note(r.results[2]))
      else
        assert.are.equal(3, #r.results)
        assert.are.equal("<b>bold</b>", r.results[1].html)
        assert.are.equal("second", r.results[2].text)
        assert.is_false(r.results[1].is_main_result or r.results[2].is_main_result)
        assert.are.equal("7", r.results[3].text)
        assert.is_true(r.results[3].is_main_result)
      end
      -- a cell that displays nothing has no results
      r = sb:execute_code("print(1)")
      assert.are.same({}, r.results)
      assert.is_false(r.results_truncated)
    end)

    it("caps each stream at glsb.output.CAP with the same flag and note", function()
      local output = require "glsb.output"
      sb = create()
      local r = sb:execute_code("import sys\nsys.stdout.write('x' * (11 * 1024 * 1024))\nsys.stdout.flush()\n"
        .. "print('tail')\nprint('small', file=sys.stderr)")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r):sub(1, 300))
      assert.is_true(r.stdout_truncated)
      assert.is_false(r.stderr_truncated)
      assert.are.equal(string.rep("x", output.CAP), r.stdout:sub(1, output.CAP))
      local note = r.stdout:sub(output.CAP + 1)
      assert.matches("^\n%[glsb: output truncated at " .. output.CAP .. " bytes; %d+ more bytes dropped%]\n$", note)
      assert.are.equal("small\n", r.stderr)
      -- one line longer than a frame of any transport is capped too, not an UNKNOWN
      r = sb:execute_command("head -c 20000000 /dev/zero | tr '\\0' y")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r):sub(1, 300))
      assert.is_true(r.stdout_truncated)
      assert.are.equal(output.CAP, #r.stdout - #r.stdout:match("\n%[glsb: output truncated.*$"))
    end)

    it("a failed command gives the same words on every provider", function()
      sb = create()
      local r = sb:execute_command("exit 3")
      assert.are.equal(Status.ERROR, r.status)
      assert.are.equal(3, r.code)
      assert.are.equal("command exited with code 3", r.error)
    end)

    it("sb.files write and read report their progress in bytes as the bytes move", function()
      sb = create()
      local data = string.rep("0123456789abcdef", 6 * 1024 * 1024 // 16) -- 6 MiB: more than one slice
      local up, down = {}, {}
      assert.is_true(sb.files:write("/tmp/glsb-progress.bin", data, {
        on_progress = function(done, total) up[#up + 1] = { done, total } end }))
      assert.is_true(#up >= 1, "write reported no progress")
      for i, p in ipairs(up) do
        assert.are.equal(#data, p[2], "write's total is the data's size")
        assert.is_true(p[1] >= (up[i - 1] or { 0 })[1] and p[1] <= #data, "done only grows, up to the total")
      end
      assert.are.equal(#data, up[#up][1], "the last report is the whole")
      local back = sb.files:read("/tmp/glsb-progress.bin", {
        on_progress = function(done, total) down[#down + 1] = { done, total } end })
      assert.is_true(back == data)
      assert.is_true(#down >= 1, "read reported no progress")
      for i, p in ipairs(down) do
        assert.is_true(p[2] == nil or p[2] >= #data, "read's total, when known, covers the data")
        assert.is_true(p[1] >= (down[i - 1] or { 0 })[1], "done only grows")
      end
      assert.is_true(down[#down][1] >= #data, "the last report covers the data")
      -- a callback that raises is logged; the transfer goes on
      assert.is_true(sb.files:write("/tmp/glsb-progress.bin", "x", { on_progress = function() error("boom") end }))
    end)

    it("sb.files writes, reads, lists, makes and removes without running code", function()
      sb = create()
      local f = sb.files
      local home = sb.workspace_root or "/home/user"   -- where relative paths land
      assert.is_true(f:make_dir(home .. "/fs/sub"))
      assert.is_false(f:make_dir(home .. "/fs/sub"), "make_dir of an existing directory")
      assert.is_true(f:write(home .. "/fs/a.txt", "alpha\0bytes"))
      assert.is_true(f:write("fs/b.bin", "\255\254"))              -- relative: below the workspace root
      assert.are.equal("alpha\0bytes", f:read(home .. "/fs/a.txt"))
      assert.are.equal("\255\254", f:read(home .. "/fs/b.bin"))
      local listed = {}
      for _, e in ipairs(f:list(home .. "/fs")) do listed[#listed + 1] = e.name .. ":" .. e.type end
      assert.are.same({ "a.txt:file", "b.bin:file", "sub:dir" }, listed)
      -- "./fs" and "fs" are the same folder, "." the workspace root itself
      local rel = {}
      for _, e in ipairs(f:list("./fs")) do rel[#rel + 1] = e.path end
      assert.are.same({ home .. "/fs/a.txt", home .. "/fs/b.bin", home .. "/fs/sub" }, rel)
      local at_root = false
      for _, e in ipairs(f:list(".")) do at_root = at_root or e.path == home .. "/fs" end
      assert.is_true(at_root, "files:list('.') lists the workspace root")
      assert.is_true(f:exists(home .. "/fs/a.txt"))
      f:remove(home .. "/fs")
      assert.is_false(f:exists(home .. "/fs/a.txt"))
      f:remove(home .. "/fs") -- a missing path is fine
      local ok, err = pcall(f.read, f, home .. "/fs/a.txt")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
      assert.are.equal(glsb.Stage.FILES, err.stage)
      assert.are.equal("x", sb:execute_code(("print(open(%q, 'w').write('x') and open(%q).read(), end='')")
        :format(home .. "/w.txt", home .. "/w.txt")).stdout)
      assert.are.equal("x", f:read("w.txt"), "files and code see the same filesystem")
      sb:terminate()
      ok, err = pcall(f.read, f, "w.txt")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
    end)

    it("start_command runs in the background: output so far, wait, kill", function()
      sb = create()
      if features.background == false then
        local ok, err = pcall(sb.start_command, sb, "sleep 1")
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
        assert.matches("cannot run background commands", tostring(err))
        return
      end
      local p = sb:start_command("echo first; sleep 0.3; echo second >&2; exit 4")
      local r = p:wait(10)
      assert.are.equal(Status.ERROR, r.status)
      assert.are.equal(4, r.code)
      assert.are.same({ "first\n", "second\n" }, { r.stdout, r.stderr })
      local slow = sb:start_command("echo up; sleep 30")
      local deadline = loop.now() + 5
      while slow:output() == "" and loop.now() < deadline do glsb.sleep(0.05) end
      assert.are.equal("up\n", (slow:output()))
      assert.is_false(slow:done())
      assert.is_nil(slow:wait(0.1))
      assert.is_true(slow:kill())
      local killed = slow:wait(10)
      assert.are_not.equal(Status.SUCCESS, killed.status)
      assert.is_true(slow:done())
      assert.are.equal(Status.SUCCESS, sb:execute_command("true").status, "the sandbox is still usable")
    end)

    it("get_host names where a port is reached, or says clearly that there is none", function()
      sb = create()
      if features.ports == false then
        local ok, err = pcall(sb.get_host, sb, 8000)
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
        assert.matches("exposes no ports", tostring(err))
        assert.are.equal(glsb.Stage.GET_HOST, err.stage)
      else
        assert.matches("8000", sb:get_host(8000))
      end
      assert.has_error(function() sb:get_host(0) end)
      assert.has_error(function() sb:get_host("80") end)
    end)

    -- The fields info() and list() have on every provider (glsb.sandbox.INFO_FIELDS): the same names,
    -- times in one form, a provider's extras only under its own key.
    local ISO = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$"
    local function common_fields(t, also)
      local allowed = { [provider] = true }
      for _, k in ipairs(require("glsb.sandbox").INFO_FIELDS) do allowed[k] = true end
      for k in pairs(also or {}) do allowed[k] = true end
      for k in pairs(t) do assert.is_true(allowed[k] == true, "a field outside the common set: " .. tostring(k)) end
      assert.are.equal(provider, t.provider)
      assert.is_string(t.sandbox_id)
      for _, k in ipairs({ "started_at", "ends_at" }) do
        if t[k] ~= nil then assert.matches(ISO, t[k], 1, false, k) end
      end
      if t.server_state ~= nil then assert.are.equal(t.server_state:lower(), t.server_state) end
      if t.template_id ~= nil then assert.is_string(t.template_id) end
      assert.is_true(t[provider] == nil or type(t[provider]) == "table")
    end

    it("metadata and info() are read back on every provider, in the same fields", function()
      sb = create({ metadata = { team = "ml", run = "7" } })
      assert.are.same({ team = "ml", run = "7" }, sb.metadata)
      local i = sb:info()
      common_fields(i)
      assert.are.equal("running", i.state)
      assert.are.equal(sb.sandbox_id, i.sandbox_id)
      assert.are.same({ team = "ml", run = "7" }, i.metadata)
      assert.matches(ISO, i.started_at)
      assert.matches(ISO, i.ends_at)
      assert.is_true(i.server_state == nil or i.server_state == "running", tostring(i.server_state))
      sb:terminate()
      assert.are.equal("terminated", sb:info().state)
    end)

    -- opts_factory's options that `what` ("list", "connect") declares: its credentials and endpoints
    local function only(what, extra)
      local schema = require("glsb.sandbox").schema(glsb.provider(provider).Sandbox, what)
      local out = {}
      for k, v in pairs(opts_factory()) do if schema[k] ~= nil then out[k] = v end end
      return merge(out, extra)
    end

    it("list() gives refs with the same fields as info(), and what connect needs", function()
      if features.list == false then
        local ok, err = pcall(glsb.list, provider, only("list"))
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
        assert.are.equal(glsb.Stage.LIST, err.stage)
        return
      end
      sb = create({ metadata = { suite = "list-" .. provider } })
      local ref = sb:ref()
      local refs = glsb.list(provider, only("list", features.list_filters_metadata == false and {}
        or { metadata = { suite = "list-" .. provider } }))
      local mine
      for _, r in ipairs(refs) do if r.sandbox_id == sb.sandbox_id then mine = r end end
      assert.is_table(mine, "the sandbox is listed")
      common_fields(mine, ref)
      assert.are.equal("running", mine.state)
      if features.list_filters_metadata ~= false then
        assert.are.same({ suite = "list-" .. provider }, mine.metadata)
      end
      if features.connect_listed == false then
        -- seen, not reached: connect says why (glsb.kill still ends it: the next case)
        local ok, err = pcall(glsb.connect, provider, mine, only("connect"))
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
        return
      end
      -- a listed ref is enough to connect to the sandbox
      local again = glsb.connect(provider, mine, only("connect"))
      local r = again:execute_code("print(6 * 7)")
      assert.are.equal("42\n", r.stdout, tostring(r))
      pcall(again.terminate, again)
    end)

    it("glsb.kill ends a sandbox by its id, without its handle; a gone id is SandboxStartError[connect]", function()
      sb = create({ metadata = { suite = "kill-" .. provider } })
      local id = sb.sandbox_id
      assert.is_true(glsb.kill(provider, id, only("kill")))
      if features.list ~= false then
        for _, r in ipairs(glsb.list(provider, only("list"))) do
          assert.are_not.equal(id, r.sandbox_id, "a killed sandbox is not listed")
        end
      end
      -- the handle finds it gone: a call does not succeed (a result saying so, or a not-running error)
      local ok, r = pcall(sb.execute_code, sb, "print(1)")
      assert.is_true(not ok or r.status ~= Status.SUCCESS, tostring(r))
      local again, err = pcall(glsb.kill, provider, id, only("kill"))
      assert.is_false(again)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.are.equal(glsb.Stage.CONNECT, err.stage)
      if features.pause ~= false then
        -- a paused sandbox is killed as it is (not resumed first)
        local paused = create()
        assert.is_true(paused:pause())
        assert.is_true(glsb.kill(provider, paused.sandbox_id, only("kill")))
        if features.list ~= false then
          for _, listed in ipairs(glsb.list(provider, only("list"))) do
            assert.are_not.equal(paused.sandbox_id, listed.sandbox_id, "a killed paused sandbox is not listed")
          end
        end
        pcall(paused.terminate, paused)
      end
    end)

    it("execute_code takes a language per call where the provider runs it, else refuses clearly", function()
      sb = create()
      local snippets = { bash = "echo from-bash", javascript = "console.log('from-javascript')",
        typescript = "const who: string = 'typescript'\nconsole.log('from-' + who)" }
      for _, lang in ipairs(features.call_languages or { "bash" }) do
        assert.is_string(snippets[lang], "the suite has no snippet in " .. lang)
        local r = sb:execute_code(snippets[lang], { language = lang })
        assert.are.equal(Status.SUCCESS, r.status, tostring(r))
        assert.are.equal("from-" .. lang .. "\n", r.stdout)
      end
      local ok, err = pcall(sb.execute_code, sb, "1", { language = "cobol" })
      assert.is_false(ok)
      -- the refusal names the languages the provider has: python and every one run above
      local has = assert(tostring(err):match("does not run language 'cobol' %(it runs: ([^)]*)%)"), tostring(err))
      for _, lang in ipairs({ "python", table.unpack(features.call_languages or { "bash" }) }) do
        assert.truthy((", " .. has .. ","):find(", " .. lang .. ",", 1, true), lang .. " not among: " .. has)
      end
    end)

    if features.pause == false then
      it("pause is refused clearly where the provider cannot pause", function()
        sb = create()
        local ok, err = pcall(sb.pause, sb)
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
        assert.are.equal("pause", err.stage)
        assert.matches("cannot pause a sandbox: ", tostring(err))
        assert.are.equal(Status.SUCCESS, sb:execute_code("1").status, "the sandbox runs on")
        ok, err = pcall(glsb.create, provider, merge(opts_factory(), { on_timeout = "pause" }))
        assert.is_false(ok)
        assert.matches("cannot pause a sandbox at its timeout", err)
      end)
    else
      it("pause keeps what was set; a paused sandbox is listed as paused; connect resumes it", function()
        sb = create { metadata = { suite = "pause-" .. provider } }
        assert.are.equal(Status.SUCCESS, sb:execute_code("kept = 'before the pause'").status)
        assert.are.equal(0, sb:execute_command("echo on-disk > /tmp/glsb-pause.txt").code)
        assert.is_true(sb:pause())
        assert.are.equal("paused", sb:info().state)
        local ok, err = pcall(sb.execute_code, sb, "1")
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxNotInitializedError))
        if features.list ~= false then
          local refs = glsb.list(provider, merge(only("list"), { metadata = { suite = "pause-" .. provider } }))
          assert.are.equal(1, #refs)
          assert.matches("^[Pp]aused$", refs[1].state)
        end
        local again = glsb.connect(provider, sb:ref(), only("connect"))
        sb = again -- terminated after the case
        assert.are.equal("before the pause\n", again:execute_code("print(kept)").stdout)
        assert.are.equal("on-disk\n", again:execute_command("cat /tmp/glsb-pause.txt").stdout)
      end)
    end

    if features.snapshot == false then
      it("snapshot is refused clearly where the provider has none", function()
        sb = create()
        local ok, err = pcall(sb.snapshot, sb)
        assert.is_false(ok)
        assert.are.equal("snapshot", err.stage)
        assert.matches("cannot snapshot a sandbox: ", tostring(err))
      end)
    else
      it("snapshot gives a template ref; a sandbox created from it has the files as they were", function()
        sb = create()
        assert.are.equal(0, sb:execute_command("mkdir -p /tmp/snap && echo snapped > /tmp/snap/f.txt").code)
        local ref = sb:snapshot()
        assert.are.equal(provider, ref.provider)
        assert.are.equal("snapshot", ref.kind)
        assert.are.equal(0, sb:execute_command("echo changed > /tmp/snap/f.txt").code)
        local from = create { template = ref }
        local r = from:execute_command("cat /tmp/snap/f.txt")
        from:terminate()
        assert.are.equal("snapped\n", r.stdout, tostring(r))
      end)
    end

    if features.contexts == false then
      it("contexts are refused clearly where the provider has one interpreter", function()
        sb = create()
        local ok, err = pcall(sb.context, sb)
        assert.is_false(ok)
        assert.are.equal("context", err.stage)
        assert.matches("has no code contexts of its own: ", tostring(err))
      end)
    else
      it("a context has its own state, cwd and env; the default context is untouched", function()
        sb = create()
        assert.are.equal(Status.SUCCESS, sb:execute_code("x = 'default'").status)
        local ctx = sb:context { cwd = "/tmp", env = { GLSB_CTX = "ctx" } }
        assert.are.equal(Status.SUCCESS, ctx:execute_code("x = 'context'").status)
        local r = ctx:execute_code("import os\nprint(x, os.getcwd(), os.environ.get('GLSB_CTX'))")
        assert.are.equal("context /tmp ctx\n", r.stdout, tostring(r))
        assert.are.equal("default\n", sb:execute_code("print(x)").stdout)
        ctx:close()
        local ok = pcall(ctx.execute_code, ctx, "1")
        assert.is_false(ok)
      end)
    end

    it("options are strict: a typo is an argument error naming the closest key, before anything starts", function()
      local opts = opts_factory()
      opts.timout = 5
      local ok, err = pcall(glsb.create, provider, opts)
      assert.is_false(ok)
      assert.is_string(err, "misuse is a plain error, not a glsb error object")
      assert.matches("create: unknown option 'timout' %(did you mean 'timeout'%?%)", err)
      opts.timout, opts.keep_alive = nil, "yes"
      ok, err = pcall(glsb.create, provider, opts)
      assert.is_false(ok)
      assert.matches("create: option 'keep_alive' must be a boolean, got string \"yes\"", err)
      assert.are.same({}, leftovers())
    end)

    it("errors carry their stage: create failures are SandboxStartError(create)", function()
      local opts = features.bad_create_opts and features.bad_create_opts()
        or merge(opts_factory(), { template = "glsb-no-such-template-0000" })
      local ok, err = pcall(glsb.create, provider, opts)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.are.equal(glsb.Stage.CREATE, err.stage)
      assert.is_string(err.message)
      assert.are.same({}, leftovers())
    end)
  end)
end
