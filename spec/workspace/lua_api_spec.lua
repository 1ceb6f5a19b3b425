-- glsb.write_workspace_file / glsb.run_workspace_command: the Lua contract over the real glsb-confine.
-- A minimal provider runs the helper on this machine against a temp workspace root, so these specs check
-- the argv the library builds, the decoding of the helper's JSON and the error objects, independent of
-- any provider's transport (each provider's own suite runs the same calls through its channel).
local glsb = require "glsb"
local core = require "glsb.core"
local loop = require "glsb.loop"
local process = require "glsb.process"
local sandbox = require "glsb.sandbox"

local HELPER = os.getenv("GLSB_CONFINE") or (core.realpath("build/glsb-confine"))

local Host = sandbox.BaseSandbox:extend("workspace-host")
function Host:_start(opts)
  self.root = core.mkdtemp("/tmp/glsb-ws-lua-XXXXXX")
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
function Host:_run_command() return { code = 0, stdout = "", stderr = "" } end
function Host:_terminate() core.rmtree(self.root) end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

describe("workspace primitives through the Lua API #workspace", function()
  local sb

  before_each(function() sb = Host.create({}) end)
  after_each(function() if sb:is_running() then sb:terminate() end end)

  it("writes a file beneath the root, creating parents, and reports bytes", function()
    local r = glsb.write_workspace_file(sb, { relative_path = "reports/a/result.json", data = '{"ok": true}' })
    assert.same({ bytes = 12, path = "reports/a/result.json", replaced = false }, r)
    assert.equal('{"ok": true}', read(sb.root .. "/reports/a/result.json"))
  end)

  it("keeps arbitrary bytes in names and data exactly", function()
    local name = "caf\xc3\xa9 \xff.bin"
    local data = "\0\1\2\255\n\r"
    glsb.write_workspace_file(sb, { relative_path = name, data = data })
    assert.equal(data, read(sb.root .. "/" .. name))
  end)

  it("refuses to replace without overwrite, replaces with it", function()
    glsb.write_workspace_file(sb, { relative_path = "f.txt", data = "one" })
    local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "f.txt", data = "two" })
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.WorkspaceError))
    assert.equal("workspace", err.stage)
    assert.equal("exists", err.reason)
    assert.equal("one", read(sb.root .. "/f.txt"))
    local r = glsb.write_workspace_file(sb, { relative_path = "f.txt", data = "two", overwrite = true })
    assert.is_true(r.replaced)
    assert.equal("two", read(sb.root .. "/f.txt"))
  end)

  for _, case in ipairs({
    { "/etc/passwd", "absolute_path" }, { "../x", "dotdot_component" }, { "a//b", "empty_component" },
    { "./a", "dot_component" }, { "a\0b", "nul_byte" }, { "", "empty_path" },
  }) do
    it("rejects " .. case[1]:gsub("%z", "\\0") .. " as " .. case[2] .. " and writes nothing", function()
      local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = case[1], data = "x" })
      assert.is_false(ok)
      assert.equal(case[2], err.reason)
      assert.matches(case[2], tostring(err), 1, true)
      local p = io.popen("find " .. sb.root .. " -mindepth 1 | wc -l")
      assert.equal("0", p:read("l"))
      p:close()
    end)
  end

  it("rejects a payload over max_bytes and never sends more than max_bytes + 1", function()
    local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "big", data = string.rep("x", 5000), max_bytes = 100 })
    assert.is_false(ok)
    assert.equal("too_large", err.reason)
    assert.equal(101, #sb.exec_log[#sb.exec_log].opts.stdin)
    assert.is_nil(sb.exec_log[#sb.exec_log].opts.timeout) -- bounded by size, not by the channel timeout
    assert.is_nil(read(sb.root .. "/big"))
  end)

  it("does not write through a symlink planted in the workspace", function()
    local outside = core.mkdtemp("/tmp/glsb-ws-outside-XXXXXX")
    finally(function() core.rmtree(outside) end)
    assert(os.execute(("ln -s %s %s/link"):format(outside, sb.root)))
    local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "link/pwn", data = "x" })
    assert.is_false(ok)
    assert.equal("symlink", err.reason)
    assert.is_nil(read(outside .. "/pwn"))
  end)

  it("misuse raises plain argument errors before anything runs", function()
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = 1, data = "" }) end)
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = "a", data = {} }) end)
    assert.has_error(function() glsb.write_workspace_file(sb, { relative_path = "a", data = "", max_bytes = 1.5 }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, {}) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls", 3 }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls" }, { env = { A = 1 } }) end)
    assert.has_error(function() glsb.run_workspace_command(sb, { "ls" }, { env = { ["A=B"] = "1" } }) end)
    assert.equal(0, #sb.exec_log)
  end)

  it("runs an exact argv: shell syntax reaches the program literally", function()
    local w = glsb.run_workspace_command(sb, { "printf", "%s|%s", "$(id)", "a; rm -rf /" })
    assert.equal(0, w.exit_code)
    assert.equal("$(id)|a; rm -rf /", w.stdout)
    assert.is_false(w.timed_out)
    assert.equal(#w.stdout, w.stdout_byte_count)
    assert.is_true(w.stdout_byte_count_complete)
  end)

  it("builds the environment from env plus the allowlist only (no PATH unless listed)", function()
    local w = glsb.run_workspace_command(sb, { "env" }, { env = { PYTHONUNBUFFERED = "1" } })
    assert.equal("PYTHONUNBUFFERED=1\n", w.stdout)
    -- The allowlist reads the environment the helper runs in (the sandbox's), here this process's.
    w = glsb.run_workspace_command(sb, { "env" }, { env_allowlist = { "PATH", "GLSB_SURELY_UNSET" } })
    assert.matches("^PATH=", w.stdout)
    assert.not_matches("GLSB_SURELY_UNSET", w.stdout)
  end)

  it("runs in cwd_components beneath the root and refuses a missing one", function()
    glsb.write_workspace_file(sb, { relative_path = "reports/x", data = "" })
    local w = glsb.run_workspace_command(sb, { "pwd" }, { cwd_components = { "reports" } })
    assert.equal(core.realpath(sb.root .. "/reports") .. "\n", w.stdout)
    local ok, err = pcall(glsb.run_workspace_command, sb, { "pwd" }, { cwd_components = { "missing" } })
    assert.is_false(ok)
    assert.equal("cwd_not_found", err.reason)
  end)

  it("times out, kills the group and says so; <= 0 disables the deadline", function()
    local w = glsb.run_workspace_command(sb, { "sleep", "5" }, { timeout = 0.2 })
    assert.is_true(w.timed_out)
    assert.equal(9, w.signal)
    assert.is_true(sb.exec_log[#sb.exec_log].opts.timeout > 0.2)
    w = glsb.run_workspace_command(sb, { "sh", "-c", "sleep 0.1; echo done" }, { timeout = 0 })
    assert.is_false(w.timed_out)
    assert.equal("done\n", w.stdout)
    assert.is_nil(sb.exec_log[#sb.exec_log].opts.timeout)
    local found
    for i, a in ipairs(sb.exec_log[#sb.exec_log].argv) do if a == "--timeout" then found = sb.exec_log[#sb.exec_log].argv[i + 1] end end
    assert.equal("0", found)
  end)

  it("caps captured output but counts every byte, bytes kept exact", function()
    local w = glsb.run_workspace_command(sb, { "head", "-c", "1000", "/dev/urandom" }, { max_output_bytes = 100 })
    assert.equal(100, #w.stdout)
    assert.equal(1000, w.stdout_byte_count)
    assert.is_true(w.stdout_truncated)
    assert.is_false(w.stderr_truncated)
    w = glsb.run_workspace_command(sb, { "printf", "\\377\\000\\376" })
    assert.equal("\255\0\254", w.stdout)
  end)

  it("a program that is not found is a WorkspaceError naming it", function()
    local ok, err = pcall(glsb.run_workspace_command, sb, { "no-such-program-xyz" })
    assert.is_false(ok)
    assert.equal("not_found", err.reason)
    assert.matches("no%-such%-program%-xyz", err.message)
  end)

  it("use after terminate raises SandboxNotInitializedError", function()
    sb:terminate()
    local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "a", data = "" })
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.SandboxNotInitializedError))
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
