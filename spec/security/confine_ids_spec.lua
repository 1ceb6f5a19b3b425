-- confine_ids_spec.lua: run as root, each sandbox gets its own host uid and gid (a slot of the
-- range 1879048192 + k * 65536, claimed with an flock in /run/glsb-confine/ids), so per-user
-- kernel limits are per sandbox: all sandboxes shared one host uid before, and one sandbox took
-- all 128 inotify instances (fs.inotify.max_user_instances) from every other. The claim is
-- released when the supervisor exits, also when it is SIGKILLed.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

local BASE, SLOT = 1879048192, 65536

describe("glsb-confine sandbox host ids per sandbox #security #confine", function()
  local dir
  setup(function()
    H.require_binary()
    assert(H.sh("id -u") == "0\n", "these specs run glsb-confine as root")
  end)
  before_each(function() dir = H.mktemp_dir() end)
  after_each(function() H.rm_rf(dir) end)

  -- Starts n sandboxes at once, each running cmd; returns their set-up reports and outputs.
  local function concurrent(n, cmd, extra)
    local parts = {}
    for i = 1, n do
      parts[#parts + 1] = H.join({ H.bin, "sandbox", "--cleanup", "--workspace", dir .. "/ws" .. i,
        "--report-fd", "3", table.unpack(extra or {}) }) .. " -- sh -c " .. H.q(cmd) .. " 3>" ..
        H.q(dir .. "/rep" .. i) .. " >" .. H.q(dir .. "/out" .. i) .. " 2>&1 &"
    end
    H.sh(table.concat(parts, " ") .. " wait")
    local reports, outs = {}, {}
    for i = 1, n do
      reports[i] = H.decode_report(H.read(dir .. "/rep" .. i))
      outs[i] = H.read(dir .. "/out" .. i)
    end
    return reports, outs
  end

  it("maps each concurrent sandbox to a host uid and gid of its own", function()
    local reports, outs = concurrent(5, "sleep 0.5; id -u")
    local seen = {}
    for i, r in ipairs(reports) do
      assert.is_true(r and r.ok, outs[i])
      local a = r.applied
      assert.are.equal("1000\n", outs[i])
      assert.are.equal(a.host_uid, a.host_gid)
      assert.is_nil(seen[a.host_uid], "two sandboxes share host uid " .. a.host_uid)
      seen[a.host_uid] = true
      assert.are.equal(BASE + a.id_slot * SLOT + 1000, a.host_uid)
    end
  end)

  it("leaves the next sandbox its inotify instances when one takes them all", function()
    local hog = H.join({ H.bin, "sandbox", "--cleanup", "--workspace", dir .. "/hog", "--", "python3", "-c", [[
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 1000 and libc.inotify_init1(0) >= 0: n += 1
print("held", n, ctypes.get_errno(), flush=True)
time.sleep(4)
]] })
    local probe = H.join({ H.bin, "sandbox", "--cleanup", "--workspace", dir .. "/probe", "--", "python3", "-c", [[
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("probe", "ok" if libc.inotify_init1(0) >= 0 else "errno %d" % ctypes.get_errno())
]] })
    local out = H.sh(hog .. " >" .. H.q(dir .. "/hog.out") .. " 2>&1 & h=$!; " ..
      "for i in $(seq 200); do grep -q held " .. H.q(dir .. "/hog.out") .. " && break; sleep 0.05; done; " ..
      probe .. " 2>&1; kill $h; wait $h 2>/dev/null")
    local held = H.read(dir .. "/hog.out")
    assert.matches("held %d+ 24\n", held) -- the hog reached its own limit (EMFILE)
    assert.matches("probe ok\n", out)
  end)

  it("frees the id range when the supervisor ends, also by SIGKILL", function()
    local ws, rep = dir .. "/ws", dir .. "/rep"
    local out = H.sh("sh -c " .. H.q(H.join({ H.bin, "sandbox", "--cleanup", "--workspace", ws, "--report-fd", "3",
      "--", "sleep", "30" }) .. " 3>" .. H.q(rep) .. " & echo $! > " .. H.q(dir .. "/sup") .. "; wait") ..
      " >/dev/null 2>&1 & for i in $(seq 200); do grep -qs pid " .. H.q(rep) .. " && break; sleep 0.05; done; echo started")
    assert.matches("started", out)
    local report = H.decode_report(H.read(rep))
    local slot = ("/run/glsb-confine/ids/slot-%d"):format(report.applied.id_slot)
    local _, busy = H.sh("flock -n " .. H.q(slot) .. " true")
    assert.are_not.equal(0, busy, "the slot is not held while its sandbox runs")
    local sup = tonumber(H.read(dir .. "/sup"))
    os.execute("kill -9 " .. sup)
    assert.is_true(H.wait_until(function() return select(2, H.sh("flock -n " .. H.q(slot) .. " true")) == 0 end, 5),
      "the slot stayed claimed after the supervisor died")
    -- and a normal end frees it too
    local _, code, r2 = H.sandbox({ "true" })
    assert.are.equal(0, code)
    local _, free = H.sh(("flock -n /run/glsb-confine/ids/slot-%d true"):format(r2.applied.id_slot))
    assert.are.equal(0, free)
  end)
end)
