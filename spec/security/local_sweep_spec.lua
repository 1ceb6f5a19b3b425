-- Issue 25 §6: the local sweep trusts only what it wrote. `glsb-lua --gc DIR` and a plain create with
-- host_workspace_dir = DIR removed any build-*, import-* or glsb-local-* folder of DIR that held a JSON
-- object named owner.json (a user's proj/build-release with its bin/app went), hung on an owner.json
-- planted as a FIFO and read a symlink to /dev/zero until memory ran out. Now only glsb's own folder
-- DIR/glsb-<uid> is swept (a directory of ours nobody else may write to; another is refused), and in it
-- only directories of ours whose record is a small regular file of ours in the strict format.
-- Each case plants its bait both where the old sweep looked (DIR itself, owner.json) and where the new
-- one looks (DIR/glsb-<uid>, glsb-owner), so that either version would take it if it trusted it.
local glsb = require "glsb"
local core = require "glsb.core"
local errors = require "glsb.errors"
local helper = require "local.helper"

local GLSB_LUA = helper.root .. "/build/glsb-lua"
-- owner and supervisor "dead": pid 1 lives, but not with this start time
local OLD_RECORD = '{"owner":{"pid":1,"start":7},"supervisor":{"pid":1,"start":7},"cgroup_dirs":[]}'
local NEW_RECORD = "glsb-owner 1\nowner 1 7\nsupervisor 1 7\n"

describe("the local sweep removes only what glsb made #security #local", function()
  local uid = core.geteuid()

  -- A host folder with the user's own build output and bait in both places. -> base, the paths to keep
  local function project()
    local base = helper.private_tmp() .. "/proj"
    local root = base .. "/glsb-" .. uid
    assert(os.execute("mkdir -p " .. helper.q(base .. "/build-release/bin") .. " " .. helper.q(root)
      .. " && chmod 700 " .. helper.q(root)))
    helper.write(base .. "/build-release/bin/app", "#!/bin/sh\necho app\n")
    helper.write(base .. "/build-release/owner.json", OLD_RECORD)
    helper.write(base .. "/build-release/glsb-owner", NEW_RECORD)
    local outside = helper.private_tmp() .. "/elsewhere"
    assert(os.execute("mkdir -p " .. helper.q(outside)))
    helper.write(outside .. "/owner.json", OLD_RECORD)
    assert(os.execute("ln -s " .. helper.q(outside) .. " " .. helper.q(base .. "/import-link")))
    return base, { base .. "/build-release/bin/app", base .. "/build-release/owner.json", base .. "/import-link",
      outside .. "/owner.json" }
  end

  local function assert_kept(paths)
    for _, p in ipairs(paths) do assert.is_true(helper.exists(p), p .. " was removed") end
  end

  local scripts = helper.private_tmp()
  -- what `glsb-lua --gc ARGS` runs, then this process's peak RSS
  helper.write(scripts .. "/gc.lua", [[
local ok, e = pcall(require("glsb.providers.local.reaper").main, arg)
print("VmHWM " .. io.open("/proc/self/status"):read("a"):match("VmHWM:%s*(%d+)"))
if not ok then io.stderr:write(tostring(e), "\n") os.exit(1) end
]])
  helper.write(scripts .. "/create.lua", [[
local ok, e = pcall(function() require("glsb").create("local", { host_workspace_dir = arg[1] }):terminate() end)
if not ok then io.stderr:write(tostring(e), "\n") os.exit(3) end
print("created")
]])

  -- glsb-lua --gc ARGS in a child, under a time limit and a 2 GB address-space limit. -> output, status,
  -- peak RSS in KiB
  local function gc(args, secs)
    local out, code = helper.sh("cd " .. helper.q(helper.repo) .. " && ulimit -v 2000000 && timeout " .. (secs or 20)
      .. " " .. helper.q(GLSB_LUA) .. " " .. helper.q(scripts .. "/gc.lua") .. " " .. helper.join(args) .. " 2>&1")
    return out, code, tonumber(out:match("VmHWM (%d+)"))
  end

  -- A create + terminate with host_workspace_dir = base in a child under a time limit (a hang here
  -- would hang this process).
  local function create_in(base, secs)
    return helper.sh("cd " .. helper.q(helper.repo) .. " && timeout " .. (secs or 30) .. " " .. helper.q(GLSB_LUA)
      .. " " .. helper.q(scripts .. "/create.lua") .. " " .. helper.q(base) .. " 2>&1")
  end

  it("glsb-lua --gc DIR leaves the user's folders alone, whatever owner file they hold", function()
    local base, keep = project()
    local out, code = gc({ base })
    assert.are.equal(0, code, out)
    assert.truthy(out:find("0 stale sandbox directories removed", 1, true), out)
    assert_kept(keep)
  end)

  it("a create with host_workspace_dir = DIR leaves them alone too, and works in DIR/glsb-<uid>", function()
    local base, keep = project()
    local sb = glsb.create("local", { host_workspace_dir = base })
    finally(function() sb:terminate() end)
    assert.are.equal(base .. "/glsb-" .. uid, sb.workspace:match("^(.*)/glsb%-local%-[^/]+$"))
    assert.are.equal("ok\n", sb:execute_command("echo ok").stdout)
    sb:terminate()
    assert_kept(keep)
    assert.are.same({}, helper.list_dir(base .. "/glsb-" .. uid))
  end)

  it("an owner file planted as a FIFO hangs neither --gc nor a create", function()
    local base = project()
    local root = base .. "/glsb-" .. uid
    for _, p in ipairs({ base .. "/glsb-local-fifo/owner.json", root .. "/glsb-local-fifo/glsb-owner",
      root .. "/build-fifo/glsb-owner" }) do
      assert(os.execute("mkdir -p " .. helper.q(p:match("^(.*)/")) .. " && mkfifo " .. helper.q(p)))
    end
    local t0 = os.time()
    local out, code = gc({ base }, 20)
    assert.are.equal(0, code, "--gc did not end (124: killed after 20 s): " .. out)
    out, code = create_in(base, 30)
    assert.are.equal(0, code, "the create did not end (124: killed after 30 s): " .. out)
    assert.is_true(os.time() - t0 < 40)
    assert.is_true(helper.exists(root .. "/glsb-local-fifo/glsb-owner"))
    assert.is_true(helper.exists(base .. "/glsb-local-fifo/owner.json"))
  end)

  it("an owner file planted as a symlink to /dev/zero is not read: --gc ends with a small peak RSS", function()
    local base = project()
    local root = base .. "/glsb-" .. uid
    for _, p in ipairs({ base .. "/glsb-local-zero/owner.json", root .. "/glsb-local-zero/glsb-owner" }) do
      assert(os.execute("mkdir -p " .. helper.q(p:match("^(.*)/")) .. " && ln -s /dev/zero " .. helper.q(p)))
    end
    local out, code, hwm = gc({ base }, 30)
    assert.are.equal(0, code, out)
    -- glsb-lua with the core loaded is ~10 MiB; reading /dev/zero took all the 2 GB allowed
    assert.is_true(hwm ~= nil and hwm < 64 * 1024, "peak RSS " .. tostring(hwm) .. " KiB: " .. out)
    assert.is_true(helper.exists(root .. "/glsb-local-zero"))
  end)

  it("in glsb's folder, an entry of another uid or with a record not in the strict format stays", function()
    local base = project()
    local root = base .. "/glsb-" .. uid
    local foreign = { base .. "/glsb-local-foreign", root .. "/glsb-local-foreign" }
    for _, d in ipairs(foreign) do
      assert(os.execute("mkdir -p " .. helper.q(d)))
      helper.write(d .. "/owner.json", OLD_RECORD)
      helper.write(d .. "/glsb-owner", NEW_RECORD)
      assert(os.execute("chown -R 65534:65534 " .. helper.q(d)))
    end
    local odd = {
      "glsb-owner 1\nowner 1 7\nsupervisor 1 7\nthen rm -rf /\n", -- a line of no known kind
      "glsb-owner 2\nowner 1 7\n",                                  -- another version
      "owner 1 7\n",                                                -- no header
      "glsb-owner 1\nowner 1 7",                                    -- cut (no final newline)
      '{"owner":{"pid":1,"start":7}}\n',                            -- the old JSON
    }
    for i, text in ipairs(odd) do
      assert(os.execute("mkdir -m 700 " .. helper.q(root .. "/glsb-local-odd" .. i)))
      helper.write(root .. "/glsb-local-odd" .. i .. "/glsb-owner", text)
    end
    -- one of ours in the format, whose owner is gone: that one goes
    assert(os.execute("mkdir -m 700 " .. helper.q(root .. "/glsb-local-stale")))
    helper.write(root .. "/glsb-local-stale/glsb-owner", NEW_RECORD)
    local out, code = gc({ base })
    assert.are.equal(0, code, out)
    assert.truthy(out:find("removed " .. root .. "/glsb-local-stale", 1, true), out)
    assert.truthy(out:find("1 stale sandbox directory removed", 1, true), out)
    for _, d in ipairs(foreign) do assert.is_true(helper.exists(d .. "/glsb-owner"), d .. " was removed") end
    for i = 1, #odd do assert.is_true(helper.exists(root .. "/glsb-local-odd" .. i), "odd record " .. i) end
  end)

  it("a glsb-<uid> folder that is not glsb's own is refused: --gc touches nothing in it, a create fails", function()
    local cases = {
      { "a symlink", function(base, elsewhere) assert(os.execute("ln -s " .. helper.q(elsewhere) .. " "
        .. helper.q(base .. "/glsb-" .. uid))) end, "is a link, not a directory" },
      { "another uid's", function(base, elsewhere)
        assert(os.execute("mv " .. helper.q(elsewhere) .. " " .. helper.q(base .. "/glsb-" .. uid) .. " && chown 65534 "
          .. helper.q(base .. "/glsb-" .. uid)))
      end, "belongs to uid 65534" },
      { "writable by others", function(base, elsewhere)
        assert(os.execute("mv " .. helper.q(elsewhere) .. " " .. helper.q(base .. "/glsb-" .. uid) .. " && chmod 1777 "
          .. helper.q(base .. "/glsb-" .. uid)))
      end, "may be written by others" },
    }
    for _, c in ipairs(cases) do
      local base = helper.private_tmp() .. "/proj"
      local elsewhere = helper.private_tmp() .. "/other"
      assert(os.execute("mkdir -p " .. helper.q(base) .. " " .. helper.q(elsewhere .. "/glsb-local-x")))
      helper.write(elsewhere .. "/glsb-local-x/glsb-owner", NEW_RECORD)
      c[2](base, elsewhere)
      local bait = base .. "/glsb-" .. uid .. "/glsb-local-x/glsb-owner"
      local out, code = gc({ base })
      assert.are.equal(1, code, c[1] .. ": " .. out)
      assert.truthy(out:find("refused", 1, true) and out:find(c[3], 1, true), c[1] .. ": " .. out)
      assert.is_true(helper.exists(bait), c[1] .. ": the bait was removed")
      local ok, err = pcall(glsb.create, "local", { host_workspace_dir = base })
      if ok then err:terminate() end
      assert.is_false(ok, c[1] .. ": the create went ahead")
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.truthy(tostring(err):find("is not glsb's own", 1, true), tostring(err))
      assert.truthy(tostring(err):find(c[3], 1, true), tostring(err))
      assert.is_true(helper.exists(bait), c[1] .. ": the bait was removed by the create")
    end
  end)
end)
