-- Issue 9, item 8: a killed owner leaks nothing for long. The supervisor has a session of its own
-- (a Ctrl-C at the owner's terminal is not for it) and dies with its owner by PR_SET_PDEATHSIG, so
-- kill -9 of the owner's process group still ends the sandbox, and the supervisor cleans up. When
-- the owner and the supervisor are killed together (kill -9 of both groups), nobody cleans up: the
-- workspace and the cgroup leaves stay; the next local sandbox in the same root removes them, and so
-- does `glsb-lua --gc`. A sandbox whose owner is alive is never touched. A paused one (cgroup v1 freezer)
-- whose owner died cannot die frozen: the next sandbox of any process, or --gc, thaws it (issue 24).
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

-- A paused owner: a sandbox with a process running, paused (its processes in a freezer cgroup of their
-- own on cgroup v1: providers/local/freeze.lua), then the same line plus the freezer leaf.
local PAUSED_OWNER = [[
local glsb = require "glsb"
local sb = glsb.create("local", { host_workspace_dir = arg[1] })
sb:start_command("while true; do sleep 0.05; done")
local cg = table.concat(sb.confinement and sb.confinement.cgroup_dirs or {}, " ")
local supervisor, init, ws = sb._proc.pid, sb.host_pid, sb.workspace
sb:pause()
local leaf = "-"
for _, l in ipairs(require("glsb.providers.local.freeze").leaves()) do
  if l.sandbox_id == sb.sandbox_id then leaf = l.path end
end
io.stdout:write(supervisor, " ", init, " ", ws, " ", leaf, " ", sb.sandbox_id, " ", cg, "\n")
io.stdout:flush()
require("glsb.loop").sleep(600)
]]

describe("workspaces of killed owners #security #local", function()
  local tmp, root, script, paused_script

  setup(function()
    tmp = helper.private_tmp()
    root = tmp .. "/ws"
    script = tmp .. "/owner.lua"
    os.execute("mkdir " .. helper.q(root))
    helper.write(script, OWNER)
    paused_script = tmp .. "/paused_owner.lua"
    helper.write(paused_script, PAUSED_OWNER)
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
  local function start_owner(name, owner_script)
    local out = tmp .. "/" .. name .. ".out"
    local pgid = helper.sh("cd " .. helper.q(helper.repo) .. " && setsid build/glsb-lua "
      .. helper.q(owner_script or script) .. " " .. helper.q(root) .. " > " .. helper.q(out) .. " 2>&1 & echo $!")
      :match("%d+")
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

  -- A paused owner (start_owner's fields, and leaf: its v1 freezer leaf, id: the sandbox id); pending when
  -- this machine pauses without a v1 freezer leaf (cgroup v2 freezes the sandbox's own leaf).
  local function start_paused(name)
    local o = start_owner(name, paused_script)
    local words = {}
    for w in helper.read(tmp .. "/" .. name .. ".out"):gmatch("%S+") do words[#words + 1] = w end
    o.leaf, o.id, o.cgroups = words[4], words[5], {}
    for i = 6, #words do o.cgroups[#o.cgroups + 1] = words[i] end
    return o
  end

  local function frozen(leaf) return ((helper.read(leaf .. "/freezer.state") or ""):match("^FROZEN")) ~= nil end
  local function no_v1_freezer()
    return not helper.exists("/sys/fs/cgroup/freezer/cgroup.procs") and "no cgroup v1 freezer on this machine"
  end

  it("an owner killed while paused: the next create elsewhere thaws its sandbox; no frozen cgroup, no process left",
    function()
      if no_v1_freezer() then return pending(no_v1_freezer()) end
      local dead = start_paused("paused-dead")
      local live = start_paused("paused-live")
      finally(function()
        os.execute("kill -9 -" .. live.pgid .. " 2>/dev/null")
        os.execute("kill -9 -" .. dead.pgid .. " 2>/dev/null")
      end)
      assert.is_true(frozen(dead.leaf), dead.leaf)
      assert.matches("/glsb%-" .. dead.id:gsub("%-", "%%-") .. "%-" .. dead.pgid .. "%-%d+$", dead.leaf)
      os.execute("kill -9 -" .. dead.pgid)
      assert.truthy(wait_for(function() return not helper.pid_alive(dead.pgid) end, 10))
      -- the leak this guards against: the supervisor got SIGHUP and killed the sandbox, which cannot die
      -- frozen; so it waits, with the workspace, for ever
      loop.sleep(1)
      assert.is_true(helper.pid_alive(dead.supervisor) and helper.pid_alive(dead.init) and frozen(dead.leaf)
        and helper.exists(dead.workspace), "the paused sandbox of a dead owner ended by itself")
      -- the next create, in another process (a process sweeps once), in another root
      local other = tmp .. "/other"
      os.execute("mkdir -p " .. helper.q(other))
      helper.write(tmp .. "/next.lua", "require('glsb').create('local', { host_workspace_dir = arg[1] }):terminate()\n")
      local out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua " .. helper.q(tmp .. "/next.lua")
        .. " " .. helper.q(other) .. " 2>&1")
      assert.are.equal(0, code, out)
      assert.truthy(wait_for(function()
        return not helper.exists(dead.leaf) and not helper.pid_alive(dead.supervisor)
          and not helper.pid_alive(dead.init) and gone(dead)
      end, 10), "left: " .. dead.leaf .. " " .. dead.workspace)
      -- a living owner's paused sandbox is not touched
      assert.is_true(frozen(live.leaf) and helper.pid_alive(live.init), "a live owner's paused sandbox was touched")
      -- glsb.kill from another process ends a paused sandbox (it thaws it first), with everything in it
      glsb.kill("local", live.id, { host_workspace_dir = root })
      assert.truthy(wait_for(function()
        return not helper.pid_alive(live.init) and not helper.pid_alive(live.supervisor)
          and (helper.read(live.leaf .. "/cgroup.procs") or "") == ""
      end, 10), "the killed paused sandbox lives on")
      -- its owner ends (SIGTERM: no clean-up of its own): the empty leaf is a dead owner's, which the
      -- next sweep removes
      os.execute("kill -TERM " .. live.pgid)
      assert.truthy(wait_for(function() return not helper.pid_alive(live.pgid) end, 10))
      out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua " .. helper.q(tmp .. "/next.lua")
        .. " " .. helper.q(other) .. " 2>&1")
      assert.are.equal(0, code, out)
      assert.truthy(wait_for(function() return not helper.exists(live.leaf) and gone(live) end, 10), live.leaf)
    end)

  it("owner and supervisor killed together while paused: glsb-lua --gc releases the freezer leaf and the workspace",
    function()
      if no_v1_freezer() then return pending(no_v1_freezer()) end
      local dead = start_paused("paused-both")
      finally(function() os.execute("kill -9 -" .. dead.pgid .. " 2>/dev/null") end)
      os.execute("kill -9 -" .. dead.pgid .. " -" .. dead.supervisor)
      assert.truthy(wait_for(function() return not helper.pid_alive(dead.pgid)
        and not helper.pid_alive(dead.supervisor) end, 10))
      loop.sleep(0.5)
      assert.is_true(helper.pid_alive(dead.init) and frozen(dead.leaf), "the frozen sandbox died by itself: "
        .. tostring(helper.read("/proc/" .. dead.init .. "/stat")) .. " " .. tostring(helper.read(dead.leaf .. "/freezer.state")))
      local out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua --gc " .. helper.q(root) .. " 2>&1")
      assert.are.equal(0, code, out)
      assert.truthy(out:find("removed the freezer cgroup " .. dead.leaf, 1, true), out)
      assert.truthy(out:find("removed " .. dead.workspace, 1, true), out)
      assert.is_false(helper.exists(dead.leaf))
      assert.is_false(helper.pid_alive(dead.init))
      assert.is_true(gone(dead))
    end)
end)
