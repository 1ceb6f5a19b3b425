-- Rich results on E2B (issue 21): the result lines' binary forms decoded once, chart and DataFrame data
-- under extra without JSON nulls, and the results' cap: E2B's server sends every display, so the host
-- keeps glsb.results.CAP of them and drops the rest as the lines stream past. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local core = require "glsb.core"
local shell = require "support.shell"

local Status = glsb.ExecutionStatus

-- Runs in a fresh glsb-lua process, so that its peak resident size (VmHWM) is this call's own.
local SCRIPT = [[
local glsb = require "glsb"
glsb.log.set_handler(function() end)
local key, url, code, out = arg[1], arg[2], arg[3], arg[4]
local sb = glsb.create("e2b", { api_key = key, api_url = url, sandbox_url = url, timeout = 300 })
local r = sb:execute_code(code, { timeout = 240 })
sb:terminate()
local hwm
for line in io.lines("/proc/self/status") do hwm = hwm or line:match("^VmHWM:%s+(%d+)") end
local last = r.results[#r.results]
local f = assert(io.open(out, "wb"))
f:write(table.concat({ r.status, tostring(r.results_truncated), #r:images(), tostring(hwm),
  last and last.text or "", (tostring(r.error):gsub("\n", " ")) }, "\n"))
f:close()
]]

describe("e2b rich results #e2b", function()
  local emu, sb

  setup(function()
    emu = emulator.start()
    sb = glsb.create("e2b", emu:opts { timeout = 300 })
  end)
  teardown(function()
    if sb then pcall(sb.terminate, sb) end
    if emu then emu:stop() end
  end)

  it("chart and DataFrame data are under extra, JSON nulls left out, binary forms bytes", function()
    require("support.python").need("matplotlib, pandas", pending)
    local r = sb:execute_code("import matplotlib.pyplot as plt\nimport pandas as pd\n"
      .. "_ = plt.scatter([1, 2], [3, 4], label='pts')\ndisplay(pd.DataFrame({'a': [1, 2]}))", { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(2, #r.results)
    local df, fig = r.results[1], r.results[2]
    assert.are.same({ a = { 1, 2 } }, df.extra.data)
    local c = fig.extra.chart
    assert.are.equal("scatter", c.type)
    assert.are.same({ { 1, 3 }, { 2, 4 } }, c.elements[1].points)
    assert.are.equal("pts", c.elements[1].label)
    assert.is_nil(c.title)     -- null on the wire
    assert.is_nil(c.x_label)
    assert.are.equal("\137PNG\r\n\26\n", fig.png:sub(1, 8))
  end)

  it("1,000 large images: the host keeps glsb.results.CAP of them and its memory stays bounded", function()
    local dir = assert(core.mkdtemp("/tmp/glsb-e2b-res-XXXXXX"))
    finally(function() core.rmtree(dir) end)
    local script = dir .. "/run.lua"
    local f = assert(io.open(script, "w"))
    f:write(SCRIPT)
    f:close()
    -- 256 KiB each: 250 MiB of images, some 340 MiB of result lines on the wire
    local code = "blob = b'\\x89PNG\\r\\n\\x1a\\n' + bytes(256 * 1024)\nclass Big:\n    def _repr_png_(self):\n"
      .. "        return blob\n    def __repr__(self):\n        return 'Big()'\nfor _ in range(1000):\n    display(Big())"
    local cmd = shell.join({ emulator.ROOT .. "/build/glsb-lua", script, emu.api_key, emu.base, code, dir .. "/out" })
    local _, rc = shell.sh(cmd)
    assert.are.equal(0, rc)
    local status, truncated, images, hwm, note, err = shell.read(dir .. "/out")
      :match("^([^\n]*)\n([^\n]*)\n(%d+)\n(%d+)\n([^\n]*)\n(.*)$")
    assert.are.equal(Status.SUCCESS, status, err)
    assert.are.equal("true", truncated)
    local per = 8 + 256 * 1024 + #"Big()"
    local kept = glsb.results.CAP // per
    assert.are.equal(kept, tonumber(images))
    assert.are.equal(("[glsb: results truncated at %d bytes; %d more results"):format(glsb.results.CAP, 1000 - kept),
      note:match("^(.- more results)"))
    -- the kept images (10 MiB), one line at a time (under 1 MiB) and the interpreter: far from 340 MiB
    assert.is_true(tonumber(hwm) < 96 * 1024, "peak RSS " .. hwm .. " KiB")
  end)
end)
