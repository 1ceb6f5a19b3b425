-- doctor_spec.lua: `glsb-confine doctor` prints one JSON object describing this kernel's
-- confinement features; on the CI kernel (6.x, root) every required feature is there.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/helper.lua")

describe("glsb-confine doctor #confine", function()
  setup(function()
    H.require_binary()
  end)

  it("prints one JSON object with every feature and exits 0", function()
    local d = H.doctor()
    for _, k in ipairs({ "userns", "pidns", "netns", "mountns", "ipcns", "utsns", "cgroupns",
      "timens", "seccomp_filter", "no_new_privs", "openat2", "pidfd", "sandbox_ready" }) do
      assert.is_boolean(d[k], k)
    end
    assert.is_number(d.landlock_abi)
    assert.is_table(d.reasons)
    assert.is_truthy(d.cgroup_v2 ~= nil and d.cgroup_v1 ~= nil)
  end)

  it("gives a reason for every false feature", function()
    local d = H.doctor()
    for k, v in pairs(d) do
      if v == false and not k:match("^cgroup_v") then
        assert.is_string(d.reasons[k], "no reason for " .. k)
      end
    end
    if d.cgroup_v2 == false then assert.is_string(d.cgroup_v2_reason) end
    if d.cgroup_v1 == false then assert.is_string(d.cgroup_v1_reason) end
  end)

  it("finds what the sandbox requires on this kernel", function()
    local d = H.doctor()
    for _, k in ipairs({ "userns", "pidns", "netns", "mountns", "ipcns", "utsns",
      "seccomp_filter", "no_new_privs" }) do
      assert.is_true(d[k], k .. ": " .. tostring(d.reasons[k]))
    end
    assert.is_true(d.landlock_abi >= 1, tostring(d.reasons.landlock_abi))
    assert.is_true(d.sandbox_ready)
  end)

  it("says which cgroup limits the sandbox gets, matching what it applies", function()
    local d = H.doctor()
    local _, code, report = H.sandbox({ "true" })
    assert.are.equal(0, code)
    assert.are.equal(d.cgroup_limits, report.applied.cgroup)
    if d.cgroup_limits == false then assert.is_string(d.reasons.cgroup_limits) end
  end)

  it("lists cgroup v2 controllers as names", function()
    local d = H.doctor()
    if type(d.cgroup_v2) == "table" then
      assert.is_string(d.cgroup_v2.cgroup)
      for _, c in ipairs(d.cgroup_v2.controllers) do assert.matches("^[%w_]+$", c) end
      assert.is_boolean(d.cgroup_v2.memory_and_pids)
    end
  end)

  it("agrees with what sandbox applies", function()
    local d = H.doctor()
    local _, code, report = H.sandbox({ "true" })
    assert.are.equal(0, code)
    assert.are.equal(d.landlock_abi, report.applied.landlock_abi)
    assert.are.equal(d.timens, report.applied.timens)
    assert.are.equal(d.cgroupns, report.applied.cgroupns)
  end)
end)
