-- The shared workspace primitives suite on the local provider: glsb-confine is bound read-only into
-- the sandbox and run by the agent with an exact argv. #local
local glsb = require "glsb"

require("workspace.suite")("local", function() return glsb.create("local") end, "#local")

describe("workspace primitives on local, at the edges #workspace #local", function()
  local sb
  before_each(function() sb = glsb.create("local") end)
  after_each(function() if sb then sb:terminate() end end)

  -- The helper answers with both streams in base64 in one JSON line: 8 MB of output is a 10.7 MB
  -- answer, which the agent used to cut at 10 MiB ("the workspace helper gave no result").
  it("keeps 8 MB of output with max_output_bytes = 8 MB, whole", function()
    local n = 8 * 1000 * 1000
    local w = glsb.run_workspace_command(sb, { "head", "-c", tostring(n), "/dev/zero" },
      { max_output_bytes = n, timeout = 60 })
    assert.equal(n, #w.stdout)
    assert.equal(n, w.stdout_byte_count)
    assert.is_false(w.stdout_truncated)
    assert.equal(string.rep("\0", n), w.stdout)
    -- past the documented range: an argument error, before anything runs
    assert.has_error(function()
      glsb.run_workspace_command(sb, { "true" }, { max_output_bytes = 64 * 1024 * 1024 + 1 })
    end)
  end)

  -- The far side stops reading (the supervisor, which runs the helper, is stopped): the write ends at
  -- its timeout, not at the lease.
  it("a write whose far side stops reading ends at its timeout", function()
    local supervisor = sb._proc.pid
    os.execute("kill -STOP " .. supervisor)
    finally(function() os.execute("kill -CONT " .. supervisor .. " 2>/dev/null") end)
    local started = require("glsb.loop").now()
    local ok, err = pcall(glsb.write_workspace_file, sb,
      { relative_path = "big.bin", data = string.rep("x", 8 * 1024 * 1024), timeout = 1 })
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.WorkspaceError), tostring(err))
    assert.is_true(require("glsb.loop").now() - started < 30, "the write was not bounded by its timeout")
  end)
end)
