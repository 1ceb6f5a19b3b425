-- Issue 9, item 8: a killed owner leaks nothing for long. The supervisor has a session of its own
-- (a Ctrl-C at the owner's terminal is not for it) and dies with its owner by PR_SET_PDEATHSIG, so
-- kill -9 of the owner's process group still ends the sandbox, and the supervisor cleans up. When
-- the owner and the supervisor are killed together (kill -9 of both groups), nobody cleans up: the
-- workspace and the cgroup leaves stay; the next local sandbox in the same root removes them, and so
-- does `glsb-lua --gc`. A sandbox whose owner is alive is never touched.
local glsb = require "glsb"
local loop = require "glsb.loop"
local helper = require "local.helper"

-- The owner: creates a sandbox, fills its /files with 50 MB, says what it made, then waits.
local OWNER = [[
local glsb = require "glsb"
local sb = glsb.create("local", { host_workspace_dir = arg[1] })
sb:execute_command("head -c 50000000 /dev/zero > /files/fill")
io.stdout:write(sb._proc.pid, " ", sb.host_pid, " ", sb.workspace, " ",
  table.concat(sb.confinement and sb.confinement.cgroup_dirs or {}, " "), "\n")
io.stdout:flush()
require("glsb.loop").sleep(600)
]]

describe("workspaces of killed owners #security #local", function()
  local tmp, root, script

  setup(function()
    tmp = helper.private_tmp()
    root = tmp .. "/ws"
    script = tmp .. "/owner.lua"
    os.execute("mkdir " .. helper.q(root))
    helper.write(script, OWNER)
  end)
  teardown(function() helper.rm_rf(tmp) end)

  local function wait_for(pred, secs)
    local deadline = loop.now() + secs
    while loop.now() < deadline do
      if pred() then return true end
      loop.sleep(0.05)
    end
    return pred()
  end

  -- Starts an owner in its own process group; -> {pgid, supervisor, init, workspace, cgroups}
  local function start_owner(name)
    local out = tmp .. "/" .. name .. ".out"
    local pgid = helper.sh("cd " .. helper.q(helper.repo) .. " && setsid build/glsb-lua " .. helper.q(script) .. " "
      .. helper.q(root) .. " > " .. helper.q(out) .. " 2>&1 & echo $!"):match("%d+")
    assert.truthy(wait_for(function() return (helper.read(out) or ""):find("\n") end, 30),
      "the owner did not start: " .. tostring(helper.read(out)))
    local words = {}
    for w in helper.read(out):gmatch("%S+") do words[#words + 1] = w end
    local o = { pgid = pgid, supervisor = words[1], init = words[2], workspace = words[3], cgroups = {} }
    for i = 4, #words do o.cgroups[#o.cgroups + 1] = words[i] end
    return o
  end

  -- The owner and its supervisor together (each leads a process group: the supervisor its session's).
  local function kill_group(o)
    os.execute("kill -9 -" .. o.pgid .. " -" .. o.supervisor)
    assert.truthy(wait_for(function()
      return not helper.pid_alive(o.pgid) and not helper.pid_alive(o.supervisor) and not helper.pid_alive(o.init)
    end, 10), "the owner's group did not die")
  end

  local function gone(o)
    if helper.exists(o.workspace) then return false end
    for _, cg in ipairs(o.cgroups) do
      if helper.exists(cg) then return false end
    end
    return true
  end

  it("the next sandbox in the root removes what a killed owner left; a live owner's sandbox stays", function()
    local dead = start_owner("dead")
    local live = start_owner("live")
    finally(function() os.execute("kill -9 -" .. live.pgid .. " 2>/dev/null") end)
    kill_group(dead)
    -- the leak this guards against: nobody was left to clean up
    assert.is_true(helper.exists(dead.workspace), "the workspace went by itself")
    local sb = glsb.create("local", { host_workspace_dir = root })
    sb:terminate()
    assert.is_true(gone(dead), "left: " .. dead.workspace .. " " .. table.concat(dead.cgroups, " "))
    assert.is_true(helper.exists(live.workspace), "a live owner's workspace was removed")
    assert.is_true(helper.pid_alive(live.init))
    -- the live owner ends normally (SIGTERM): its supervisor cleans up as always
    os.execute("kill -TERM " .. live.pgid)
    assert.truthy(wait_for(function() return gone(live) end, 10), "the live owner's sandbox was not cleaned up")
  end)

  it("kill -9 of the owner's group: the supervisor, in a session of its own, ends the sandbox and cleans up", function()
    local o = start_owner("owner-only")
    local stat = helper.read("/proc/" .. o.supervisor .. "/stat")
    local sid = tonumber(stat:match("^%d+ %b() %a %d+ %d+ (%d+)"))
    assert.are.equal(tonumber(o.supervisor), sid, "the supervisor leads its own session")
    os.execute("kill -9 -" .. o.pgid)
    assert.truthy(wait_for(function() return not helper.pid_alive(o.pgid) and not helper.pid_alive(o.supervisor)
      and not helper.pid_alive(o.init) end, 10), "the sandbox outlived its owner")
    assert.truthy(wait_for(function() return gone(o) end, 10), "the supervisor did not clean up")
  end)

  it("glsb-lua --gc DIR removes it too, and says so", function()
    local dead = start_owner("gc")
    kill_group(dead)
    assert.is_true(helper.exists(dead.workspace))
    local out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua --gc " .. helper.q(root) .. " 2>&1")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("removed " .. dead.workspace, 1, true), out)
    assert.truthy(out:find("1 stale sandbox directory removed", 1, true), out)
    assert.is_true(gone(dead))
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
  end)
end)
