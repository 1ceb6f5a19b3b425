-- The interpreter suite (spec/interpreter/suite.lua) on the local provider.
local helper = require "local.helper"

local root = helper.private_tmp()

require("interpreter.suite")("local", function()
  return { host_workspace_dir = root }
end, {
  tag = "#local",
  leftovers = function() return helper.list_dir(helper.workspace_root(root)) end,
})

describe("interpreter suite cleanup #interpreter #local", function()
  it("leaves its private directory empty", function()
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
    helper.rm_rf(root)
  end)
end)
