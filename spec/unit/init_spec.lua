-- glsb (init): the public surface of `require "glsb"`.
local glsb = require "glsb"

describe("glsb #unit", function()
  it("exports the public names of docs/contract.md", function()
    for _, k in ipairs({ "ExecutionStatus", "ExecutionResult", "FailureDetail", "SandboxFile", "Stage", "Language",
      "errors", "constants" }) do
      assert.is_table(glsb[k], k)
    end
    for _, k in ipairs({ "run", "spawn", "gather", "sleep", "create", "template", "provider",
      "write_workspace_file", "run_workspace_command" }) do
      assert.is_function(glsb[k], k)
    end
    assert.are.equal("success", glsb.ExecutionStatus.SUCCESS)
    assert.are.equal("create", glsb.Stage.CREATE)
    assert.are.equal("python", glsb.Language.PYTHON)
    assert.is_function(glsb.errors.is)
    assert.is_table(glsb.errors.SandboxStartError)
    assert.are.equal("local", glsb.constants.DEFAULT_PROVIDER)
    assert.are.equal("/files", glsb.constants.DEFAULT_UPLOAD_DIR)
    assert.are.equal(30, glsb.constants.DEFAULT_COMMAND_TIMEOUT)
  end)

  it("re-exports the loop: run, spawn, gather, sleep", function()
    local a, b = glsb.run(function()
      local t1 = glsb.spawn(function() glsb.sleep(0.01) return "a" end)
      local t2 = glsb.spawn(function() return "b" end)
      return glsb.gather(t1, t2)
    end)
    assert.are.same({ "a", "b" }, { a, b })
  end)

  it("rejects a non-string provider name", function()
    assert.has_error(function() glsb.create(42) end)
    assert.has_error(function() glsb.template({}) end)
  end)

  it("delegates workspace primitives to glsb.workspace", function()
    local saved = package.loaded["glsb.workspace"]
    local seen = {}
    package.loaded["glsb.workspace"] = {
      write_workspace_file = function(sb, req) seen.write = { sb, req } return "w" end,
      run_workspace_command = function(sb, argv, opts) seen.run = { sb, argv, opts } return "r" end,
    }
    local sb, req, argv, opts = {}, { relative_path = "a" }, { "ls" }, { timeout = 1 }
    local w = glsb.write_workspace_file(sb, req)
    local r = glsb.run_workspace_command(sb, argv, opts)
    package.loaded["glsb.workspace"] = saved
    assert.are.equal("w", w)
    assert.are.equal("r", r)
    assert.are.same({ sb, req }, seen.write)
    assert.are.same({ sb, argv, opts }, seen.run)
  end)
end)
