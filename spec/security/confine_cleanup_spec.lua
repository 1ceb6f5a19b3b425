-- confine_cleanup_spec.lua: the supervisor's own cleanup (--cleanup) removes whatever tree it
-- finds in the workspace, however deep: a 20,000-deep directory chain (with directories left
-- without permissions and symlinks out of the tree) goes completely, with a few descriptors and
-- no recursion, and nothing a symlink points to is touched. The recursive removal gave up below
-- depth 256 (and needed one descriptor per level).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

-- Builds a chain of `depth` directories "d" below root, fd-relative (the path outgrows PATH_MAX),
-- with a file every 100 levels, a symlink to `target` every 1000, and one directory chmod 000.
local CHAIN = [[
import os, sys
root, depth, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
for i in range(depth):
    os.mkdir("d", dir_fd=fd)
    if i % 100 == 0:
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    if i % 1000 == 7:
        os.symlink(target, "link", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    if i == 5000:
        os.chmod("d", 0, dir_fd=fd)
    os.close(fd)
    fd = nfd
os.close(fd)
]]

describe("glsb-confine sandbox --cleanup of deep trees #security #confine", function()
  local base
  setup(H.require_binary)
  -- The chain is built on a tmpfs of the spec's own (ext4 takes seconds for 20,000 levels).
  before_each(function()
    base = H.mktemp_dir()
    assert(os.execute("mount -t tmpfs -o size=64m,mode=0700 glsb-spec " .. H.q(base)),
      "this spec mounts a tmpfs: run it as root")
  end)
  after_each(function()
    os.execute("umount " .. H.q(base))
    H.rm_rf(base)
  end)

  it("removes a 20,000-deep chain completely, with at most 64 descriptors", function()
    local ws, victim = base .. "/ws", base .. "/victim"
    assert(os.execute("mkdir -p " .. H.q(ws .. "/home") .. " " .. H.q(ws .. "/files") .. " " .. H.q(victim)))
    H.write(victim .. "/keep", "keep")
    for sub, depth in pairs({ home = 20000, files = 300 }) do
      local out, code = H.sh(H.join({ "/usr/bin/python3", "-c", CHAIN, ws .. "/" .. sub, tostring(depth), victim })
        .. " 2>&1")
      assert.are.equal(0, code, out)
    end
    local out, code = H.sh("ulimit -n 64 && " .. H.join({ H.bin, "sandbox", "--cleanup", "--max-open-files", "32",
      "--workspace", ws, "--", "true" }) .. " 2>&1")
    assert.are.equal(0, code, out)
    assert.are.equal("", out) -- no "cleanup ... incomplete"
    assert.is_false(H.exists(ws), "the workspace was left behind")
    assert.are.equal("keep", H.read(victim .. "/keep")) -- symlinks were removed, not followed
  end)
end)
