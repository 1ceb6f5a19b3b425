-- The provider contract suite against the local provider.
local helper = require "local.helper"

local root = helper.private_tmp()
local wheels = helper.private_tmp() -- an empty index: every install fails fast
local cache = helper.private_tmp() -- snapshots' layers (and the agent's bytecode) land here, not in ~/.cache

require("contract.suite")("local", function()
  return { host_workspace_dir = root, cache_dir = cache }
end, {
  tag = "#local",
  call_languages = { "bash", "javascript" }, -- javascript: node on the host (scripts/install-deps)
  background = true,  -- start_command: the agent starts it at once; its events share the stream (mux.lua)
  ports = false,      -- get_host: without network = true nothing is forwarded (spec/local: with it)
  connect_listed = false, -- a sandbox is a child process tree of its creator: listed and killed, not reached
  leftovers = function() return helper.list_dir(helper.workspace_root(root)) end,
  package_opts = function() return { pip_find_links = wheels } end,
})

describe("contract suite cleanup #contract #local", function()
  it("leaves its private directories empty", function()
    assert.are.same({}, helper.list_dir(helper.workspace_root(root)))
    helper.rm_rf(root)
    helper.rm_rf(wheels)
    helper.rm_rf(cache)
  end)
end)
