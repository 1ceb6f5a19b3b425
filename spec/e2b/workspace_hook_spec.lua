-- The workspace primitives hook of the E2B adapter (issue 4): glsb-confine uploaded once per
-- sandbox through /files and run with an exact argv through envd's process channel. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local cjson = require "cjson"

local Status = glsb.ExecutionStatus

local HELPER = emulator.ROOT .. "/build/glsb-confine"

describe("e2b workspace hook #e2b", function()
  local emu, sb

  setup(function()
    local f = io.open(HELPER, "rb")
    assert(f, "needs the static helper: make build/glsb-confine")
    f:close()
    emu = emulator.start()
    sb = glsb.create("e2b", emu:opts { timeout = 120 })
  end)

  teardown(function()
    if sb then pcall(sb.terminate, sb) end
    if emu then emu:stop() end
  end)

  after_each(function() emu:clear_faults() end)

  it("uploads the helper once per sandbox", function()
    local uploads = emu:fault { plane = "envd", method = "POST", path = "^/files$", action = "delay", delayMs = 0,
      times = -1 }
    local path = sb:ensure_helper(HELPER)
    assert.matches("^/tmp/%.glsb/glsb%-confine%-%x+$", path)
    assert.equal(path, sb:ensure_helper(HELPER))
    local fired
    for _, f in ipairs(emu:faults()) do if f.id == uploads.ids[1] then fired = f.fired end end
    assert.equal(1, fired)
  end)

  it("writes a workspace file through the helper, data on stdin, bytes exact", function()
    local helper = sb:ensure_helper(HELPER)
    assert.equal(Status.SUCCESS, sb:run_helper({ "/bin/mkdir", "-p", "/home/user/ws" }).status)
    local data = "line\0with nul\255\n"
    local r = sb:run_helper({ helper, "write", "--root", "/home/user/ws", "--path", "dir/out.bin",
      "--max-bytes", "64", "--no-overwrite" }, { stdin = data, timeout = 30 })
    assert.equal(Status.SUCCESS, r.status, tostring(r))
    local j = cjson.decode(r.stdout)
    assert.is_true(j.ok)
    assert.equal(#data, j.bytes)
    assert.equal(data, sb:download_file("/home/user/ws/dir/out.bin"))
    -- no silent replacement, and the staged stdin file is gone
    r = sb:run_helper({ helper, "write", "--root", "/home/user/ws", "--path", "dir/out.bin", "--max-bytes", "64",
      "--no-overwrite" }, { stdin = "other" })
    assert.equal(Status.ERROR, r.status)
    assert.equal("exists", cjson.decode(r.stdout).error)
    local ls = sb:execute_command("ls /tmp/.glsb")
    assert.is_nil(ls.stdout:find("stdin-", 1, true), ls.stdout)
  end)

  it("runs an exact argv: shell syntax reaches the program literally", function()
    local helper = sb:ensure_helper(HELPER)
    sb:run_helper({ "/bin/mkdir", "-p", "/home/user/ws" })
    local r = sb:run_helper({ helper, "run", "--root", "/home/user/ws", "--timeout", "10", "--",
      "/bin/echo", "$(id)", ";", "x y" })
    assert.equal(Status.SUCCESS, r.status, tostring(r))
    local j = cjson.decode(r.stdout)
    assert.is_true(j.ok)
    assert.equal(0, j.exit_code)
    assert.equal("$(id) ; x y\n", require("glsb.core").b64decode(j.stdout))
  end)

  it("raises SandboxNotInitializedError after terminate", function()
    local s = glsb.create("e2b", emu:opts())
    s:terminate()
    local ok, err = pcall(s.ensure_helper, s, HELPER)
    assert.is_false(ok)
    assert.equal(glsb.Stage.NOT_INITIALIZED, err.stage)
  end)
end)
