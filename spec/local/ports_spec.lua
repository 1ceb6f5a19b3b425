-- get_host on the local provider. With network = true the sandbox shares the host's network: a server
-- started inside (start_command) is reached at get_host(port) = 127.0.0.1:port, over real HTTP. Without
-- it the sandbox has a loopback of its own and get_host says so (the contract suite checks the words).
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
    -- a free port: the kernel picks one, the server takes it after (a race with other users of the
    -- host's ports that a retry settles)
    local server, host
    for _ = 1, 5 do
      local port = tonumber(sb:execute_code(
        "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\np = s.getsockname()[1]\ns.close()\np").text)
      server = sb:start_command("python3 -m http.server --bind 127.0.0.1 " .. port, { cwd = "/home/user/www" })
      host = sb:get_host(port)
      assert.are.equal("127.0.0.1:" .. port, host)
      local deadline = loop.now() + 10
      local res
      repeat
        res = http.request { method = "GET", url = "http://" .. host .. "/hello.txt", timeout = 2 }
        if res.status == 200 or server:done() then break end
        glsb.sleep(0.05)
      until loop.now() > deadline
      if res.status == 200 then
        assert.are.equal("hello from the sandbox", res.body)
        break
      end
      server = nil
    end
    assert.truthy(server, "no server answered")
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
