-- Issue 9, item 10 through the local provider: a cgroup CPU quota, the `cpus` option (default 1,
-- glsb-confine's --cpus), so one sandbox cannot take every core. The local provider had no such
-- option: every sandbox got glsb-confine's default and nobody could ask for another.
local glsb = require "glsb"
local helper = require "local.helper"

local SPIN = [[
import os, time
t0 = time.time()
pids = []
for i in range(3):
    p = os.fork()
    if p == 0:
        while time.time() - t0 < 1.5: pass
        os._exit(0)
    pids.append(p)
for p in pids: os.waitpid(p, 0)
c = os.times()
print("cpu_per_wall %.3f" % ((c.children_user + c.children_system) / (time.time() - t0)))
]]

describe("the CPU quota of a local sandbox #security #local", function()
  local tmp

  setup(function()
    glsb.log.set_handler(function() end)
    tmp = helper.private_tmp()
  end)
  teardown(function()
    glsb.log.set_handler(nil)
    local left = helper.list_dir(helper.workspace_root(tmp))
    helper.rm_rf(tmp)
    assert.are.same({}, left)
  end)

  local function create(opts)
    opts.host_workspace_dir = tmp
    return glsb.create("local", opts)
  end

  it("is 1 CPU by default, and cpus = 0.25 holds three busy processes to a quarter", function()
    local sb <close> = create({})
    if sb.confinement.cgroup_cpus == false or sb.confinement.cgroup_cpus == nil then
      pending("no CPU controller on this machine: " .. tostring(sb.confinement.cgroup_reason))
      return
    end
    assert.are.equal(1, sb.confinement.cgroup_cpus)
    local small <close> = create({ cpus = 0.25 })
    assert.are.equal(0.25, small.confinement.cgroup_cpus)
    local r = small:execute_code(SPIN, { timeout = 30 })
    assert.are.equal(glsb.ExecutionStatus.SUCCESS, r.status, tostring(r.error))
    local ratio = tonumber(r.stdout:match("cpu_per_wall ([%d.]+)"))
    assert.is_number(ratio, r.stdout)
    assert.is_true(ratio <= 0.4, "3 busy processes got " .. ratio .. " CPUs with cpus = 0.25")
  end)

  it("refuses a quota glsb-confine cannot set, before starting anything", function()
    for _, bad in ipairs({ 0.001, 5000, 0 / 0, math.huge }) do
      local ok, err = pcall(create, { cpus = bad })
      assert.is_false(ok, tostring(bad))
      assert.truthy(tostring(err):find("cpus", 1, true), tostring(err))
    end
  end)
end)
