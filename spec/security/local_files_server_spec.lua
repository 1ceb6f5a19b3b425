-- sb.files on the local provider is answered by the helper's file server (src/confine/ws_serve.c): one
-- long-lived process per sandbox, made exactly as a control-channel call's helper, started by the first
-- sb.files call. What it is and what it can reach, shown from the code in the sandbox and from the host:
-- the sandbox user with no capabilities, no_new_privs, the seccomp filter and a Landlock domain of its
-- own, in the sandbox's cgroup and pid namespace; the code can neither signal it nor read its memory;
-- it writes only where the code may write; it ends with the sandbox; one killed is made again.
local glsb = require "glsb"
local helper = require "local.helper"
local loop = require "glsb.loop"

-- The sandbox's processes as the code sees them: pid, name, parent, uid, no_new_privs, seccomp mode,
-- effective capabilities, and whether its cgroup is the code's.
local PROCESSES = [[
import os
mine = open("/proc/self/cgroup").read()
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        status = dict(l.split(":\t", 1) for l in open("/proc/%d/status" % pid).read().splitlines() if ":\t" in l)
        same = open("/proc/%d/cgroup" % pid).read() == mine
    except OSError:
        continue
    print(pid, status["Name"].strip(), status["PPid"].strip(), status["Uid"].split()[1], status["NoNewPrivs"].strip(),
          status["Seccomp"].strip(), status["CapEff"].strip(), same)
]]

local function processes(sb)
  local r = sb:execute_code(PROCESSES)
  assert.are.equal("success", r.status, tostring(r))
  local out = {}
  for line in r.stdout:gmatch("[^\n]+") do
    local pid, name, ppid, uid, nnp, seccomp, cap, same = line:match("^(%d+) (%S+) (%d+) (%d+) (%d) (%d) (%x+) (%a+)$")
    out[#out + 1] = { pid = tonumber(pid), name = name, ppid = tonumber(ppid), uid = tonumber(uid), nnp = nnp,
      seccomp = seccomp, cap = cap, same_cgroup = same == "True" }
  end
  return out
end

