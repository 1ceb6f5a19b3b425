-- Issue 9, item 2: the host's memory is bounded by its caps whatever the sandbox sends. The code runs
-- in the agent's process, so it can replace the agent's handlers and stream as much as it likes; the
-- host counts what it keeps (max_download_bytes, the output cap) and drops the rest unread.
--
-- Each case runs in a fresh glsb-lua process, so its peak resident size (VmHWM) is its own.
local helper = require "local.helper"

-- Replaces the agent's download handler with one that streams `mib` MiB of chunks for any file (what
-- 1.5 GB for a 1 MiB cap came from), and writes a real file over the cap and one at it. Downloads now
-- go through glsb-confine's control channel (item 9), so the handler has no say: the big file is
-- refused by its size and the small one comes whole (a case that looked only for nil passed with
-- no forged handler and no file at all).
local function forged_read(mib)
  return ([[
import __main__
def forged(req):
    piece = b"x" * (1024 * 1024)
    for _ in range(%d):
        __main__.send({"ev": "chunk", "id": req["id"]}, piece)
    return {"ok": True, "size": %d * 1024 * 1024}
__main__.op_read = forged
open("/files/anything", "wb").write(b"b" * (8 << 20))
open("/files/small", "wb").write(b"s" * (1 << 20))
]]):format(mib, mib)
end

local SCRIPT = [[
local glsb = require "glsb"
glsb.log.set_handler(function() end)
local mode, root, code = arg[1], arg[2], arg[3]
local sb = glsb.create("local", { host_workspace_dir = root, max_download_bytes = 1024 * 1024 })
local r = sb:execute_code(code)
assert(r.status == "success", tostring(r))
local got
if mode == "download" then
  local data = sb:download_file("/files/anything", { timeout = 60 })
  local small = sb:download_file("/files/small", { timeout = 60 })
  got = (data and #data or "nil") .. " " .. (small == string.rep("s", 1024 * 1024) and "whole" or tostring(small))
else
  local r2 = sb:execute_code("import __main__\npiece = b'y' * (1024 * 1024)\n"
    .. "for _ in range(400): __main__.send_out(__main__.STATE.current, 1, piece)\nprint('done')")
  got = #r2.stdout .. " " .. tostring(r2.stdout_truncated)
end
sb:terminate()
local hwm = 0
for line in io.lines("/proc/self/status") do
  local kb = line:match("^VmHWM:%s+(%d+)")
  if kb then hwm = tonumber(kb) // 1024 end
end
print(got, hwm)
]]

describe("the host's memory is bounded whatever the sandbox sends #security #local", function()
  local tmp, script

  setup(function()
    tmp = helper.private_tmp()
    script = tmp .. "/flood.lua"
    helper.write(script, SCRIPT)
    os.execute("mkdir " .. helper.q(tmp .. "/ws"))
  end)
  teardown(function()
    local left = helper.list_dir(helper.workspace_root(tmp .. "/ws"))
    helper.rm_rf(tmp)
    assert.are.same({}, left)
  end)

  local function run(mode, code)
    local out, status = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua " .. helper.q(script) .. " "
      .. mode .. " " .. helper.q(tmp .. "/ws") .. " " .. helper.q(code) .. " 2>&1")
    assert.are.equal(0, status, out)
    local got, hwm = out:match("([^\n]*)\t(%d+)\n$")
    assert.truthy(hwm, out)
    return got, tonumber(hwm)
  end

  it("a forged download of 512 MiB against a 1 MiB cap returns nil and keeps no more than the cap", function()
    local got, hwm = run("download", forged_read(512))
    assert.are.equal("nil whole", got)
    assert.is_true(hwm < 160, "peak resident size " .. hwm .. " MiB")
  end)

  it("400 MiB of forged output frames keep the 10 MiB cap", function()
    local got, hwm = run("output", "pass")
    local size, truncated = got:match("^(%d+) (%a+)$")
    assert.truthy(size, got)
    assert.is_true(tonumber(size) <= 10 * 1024 * 1024 + 200, got)
    assert.are.equal("true", truncated)
    assert.is_true(hwm < 160, "peak resident size " .. hwm .. " MiB")
  end)
end)
