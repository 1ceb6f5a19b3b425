-- Issue 25 §1, "output kept as pieces": what the host keeps of a run's output costs the cap and a constant,
-- whatever the framing. Sandbox code (local) or a server (E2B's envd) that sends output one byte per frame
-- kept 2 x 10 MiB at 1,101 MiB of host memory (x55), 4.8 M frames of a background command 283 MiB, 10 MiB
-- of envd frames 630 MiB: every byte was a Lua string of its own in a list.
--
-- Each case runs in a fresh glsb-lua process (its VmHWM is its own) with the output cap lowered to CAP, so
-- that a few million frames pass it; the bound is that process's baseline + 4 x CAP (the kept text, its
-- joined copy, the result's copy with the note, a frame batch) + MARGIN.
-- #security
local hostile = require "security.hostile.helper"
local helper = require "local.helper"
local cjson = require "cjson"

local MiB = hostile.MiB
local CAP = MiB
local MARGIN = 32

-- Python for a sandbox: `frames` one-byte out frames, alternately stdout and stderr, with request id
-- `rid` (an expression), written to the agent's protocol stream in large writes (hostile code is fast).
local function one_byte_frames(rid, frames)
  return table.concat({
    "import __main__",
    "rid = " .. rid,
    "blob = b''.join(b'{\"ev\":\"out\",\"id\":%d,\"s\":%d,\"n\":1}\\nx' % (rid, 1 + (i & 1)) for i in range(20000))",
    "for _ in range(" .. frames .. " // 20000): __main__._write_all((blob,))",
    "print('end')",
  }, "\n")
end

describe("output kept as pieces (issue 25 §1) #security", function()
  local srv, root, baseline

  setup(function()
    srv = hostile.server()
    baseline = hostile.baseline_mib(srv.url)
    root = helper.private_tmp()
  end)
  teardown(function()
    if srv then srv:stop() end
    if root then helper.remove_root(root) end
  end)

  local function bound() return baseline + 4 * CAP / MiB + MARGIN end

  it("local: 2.2 M one-byte frames keep the cap of each stream, at the cap's cost", function()
    local got = hostile.run([[
require("glsb.output").CAP = tonumber(arg[2])
glsb.log.set_handler(function() end)
local sb = glsb.create("local", { host_workspace_dir = arg[1] })
local r = sb:execute_code(arg[3], { timeout = 300 })
sb:terminate()
report { status = r.status, stdout = #r.stdout, stderr = #r.stderr, t1 = r.stdout_truncated, t2 = r.stderr_truncated }
]], { args = { root, CAP, one_byte_frames("__main__.STATE.current", 2200000) }, timeout = 400 })
    local out = hostile.must(got)
    assert.are.equal("success", out.status)
    assert.is_true(out.t1 and out.t2)
    assert.is_true(out.stdout >= CAP and out.stdout < CAP + 200, out.stdout)
    hostile.under(got, bound())
  end)

  it("local: a background command's 2 M one-byte frames keep what they hold at its cost", function()
    local got = hostile.run([[
require("glsb.output").CAP = tonumber(arg[2])
glsb.log.set_handler(function() end)
local sb = glsb.create("local", { host_workspace_dir = arg[1] })
local h = sb:start_command("sleep 300", { timeout = 400 })
-- the frames carry the background command's id: the foreground call's reader hands them to its box
local r = sb:execute_code(arg[3], { timeout = 300 })
local o, e = h:output()
h:kill()
h:wait(30)
sb:terminate()
report { status = r.status, stdout = #o, stderr = #e }
]], { args = { root, CAP, one_byte_frames("__main__.STATE.current - 1", 2000000) }, timeout = 400 })
    local out = hostile.must(got)
    assert.are.equal("success", out.status)
    assert.are.equal(1000000, out.stdout)
    assert.are.equal(1000000, out.stderr)
    hostile.under(got, bound())
  end)

  it("e2b: envd's 1.2 M one-byte data frames keep the cap at its cost", function()
    local frame = hostile.envelope('{"event":{"data":{"stdout":"eA=="}}}')
    srv:plan(hostile.with({
      { method = "POST", path = "Process/Start", respond = { headers = { ["Content-Type"] = "application/connect+json" },
        ["repeat"] = { head_b64 = hostile.b64(hostile.envelope('{"event":{"start":{"pid":7}}}')),
          chunk_b64 = hostile.b64(frame), count = 1200000,
          tail_b64 = hostile.b64(hostile.envelope('{"event":{"end":{"exitCode":0,"exited":true}}}')
            .. hostile.envelope("{}", 2)) } } },
    }, hostile.rules("e2b", srv.url)))
    local got = hostile.run([[
require("glsb.output").CAP = tonumber(arg[2])
local sb = glsb.create("e2b", cjson.decode(arg[1]))
local r = sb:execute_command("flood", { timeout = 300 })
sb:terminate()
report { status = r.status, stdout = #r.stdout, t = r.stdout_truncated }
]], { args = { cjson.encode(hostile.opts("e2b", srv.url)), CAP }, timeout = 400 })
    local out = hostile.must(got)
    assert.are.equal("success", out.status)
    assert.is_true(out.t)
    assert.is_true(out.stdout >= CAP and out.stdout < CAP + 200, out.stdout)
    hostile.under(got, bound())
  end)
end)
