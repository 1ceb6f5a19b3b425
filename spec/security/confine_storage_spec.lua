-- confine_storage_spec.lua: --disk-mb bounds everything the sandbox can write. /home/user and
-- /files were binds of the host workspace (2.1 GB and 200k inodes written with disk_mb = 64);
-- now an ephemeral sandbox (--cleanup, or --storage private) keeps /tmp, /home/user and /files
-- on one private tmpfs of --disk-mb bytes and --max-inodes inodes: a full disk is ENOSPC, the
-- program goes on, and nothing reaches the host. --storage workspace keeps the host binds.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

local FILL = [[
import os, sys
def fill(path, limit):
    n = 0
    try:
        with open(path, "wb") as f:
            while n < limit:
                f.write(b"x" * (1 << 20)); f.flush(); n += 1 << 20
    except OSError as e:
        return n, e.strerror
    return n, None
for path in ["/home/user/a", "/files/b", "/tmp/c"]:
    n, err = fill(path, 48 << 20)
    print("wrote", path, n >> 20, err, flush=True)
made, err = 0, None
try:
    while made < 20000:
        open("/home/user/f%d" % made, "w").close(); made += 1
except OSError as e:
    err = e.strerror
print("files", made, err)
]]

describe("glsb-confine sandbox storage #security #confine", function()
  setup(H.require_binary)

  it("bounds /home/user, /files and /tmp together at --disk-mb, files and inodes", function()
    local ws = H.mktemp_dir()
    finally(function() H.rm_rf(ws) end)
    local out, code, report = H.python(FILL, { workspace = ws, args = { "--cleanup", "--disk-mb", "64",
      "--max-file-mb", "64" }, timeout = 60 })
    assert.are.equal(0, code, out) -- the program saw errors, finished, and exited
    local total = 0
    for path, mib, err in out:gmatch("wrote (%S+) (%d+) ([^\n]+)") do
      total = total + tonumber(mib)
      if path ~= "/home/user/a" then assert.are.equal("No space left on device", err, out) end
    end
    assert.is_true(total <= 64, "wrote " .. total .. " MiB with --disk-mb 64\n" .. out)
    local made, err = out:match("files (%d+) ([^\n]+)")
    assert.is_true(tonumber(made) <= 4096, out) -- --max-inodes defaults to max(4096, 64 per MiB)
    assert.are.equal("No space left on device", err)
    assert.are.same({ type = "private", mb = 64, inodes = 4096 }, report.applied.storage)
  end)

  it("keeps nothing on the host and shows no host path in mountinfo", function()
    local base = H.mktemp_dir()
    finally(function() H.rm_rf(base) end)
    local ws = base .. "/workspace-dir"
    for _, args in ipairs({ { "--cleanup" }, { "--storage", "private" } }) do
      local out, code = H.sandbox({ "sh", "-c", "echo x > /home/user/f && echo y > /files/g && " ..
        "test -e " .. ws .. " && echo VISIBLE; cat /proc/self/mountinfo" }, { workspace = ws, args = args })
      assert.are.equal(0, code, out)
      assert.is_nil(out:find(ws, 1, true), out)
      assert.is_nil(out:find("workspace-dir", 1, true), out)
    end
    assert.are.equal("", H.sh("find " .. H.q(ws) .. " -mindepth 1"))
  end)

  it("--storage workspace keeps the host binds (what a template build keeps)", function()
    local ws = H.mktemp_dir()
    finally(function() H.rm_rf(ws) end)
    local out, code, report = H.sandbox({ "sh", "-c", "echo kept > /home/user/f" },
      { workspace = ws, args = { "--storage", "workspace" } })
    assert.are.equal(0, code, out)
    assert.are.equal("kept\n", H.read(ws .. "/home/f"))
    assert.are.equal("workspace", report.applied.storage.type)
  end)
end)
