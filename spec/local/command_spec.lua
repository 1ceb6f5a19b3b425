-- execute_command on the local provider: a command bash would only exec runs without bash (the agent
-- execs the program itself, as bash would: PROTOCOL.md "Commands without bash"); everything else goes
-- through bash. Either way the result is the same: these pairs run once each way.
local glsb = require "glsb"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

describe("local execute_command, with and without bash #local", function()
  local root, sb

  setup(function()
    root = helper.private_tmp()
    sb = glsb.create("local", { host_workspace_dir = root })
    sb.files:write("/home/user/bin/show-args", "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n")
    sb:execute_command("chmod +x /home/user/bin/show-args")
  end)
  teardown(function()
    if sb then sb:terminate() end
    helper.remove_root(root)
  end)

  local function sorted_lines(s)
    local t = {}
    for l in s:gmatch("[^\n]*\n") do t[#t + 1] = l end
    table.sort(t)
    return table.concat(t)
  end

  -- The same command once as written (plain words: run without bash) and once with its first word
  -- quoted (bash runs it, with bash's own exec of a simple command): everything must be equal (an
  -- environment in any order: bash lists it in an order of its own).
  local function both(cmd, opts, unordered)
    local first, rest = cmd:match("^(%S+)(.*)$")
    local direct = sb:execute_command(cmd, opts)
    local bashed = sb:execute_command("'" .. first .. "'" .. rest, opts)
    if unordered then direct.stdout, bashed.stdout = sorted_lines(direct.stdout), sorted_lines(bashed.stdout) end
    for _, k in ipairs({ "status", "code", "stdout", "stderr", "error" }) do
      assert.are.equal(bashed[k], direct[k], k .. " of " .. cmd .. ":\n" .. tostring(direct) .. "\n" .. tostring(bashed))
    end
    return direct
  end

  it("gives what bash gives: output, exit codes, the environment, relative programs", function()
    assert.are.equal("hello world\n", both("echo hello   world").stdout)
    assert.are.equal(Status.SUCCESS, both("true").status)
    assert.are.equal(1, both("false").code)
    assert.are.equal("[a=b]\n[--x]\n[50%]\n", both("bin/show-args a=b --x 50%").stdout)
    assert.are.equal("[1]\n", both("/home/user/bin/show-args 1").stdout)
    local env = "\n" .. both("env", { env = { EXTRA = "1" } }, true).stdout
    assert.truthy(env:find("\nPWD=/home/user\n", 1, true), env)
    assert.truthy(env:find("\nEXTRA=1\n", 1, true), env)
    assert.truthy(env:find("\n_=/usr/bin/env\n", 1, true), env)
    assert.are.equal("/tmp\n", both("pwd", { cwd = "/tmp" }).stdout)
    assert.truthy(("\n" .. both("env", { cwd = "/tmp" }, true).stdout):find("\nPWD=/tmp\n", 1, true))
    assert.are.equal(3, both("sh -c exit\\ 3").code)
  end)

  it("leaves to bash what only bash knows: builtins, expansions, missing programs", function()
    assert.are.equal("/home/user\n", sb:execute_command("echo $HOME").stdout)
    assert.are.equal("x", sb:execute_command("echo -n x").stdout)
    assert.are.equal("1\n", sb:execute_command("A=1 sh -c 'echo $A'").stdout)
    assert.are.equal(0, sb:execute_command("cd /tmp").code)
    local r = sb:execute_command("no-such-program-xyz arg")
    assert.are.equal(127, r.code)
    assert.matches("no%-such%-program%-xyz: command not found", r.stderr)
    r = sb:execute_command("/home/user/bin")
    assert.are.equal(126, r.code)
  end)

  it("kills a program run without bash at its timeout, with its group", function()
    local r = sb:execute_command("sleep 30", { timeout = 0.3 })
    assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
    assert.is_nil(sb:execute_command("ps -e -o comm=").stdout:find("sleep", 1, true))
  end)

  it("streams the output of a program run without bash line by line", function()
    local lines = {}
    local r = sb:execute_command("seq 3", { on_stdout = function(l) lines[#lines + 1] = l end })
    assert.are.equal("1\n2\n3\n", r.stdout)
    assert.are.same({ "1", "2", "3" }, lines)
  end)
end)
