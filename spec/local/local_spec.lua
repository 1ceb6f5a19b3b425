-- glsb.providers.local specifics: languages, packages, confinement report,
-- hard kills, output caps, helper discovery, the default provider, leftovers.
local glsb = require "glsb"
local errors = require "glsb.errors"
local loop = require "glsb.loop"
local helper = require "local.helper"
local provider = require "glsb.providers.local"

local Status = glsb.ExecutionStatus

describe("local provider #local", function()
  local root, sb

  local function create(extra)
    local opts = { host_workspace_dir = root }
    for k, v in pairs(extra or {}) do opts[k] = v end
    sb = glsb.create("local", opts)
    return sb
  end

  local prev_log
  setup(function()
    root = helper.private_tmp()
    prev_log = glsb.log.set_handler(function() end) -- the expected download warnings
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
    helper.rm_rf(root)
  end)
  after_each(function()
    if sb then pcall(sb.terminate, sb) end
    sb = nil
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)), "a workspace was left behind")
  end)

  it("is the default provider: glsb.create() with no name", function()
    local prev = os.getenv("TMPDIR")
    assert.is_nil(prev == root and "" or nil)
    sb = glsb.create(nil, { host_workspace_dir = root })
    assert.are.equal("local", sb.provider)
    assert.truthy(sb.sandbox_id:match("^local%-"))
  end)

  it("reports the confinement applied and runs as the sandbox user with no network", function()
    create()
    local c = sb.confinement
    assert.is_table(c)
    assert.is_true(c.userns and c.pidns and c.mountns and c.netns)
    assert.is_true(c.seccomp)
    assert.is_true(c.no_new_privs)
    assert.is_true(c.landlock_abi >= 1)
    assert.are.equal("loopback", c.network)
    assert.is_number(sb.host_pid)
    assert.is_true(helper.pid_alive(sb.host_pid))
    local r = sb:execute_command("id -u; hostname; sed -n '3,$s/:.*//p' /proc/net/dev | tr -d ' '")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.truthy(r.stdout:match("^1000\n"), r.stdout)
    assert.truthy(r.stdout:find("\nlo\n", 1, true), r.stdout)
    assert.is_nil(r.stdout:find("eth", 1, true))
    local pid = sb.host_pid
    sb:terminate()
    assert.is_false(helper.pid_alive(pid))
  end)

  it("never reaches the host's loopback, not even with network = true (a network of its own)", function()
    local server = assert(require("glsb.process").spawn {
      argv = { "/usr/bin/python3", "-c", "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(5)\n"
        .. "print(s.getsockname()[1], flush=True)\nc, _ = s.accept(); c.sendall(b'hello host'); c.close()" },
      stdin = "null" })
    local port = server:read_line("stdout", loop.now() + 5)
    local code = "import socket\ns = socket.create_connection(('127.0.0.1', " .. port .. "), timeout=3)\n"
      .. "print(s.recv(100).decode())"
    create()
    local closed = sb:execute_code(code)
    sb:terminate()
    create({ network = true })
    assert.are.equal("slirp4netns", sb.confinement.network)
    local open = sb:execute_code(code)
    local via_gateway = sb:execute_code((code:gsub("127%.0%.0%.1", "10.0.2.2")))
    server:kill("KILL")
    server:wait(loop.now() + 5)
    server:close()
    for _, r in ipairs({ closed, open, via_gateway }) do
      assert.are.equal(Status.ERROR, r.status)
      assert.truthy(r.error:find("ConnectionRefused", 1, true), r.error)
    end
  end)

  it("gives the value of a final expression in r.text, like a notebook (and E2B), not on stdout", function()
    create()
    local r = sb:execute_code("2 + 3")
    assert.are.same({ "5", "" }, { r.text, r.stdout })
    r = sb:execute_code("None")
    assert.are.same({ nil, "" }, { r.text, r.stdout })
    r = sb:execute_code("x = 's'\nx")
    assert.are.same({ "s", "" }, { r.text, r.stdout })
    assert.are.equal("[1, 'a']", sb:execute_code("[1, 'a']").text)
  end)

  it("reports syntax errors and SystemExit without losing the interpreter", function()
    create()
    sb:execute_code("keep = 1")
    local r = sb:execute_code("def f(:\n  pass")
    assert.are.equal(Status.ERROR, r.status)
    assert.truthy(r.error:find("SyntaxError", 1, true), r.error)
    r = sb:execute_code("import sys\nsys.exit(3)")
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal("SystemExit", r.error_name)
    assert.are.equal("1\n", sb:execute_code("print(keep)").stdout)
  end)

  it("captures output of child processes of the code, in order", function()
    create()
    local lines = {}
    local r = sb:execute_code("import os, subprocess\nprint('a', flush=True)\nos.system('echo b')\n"
      .. "subprocess.run(['sh', '-c', 'echo c; echo d >&2'])\nprint('e')",
      { on_stdout = function(l) lines[#lines + 1] = l end })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("a\nb\nc\ne\n", r.stdout)
    assert.are.equal("d\n", r.stderr)
    assert.are.same({ "a", "b", "c", "e" }, lines)
  end)

  it("keeps the order of print, writes to fd 1 and a forked child's print", function()
    -- print goes to the capture from the printing thread; fd 1 is a pipe the agent drains first
    create()
    local r = sb:execute_code("import os, sys\nprint('a')\nos.write(1, b'b\\n')\nprint('c', end='')\n"
      .. "print('')\npid = os.fork()\nif pid == 0:\n    print('child')\n    sys.stdout.flush()\n    os._exit(0)\n"
      .. "os.waitpid(pid, 0)\nprint('d')\nsys.stderr.write('e1\\n')\nos.write(2, b'e2\\n')\nos.write(1, b'tail')")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("a\nb\nc\nchild\nd\ntail", r.stdout)
    assert.are.equal("e1\ne2\n", r.stderr)
    assert.are.equal("next\n", sb:execute_code("print('next')").stdout)
  end)

  it("answers code that is not valid UTF-8 with an error, not a hang", function()
    create()
    local r = sb:execute_code("print('\255\254')", { timeout = 5 })
    assert.are.equal(Status.ERROR, r.status, tostring(r))
    assert.are.equal("\xc3\xa9\n", sb:execute_code("print('\xc3\xa9')").stdout)
  end)

  it("survives a cell that forks without exiting the child", function()
    create()
    local r = sb:execute_code("import os, time\npid = os.fork()\nif pid == 0:\n    time.sleep(0.2)\nprint('forked')")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    loop.sleep(0.4)
    local r2 = sb:execute_code("print('next')")
    assert.are.equal("next\n", r2.stdout)
    assert.are.equal("again\n", sb:execute_code("print('again')").stdout)
  end)

  it("gives callbacks whole lines: many fast ones, a very long one, a last one without newline", function()
    create()
    local lines = {}
    local r = sb:execute_code("import sys\nfor i in range(5000): print(i)\nprint('L' * 200000)\n_ = sys.stdout.write('tail')",
      { on_stdout = function(l) lines[#lines + 1] = l end })
    assert.are.equal(Status.SUCCESS, r.status)
    assert.are.equal(5002, #lines)
    assert.are.equal("0", lines[1])
    assert.are.equal("4999", lines[5000])
    assert.are.equal(string.rep("L", 200000), lines[5001])
    assert.are.equal("tail", lines[5002])
    assert.are.equal(r.stdout, table.concat(lines, "\n", 1, 5001) .. "\ntail")
  end)

  it("passes env to code and commands without leaking it into later calls", function()
    create({ env = { GLSB_SANDBOX_WIDE = "everywhere" } })
    local r = sb:execute_code("import os\nprint(os.environ['GLSB_X'], os.environ['GLSB_SANDBOX_WIDE'])",
      { env = { GLSB_X = "1" } })
    assert.are.equal("1 everywhere\n", r.stdout)
    assert.are.equal("None\n", sb:execute_code("import os\nprint(os.environ.get('GLSB_X'))").stdout)
    assert.are.equal("everywhere\n", sb:execute_command("echo $GLSB_SANDBOX_WIDE").stdout)
  end)

  it("runs bash sandboxes", function()
    create({ language = "bash" })
    local r = sb:execute_code("echo hi from $0; exit 4")
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal(4, r.code)
    assert.truthy(r.stdout:find("hi from", 1, true))
    r = sb:execute_code("sleep 20", { timeout = 0.4 })
    assert.are.equal(Status.TIMEOUT, r.status)
    assert.are.equal(Status.SUCCESS, sb:execute_code("true").status)
  end)

  it("runs javascript sandboxes with node, or fails create clearly without it", function()
    if provider.find_in_sandbox_path("node") then
      create({ language = "javascript" })
      local r = sb:execute_code("console.log([1,2,3].map(x => x * 2).join(','))")
      assert.are.equal(Status.SUCCESS, r.status, tostring(r))
      assert.are.equal("2,4,6\n", r.stdout)
      r = sb:execute_code("throw new Error('js boom')")
      assert.are.equal(Status.ERROR, r.status)
      assert.truthy(r.stderr:find("js boom", 1, true))
    else
      local ok, err = pcall(glsb.create, "local", { host_workspace_dir = root, language = "javascript" })
      assert.is_false(ok)
      assert.truthy(tostring(err):find("node", 1, true))
    end
  end)

  it("rejects an unsupported language at create", function()
    local ok, err = pcall(glsb.create, "local", { host_workspace_dir = root, language = "r" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
  end)

  it("installs additional_packages from a local wheel directory into the kernel", function()
    local wheels = helper.private_tmp()
    os.execute("chmod 755 " .. helper.q(wheels)) -- the sandbox user must be able to read it
    helper.make_wheel(wheels, "glsbtiny", "0.1", "VALUE = 42\n")
    local ok, err = pcall(create, { additional_packages = { "glsbtiny" }, pip_find_links = wheels })
    helper.rm_rf(wheels)
    assert.is_true(ok, tostring(err))
    local r = sb:execute_code("import glsbtiny\nprint(glsbtiny.VALUE, glsbtiny.__file__)")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.truthy(r.stdout:find("^42 /home/user/%.local/"), r.stdout)
  end)

  it("kills a sandbox whose code ignores the interrupt, within timeout + DEADLINE_MARGIN; later calls fail clearly",
    function()
    create() -- the default interrupt_grace: glsb.constants.DEADLINE_GRACE (it was 2 s past the timeout)
    local started = loop.now()
    local r = sb:execute_code("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
      .. "while True:\n    time.sleep(0.05)", { timeout = 0.3 })
    local took = loop.now() - started
    assert.are.equal(Status.TIMEOUT, r.status)
    assert.is_true(took <= 0.3 + require("glsb.constants").DEADLINE_MARGIN, "took " .. took)
    assert.truthy(r.error:find("killed", 1, true), r.error)
    -- the sandbox is gone: the handle says so, and every later call raises (never hangs)
    assert.is_false(sb:is_running())
    local ok, err = pcall(sb.execute_code, sb, "print(1)")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
    assert.is_false(pcall(sb.download_file, sb, "/files/x"))
    sb:terminate()
  end)

  it("reports an interpreter killed mid-call as ERROR naming the signal, then refuses further calls", function()
    create()
    local r = sb:execute_code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert.are.equal(Status.ERROR, r.status, tostring(r))
    assert.truthy(r.error:find("the interpreter was killed by SIGKILL; the sandbox is gone", 1, true), r.error)
    assert.is_false(sb:is_running())
    local ok, err = pcall(sb.execute_command, sb, "true")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
  end)

  it("two terminates at once (the base ending a handle while the lease's terminate runs): one stops it, "
    .. "the other waits for it; both succeed", function()
    create()
    local pid = sb._proc.pid
    local errs = {}
    local function stop(i)
      return loop.spawn(function()
        local ok, err = pcall(sb._terminate, sb, { timeout = 10 })
        errs[i] = not ok and tostring(err) or nil
        return ok
      end)
    end
    local a, b = glsb.run(function() return loop.gather(stop(1), stop(2)) end)
    assert.is_true(a, errs[1])
    assert.is_true(b, errs[2])
    assert.is_false(helper.pid_alive(pid))
    assert.is_nil(sb._proc)
    sb:terminate()
  end)

  it("a lease expiring during a call ends the call (TIMEOUT) and the sandbox", function()
    create({ timeout = 0.5 })
    local started = loop.now()
    local r = sb:execute_code("import time\ntime.sleep(20)")
    assert.is_true(loop.now() - started < 5)
    assert.are.equal(Status.TIMEOUT, r.status, tostring(r))
    assert.truthy(r.error:find("lease expired", 1, true), r.error)
    assert.is_false(sb:is_running())
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
  end)

  it("caps output at 10 MiB per stream and says so", function()
    create()
    local r = sb:execute_code("import sys\nsys.stdout.write('x' * (11 * 1024 * 1024))\nprint('tail')")
    assert.are.equal(Status.SUCCESS, r.status)
    assert.is_true(r.stdout_truncated)
    assert.is_true(#r.stdout < 10 * 1024 * 1024 + 200)
    assert.truthy(r.stdout:find("[glsb: output truncated", 1, true))
    assert.is_false(r.stderr_truncated) -- always a boolean (glsb.models: one shape on every provider)
    assert.are.equal("ok\n", sb:execute_code("print('ok')").stdout)
  end)

  it("serializes concurrent calls on one sandbox", function()
    create()
    glsb.run(function()
      local t = {}
      for i = 1, 4 do
        t[i] = glsb.spawn(function() return sb:execute_code("import time\ntime.sleep(0.05)\nprint(" .. i .. ")") end)
      end
      local res = { glsb.gather(t) }
      for i = 1, 4 do assert.are.equal(i .. "\n", res[i].stdout) end
    end)
  end)

  it("handles large files both ways", function()
    create()
    local big = string.rep("0123456789abcdef", 256 * 1024) -- 4 MiB
    local r = sb:execute_code("import hashlib\nprint(hashlib.sha256(open('/files/big.bin','rb').read()).hexdigest())",
      { files = { glsb.SandboxFile.from_bytes(big, "big.bin") } })
    assert.are.equal(require("glsb.core").sha256(big) .. "\n", r.stdout)
    assert.are.equal(big, sb:download_file("/files/big.bin"))
  end)

  it("downloads only from the writable area", function()
    create()
    sb:execute_code("open('/tmp/t.txt','w').write('tmp ok')\nimport os\nos.symlink('/etc/passwd', '/files/link')")
    assert.are.equal("tmp ok", sb:download_file("/tmp/t.txt"))
    assert.is_nil(sb:download_file("/etc/passwd"))
    assert.is_nil(sb:download_file("/files/link"))
    assert.is_nil(sb:download_file("/files/../etc/passwd"))
    assert.is_nil(sb:download_file("/proc/self/environ"))
  end)

  it("a FIFO planted where a file is expected does not hang the agent", function()
    create()
    assert.are.equal(0, sb:execute_command("mkfifo /home/user/pipe").code)
    assert.is_nil(sb:download_file("/home/user/pipe", { timeout = 20 }))
    -- an agent stuck in open() would not answer this
    assert.are.equal("still here\n", sb:execute_code("print('still here')", { timeout = 20 }).stdout)
  end)

  it("fails create clearly when the helper is missing", function()
    local ok, err = pcall(glsb.create, "local", { host_workspace_dir = root, confine = "/nonexistent/glsb-confine" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal(glsb.Stage.CREATE, err.stage)
  end)

  it("fails create with the helper's reason when the sandbox cannot be set up", function()
    local ok, err = pcall(glsb.create, "local", { host_workspace_dir = root, ro_binds = { { "/nonexistent-src", "/x" } } })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.truthy(tostring(err):find("nonexistent", 1, true), tostring(err))
  end)

  it("fails closed, naming what the kernel lacks, when the helper refuses to start", function()
    local scratch = helper.private_tmp()
    finally(function() helper.rm_rf(scratch) end)
    local fake = scratch .. "/glsb-confine"
    helper.write(fake, "#!/bin/sh\n"
      .. "echo '{\"ok\":false,\"error\":\"landlock: not supported by this kernel\",\"missing\":[\"landlock\"]}' >&3\n"
      .. "exit 125\n")
    os.execute("chmod 755 " .. helper.q(fake))
    local ok, err = pcall(glsb.create, "local", { host_workspace_dir = root, confine = fake })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal(glsb.Stage.CREATE, err.stage)
    assert.truthy(err.message:find("landlock: not supported", 1, true), err.message)
    assert.truthy(err.message:find("missing: landlock", 1, true), err.message)
    assert.truthy(err.message:find("allow_degraded", 1, true), err.message)
    assert.is_false(err.transient)
  end)

  it("takes workspace_root as the deprecated name of host_workspace_dir, warning once per process", function()
    local script = [[
local glsb = require "glsb"
for _ = 1, 2 do
  local sb = glsb.create("local", { workspace_root = arg[1] })
  io.stdout:write(sb.workspace:sub(1, #arg[1] + 1) == arg[1] .. "/" and "in-root\n" or "elsewhere\n")
  sb:terminate()
end
]]
    local scratch = helper.private_tmp()
    finally(function() helper.rm_rf(scratch) end)
    helper.write(scratch .. "/alias.lua", script)
    local out = helper.sh("cd " .. helper.q(helper.root) .. " && build/glsb-lua " .. helper.q(scratch .. "/alias.lua")
      .. " " .. helper.q(root) .. " 2>&1")
    assert.are.equal(2, select(2, out:gsub("in%-root\n", "")), out)
    assert.are.equal(1, select(2, out:gsub("workspace_root is deprecated: use host_workspace_dir", "")), out)
    local ok, err = pcall(glsb.create, "local", { host_workspace_dir = 42 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'host_workspace_dir' must be a string", 1, true), tostring(err))
    -- misuse is a plain argument error at the caller's line, before anything starts (was SandboxStartError)
    for _, bad in ipairs({ { host_workspace_dir = "" }, { cpus = 0 }, { cpus = 5000 }, { memory_mb = 1.5 },
      { start_timeout = "10" } }) do
      ok, err = pcall(glsb.create, "local", bad)
      assert.is_false(ok)
      assert.is_string(err, "not a glsb error object: " .. tostring(err))
      assert.truthy(err:find("^spec/local/local_spec.lua:%d+: create: option '"), err)
    end
    err = select(2, pcall(glsb.create, "local", { host_workspace_dir = "" }))
    assert.truthy(err:find("create: option 'host_workspace_dir' must be a non-empty string", 1, true), err)
    err = select(2, pcall(glsb.create, "local", { cpus = 0 }))
    assert.truthy(err:find("create: option 'cpus' must be from 0.01 to 4096, got number 0", 1, true), err)
  end)

  it("finds the helper next to the core", function()
    local path = provider.find_helper()
    assert.truthy(path and path:match("/glsb%-confine$"), path)
  end)

  it("leaves nothing behind when the owner ends without terminate (end of script, os.exit, SIGKILL)", function()
    local scratch = helper.private_tmp()
    local script = scratch .. "/owner.lua"
    helper.write(script, [[
local glsb = require "glsb"
local sb = glsb.create("local", { host_workspace_dir = arg[2] })
print(sb._proc.pid, sb.host_pid, table.concat(sb.confinement.cgroup_dirs or {}, " "))
io.stdout:flush()
if arg[1] == "kill" then os.execute("kill -9 " .. require("glsb.core").getpid()) end
if arg[1] == "exit" then os.exit(0) end
]])
    finally(function() helper.rm_rf(scratch) end)
    for _, mode in ipairs({ "end", "exit", "kill" }) do
      local out = helper.sh("cd " .. helper.q(helper.root) .. " && build/glsb-lua " .. helper.q(script) .. " "
        .. mode .. " " .. helper.q(root) .. " 2>&1")
      local words = {}
      for w in out:gmatch("%S+") do words[#words + 1] = w end
      assert.truthy(tonumber(words[1]) and tonumber(words[2]), out)
      local gone = false
      for _ = 1, 40 do
        gone = not helper.pid_alive(words[1]) and not helper.pid_alive(words[2])
        for i = 3, #words do gone = gone and not helper.exists(words[i]) end
        gone = gone and #helper.list_dir(helper.workspace_root(root)) == 0
        if gone then break end
        loop.sleep(0.05)
      end
      assert.is_true(gone, mode .. ": something was left: " .. out .. " / "
        .. table.concat(helper.list_dir(helper.workspace_root(root)), " "))
    end
  end)

  it("runs the workspace primitives through the bound helper", function()
    create()
    local w = glsb.write_workspace_file(sb, { relative_path = "reports/result.json", data = '{"ok": true}' })
    assert.is_table(w)
    assert.are.equal('{"ok": true}', sb:download_file("/home/user/reports/result.json"))
    local r = glsb.run_workspace_command(sb, { "/usr/bin/python3", "-c", "import sys; print('hi'); sys.exit(3)" },
      { timeout = 10 })
    assert.are.equal(3, r.exit_code)
    assert.are.equal("hi\n", r.stdout)
    local ok, err = pcall(glsb.write_workspace_file, sb, { relative_path = "../escape.txt", data = "x" })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.WorkspaceError), tostring(err))
    local e = sb:_exec_argv({ "/bin/sh", "-c", "cat; echo err >&2; exit 5" }, { stdin = "in\0put", timeout = 5 })
    assert.are.same({ exit_code = 5, timed_out = false, stdout = "in\0put", stderr = "err\n" }, e)
  end)
end)
