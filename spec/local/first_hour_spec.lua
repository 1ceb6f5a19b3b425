-- The first hour with the local provider (issue 14): each case is a regression spec for a bug a new
-- user hit: a quadratic upload that never ended, two default timeouts racing into UNKNOWN, an
-- interpreter exit reported as a timeout, an unreadable start failure, leftover spec directories.
local glsb = require "glsb"
local core = require "glsb.core"
local errors = require "glsb.errors"
local loop = require "glsb.loop"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

-- Runs fn() in a task; if it has not returned after `guard` seconds the task is cancelled (the call
-- then fails at its next wait) and the spec fails. A hang guard, not a speed threshold.
local function within(guard, what, fn)
  return glsb.run(function()
    local t = loop.spawn(fn)
    local res = table.pack(pcall(t.wait, t, guard))
    if res[1] and res[2] == nil and res[3] == "timeout" and not t:done() then
      t:cancel()
      pcall(t.wait, t, 10)
      error(what .. " did not finish within the " .. guard .. " s hang guard", 0)
    end
    if not res[1] then error(res[2], 0) end
    return table.unpack(res, 2, res.n)
  end)
end

describe("local provider, the first hour #local", function()
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
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    helper.remove_root(root)
  end)
  after_each(function()
    if sb then pcall(sb.terminate, sb) end
    sb = nil
  end)

  it("uploads 100 MB through execute_code{files} (a linear upload path)", function()
    create()
    local data = string.rep("0123456789abcdef", 100 * 1024 * 1024 // 16)
    local r = within(60, "a 100 MB upload", function()
      return sb:execute_code("import hashlib\nprint(hashlib.sha256(open('/files/big.bin', 'rb').read()).hexdigest())",
        { files = { glsb.SandboxFile.from_bytes(data, "big.bin") } })
    end)
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(core.sha256(data) .. "\n", r.stdout)
  end)

  -- Uploads go to the supervisor (the control channel): stopping it stops the far side.
  it("an upload stops at its deadline when the far side stops reading", function()
    create()
    local supervisor = sb._proc.pid
    os.execute("kill -STOP " .. supervisor)
    finally(function() os.execute("kill -CONT " .. supervisor .. " 2>/dev/null") end)
    local data = string.rep("x", 32 * 1024 * 1024)
    local ok, err = within(30, "an upload to a stopped supervisor", function()
      return pcall(sb._upload, sb, { { filename = "x", path = "/files/x", data = data } }, { timeout = 1 })
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("the control channel broke: a request could not be sent: timeout", 1, true),
      tostring(err))
    -- part of the frame went out: the sandbox was stopped rather than left with a broken stream
    local again = sb:execute_code("print(1)")
    assert.are.equal(Status.ERROR, again.status)
    assert.truthy(again.error:find("no longer usable", 1, true), again.error)
  end)

  it("a code timeout that ties with the lease gives TIMEOUT, whichever fires first", function()
    for _, skew in ipairs({ -0.02, 0, 0.02 }) do
      local lease = 1.5
      create({ timeout = lease })
      local armed = loop.now()
      local r = within(30, "a call at the end of the lease", function()
        return sb:execute_code("while True: pass", { timeout = lease + skew - (loop.now() - armed) })
      end)
      assert.are.equal(Status.TIMEOUT, r.status, "skew " .. skew .. ": " .. tostring(r))
      assert.is_nil(r.error:find("stdin is closed", 1, true), r.error)
      -- once the lease is over: not running, and every call raises saying the lease expired
      loop.sleep(math.max(0, lease + 0.1 - (loop.now() - armed)))
      assert.is_false(sb:is_running())
      for _, call in ipairs({
        function() return sb:execute_code("print(1)") end,
        function() return sb:execute_command("true") end,
        function() return glsb.write_workspace_file(sb, { relative_path = "x", data = "x" }) end,
      }) do
        local ok, err = pcall(call)
        assert.is_false(ok)
        assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
        assert.truthy(tostring(err):find("lease expired", 1, true), tostring(err))
      end
      sb:terminate()
      assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
    end
  end)

  it("an interpreter that exits during the call is reported as such, not as a timeout", function()
    create()
    local started = loop.now()
    local r = sb:execute_code("import os\nos._exit(3)")
    assert.is_true(loop.now() - started < 10)
    assert.are.equal(Status.ERROR, r.status, tostring(r))
    assert.are.equal(3, r.code)
    assert.truthy(r.error:find("the interpreter exited with code 3; the sandbox is gone", 1, true), r.error)
    assert.is_nil(r.error:find("timed out", 1, true), r.error)
    -- gone, not restarted: the handle says so and later calls raise
    assert.is_false(sb:is_running())
    local ok, err = pcall(sb.execute_code, sb, "print(1)")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
    assert.are.same({}, helper.list_dir(helper.workspace_root(root))) -- the supervisor removed the workspace
  end)

  it("memory_mb too low to start the interpreter says so", function()
    local ok, err = pcall(create, { memory_mb = 1 })
    sb = nil
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.truthy(err.message:find("memory_mb = 1 is too low to start the interpreter", 1, true), err.message)
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
  end)

  it("private spec directories are removed even when the spec that made one does not run", function()
    local scratch = helper.private_tmp()
    local spec = scratch .. "/made_spec.lua"
    helper.write(spec, "local helper = require 'local.helper'\n"
      .. "local f = io.open(arg and os.getenv('GLSB_SPEC_NOTE'), 'w') f:write(helper.private_tmp()) f:close()\n"
      .. "describe('filtered #filtered_out', function() it('x', function() end) end)\n")
    local note = scratch .. "/note"
    local out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && GLSB_SPEC_NOTE=" .. helper.q(note)
      .. " lua5.4 /usr/bin/busted --exclude-tags=filtered_out " .. helper.q(spec) .. " 2>&1")
    assert.are.equal(0, code, out)
    local made = helper.read(note)
    assert.truthy(made and made:match("^/tmp/glsb%-local%-spec%."), tostring(made))
    assert.is_false(helper.exists(made), made .. " was left behind")
  end)

  it("a killed spec process's directories are removed by the next one; a live one's stay", function()
    local scratch = helper.private_tmp()
    local note = scratch .. "/note"
    -- a spec process that makes its directory, then waits on its stdin until it is killed
    local chunk = "package.path = 'spec/?.lua;' .. package.path\n"
      .. "io.write(require('support.shell').mktemp_dir('local'), '\\n') io.stdout:flush() io.read('a')\n"
    local child = assert(io.popen("cd " .. helper.q(helper.repo) .. " && exec lua5.4 -e " .. helper.q(chunk)
      .. " > " .. helper.q(note), "w"))
    finally(function() pcall(child.close, child) end) -- its stdin's end lets it go if the spec fails early
    local made
    for _ = 1, 200 do
      made = (helper.read(note) or ""):match("^(%S+)\n")
      if made then break end
      os.execute("sleep 0.05")
    end
    local pid = made and made:match("^/tmp/glsb%-local%-spec%.p(%d+)%-%d+%.")
    assert.truthy(pid, "the child's directory names its process: " .. tostring(made))
    helper.sweep_dead_spec_dirs(0)
    assert.is_true(helper.exists(made), "a live process's directory was removed")
    os.execute("kill -9 " .. pid)
    child:close()
    helper.sweep_dead_spec_dirs(0)
    assert.is_false(helper.exists(made), made .. " of a killed spec process was left behind")
    assert.is_true(helper.exists(scratch), "this process's own directory was removed")
  end)
end)
