-- cgroup_collect_spec.lua: every new sandbox first removes the cgroup leaves that crashed sandboxes
-- left (their supervisor was SIGKILLed and could not). Such a collection must never take the leaf of
-- a sandbox that is starting: between the leaf's mkdir and its child's join the leaf is empty, so an
-- rmdir succeeds, and the child's join then fails ("joining the cgroup: No such device", seen twice
-- in ~2,000 creates). The collector used to judge a leaf by the pid in its name (kill(pid, 0) ==
-- ESRCH), which a collector in another pid namespace cannot see; now the owner holds a lock on its
-- leaf (flock on the leaf's directory) from its creation to its removal, and only unlocked leaves are
-- collected.
--
-- Everything here runs in a cgroup directory of its own (GLSB_CONFINE_TEST_CGROUP_PARENT), so its
-- stale collections never look at other sandboxes' leaves; GLSB_CONFINE_TEST_HOLD_CGROUP pauses a
-- sandbox inside the window (leaves created, child not joined) for as long as the spec needs.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/helper.lua")

-- Directories below /sys/fs/cgroup whose path matches pattern (find -path), sorted.
local function find_dirs(pattern)
  local out = H.sh("find /sys/fs/cgroup -maxdepth 8 -type d -path " .. H.q(pattern) .. " 2>/dev/null | sort")
  local dirs = {}
  for line in out:gmatch("[^\n]+") do dirs[#dirs + 1] = line end
  return dirs
end

local function sorted(list)
  local copy = { table.unpack(list) }
  table.sort(copy)
  return copy
end

describe("glsb-confine cgroup leaf collection #confine", function()
  local base, parent, env

  setup(function()
    H.require_binary()
    local doctor = H.doctor()
    assert(doctor.cgroup_limits, "no cgroup limits on this machine (glsb-confine doctor says why); these specs need them")
  end)

  before_each(function()
    base = H.mktemp_dir()
    parent = ("glsb-spec-%d-%d"):format(os.time(), math.random(1000000, 9999999))
    env = { GLSB_CONFINE_TEST_CGROUP_PARENT = parent }
  end)

  after_each(function()
    -- the spec's own collection directories, empty by now (rmdir refuses anything else)
    for _, dir in ipairs(find_dirs("*/" .. parent .. "/*")) do os.execute("rmdir " .. H.q(dir) .. " 2>/dev/null") end
    for _, dir in ipairs(find_dirs("*/" .. parent)) do os.execute("rmdir " .. H.q(dir) .. " 2>/dev/null") end
    H.rm_rf(base)
  end)

  it("a collection that cannot see the supervisor (another pid namespace) leaves a starting sandbox's leaves alone",
    function()
      local _, ucode = H.sh("unshare --pid --fork --mount-proc true 2>&1")
      assert(ucode == 0, "this spec needs `unshare --pid --fork --mount-proc` (util-linux, run as root)")
      local hold, rc_file = base .. "/hold", base .. "/rc"
      os.execute("mkdir " .. H.q(hold))
      -- busted keeps one finally per test: the paused sandbox is always let go and waited for
      finally(function()
        H.write(hold .. "/go", "")
        H.wait_until(function() return H.read(rc_file) ~= nil end, 30)
      end)
      local sandbox = H.env_prefix({ GLSB_CONFINE_TEST_CGROUP_PARENT = parent, GLSB_CONFINE_TEST_HOLD_CGROUP = hold })
        .. H.join({ H.bin, "sandbox", "--cleanup", "--workspace", base .. "/ws", "--report-fd", "3", "--", "true" })
        .. " 3>" .. H.q(base .. "/report") .. " >" .. H.q(base .. "/out") .. " 2>&1"
      H.sh("(" .. sandbox .. "; echo $? > " .. H.q(rc_file) .. ") >/dev/null 2>&1 &")
      assert.is_true(H.wait_until(function() return H.exists(hold .. "/held") end, 20),
        "the sandbox did not get to its cgroup: " .. tostring(H.read(base .. "/out")))
      local leaves = find_dirs("*/" .. parent .. "/sb-*")
      assert.is_true(#leaves >= 1, "no leaf was created")

      -- A new sandbox's collection, from a pid namespace where the supervisor's pid names no
      -- process (doctor creates and removes a leaf exactly as `sandbox` does, collection first).
      local out, code = H.sh(H.env_prefix(env) .. "unshare --pid --fork --mount-proc " .. H.q(H.bin) .. " doctor 2>&1")
      assert.are.equal(0, code, out)
      for _, leaf in ipairs(leaves) do
        assert.is_true(H.exists(leaf), "collected while its sandbox was starting: " .. leaf)
      end

      H.write(hold .. "/go", "")
      assert.is_true(H.wait_until(function() return H.read(rc_file) ~= nil end, 30), "the sandbox did not end")
      local report = H.decode_report(H.read(base .. "/report"))
      assert.are.equal("0\n", H.read(rc_file), tostring(H.read(base .. "/out")) .. tostring(H.read(base .. "/report")))
      assert.is_true(report.ok)
      assert.are.same(leaves, sorted(report.applied.cgroup_dirs))
      for _, leaf in ipairs(leaves) do assert.is_false(H.exists(leaf), "left behind: " .. leaf) end
    end)

  it("never collects a leaf whose lock is held, even under a dead pid; collects it once the lock is free", function()
    local _, code, report = H.sandbox({ "true" }, { env = env })
    assert.are.equal(0, code)
    assert.is_true(#report.applied.cgroup_dirs >= 1)
    -- leaves named for a process that has ended, locked by a live one (as a live supervisor holds
    -- its own: flock on the leaf's directory)
    local dead = tonumber((H.sh("sh -c 'echo $$'")))
    local planted = {}
    for _, dir in ipairs(report.applied.cgroup_dirs) do
      local leaf = dir:gsub("/[^/]+$", "/sb-" .. dead .. "-1")
      assert.is_true(os.execute("mkdir " .. H.q(leaf)))
      planted[#planted + 1] = leaf
    end
    local marker = base .. "/locked"
    local holder = tonumber((H.sh("/usr/bin/python3 -c " .. H.q([==[
import fcntl, os, sys, time
fds = [os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in sys.argv[2:]]
for fd in fds:
    fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[1], "w").close()
time.sleep(120)
]==]) .. " " .. H.join({ marker, table.unpack(planted) }) .. " >/dev/null 2>&1 & echo $!")))
    finally(function()
      os.execute("kill -9 " .. holder .. " 2>/dev/null")
      for _, leaf in ipairs(planted) do os.execute("rmdir " .. H.q(leaf) .. " 2>/dev/null") end
    end)
    assert.is_true(H.wait_until(function() return H.exists(marker) end, 10), "the lock holder did not start")

    _, code = H.sandbox({ "true" }, { env = env })
    assert.are.equal(0, code)
    for _, leaf in ipairs(planted) do assert.is_true(H.exists(leaf), "collected under a held lock: " .. leaf) end

    os.execute("kill -9 " .. holder)
    assert.is_true(H.wait_until(function() return select(2, H.sh("flock -n " .. H.q(planted[1]) .. " true")) == 0 end, 5),
      "the lock holder did not end")
    _, code = H.sandbox({ "true" }, { env = env })
    assert.are.equal(0, code)
    for _, leaf in ipairs(planted) do assert.is_false(H.exists(leaf), "not collected once free: " .. leaf) end
  end)
end)
