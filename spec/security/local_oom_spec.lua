-- Issue 9, item 12: an OOM kill is reported as such: ERROR, with a message that says memory, never a
-- timeout. The supervisor tells (its exit line on --report-fd: oom_killed); the host reads it.
local glsb = require "glsb"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

describe("an interpreter killed by the OOM killer #security #local", function()
  local root, sb
  setup(function() root = helper.private_tmp() end)
  teardown(function()
    helper.remove_root(root)
  end)
  after_each(function() if sb then pcall(sb.terminate, sb) end end)

  it("is ERROR saying the sandbox ran out of memory", function()
    sb = glsb.create("local", { host_workspace_dir = root, memory_mb = 64 })
    if not sb.confinement.cgroup then
      -- without a memory cgroup nothing OOM-kills the sandbox (RLIMIT_DATA gives MemoryError instead)
      pending("no memory cgroup on this machine: " .. tostring(sb.confinement.cgroup_reason))
      return
    end
    -- shared anonymous memory is not RLIMIT_DATA's: only the cgroup's limit stops it
    local r = sb:execute_code("import mmap\nm = mmap.mmap(-1, 512 * 1024 * 1024)\n"
      .. "for i in range(0, len(m), 4096): m[i] = 1\nprint('survived')", { timeout = 120 })
    assert.are.equal(Status.ERROR, r.status, tostring(r))
    assert.truthy(r.error:find("OOM killer: the sandbox ran out of memory (memory_mb = 64)", 1, true), r.error)
    assert.is_nil(r.error:find("timed out", 1, true), r.error)
  end)

  it("a command the OOM killer killed is ERROR saying the sandbox ran out of memory; the sandbox goes on", function()
    sb = glsb.create("local", { host_workspace_dir = root, memory_mb = 64 })
    if not sb.confinement.cgroup then
      pending("no memory cgroup on this machine: " .. tostring(sb.confinement.cgroup_reason))
      return
    end
    local r = sb:execute_command("python3 -c 'import mmap\nm = mmap.mmap(-1, 512 << 20)\n"
      .. "for i in range(0, len(m), 4096): m[i] = 1'", { timeout = 120 })
    assert.are.equal(Status.ERROR, r.status, tostring(r))
    assert.are.equal(137, r.code)
    assert.truthy(r.error:find("OOM killer: the sandbox ran out of memory (memory_mb = 64)", 1, true), r.error)
    -- a SIGKILL that is not the OOM killer's is said as such
    r = sb:execute_command("sh -c 'kill -9 $$'")
    assert.are.equal("command ended by signal: SIGKILL", r.error)
    r = sb:execute_command("sleep 30 & kill -9 $!; wait $!; exit $?")
    assert.are.equal(137, r.code)
    assert.is_nil(r.error:find("OOM", 1, true), r.error)
    assert.are.equal("ok\n", sb:execute_command("echo ok").stdout)
  end)
end)
