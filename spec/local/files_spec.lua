-- sb.files on the local provider: every call goes through glsb-confine's control channel to the
-- sandbox's file server (src/confine/ws_serve.c; write is the helper's own `write`, read its `read`,
-- list, exists, make_dir and remove do what find, test, mkdir -p and rm -rf did), never through the
-- agent the code could rewrite. What the contract suite does not say; spec/security/
-- local_files_server_spec.lua says what the server is and reaches.
local glsb = require "glsb"
local errors = require "glsb.errors"
local helper = require "local.helper"

describe("local sb.files #local", function()
  local root, sb

  setup(function()
    root = helper.private_tmp()
    sb = glsb.create("local", { host_workspace_dir = root })
  end)
  teardown(function()
    if sb then sb:terminate() end
    helper.remove_root(root)
  end)

  it("lists every kind of entry with its size, names with a newline too", function()
    local f = sb.files
    assert.is_true(f:make_dir("kinds"))
    f:write("kinds/a.txt", "alpha")
    local r = sb:execute_command("cd /home/user/kinds && ln -s a.txt link && mkfifo pipe && mkdir sub && "
      .. "printf 12 > \"$(printf 'new\\nline')\"")
    assert.are.equal(0, r.code, tostring(r))
    local got = {}
    for _, e in ipairs(f:list("kinds")) do got[#got + 1] = { e.name, e.type, e.type == "file" and e.size or nil } end
    assert.are.same({ { "a.txt", "file", 5 }, { "link", "symlink" }, { "new\nline", "file", 2 }, { "pipe", "other" },
      { "sub", "dir" } }, got)
    f:remove("kinds")
  end)

  it("reads through symlinks inside the sandbox, and files outside the writable folders", function()
    local f = sb.files
    f:write("/tmp/target.txt", "target")
    sb:execute_command("ln -s /tmp/target.txt /home/user/to-target && ln -s /etc/hostname /home/user/to-etc")
    assert.are.equal("target", f:read("to-target"))
    assert.are.equal((sb:execute_command("cat /etc/hostname").stdout), f:read("to-etc"))
    assert.are.equal((sb:execute_command("cat /etc/os-release").stdout), f:read("/etc/os-release"))
  end)

  it("says not_found for what is missing, and why for what is not a directory", function()
    local f = sb.files
    for _, call in ipairs({ { f.read, "missing.txt" }, { f.list, "missing-dir" } }) do
      local ok, err = pcall(call[1], f, call[2])
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
      assert.are.equal("not_found", err.reason, tostring(err))
    end
    f:write("plain.txt", "x")
    local ok, err = pcall(f.list, f, "plain.txt")
    assert.is_false(ok)
    assert.matches("not a directory", tostring(err))
    ok, err = pcall(f.make_dir, f, "plain.txt")
    assert.is_false(ok)
    assert.matches("File exists", tostring(err))
    assert.is_false(f:exists("missing.txt"))
    assert.is_true(f:exists("plain.txt"))
    f:remove("plain.txt")
    assert.is_false(f:exists("plain.txt"))
  end)

  it("writes only where the sandbox may write", function()
    local ok, err = pcall(sb.files.write, sb.files, "/etc/evil", "x")
    assert.is_false(ok)
    assert.matches("not below /home/user, /files or /tmp", tostring(err))
    ok, err = pcall(sb.files.make_dir, sb.files, "/usr/evil")
    assert.is_false(ok)
    assert.matches("Read%-only file system", tostring(err))
  end)
end)
