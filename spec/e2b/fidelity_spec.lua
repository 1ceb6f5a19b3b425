-- Where the adapter and the emulator agreed with each other but not with real E2B (issue 15): each case
-- names the item and the E2B source the emulator now follows (e2b-dev/infra 54693ff35,
-- e2b-dev/code-interpreter 7df1757). Template items (#1, #2, #5, #12) are in template_spec.lua, the
-- health probe (#15) in sandbox_spec.lua. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local http = require "glsb.http"
local loop = require "glsb.loop"
local interpreter = require "glsb.providers.e2b.interpreter"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

-- A data-plane request as a client would send it (the answer is for the test to look at).
local function data(emu, sb, port, method, path, body, headers)
  local h = { ["E2b-Sandbox-Id"] = sb.sandbox_id, ["E2b-Sandbox-Port"] = tostring(port), Connection = "close" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return http.request { method = method, url = emu.base .. path, headers = h, timeout = 20,
    body = body and http.encode_json(body) or nil }
end

-- The NDJSON lines of an /execute answer, decoded.
local function lines(body)
  local out = {}
  for l in body:gmatch("[^\n]+") do out[#out + 1] = http.decode_json(l) end
  return out
end

local function fired(emu, rule)
  for _, f in ipairs(emu:faults()) do
    if f.id == rule.ids[1] then return f.fired end
  end
end

describe("e2b fidelity to the real service (issue 15) #e2b", function()
  local emu, sb

  setup(function()
    emu = emulator.start()
    sb = glsb.create("e2b", emu:opts { timeout = 300 })
  end)

  teardown(function()
    if sb then pcall(sb.terminate, sb) end
    if emu then emu:stop() end
  end)

  after_each(function() emu:clear_faults() end)

  local function fresh(extra)
    local s = glsb.create("e2b", emu:opts(extra or { timeout = 60 }))
    finally(function() pcall(s.terminate, s) end)
    return s
  end

  -- #4: code-interpreter template/server/messaging.py _set_env_var_snippet pastes env vars into code,
  -- unescaped, on the call's env and (on a context's first execution) the sandbox's env from envd /envs.
  describe("#4 env vars on /execute", function()
    it("the emulator pastes env_vars into the code like the real server (a quote breaks the cell)", function()
      local r = data(emu, sb, 49999, "POST", "/execute", { code = "1", env_vars = { Q = "it's" } },
        { ["X-Access-Token"] = sb._conn.envd_token })
      assert.equal(200, r.status)
      local got = lines(r.body)
      local err
      for _, l in ipairs(got) do if l.type == "error" then err = l end end
      assert.is_table(err, r.body)
      assert.equal("SyntaxError", err.name)
    end)

    it("refuses a value the server could not paste, before anything is sent", function()
      local probe = emu:fault { plane = "jupyter", path = "^/execute$", action = "delay", delayMs = 0, times = -1 }
      for _, v in ipairs({ "it's", "back\\slash", "two\nlines" }) do
        local r = sb:execute_code("import os\nos.environ['V']", { env = { V = v } })
        assert.equal(Status.ERROR, r.status, tostring(r))
        assert.is_true(r.failure.retry_safe)
        assert.matches("env var \"V\"", r.error)
      end
      assert.equal(0, fired(emu, probe))
    end)

    it("passes safe values, for one execution only", function()
      local r = sb:execute_code("import os\nos.environ['V']", { env = { V = "plain value: ok?" } })
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      assert.equal("plain value: ok?", r.text)
      r = sb:execute_code("import os\nos.environ.get('V', 'gone')")
      assert.equal("gone", r.text)
    end)

    it("refuses code on a sandbox whose own env the server could not paste; commands still see it", function()
      local s = fresh { timeout = 60, env = { Q = "it's" } }
      local r = s:execute_code("1")
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe)
      assert.matches("create's env", r.error)
      assert.equal("it's\n", s:execute_command("echo \"$Q\"").stdout)
    end)
  end)

  -- #6: code runs as root (Jupyter is a systemd service without User=: code-interpreter
  -- template/systemd/jupyter.service), envd's default user is the template's (`user` on the code
  -- interpreter, root on a template built from an image: infra orchestrator/pkg/template/build/phases/
  -- base/builder.go), and the emulator runs each as that uid (vm.mjs).
  describe("#6 identities", function()
    local function identities()
      local st = emu:state()
      assert.is_true(st.identities, "the emulator runs processes as their users only as root, with bubblewrap and "
        .. "setpriv (util-linux); this machine's emulator cannot, so these cases cannot run")
    end

    -- run_helper with no user named: envd's default user answers
    local function default_user_id(s)
      local saved = s._conn.user
      s._conn.user = nil
      local r = s:run_helper({ "id", "-un" })
      s._conn.user = saved
      return r.stdout
    end

    it("code runs as root; envd's default user is the template's", function()
      identities()
      assert.equal("0", sb:execute_code("import os\nos.getuid()").text)
      assert.equal("user\n", default_user_id(sb))
      local res = glsb.template("e2b", { api_key = emu.api_key, api_url = emu.base, progress = false })
        :ensure { name = "glsb-e2b-from-image", base_image = "python:3.12" }
      local s = fresh { template = res.ref.name, timeout = 60 }
      assert.equal("root\n", default_user_id(s))
    end)

    it("what code writes stays writable by later commands, uploads and the workspace helper", function()
      identities()
      local s = fresh()
      local r = s:execute_code("import os\nos.makedirs('/home/user/out', exist_ok=True)\n"
        .. "open('/home/user/out/data.txt', 'w').write('from code\\n')")
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      r = s:execute_command("echo from command >> /home/user/out/data.txt")
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      glsb.write_workspace_file(s, { relative_path = "out/report.json", data = "{}" })
      r = s:execute_code("x = 1", { files = { glsb.SandboxFile.from_bytes("up", "data.txt") }, upload_dir = "/home/user/out" })
      assert.equal(Status.SUCCESS, r.status, tostring(r))
      assert.equal("up", s:download_file("/home/user/out/data.txt"))
      assert.equal("{}", s:download_file("/home/user/out/report.json"))
    end)

    it("as `user`, what root's code made is out of reach, as on E2B", function()
      identities()
      local s = fresh { timeout = 60, user = "user" }
      s:execute_code("import os\nos.makedirs('/home/user/rootdir', exist_ok=True)")
      local r = s:execute_command("touch /home/user/rootdir/x")
      assert.equal(Status.ERROR, r.status)
      assert.matches("Permission denied", r.stderr)
    end)
  end)

  -- #7: envd (root) writes any path and makes missing parents the requesting user's (infra envd
  -- permissions/path.go EnsureDirs, api/upload.go); `user` can write only its own (configure.sh: /home/user,
  -- /tmp, /code); the code-interpreter template has no /files.
  describe("#7 permissions", function()
    it("the code interpreter has no /files until something makes it", function()
      local s = fresh()
      assert.equal(Status.ERROR, s:execute_command("test -d /files").status)
      assert.equal(Status.SUCCESS, s:execute_code("pass", { files = { glsb.SandboxFile.from_bytes("x", "x.txt") } }).status)
      assert.equal(Status.SUCCESS, s:execute_command("test -f /files/x.txt").status)
    end)

    it("envd writes any absolute path, the new directories owned by the user asking", function()
      assert.is_true(emu:state().identities, "needs the emulator's identities (root, bubblewrap, setpriv)")
      local s = fresh { timeout = 60, user = "user" }
      s.files:write("/data/new/x.txt", "x")
      assert.equal("x", s.files:read("/data/new/x.txt"))
      local r = s:execute_command("stat -c '%U %a' /data /data/new /data/new/x.txt")
      assert.equal("user 755\nuser 755\nuser 644\n", r.stdout)
    end)

    it("`user` cannot write /opt, /root or make /files", function()
      assert.is_true(emu:state().identities, "needs the emulator's identities (root, bubblewrap, setpriv)")
      local s = fresh { timeout = 60, user = "user" }
      for _, cmd in ipairs({ "touch /opt/x", "touch /root/x", "mkdir /files" }) do
        local r = s:execute_command(cmd)
        assert.equal(Status.ERROR, r.status, cmd)
        assert.matches("Permission denied", r.stderr, 1, true)
      end
      assert.equal(Status.SUCCESS, s:execute_command("touch /home/user/x /tmp/x /code/x").status)
    end)
  end)

  -- #8: envd runs every process under /bin/sh -c '... exec "${@}"' (infra envd services/process/handler/
  -- handler.go): a missing executable is the shell's exit 127, after a start event.
  describe("#8 a missing executable", function()
    it("ends with exit 127 and the shell's message, an ERROR", function()
      local r = sb:run_helper({ "/no/such/program", "x" })
      assert.equal(Status.ERROR, r.status, tostring(r))
      assert.equal(127, r.code)
      assert.matches("no/such/program", r.stderr)
    end)
  end)

  -- #9: E2B's edge proxy answers for itself (infra shared/pkg/proxy/template/*.go).
  describe("#9 the proxy's own answers", function()
    it("a closed port is not a gone sandbox: ERROR, nothing ran, the sandbox lives on", function()
      local s = fresh { timeout = 60, template = "base" }
      local r = s:execute_code("print(1)")
      assert.equal(Status.ERROR, r.status, tostring(r))
      assert.is_true(r.failure.retry_safe)
      assert.matches("port is not open", r.error)
      assert.matches("code interpreter is not running", r.error)
      assert.is_true(s:is_running())
      assert.equal("still here\n", s:execute_command("echo still here").stdout)
    end)

    it("409 still transitioning and 429 too many connections: ERROR, provably not run", function()
      emu:fault { plane = "jupyter", path = "^/execute$", status = 409 }
      local r = sb:execute_code("print(1)")
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe, tostring(r))
      assert.matches("still transitioning", r.error)
      emu:fault { plane = "envd", path = "Process/Start$", status = 429 }
      r = sb:execute_command("echo x")
      assert.equal(Status.ERROR, r.status)
      assert.is_true(r.failure.retry_safe, tostring(r))
      assert.matches("429.*refused by E2B's proxy", r.error)
      assert.is_true(sb:is_running())
    end)

    it("a 502 that is not the proxy's 'not found' asks envd: alive -> UNKNOWN, the handle lives on", function()
      emu:fault { plane = "jupyter", path = "^/execute$", status = 502, body = "Failed to route request to sandbox" }
      local r = sb:execute_code("print(1)")
      assert.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.is_true(sb:is_running())
      assert.equal(Status.SUCCESS, sb:execute_code("print(2)").status)
    end)
  end)

  -- #10: messaging.py sends its own failures as error lines with an empty traceback.
  describe("#10 the server's own execution errors", function()
    for _, name in ipairs({ "WebSocketError", "ContextRestarting", "ExecutionAborted", "UnexpectedEndOfExecution" }) do
      it(name .. " is UNKNOWN, not the code's ERROR", function()
        emu:fault { plane = "jupyter", path = "^/execute$", action = "execution_error", name = name }
        local r = sb:execute_code("print(1)")
        assert.equal(Status.UNKNOWN, r.status, tostring(r))
        assert.equal("ServerError", r.failure.exception_type)
        assert.equal(name, r.failure.provider_type)
        assert.is_false(r.failure.retry_safe)
      end)
    end

    it("a kernel that dies is restarted: ContextRestarting, UNKNOWN; the next cell runs", function()
      local s = fresh()
      local r = s:execute_code("import os\nos._exit(3)")
      assert.equal(Status.UNKNOWN, r.status, tostring(r))
      assert.same({ "ServerError", "ContextRestarting" }, { r.failure.exception_type, r.failure.provider_type })
      assert.equal(Status.SUCCESS, s:execute_code("print('again')").status)
    end)

    it("the code's own exception of the same name stays the code's ERROR", function()
      local r = sb:execute_code("class WebSocketError(Exception): pass\nraise WebSocketError('mine')")
      assert.equal(Status.ERROR, r.status)
      assert.equal("WebSocketError", r.error_name)
    end)
  end)

  -- #11: messaging.py runs a context's executions behind a lock and writes nothing (no keepalive) to a
  -- request waiting for it.
  describe("#11 cells queued on one context", function()
    it("a cell queued behind a long one is not cut by the idle limit", function()
      local saved = interpreter.IDLE
      emu:admin("POST", "/_emulator/config", { keepaliveMs = 100 })
      interpreter.IDLE = 0.6
      local s = fresh()
      finally(function()
        interpreter.IDLE = saved
        emu:admin("POST", "/_emulator/config", { keepaliveMs = 5000 })
        pcall(s.terminate, s)
      end)
      local r1, r2 = glsb.run(function()
        local a = glsb.spawn(function() return s:execute_code("import time\ntime.sleep(1.5)\nprint('long')") end)
        glsb.sleep(0.1)
        local b = glsb.spawn(function() return s:execute_code("print('queued')") end)
        return a:wait(), b:wait()
      end)
      assert.equal(Status.SUCCESS, r1.status, tostring(r1))
      assert.equal(Status.SUCCESS, r2.status, tostring(r2))
      assert.equal("queued\n", r2.stdout)
    end)

    it("a cell that waits longer than its own timeout for its turn is a TIMEOUT that never ran", function()
      local s = fresh()
      local r1, r2 = glsb.run(function()
        local a = glsb.spawn(function() return s:execute_code("import time\ntime.sleep(1.2)") end)
        glsb.sleep(0.1)
        local b = glsb.spawn(function() return s:execute_code("ran = True", { timeout = 0.5 }) end)
        return a:wait(), b:wait()
      end)
      assert.equal(Status.SUCCESS, r1.status)
      assert.equal(Status.TIMEOUT, r2.status)
      assert.is_true(r2.failure.retry_safe)
      assert.equal("False", s:execute_code("'ran' in dir()").text)
    end)
  end)

  -- #13: the public infra's API (spec/openapi.yml) creates with POST /sandboxes (`secure` for an envd
  -- token, default lease 15 s) and connects with POST /sandboxes/{id}/connect; no /v2 for either.
  describe("#13 self-hosted E2B", function()
    it("creates and connects through the legacy routes, once it has seen the v2 ones missing", function()
      local sh = emulator.start { args = { "--self-hosted" } }
      local s
      finally(function()
        if s then pcall(s.terminate, s) end
        sh:stop()
      end)
      local v2 = sh:fault { method = "POST", path = "^/v2/sandboxes", action = "delay", delayMs = 0, times = -1 }
      s = glsb.create("e2b", sh:opts {})
      assert.is_string(s._conn.envd_token, "created with secure: an envd access token")
      assert.equal("1\n", s:execute_code("print(1)").stdout)
      local left = s:info().e2b.lease_seconds_left
      assert.is_true(left > 250, "the legacy default lease (15 s) was not left to apply: " .. tostring(left))
      local again = glsb.connect("e2b", s.sandbox_id, sh:opts {})
      assert.equal(Status.SUCCESS, again:execute_command("true").status)
      local other = glsb.create("e2b", sh:opts { timeout = 30 })
      other:terminate()
      local n
      for _, f in ipairs(sh:faults()) do if f.id == v2.ids[1] then n = f.fired end end
      assert.equal(1, n, "v2 was tried once for this API")
    end)
  end)

  -- #16: the rate limiter's 429 (Retry-After, "Rate limit exceeded") and the concurrency limit's
  -- (no Retry-After, the billing message; infra orchestrator/create_instance.go).
  describe("#16 429s as E2B sends them", function()
    it("the concurrency limit is not transient: one attempt, a permanent SandboxStartError", function()
      local limited = emulator.start { args = { "--max-sandboxes", "1" } }
      finally(function() limited:stop() end)
      local first = glsb.create("e2b", limited:opts { timeout = 60 })
      local attempts = limited:fault { method = "POST", path = "^/v2/sandboxes$", action = "delay", delayMs = 0, times = -1 }
      local ok, err = pcall(glsb.create, "e2b", limited:opts { timeout = 60 })
      first:terminate()
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.is_false(err.transient)
      assert.matches("maximum number of concurrent E2B sandboxes %(1%)", err.message)
      local n
      for _, f in ipairs(limited:faults()) do if f.id == attempts.ids[1] then n = f.fired end end
      assert.equal(1, n)
    end)

    it("the rate limiter's 429 carries its body and headers, and is retried after Retry-After", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", status = 429, retryAfter = 1 }
      local r = http.json { method = "POST", url = emu.base .. "/v2/sandboxes", json = { templateID = "base" },
        headers = { ["X-API-KEY"] = emu.api_key, Connection = "close" }, timeout = 10 }
      assert.equal(429, r.status)
      assert.same({ code = 429, message = "Rate limit exceeded" }, r.json)
      assert.equal("1", r.headers["retry-after"])
      assert.equal("0", r.headers["ratelimit-remaining"])
    end)
  end)

  -- #17: details of the real services.
  describe("#17 emulator details", function()
    it("/execute checks no token; a context's first run with a wrong one gets envd's 401 body as env", function()
      local s = fresh()
      local r = data(emu, s, 49999, "POST", "/execute", { code = "import os\nos.environ.get('code')" },
        { ["X-Access-Token"] = "wrong" })
      assert.equal(200, r.status)
      local text
      for _, l in ipairs(lines(r.body)) do if l.type == "result" then text = l.text end end
      assert.equal("401", text)
    end)

    it("tracebacks carry no colour codes (the template's IPython runs NoColor)", function()
      local r = sb:execute_code("1/0")
      assert.equal(Status.ERROR, r.status)
      assert.is_nil(r.traceback:find("\27", 1, true), r.traceback)
    end)

    it("a string result loses its outer double quotes too", function()
      assert.equal("it's", sb:execute_code([["it's"]]).text)
      assert.equal("x", sb:execute_code("'x'").text)
    end)

    it("lists 100 sandboxes a page at most, with a base64 cursor", function()
      local r = http.json { method = "GET", url = emu.base .. "/v2/sandboxes?limit=101",
        headers = { ["X-API-KEY"] = emu.api_key, Connection = "close" }, timeout = 10 }
      assert.equal(400, r.status)
      assert.matches("at most 100", r.json.message)
      local a = fresh()
      local b = fresh()
      r = http.json { method = "GET", url = emu.base .. "/v2/sandboxes?limit=1",
        headers = { ["X-API-KEY"] = emu.api_key, Connection = "close" }, timeout = 10 }
      local token = r.headers["x-next-token"]
      assert.is_string(token)
      assert.matches("__", require("glsb.core").b64decode((token:gsub("-", "+"):gsub("_", "/"))))
      local ids = {}
      for _, ref in ipairs(glsb.list("e2b", emu:opts { limit = 150 })) do ids[ref.sandbox_id] = true end
      assert.is_true(ids[a.sandbox_id] and ids[b.sandbox_id] and ids[sb.sandbox_id])
    end)

    it("caps a sandbox's life at the plan's length, and the lease clock knows it", function()
      local hobby = emulator.start { args = { "--max-lifetime-hours", "1" } }
      finally(function() hobby:stop() end)
      local ok, err = pcall(glsb.create, "e2b", hobby:opts { timeout = 3601, retry = false })
      assert.is_false(ok)
      assert.is_false(err.transient)
      assert.matches("Timeout cannot be greater than 1 hours", tostring(err))
      local s = glsb.create("e2b", hobby:opts { timeout = 60 })
      finally(function() s:terminate() hobby:stop() end)
      assert.is_true(s:set_timeout(7200))
      local left = s:info().e2b.lease_seconds_left
      assert.is_true(left <= 3600 and left > 3500, tostring(left))
      -- the base class's lease clock (what is_running() and every call check) ends there too
      local clock = s._lease_ends - loop.now()
      assert.is_true(clock <= 3600 and clock > 3500, "lease clock: " .. tostring(clock))
    end)
  end)
end)
