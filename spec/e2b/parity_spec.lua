-- What E2B's SDK offers beyond the contract, through glsb (issue 24), against the E2B emulator: pause and
-- resume (infra handlers/sandbox_pause.go; the emulator freezes the processes, as a memory snapshot keeps
-- them), on_timeout = "pause" (the create body's autoPause), snapshots (handlers/snapshot_template_create.go),
-- code contexts (code-interpreter template/server/main.py /contexts) and the network option as allowOut /
-- denyOut / allow_internet_access (handlers/sandbox_create.go), held to by the emulator's sandboxes; and a
-- localhost of each sandbox's own (a VM's: spec/emulators/README.md "Ports"). #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local http = require "glsb.http"
local loop = require "glsb.loop"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("e2b pause, snapshots, contexts and network #e2b", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)
  -- every sandbox a case made, terminated after it (busted keeps one `finally` per case)
  local made
  before_each(function() made = {} end)
  after_each(function()
    for _, sb in ipairs(made) do sb:terminate() end
    assert.same({}, emu:leftovers())
  end)
  local function keep(sb) made[#made + 1] = sb return sb end

  -- the counter file, read until it holds a number (the loop truncates it before each write), for up to
  -- 10 s: under load the background shell may not have written its first count yet
  local function count(sb)
    local deadline = glsb.now() + 10
    repeat
      local n = tonumber(sb:download_file("/tmp/count"))
      if n then return n end
      loop.sleep(0.02)
    until glsb.now() > deadline
    error("no count in /tmp/count after 10 s")
  end

  local function state_of(id)
    for _, s in ipairs(emu:state().sandboxes) do if s.sandboxID == id then return s.state end end
    return nil
  end

  it("pause keeps the kernel's variables and a running process; connect resumes; the handle says paused", function()
    local sb = keep(glsb.create("e2b", emu:opts { timeout = 120 }))
    assert.equal(Status.SUCCESS, sb:execute_code("kept = 41").status)
    -- a counter in a background shell: after resume it goes on from where it was (a restart counts from 1)
    sb:start_command("i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done")
    local before, deadline = count(sb), glsb.now() + 10
    while before < 5 and glsb.now() < deadline do
      loop.sleep(0.1)
      before = count(sb)
    end
    assert.is_true(before >= 5, tostring(before))
    assert.is_true(sb:pause())
    assert.equal("paused", state_of(sb.sandbox_id))
    assert.equal("paused", sb:info().state)
    local ok, err = pcall(sb.execute_code, sb, "1")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError))
    assert.matches("is paused: glsb.connect", tostring(err), 1, true)
    local listed = glsb.list("e2b", emu:opts { state = "paused" })
    assert.equal(1, #listed)
    assert.equal(sb.sandbox_id, listed[1].sandbox_id)
    assert.equal("paused", listed[1].state)
    local again = keep(glsb.connect("e2b", sb:ref(), emu:opts { timeout = 60 }))
    assert.equal("running", state_of(again.sandbox_id))
    assert.equal("42\n", again:execute_code("print(kept + 1)").stdout)
    loop.sleep(0.5)
    local after = count(again)
    assert.is_true(after > before, ("the counter went on: %s -> %s"):format(before, after))
  end)

  it("on_timeout = 'pause': the lease's end pauses the sandbox instead of killing it, and connect resumes it", function()
    local sb = keep(glsb.create("e2b", emu:opts { timeout = 2, on_timeout = "pause" }))
    assert.equal(Status.SUCCESS, sb:execute_code("kept = 'across the timeout'").status)
    local deadline = os.time() + 15
    while state_of(sb.sandbox_id) ~= "paused" and os.time() < deadline do loop.sleep(0.2) end
    assert.equal("paused", state_of(sb.sandbox_id))
    loop.sleep(0.5)
    assert.equal("paused", sb:info().state, "the base marks the handle paused, not expired")
    local again = keep(glsb.connect("e2b", sb:ref(), emu:opts { timeout = 60 }))
    assert.equal("across the timeout\n", again:execute_code("print(kept)").stdout)
  end)

  it("snapshot gives a template ref that create starts from, with the files as they were", function()
    local sb = keep(glsb.create("e2b", emu:opts()))
    assert.equal(0, sb:execute_command("echo snap > /home/user/snap.txt").code)
    local ref = sb:snapshot({ name = "glsb-parity-snap" })
    assert.equal("e2b", ref.provider)
    assert.equal("snapshot", ref.kind)
    assert.equal("emulator/glsb-parity-snap:default", ref.template_id)
    assert.equal(0, sb:execute_command("echo changed > /home/user/snap.txt").code)
    local from = keep(glsb.create("e2b", emu:opts { template = ref }))
    assert.equal("snap\n", from:download_file("/home/user/snap.txt"))
    assert.equal("changed\n", sb:download_file("/home/user/snap.txt"), "the source runs on")
  end)

  it("contexts: their own variables, language, cwd and env; the default context is untouched", function()
    local sb = keep(glsb.create("e2b", emu:opts { env = { SBX = "wide" } }))
    assert.equal(Status.SUCCESS, sb:execute_code("x = 'default'").status)
    local py <close> = sb:context { cwd = "/tmp", env = { CTX = "py" } }
    assert.equal("python", py.language)
    assert.equal(Status.SUCCESS, py:execute_code("x = 'in the context'").status)
    assert.equal("default\n", sb:execute_code("print(x)").stdout)
    local r = py:execute_code("import os\nprint(x, os.getcwd(), os.environ['CTX'], os.environ['SBX'], os.environ['CALL'])",
      { env = { CALL = "call" } })
    assert.equal("in the context /tmp py wide call\n", r.stdout)
    local js = sb:context { language = "javascript", cwd = "/home/user" }
    assert.equal(Status.SUCCESS, js:execute_code("const n = 20").status)
    r = js:execute_code("n + 22")
    assert.equal("42", r.text)
    js:close()
    local ok, err = pcall(js.execute_code, js, "1")
    assert.is_false(ok)
    assert.matches("this context is closed", tostring(err), 1, true)
    ok, err = pcall(py.execute_code, py, "1", { language = "javascript" })
    assert.is_false(ok)
    assert.matches("this context runs python, not javascript", tostring(err), 1, true)
    ok, err = pcall(sb.context, sb, { language = "cobol" })
    assert.is_false(ok)
    assert.matches("does not run language 'cobol' (it runs: bash, java, javascript, python, r, typescript)", tostring(err),
      1, true)
    -- a language the interpreter has no kernel for: the server's refusal, as a clear context error
    ok, err = pcall(sb.context, sb, { language = "r" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError))
    assert.equal("context", err.stage)
    assert.matches("The 'r' kernel is not available", tostring(err), 1, true)
  end)

  it("each sandbox has a localhost of its own: two serve one port at once, each reached through its own host",
    function()
      local port = 18000 + math.random(0, 999)
      local a = keep(glsb.create("e2b", emu:opts()))
      local b = keep(glsb.create("e2b", emu:opts()))
      for sb, name in pairs({ [a] = "A", [b] = "B" }) do
        sb.files:write("/home/user/www/who", name)
        sb:start_command(("cd /home/user/www && python3 -m http.server %d"):format(port))
      end
      for sb, name in pairs({ [a] = "A", [b] = "B" }) do
        -- the sandbox's host (the SDK's getHost: <port>-<id>.<domain>) as the edge proxy routes it
        local host = sb:get_host(port)
        local res
        for _ = 1, 100 do
          res = http.request({ method = "GET", url = emu.base .. "/who", headers = { Host = host }, timeout = 5 })
          if res.status == 200 then break end
          loop.sleep(0.05)
        end
        assert.equal(200, res.status, host)
        assert.equal(name, res.body)
        assert.equal(name, sb:execute_command(("curl -s http://localhost:%d/who"):format(port)).stdout)
      end
    end)

  it("network: {allow, deny} is allowOut/denyOut (allow wins), false is no egress; held to in the sandbox", function()
    -- a server on 127.0.0.2 stands for the outside
    local port = 18000 + math.random(0, 999)
    local srv = io.popen(("/usr/bin/python3 -m http.server %d --bind 127.0.0.2 >/dev/null 2>&1 & echo $!"):format(port))
    local pid = srv:read("l")
    srv:close()
    finally(function() os.execute("kill " .. pid) end)
    local url = ("http://127.0.0.2:%d/"):format(port)
    local deadline = os.time() + 10
    while http.request({ method = "GET", url = url, timeout = 1 }).status ~= 200 and os.time() < deadline do
      loop.sleep(0.1)
    end
    local function reach(sb)
      local r = sb:execute_command("curl -s -o /dev/null -w '%{http_code}' --max-time 5 " .. url)
      return r.stdout
    end
    local open = keep(glsb.create("e2b", emu:opts { network = true }))
    assert.equal("200", reach(open))
    local allowed = keep(glsb.create("e2b", emu:opts { network = { allow = { "127.0.0.2" }, deny = { "0.0.0.0/0" } } }))
    assert.equal("200", reach(allowed))
    local denied = keep(glsb.create("e2b", emu:opts { network = { deny = { "127.0.0.0/24" } } }))
    assert.equal("000", reach(denied))
    local none = keep(glsb.create("e2b", emu:opts { network = false }))
    assert.equal("000", reach(none))
    local ok, err = pcall(glsb.create, "e2b", emu:opts { network = { deny = { "pypi.org" } } })
    assert.is_false(ok)
    assert.matches("network.deny%[1%] \"pypi.org\" is not an IPv4 address or CIDR", tostring(err))
  end)
end)
