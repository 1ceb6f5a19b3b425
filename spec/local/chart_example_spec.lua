-- Runs examples/chart.lua with build/glsb-lua, as `make demo` does: the histogram drawn in the sandbox
-- is a valid PNG on the host.
local helper = require "local.helper"
local shell = require "support.shell"

describe("examples/chart.lua #local", function()
  it("writes the histogram as a PNG on the host, says where, and leaves nothing behind", function()
    require("support.python").need("matplotlib", pending)
    local tmp = helper.private_tmp()
    local png = tmp .. "/out/hist.png"
    assert(os.execute("mkdir -p " .. helper.q(tmp .. "/out")))
    local out, code = helper.sh("cd " .. helper.q(helper.root) .. " && TMPDIR=" .. helper.q(tmp)
      .. " build/glsb-lua examples/chart.lua " .. helper.q(png) .. " 2>&1")
    local data = shell.read(png)
    local leftovers = helper.list_dir(helper.workspace_root(tmp))
    helper.rm_rf(tmp)
    assert.are.equal(0, code, out)
    assert.matches("wrote " .. png:gsub("%p", "%%%0") .. " %(%d+ bytes, image/png%)", out)
    assert.are.equal("\137PNG\r\n\26\n", data:sub(1, 8))
    assert.are.equal("IHDR", data:sub(13, 16))
    local w, h = string.unpack(">I4I4", data, 17)
    assert.is_true(w > 100 and h > 100, w .. "x" .. h)
    -- the chart's data, for a reader without vision: one bar per value, 2 at 20
    assert.matches('chart: bar "a histogram of %[10, 20, 20, 30, 40%]"', out)
    assert.matches("\n  10: 1\n  20: 2\n  30: 1\n  40: 1\n", out)
    assert.are.same({}, leftovers)
  end)
end)
