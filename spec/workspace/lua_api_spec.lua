-- glsb.write_workspace_file / glsb.run_workspace_command over the real glsb-confine, through a minimal
-- provider that runs the helper on this machine against a temp workspace root: the shared workspace
-- suite, plus what only this provider can observe (the argv and channel options the library hands over).
local glsb = require "glsb"
local core = require "glsb.core"
local loop = require "glsb.loop"
local process = require "glsb.process"
local sandbox = require "glsb.sandbox"

local HELPER = os.getenv("GLSB_CONFINE") or core.realpath("build/glsb-confine")

local Host = sandbox.BaseSandbox:extend("workspace-host", {
  options = { create = { exec_delay = { "positive", "seconds each exec waits first (a slow channel)" } } },
})
function Host:_start(opts)
  self.root = core.realpath(core.mkdtemp("/tmp/glsb-ws-lua-XXXXXX"))
  self.workspace_root = self.root
  self.sandbox_id = "host-" .. self.root
  self.exec_log = {}
  self.exec_delay = opts.exec_delay
end
function Host:_workspace_helper() return HELPER end
function Host:_exec_argv(argv, opts)
  self.exec_log[#self.exec_log + 1] = { argv = argv, opts = opts }
  if self.exec_delay then loop.sleep(self.exec_delay) end
  local p = assert(process.spawn({ argv = argv, stdin = "pipe" }))
  local out, err, st = p:communicate(opts.stdin or "", opts.timeout and core.now() + opts.timeout)
  p:close()
  return { exit_code = st and st.code, stdout = out, stderr = err }
end
function Host:_run_command(cmd, opts)
  local out, err, st = process.run({ "sh", "-c", cmd }, { cwd = self.root, timeout = opts.timeout })
  return { code = st and st.code, stdout = out, stderr = err }
end
function Host:_terminate() core.rmtree(self.root) end

require("workspace.suite")("a host-run helper", function() return Host.create({}) end)

describe("workspace primitives: what the library hands the provider #workspace", function()
  local sb

  before_each(function() sb = Host.create({}) end)
  after_each(function() if sb:is_running() then sb:terminate() end end)

  it("never sends more than max_bytes + 1 and gives the write a channel deadline", function()
    pcall(glsb.write_workspace_file, sb, { relative_path = "big", data = string.rep("x", 5000), max_bytes = 100 })
    local call = sb.exec_log[#sb.exec_log]
    assert.equal(101, #call.opts.stdin)
    -- a far side that stops reading must not hold the call until the lease ends
    assert.equal(60, call.opts.timeout)
    glsb.write_workspace_file(sb, { relative_path = "small", data = "x", timeout = 5 })
    assert.equal(5, sb.exec_log[#sb.exec_log].opts.timeout)
    glsb.write_workspace_file(sb, { relative_path = "small2", data = "x", timeout = 0 })
    assert.is_nil(sb.exec_log[#sb.exec_log].opts.timeout)
  end)

  it("tells the provider how much of the helper's answer it must carry", function()
    glsb.run_workspace_command(sb, { "true" }, { max_output_bytes = 8 * 1024 * 1024 })
    local need = sb.exec_log[#sb.exec_log].opts.max_output
    assert.is_true(need >= 2 * (8 * 1024 * 1024 * 4 // 3), tostring(need))
  end)

  it("passes paths as hex so any byte string survives argv", function()
    glsb.write_workspace_file(sb, { relative_path = "a b/\xff", data = "" })
    local argv = sb.exec_log[#sb.exec_log].argv
    local i
    for k, a in ipairs(argv) do if a == "--path-hex" then i = k end end
    assert.equal("6120622fff", argv[i + 1])
  end)

  it("gives the channel the command's timeout plus a grace, and none when disabled", function()
    glsb.run_workspace_command(sb, { "true" }, { timeout = 2 })
    assert.is_true(sb.exec_log[#sb.exec_log].opts.timeout > 2)
    glsb.run_workspace_command(sb, { "true" }, { timeout = -1 })
    local call = sb.exec_log[#sb.exec_log]
    assert.is_nil(call.opts.timeout)
    local found
    for k, a in ipairs(call.argv) do if a == "--timeout" then found = call.argv[k + 1] end end
    assert.equal("0", found)
  end)

  it("misuse raises plain argument errors before anything runs", function()
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = 1, data = "" }) end)
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = "a", data = {} }) end)
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = "a", data = "", max_bytes = 1.5 }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, {}) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls", 3 }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls" }, { env = { A = 1 } }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls" }, { env = { ["A=B"] = "1" } }) end)
    assert.has_error(function() glsb.write_workspace_file({}, { relative_path = "a", data = "" }) end)
    -- NaN used to mean "no timeout"; the infinities mean nothing a number of seconds can
    for _, bad in ipairs({ 0 / 0, math.huge, -math.huge, "5" }) do
      assert.has_error(function() glsb.run_workspace_command(sb, { "true" }, { timeout = bad }) end)
      assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = "a", data = "", timeout = bad }) end)
    end
    assert.has_error(function() glsb.run_workspace_command(sb, { "true" }, { max_output_bytes = 64 * 1024 * 1024 + 1 }) end)
    -- the declaration says the bounds and the required fields; the error is a string at this line
    for _, case in ipairs({
      { "write_workspace_file: option 'max_bytes' must be >= 0, got number %-1", glsb.write_workspace_file,
        { relative_path = "a", data = "", max_bytes = -1 } },
      { "write_workspace_file: option 'data' is required", glsb.write_workspace_file, { relative_path = "a" } },
      { "run_workspace_command: option 'max_output_bytes' must be from 0 to 67108864", glsb.run_workspace_command,
        { "true" }, { max_output_bytes = -1 } },
    }) do
      local ok, err = pcall(case[2], sb, case[3], case[4])
      assert.is_false(ok)
      assert.is_string(err)
      assert.matches("^spec/workspace/lua_api_spec.lua:%d+: " .. case[1], err)
    end
    assert.equal(0, #sb.exec_log)
  end)

  it("a provider without _exec_argv gets a clear WorkspaceError", function()
    local Bare = sandbox.BaseSandbox:extend("bare")
    function Bare:_start() self.sandbox_id = "bare" end
    function Bare:_terminate() end
    local b = Bare.create({})
    local ok, err = pcall(glsb.run_workspace_command, b, { "true" })
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.WorkspaceError))
    assert.matches("_exec_argv", err.message)
    b:terminate()
  end)

  it("cancelling the calling task terminates the sandbox", function()
    local slow = Host.create({ exec_delay = 5 })
    local t = loop.spawn(function() return glsb.run_workspace_command(slow, { "true" }) end)
    loop.run(function() loop.sleep(0.05); t:cancel() end)
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(loop.is_cancelled(err))
    assert.is_false(slow:is_running())
  end)
end)
