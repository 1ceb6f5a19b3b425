-- Issue 9, item 6 through the local provider: a full disk, or a file past max_file_mb, is an error
-- that says so, and the sandbox goes on. An upload past max_file_mb used to end the whole sandbox:
-- the write helper died of SIGXFSZ and the relay before it passed the signal to the supervisor
-- (glibc's raise() after a raw clone(): spec/security/confine_control_spec.lua).
local glsb = require "glsb"
local helper = require "local.helper"

describe("a full disk in a local sandbox #security #local", function()
  local tmp, sb

  setup(function()
    glsb.log.set_handler(function() end)
    tmp = helper.private_tmp()
    sb = glsb.create("local", { host_workspace_dir = tmp, disk_mb = 16, max_file_mb = 8 })
  end)
  teardown(function()
    if sb then sb:terminate() end
    glsb.log.set_handler(nil)
    local left = helper.list_dir(helper.workspace_root(tmp))
    helper.rm_rf(tmp)
    assert.are.same({}, left)
  end)

  local function still_serves()
    local r = sb:execute_code("print(6 * 7)")
    assert.are.equal(glsb.ExecutionStatus.SUCCESS, r.status, tostring(r.error))
    assert.are.equal("42\n", r.stdout)
  end

  it("an upload past max_file_mb is an error naming the file size limit", function()
    local ok, err = pcall(sb.files.write, sb.files, "/files/big", string.rep("z", 10 * 1024 * 1024))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("file size limit", 1, true), tostring(err))
    still_serves()
  end)

  it("uploads that fill disk_mb end in an error saying no space is left", function()
    local results = {}
    for i = 1, 3 do
      results[i] = { pcall(sb.files.write, sb.files, "/home/user/part" .. i, string.rep("y", 7 * 1024 * 1024)) }
    end
    assert.is_true(results[1][1], tostring(results[1][2]))
    assert.is_true(results[2][1], tostring(results[2][2]))
    assert.is_false(results[3][1])
    assert.truthy(tostring(results[3][2]):find("No space left on device", 1, true), tostring(results[3][2]))
    still_serves()
    -- /home/user, /files and /tmp are one storage of disk_mb: it is full for all three
    local r = sb:execute_command("head -c 4000000 /dev/zero > /files/more; echo rc=$?")
    assert.truthy(r.stdout:find("rc=1", 1, true), r.stdout .. r.stderr)
    assert.truthy(r.stderr:find("No space left on device", 1, true), r.stderr)
  end)
end)
