-- confine_hostinfo_spec.lua: what the sandbox can learn about the host through /proc.
-- /proc/1/cmdline showed the helper's whole argv (workspace and bind paths of the host), and
-- PID 1 (a fork of the supervisor) kept the host's environment, readable in /proc/1/environ
-- when run unprivileged; mountinfo showed the host paths of the workspace and of every bind.
-- Now PID 1 (and any call child) blanks its command line and environment, options can come on a
-- descriptor (--config-fd) instead of argv, the workspace is private storage, and small files
-- bound read-only are copied. A directory bind still shows its host path (the kernel reports a
-- bind's path within its filesystem): --help says so.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

-- Prints every readable /proc/*/cmdline and /proc/*/environ, and mountinfo.
local LOOK = [[
import os
for p in sorted(os.listdir("/proc")):
    if not p.isdigit(): continue
    for what in ("cmdline", "environ"):
        try:
            data = open("/proc/%s/%s" % (p, what), "rb").read()
            print(p, what, repr(data))
        except OSError as e:
            print(p, what, "error", e.errno)
print(open("/proc/self/mountinfo").read())
]]

describe("glsb-confine sandbox and what it says about the host #security #confine", function()
  local base
  setup(H.require_binary)
  before_each(function() base = H.mktemp_dir() end)
  after_each(function() H.rm_rf(base) end)

  local function check(out, secret, paths)
    assert.is_nil(out:find(secret, 1, true), "the host's environment is visible:\n" .. out)
    for _, p in ipairs(paths) do
      assert.is_nil(out:find(p, 1, true), "host path " .. p .. " is visible:\n" .. out)
    end
    assert.matches("\n1 cmdline b'glsb%-confine\\x00'\n", "\n" .. out)
  end

  it("PID 1 shows no host path, option or environment (root)", function()
    os.execute("mkdir -p " .. H.q(base .. "/bind-src-dir-xyz") .. " && echo hi > " .. H.q(base .. "/file-src-xyz"))
    local ws = base .. "/ws-dir-xyz"
    local out, code = H.sh("HOSTSECRET_ROOT=s3cr3t-value-1 " .. H.join({ H.bin, "sandbox", "--cleanup", "--workspace", ws,
      "--ro-bind", base .. "/file-src-xyz", "/opt/file", "--env", "A=1", "--", "python3", "-c", LOOK }) .. " 2>&1")
    assert.are.equal(0, code, out)
    check(out, "s3cr3t-value-1", { "ws-dir-xyz", "file-src-xyz", "--cleanup", "--env" })
  end)

  it("PID 1 shows no host path, option or environment (unprivileged)", function()
    os.execute("chown nobody:nogroup " .. H.q(base))
    local ws = base .. "/ws-dir-xyz"
    local out, code = H.sh("HOSTSECRET_USER=s3cr3t-value-2 setpriv --reuid=65534 --regid=65534 --clear-groups " ..
      H.join({ H.bin, "sandbox", "--cleanup", "--workspace", ws, "--", "/usr/bin/python3", "-c", LOOK }) .. " 2>&1")
    assert.are.equal(0, code, out)
    check(out, "s3cr3t-value-2", { "ws-dir-xyz", "--cleanup" })
  end)

  it("takes its options from --config-fd: the host sees none in the supervisor's argv", function()
    local ws = base .. "/ws-config-xyz"
    local words = { "--cleanup", "--workspace", ws, "--env", "GREETING=from config", "--",
      "sh", "-c", "echo \"$GREETING\"; cat; sleep 1" }
    local block = table.concat(words, "\0") .. "\0"
    H.write(base .. "/stdin", #block .. "\n" .. block .. "program stdin\n")
    local out = H.sh(H.join({ H.bin, "sandbox", "--config-fd", "0" }) .. " < " .. H.q(base .. "/stdin") ..
      " > " .. H.q(base .. "/out") .. " 2>&1 & p=$!; sleep 0.5; tr '\\0' ' ' < /proc/$p/cmdline; echo; wait $p; echo rc=$?")
    assert.matches("sandbox %-%-config%-fd 0 \nrc=0\n$", out)
    assert.are.equal("from config\nprogram stdin\n", H.read(base .. "/out"))
    assert.is_false(H.exists(ws)) -- --cleanup came from the config too
  end)

  it("rejects a malformed --config-fd block", function()
    for _, input in ipairs({ "", "12\nshort", "x\n", "5\nab\0cd", "99999999\n" }) do
      H.write(base .. "/stdin", input)
      local out, code = H.sh(H.join({ H.bin, "sandbox", "--config-fd", "0" }) .. " < " .. H.q(base .. "/stdin") .. " 2>&1")
      assert.are.equal(2, code, out)
      assert.matches("config%-fd", out)
    end
  end)

  it("copies small read-only file binds (no host path in mountinfo), executables stay executable", function()
    H.write(base .. "/data-file-xyz", "payload\n")
    local out, code = H.sandbox({ "sh", "-c", "cat /opt/data; /opt/helper --help | head -1; grep -c . /proc/self/mountinfo; " ..
      "cat /proc/self/mountinfo" }, { args = { "--ro-bind", base .. "/data-file-xyz", "/opt/data",
      "--ro-bind", H.bin, "/opt/helper" } })
    assert.are.equal(0, code, out)
    assert.matches("^payload\nusage: glsb%-confine", out)
    assert.is_nil(out:find("data-file-xyz", 1, true), out)
    assert.is_nil(out:find("/build/glsb-confine", 1, true), out)
  end)
end)
