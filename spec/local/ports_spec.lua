-- get_host on the local provider. With network = true the sandbox has a net namespace of its own
-- (slirp4netns): get_host(port) forwards a port of the host's 127.0.0.1 to that port, where a server
-- started inside (start_command) answers over real HTTP. Without it the sandbox has a loopback of its
-- own and get_host says so (the contract suite checks the words). What else a networked sandbox
-- reaches, or not: spec/security/local_network_spec.lua.
local glsb = require "glsb"
local errors = require "glsb.errors"
local http = require "glsb.http"
local loop = require "glsb.loop"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

describe("local get_host #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function()
    helper.remove_root(root)
  end)
  after_each(function() if sb then sb:terminate() sb = nil end end)

  it("with network = true: a server started inside is reached at get_host(port)", function()
    sb = glsb.create("local", { host_workspace_dir = root, network = true })
    sb.files:write("www/hello.txt", "hello from the sandbox")
    -- the sandbox's ports are its own: a fixed one is free there whatever the host runs
    local server = sb:start_command("python3 -m http.server --bind 127.0.0.1 8000", { cwd = "/home/user/www" })
    local host = sb:get_host(8000)
    local hport = tonumber(host:match("^127%.0%.0%.1:(%d+)$"))
    assert.truthy(hport, host)
    assert.are.equal(host, sb:get_host(8000))
    local deadline = loop.now() + 10
    local res
    repeat
      res = http.request { method = "GET", url = "http://" .. host .. "/hello.txt", timeout = 2 }
      if res.status == 200 or server:done() then break end
      glsb.sleep(0.05)
    until loop.now() > deadline
    assert.are.equal(200, res.status, tostring(res.error and res.error.message))
    assert.are.equal("hello from the sandbox", res.body)
    assert.is_true(server:kill())
    assert.are_not.equal(Status.SUCCESS, server:wait(10).status)
  end)

  it("without network: says why nothing is reachable", function()
    sb = glsb.create("local", { host_workspace_dir = root })
    local ok, err = pcall(sb.get_host, sb, 8000)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
    assert.matches("network = true", tostring(err))
  end)
end)
