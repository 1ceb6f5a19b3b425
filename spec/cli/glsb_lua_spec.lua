-- The glsb-lua interpreter: scripts with arg, -e, stdin, --version/--help, the prompt on a terminal
-- (line editing, history, Ctrl-C), the glsb global, GLSB_PATH providers, and how an uncaught glsb error
-- is reported.
local core = require "glsb.core"

local GLSB_LUA = core.realpath("build/glsb-lua")

local function run(cmd, input)
  local tmp = os.tmpname()
  if input then
    local f = assert(io.open(tmp, "wb"))
    f:write(input)
    f:close()
  end
  local p = assert(io.popen(cmd .. (input and (" < " .. tmp) or " < /dev/null") .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  os.remove(tmp)
  return ok and 0 or code, out
end

describe("glsb-lua #cli", function()
  it("runs a script with its arguments in arg, as lua5.4 does", function()
    local script = os.tmpname()
    finally(function() os.remove(script) end)
    local f = assert(io.open(script, "w"))
    f:write("print(arg[0] == ..., #arg, arg[1], arg[2], select('#', ...))\n")
    f:close()
    local code, out = run(("%s %s one 'two words'"):format(GLSB_LUA, script))
    assert.equal(0, code)
    assert.equal("false\t2\tone\ttwo words\t2\n", out)
  end)

  it("runs -e chunks in order, then the script from stdin with -", function()
    local code, out = run(GLSB_LUA .. " -e 'x = 1' -e 'print(x + 1)' -", "print('from stdin', x)")
    assert.equal(0, code)
    assert.equal("2\nfrom stdin\t1\n", out)
  end)

  it("reads the script from stdin when it is not a terminal and no script is given", function()
    local code, out = run(GLSB_LUA, "print(require('glsb').ExecutionStatus.SUCCESS)")
    assert.equal(0, code)
    assert.equal("success\n", out)
  end)

  it("has the core preloaded and finds the library next to itself, from any directory", function()
    local chunk = "print(package.loaded['glsb.core'] == nil, require('glsb.core')._NAME, "
      .. "package.searchpath('glsb', package.path))"
    local code, out = run("cd / && " .. GLSB_LUA .. ' -e "' .. chunk .. '"')
    assert.equal(0, code, out)
    assert.matches("^true\tglsb.core\t.*/lua/glsb/init.lua\n$", out)
  end)

  it("finds providers by module name before glsb itself is loaded, as an installed tree does", function()
    local code, out = run("cd / && " .. GLSB_LUA .. [[ -e "print(require('glsb.providers.local').name)"]])
    assert.equal(0, code, out)
    assert.equal("local\n", out)
  end)

  it("prints its version and help", function()
    local code, out = run(GLSB_LUA .. " --version")
    assert.equal(0, code)
    assert.matches("^glsb%-lua %d+%.%d+%.%d+ %(Lua 5%.4", out)
    code, out = run(GLSB_LUA .. " -h")
    assert.equal(0, code)
    assert.matches("usage: glsb%-lua", out)
    assert.matches("GLSB_PATH", out)
    assert.matches("%-%-doctor", out)
  end)

  it("rejects an unknown option with usage and exit 2", function()
    local code, out = run(GLSB_LUA .. " --bogus")
    assert.equal(2, code)
    assert.matches("unknown option '%-%-bogus'", out)
  end)

  it("an uncaught glsb error prints class, stage, message and cause, and exits 1", function()
    local chunk = "local e = require 'glsb.errors'; "
      .. "e.raise(e.SandboxStartError, 'create', '429 Too Many Requests', e.http_failure(429, {}, 'slow down'))"
    local code, out = run(GLSB_LUA .. ' -e "' .. chunk .. '"')
    assert.equal(1, code)
    assert.matches("SandboxStartError%[create%]: 429 Too Many Requests", out)
    assert.matches("transient", out)
    assert.matches("cause", out)
    assert.not_matches("table: 0x", out)
  end)

  it("a plain Lua error prints a traceback and exits 1", function()
    local code, out = run(GLSB_LUA .. [[ -e "error('plain failure')"]])
    assert.equal(1, code)
    assert.matches("plain failure", out)
    assert.matches("stack traceback", out)
  end)

  it("a syntax error in a script is reported, exit 1", function()
    local code, out = run(GLSB_LUA .. " -", "this is not lua")
    assert.equal(1, code)
    assert.matches("syntax error", out)
  end)

  it("GLSB_PATH puts a folder of user providers first", function()
    local dir = core.mkdtemp("/tmp/glsb-path-XXXXXX")
    finally(function() core.rmtree(dir) end)
    os.execute("mkdir -p " .. dir .. "/mine")
    local f = assert(io.open(dir .. "/mine/init.lua", "w"))
    f:write("return { name = 'mine', Sandbox = { create = function() return 'made by mine' end } }\n")
    f:close()
    local code, out = run(("GLSB_PATH=%s %s -e \"print(require('glsb').create('mine'))\""):format(dir, GLSB_LUA))
    assert.equal(0, code, out)
    assert.equal("made by mine\n", out)
  end)

  it("offers a prompt on a terminal that prints expression values", function()
    -- script(1) gives glsb-lua a pseudo-terminal as stdin.
    local code, out = run("script -qec " .. GLSB_LUA .. " /dev/null", "1 + 41\nlocal t = 5\nprint(glsb.Stage.CREATE)\n")
    assert.equal(0, code, out)
    assert.matches("glsb%-lua", out)
    assert.matches("42", out)
    assert.matches("create", out)
  end)

  -- The prompt on a real pseudo-terminal, keystroke by keystroke (spec/cli/pty_session.py).
  local function session(steps, env)
    local cmd = { env or "", "/usr/bin/python3 spec/cli/pty_session.py", GLSB_LUA, "--" }
    for _, s in ipairs(steps) do cmd[#cmd + 1] = ("%q"):format(s):gsub("\\\n", "\\n") end
    return run(table.concat(cmd, " "))
  end

  it("edits lines: the Up arrow brings back the last line instead of 'bad binary format'", function()
    local hist = os.tmpname()
    finally(function() os.remove(hist) end)
    local code, out = session({ "x = 41\\r", "print(x + 1)\\r", "\\x1b[A\\r", "print(12)\\x1b[D\\x1b[D3\\r",
      "print('hist' .. 'ory')\\r" }, "GLSB_HISTORY=" .. hist)
    assert.equal(0, code, out)
    assert.matches("\n132", out) -- two Left arrows, then a digit typed in the middle
    assert.is_nil(out:find("bad binary format", 1, true), out)
    local _, n = out:gsub("\n42", "")
    assert.equal(2, n, out) -- typed once, recalled once
    -- and the history outlives the session: the next one recalls the last line without typing it
    code, out = session({ "\\x1b[A\\r" }, "GLSB_HISTORY=" .. hist)
    assert.equal(0, code, out)
    assert.matches("\nhistory", out)
  end)

  it("Ctrl-C interrupts the running call, not the prompt; the session's variables survive", function()
    local srv = require("support.server").start({ "node", "spec/support/fault_server.mjs", "0" })
    finally(function() srv.stop() end)
    local code, out = session({
      "x = 41\\r",
      "while true do end\\r", "wait:0.5", "\\x03", "until:interrupted!",
      "print('after a loop', x)\\r",
      "require('glsb.loop').sleep(60)\\r", "wait:0.5", "\\x03", "until:interrupted!",
      "print('after a sleep', x)\\r",
      "r = require('glsb.http').request({ url = '" .. srv.url .. "/slow?ms=60000' })\\r", "wait:0.5", "\\x03",
      "until:interrupted!",
      "print('after a request', x)\\r",
    }, "GLSB_HISTORY=")
    assert.equal(0, code, out)
    local _, n = out:gsub("interrupted!", "")
    assert.equal(3, n, out)
    assert.matches("after a loop\t41", out)
    assert.matches("after a sleep\t41", out)
    assert.matches("after a request\t41", out)
  end)

  it("scripts and -e chunks see the glsb global the prompt has, loaded only when used", function()
    local code, out = run(GLSB_LUA .. [[ -e 'print(package.loaded.glsb == nil); print(glsb == require "glsb")']])
    assert.equal(0, code, out)
    assert.equal("true\ntrue\n", out)
  end)

  it("runs the README's pcall(glsb.create, ...) example as a script, with or without its require line", function()
    local readme = assert(io.open("README.md")):read("a")
    local block
    for b in readme:gmatch("```lua\n(.-)```") do
      if b:find("pcall(glsb.create", 1, true) then block = b end
    end
    assert.is_string(block, "the README example is still there")
    local emu = require("e2b.emulator").start()
    finally(function() emu:stop() end)
    local script = os.tmpname()
    finally(function() os.remove(script) end)
    -- as written, and as it read when scripts had no glsb global (no require line: bug 5)
    for _, text in ipairs({ block, (block:gsub('local glsb = require "glsb"\n', "")) }) do
      local f = assert(io.open(script, "w"))
      f:write(text, "\nprint(ok, glsb.errors.is(err, glsb.errors.SandboxStartError), err.transient)\n")
      f:close()
      local code, out = run(("E2B_API_URL=%s %s %s"):format(emu.base, GLSB_LUA, script))
      assert.equal(0, code, out)
      assert.matches("false\ttrue\tfalse\n$", out) -- a bad key: refused, and not worth retrying
    end
  end)

  it("continues an unfinished statement on the next lines at the prompt", function()
    local code, out = run("script -qec " .. GLSB_LUA .. " /dev/null", "for i = 1, 3 do\nio.write(i * 10, ';')\nend\n")
    assert.equal(0, code, out)
    assert.matches(">> ", out, 1, true)
    assert.matches("10;20;30;", out, 1, true)
  end)
end)
