-- Every operation that can fail names its own stage: set_timeout, info, get_host and list no longer
-- borrow "execute" or "connect".
local glsb = require "glsb"
local errors = require "glsb.errors"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"

local Stage = glsb.Stage

describe("stages of the handle operations #unit", function()
  local provider, logs, prev

  before_each(function()
    provider = fake_provider.new("fake")
    registry.register("fake", provider)
    logs = {}
    prev = glsb.log.set_handler(function(level, msg, fields)
      logs[#logs + 1] = { level = level, msg = msg, fields = fields }
    end)
  end)
  after_each(function()
    glsb.log.set_handler(prev)
    registry.unregister("fake")
  end)

  it("list: a provider that cannot list, and a list that fails, raise SandboxStartError[list]", function()
    local ok, err = pcall(glsb.list, "fake")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal(Stage.LIST, err.stage)
    provider.Sandbox._list = function() error({ http_status = 503, message = "503 Service Unavailable" }, 0) end
    ok, err = pcall(glsb.list, "fake")
    assert.is_false(ok)
    assert.are.equal(Stage.LIST, err.stage)
    assert.is_true(err.transient, "the cause is kept: a 503 may be tried again")
  end)

  it("get_host: unsupported, or a hook that fails, is SandboxExecutionError[get_host]", function()
    local sb = glsb.create("fake")
    local ok, err = pcall(sb.get_host, sb, 8080)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError))
    assert.are.equal(Stage.GET_HOST, err.stage)
    provider.Sandbox._get_host = function() error({ phase = "connect", code = "COULDNT_CONNECT", retry_safe = true }, 0) end
    ok, err = pcall(sb.get_host, sb, 8080)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError))
    assert.are.equal(Stage.GET_HOST, err.stage)
    sb:terminate()
  end)

  it("info reports its own stage when the provider's call fails (logged, not raised)", function()
    local sb = glsb.create("fake")
    provider.Sandbox._info = function() error(errors.new(errors.SandboxExecutionError, Stage.INFO, "info: 500"), 0) end
    local i = sb:info()
    assert.are.equal("running", i.state)
    assert.matches("info: the provider's report failed: SandboxExecutionError%[info%]", logs[#logs].msg)
    sb:terminate()
  end)

  it("the stage set has one member per operation, all distinct", function()
    local seen = {}
    for name, v in pairs(Stage) do
      assert.is_nil(seen[v], name)
      seen[v] = true
    end
    for _, k in ipairs({ "SET_TIMEOUT", "INFO", "GET_HOST", "LIST", "EXECUTE", "CONNECT" }) do
      assert.is_string(Stage[k])
    end
  end)

  it("README.md and docs/contract.md §6.1 list every stage, and none that is not one", function()
    local root = require("support.shell").repo
    local function listed(path, from, to)
      local f = assert(io.open(root .. "/" .. path, "rb"))
      local text = f:read("a")
      f:close()
      local s = assert(text:find(from, 1, true), path .. ": " .. from)
      local e = assert(text:find(to, s, true), path .. ": " .. to)
      local names = {}
      for w in text:sub(s + #from, e - 1):gmatch("`([%a_]+)`") do names[#names + 1] = w end
      table.sort(names)
      return names
    end
    local all = {}
    for _, v in pairs(Stage) do all[#all + 1] = v end
    table.sort(all)
    assert.are.same(all, listed("README.md", "Each has `stage` (one of `glsb.Stage`:", "; `docs/contract.md`"))
    assert.are.same(all, listed("docs/contract.md", "also the `error_code` of log lines:", ": one per operation"))
  end)
end)
