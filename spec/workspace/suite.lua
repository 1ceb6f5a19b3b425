-- spec/workspace/suite.lua: the workspace primitives contract, run against any provider.
--
--   require("workspace.suite")(name, new_sandbox, tag)
-- new_sandbox() -> a started sandbox whose `workspace_root` is where relative paths land. Checks go
-- through the sandbox's own command channel (execute_command), independent of the helper under test.
local glsb = require "glsb"
local busted = require "busted"
local assert = require "luassert"

local describe, it = busted.describe, busted.it
local before_each, after_each = busted.before_each, busted.after_each

return function(name, new_sandbox, tag)
  describe("workspace primitives on " .. name .. " #workspace " .. (tag or ""), function()
    local sb

    -- What the sandbox sees at root/rel: the bytes, or nil when there is no regular file.
    local function read(rel)
      local path = sb.workspace_root .. "/" .. rel
      local r = sb:execute_command(("test -f '%s' && base64 -w0 '%s'"):format(path, path), { timeout = 30 })
      if r.code ~= 0 then return nil end
      return require("glsb.core").b64decode(r.stdout)
    end

    local function entries()
      local r = sb:execute_command(("find '%s' -mindepth 1 | wc -l"):format(sb.workspace_root), { timeout = 30 })
      return tonumber(r.stdout)
    end

    before_each(function() sb = new_sandbox() end)
    after_each(function() if sb and sb:is_running() then sb:terminate() end end)

    it("writes a file beneath the root, creating parents, and reports bytes", function()
      local r = glsb.write_workspace_file(sb, { relative_path = "reports/a/result.json", data = '{"ok": true}' })
      assert.same({ bytes = 12, path = "reports/a/result.json", replaced = false }, r)
      assert.equal('{"ok": true}', read("reports/a/result.json"))
    end)

    it("keeps arbitrary bytes in names and data exactly", function()
      local fname = "caf\xc3\xa9-\xff.bin" -- not UTF-8: the path travels as hex
      local data = "\0\1\2\255\n\r"
      glsb.write_workspace_file(sb, { relative_path = fname, data = data })
      local ls = glsb.run_workspace_command(sb, { "ls" })
      assert.equal(fname .. "\n", ls.stdout)
      glsb.write_workspace_file(sb, { relative_path = "bytes.bin", data = data })
      assert.equal(data, glsb.run_workspace_command(sb, { "cat", "bytes.bin" }).stdout)
    end)

    it("refuses to replace without overwrite, replaces with it", function()
      glsb.write_workspace_file(sb, { relative_path = "f.txt", data = "one" })
      local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "f.txt", data = "two" })
      assert.is_false(ok)
      assert.is_true(glsb.errors.is(err, glsb.errors.WorkspaceError))
      assert.equal("workspace", err.stage)
      assert.equal("exists", err.reason)
      assert.equal("one", read("f.txt"))
      local r = glsb.write_workspace_file(sb, { relative_path = "f.txt", data = "two", overwrite = true })
      assert.is_true(r.replaced)
      assert.equal("two", read("f.txt"))
    end)

    for _, case in ipairs({
      { "/etc/passwd", "absolute_path" }, { "../x", "dotdot_component" }, { "a//b", "empty_component" },
      { "./a", "dot_component" }, { "a\0b", "nul_byte" }, { "", "empty_path" },
    }) do
      it("rejects " .. case[1]:gsub("%z", "\\0") .. " as " .. case[2] .. " and writes nothing", function()
        local before = entries()
        local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = case[1], data = "x" })
        assert.is_false(ok)
        assert.equal(case[2], err.reason)
        assert.matches(case[2], tostring(err), 1, true)
        assert.equal(before, entries())
      end)
    end

    it("rejects a payload over max_bytes", function()
      local ok, err = pcall(glsb.write_workspace_file, sb,
        { relative_path = "big", data = string.rep("x", 5000), max_bytes = 100 })
      assert.is_false(ok)
      assert.equal("too_large", err.reason)
      assert.is_nil(read("big"))
    end)

    it("does not write through a symlink planted in the workspace", function()
      local outside = "/tmp/glsb-ws-outside-" .. tostring(os.time()) .. tostring(math.random(1e6))
      local c = sb:execute_command(("mkdir -p %s && ln -s %s '%s/link'"):format(outside, outside, sb.workspace_root))
      assert.equal(0, c.code, c.stderr)
      local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "link/pwn", data = "x" })
      assert.is_false(ok)
      assert.equal("symlink", err.reason)
      assert.equal(1, sb:execute_command("test -e " .. outside .. "/pwn").code)
      sb:execute_command("rm -rf " .. outside)
    end)

    it("runs an exact argv: shell syntax reaches the program literally", function()
      local w = glsb.run_workspace_command(sb, { "printf", "%s|%s", "$(id)", "a; rm -rf /" })
      assert.equal(0, w.exit_code)
      assert.equal("integer", math.type(w.exit_code))
      assert.equal("integer", math.type(w.stdout_byte_count))
      assert.equal("$(id)|a; rm -rf /", w.stdout)
      assert.is_false(w.timed_out)
      assert.equal(#w.stdout, w.stdout_byte_count)
      assert.is_true(w.stdout_byte_count_complete)
    end)

    it("builds the environment from env plus the allowlist only (no PATH unless listed)", function()
      local w = glsb.run_workspace_command(sb, { "env" }, { env = { PYTHONUNBUFFERED = "1" } })
      assert.equal("PYTHONUNBUFFERED=1\n", w.stdout)
      w = glsb.run_workspace_command(sb, { "env" }, { env_allowlist = { "PATH", "GLSB_SURELY_UNSET" } })
      assert.matches("^PATH=", w.stdout)
      assert.not_matches("GLSB_SURELY_UNSET", w.stdout)
    end)

    it("runs in cwd_components beneath the root and refuses a missing one", function()
      glsb.write_workspace_file(sb, { relative_path = "reports/x", data = "" })
      local w = glsb.run_workspace_command(sb, { "pwd" }, { cwd_components = { "reports" } })
      assert.matches("/reports\n$", w.stdout)
      local ok, err = pcall(glsb.run_workspace_command, sb, { "pwd" }, { cwd_components = { "missing" } })
      assert.is_false(ok)
      assert.equal("cwd_not_found", err.reason)
    end)

    it("times out and kills the group; <= 0 disables the deadline", function()
      local w = glsb.run_workspace_command(sb, { "sleep", "5" }, { timeout = 0.3 })
      assert.is_true(w.timed_out)
      assert.equal(9, w.signal)
      w = glsb.run_workspace_command(sb, { "sh", "-c", "sleep 0.1; echo done" }, { timeout = 0 })
      assert.is_false(w.timed_out)
      assert.equal("done\n", w.stdout)
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

    it("after a command that timed out, a setsid grandchild holding the output pipe ends in time", function()
      local w = glsb.run_workspace_command(sb, { "sleep", "5" }, { timeout = 0.3 })
      assert.is_true(w.timed_out)
      -- the grandchild leaves the group and keeps stdout open: the helper drains for a while, then
      -- reports what it has, with the counts marked incomplete (never "gave no result")
      w = glsb.run_workspace_command(sb, { "sh", "-c", "echo before; setsid sleep 30 & echo after" },
        { timeout = 5 })
      assert.is_true(w.timed_out)
      assert.matches("before\n", w.stdout)
      assert.is_false(w.stdout_byte_count_complete)
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
  end)
end
