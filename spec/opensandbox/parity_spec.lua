-- What OpenSandbox's SDK offers beyond the contract, through glsb (issue 24), against the OpenSandbox
-- emulator: pause (POST /sandboxes/{id}/pause, docker pause) and resume through connect, snapshots
-- (POST /sandboxes/{id}/snapshots, create from snapshotId), code contexts and languages (execd
-- /code/context: tslab's javascript and typescript, bash_kernel; "no kernel specs found" for a language the
-- image lacks), volumes (server services/validators.py, docker/volumes.py) and the network option as a
-- networkPolicy (specs/sandbox-lifecycle.yml), held to by the emulator's sandboxes. #opensandbox
local glsb = require "glsb"
local emulator = require "opensandbox.emulator"
local http = require "glsb.http"
local loop = require "glsb.loop"
local fs = require "glsb.fs"

local Status = glsb.ExecutionStatus

describe("opensandbox pause, snapshots, contexts, languages, volumes and network #opensandbox", function()
  local emu, host_dir

  setup(function()
    host_dir = fs.mkdtemp("/tmp/glsb-os-vol-XXXXXX")
    emu = emulator.start { args = { "--allowed-host-path", host_dir } }
  end)
  teardown(function()
    if emu then emu:stop() end
    if host_dir then fs.rmtree(host_dir) end
  end)

  local made
  before_each(function() made = {} end)
  after_each(function()
    for _, sb in ipairs(made) do sb:terminate() end
    local deadline = loop.now() + 3
    local st = emu:state()
    while (#st.sandboxes > 0 or st.children > 0) and loop.now() < deadline do loop.sleep(0.05) st = emu:state() end
    assert.same({}, st.sandboxes)
    assert.equal(0, st.children)
  end)
  local function keep(sb) made[#made + 1] = sb return sb end

  local function state_of(id)
    for _, s in ipairs(emu:state().sandboxes) do if s.id == id then return s.state end end
    return nil
  end

  it("pause keeps the kernel's variables; connect resumes; on_timeout = 'pause' is refused with the reason", function()
    local sb = glsb.create("opensandbox", emu:opts())
    assert.equal(Status.SUCCESS, sb:execute_code("kept = 41").status)
    assert.is_true(sb:pause())
    assert.equal("Paused", state_of(sb.sandbox_id))
    assert.equal("paused", sb:info().state)
    local again = keep(glsb.connect("opensandbox", sb:ref(), emu:opts()))
    assert.equal("Running", state_of(again.sandbox_id))
    assert.equal("42\n", again:execute_code("print(kept + 1)").stdout)
    local ok, err = pcall(glsb.create, "opensandbox", emu:opts { on_timeout = "pause" })
    assert.is_false(ok)
    assert.matches("cannot pause a sandbox at its timeout .*: OpenSandbox deletes a sandbox when its lease ends", tostring(err))
  end)

  it("snapshot gives a ref that create starts from", function()
    local sb = keep(glsb.create("opensandbox", emu:opts()))
    assert.equal(0, sb:execute_command("echo snap > /workspace/snap.txt").code)
    local ref = sb:snapshot { name = "glsb-parity" }
    assert.equal("opensandbox", ref.provider)
    assert.equal("glsb-parity", ref.name)
    assert.matches("^%x+%-", ref.template_id)
    local from = keep(glsb.create("opensandbox", emu:opts { template = ref }))
    assert.equal("snap\n", from:download_file("/workspace/snap.txt"))
  end)

  it("execute_code and contexts in python, javascript, typescript and bash, with cwd and env; java refused", function()
    local sb = keep(glsb.create("opensandbox", emu:opts()))
    local r = sb:execute_code("console.log('js', 6 * 7)", { language = "javascript" })
    assert.equal(Status.SUCCESS, r.status, tostring(r.error))
    assert.equal("js 42\n", r.stdout)
    assert.equal("ts 4\n", sb:execute_code("const n: number = 4; console.log('ts', n)", { language = "typescript" }).stdout)
    assert.equal("bash\n", sb:execute_command("echo bash").stdout)
    assert.equal("from bash x\n", sb:execute_code("echo from bash $V", { language = "bash", env = { V = "x" } }).stdout)
    local js = sb:context { language = "javascript", cwd = "/tmp", env = { CTX = "js" } }
    assert.equal(Status.SUCCESS, js:execute_code("const kept = 20").status)
    r = js:execute_code("console.log(process.cwd(), process.env.CTX, process.env.CALL); kept + 22", { env = { CALL = "c" } })
    assert.equal("/tmp js c\n", r.stdout)
    assert.equal("42", r.text)
    assert.equal("undefined\n", js:execute_code("console.log(process.env.CALL)").stdout, "a call's env is restored")
    js:close()
    local py = sb:context { cwd = "/tmp" }
    assert.equal(Status.SUCCESS, py:execute_code("x = 'py context'").status)
    assert.equal("py context /tmp\n", py:execute_code("import os\nprint(x, os.getcwd())").stdout)
    assert.matches("NameError", sb:execute_code("print(x)").error, 1, true)
    r = sb:execute_code("System.out.println(1);", { language = "java" })
    assert.equal(Status.ERROR, r.status)
    assert.matches("no kernel specs found", r.error, 1, true)
    local ok, err = pcall(sb.context, sb, { language = "go" })
    assert.is_false(ok)
    assert.equal("context", err.stage)
    assert.matches("no kernel specs found", tostring(err), 1, true)
    ok, err = pcall(sb.execute_code, sb, "1", { language = "cobol" })
    assert.is_false(ok)
    assert.matches("does not run language 'cobol' (it runs: bash, go, java, javascript, python, typescript)", tostring(err),
      1, true)
  end)

  it("volumes: a host directory read-write and a named volume read-only, as the API takes them", function()
    local f = assert(io.open(host_dir .. "/marker.txt", "w"))
    f:write("host")
    f:close()
    emu:admin("POST", "/_emulator/volumes", { name = "glsb-parity-pvc", files = { ["data.txt"] = "pvc" } })
    local sb = keep(glsb.create("opensandbox", emu:opts { volumes = {
      { name = "h", host = { path = host_dir }, mountPath = "/mnt/h" },
      { name = "p", pvc = { claimName = "glsb-parity-pvc" }, mountPath = "/mnt/p", readOnly = true },
    } }))
    assert.equal("host", sb:execute_command("cat /mnt/h/marker.txt").stdout)
    assert.equal(0, sb:execute_command("echo out > /mnt/h/out.txt").code)
    local back = assert(io.open(host_dir .. "/out.txt")):read("a")
    assert.equal("out\n", back)
    assert.equal("pvc", sb:execute_command("cat /mnt/p/data.txt").stdout)
    assert.is_not.equal(0, sb:execute_command("echo x > /mnt/p/x.txt").code)
    local ok, err = pcall(glsb.create, "opensandbox", emu:opts { volumes = {
      { name = "x", pvc = { claimName = "glsb-no-such-volume" }, mountPath = "/mnt/x" } } })
    assert.is_false(ok)
    assert.equal("create", err.stage)
    assert.matches("VOLUME::PVC_NOT_FOUND", tostring(err), 1, true)
    ok, err = pcall(glsb.create, "opensandbox", emu:opts { volumes = { "not a table" } })
    assert.is_false(ok)
    assert.matches("volumes%[1%] must be a table", tostring(err))
  end)

  it("network: {allow, deny} as a networkPolicy (deny by default with 0.0.0.0/0), false none; held to", function()
    local port = 19000 + math.random(0, 999)
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
      return sb:execute_command("curl -s -o /dev/null -w '%{http_code}' --max-time 5 " .. url).stdout
    end
    local allowed = keep(glsb.create("opensandbox", emu:opts { network = { allow = { "127.0.0.2" }, deny = { "0.0.0.0/0" } } }))
    assert.equal("200", reach(allowed))
    local denied = keep(glsb.create("opensandbox", emu:opts { network = { allow = { "pypi.org" }, deny = { "0.0.0.0/0" } } }))
    assert.equal("000", reach(denied))
    local none = keep(glsb.create("opensandbox", emu:opts { network = false }))
    assert.equal("000", reach(none))
    local open = keep(glsb.create("opensandbox", emu:opts { network = true }))
    assert.equal("200", reach(open))
    local ok, err = pcall(glsb.create, "opensandbox", emu:opts { network = false, network_policy = { default_action = "deny" } })
    assert.is_false(ok)
    assert.matches("either 'network' or 'network_policy'", tostring(err), 1, true)
  end)
end)
