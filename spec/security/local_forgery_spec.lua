-- Issue 9, item 9: the code runs in the agent's process and can replace any of its handlers. The
-- workspace primitives, uploads and downloads promise confinement and byte counts, so they do not go
-- through the agent: the supervisor runs them (glsb-confine's control channel); sb.files too. Here the
-- code replaces the agent's request handler with one that answers every file and helper request (and
-- every exact argv, which sb.files used to run through the agent) with a lie; the results must stay true.
local glsb = require "glsb"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

-- Forged answers in the agent's own protocol: a write that wrote nothing, a download of other bytes,
-- a helper run that "succeeded" with made-up output.
local FORGE = [[
import __main__, json
real = __main__.handle
def forged(req):
    op = req.get("op")
    if op == "write":
        payload = req.get("_payload")
        if payload is not None:
            payload.drain()
        return {"ok": True, "path": req.get("path"), "size": 12345}
    if op == "read":
        __main__.send({"ev": "chunk", "id": req["id"]}, b"forged bytes")
        return {"ok": True, "size": 12}
    if op == "argv":
        payload = req.get("_payload")
        if payload is not None:
            payload.drain()
        lie = json.dumps({"ok": True, "bytes": 999, "path": "x", "replaced": False, "exit_code": 0,
                          "signal": None, "timed_out": False, "stdout": "Zm9yZ2Vk", "stderr": "",
                          "stdout_byte_count": 6, "stderr_byte_count": 0,
                          "stdout_byte_count_complete": True, "stderr_byte_count_complete": True,
                          "stdout_truncated": False, "stderr_truncated": False}).encode() + b"\n"
        __main__.send_out(req["id"], 1, lie)
        return {"ok": True, "exit_code": 0}
    return real(req)
__main__.handle = forged
print("forged")
]]

describe("results the code cannot forge #security #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function()
    helper.remove_root(root)
  end)
  before_each(function()
    sb = glsb.create("local", { host_workspace_dir = root })
    local r = sb:execute_code(FORGE)
    assert.are.equal("forged\n", r.stdout, tostring(r))
  end)
  after_each(function() if sb then sb:terminate() end end)

  it("write_workspace_file writes and reports the bytes it wrote", function()
    local w = glsb.write_workspace_file(sb, { relative_path = "reports/real.txt", data = "real data" })
    assert.are.equal(9, w.bytes)
    local r = sb:execute_command("cat /home/user/reports/real.txt")
    assert.are.equal("real data", r.stdout)
  end)

  it("run_workspace_command reports what the command printed", function()
    local w = glsb.run_workspace_command(sb, { "/bin/echo", "truth" }, { timeout = 10 })
    assert.are.equal("truth\n", w.stdout)
    assert.are.equal(6, w.stdout_byte_count)
  end)

  it("an upload lands, a download returns the file's bytes", function()
    local r = sb:execute_code("print(open('/files/up.txt').read())",
      { files = { glsb.SandboxFile.from_bytes("uploaded", "up.txt") } })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("uploaded\n", r.stdout)
    sb:execute_command("printf 'the real bytes' > /home/user/f.bin")
    assert.are.equal("the real bytes", sb:download_file("/home/user/f.bin"))
  end)

  it("sb.files reports the files as they are", function()
    local f = sb.files
    assert.is_true(f:make_dir("real-dir"))
    assert.is_false(f:make_dir("real-dir"))
    assert.is_true(f:write("real-dir/one.txt", "one"))
    assert.are.equal("one", sb:execute_command("cat /home/user/real-dir/one.txt").stdout)
    assert.are.equal("one", f:read("real-dir/one.txt"))
    local names = {}
    for _, e in ipairs(f:list("real-dir")) do names[#names + 1] = e.name .. ":" .. e.type end
    assert.are.same({ "one.txt:file" }, names)
    assert.is_true(f:exists("real-dir/one.txt"))
    assert.is_false(f:exists("real-dir/none.txt"))
    f:remove("real-dir")
    assert.are.equal(1, sb:execute_command("test -e /home/user/real-dir").code)
    assert.is_false(f:exists("real-dir"))
  end)
end)
