-- run_spec.lua: `glsb-confine run` (run_workspace_command): exact argv without a
-- shell, a cwd confined beneath the root, exactly the given environment, the
-- timeout killing the process group, capped capture with exact byte counts.
local cjson = require "cjson"
local h = require "workspace.helper"

describe("glsb-confine run #workspace", function()
  local ws

  setup(function() h.require_binary() end)
  before_each(function() ws = h.workspace() end)
  after_each(function() ws.cleanup() end)

  local function ok(r, status)
    assert.are.equal(0, status, cjson.encode(r))
    assert.is_true(r.ok, cjson.encode(r))
    return r
  end

  local function fails(code, r, status)
    assert.are.equal(1, status)
    assert.is_false(r.ok)
    assert.are.equal(code, r.error, cjson.encode(r))
    assert.is_string(r.message)
    return r
  end

  local function stdout(r) return h.b64decode(r.stdout) end
  local function stderr(r) return h.b64decode(r.stderr) end

  describe("argv", function()
    it("reaches the program exactly, with no shell in between", function()
      local args = { "$(id)", ";", "a b", "", "*", "`id`", "'\"", "x\ny", "\255\254" }
      local argv = { "/bin/sh", "-c", 'for a in "$@"; do printf "%s|" "$a"; done', "zero" }
      for _, a in ipairs(args) do argv[#argv + 1] = a end
      local r = ok(h.run(ws, argv))
      assert.are.equal(table.concat(args, "|") .. "|", stdout(r))
      r = ok(h.run(ws, { "echo", "$(id)", ";", "ls" }))
      assert.are.equal("$(id) ; ls\n", stdout(r))
    end)

    it("passes argv[0] as given", function()
      local r = ok(h.run(ws, { "sh", "-c", 'printf "%s" "$0"', "weird $0 ;" }))
      assert.are.equal("weird $0 ;", stdout(r))
    end)
  end)

  describe("environment", function()
    it("is empty unless given, and the program is still found via the default path", function()
      local r = ok(h.run(ws, { "env" }))
      assert.are.equal("", stdout(r))
      assert.are.equal(0, r.exit_code)
    end)

    it("is exactly the --env values (PATH absent unless given)", function()
      local r = ok(h.run(ws, { "/usr/bin/env" }, { env = { "A=1", "B=x=y", "EMPTY=" } }))
      assert.are.equal("A=1\nB=x=y\nEMPTY=\n", stdout(r))
      assert.falsy(stdout(r):find("PATH", 1, true))
    end)

    it("searches argv[0] in PATH when PATH is given", function()
      local r = ok(h.run(ws, { "env" }, { env = { "PATH=/usr/bin" } }))
      assert.are.equal("PATH=/usr/bin\n", stdout(r))
      fails("not_found", h.run(ws, { "env" }, { env = { "PATH=/nonexistent" } }))
    end)

    it("rejects a malformed or repeated --env", function()
      fails("usage", h.run(ws, { "true" }, { env = { "NOEQUALS" } }))
      fails("usage", h.run(ws, { "true" }, { env = { "=v" } }))
      fails("usage", h.run(ws, { "true" }, { env = { "A=1", "A=2" } }))
    end)
  end)

  describe("program lookup", function()
    it("reports a missing program as not_found naming argv[0]", function()
      local r = fails("not_found", h.run(ws, { "glsb-no-such-program" }))
      assert.matches("glsb%-no%-such%-program", r.message)
      fails("not_found", h.run(ws, { "/nonexistent/prog" }))
      fails("not_found", h.run(ws, { "./missing" }))
    end)

    it("runs a path with '/' relative to the cwd", function()
      assert(os.execute("mkdir " .. h.q(ws.root .. "/tools")))
      h.write_file(ws.root .. "/tools/hello", "#!/bin/sh\necho hello from tools\n")
      os.execute("chmod +x " .. h.q(ws.root .. "/tools/hello"))
      local r = ok(h.run(ws, { "./hello" }, { cwd = { "tools" } }))
      assert.are.equal("hello from tools\n", stdout(r))
      r = ok(h.run(ws, { "tools/hello" }))
      assert.are.equal("hello from tools\n", stdout(r))
    end)

    it("reports a file that cannot be executed as exec_failed", function()
      h.write_file(ws.root .. "/notexec", "echo no\n")
      fails("exec_failed", h.run(ws, { "./notexec" }))
    end)
  end)

  describe("cwd", function()
    it("is the root plus each component", function()
      assert(os.execute("mkdir -p " .. h.q(ws.root .. "/a/b")))
      local r = ok(h.run(ws, { "/bin/pwd" }, { cwd = { "a", "b" } }))
      local real = h.sh("cd " .. h.q(ws.root .. "/a/b") .. " && /bin/pwd -P")
      assert.are.equal(real, stdout(r))
      r = ok(h.run(ws, { "/bin/pwd" }))
      assert.are.equal(h.sh("cd " .. h.q(ws.root) .. " && /bin/pwd -P"), stdout(r))
    end)

    it("is an error when missing, linked, escaping or not a directory", function()
      assert(os.execute("mkdir " .. h.q(ws.root .. "/a")))
      assert(os.execute("ln -s ../outside " .. h.q(ws.root .. "/out")))
      assert(os.execute("ln -s a " .. h.q(ws.root .. "/alias")))
      h.write_file(ws.root .. "/file", "")
      fails("cwd_not_found", h.run(ws, { "true" }, { cwd = { "missing" } }))
      fails("cwd_not_found", h.run(ws, { "true" }, { cwd = { "a", "missing" } }))
      fails("symlink", h.run(ws, { "true" }, { cwd = { "out" } }))
      fails("symlink", h.run(ws, { "true" }, { cwd = { "alias" } }))
      fails("not_directory", h.run(ws, { "true" }, { cwd = { "file" } }))
      fails("dotdot_component", h.run(ws, { "true" }, { cwd = { ".." } }))
      fails("dot_component", h.run(ws, { "true" }, { cwd = { "." } }))
      fails("slash_in_name", h.run(ws, { "true" }, { cwd = { "a/b" } }))
      fails("slash_in_name", h.run(ws, { "true" }, { cwd = { "/" } }))
      fails("empty_component", h.run(ws, { "true" }, { cwd = { "" } }))
      fails("root_invalid", h.run(ws, { "true" }, { root = ws.base .. "/missing" }))
    end)

    it("does not run the program when the cwd is rejected", function()
      assert(os.execute("ln -s ../outside " .. h.q(ws.root .. "/out")))
      fails("symlink", h.run(ws, { "touch", ws.outside .. "/ran" },
        { cwd = { "out" }, env = { "PATH=/usr/bin:/bin" } }))
      assert.is_false(h.exists(ws.outside .. "/ran"))
    end)
  end)

  describe("result", function()
    it("for a program that exits 0 with no output", function()
      local r = ok(h.run(ws, { "true" }))
      assert.are.equal(0, r.exit_code)
      assert.are.equal(cjson.null, r.signal)
      assert.is_false(r.timed_out)
      for _, s in ipairs({ "stdout", "stderr" }) do
        assert.are.equal("", r[s])
        assert.are.equal(0, r[s .. "_byte_count"])
        assert.is_true(r[s .. "_byte_count_complete"])
        assert.is_false(r[s .. "_truncated"])
      end
    end)

    it("carries the exit code, or the signal", function()
      local r = ok(h.run(ws, { "sh", "-c", "echo out; echo err >&2; exit 7" }))
      assert.are.equal(7, r.exit_code)
      assert.are.equal("out\n", stdout(r))
      assert.are.equal("err\n", stderr(r))
      r = ok(h.run(ws, { "sh", "-c", "kill -KILL $$" }))
      assert.are.equal(cjson.null, r.exit_code)
      assert.are.equal(9, r.signal)
    end)

    it("keeps non-UTF-8 bytes exactly", function()
      local bytes = "\255\254\0\192\128\237\160\128 ok \xE2\x82"
      h.write_file(ws.root .. "/bytes", bytes)
      local r = ok(h.run(ws, { "sh", "-c", "cat bytes; cat bytes >&2" }))
      assert.are.equal(bytes, stdout(r))
      assert.are.equal(bytes, stderr(r))
      assert.are.equal(#bytes, r.stdout_byte_count)
    end)

    it("gives the program an empty stdin", function()
      local r = ok(h.run(ws, { "cat" }, { timeout = 5 }))
      assert.are.equal("", stdout(r))
      assert.is_false(r.timed_out)
    end)

    it("does not leak the caller's descriptors into the program", function()
      local r = ok(h.run(ws, { "ls", "/proc/self/fd" }, { suffix = " 7</dev/null 9</dev/null" }))
      assert.are.equal("0\n1\n2\n3\n", stdout(r))
    end)
  end)

  describe("capture", function()
    local cap = 1000
    local pattern = {}
    for i = 0, 10 * cap + 9 do pattern[#pattern + 1] = string.char((i * 7 + 3) % 256) end
    pattern = table.concat(pattern)

    for _, n in ipairs({ cap - 1, cap, cap + 1, 10 * cap }) do
      it("counts and truncates " .. n .. " bytes against a cap of " .. cap, function()
        h.write_file(ws.root .. "/data", pattern:sub(1, n))
        local r = ok(h.run(ws, { "sh", "-c", "cat data; cat data data >&2" }, { max_output = cap }))
        assert.are.equal(n, r.stdout_byte_count)
        assert.are.equal(2 * n, r.stderr_byte_count)
        assert.are.equal(pattern:sub(1, math.min(n, cap)), stdout(r))
        assert.are.equal((pattern:sub(1, n) .. pattern:sub(1, n)):sub(1, cap), stderr(r))
        assert.are.equal(n > cap, r.stdout_truncated)
        assert.is_true(r.stderr_truncated == (2 * n > cap))
        assert.is_true(r.stdout_byte_count_complete)
        assert.is_true(r.stderr_byte_count_complete)
      end)
    end

    it("counts past the default 1 MiB cap", function()
      local r = ok(h.run(ws, { "head", "-c", "3145728", "/dev/zero" }))
      assert.are.equal(3145728, r.stdout_byte_count)
      assert.are.equal(1048576, #stdout(r))
      assert.is_true(r.stdout_truncated)
      assert.is_true(r.stdout_byte_count_complete)
    end)

    it("keeps nothing with a cap of 0 but still counts", function()
      local r = ok(h.run(ws, { "echo", "hello" }, { max_output = 0 }))
      assert.are.equal("", r.stdout)
      assert.are.equal(6, r.stdout_byte_count)
      assert.is_true(r.stdout_truncated)
    end)
  end)

  describe("timeout", function()
    it("kills the whole process group on expiry", function()
      local t0 = h.now()
      local r = ok(h.run(ws, { "sh", "-c", "sleep 30 & echo started; sleep 30" }, { timeout = 0.5 }))
      local elapsed = h.now() - t0
      assert.is_true(r.timed_out)
      assert.are.equal(9, r.signal)
      assert.are.equal("started\n", stdout(r))
      -- the background sleep was in the group: the pipe closed, counts complete
      assert.is_true(r.stdout_byte_count_complete)
      assert.is_true(elapsed < 2.5, "took " .. elapsed .. " s")
    end)

    it("marks counts incomplete when an escaped grandchild holds stdout open", function()
      local script = 'setsid sh -c \'echo $$ > gc.pid; exec sleep 30\' & ' ..
        'while [ ! -s gc.pid ]; do sleep 0.01; done; echo started; sleep 30'
      local t0 = h.now()
      local r = ok(h.run(ws, { "sh", "-c", script }, { timeout = 0.5 }))
      local elapsed = h.now() - t0
      assert.is_true(r.timed_out)
      assert.are.equal("started\n", stdout(r))
      assert.are.equal(8, r.stdout_byte_count)
      assert.is_false(r.stdout_byte_count_complete)
      assert.is_false(r.stderr_byte_count_complete)
      -- bounded: timeout + the 2 s drain deadline, not the grandchild's 30 s
      assert.is_true(elapsed >= 2.4 and elapsed < 5, "took " .. elapsed .. " s")
      -- and the escaped grandchild did not outlive the helper
      local pid = h.read(ws.root .. "/gc.pid"):gsub("%s", "")
      assert.is_truthy(pid:match("^%d+$"))
      assert.is_falsy(os.execute("kill -0 " .. pid .. " 2>/dev/null"))
    end)

    it("is disabled by 0 or a negative value", function()
      for _, t in ipairs({ 0, -1 }) do
        local r = ok(h.run(ws, { "sleep", "0.3" }, { timeout = t }))
        assert.is_false(r.timed_out)
        assert.are.equal(0, r.exit_code)
      end
    end)

    it("takes fractional seconds and rejects non-numbers", function()
      local r = ok(h.run(ws, { "sleep", "5" }, { timeout = 0.2 }))
      assert.is_true(r.timed_out)
      fails("usage", h.run(ws, { "true" }, { timeout = "soon" }))
      fails("usage", h.run(ws, { "true" }, { timeout = "nan" }))
    end)
  end)

  it("kills descendants left running when the program exits", function()
    local script = "setsid sh -c 'echo $$ > bg.pid; exec sleep 30' >/dev/null 2>&1 & " ..
      "while [ ! -s bg.pid ]; do sleep 0.01; done; echo done"
    local t0 = h.now()
    local r = ok(h.run(ws, { "sh", "-c", script }, { timeout = 10 }))
    assert.is_false(r.timed_out)
    assert.are.equal(0, r.exit_code)
    assert.are.equal("done\n", stdout(r))
    assert.is_true(h.now() - t0 < 5)
    local pid = h.read(ws.root .. "/bg.pid"):gsub("%s", "")
    assert.is_truthy(pid:match("^%d+$"))
    assert.is_falsy(os.execute("kill -0 " .. pid .. " 2>/dev/null"))
  end)

  it("kills the program when the helper is terminated", function()
    local pidfile, outfile = ws.root .. "/prog.pid", ws.base .. "/helper.out"
    local cmd = h.join({ h.bin, "run", "--root", ws.root, "--", "sh", "-c", "echo $$ > prog.pid; exec sleep 30" })
    local shell = cmd .. " > " .. h.q(outfile) .. " & hp=$!; " ..
      "i=0; while [ ! -s " .. h.q(pidfile) .. " ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done; " ..
      "kill -TERM $hp; wait $hp; echo $?"
    local status = h.sh(shell)
    assert.are.equal("1\n", status)
    local r = h.decode(h.read(outfile))
    assert.are.equal("interrupted", r.error)
    local pid = h.read(pidfile):gsub("%s", "")
    assert.is_falsy(os.execute("kill -0 " .. pid .. " 2>/dev/null"))
  end)

  it("rejects usage errors", function()
    local out, status = h.sh(h.join({ h.bin, "run", "--root", ws.root, "true" }))
    fails("usage", h.decode(out), status)
    out, status = h.sh(h.join({ h.bin, "run", "--root", ws.root, "--" }))
    fails("usage", h.decode(out), status)
    out, status = h.sh(h.join({ h.bin, "run", "--", "true" }))
    fails("usage", h.decode(out), status)
    fails("usage", h.run(ws, { "true" }, { max_output = "-5" }))
  end)

  it("documents the CLI in --help", function()
    local out, status = h.sh(h.join({ h.bin, "run", "--help" }))
    assert.are.equal(0, status)
    for _, word in ipairs({ "--root", "--cwd", "--env", "--timeout", "--max-output", "--", "/bin:/usr/bin",
      "byte_count_complete", "not_found" }) do
      assert.truthy(out:find(word, 1, true), "help lacks " .. word)
    end
  end)
end)
