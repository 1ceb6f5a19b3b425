-- The OpenSandbox adapter against the OpenSandbox emulator: options, create (readiness, retries, a lost
-- answer), every failure phase made to happen by the emulator, request ids on errors, leases,
-- snapshots as templates. #opensandbox
local glsb = require "glsb"
local emulator = require "opensandbox.emulator"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("opensandbox adapter #opensandbox", function()
  local emu, prev_log

  setup(function()
    emu = emulator.start()
    prev_log = glsb.log.set_handler(function() end) -- expected warnings (set_timeout, teardown)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  after_each(function()
    emu:clear_faults()
    emu:config { execdNotReadyPings = 0, provisionMs = 0, snapshotMs = 100 }
  end)

  local function create(extra)
    return glsb.create("opensandbox", emu:opts(extra))
  end

  local function fired(ids)
    for _, f in ipairs(emu:faults()) do
      if f.id == ids.ids[1] then return f.fired end
    end
  end

  describe("options", function()
    it("an unknown option is an argument error naming it and the closest known one", function()
      local ok, err = pcall(glsb.create, "opensandbox", emu:opts { api_kye = "x" })
      assert.is_false(ok)
      assert.is_string(err)
      assert.matches("unknown option 'api_kye'", err)
      assert.matches("did you mean 'api_key'", err)
      ok, err = pcall(glsb.create, "opensandbox", emu:opts { use_server_proxy = "yes" })
      assert.is_false(ok)
      assert.matches("'use_server_proxy' must be a boolean, got string", err)
      assert.same({}, emu:leftovers())
    end)

    it("config reads the domain as the SDKs do (scheme wins, /v1 and slashes dropped)", function()
      local c = lifecycle.config { domain = "https://api.example.test/prefix/v1/", protocol = "http", api_key = "k" }
      assert.equal("https", c.protocol)
      assert.equal("https://api.example.test/prefix/v1", c.base)
      c = lifecycle.config { domain = "10.0.0.1:8080", api_key = "k" }
      assert.equal("http://10.0.0.1:8080/v1", c.base)
      assert.equal(30, c.request_timeout)
      assert.is_false(c.use_server_proxy)
    end)
  end)

  describe("create", function()
    it("sends image, entrypoint, resources, env and metadata; waits for execd; terminate deletes", function()
      local sb = create { env = { GLSB_E = "e" }, metadata = { team = "ml" }, resources = { cpu = "2", memory = "1Gi" },
        timeout = 600 }
      local info = emu:api("GET", "/sandboxes/" .. sb.sandbox_id)
      assert.equal("opensandbox/code-interpreter:v1.1.0", info.image.uri)
      assert.same({ "/opt/code-interpreter/code-interpreter.sh" }, info.entrypoint)
      assert.equal("ml", info.metadata.team)
      assert.matches("^%x+$", info.metadata["glsb-create-token"])
      assert.equal("Running", info.status.state)
      assert.equal("e\n", sb:execute_command("echo $GLSB_E").stdout)
      assert.equal("/workspace\n", sb:execute_command("pwd").stdout)
      sb:terminate()
      assert.same({}, emu:leftovers())
    end)

    it("execute_code on an image without a code interpreter says which image has one", function()
      local sb = create { image = "python:3.11" }
      local r = sb:execute_code("print(1)")
      assert.equal(Status.ERROR, r.status)
      assert.matches("language runtime server not configured", r.error, 1, true)
      assert.matches("execute_code needs an image with a code interpreter: " .. lifecycle.CODE_IMAGE, r.error, 1, true)
      assert.equal("ok\n", sb:execute_command("echo ok").stdout)
      sb:terminate()
    end)

    it("a lease under the server's 60 s minimum is created with 60 and renewed down", function()
      local sb = create { timeout = 5 }
      finally(function() sb:terminate() end)
      local info = emu:api("GET", "/sandboxes/" .. sb.sandbox_id)
      local left = require("glsb.time").parse_iso(info.expiresAt) - os.time()
      assert.is_true(left <= 6 and left >= 3, "expires in " .. left .. " s")
    end)

    it("set_timeout asks for now + seconds to the millisecond, never less (a whole second could have passed)",
      function()
      local sb = create { timeout = 120 }
      finally(function() sb:terminate() end)
      local core = require "glsb.core"
      for _ = 1, 3 do
        local before = core.realtime_ns() // 1000000
        assert.is_true(sb:set_timeout(1))
        local after = core.realtime_ns() // 1000000
        local iso = emu:api("GET", "/sandboxes/" .. sb.sandbox_id).expiresAt
        local ms = require("glsb.time").parse_iso(iso) * 1000 + tonumber(iso:match("%.(%d%d%d)") or "0")
        assert.is_true(ms >= before + 1000 and ms <= after + 1000, ("expires at %s: %d ms after the call began")
          :format(iso, ms - before))
        glsb.sleep(0.37) -- another fraction of a second the next time
      end
    end)

    it("no lease (timeout <= 0) means no expiry; set_timeout then fails and says so", function()
      local sb = create { timeout = 0 }
      finally(function() sb:terminate() end)
      assert.is_nil(emu:api("GET", "/sandboxes/" .. sb.sandbox_id).expiresAt)
      assert.is_false(sb:set_timeout(60))
    end)

    it("waits while execd is not ready yet, and deletes the sandbox when it never is", function()
      emu:config { execdNotReadyPings = 3, provisionMs = 100 }
      local sb = create()
      assert.equal(Status.SUCCESS, sb:execute_command("true").status)
      sb:terminate()
      emu:config { execdNotReadyPings = 1000 }
      local ok, err = pcall(create, { ready_timeout = 0.6, retry = false })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.equal(glsb.Stage.HEALTH_CHECK, err.stage)
      assert.matches("/ping", err.message)
      assert.same({}, emu:leftovers())
    end)

    it("retries 503 and 429 (honouring Retry-After), not 401; errors keep X-Request-ID and the server code", function()
      local f = emu:fault { plane = "lifecycle", method = "POST", path = "^/sandboxes$", status = 503, times = 2 }
      local sb = create { retry = { base_delay = 0.01, jitter = 0 } }
      assert.equal(2, fired(f))
      sb:terminate()
      f = emu:fault { plane = "lifecycle", method = "POST", path = "^/sandboxes$", status = 429, retryAfter = 0 }
      sb = create { retry = { base_delay = 0.01 } }
      assert.equal(1, fired(f))
      sb:terminate()
      local ok, err = pcall(create, { api_key = "wrong" })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError))
      assert.equal(glsb.Stage.CREATE, err.stage)
      assert.is_false(err.transient)
      assert.equal(401, err.http_status)
      assert.equal("INVALID_API_KEY", err.server_code)
      assert.matches("^%x+$", err.request_id)
      assert.equal(32, #err.request_id)
      assert.equal(err.request_id, err.cause.request_id)
      assert.matches(err.request_id, tostring(err), 1, true)
      assert.same({}, emu:leftovers())
    end)

    it("a 422 is a permanent create failure", function()
      local f = emu:fault { plane = "lifecycle", method = "POST", path = "^/sandboxes$", status = 422, times = 3 }
      local ok, err = pcall(create)
      assert.is_false(ok)
      assert.equal(glsb.Stage.CREATE, err.stage)
      assert.equal(422, err.http_status)
      assert.equal(1, fired(f))
    end)

    it("a create whose answer is lost after delivery adopts the sandbox it made (no leak, no second one)", function()
      emu:fault { plane = "lifecycle", method = "POST", path = "^/sandboxes$", action = "cut_after_bytes", bytes = 0 }
      local sb = create { retry = false }
      local state = emu:state()
      assert.equal(1, #state.sandboxes)
      assert.equal(state.sandboxes[1].id, sb.sandbox_id)
      sb:terminate()
      assert.same({}, emu:leftovers())
    end)

    it("a refused connection is a transient create failure", function()
      local ok, err = pcall(glsb.create, "opensandbox", { domain = "127.0.0.1:1", api_key = "k", retry = false })
      assert.is_false(ok)
      assert.equal(glsb.Stage.CREATE, err.stage)
      assert.is_true(err.transient)
    end)

    it("reaches execd through the server proxy too", function()
      local sb = create { use_server_proxy = true }
      finally(function() sb:terminate() end)
      assert.equal(emu.base .. "/sandboxes/" .. sb.sandbox_id .. "/proxy/44772", sb._conn.base)
      assert.equal("via proxy\n", sb:execute_command("echo via proxy").stdout)
      assert.equal("2\n", sb:execute_code("print(1 + 1)").stdout)
    end)
  end)

  describe("executions", function()
    local sb
    setup(function() sb = create { timeout = 600 } end)
    teardown(function() if sb then pcall(sb.terminate, sb) end end)

    it("execute_code: the last expression's value, rich results, env for one run, stderr", function()
      local r = sb:execute_code("x = 6\nprint('out')\nx * 7")
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      assert.equal("42", r.text)
      assert.equal("out\n", r.stdout)
      assert.equal("42", r.results[1].text)
      assert.is_number(r.execution_count)
      r = sb:execute_code("import os\nos.environ.get('GLSB_ONE')", { env = { GLSB_ONE = "only now" } })
      assert.equal("only now", r.text) -- a string's repr without its quotes (ExecutionResult.text)
      assert.is_nil(sb:execute_code("import os\nos.environ.get('GLSB_ONE')").text)
      r = sb:execute_code("import sys\nsys.stderr.write('e\\n')\nNone")
      assert.equal("e\n", r.stderr)
      assert.is_nil(r.text)
    end)

    it("execute_command: output bytes are exact (no newline added, blank lines kept)", function()
      assert.equal("a\n\nb", sb:execute_command("printf 'a\\n\\nb'").stdout)
      assert.equal("", sb:execute_command("true").stdout)
      assert.equal("x\n", sb:execute_command("echo x >&2").stderr)
      local lines = {}
      sb:execute_command("printf 'one\\ntwo'", { on_stdout = function(l) lines[#lines + 1] = l end })
      assert.same({ "one", "two" }, lines)
    end)

    it("two runs at once on one context: the second waits for the first (execd says busy)", function()
      local a, b
      glsb.run(function()
        local t1 = glsb.spawn(function() return sb:execute_code("import time\ntime.sleep(0.5)\n'first'") end)
        glsb.sleep(0.1)
        local t2 = glsb.spawn(function() return sb:execute_code("'second'") end)
        a, b = glsb.gather(t1, t2)
      end)
      assert.equal("first", a.text)
      assert.equal("second", b.text)
    end)

    it("a command that is not UTF-8 is refused before anything is sent", function()
      local r = sb:execute_command("echo \xff")
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe)
      assert.matches("UTF%-8", r.error)
    end)

    it("a refusal by execd (bad cwd) is ERROR carrying the server's code", function()
      local r = sb:execute_command("true", { cwd = "/no/such/dir" })
      assert.equal(Status.ERROR, r.status)
      assert.matches("INVALID_REQUEST_BODY", r.error)
      assert.equal("INVALID_REQUEST_BODY", r.server_code)
    end)

    it("a refused connection (execd's port closed) is ERROR with retry_safe; the sandbox is still there", function()
      local emu2 = emulator.start { args = { "--execd-listener" } }
      finally(function() emu2:stop() end)
      local s = glsb.create("opensandbox", emu2:opts())
      assert.are_not.equal(emu2.base:match("//(.*)$"), s._conn.endpoint)
      emu2:execd_listener(false)
      local r = s:execute_code("print(1)")
      local c = s:execute_command("true")
      assert.equal(Status.ERROR, r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.equal(Status.ERROR, c.status, tostring(c))
      assert.is_true(c.failure.retry_safe)
      emu2:execd_listener(true)
      assert.equal("1\n", s:execute_code("print(1)").stdout)
      s:terminate()
      assert.same({}, emu2:leftovers())
    end)

    it("a stream cut after delivery is UNKNOWN, and the command did run", function()
      emu:fault { plane = "execd", path = "^/command$", action = "cut_after_events", events = 2 }
      local r = sb:execute_command("echo ran > /tmp/ran; echo out")
      assert.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_false(r.failure.retry_safe)
      assert.equal("ran\n", sb:execute_command("cat /tmp/ran").stdout)
      emu:fault { plane = "execd", path = "^/code$", action = "cut_after_bytes", bytes = 100 }
      r = sb:execute_code("import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')")
      assert.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_false(r.failure.retry_safe)
    end)

    it("a cell's error event decides how it ended, with or without execution_complete after it", function()
      -- execd's /code may send execution_complete after an error or not
      -- (docs/protocols/opensandbox.md §2.4); the emulator always does: the stream here is init, ping, status, error, execution_complete,
      -- cut after the error event
      emu:fault { plane = "execd", path = "^/code$", action = "cut_after_events", events = 4 }
      local r = sb:execute_code("raise ValueError('no completion after me')")
      assert.equal(Status.ERROR, r.status, tostring(r))
      assert.equal("ValueError", r.error_name)
      assert.matches("no completion after me", r.error)
      -- cut one event earlier (no error event): nothing said how the cell ended
      emu:fault { plane = "execd", path = "^/code$", action = "cut_after_events", events = 3 }
      r = sb:execute_code("raise ValueError('cut before the error event')")
      assert.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_false(r.failure.retry_safe)
    end)

    it("a connection dropped before any answer is UNKNOWN and not replayed", function()
      sb:execute_code("replays = -1")
      emu:fault { plane = "execd", path = "^/code$", action = "cut_before_response" }
      local r = sb:execute_code("replays += 1")
      assert.equal(Status.UNKNOWN, r.status)
      assert.equal("-1\n", sb:execute_code("print(replays)").stdout)
    end)

    it("an execd 500 is ERROR; a gateway 504 is UNKNOWN", function()
      emu:fault { plane = "execd", path = "^/command$", status = 500 }
      local r = sb:execute_command("true")
      assert.equal(Status.ERROR, r.status)
      assert.matches("500", r.error)
      emu:fault { plane = "execd", path = "^/code$", status = 504 }
      r = sb:execute_code("1")
      assert.equal(Status.UNKNOWN, r.status)
    end)

    it("a command past its timeout is killed by execd: TIMEOUT", function()
      local r = sb:execute_command("sleep 30", { timeout = 0.5 })
      assert.equal(Status.TIMEOUT, r.status)
      assert.matches("timed out", r.error)
    end)

    it("download_file: bytes, nil for a missing file and for a directory", function()
      sb:execute_command("printf '\\000\\001\\377' > /tmp/b.bin")
      assert.equal("\0\1\255", sb:download_file("/tmp/b.bin"))
      assert.is_nil(sb:download_file("/tmp/none"))
      assert.is_nil(sb:download_file("/tmp"))
    end)
  end)

  describe("a sandbox that goes away", function()
    it("lost mid-run (command and code) is TIMEOUT, and the handle knows", function()
      local sb = create()
      emu:fault { plane = "execd", path = "^/command$", action = "kill_sandbox", afterMs = 300 }
      local r = sb:execute_command("echo start; sleep 5")
      assert.equal(Status.TIMEOUT, r.status, tostring(r))
      assert.equal("SandboxGoneError", r.failure.exception_type)
      pcall(sb.terminate, sb)
      sb = create()
      emu:fault { plane = "execd", path = "^/code$", action = "kill_sandbox", afterMs = 300 }
      r = sb:execute_code("import time\nprint('start', flush=True)\ntime.sleep(5)")
      assert.equal(Status.TIMEOUT, r.status, tostring(r))
      assert.matches("killed", r.error)
      pcall(sb.terminate, sb)
      assert.same({}, emu:leftovers())
    end)

    it("already gone (404 in front of execd) is TIMEOUT; terminate is then a no-op", function()
      local sb = create()
      emu:kill(sb.sandbox_id)
      local r = sb:execute_command("true")
      assert.equal(Status.TIMEOUT, r.status)
      sb:terminate()
      assert.is_nil(sb.sandbox_id)
    end)

    it("the lease ends it: expired sandboxes are removed", function()
      local sb = create()
      finally(function() pcall(sb.terminate, sb) end) -- a failure here must not leave it to the next test
      -- 2 s: the renewal must reach the server before the new expiry (a past one is refused)
      assert.is_true(sb:set_timeout(2))
      glsb.sleep(3)
      -- every provider: after the lease, calls raise one error saying it expired (glsb.sandbox)
      local ok, err = pcall(sb.execute_command, sb, "true")
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
      assert.matches("lease expired", tostring(err))
      assert.same({}, emu:leftovers())
    end)

    it("a failed terminate keeps the handle; the next one succeeds", function()
      local sb = create()
      local id = sb.sandbox_id
      emu:fault { plane = "lifecycle", method = "DELETE", status = 500, times = -1 }
      local ok, err = pcall(sb.terminate, sb, { timeout = 2 })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxTerminateError))
      assert.equal(id, sb.sandbox_id)
      emu:clear_faults()
      sb:terminate()
      assert.is_nil(sb.sandbox_id)
      assert.same({}, emu:leftovers())
    end)
  end)

  describe("snapshots as templates", function()
    local function snapshot_of(sb, name)
      local s = emu:api("POST", "/sandboxes/" .. sb.sandbox_id .. "/snapshots", { name = name })
      return s.id
    end

    local function wait_ready(id)
      for _ = 1, 100 do
        if emu:api("GET", "/snapshots/" .. id).status.state == "Ready" then return end
        glsb.sleep(0.05)
      end
      error("snapshot " .. id .. " not ready")
    end

    it("template = a name restores the newest Ready snapshot of that name; = an id, that one", function()
      local src = create()
      src:execute_command("echo old > /workspace/v.txt")
      local old = snapshot_of(src, "glsb-spec-snap")
      wait_ready(old)
      src:execute_command("echo new > /workspace/v.txt")
      glsb.sleep(0.01)
      local new = snapshot_of(src, "glsb-spec-snap")
      wait_ready(new)
      src:terminate()
      local sb = create { template = "glsb-spec-snap" }
      assert.equal(new, sb.template_id)
      assert.equal("new\n", sb:execute_command("cat /workspace/v.txt").stdout)
      assert.equal(new, emu:api("GET", "/sandboxes/" .. sb.sandbox_id).snapshotId)
      sb:terminate()
      sb = create { template = old }
      assert.equal("old\n", sb:execute_command("cat /workspace/v.txt").stdout)
      sb:terminate()
      emu:api("DELETE", "/snapshots/" .. old)
      emu:api("DELETE", "/snapshots/" .. new)
    end)

    it("a name's Ready snapshot is found on a later page (newest first, the newer one still Creating)", function()
      local snapshot = require "glsb.providers.opensandbox.snapshot"
      local prev = snapshot.PAGE_SIZE
      local src = create()
      local sb
      finally(function()
        snapshot.PAGE_SIZE = prev
        pcall(src.terminate, src)
        if sb then pcall(sb.terminate, sb) end
      end)
      src:execute_command("echo ready > /workspace/v.txt")
      local ready = snapshot_of(src, "glsb-spec-paged")
      wait_ready(ready)
      emu:config { snapshotMs = 60000 }
      glsb.sleep(0.01)
      snapshot_of(src, "glsb-spec-paged")
      snapshot.PAGE_SIZE = 1
      sb = create { template = "glsb-spec-paged" }
      assert.equal(ready, sb.template_id)
      assert.equal("ready\n", sb:execute_command("cat /workspace/v.txt").stdout)
      emu:api("DELETE", "/snapshots/" .. ready)
    end)

    it("a name with no Ready snapshot, or none at all, fails create clearly", function()
      emu:config { snapshotMs = 60000 }
      local src = create()
      local id = snapshot_of(src, "glsb-spec-pending")
      src:terminate()
      local ok, err = pcall(create, { template = "glsb-spec-pending" })
      assert.is_false(ok)
      assert.equal(glsb.Stage.CREATE, err.stage)
      assert.matches("no Ready snapshot named 'glsb%-spec%-pending' %(1 found, in state Creating%)", err.message)
      ok, err = pcall(create, { template = "glsb-no-such-snapshot" })
      assert.is_false(ok)
      assert.matches("no snapshot named", err.message)
      assert.is_false(err.transient)
      emu:config { snapshotMs = 0 }
      glsb.sleep(0.1)
      assert.same({}, emu:leftovers())
      pcall(emu.api, emu, "DELETE", "/snapshots/" .. id)
    end)
  end)
end)
