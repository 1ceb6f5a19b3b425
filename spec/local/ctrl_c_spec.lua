-- A Ctrl-C at the terminal of a glsb-lua that owns local sandboxes: the terminal sends SIGINT to its
-- foreground process group. The sandboxes' supervisors are in sessions of their own, so they do not
-- get it and the sandboxes live on (they used to die with a Ctrl-C at the prompt). Here the owner
-- waits in os.execute("sleep"), which ignores SIGINT itself while its child (in the group) gets it, so
-- what the owner sees afterwards shows what the signal did to its sandbox.
local helper = require "local.helper"
local loop = require "glsb.loop"

local SCRIPT = [[
local glsb = require "glsb"
local sb = glsb.create("local", { host_workspace_dir = arg[1] })
-- what the sandbox would do with a SIGINT its supervisor passed on: say so in a file
sb:execute_code("import signal\nsignal.signal(signal.SIGINT, lambda *a: open('/home/user/got-sigint', 'w').close())")
io.stdout:write("ready ", sb._proc.pid, "\n")
io.stdout:flush()
local started = os.time()
os.execute("sleep 20")
io.stdout:write("interrupted: ", tostring(os.time() - started < 15), "\n")
glsb.sleep(0.3)
io.stdout:write("sandbox got it: ", tostring(sb.files:exists("/home/user/got-sigint")), "\n")
local r = sb:execute_command("echo alive")
io.stdout:write("after: ", tostring(r.stdout), tostring(r.error), "\n")
sb:terminate()
]]

describe("Ctrl-C at the owner's terminal #local", function()
  local tmp

  setup(function() tmp = helper.private_tmp() end)
  teardown(function()
    local left = helper.list_dir(helper.workspace_root(tmp .. "/ws"))
    helper.rm_rf(tmp)
    assert.are.same({}, left)
  end)

  local function wait_for(pred, secs)
    local deadline = loop.now() + secs
    while loop.now() < deadline do
      if pred() then return true end
      loop.sleep(0.05)
    end
    return pred()
  end

  it("reaches the owner's process group, not its sandboxes", function()
    os.execute("mkdir " .. helper.q(tmp .. "/ws"))
    helper.write(tmp .. "/owner.lua", SCRIPT)
    local out = tmp .. "/owner.out"
    -- the owner leads a process group of its own, as a shell's foreground job does
    local pgid = helper.sh("cd " .. helper.q(helper.repo) .. " && setsid build/glsb-lua " .. helper.q(tmp .. "/owner.lua")
      .. " " .. helper.q(tmp .. "/ws") .. " > " .. helper.q(out) .. " 2>&1 & echo $!"):match("%d+")
    assert.truthy(wait_for(function() return (helper.read(out) or ""):find("ready %d+\n") end, 30), helper.read(out))
    local supervisor = helper.read(out):match("ready (%d+)")
    os.execute("kill -INT -" .. pgid) -- what the terminal does on Ctrl-C
    assert.truthy(wait_for(function() return not helper.pid_alive(pgid) end, 20), "the owner did not end")
    local text = helper.read(out)
    assert.truthy(text:find("interrupted: true\n", 1, true), text)
    assert.truthy(text:find("sandbox got it: false\n", 1, true), text)
    assert.truthy(text:find("after: alive\nnil\n", 1, true), text)
    assert.is_false(helper.pid_alive(supervisor), "the sandbox outlived its terminate")
  end)
end)
