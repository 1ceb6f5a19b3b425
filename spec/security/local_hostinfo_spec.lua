-- Issue 9, item 11, through the local provider: what a sandbox and the host's other users learn about
-- the host. The local provider gives glsb-confine every option on a descriptor (--config-fd 0), so
-- the supervisor's command line (/proc/PID/cmdline, readable by every user of the host) names no
-- workspace, bind or environment value; inside, no process and no mount shows a host path; the
-- supervisor has a session of its own (a Ctrl-C at the owner's terminal does not reach it).
local glsb = require "glsb"
local helper = require "local.helper"

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- Every /proc/*/cmdline and environ the sandbox can read, and its mountinfo: a directory bind shows
-- its host path there (src/confine's --help says so), so the agent's files are bound one by one
-- (small files are copied in).
local LOOK = [[
import os
out = []
for p in sorted(os.listdir("/proc")):
    if p.isdigit():
        for what in ("cmdline", "environ"):
            try:
                out.append("%s %s %r" % (p, what, open("/proc/%s/%s" % (p, what), "rb").read()))
            except OSError as e:
                out.append("%s %s error %d" % (p, what, e.errno))
print("\n".join(out))
print(open("/proc/self/mountinfo").read())
]]

describe("what the local provider shows of the host #security #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function()
    helper.remove_root(root)
  end)
  after_each(function() if sb then sb:terminate() sb = nil end end)

  it("the supervisor's command line names no host path and no option value", function()
    local secret = "s3cr3t-create-env-value"
    sb = glsb.create("local", { host_workspace_dir = root, env = { API_TOKEN = secret }, memory_mb = 333 })
    local pid = sb._proc.pid
    local cmdline = read("/proc/" .. pid .. "/cmdline")
    local words = {}
    for w in cmdline:gmatch("([^%z]*)%z") do words[#words + 1] = w end
    assert.are.same({ "sandbox", "--config-fd", "0" }, { words[2], words[3], words[4] })
    assert.are.equal(4, #words, cmdline)
    for _, leak in ipairs({ sb.workspace, root, secret, "333", "agent.py", "--env" }) do
      assert.is_nil(cmdline:find(leak, 1, true), leak .. " shows in the supervisor's command line")
    end
    -- the options arrived all the same
    assert.are.equal(secret .. "\n", sb:execute_command("echo $API_TOKEN").stdout)
    assert.are.equal(333, sb.confinement.rlimits and sb.confinement.rlimits.data_mb)
  end)

  it("no process and no mount in the sandbox shows a host path", function()
    sb = glsb.create("local", { host_workspace_dir = root })
    local r = sb:execute_code(LOOK)
    assert.are.equal("success", r.status, tostring(r))
    assert.truthy(("\n" .. r.stdout):find("\n1 cmdline b'glsb-confine\\x00'\n", 1, true), r.stdout)
    local agent_dir = require("glsb.providers.local").agent_dir()
    for _, leak in ipairs({ sb.workspace, root, agent_dir, helper.repo }) do
      assert.is_nil(r.stdout:find(leak, 1, true), leak .. " is visible inside:\n" .. r.stdout)
    end
  end)

  it("the supervisor leads a session of its own, not the owner's", function()
    sb = glsb.create("local", { host_workspace_dir = root })
    local pid = sb._proc.pid
    local function sid_of(p) return tonumber(read("/proc/" .. p .. "/stat"):match("^%d+ %b() %a %d+ %d+ (%d+)")) end
    assert.are.equal(pid, sid_of(pid))
    assert.are_not.equal(sid_of("self"), sid_of(pid))
  end)
end)