-- the server: a glsb-confine process whose parent is outside the sandbox (ppid 0), other than init
local function servers(sb)
  local out = {}
  for _, p in ipairs(processes(sb)) do
    if p.name == "glsb-confine" and p.pid ~= 1 and p.ppid == 0 then out[#out + 1] = p end
  end
  return out
end

describe("the local file server #security #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function() helper.remove_root(root) end)
  before_each(function() sb = glsb.create("local", { host_workspace_dir = root }) end)
  after_each(function() if sb then sb:terminate() end end)

  it("is one long-lived process, started by the first sb.files call", function()
    assert.are.same({}, servers(sb))
    local f = sb.files
    f:write("a.txt", "a")
    local first = servers(sb)
    assert.are.equal(1, #first)
    for i = 1, 20 do
      f:write("a.txt", tostring(i))
      assert.is_true(f:exists("a.txt"))
      assert.are.equal(tostring(i), f:read("a.txt"))
      assert.is_true(#f:list(".") >= 1)
    end
    local later = servers(sb)
    assert.are.equal(1, #later)
    assert.are.equal(first[1].pid, later[1].pid)
  end)

  it("is confined as a call's helper, and the code can neither signal it nor read its memory", function()
    sb.files:write("a.txt", "a")
    local s = assert(servers(sb)[1])
    assert.are.equal(1000, s.uid)
    assert.are.equal("1", s.nnp)
    assert.are.equal("2", s.seccomp) -- a filter
    assert.are.equal(0, tonumber(s.cap, 16))
    assert.is_true(s.same_cgroup)
    local r = sb:execute_code(([[
import os, signal
pid = %d
for what, fn in (("kill", lambda: os.kill(pid, signal.SIGKILL)), ("mem", lambda: open("/proc/%%d/mem" %% pid, "rb").read(1)),
                 ("environ", lambda: open("/proc/%%d/environ" %% pid, "rb").read())):
    try:
        fn()
        print(what, "allowed")
    except OSError as e:
        print(what, "refused", e.errno)
]]):format(s.pid))
    assert.are.equal("success", r.status, tostring(r))
    if sb.confinement.landlock_abi >= 6 then
      assert.matches("kill refused", r.stdout)
    end
    assert.matches("mem refused", r.stdout)
    assert.matches("environ refused", r.stdout)
    assert.are.equal(s.pid, servers(sb)[1].pid) -- still there
    assert.are.equal("a", sb.files:read("a.txt"))
  end)

  it("writes only where the code may write", function()
    local f = sb.files
    for _, call in ipairs({
      { f.make_dir, "/usr/glsb-no" }, { f.make_dir, "/etc/glsb-no" }, { f.remove, "/usr/bin/python3" },
      { f.remove, "/" }, { f.write, "/usr/glsb-no.txt", "x" }, { f.write, "/etc/passwd", "x" },
    }) do
      local ok = pcall(call[1], f, call[2], call[3])
      assert.is_false(ok, call[2])
    end
    local r = sb:execute_command("test -e /usr/bin/python3 && ! test -e /usr/glsb-no && ! test -e /etc/glsb-no && echo intact")
    assert.are.equal("intact\n", r.stdout)
    -- and where it may: the three writable folders
    for _, dir in ipairs({ "/home/user", "/files", "/tmp" }) do
      f:write(dir .. "/w/x.txt", dir)
      assert.are.equal(dir, f:read(dir .. "/w/x.txt"))
      f:remove(dir .. "/w")
      assert.is_false(f:exists(dir .. "/w"))
    end
  end)

  it("opens a download's file for the host read-only, and no descriptor stays open in the host", function()
    local function host_fds()
      local p = assert(io.popen("ls /proc/" .. require("glsb.process").getpid() .. "/fd"))
      local n = 0
      for _ in p:lines() do n = n + 1 end
      p:close()
      return n
    end
    local big = string.rep("0123456789abcdef", 3 * 1024 * 1024 // 16 + 7) -- 3 MiB and some: more than read answers
    sb.files:write("/files/seed.bin", "x")
    sb:execute_code("pass", { files = { glsb.SandboxFile.from_bytes(big, "big.bin") } })
    local before = host_fds()
    for _ = 1, 5 do
      assert.is_true(sb:download_file("/files/big.bin") == big)
      assert.is_true(sb.files:read("/files/big.bin") == big)
    end
    -- refused ones too: a link (download crosses none), a missing file, one over max_download_bytes
    sb:execute_command("ln -s /files/big.bin /files/link")
    assert.is_nil(sb:download_file("/files/link"))
    assert.is_nil(sb:download_file("/files/missing.bin"))
    local small = glsb.create("local", { host_workspace_dir = root, max_download_bytes = 1000 })
    small:execute_code("pass", { files = { glsb.SandboxFile.from_bytes(big, "big.bin") } })
    assert.is_nil(small:download_file("/files/big.bin"))
    small:terminate()
    assert.are.equal(before, host_fds())
  end)

  it("ends with the sandbox, and one killed is made again by the next call", function()
    local f = sb.files
    f:write("a.txt", "a")
    local host_uid = math.tointeger(sb.confinement.host_uid)
    -- from the host: the server is one of the sandbox user's processes; kill it there
    local function host_pids()
      local out = {}
      local p = assert(io.popen("ps -o pid= -u " .. host_uid .. " 2>/dev/null"))
      for pid in p:lines() do out[#out + 1] = tonumber(pid) end
      p:close()
      return out
    end
    local killed = 0
    for _, pid in ipairs(host_pids()) do
      local h = io.open("/proc/" .. pid .. "/comm")
      local comm = h and h:read("l")
      if h then h:close() end
      -- the sandbox user's glsb-confine processes: init (sb.host_pid), the server and its writer
      if comm == "glsb-confine" and pid ~= sb.host_pid then
        os.execute("kill -9 " .. pid .. " 2>/dev/null") -- a writer may have gone with the server
        killed = killed + 1
      end
    end
    assert.is_true(killed >= 1)
    loop.sleep(0.2)
    local ok = pcall(f.exists, f, "a.txt") -- at most this one fails, if it met the dying server
    if not ok then loop.sleep(0.1) end
    assert.is_true(f:exists("a.txt"))
    assert.are.equal("a", f:read("a.txt"))
    sb:terminate()
    sb = nil
    assert.are.same({}, host_pids())
  end)
end)
