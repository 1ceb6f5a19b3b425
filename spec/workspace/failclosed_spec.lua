-- failclosed_spec.lua: glsb-confine refuses to work unconfined. Missing kernel
-- features are simulated: syscalls fail with ENOSYS under a seccomp filter
-- (spec/workspace/enosys.c, compiled here), /proc hidden in a mount namespace.
local h = require "workspace.helper"

local NR = { openat2 = 437, landlock_create_ruleset = 444, landlock_add_rule = 445, landlock_restrict_self = 446 }

describe("glsb-confine fails closed #workspace", function()
  local ws, tooldir, enosys

  setup(function()
    h.require_binary()
    local out, code = h.sh("mktemp -d /tmp/glsb-ws-spec.XXXXXX")
    assert(code == 0, "mktemp failed")
    tooldir = out:gsub("%s+$", "")
    enosys = tooldir .. "/enosys"
    local _, cc = h.sh(h.join({ "cc", "-o", enosys, h.repo .. "/spec/workspace/enosys.c" }) .. " 2>&1")
    assert(cc == 0, "cannot compile spec/workspace/enosys.c (needs cc and the Linux uapi headers)")
  end)
  teardown(function()
    if tooldir and tooldir:match("^/tmp/glsb%-ws%-spec%.") then os.execute("rm -rf " .. h.q(tooldir)) end
  end)
  before_each(function() ws = h.workspace() end)
  after_each(function() ws.cleanup() end)

  -- Run a glsb-confine command line (words after the binary) with syscalls denied.
  local function without(nrs, words, stdin)
    local cmd = h.join({ enosys, table.concat(nrs, ","), h.bin }) .. " " .. h.join(words)
    if stdin then
      h.write_file(ws.base .. "/.stdin", stdin)
      cmd = cmd .. " < " .. h.q(ws.base .. "/.stdin")
    end
    local out, status = h.sh(cmd)
    os.remove(ws.base .. "/.stdin")
    return h.decode(out), status
  end

  local function write_words() return { "write", "--root", ws.root, "--path", "a/b/f", "--max-bytes", "100" } end

  local cases = {
    { "openat2", { NR.openat2 }, "openat2_unavailable" },
    { "Landlock", { NR.landlock_create_ruleset, NR.landlock_add_rule, NR.landlock_restrict_self },
      "landlock_unavailable" },
    { "landlock_add_rule", { NR.landlock_add_rule }, "landlock_failed" },
    { "landlock_restrict_self", { NR.landlock_restrict_self }, "landlock_failed" },
  }
  for _, c in ipairs(cases) do
    it("write without " .. c[1] .. ": " .. c[3] .. ", nothing written", function()
      local before = h.snapshot(ws.base)
      local r, status = without(c[2], write_words(), "data")
      assert.are.equal(1, status)
      assert.is_false(r.ok)
      assert.are.equal(c[3], r.error)
      assert.matches("unconfined", r.message)
      assert.are.equal(before, h.snapshot(ws.base))
    end)
  end

  it("the same write succeeds with every feature present (the control)", function()
    local r = without({ 9999 }, write_words(), "data")
    assert.is_true(r.ok)
    assert.are.equal("data", h.read(ws.root .. "/a/b/f"))
  end)

  it("run without openat2: openat2_unavailable, the program never starts", function()
    local r, status = without({ NR.openat2 }, { "run", "--root", ws.root, "--", "/usr/bin/touch",
      ws.outside .. "/ran" })
    assert.are.equal(1, status)
    assert.are.equal("openat2_unavailable", r.error)
    assert.is_false(h.exists(ws.outside .. "/ran"))
  end)

  local function with_fake_proc(setup_proc)
    local _, code = h.sh("unshare -m true 2>/dev/null")
    assert(code == 0, "this spec needs mount namespaces (unshare -m; run as root)")
    h.write_file(ws.base .. "/.stdin", "data")
    local inner = "mount -t tmpfs none /proc && " .. setup_proc .. "exec " .. h.join({ h.bin }) .. " " ..
      h.join(write_words()) .. " < " .. h.q(ws.base .. "/.stdin")
    local out, status = h.sh("unshare -m sh -c " .. h.q(inner))
    os.remove(ws.base .. "/.stdin")
    return h.decode(out), status
  end

  it("write without /proc/self/fd: proc_unavailable, nothing written", function()
    local before = h.snapshot(ws.base)
    local r, status = with_fake_proc("")
    assert.are.equal(1, status)
    assert.are.equal("proc_unavailable", r.error)
    assert.are.equal(before, h.snapshot(ws.base))
  end)

  it("write with a /proc/self/fd that is not procfs: proc_unavailable", function()
    local before = h.snapshot(ws.base)
    local r, status = with_fake_proc("mkdir -p /proc/self/fd && ")
    assert.are.equal(1, status)
    assert.are.equal("proc_unavailable", r.error)
    assert.are.equal(before, h.snapshot(ws.base))
  end)
end)
