-- The E2B adapter against the E2B emulator: the contract, and every outcome classification
-- made to happen with the emulator's fault knobs. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local loop = require "glsb.loop"

local Status = glsb.ExecutionStatus
local Stage = glsb.Stage
local errors = glsb.errors

describe("e2b sandbox #e2b", function()
  local emu, sb
  local logs = {}

  setup(function()
    emu = emulator.start()
    glsb.log.set_handler(function(level, message) logs[#logs + 1] = level .. ": " .. message end)
    sb = glsb.create("e2b", emu:opts { timeout = 120, env = { GLSB_CREATE_ENV = "from-create" },
      metadata = { suite = "e2b" } })
  end)

  teardown(function()
    glsb.log.set_handler(nil)
    if sb then pcall(sb.terminate, sb) end
    if emu then emu:stop() end
  end)

  after_each(function() emu:clear_faults() end)

  -- a fresh sandbox for a test that breaks or kills it; terminated by the caller via finally
  local function fresh(extra)
    local s = glsb.create("e2b", emu:opts(extra or { timeout = 60 }))
    finally(function() pcall(s.terminate, s) end)
    return s
  end

  describe("create", function()
    it("returns a running sandbox with an id, the template and envd token", function()
      assert.is_string(sb.sandbox_id)
      assert.is_true(sb:is_running())
      assert.equal("0.6.13", sb.envd_version)
      local found
      for _, s in ipairs(emu:state().sandboxes) do
        if s.sandboxID == sb.sandbox_id then found = s end
      end
      assert.is_table(found)
      assert.equal("running", found.state)
    end)

    it("passes env to the sandbox", function()
      local r = sb:execute_command("echo $GLSB_CREATE_ENV")
      assert.equal(Status.SUCCESS, r.status)
      assert.equal("from-create\n", r.stdout)
    end)

    it("raises a permanent SandboxStartError[create] for a bad API key, without retrying", function()
      local t0 = loop.now()
      local ok, err = pcall(glsb.create, "e2b", emu:opts { api_key = "e2b_wrong" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.equal(Stage.CREATE, err.stage)
      assert.is_false(err.transient)
      assert.matches("401", tostring(err))
      assert.is_true(loop.now() - t0 < 0.4, "a 401 must not be retried")
    end)

    it("raises SandboxStartError[create] without an API key, before any request", function()
      local saved = os.getenv("E2B_API_KEY")
      assert.is_nil(saved, "the test environment must not set E2B_API_KEY")
      local ok, err = pcall(glsb.create, "e2b", { api_url = emu.base, sandbox_url = emu.base })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.equal(Stage.CREATE, err.stage)
      assert.matches("API key", err.message)
    end)

    it("raises a permanent SandboxStartError for an unknown template", function()
      local ok, err = pcall(glsb.create, "e2b", emu:opts { template = "no-such-template" })
      assert.is_false(ok)
      assert.equal(Stage.CREATE, err.stage)
      assert.is_false(err.transient)
      assert.matches("not found", tostring(err))
    end)

    it("retries a 429 after its Retry-After and succeeds", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", status = 429, retryAfter = 1 }
      local t0 = loop.now()
      local s = fresh()
      assert.is_true(s:is_running())
      assert.is_true(loop.now() - t0 >= 0.95, "Retry-After: 1 must be honoured")
      assert.equal(0, emu:faults()[1].remaining)
    end)

    it("retries 503 (transient) and succeeds on a later attempt", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", status = 503, times = 2 }
      local s = fresh()
      assert.is_true(s:is_running())
    end)

    it("gives up after bounded attempts with a transient SandboxStartError[create]", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", status = 503, times = -1 }
      local ok, err = pcall(glsb.create, "e2b", emu:opts { retry = { base_delay = 0.05, jitter = 0.5 } })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.equal(Stage.CREATE, err.stage)
      assert.is_true(err.transient)
      assert.equal(3, emu:faults()[1].fired)
    end)

    it("retries a create whose connection was dropped before the response", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", action = "cut_before_response" }
      local s = fresh()
      assert.is_true(s:is_running())
    end)

    it("adopts the sandbox when the create answer is cut after the server created it", function()
      local before = #emu:sandbox_ids()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", action = "cut_after_bytes", bytes = 10 }
      local s = fresh()
      assert.is_true(s:is_running())
      assert.equal(1, emu:faults()[1].fired)
      assert.equal(before + 1, #emu:sandbox_ids(), "exactly one sandbox was created")
      local adopted = false
      for _, l in ipairs(logs) do if l:find("adopted", 1, true) then adopted = true end end
      assert.is_true(adopted)
      assert.equal(Status.SUCCESS, s:execute_code("print(1)").status)
    end)

    -- issue 15 #15: E2B answers a create once the sandbox runs; the SDK does not probe envd after it
    it("makes no envd /health round trip after create", function()
      local probe = emu:fault { plane = "envd", path = "^/health$", action = "delay", delayMs = 0, times = -1 }
      local s = fresh()
      assert.is_true(s:is_running())
      local fired
      for _, f in ipairs(emu:faults()) do if f.id == probe.ids[1] then fired = f.fired end end
      assert.equal(0, fired)
    end)

    it("fails with Stage package_install when additional_packages cannot be installed, and tears down", function()
      local before = #emu:sandbox_ids()
      emu:fault { plane = "jupyter", path = "^/execute$", status = 500, times = -1 }
      local ok, err = pcall(glsb.create, "e2b", emu:opts { additional_packages = { "glsb-no-such-package" } })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.equal(Stage.PACKAGE_INSTALL, err.stage)
      emu:clear_faults()
      assert.equal(before, #emu:sandbox_ids())
    end)
  end)

  describe("execute_code", function()
    it("keeps state between calls and returns the main result's text", function()
      local r1 = sb:execute_code("x = 6 * 7\nx")
      assert.equal(Status.SUCCESS, r1.status)
      assert.equal("42", r1.text)
      local r2 = sb:execute_code("print(x + 1)")
      assert.equal(Status.SUCCESS, r2.status)
      assert.equal("43\n", r2.stdout)
      assert.is_number(r2.duration_ms)
    end)

    it("streams stdout and stderr one line per call", function()
      local out, err = {}, {}
      local r = sb:execute_code(
        "import sys\nfor i in range(3):\n    print('line', i)\nprint('oops', file=sys.stderr)",
        { on_stdout = function(l) out[#out + 1] = l end, on_stderr = function(l) err[#err + 1] = l end })
      assert.equal(Status.SUCCESS, r.status)
      assert.same({ "line 0", "line 1", "line 2" }, out)
      assert.same({ "oops" }, err)
      assert.equal("line 0\nline 1\nline 2\n", r.stdout)
      assert.equal("oops\n", r.stderr)
    end)

    it("keeps running when a streaming callback raises", function()
      local r = sb:execute_code("print('a')\nprint('b')", { on_stdout = function() error("callback bug") end })
      assert.equal(Status.SUCCESS, r.status)
      assert.equal("a\nb\n", r.stdout)
      assert.matches("callback bug", logs[#logs])
    end)

    it("returns images as bytes (the server's base64 decoded once) and text results", function()
      local r = sb:execute_code([[
import base64
class Pic:
    def _repr_png_(self):
        return b'\x89PNG\r\n\x1a\nfake'
    def __repr__(self):
        return 'Pic()'
Pic()
]])
      assert.equal(Status.SUCCESS, r.status)
      assert.equal(1, #r.results)
      assert.is_true(r.results[1].is_main_result)
      assert.equal("Pic()", r.results[1].text)
      assert.equal("\137PNG\r\n\26\nfake", r.results[1].png)
      assert.equal("Pic()", r.text)
    end)

    it("reports a Python exception as ERROR with name, value and traceback", function()
      local r = sb:execute_code("def f():\n    return 1 / 0\nf()")
      assert.equal(Status.ERROR, r.status)
      assert.equal("ZeroDivisionError", r.error_name)
      assert.equal("division by zero", r.error_value)
      assert.matches("ZeroDivisionError", r.traceback)
      assert.matches("ZeroDivisionError: division by zero", r.error, 1, true)
      assert.is_nil(r.error:find("\27", 1, true), "colour codes are stripped from r.error")
      assert.is_nil(r.failure)
    end)

    it("reports a cell past its timeout as TIMEOUT, and the kernel keeps its state", function()
      sb:execute_code("kept = 'yes'")
      local r = sb:execute_code("import time\ntime.sleep(10)", { timeout = 1 })
      assert.equal(Status.TIMEOUT, r.status)
      assert.is_true(r.duration_ms < 5000)
      local r2 = sb:execute_code("print(kept)")
      assert.equal(Status.SUCCESS, r2.status)
      assert.equal("yes\n", r2.stdout)
    end)

    it("passes per-call env vars", function()
      local r = sb:execute_code("import os\nprint(os.environ.get('PER_CALL'))", { env = { PER_CALL = "v1" } })
      assert.equal("v1\n", r.stdout)
    end)

    it("uploads files before running the code", function()
      local r = sb:execute_code("print(open('/home/user/in/data.csv').read(), end='')", {
        files = { glsb.SandboxFile.from_bytes("a,b\n1,2\n", "data.csv") }, upload_dir = "/home/user/in" })
      assert.equal(Status.SUCCESS, r.status)
      assert.equal("a,b\n1,2\n", r.stdout)
    end)

    it("returns ERROR retry_safe when an upload fails (the code never ran)", function()
      emu:fault { plane = "envd", path = "^/files$", status = 507 }
      local r = sb:execute_code("print('ran')", {
        files = { glsb.SandboxFile.from_bytes("x", "x.txt") }, upload_dir = "/home/user/in" })
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe)
      assert.matches("upload", r.error)
      assert.equal("", r.stdout)
    end)

    it("reports a connect failure as ERROR with failure.retry_safe = true", function()
      local s = fresh()
      local saved = s._cfg.sandbox_url
      s._cfg.sandbox_url = "http://127.0.0.1:1"
      local r = s:execute_code("print(1)")
      s._cfg.sandbox_url = saved
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe)
    end)

    it("reports a stream cut after delivery as UNKNOWN, never ERROR", function()
      emu:fault { plane = "jupyter", path = "^/execute$", action = "cut_after_bytes", bytes = 60 }
      local r = sb:execute_code("import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')")
      assert.equal(Status.UNKNOWN, r.status)
      assert.is_false(r.failure.retry_safe)
    end)

    it("reports a dropped connection before any response as UNKNOWN, and is not replayed", function()
      -- regression: libcurl re-sends a request whose reused keep-alive connection died before
      -- answering; the emulator did NOT run this one, so a replay would show up as replays == 1
      sb:execute_code("replays = -1")
      emu:fault { plane = "jupyter", path = "^/execute$", action = "cut_before_response" }
      local r = sb:execute_code("replays += 1")
      assert.equal(Status.UNKNOWN, r.status)
      assert.is_false(r.failure.retry_safe)
      assert.equal("-1\n", sb:execute_code("print(replays)").stdout)
    end)

    it("reports the sandbox killed mid-request as TIMEOUT", function()
      local s = fresh()
      emu:fault { plane = "jupyter", path = "^/execute$", action = "kill_sandbox", afterMs = 300 }
      local r = s:execute_code("import time\nprint('start', flush=True)\ntime.sleep(5)")
      assert.equal(Status.TIMEOUT, r.status)
      assert.matches("killed", r.error)
    end)

    it("reports a sandbox that is already gone (proxy 502) as TIMEOUT", function()
      local s = fresh()
      emu:kill(s.sandbox_id)
      local r = s:execute_code("print(1)")
      assert.equal(Status.TIMEOUT, r.status)
    end)

    it("reports an interpreter refusal (HTTP 500) as ERROR", function()
      emu:fault { plane = "jupyter", path = "^/execute$", status = 500 }
      local r = sb:execute_code("print(1)")
      assert.equal(Status.ERROR, r.status)
      assert.matches("500", r.error)
    end)

    it("a cancel that lands in an on_stdout callback is not swallowed (regression: call_back logged it)", function()
      local s = fresh()
      local seen, after = 0, false
      local ok, err = pcall(glsb.run, function()
        local t = glsb.spawn(function()
          local r = s:execute_code("import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')",
            { on_stdout = function() seen = seen + 1 glsb.sleep(5) end })
          after = true
          return r
        end)
        glsb.sleep(0.2)
        t:cancel()
        return t:wait()
      end)
      assert.is_false(ok)
      assert.is_true(loop.is_cancelled(err), tostring(err))
      assert.is_false(after, "execute_code went on after the cancel")
      assert.equal(1, seen)
      assert.is_false(s:is_running(), "a cancelled call terminates its sandbox")
    end)

    it("still streams lines from a slow stream", function()
      emu:fault { plane = "jupyter", path = "^/execute$", action = "slow_stream", frameDelayMs = 50 }
      local seen = {}
      local r = sb:execute_code("for i in range(3): print(i)", { on_stdout = function(l) seen[#seen + 1] = l end })
      assert.equal(Status.SUCCESS, r.status)
      assert.same({ "0", "1", "2" }, seen)
    end)

    it("never retries an execution", function()
      emu:fault { plane = "jupyter", path = "^/execute$", status = 503, times = -1 }
      local r = sb:execute_code("print(1)")
      assert.equal(Status.ERROR, r.status)
      assert.equal(1, emu:faults()[1].fired)
    end)
  end)

  describe("execute_command", function()
    it("returns stdout, stderr and the exit code", function()
      local r = sb:execute_command("echo out; echo err >&2; exit 3")
      assert.equal(Status.ERROR, r.status)
      assert.equal(3, r.code)
      assert.equal("out\n", r.stdout)
      assert.equal("err\n", r.stderr)
      local ok = sb:execute_command("printf 'a\\nb\\n'")
      assert.equal(Status.SUCCESS, ok.status)
      assert.equal(0, ok.code)
    end)

    it("streams lines, applies env and cwd", function()
      local seen = {}
      local r = sb:execute_command("pwd; echo $FOO", { env = { FOO = "bar" }, cwd = "/tmp",
        on_stdout = function(l) seen[#seen + 1] = l end })
      assert.equal(Status.SUCCESS, r.status)
      assert.same({ "/tmp", "bar" }, seen)
    end)

    it("runs commands and file operations as the create option's user", function()
      local s = fresh { user = "root" }
      local r = s:execute_command("echo $HOME")
      assert.equal("/root\n", r.stdout)
      r = s:execute_code("pass", { files = { glsb.SandboxFile.from_bytes("r", "r.txt") }, upload_dir = "/root/up" })
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      assert.equal("r", s:download_file("/root/up/r.txt"))
    end)

    it("reports a command past its timeout as TIMEOUT", function()
      local t0 = loop.now()
      local r = sb:execute_command("sleep 10", { timeout = 1 })
      assert.equal(Status.TIMEOUT, r.status)
      assert.is_true(loop.now() - t0 < 4)
    end)

    it("reports a stream cut after delivery as UNKNOWN", function()
      emu:fault { plane = "envd", path = "Process/Start$", action = "cut_after_bytes", bytes = 40 }
      local r = sb:execute_command("echo one; sleep 0.3; echo two")
      assert.equal(Status.UNKNOWN, r.status)
      assert.is_false(r.failure.retry_safe)
    end)

    it("reports the sandbox killed mid-command as TIMEOUT", function()
      local s = fresh()
      emu:fault { plane = "envd", path = "Process/Start$", action = "kill_sandbox", afterMs = 300 }
      local r = s:execute_command("echo started; sleep 5")
      assert.equal(Status.TIMEOUT, r.status)
    end)

    it("reports an envd refusal before start as ERROR", function()
      emu:fault { plane = "envd", path = "Process/Start$", status = 401 }
      local r = sb:execute_command("echo never")
      assert.equal(Status.ERROR, r.status)
    end)
  end)

  describe("files", function()
    it("downloads what was uploaded, bytes exact", function()
      local data = "bin\0ary\255\n"
      local r = sb:execute_code("pass", { files = { glsb.SandboxFile.from_bytes(data, "b.bin") },
        upload_dir = "/home/user/dl" })
      assert.equal(Status.SUCCESS, r.status)
      assert.equal(data, sb:download_file("/home/user/dl/b.bin"))
    end)

    it("uploads as multipart to an envd older than 0.5.7", function()
      local http = require "glsb.http"
      local saved, request = sb._conn.envd_version, http.request
      local ctype
      sb._conn.envd_version = "0.5.6" -- the version the connection speaks to
      http.request = function(o)
        if o.method == "POST" and o.url:find("/files?", 1, true) then ctype = o.headers["Content-Type"] end
        return request(o)
      end
      local data = "multi\r\n--part\0"
      local ok, r = pcall(sb.execute_code, sb, "pass", { files = { glsb.SandboxFile.from_bytes(data, "m.bin") },
        upload_dir = "/home/user/old" })
      sb._conn.envd_version, http.request = saved, request
      assert.is_true(ok, tostring(r))
      assert.matches("^multipart/form%-data; boundary=", ctype)
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      assert.equal(data, sb:download_file("/home/user/old/m.bin"))
      local e2b = require "glsb.providers.e2b"
      assert.is_true(e2b.version_at_least("0.6.13", "0.5.7"))
      assert.is_false(e2b.version_at_least("0.5.6", "0.5.7"))
      assert.is_true(e2b.version_at_least(nil, "0.5.7"))
    end)

    it("returns nil for a missing file and logs why", function()
      local n = #logs
      assert.is_nil(sb:download_file("/home/user/does-not-exist"))
      assert.is_true(#logs > n)
      assert.matches("does not exist", logs[#logs])
      assert.matches("404", logs[#logs])
    end)

    it("returns nil on a timeout and the warning says it timed out", function()
      sb:execute_command("echo slow > /home/user/slow.txt")
      emu:fault { plane = "envd", method = "GET", path = "^/files$", action = "delay", delayMs = 3000 }
      local n = #logs
      assert.is_nil(sb:download_file("/home/user/slow.txt", { timeout = 0.5 }))
      assert.is_true(#logs > n)
      assert.matches("OPERATION_TIMEDOUT", logs[#logs])
      assert.matches("/home/user/slow.txt", logs[#logs])
    end)
  end)

  describe("set_timeout and terminate", function()
    it("renews the lease", function()
      local function end_at()
        for _, s in ipairs(emu:state().sandboxes) do
          if s.sandboxID == sb.sandbox_id then return s.endAt end
        end
      end
      local before = end_at()
      assert.is_true(sb:set_timeout(3600))
      assert.are_not.equal(before, end_at())
    end)

    it("returns false (never raises) when the renewal fails", function()
      emu:fault { method = "POST", path = "/timeout$", status = 500 }
      assert.is_false(sb:set_timeout(600))
    end)

    it("terminates, and a second terminate is a no-op", function()
      local s = glsb.create("e2b", emu:opts())
      local id = s.sandbox_id
      s:terminate()
      assert.is_nil(s.sandbox_id)
      for _, other in ipairs(emu:sandbox_ids()) do assert.are_not.equal(id, other) end
      s:terminate()
      local ok, err = pcall(s.execute_code, s, "print(1)")
      assert.is_false(ok)
      assert.equal(Stage.NOT_INITIALIZED, err.stage)
    end)

    it("treats an already-gone sandbox (404) as terminated", function()
      local s = glsb.create("e2b", emu:opts())
      emu:kill(s.sandbox_id)
      s:terminate()
      assert.is_nil(s.sandbox_id)
    end)

    it("keeps the handle when terminate fails after its retries, and can retry", function()
      local s = fresh()
      local id = s.sandbox_id
      emu:fault { method = "DELETE", path = "^/sandboxes/", status = 500, times = -1 }
      local ok, err = pcall(s.terminate, s)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxTerminateError))
      assert.equal(Stage.TERMINATE, err.stage)
      assert.equal(id, s.sandbox_id)
      assert.equal(3, emu:faults()[1].fired)
      emu:clear_faults()
      s:terminate()
      assert.is_nil(s.sandbox_id)
    end)
  end)

  it("leaves nothing behind but the suite's own sandbox", function()
    local ids = emu:sandbox_ids()
    assert.same({ sb.sandbox_id }, ids)
  end)
end)
