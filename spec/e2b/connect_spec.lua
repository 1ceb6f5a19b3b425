-- Handles that outlive a process (issue 8 §4): sb:ref(), glsb.connect and glsb.list against the E2B
-- emulator, one of them from a second, fresh glsb-lua process. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local shell = require "support.shell"
local cjson = require "cjson"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

local GLSB_LUA = shell.repo .. "/build/glsb-lua"

-- Runs a chunk in a fresh glsb-lua with E2B_API_KEY set; returns its stdout and exit code.
local function fresh_process(key, chunk)
  return shell.sh(("E2B_API_KEY=%s %s -e %s 2>&1"):format(shell.q(key), shell.q(GLSB_LUA), shell.q(chunk)))
end

describe("e2b connect, ref and list #e2b", function()
  local emu

  setup(function() emu = emulator.start() end)
  teardown(function() if emu then emu:stop() end end)

  local function live_ids()
    local ids = {}
    for _, s in ipairs(emu:state().sandboxes or {}) do ids[s.sandboxID] = true end
    return ids
  end

  it("a fresh glsb-lua process reaches the same sandbox from a ref, state included", function()
    -- process 1: creates (keep_alive: it outlives the script), leaves state behind, prints its ref
    local out, code = fresh_process(emu.api_key, ([[
      local glsb = require "glsb"
      local cjson = require "cjson"
      local sb = glsb.create("e2b", { api_url = %q, sandbox_url = %q, timeout = 120, keep_alive = true,
        metadata = { job = "connect-spec" } })
      assert(sb:execute_code("x = 41").status == "success")
      assert(sb:execute_command("echo kept > /home/user/state.txt").status == "success")
      print(cjson.encode(sb:ref()))
    ]]):format(emu.base, emu.base))
    assert.equal(0, code, out)
    local ref = cjson.decode(out:match("{.*}"))
    assert.equal("e2b", ref.provider)
    assert.is_true(live_ids()[ref.sandbox_id], "keep_alive: the sandbox outlived process 1")
    assert.is_nil(ref.envd_access_token, "no secret in a ref unless asked")
    assert.is_nil(ref.api_key)
    -- process 2: connects with the ref alone (the key comes from its environment)
    out, code = fresh_process(emu.api_key, ([[
      local glsb = require "glsb"
      local sb = glsb.connect("e2b", require("cjson").decode(%q))
      print(sb:is_running(), sb.sandbox_id, sb.metadata.job)
      print(sb:execute_code("print(x + 1)").stdout)
      print(sb:download_file("/home/user/state.txt"))
      sb:terminate()
    ]]):format(cjson.encode(ref)))
    assert.equal(0, code, out)
    assert.matches("true\t" .. ref.sandbox_id .. "\tconnect%-spec\n42\n\nkept\n", out)
    assert.is_nil(live_ids()[ref.sandbox_id], "process 2 terminated it")
  end)

  it("connects by bare id in this process too, with the same contract as create", function()
    local sb = glsb.create("e2b", emu:opts { timeout = 60 })
    finally(function() pcall(sb.terminate, sb) end)
    sb:execute_code("y = 'same'")
    local again = glsb.connect("e2b", sb.sandbox_id, emu:opts { timeout = 90 })
    assert.is_true(again:is_running())
    local r = again:execute_code("print(y)")
    assert.equal(Status.SUCCESS, r.status, tostring(r))
    assert.equal("same\n", r.stdout)
    assert.equal(Status.SUCCESS, again:execute_command("true").status)
    again:terminate()
    assert.is_false(again:is_running())
    local ok, err = pcall(again.execute_code, again, "1")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxNotInitializedError), tostring(err))
  end)

  it("a ref with secrets reaches the data plane without the API key", function()
    local sb = glsb.create("e2b", emu:opts { timeout = 60 })
    finally(function() pcall(sb.terminate, sb) end)
    local ref = sb:ref { secrets = true }
    assert.is_string(ref.envd_access_token)
    local saved = os.getenv("E2B_API_KEY")
    assert.is_nil(saved, "the spec needs E2B_API_KEY unset")
    local again = glsb.connect("e2b", ref, {})
    assert.equal("1\n", again:execute_code("print(1)").stdout)
  end)

  it("refuses a ref of another provider, a bad ref, and an unknown sandbox", function()
    assert.has_error(function() glsb.connect("e2b", { provider = "local", sandbox_id = "x" }, emu:opts()) end,
      "connect: the ref is for provider 'local', not 'e2b'")
    assert.has_error(function() glsb.connect("e2b", 42, emu:opts()) end)
    assert.has_error(function() glsb.connect("e2b", { sandbox_id = "" }, emu:opts()) end)
    local ok, err = pcall(glsb.connect, "e2b", "i-no-such-sandbox", emu:opts())
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.equal(glsb.Stage.CONNECT, err.stage)
    assert.matches("no sandbox 'i%-no%-such%-sandbox'", tostring(err))
  end)

  it("lists the account's sandboxes by metadata and state, as refs", function()
    local a = glsb.create("e2b", emu:opts { timeout = 60, metadata = { team = "ml", run = "1" } })
    local b = glsb.create("e2b", emu:opts { timeout = 60, metadata = { team = "web" } })
    finally(function() pcall(a.terminate, a) pcall(b.terminate, b) end)
    local refs = glsb.list("e2b", emu:opts { metadata = { team = "ml" } })
    assert.equal(1, #refs)
    assert.equal(a.sandbox_id, refs[1].sandbox_id)
    assert.equal("e2b", refs[1].provider)
    assert.equal("running", refs[1].state)
    assert.same({ team = "ml", run = "1" }, refs[1].metadata)
    assert.equal(0, #glsb.list("e2b", emu:opts { metadata = { team = "ml" }, state = "paused" }))
    local all = glsb.list("e2b", emu:opts { limit = 1 })
    assert.equal(1, #all)
    -- a listed ref is enough to connect
    local again = glsb.connect("e2b", refs[1], emu:opts())
    assert.equal(Status.SUCCESS, again:execute_code("pass").status)
  end)
end)

describe("local connect and list #local", function()
  it("connect says clearly that a local sandbox belongs to the process that created it; list lists", function()
    local ok, err = pcall(glsb.connect, "local", "local-abc", {})
    assert.is_false(ok)
    assert.matches("belongs to the process that created it", tostring(err))
    -- another process's sandboxes are listed (and can be killed: spec/contract, spec/cli)
    assert.is_table(glsb.list("local", {}))
  end)
end)
