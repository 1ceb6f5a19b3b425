-- The `glsb` command (issue 27; docs/cli.md), driven as a person drives it: the real binary (build/glsb,
-- a link to glsb-lua), its stdout, stderr and exit status, on a pseudo-terminal where progress matters
-- (spec/cli/pty_session.py), against the local provider and the E2B, OpenSandbox and Bedrock emulators.
local process = require "glsb.process"
local fs = require "glsb.fs"
local cjson = require "cjson.safe"
local shell = require "support.shell"

local GLSB = shell.repo .. "/build/glsb"
local PTY = shell.repo .. "/spec/cli/pty_session.py"
local _ -- what a call returns that a case does not read

-- glsb(words[, opts]) -> exit status, stdout, stderr. opts.env: variables added to ours; opts.input: stdin.
local function glsb(words, opts)
  opts = opts or {}
  local argv = { "env" }
  local keys = {}
  for k in pairs(opts.env or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do argv[#argv + 1] = k .. "=" .. opts.env[k] end
  argv[#argv + 1] = opts.program or GLSB
  for _, w in ipairs(words) do argv[#argv + 1] = w end
  local out, err, st = process.run(argv, { input = opts.input, timeout = opts.timeout or 120, cwd = opts.cwd })
  assert(out, "glsb did not finish: " .. tostring(err))
  return st.code or (128 + (st.signal or 0)), out, err
end

-- On a pseudo-terminal: everything it wrote (stdout and stderr are the terminal). steps: what a person
-- types meanwhile (pty_session.py's steps: "until:TEXT", "y\\r", ...).
local function on_tty(words, env, steps)
  local cmd = {}
  for k, v in pairs(env or {}) do cmd[#cmd + 1] = k .. "=" .. shell.q(v) end
  cmd[#cmd + 1] = "/usr/bin/python3 " .. shell.q(PTY) .. " " .. shell.q(GLSB) .. " " .. shell.join(words) .. " -- "
    .. shell.join(steps or {})
  return (shell.sh(table.concat(cmd, " ") .. " 2>&1"))
end

local write = shell.write

local function one_line(err)
  return #err > 0 and select(2, err:gsub("\n", "")) == 1
end

describe("glsb #cli", function()
  local tmp
  setup(function() tmp = assert(fs.mkdtemp("/tmp/glsb-cli-spec-XXXXXX")) end)
  teardown(function() if tmp then fs.rmtree(tmp) end end)

  describe("help, flags and errors", function()
    it("glsb --help lists every command, and each command's --help runs with examples", function()
      local code, out = glsb({ "--help" })
      assert.are.equal(0, code)
      assert.matches("usage: glsb COMMAND", out)
      local cmds = require "glsb.cli.commands"
      for _, c in ipairs(cmds.LIST) do
        local subs = c.group and c.subcommands or { false }
        for _, s in ipairs(subs) do
          local words = { c.name }
          if s then words[2] = s.name end
          words[#words + 1] = "--help"
          local hc, hout, herr = glsb(words)
          assert.are.equal(0, hc, table.concat(words, " ") .. ": " .. herr)
          assert.matches("^usage: glsb " .. c.name, hout)
          if not c.group or s then assert.matches("\nexamples:\n  glsb ", hout, 1, true) end
          assert.matches(table.concat(words, " "):gsub(" %-%-help$", ""), out, 1, true)
        end
      end
      assert.are.equal(0, (glsb({ "help", "template", "build" })))
      local _, exit = glsb({ "help", "exit" })
      assert.matches("124%s+TIMEOUT", exit)
      assert.matches("^glsb %d+%.%d+%.%d+", select(2, glsb({ "--version" })))
    end)

    it("an unknown flag or command is exit 2 naming the closest one; nothing runs", function()
      local code, out, err = glsb({ "run", "--tiemout", "3", "x.py" })
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("^glsb run: unknown flag '%-%-tiemout' %(did you mean '%-%-timeout'%?%)\n", err)
      code, _, err = glsb({ "lss" })
      assert.are.equal(2, code)
      assert.matches("unknown command 'lss' %(did you mean 'ls'%?%)", err)
      code, _, err = glsb({ "template", "biuld" })
      assert.are.equal(2, code)
      assert.matches("did you mean 'build'", err, 1, true)
      -- a provider option the library refuses: its own words (options.closest), exit 2
      code, _, err = glsb({ "run", "-o", "memroy_mb=64", "-" }, { input = "print(1)" })
      assert.are.equal(2, code)
      assert.matches("^glsb run: create: unknown option 'memroy_mb' %(did you mean 'memory_mb'%?%)\n$", err)
      code, _, err = glsb({ "run", "--timeout", "soon", "-" }, { input = "" })
      assert.are.equal(2, code)
      assert.matches("wants a number", err, 1, true)
    end)

    it("an error is one line, reason first, each cause once, never a raw table; a trace only with GLSB_LOG=debug",
      function()
        write(tmp .. "/wheels.lua", "return { name = 'needs-wheels', packages = { 'mylib' }, "
          .. "provider = { pip_find_links = '" .. tmp .. "/no-such-wheels' } }")
        local code, out, err = glsb({ "template", "build", "-o", "cache_dir=" .. tmp .. "/cache", tmp .. "/wheels.lua" })
        assert.are.equal(126, code, err)
        assert.are.equal("", out)
        assert.is_true(one_line(err), err)
        assert.matches("^glsb template build: the template build failed %(glsb%-confine: bind source .*no%-such%-wheels: "
          .. "No such file or directory%) %(TemplateBuildError, stage template_build%)\n$", err)
        assert.is_nil(err:find("{", 1, true), err)
        code, _, err = glsb({ "template", "build", "-o", "cache_dir=" .. tmp .. "/cache", tmp .. "/wheels.lua" },
          { env = { GLSB_LOG = "debug" } })
        assert.are.equal(126, code)
        assert.matches("stack traceback:", err, 1, true)
      end)
  end)

  describe("on the local provider", function()
    it("runs a file, streaming stdout and stderr, and exits 0", function()
      write(tmp .. "/hello.py", "import sys\nprint('hello', 6 * 7)\nprint('to stderr', file=sys.stderr)\n")
      local code, out, err = glsb({ "run", tmp .. "/hello.py" })
      assert.are.equal(0, code, err)
      assert.are.equal("hello 42\n", out)
      assert.are.equal("to stderr\n", err)
      -- standard input, the last expression's value, an env of the run
      code, out = glsb({ "run", "-e", "WHO=you", "-" }, { input = "import os\nos.environ['WHO']" })
      assert.are.equal(0, code)
      assert.are.equal("you\n", out)
      -- bash from the extension
      write(tmp .. "/job.sh", "echo from bash $((6 * 7))\n")
      code, out = glsb({ "run", tmp .. "/job.sh" })
      assert.are.equal(0, code)
      assert.are.equal("from bash 42\n", out)
    end)

    it("exits with a status that mirrors the outcome", function()
      local code, out, err = glsb({ "run", "-" }, { input = "print('before')\nraise ValueError('boom')" })
      assert.are.equal(120, code)
      assert.are.equal("before\n", out)
      assert.matches("ValueError: boom\n$", err)
      code = glsb({ "run", "-" }, { input = "import sys\nsys.exit(3)" })
      assert.are.equal(3, code)
      code = glsb({ "run", "-" }, { input = "import sys\nsys.exit(0)" })
      assert.are.equal(0, code)
      code = glsb({ "run", "-l", "bash", "-" }, { input = "echo x; exit 4" })
      assert.are.equal(4, code)
      -- the interpreter itself ending with a status (the sandbox is gone with it)
      code = glsb({ "run", "-" }, { input = "import os\nos._exit(6)" })
      assert.are.equal(6, code)
      code, _, err = glsb({ "run", "--timeout", "1", "-" }, { input = "while True:\n    pass" })
      assert.are.equal(124, code)
      assert.matches("^glsb run: timeout", err)
      -- a start failure: no such template
      code, out, err = glsb({ "run", "-t", "no-such-template", "-o", "cache_dir=" .. tmp .. "/cache", "-" },
        { input = "print(1)" })
      assert.are.equal(125, code)
      assert.are.equal("", out)
      assert.is_true(one_line(err), err)
      assert.matches("^glsb run: .*no%-such%-template.*%(SandboxStartError, stage create%)\n$", err)
    end)

    it("Ctrl-C ends a run with 130 and terminates its sandbox", function()
      local ws = tmp .. "/int-ws"
      assert(fs.mkdir(ws, 448))
      local loop = require "glsb.loop"
      local p = assert(process.spawn { argv = { GLSB, "run", "-o", "host_workspace_dir=" .. ws, "-" }, stdin = "pipe",
        stdout = "pipe", stderr = "pipe" })
      finally(function()
        p:kill("KILL")
        loop.run(function() p:wait(loop.now() + 5) end)
        p:close()
      end)
      local seen, st, err = loop.run(function()
        assert(p:write("import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)\n", loop.now() + 5))
        p:close_stdin()
        -- the line comes without its newline (glsb writes that with the next line or at the end)
        local got, deadline = "", loop.now() + 30
        while not got:find("started", 1, true) do
          local data = p:read("stdout", deadline)
          if not data or data == "" then break end
          got = got .. data
        end
        p:kill("INT")
        local _, e, s = p:communicate(nil, loop.now() + 30)
        return got, s, e
      end)
      assert.are.equal("started", seen)
      assert.are.equal(130, st.code, err)
      assert.are.equal("glsb run: interrupted\n", err)
      assert.are.same({}, fs.listdir(ws .. "/glsb-" .. process.geteuid()))
    end)

    it("counts the steps before the code starts on a terminal: create, the package install, each upload", function()
      local wheels = tmp .. "/wheels"
      assert(fs.mkdir(wheels, 493))
      require("local.helper").make_wheel(wheels, "clilib", "1.0", "VALUE = 'from the wheel'\n")
      write(tmp .. "/uses.py", "import clilib\nprint(clilib.VALUE)\n")
      write(tmp .. "/up.txt", "x")
      local tty = on_tty({ "run", "--package", "clilib", "-o", "pip_find_links=" .. wheels, "-f", tmp .. "/up.txt",
        tmp .. "/uses.py" })
      assert.matches("step 1/3: creating a local sandbox", tty, 1, true)
      assert.matches("step 2/3: installing clilib", tty, 1, true)
      assert.matches("step 3/3: uploading /files/up.txt (1 B)", tty, 1, true)
      assert.matches("\27[Kfrom the wheel\r\n", tty, 1, true)
      -- in a pipe: the program's output only
      local code, out, err = glsb({ "run", "--package", "clilib", "-o", "pip_find_links=" .. wheels, tmp .. "/uses.py" })
      assert.are.equal(0, code, err)
      assert.are.equal("from the wheel\n", out)
      assert.are.equal("", err)
    end)

    it("uploads --file files first and writes rich results to --out", function()
      write(tmp .. "/data.csv", "a,b\n1,2\n")
      local code, out, err = glsb({ "run", "-f", tmp .. "/data.csv", "-f", tmp .. "/data.csv:/tmp/again.csv",
        "--out", tmp .. "/out", "-" }, { input = "from IPython.display import HTML, display\n"
          .. "print(open('/files/data.csv').read() == open('/tmp/again.csv').read())\n"
          .. "display(HTML('<b>bold</b>'))" })
      assert.are.equal(0, code, err)
      assert.are.equal("True\n", out)
      assert.are.equal("<b>bold</b>", shell.read(tmp .. "/out/result-1.html"))
      assert.matches("wrote .*/out/result%-1%.html", err)
      -- --quiet: no notes
      code, _, err = glsb({ "run", "-q", "--out", tmp .. "/out2", "-" },
        { input = "from IPython.display import HTML, display\ndisplay(HTML('x'))" })
      assert.are.equal(0, code)
      assert.are.equal("", err)
    end)

    it("lists, shows and kills the local sandbox another process holds; exec says in one line why it cannot",
      function()
        local ws = tmp .. "/ws"
        assert(fs.mkdir(ws, 448))
        local owner = tmp .. "/owner.lua"
        write(owner, "local glsb = require 'glsb'\n"
          .. "local sb = glsb.create('local', { host_workspace_dir = '" .. ws .. "', metadata = { job = 'leak' } })\n"
          .. "io.stdout:write(sb.sandbox_id, '\\n') io.stdout:flush()\n"
          .. "local r repeat r = sb:execute_code('import time; time.sleep(0.1)') until r.status ~= 'success'\n"
          .. "io.stdout:write('owner saw ', r.status, '\\n')\n")
        local loop = require "glsb.loop"
        local p = assert(process.spawn { argv = { shell.repo .. "/build/glsb-lua", owner }, stdin = "null",
          stdout = "pipe", stderr = "null" })
        finally(function()
          p:kill("KILL")
          loop.run(function() p:wait(loop.now() + 5) end)
          p:close()
        end)
        local id = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
        assert.matches("^local%-", id)
        local where = "host_workspace_dir=" .. ws
        local code, out, err = glsb({ "ls", "-o", where })
        assert.are.equal(0, code, err)
        assert.matches("\n" .. id:gsub("%p", "%%%0") .. "%s+local%s+running%s+.*job=leak\n", out)
        code, out = glsb({ "ls", "--json", "-m", "job=leak", "-o", where })
        assert.are.equal(0, code)
        local ref = cjson.decode(out)
        assert.are.equal(id, ref.sandbox_id)
        assert.are.same({ job = "leak" }, ref.metadata)
        assert.is_number(ref["local"].owner_pid)
        code, out = glsb({ "ls", "--ids", "-m", "job=other", "-o", where })
        assert.are.equal(0, code)
        assert.are.equal("", out)
        -- bash completes its id for kill (glsb ls --ids, with the -o on the line)
        local script = tmp .. "/complete.bash"
        write(script, select(2, glsb({ "completion", "bash" })))
        local probe = "source " .. shell.q(script) .. "; COMP_WORDS=(" .. shell.join({ GLSB, "kill", "-o", where, "" })
          .. "); COMP_CWORD=4; _glsb; printf '%s\\n' \"${COMPREPLY[@]}\""
        assert.are.equal(id .. "\n", (shell.sh("bash -c " .. shell.q(probe))))
        code, out = glsb({ "info", "--json", "-o", where, id })
        assert.are.equal(0, code)
        assert.are.equal("running", cjson.decode(out).state)
        -- another process cannot run code in it: one line, exit 125
        code, _, err = glsb({ "exec", "-o", where, id, "true" })
        assert.are.equal(125, code)
        assert.is_true(one_line(err), err)
        assert.matches("belongs to the process that created it", err, 1, true)
        code, out, err = glsb({ "kill", "-o", where, id })
        assert.are.equal(0, code, err)
        assert.are.equal("killed " .. id .. "\n", out)
        -- the owner finds its sandbox gone; nothing is left
        local said = loop.run(function() return p:read_line("stdout", loop.now() + 20) end)
        assert.matches("^owner saw ", said)
        code, out = glsb({ "ls", "--ids", "-o", where })
        assert.are.equal(0, code)
        assert.are.equal("", out)
        assert.are.same({}, fs.listdir(ws .. "/glsb-" .. process.geteuid()))
        code, _, err = glsb({ "kill", "-o", where, id })
        assert.are.equal(125, code)
        assert.matches("no sandbox '" .. id, err, 1, true)
        -- --keep cannot keep a local sandbox for later: said before anything starts
        code, _, err = glsb({ "run", "--keep", "-" }, { input = "print(1)" })
        assert.are.equal(2, code)
        assert.matches("^glsb run: %-%-keep: provider 'local' cannot keep a sandbox past this command: local "
          .. "sandboxes belong to the process that created them\n", err)
      end)

    it("builds, lists and removes a template, with a step counter on a terminal and plain log lines in a pipe",
      function()
        local cache = tmp .. "/tcache"
        write(tmp .. "/spec.lua", "return { name = 'cli-spec', files = { { path = 'notes.txt', data = 'hi' } }, "
          .. "run = { 'echo ready > stamp', 'echo second step' } }")
        local code, out, err = glsb({ "template", "build", "-o", "cache_dir=" .. cache, tmp .. "/spec.lua" })
        assert.are.equal(0, code, err)
        assert.matches("^%x+\n$", out)
        local id = out:match("%x+")
        -- in a pipe: the build log, line by line, no progress line
        assert.matches("[glsb step 2/3] run[1]: echo ready > stamp\n", err, 1, true)
        assert.matches("\nsecond step\n", err, 1, true)
        assert.is_nil(err:find("\r", 1, true))
        assert.is_nil(err:find("[local template", 1, true))
        -- the same spec again: built once
        code, out = glsb({ "template", "build", "--json", "-o", "cache_dir=" .. cache, tmp .. "/spec.lua" })
        assert.are.equal(0, code)
        local j = cjson.decode(out)
        assert.is_false(j.built)
        assert.are.equal(id, j.ref.template_id)
        -- a sandbox from it
        code, out = glsb({ "run", "-t", "cli-spec", "-o", "cache_dir=" .. cache, "-" }, { input = "open('stamp').read().strip()" })
        assert.are.equal(0, code)
        assert.are.equal("ready\n", out)
        code, out = glsb({ "template", "ls", "-o", "cache_dir=" .. cache })
        assert.are.equal(0, code)
        assert.matches("^NAME%s+TEMPLATE_ID%s+BUILT%s+NAMES\ncli%-spec%s+" .. id, out)
        code, out = glsb({ "template", "ls", "--json", "-o", "cache_dir=" .. cache })
        assert.are.equal(0, code)
        assert.are.equal(id, cjson.decode(out).template_id)
        -- on a terminal: the progress line names each step as it runs
        local tty = on_tty({ "template", "build", "-o", "cache_dir=" .. cache, "--name", "cli-spec-2", tmp .. "/spec.lua" })
        assert.matches("\r\27[K[local template cli-spec-2] building", tty, 1, true)
        code, out = glsb({ "template", "rm", "-o", "cache_dir=" .. cache, "cli-spec" })
        assert.are.equal(0, code)
        assert.are.equal("deleted cli-spec\n", out)
        code, _, err = glsb({ "template", "rm", "-o", "cache_dir=" .. cache, "cli-spec" })
        assert.are.equal(126, code)
        assert.matches("no local template named cli%-spec", err)
        write(tmp .. "/spec3.lua", "return { name = 'cli-spec-3', run = { 'echo one', 'echo two', 'echo three' } }")
        tty = on_tty({ "template", "build", "-o", "cache_dir=" .. cache, tmp .. "/spec3.lua" })
        assert.matches("[local template cli-spec-3] step 3/3: run[3]: echo three", tty, 1, true)
        assert.matches("[local template cli-spec-3] built in ", tty, 1, true)
        -- --quiet on a terminal: no progress
        tty = on_tty({ "template", "build", "-q", "-o", "cache_dir=" .. cache, "--name", "cli-spec-4", tmp .. "/spec3.lua" })
        assert.is_nil(tty:find("[local template", 1, true), tty)
      end)

    it("glsb mcp is the MCP server on stdin and stdout, with the words after mcp as its flags", function()
      local init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        .. '"capabilities":{},"clientInfo":{"name":"spec","version":"1"}}}\n'
      local code, out, err = glsb({ "mcp" }, { input = init })
      assert.are.equal(0, code, err)
      local answer = assert(cjson.decode(out:match("^[^\n]+")), out)
      assert.are.equal(1, answer.id)
      assert.are.equal("glsb", answer.result.serverInfo.name)
      code, out, err = glsb({ "mcp", "--provider", "no-such" }, { input = init })
      assert.are.equal(2, code)
      assert.are.equal("", out)
      assert.matches("unknown provider 'no%-such'", err)
    end)

    it("doctor and gc run, and say it as JSON with --json", function()
      local code, out = glsb({ "doctor" })
      assert.are.equal(0, code, out)
      assert.matches("verdict: ready", out, 1, true)
      code, out = glsb({ "doctor", "--json" })
      assert.are.equal(0, code, out)
      local d = assert(cjson.decode(out), out)
      assert.is_true(d.ready)
      assert.is_true(d.live.ok)
      assert.is_true(#d.features >= 10)
      assert.are.equal("user namespace", d.features[1].name)
      code, out = glsb({ "gc", tmp })
      assert.are.equal(0, code)
      assert.matches("glsb gc: ", out, 1, true)
      -- a stale workspace of a dead owner: removed, and said so as JSON
      local root = tmp .. "/gcws/glsb-" .. process.geteuid()
      assert(fs.mkdir(tmp .. "/gcws", 448))
      assert(fs.mkdir(root, 448))
      assert(fs.mkdir(root .. "/glsb-local-dead01", 448))
      write(root .. "/glsb-local-dead01/glsb-owner", "glsb-owner 1\nowner 999999 1\n")
      code, out = glsb({ "gc", "--json", tmp .. "/gcws" })
      assert.are.equal(0, code)
      assert.are.same({ removed = root .. "/glsb-local-dead01" }, cjson.decode(out))
    end)
  end)

  -- The same round trip on each remote provider's emulator: run --keep, ls (table, --json, --ids), info,
  -- exec with its status, cp both ways, kill (asking first when more than one), and what a gone id gives.
  -- features: metadata, pause, template, template_check, lease_in_info (info has started_at and ends_at),
  -- cut_next_run(emu) (a fault that cuts the next run's stream after delivery)
  local function round_trip(name, start, env_of, features)
    describe("on " .. name .. " (its emulator)", function()
      local emu, env
      setup(function()
        emu = start()
        env = env_of(emu)
      end)
      teardown(function() if emu then emu:stop() end end)

      it("run, ls, info, exec, cp, kill", function()
        local tag = "cli" .. tostring(os.time())
        local function kept()
          local code, out, err = glsb({ "run", "-p", name, "--keep", "-m", "cli=" .. tag, "-" },
            { env = env, input = "print('kept', 6 * 7)" })
          assert.are.equal(0, code, err)
          assert.are.equal("kept 42\n", out)
          return assert(err:match("sandbox (%S+) kept"), err)
        end
        local id = kept()
        local code, out, err = glsb({ "ls", "-p", name }, { env = env })
        assert.are.equal(0, code, err)
        assert.matches("^ID%s+PROVIDER%s+STATE%s+TEMPLATE%s+STARTED%s+ENDS%s+METADATA\n", out)
        assert.matches("\n" .. id:gsub("%p", "%%%0") .. "%s+" .. name .. "%s+running", out)
        code, out = glsb({ "ls", "-p", name, "--json" }, { env = env })
        assert.are.equal(0, code)
        local seen
        for line in out:gmatch("[^\n]+") do
          local ref = assert(cjson.decode(line), line)
          if ref.sandbox_id == id then seen = ref end
        end
        assert.is_table(seen, out)
        assert.are.equal(name, seen.provider)
        -- GLSB_PROVIDER stands for -p
        local by_env = { GLSB_PROVIDER = name }
        for k, v in pairs(env) do by_env[k] = v end
        code, out, err = glsb({ "ls", "--ids" }, { env = by_env })
        assert.are.equal(0, code, err)
        assert.matches(id, out, 1, true)
        code, out = glsb({ "info", "-p", name, id, "--json" }, { env = env })
        assert.are.equal(0, code)
        local info = cjson.decode(out)
        assert.are.equal(id, info.sandbox_id)
        assert.are.equal("running", info.state)
        -- without --timeout or --lease the lease still outlasts the run's own limit (300 s): the run times
        -- out and says so, rather than losing its sandbox to a lease that ends with it
        if features.lease_in_info then
          local time = require "glsb.time"
          local lease = time.parse_iso(info.ends_at) - time.parse_iso(info.started_at)
          assert.is_true(lease >= 360, "lease " .. lease .. " s")
        end
        -- exec: the command's own status, an exact argv, a shell line
        code, out = glsb({ "exec", "-p", name, id, "echo out; exit 7" }, { env = env })
        assert.are.equal(7, code)
        assert.are.equal("out\n", out)
        code, out = glsb({ "exec", "-p", name, id, "--", "printf", "%s|", "a b", "c" }, { env = env })
        assert.are.equal(0, code)
        assert.are.equal("a b|c|", out)
        -- cp both ways, bytes as they are
        local bytes = "bin\0\1\2\255\n" .. string.rep("x", 100000)
        write(tmp .. "/up.bin", bytes)
        code, _, err = glsb({ "cp", "-p", name, tmp .. "/up.bin", id .. ":/tmp/up.bin" }, { env = env })
        assert.are.equal(0, code, err)
        code, _, err = glsb({ "cp", "-p", name, id .. ":/tmp/up.bin", tmp .. "/down.bin" }, { env = env })
        assert.are.equal(0, code, err)
        assert.is_true(shell.read(tmp .. "/down.bin") == bytes)
        code, out = glsb({ "cp", "-p", name, id .. ":/tmp/up.bin", "-" }, { env = env })
        assert.are.equal(0, code)
        assert.is_true(out == bytes)
        -- a full disk: the copy fails in one line, never "copied" with exit 0 (a file, standard output)
        code, out, err = glsb({ "cp", "-p", name, id .. ":/tmp/up.bin", "/dev/full" }, { env = env })
        assert.are.equal(126, code, err)
        assert.are.equal("", out)
        assert.are.equal("glsb cp: cannot write /dev/full: No space left on device\n", err)
        local vars = {}
        for k, v in pairs(env) do vars[#vars + 1] = k .. "=" .. shell.q(v) end
        local said, sh_code = shell.sh("env " .. table.concat(vars, " ") .. " " .. shell.join({ GLSB, "cp", "-p", name,
          id .. ":/tmp/up.bin", "-" }) .. " 2>&1 >/dev/full")
        assert.are.equal(126, sh_code, said)
        assert.are.equal("glsb cp: cannot write standard output: No space left on device\n", said)
        -- a big transfer on a terminal: a bar with bytes and rate; in a pipe, none
        write(tmp .. "/big.bin", string.rep("b", 6 * 1024 * 1024))
        local tty = on_tty({ "cp", "-p", name, tmp .. "/big.bin", id .. ":/tmp/big.bin" }, env)
        assert.matches("upload /tmp/big.bin [", tty, 1, true)
        assert.matches("] 6.0 MiB / 6.0 MiB  [%d.]+ [KMG]?i?B/s", tty)
        tty = on_tty({ "cp", "-p", name, id .. ":/tmp/big.bin", tmp .. "/big-back.bin" }, env)
        assert.matches("download /tmp/big.bin ", tty, 1, true)
        assert.are.equal(6 * 1024 * 1024, #shell.read(tmp .. "/big-back.bin"))
        code, _, err = glsb({ "cp", "-p", name, tmp .. "/big.bin", id .. ":/tmp/big.bin" }, { env = env })
        assert.are.equal(0, code)
        assert.is_nil(err:find("MiB/s", 1, true), err)
        -- kill: asks before more than one; in a pipe it cannot ask, so it refuses and kills nothing
        local id2 = kept()
        local all = features.metadata and { "kill", "-p", name, "--all", "-m", "cli=" .. tag }
          or { "kill", "-p", name, id, id2 }
        code, out, err = glsb(all, { env = env })
        assert.are.equal(2, code, err)
        assert.matches("pass %-%-yes", err)
        assert.are.equal("", out)
        -- on a terminal it asks; "n" kills nothing
        local asked = on_tty(all, env, { "until:[y/N]", "n\\r", "wait:1" })
        assert.matches("kill 2 " .. name .. " sandboxes", asked, 1, true)
        assert.matches("nothing killed", asked, 1, true)
        code, out = glsb({ "ls", "-p", name, "--ids" }, { env = env })
        assert.are.equal(0, code)
        assert.matches(id, out, 1, true)
        all[#all + 1] = "--yes"
        code, out, err = glsb(all, { env = env })
        assert.are.equal(0, code, err)
        assert.matches("killed " .. id, out, 1, true)
        assert.matches("killed " .. id2, out, 1, true)
        code, out = glsb({ "ls", "-p", name, "--ids" }, { env = env })
        assert.are.equal(0, code)
        assert.is_nil(out:find(id, 1, true))
        -- a gone sandbox: exit 125, one line
        code, _, err = glsb({ "exec", "-p", name, id, "true" }, { env = env })
        assert.are.equal(125, code, err)
        assert.is_true(one_line(err), err)
      end)

      it("template build (a step counter on a terminal), ls, run from it, rm", function()
        local spec = tmp .. "/" .. name .. "-tpl.lua"
        write(spec, features.template)
        local code, out, err = glsb({ "template", "build", "-p", name, spec }, { env = env })
        assert.are.equal(0, code, err)
        local id = out:match("^(%S+)\n$")
        assert.is_string(id, out)
        code, out = glsb({ "template", "ls", "-p", name, "--json" }, { env = env })
        assert.are.equal(0, code)
        local listed
        for line in out:gmatch("[^\n]+") do
          if assert(cjson.decode(line), line).template_id == id then listed = true end
        end
        assert.is_true(listed, out)
        if features.template_check then
          code, out, err = glsb({ "run", "-p", name, "-t", id, "-" }, { env = env, input = features.template_check[1] })
          assert.are.equal(0, code, err)
          assert.are.equal(features.template_check[2], out)
          local tty = on_tty({ "template", "build", "-p", name, "--name", "cli-tty-" .. name, spec }, env)
          assert.matches("[" .. name .. " template cli-tty-" .. name .. "] step 2/2", tty, 1, true)
          glsb({ "template", "rm", "-p", name, "cli-tty-" .. name }, { env = env })
        end
        code, out = glsb({ "template", "rm", "-p", name, id }, { env = env })
        assert.are.equal(0, code)
        assert.are.equal("deleted " .. id .. "\n", out)
        code, _, err = glsb({ "template", "rm", "-p", name, id }, { env = env })
        assert.are.equal(126, code)
        assert.matches("no " .. name .. " template named", err, 1, true)
      end)

      if features.pause then
        it("info and kill leave a paused sandbox paused until it is killed (a connect would resume it)", function()
          local script = tmp .. "/" .. name .. "-pause.lua"
          write(script, "local sb = require('glsb').create('" .. name .. "', { keep_alive = true })\n"
            .. "assert(sb:pause()) io.write(sb.sandbox_id)\n")
          local code, id, err = glsb({ script }, { env = env, program = shell.repo .. "/build/glsb-lua" })
          assert.are.equal(0, code, err)
          code, _, err = glsb({ "info", "-p", name, "--json", id }, { env = env })
          assert.are.equal(0, code, err)
          local _, out = glsb({ "info", "-p", name, "--json", id }, { env = env })
          assert.are.equal("paused", cjson.decode(out).state)
          _, out = glsb({ "ls", "-p", name, "--json" }, { env = env })
          assert.matches('"state":"paused"', out, 1, true)
          code, out = glsb({ "kill", "-p", name, id }, { env = env })
          assert.are.equal(0, code)
          assert.are.equal("killed " .. id .. "\n", out)
          _, out = glsb({ "ls", "-p", name, "--ids" }, { env = env })
          assert.is_nil(out:find(id, 1, true))
        end)
      end

      it("a run's exit statuses and its streamed output", function()
        local code, out, err = glsb({ "run", "-p", name, "-" }, { env = env,
          input = "import sys\nprint('one')\nprint('two', file=sys.stderr)\nraise KeyError('k')" })
        assert.are.equal(120, code)
        assert.are.equal("one\n", out)
        assert.matches("^two\n", err)
        assert.matches("KeyError", err)
        code = glsb({ "run", "-p", name, "-" }, { env = env, input = "import sys\nsys.exit(5)" })
        assert.are.equal(5, code)
        if features.cut_next_run then
          -- the connection breaks after the code was sent: the outcome is unknown, 121 (never 0 or 120)
          features.cut_next_run(emu)
          code, _, err = glsb({ "run", "-p", name, "-" }, { env = env,
            input = "import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')" })
          emu:clear_faults()
          assert.are.equal(121, code, err)
          assert.matches("^glsb run: unknown: ", err)
        end
      end)
    end)
  end

  local REMOTE_TEMPLATE = "return { name = 'cli-remote', files = { { path = 'notes.txt', data = 'from the template' } }, "
    .. "run = { 'echo ready > /tmp/stamp' } }"
  local REMOTE_CHECK = { "open('notes.txt').read()", "from the template\n" }

  round_trip("e2b", function() return require("e2b.emulator").start() end, function(emu)
    return { E2B_API_KEY = emu.api_key, E2B_API_URL = emu.base, E2B_SANDBOX_URL = emu.base }
  end, { metadata = true, pause = true, template = REMOTE_TEMPLATE, template_check = REMOTE_CHECK, lease_in_info = true,
    cut_next_run = function(emu)
      emu:fault { plane = "jupyter", path = "^/execute$", action = "cut_after_bytes", bytes = 60 }
    end })

  round_trip("opensandbox", function() return require("opensandbox.emulator").start() end, function(emu)
    return { OPEN_SANDBOX_DOMAIN = emu.base, OPEN_SANDBOX_API_KEY = emu.api_key }
  end, { metadata = true, pause = true, template = REMOTE_TEMPLATE, template_check = REMOTE_CHECK, lease_in_info = true })

  round_trip("bedrock", function() return require("bedrock.emulator").start() end, function(emu)
    local e = require "bedrock.emulator"
    return { BEDROCK_AGENTCORE_DP_ENDPOINT = emu.base, BEDROCK_AGENTCORE_CP_ENDPOINT = emu.base,
      AWS_ACCESS_KEY_ID = e.ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY = e.SECRET_ACCESS_KEY, AWS_REGION = e.REGION,
      AWS_CONFIG_FILE = "/dev/null", AWS_SHARED_CREDENTIALS_FILE = "/dev/null", AWS_EC2_METADATA_DISABLED = "true" }
    -- an AgentCore custom code interpreter has no image: a name (and packages) is all a spec says
  end, { metadata = false, template = "return { name = 'cli-bedrock' }" })

  describe("completion and docs", function()
    it("the bash completion loads and completes commands, flags, subcommands and providers", function()
      local script = tmp .. "/glsb.bash"
      local code, out = glsb({ "completion", "bash" })
      assert.are.equal(0, code)
      write(script, out)
      local _, ok = shell.sh("bash -n " .. shell.q(script))
      assert.are.equal(0, ok)
      local function complete(line)
        local words = {}
        for w in line:gmatch("%S+") do words[#words + 1] = w end
        if line:sub(-1) == " " then words[#words + 1] = "" end
        local probe = "source " .. shell.q(script) .. "; COMP_WORDS=(" .. shell.join(words) .. "); COMP_CWORD="
          .. (#words - 1) .. "; _glsb; printf '%s\\n' \"${COMPREPLY[@]}\""
        return (shell.sh("bash -c " .. shell.q(probe)))
      end
      assert.matches("^run\n", complete("glsb ru"))
      assert.matches("%-%-timeout\n", complete("glsb run --ti"))
      assert.matches("build\n", complete("glsb template b"))
      assert.are.equal("e2b\n", complete("glsb kill -p e"))
      assert.matches("%-%-metadata\n", complete("glsb kill -p e2b --me"))
      assert.matches("%-%-yes", complete("glsb kill -p e2b -"))
    end)

    it("the zsh completion parses", function()
      local _, has = shell.sh("command -v zsh >/dev/null")
      if has ~= 0 then
        pending("zsh is not installed (scripts/install-deps installs it)")
        return
      end
      local code, out = glsb({ "completion", "zsh" })
      assert.are.equal(0, code)
      write(tmp .. "/_glsb", out)
      local _, ok = shell.sh("zsh -n " .. shell.q(tmp .. "/_glsb"))
      assert.are.equal(0, ok)
      -- what it asks zsh's completion system for, with _describe and _arguments standing in for it
      local probe = "_describe() { print -r -- \"describe ${(P)2}\" }; _arguments() { print -r -- \"arguments $*\" }; "
        .. "words=(glsb template b); CURRENT=3; source " .. shell.q(tmp .. "/_glsb") .. "; "
        .. "words=(glsb kill -p e2b --a); CURRENT=5; _glsb"
      local said = shell.sh("zsh -f -c " .. shell.q(probe) .. " 2>&1")
      assert.matches("^describe build:build a template", said)
      assert.matches("\narguments %-s .*%-%-all%[every sandbox", said)
      assert.matches("%(local e2b opensandbox bedrock%)", said)
    end)

    it("docs/cli.md is what `glsb help --markdown` writes from the same declarations as --help", function()
      local _, md = glsb({ "help", "--markdown" })
      assert.are.equal(md, shell.read(shell.repo .. "/docs/cli.md"),
        "docs/cli.md is stale: build/glsb help --markdown > docs/cli.md")
      for _, c in ipairs(require("glsb.cli.commands").LIST) do
        assert.matches("### `glsb " .. c.name, md, 1, true)
      end
    end)
  end)
end)
