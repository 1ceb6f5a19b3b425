-- glsb-lua --doctor (glsb.doctor): readable features plus a live check.
local helper = require "local.helper"

describe("glsb-lua --doctor #local", function()
  it("prints every feature with what the local provider does, and a passing live check", function()
    local out, code = helper.sh("cd " .. helper.q(helper.root) .. " && build/glsb-lua --doctor 2>&1")
    assert.are.equal(0, code, out)
    for _, want in ipairs({ "helper   /", "python   /", "user namespace     yes", "seccomp filter     yes",
      "net namespace      yes", "cgroup limits", "rlimits" }) do
      assert.truthy(out:find(want, 1, true), "missing '" .. want .. "' in:\n" .. out)
    end
    assert.truthy(out:match("landlock%s+ABI %d+%s"), out)
    assert.truthy(out:match("verdict: ready %- live check .- (%d+) ms"), out)
  end)

  it("says what is missing and fails when the helper cannot be found", function()
    local text, ready = require("glsb.doctor").report({ confine = "/nonexistent/glsb-confine", live = false })
    assert.is_false(ready)
    assert.truthy(text:find("helper   MISSING", 1, true), text)
  end)
end)
