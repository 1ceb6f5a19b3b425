-- The OpenSandbox adapter's handles that outlive a process (ref, connect, list), background commands,
-- ports, files and info, against the emulator. #opensandbox
local glsb = require "glsb"
local emulator = require "opensandbox.emulator"
local shell = require "support.shell"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("opensandbox handles #opensandbox", function()
  local emu, prev_log

  setup(function()
    emu = emulator.start()
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  after_each(function() emu:clear_faults() end)

  local function provider_opts(extra)
    local o = { domain = emu.base, api_key = emu.api_key }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end

  it("ref -> connect reaches the same sandbox (state kept); list finds it by metadata and state", function()
    local sb = glsb.create("opensandbox", emu:opts { metadata = { suite = "handles" }, timeout = 600 })
    finally(function() pcall(sb.terminate, sb) end)
    sb:execute_code("kept = 41")
    local ref = sb:ref()
    assert.same({ provider = "opensandbox", sandbox_id = sb.sandbox_id, language = "python", domain = emu.base },
      { provider = ref.provider, sandbox_id = ref.sandbox_id, language = ref.language, domain = ref.domain })
    assert.is_nil(ref.api_key)
    local again = glsb.connect("opensandbox", ref, { api_key = emu.api_key })
    assert.equal(sb.sandbox_id, again.sandbox_id)
    assert.equal("42\n", again:execute_code("print(kept + 1)").stdout)
    assert.same({ suite = "handles" }, again.metadata)
    local left = again:info().ends_at
    assert.is_string(left)

    local listed = glsb.list("opensandbox", provider_opts { metadata = { suite = "handles" } })
    assert.equal(1, #listed)
    assert.equal(sb.sandbox_id, listed[1].sandbox_id)
    assert.equal("running", listed[1].state)
    assert.same({ suite = "handles" }, listed[1].metadata)
    assert.equal(0, #glsb.list("opensandbox", provider_opts { metadata = { suite = "handles" }, state = "paused" }))
    assert.equal(0, #glsb.list("opensandbox", provider_opts { metadata = { suite = "other" } }))
    -- by id, from another process: a fresh glsb-lua prints what it ran
    local out = shell.sh(("OPEN_SANDBOX_DOMAIN=%s OPEN_SANDBOX_API_KEY=%s %s/build/glsb-lua -e %s"):format(
      emu.base, emu.api_key, shell.repo, shell.q(([[local glsb = require "glsb"
local sb = glsb.connect("opensandbox", %q, { keep_alive = true })
io.write(sb:execute_code("print(kept * 2)").stdout)]]):format(sb.sandbox_id))))
    assert.equal("82\n", out)
    assert.equal("41\n", sb:execute_code("print(kept)").stdout, "the other process left it running")
  end)

  it("list reads every page (pageSize honoured), stops at limit, and keeps the filters on each page", function()
    local provider = require "glsb.providers.opensandbox"
    local lifecycle = require "glsb.providers.opensandbox.lifecycle"
    local made, real, prev = {}, lifecycle.request, provider.LIST_PAGE_SIZE
    finally(function() -- one finally per test (busted keeps the last one given)
      lifecycle.request = real
      provider.LIST_PAGE_SIZE = prev
      for _, sb in ipairs(made) do pcall(sb.terminate, sb) end
    end)
    for i = 1, 5 do made[i] = glsb.create("opensandbox", emu:opts { metadata = { suite = "pages" }, timeout = 600 }) end
    made[6] = glsb.create("opensandbox", emu:opts { metadata = { suite = "not-pages" }, timeout = 600 })
    -- count the list requests and what each asked for
    local pages = {}
    lifecycle.request = function(cfg, method, path, body, o)
      if method == "GET" and path == "/sandboxes" then pages[#pages + 1] = o and o.query or "" end
      return real(cfg, method, path, body, o)
    end
    provider.LIST_PAGE_SIZE = 2
    local listed = glsb.list("opensandbox", provider_opts { metadata = { suite = "pages" } })
    local want, got = {}, {}
    for i = 1, 5 do want[#want + 1] = made[i].sandbox_id end
    for _, r in ipairs(listed) do got[#got + 1] = r.sandbox_id end
    table.sort(want)
    table.sort(got)
    assert.same(want, got)
    assert.equal(3, #pages, "5 sandboxes at 2 a page")
    for i, q in ipairs(pages) do
      assert.matches("pageSize=2", q, 1, true)
      assert.matches("page=" .. i, q, 1, true)
      assert.matches("metadata=suite%3Dpages", q, 1, true)
    end
    pages = {}
    assert.equal(3, #glsb.list("opensandbox", provider_opts { metadata = { suite = "pages" }, limit = 3 }))
    assert.equal(2, #pages, "limit stops paging")
  end)

  it("connect resumes a paused sandbox, renews the lease when asked, and fails clearly for a gone one", function()
    local sb = glsb.create("opensandbox", emu:opts())
    finally(function() pcall(sb.terminate, sb) end)
    sb:execute_code("x = 'paused and back'")
    emu:api("POST", "/sandboxes/" .. sb.sandbox_id .. "/pause")
    local again = glsb.connect("opensandbox", sb.sandbox_id, provider_opts { timeout = 900 })
    assert.equal("Running", emu:api("GET", "/sandboxes/" .. sb.sandbox_id).status.state)
    assert.equal("paused and back", again:execute_code("x").text)
    local expires = require("glsb.time").parse_iso(
      emu:api("GET", "/sandboxes/" .. sb.sandbox_id).expiresAt)
    assert.is_true(expires - os.time() > 800)
    sb:terminate()
    local ok, err = pcall(glsb.connect, "opensandbox", again.sandbox_id, provider_opts())
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.equal(glsb.Stage.CONNECT, err.stage)
    assert.matches("no sandbox", err.message)
    assert.equal("DOCKER::SANDBOX_NOT_FOUND", err.server_code)
  end)

  it("start_command streams lines, output() so far, kill() ends it through DELETE /command", function()
    local sb = glsb.create("opensandbox", emu:opts())
    finally(function() pcall(sb.terminate, sb) end)
    local lines = {}
    local p = sb:start_command("echo one; sleep 0.2; echo two; sleep 30",
      { on_stdout = function(l) lines[#lines + 1] = l end })
    local deadline = glsb.now() + 5
    while #lines < 2 and glsb.now() < deadline do glsb.sleep(0.05) end
    assert.same({ "one", "two" }, lines)
    assert.matches("^%x+$", p.pid)
    assert.is_true(p:kill())
    local r = p:wait(10)
    assert.equal(Status.ERROR, r.status)
    assert.equal("command ended by signal: SIGTERM", r.error)
    assert.is_false(p:kill())
  end)

  it("get_host reaches a server started in the sandbox (the server proxy route when the gateway routes by header)", function()
    local sb = glsb.create("opensandbox", emu:opts())
    finally(function() pcall(sb.terminate, sb) end)
    sb:execute_command("mkdir -p /tmp/www && echo served > /tmp/www/hello.txt")
    -- port 0: the kernel picks a free one (the emulator's sandboxes share this machine's loopback, where a
    -- port picked here at random could be another program's); the server prints which
    local srv = sb:start_command("cd /tmp/www && exec /usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1")
    local port
    local started = glsb.now() + 10
    repeat
      port = tonumber((srv:output()):match("port (%d+)"))
      if not port then glsb.sleep(0.05) end
    until port or glsb.now() > started
    assert.is_number(port, "the server did not say its port: " .. srv:output())
    local host = sb:get_host(port)
    assert.equal(emu.base:gsub("^http://", "") .. "/sandboxes/" .. sb.sandbox_id .. "/proxy/" .. port, host)
    local ep = sb:get_endpoint(port)
    assert.equal(sb.sandbox_id .. "-" .. port, ep.headers["OpenSandbox-Ingress-To"])
    local body
    local deadline = glsb.now() + 10
    repeat
      local res = require("glsb.http").request { url = "http://" .. host .. "/hello.txt", timeout = 5 }
      if res.status == 200 then body = res.body else glsb.sleep(0.1) end
    until body or glsb.now() > deadline
    assert.equal("served\n", body)
    srv:kill()
  end)

  it("files through execd's file API; info from the lifecycle API", function()
    local sb = glsb.create("opensandbox", emu:opts())
    finally(function() pcall(sb.terminate, sb) end)
    local f = sb.files
    f:write("/workspace/d/a.txt", "A\0B")
    assert.equal("A\0B", f:read("/workspace/d/a.txt"))
    assert.is_true(f:exists("/workspace/d/a.txt"))
    assert.is_false(f:exists("/workspace/d/none"))
    assert.is_true(f:make_dir("/workspace/d/sub"))
    assert.is_false(f:make_dir("/workspace/d/sub"))
    local names = {}
    for _, e in ipairs(f:list("/workspace/d")) do names[#names + 1] = e.name .. ":" .. e.type .. ":" .. tostring(e.size) end
    assert.same({ "a.txt:file:3", "sub:dir:4096" }, { names[1], (names[2]:gsub(":%d+$", ":4096")) })
    f:remove("/workspace/d")
    assert.is_false(f:exists("/workspace/d/a.txt"))
    local ok, err = pcall(f.read, f, "/workspace/nope")
    assert.is_false(ok)
    assert.equal("not_found", err.reason)
    local i = sb:info()
    assert.equal("running", i.server_state)
    assert.equal("opensandbox/code-interpreter:v1.1.0", i.opensandbox.image)
    assert.equal("opensandbox/code-interpreter:v1.1.0", i.image, "the old name reads for one release")
    assert.equal(i.ends_at, i.expires_at, "the old name reads for one release")
    assert.is_nil(i.metadata["glsb-create-token"])
  end)

  it("the template builder lists and deletes the snapshots it made", function()
    local b = glsb.template("opensandbox", provider_opts { progress = false })
    local res = b:ensure { name = "glsb-handles-tpl", run = { "true" } }
    local found
    for _, t in ipairs(b:list()) do
      if t.template_id == res.ref.template_id then found = t end
    end
    assert.is_table(found)
    assert.equal("glsb-handles-tpl", found.name)
    assert.equal("Ready", found.state)
    assert.is_true(b:delete("glsb-handles-tpl"))
    assert.is_false(b:delete("glsb-handles-tpl"))
    assert.same({}, emu:leftovers())
  end)
end)
