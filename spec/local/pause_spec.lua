-- sb:pause() on the local provider (issue 24): the sandbox's processes are frozen with the cgroup freezer
-- (providers/local/freeze.lua: v1 a freezer leaf of its own, v2 the leaf's cgroup.freeze), so they stop
-- where they are and use no CPU; glsb.connect("local", sb:ref()) in the same process thaws them. #local
local glsb = require "glsb"
local helper = require "local.helper"
local loop = require "glsb.loop"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("local pause #local", function()
  local root = helper.private_tmp()
  local function opts(extra)
    local o = { host_workspace_dir = root }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end

  teardown(function() helper.remove_root(root) end)

  local function count(sb)
    for _ = 1, 50 do
      local n = tonumber(sb:execute_command("cat /tmp/count 2>/dev/null").stdout)
      if n then return n end
      loop.sleep(0.02)
    end
    error("no count")
  end

  it("freezes the processes: a counter stands still while paused and goes on after connect", function()
    local sb = glsb.create("local", opts { timeout = 60 })
    local ok, why = pcall(function()
      return sb.confinement and sb.confinement.cgroup
    end)
    if not (ok and why) then
      sb:terminate()
      pending("no cgroup for local sandboxes on this machine: " .. tostring(sb.confinement and sb.confinement.cgroup_reason))
      return
    end
    assert.equal(Status.SUCCESS, sb:execute_code("kept = 'in memory'").status)
    sb:start_command("i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done")
    loop.sleep(0.5)
    local before = count(sb)
    assert.is_true(sb:pause())
    assert.equal("paused", sb:info().state)
    local ref = sb:ref()
    local e_ok, err = pcall(sb.execute_command, sb, "true")
    assert.is_false(e_ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError))
    loop.sleep(1.0) -- 20 ticks of the counter, were it running
    local again = glsb.connect("local", ref, { timeout = 60 })
    local after_resume = count(again)
    assert.is_true(after_resume - before < 10, ("frozen: %d -> %d over 1 s paused"):format(before, after_resume))
    loop.sleep(0.5)
    assert.is_true(count(again) > after_resume, "and it runs on")
    assert.equal("in memory\n", again:execute_code("print(kept)").stdout)
    sb:terminate() -- the paused handle gave the sandbox to `again`: nothing to stop
    assert.equal(Status.SUCCESS, again:execute_code("1").status)
    again:terminate()
    local c_ok, cerr = pcall(glsb.connect, "local", ref)
    assert.is_false(c_ok)
    assert.is_true(errors.is(cerr, errors.SandboxStartError))
  end)

  it("connect to an id nothing here paused is a clear SandboxStartError[connect]", function()
    local ok, err = pcall(glsb.connect, "local", "no-such-sandbox")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError))
    assert.equal("connect", err.stage)
    assert.matches("no paused sandbox 'no-such-sandbox' in this process", tostring(err), 1, true)
  end)
end)
