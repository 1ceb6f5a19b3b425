-- core.rmtree on trees a sandbox can leave behind: a 20,000-deep directory chain goes entirely in a
-- process limited to 1,024 fds and a 256 KiB stack (the walk holds no fd and no C frame per level).
local core = require "glsb.core"
local process = require "glsb.process"

-- Runs argv to its end; returns stdout, stderr, exit code.
local function run(argv)
  local out, err, st = process.run(argv, { timeout = 120 })
  assert(out, err)
  return out, err, st.code
end

-- A chain of `depth` directories "d" under top, each holding a file: made with dir fds (mkdirat), as
-- such a path cannot be named whole (it is far past PATH_MAX).
local MAKE_CHAIN = [[
import os, sys
top, depth = sys.argv[1], int(sys.argv[2])
os.mkdir(top)
fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for i in range(depth):
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    os.mkdir("d", 0o500 if i % 97 == 0 else 0o755, dir_fd=fd)
    nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nxt
os.close(fd)
]]

describe("core.rmtree on deep trees #core", function()
  local dir
  -- On tmpfs when there is one: 20,000 mkdirs cost seconds on a journaled disk, milliseconds there
  -- (the C test does the same on both kinds of file system, wide trees on disk).
  local shm = core.realpath("/dev/shm") and io.open("/dev/shm/.", "r") and "/dev/shm" or "/tmp"
  before_each(function() dir = assert(core.mkdtemp(shm .. "/glsb-rmtree-XXXXXX")) end)
  after_each(function() assert(core.rmtree(dir)) end)

  it("removes a 20,000-deep chain with 1,024 fds and a 256 KiB stack", function()
    local top = dir .. "/chain"
    local _, err, code = run({ "/usr/bin/python3", "-c", MAKE_CHAIN, top, "20000" })
    assert.equal(0, code, err)
    local script = ("local core = require 'glsb.core'; local ok, msg, c = core.rmtree(%q); "
      .. "io.write(tostring(ok), ' ', tostring(msg), ' ', tostring(c))"):format(top)
    local out
    out, err, code = run({ "/bin/sh", "-c", 'ulimit -n 1024 && ulimit -s 256 && exec "$0" -e "$1"',
      "build/glsb-lua", script })
    assert.equal(0, code, err)
    assert.equal("true nil nil", out)
    assert.is_nil(io.open(top, "r"))
    -- the directory beside it (the one holding the chain) is untouched
    assert.truthy(core.realpath(dir))
  end)

  it("stops at a symlink in the depths without following it", function()
    local top = dir .. "/chain"
    local _, err, code = run({ "/usr/bin/python3", "-c", MAKE_CHAIN .. [[
fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
for i in range(depth):
    nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = nxt
os.symlink(sys.argv[3], "escape", dir_fd=fd)
]], top, "3000", dir .. "/keep" })
    assert.equal(0, code, err)
    assert(core.write_file_atomic(dir .. "/keep", "precious"))
    assert.is_true(core.rmtree(top))
    local f = assert(io.open(dir .. "/keep"))
    assert.equal("precious", f:read("a"))
    f:close()
  end)
end)
