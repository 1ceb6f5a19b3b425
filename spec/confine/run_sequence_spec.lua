-- run_sequence_spec.lua: `glsb-confine run` keeps no state from one run to the next. Reported:
-- after a command that timed out, a command whose setsid grandchild holds the output pipe hung
-- the helper until the caller's outer deadline ("gave no result", exit 137). Each run is a new
-- process (subreaper of its command, which it kills at its deadline, then drains the pipes for
-- 2 s and kills whatever it adopted); here the sequence runs three ways and must end in
-- timeout + drain with timed_out = true, the output so far and incomplete counts, and the run
-- after it must work: from a long-lived parent inside a sandbox (what the local agent was),
-- through the control channel (what the local provider uses now), and from the host.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/helper.lua")

local SEQUENCE = {
  { argv = { "sleep", "5" }, timeout = "0.3" },
  { argv = { "sh", "-c", "echo before; setsid sleep 30 & echo after" }, timeout = "2" },
  { argv = { "echo", "still works" }, timeout = "5" },
}

-- A parent that outlives the runs: python running the helper once per step, timing each.
local PARENT = [=[
import json, subprocess, sys, time
helper, steps = sys.argv[1], json.loads(sys.argv[2])
for s in steps:
    t = time.monotonic()
    p = subprocess.run([helper, "run", "--root", sys.argv[3], "--timeout", s["timeout"], "--"] + s["argv"],
                       capture_output=True, start_new_session=True, timeout=60)
    r = json.loads(p.stdout.split(b"\n")[0])
    r["secs"] = time.monotonic() - t
    print(json.dumps(r), flush=True)
]=]

local function check(results, out)
  assert.are.equal(3, #results, out)
  assert.is_true(results[1].timed_out)
  local r = results[2]
  assert.is_true(r.timed_out, out)
  assert.is_true(r.secs < 6, "the second run took " .. r.secs .. " s") -- 2 s + 2 s of drain, not 20
  assert.are.equal("YmVmb3JlCmFmdGVyCg==", r.stdout) -- "before\nafter\n"
  assert.is_false(r.stdout_byte_count_complete)
  assert.are.equal(0, results[3].exit_code)
  assert.are.equal("c3RpbGwgd29ya3MK", results[3].stdout)
end

describe("glsb-confine run after a timed-out run #confine", function()
  local base
  setup(H.require_binary)
  before_each(function() base = H.mktemp_dir() end)
  after_each(function() H.rm_rf(base) end)

  local function decode_lines(out)
    local results = {}
    for line in out:gmatch("[^\n]+") do
      local ok, doc = pcall(require("cjson").decode, line)
      if ok and type(doc) == "table" and doc.ok ~= nil then results[#results + 1] = doc end
    end
    return results
  end

  it("ends in time from a long-lived parent inside a sandbox", function()
    H.write(base .. "/parent.py", PARENT)
    local out = H.sandbox({ "python3", "/opt/parent.py", "/opt/glsb-confine", require("cjson").encode(SEQUENCE),
      "/home/user" }, { args = { "--ro-bind", H.bin, "/opt/glsb-confine", "--ro-bind", base .. "/parent.py",
      "/opt/parent.py" }, timeout = 60 })
    check(decode_lines(out), out)
  end)

  it("ends in time through the control channel", function()
    H.write(base .. "/host.py", H.read(H.root .. "/spec/confine/control_driver.py") .. [=[
steps = json.loads(sys.argv[1])
sb = Sandbox(["--cleanup", "--workspace", os.environ["WS"]], ["sleep", "60"])
for i, s in enumerate(steps):
    t = time.monotonic()
    h, o, e = sb.call(i + 1, ["run", "--root", "/home/user", "--timeout", s["timeout"], "--"] + s["argv"])
    r = result(o)
    r["secs"] = time.monotonic() - t
    print(json.dumps(r), flush=True)
os.kill(sb.pid, 1)
sb.end()
]=])
    local bin = H.sh("realpath " .. H.q(H.bin)):gsub("\n$", "")
    local out = H.sh("GLSB_BIN=" .. H.q(bin) .. " WS=" .. H.q(base .. "/ws") .. " timeout 60 /usr/bin/python3 " ..
      H.join({ base .. "/host.py", require("cjson").encode(SEQUENCE) }) .. " 2>&1")
    check(decode_lines(out), out)
  end)

  it("ends in time from the host", function()
    H.write(base .. "/parent.py", PARENT)
    os.execute("mkdir -p " .. H.q(base .. "/root"))
    local out = H.sh("timeout 60 /usr/bin/python3 " .. H.join({ base .. "/parent.py", H.bin,
      require("cjson").encode(SEQUENCE), base .. "/root" }) .. " 2>&1")
    check(decode_lines(out), out)
  end)
end)
