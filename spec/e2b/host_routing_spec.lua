-- E2B as the real service is reached: HTTPS on host names, https://api.<domain> for the control plane
-- and https://<port>-<sandboxID>.<domain> for envd and the interpreter (no sandbox_url override), with
-- the certificate checked against those names. The emulator serves TLS for *.e2b.test; connect_to sends
-- every name to it. #e2b
local emulator = require "e2b.emulator"
local glsb = require "glsb"
local core = require "glsb.core"

describe("e2b over HTTPS host names #e2b", function()
  local emu, dir

  setup(function()
    dir = core.mkdtemp("/tmp/glsb-e2b-tls-XXXXXX")
    assert(os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 1 "
      .. "-subj /CN=e2b.test -addext subjectAltName=DNS:*.e2b.test,DNS:e2b.test 2>/dev/null"):format(dir, dir)))
    emu = emulator.start({ tls = { domain = "e2b.test", cert = dir .. "/cert.pem", key = dir .. "/key.pem" } })
  end)

  teardown(function()
    if emu then emu:stop() end
    if dir then core.rmtree(dir) end
  end)

  local function opts(extra)
    local o = { api_key = emu.api_key, domain = "e2b.test", cainfo = emu.transport.cainfo,
                connect_to = emu.transport.connect_to, timeout = 60 }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end

  it("creates, runs code and a command, moves files, and terminates through host-named URLs", function()
    local sb = glsb.create("e2b", opts())
    finally(function() sb:terminate() end)
    assert.matches("^https://api%.e2b%.test$", sb._cfg.api_url)
    assert.is_nil(sb._cfg.sandbox_url)
    local r = sb:execute_code("x = 6 * 7\nprint(x)")
    assert.equal(glsb.ExecutionStatus.SUCCESS, r.status, tostring(r))
    assert.equal("42\n", r.stdout)
    local c = sb:execute_command("echo routed by host")
    assert.equal(0, c.code)
    assert.equal("routed by host\n", c.stdout)
    r = sb:execute_code("print(open('/files/in.txt').read())", { files = { glsb.SandboxFile.from_bytes("via tls", "in.txt") } })
    assert.equal("via tls\n", r.stdout)
    assert.equal("via tls", sb:download_file("/files/in.txt"))
  end)

  -- issue 24: the files upload URL of a template build names the scheme the listener serves (infra
  -- handlers/template_layer_files_upload.go hands out the storage's signed URL; the emulator's is on its
  -- own listener), so a COPY archive goes up over TLS too (an http:// URL from a TLS listener failed)
  it("builds a template with files over TLS: the upload URL is https and the files reach the sandbox", function()
    local b = glsb.template("e2b", { api_key = emu.api_key, domain = "e2b.test", cainfo = emu.transport.cainfo,
      connect_to = emu.transport.connect_to, progress = false })
    local res = b:ensure { name = "glsb-e2b-tls-files", files = { { path = "/home/user/t.txt", data = "over tls" } } }
    assert.is_true(res.built)
    local sb = glsb.create("e2b", opts({ template = res.ref.name }))
    finally(function() sb:terminate() end)
    assert.equal("over tls", sb:download_file("/home/user/t.txt"))
  end)

  it("refuses a server whose certificate it cannot verify (no cainfo): a permanent start failure", function()
    local ok, err = pcall(glsb.create, "e2b", opts({ cainfo = false }))
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.SandboxStartError), tostring(err))
    assert.equal("create", err.stage)
    assert.is_false(err.transient) -- no retry mends a certificate: create did not retry it
    assert.matches("PEER_FAILED_VERIFICATION", tostring(err), 1, true)
    assert.equal(0, #emu:state().sandboxes) -- nothing was created
  end)
end)

-- issue 15 #14: on E2B's own domains the SDK reaches envd at one shared host, https://sandbox.<domain>,
-- routed by the E2b-Sandbox-Id / -Port headers (SDK ConnectionConfig.getSandboxUrl, supportedDomains; the
-- edge proxy honours the headers there: infra shared/pkg/proxy/host.go). The code interpreter stays on
-- https://49999-<id>.<domain> (the SDK's getHost). #e2b
describe("e2b on E2B's own domain: envd at the shared host #e2b", function()
  local emu, dir

  setup(function()
    dir = core.mkdtemp("/tmp/glsb-e2b-tls-XXXXXX")
    assert(os.execute(("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 1 "
      .. "-subj /CN=e2b.app -addext subjectAltName=DNS:*.e2b.app,DNS:e2b.app 2>/dev/null"):format(dir, dir)))
    emu = emulator.start({ tls = { domain = "e2b.app", cert = dir .. "/cert.pem", key = dir .. "/key.pem" } })
  end)

  teardown(function()
    if emu then emu:stop() end
    if dir then core.rmtree(dir) end
  end)

  it("sends every envd request to sandbox.e2b.app, the interpreter's to 49999-<id>.e2b.app", function()
    local sb = glsb.create("e2b", { api_key = emu.api_key, domain = "e2b.app", cainfo = emu.transport.cainfo,
      connect_to = emu.transport.connect_to, timeout = 60 })
    finally(function() sb:terminate() end)
    assert.equal("shared\n", sb:execute_command("echo shared").stdout)
    sb.files:write("/home/user/f.txt", "f")
    assert.equal("f", sb.files:read("/home/user/f.txt"))
    assert.equal("2\n", sb:execute_code("print(1 + 1)").stdout)
    local hosts = emu:state().dataPlaneHosts
    assert.is_true((hosts["sandbox.e2b.app"] or 0) >= 3, require("cjson").encode(hosts))
    assert.is_nil(hosts["49983-" .. sb.sandbox_id .. ".e2b.app"], "no per-sandbox envd host")
    assert.is_true((hosts["49999-" .. sb.sandbox_id .. ".e2b.app"] or 0) >= 1)
  end)
end)
