-- Background commands on the local provider (start_command): the agent starts them at once, whatever
-- else runs, and their events share the agent's stream with every other request (mux.lua). Real
-- sandboxes, real processes.
local glsb = require "glsb"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

describe("local start_command #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function()
    helper.remove_root(root)
  end)
  before_each(function() sb = glsb.create("local", { host_workspace_dir = root }) end)
  after_each(function() if sb then sb:terminate() end end)

  it("runs while execute_code runs: its output arrives and it ends before the code does", function()
    glsb.run(function()
      local order = {}
      local code = glsb.spawn(function()
        local r = sb:execute_code("import time\ntime.sleep(1.5)\nprint('code done')")
        order[#order + 1] = "code"
        return r
      end)
      glsb.sleep(0.2) -- the code runs now
      local lines = {}
      local p = sb:start_command("echo one; sleep 0.2; echo two", { on_stdout = function(l) lines[#lines + 1] = l end })
      local r = p:wait(10)
      order[#order + 1] = "background"
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("one\ntwo\n", r.stdout)
      assert.are.same({ "one", "two" }, lines)
      assert.is_false(code:done(), "the background command ended while the code still ran")
      assert.are.equal("code done\n", code:wait().stdout)
      assert.are.same({ "background", "code" }, order)
    end)
  end)

  it("keeps several commands' output apart, and foreground calls go on meanwhile", function()
    local ps = {}
    for i = 1, 5 do
      ps[i] = sb:start_command(string.format("for j in 1 2 3; do echo c%d-$j; sleep 0.05; done; echo err%d >&2", i, i))
    end
    for _ = 1, 5 do assert.are.equal("x\n", sb:execute_command("echo x").stdout) end
    assert.are.equal("2\n", sb:execute_code("print(1 + 1)").stdout)
    for i, p in ipairs(ps) do
      local r = p:wait(10)
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal(string.format("c%d-1\nc%d-2\nc%d-3\n", i, i, i), r.stdout)
      assert.are.equal(string.format("err%d\n", i), r.stderr)
      assert.is_true(p:done())
    end
  end)

  it("is read while the owner only sleeps: output beyond the pipes' size does not stall it", function()
    -- 4 MB of output, more than the agent's pipes hold: someone must read it while nothing else runs
    local p = sb:start_command("head -c 4000000 /dev/zero | tr '\\0' 'a'; echo; echo end")
    glsb.sleep(1)
    local r = p:wait(20)
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(4000000 + 5, #r.stdout)
    assert.truthy(r.stdout:find("\nend\n$"))
  end)

  it("output() gives what arrived so far; kill() ends it; the sandbox stays usable", function()
    local p = sb:start_command("echo up; sleep 30")
    local deadline = loop.now() + 5
    while p:output() == "" and loop.now() < deadline do glsb.sleep(0.02) end
    assert.are.equal("up\n", (p:output()))
    assert.is_number(p.pid)
    assert.is_nil(p:wait(0.1))
    assert.is_true(p:kill())
    local r = p:wait(10)
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal(137, r.code)
    assert.are.equal("command ended by signal: SIGKILL", r.error)
    assert.is_false(p:kill(), "kill of an ended command")
    -- the whole group went: nothing of it is left in the sandbox
    local ps = sb:execute_command("ps -e -o comm=")
    assert.is_nil(ps.stdout:find("sleep", 1, true), ps.stdout)
  end)

  it("reports its exit code, its timeout, a missing program and a bad cwd", function()
    local r = sb:start_command("exit 3"):wait(10)
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal(3, r.code)
    assert.are.equal("command exited with code 3", r.error)
    r = sb:start_command("sleep 10", { timeout = 0.3 }):wait(10)
    assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
    r = sb:start_command("no-such-program-xyz"):wait(10)
    assert.are.equal(127, r.code)
    assert.matches("not found", r.stderr)
    r = sb:start_command("pwd", { cwd = "/home/user/no-such-dir" }):wait(10)
    assert.are.equal(Status.ERROR, r.status)
    assert.matches("no%-such%-dir", r.error)
    r = sb:start_command("pwd; echo $A", { cwd = "/tmp", env = { A = "from env" } }):wait(10)
    assert.are.equal("/tmp\nfrom env\n", r.stdout)
  end)

  it("ends with its sandbox: terminate gives each handle a result saying so, nothing is left", function()
    local p = sb:start_command("sleep 30")
    local q = sb:start_command("echo started; sleep 30")
    local deadline = loop.now() + 5
    while q:output() == "" and loop.now() < deadline do glsb.sleep(0.02) end
    local pid = sb.host_pid
    sb:terminate()
    for _, h in ipairs({ p, q }) do
      local r = h:wait(5)
      assert.is_true(h:done())
      assert.are.equal(Status.ERROR, r.status)
      assert.matches("terminated", r.error)
    end
    assert.is_false(helper.pid_alive(pid))
    local ok, err = pcall(sb.start_command, sb, "true")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
    sb = nil
  end)

  it("ends when the interpreter dies: the handle says the sandbox is gone", function()
    local p = sb:start_command("sleep 30")
    local r = sb:execute_code("import os\nos._exit(5)")
    assert.are.equal(Status.ERROR, r.status)
    local b = p:wait(5)
    assert.are.equal(Status.ERROR, b.status)
    assert.matches("exited with code 5", b.error)
    assert.is_false(sb:is_running())
  end)

  it("keeps at most the output cap of a command that writes without end", function()
    local p = sb:start_command("head -c 12000000 /dev/zero")
    local r = p:wait(30)
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.is_true(r.stdout_truncated)
    assert.are.equal(require("glsb.output").CAP, #r.stdout:match("^%z*"))
  end)
end)
