-- Templates on Bedrock AgentCore: custom code interpreters found or created from the spec's content
-- hash, waited for until READY (CREATE_FAILED is a TemplateBuildError with the failureReason), and
-- sandboxes from them installing the spec's packages at start. #bedrock
local emulator = require "bedrock.emulator"
local glsb = require "glsb"
local errors = require "glsb.errors"

local function ops(log, op, tool)
  local out = {}
  for _, r in ipairs(log) do
    if r.op == op and (tool == nil or r.tool == tool) then out[#out + 1] = r end
  end
  return out
end

describe("bedrock templates #bedrock", function()
  local emu, builder, prev_log

  setup(function()
    emu = emulator.start { create_delay_ms = 300 }
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  before_each(function()
    emu:reset()
    builder = glsb.template("bedrock", emu:opts { sleep = function(s) glsb.sleep(math.min(s, 0.05)) end })
  end)
  after_each(function() assert.are.same({}, emu:leftovers()) end)

  it("creates a custom interpreter once for the same content, and waits until it is READY", function()
    local since = emu:last_seq()
    local res = builder:ensure { name = "data-tools", packages = { "pip" } }
    assert.is_true(res.built)
    assert.matches("^glsb_data_tools_" .. res.hash:sub(1, 12) .. "%-%w+$", res.ref.template_id)
    assert.are.same({ "pip" }, res.ref.packages)
    local state = emu:state()
    assert.are.equal(1, #state.interpreters)
    assert.are.equal("READY", state.interpreters[1].status)
    local again = builder:ensure { name = "data-tools", packages = { "pip" } }
    assert.is_false(again.built)
    assert.are.equal(res.ref.template_id, again.ref.template_id)
    local renamed = builder:ensure { name = "other-name", packages = { "pip" } }
    assert.is_false(renamed.built, "the hash, not the name, identifies the content")
    local creates = ops(emu:requests(since), "CreateCodeInterpreter")
    assert.are.equal(1, #creates)
    local other = builder:ensure { name = "data-tools", packages = { "pip", "setuptools" } }
    assert.is_true(other.built)
    assert.are_not.equal(res.ref.template_id, other.ref.template_id)
  end)

  it("sandboxes from a template (ref or id) start on its interpreter and install its packages", function()
    local res = builder:ensure { name = "with-pip", packages = { "pip" } }
    for _, template in ipairs({ res.ref, res.ref.template_id }) do
      local since = emu:last_seq()
      local sb = glsb.create("bedrock", emu:opts { template = template })
      assert.are.equal(res.ref.template_id, sb.identifier)
      local r = sb:execute_code("print('on the template')")
      assert.are.equal("on the template\n", r.stdout)
      sb:terminate()
      local log = emu:requests(since)
      local start = ops(log, "StartCodeInterpreterSession")[1]
      assert.truthy(start.path:find("/code-interpreters/" .. res.ref.template_id .. "/sessions/start", 1, true))
      local installs = ops(log, "InvokeCodeInterpreter", "executeCommand")
      assert.are.equal(1, #installs, "one pip install at start")
    end
  end)

  it("a build that ends CREATE_FAILED is a TemplateBuildError with the failure reason", function()
    emu:fault { op = "CreateCodeInterpreter", action = "create_failed", failureReason = "the role cannot be assumed" }
    local ok, err = pcall(builder.ensure, builder, { name = "broken", packages = { "pip" } })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    assert.are.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
    assert.matches("CREATE_FAILED: the role cannot be assumed", tostring(err), 1, true)
    -- the next ensure of the same content removes the failed interpreter and builds it again
    local res = builder:ensure { name = "broken", packages = { "pip" } }
    assert.is_true(res.built)
    local state = emu:state()
    assert.are.equal(1, #state.interpreters)
    assert.are.equal("READY", state.interpreters[1].status)
  end)

  it("retries a Create with its clientToken, and passes the provider options on", function()
    emu:fault { op = "CreateCodeInterpreter", error = "InternalServerException", times = 1 }
    local since = emu:last_seq()
    local res = builder:ensure { name = "sandboxed", provider = { network_mode = "SANDBOX",
      execution_role_arn = "arn:aws:iam::123456789012:role/glsb" } }
    local creates = ops(emu:requests(since), "CreateCodeInterpreter")
    assert.are.equal(2, #creates)
    assert.are.equal(creates[1].clientToken, creates[2].clientToken)
    assert.is_true(res.built)
    assert.are.same({}, res.ref.packages)
  end)

  it("refuses what AgentCore cannot build, by name", function()
    local ok, err = pcall(builder.ensure, builder, { name = "x", run = { "apt-get install -y jq" } })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TemplateBuildError))
    assert.matches("'run' is not supported", err.message, 1, true)
    ok, err = pcall(builder.ensure, builder, { name = "x", provider = { networkmode = "PUBLIC" } })
    assert.is_false(ok)
    assert.matches("unknown provider option 'networkmode'", err.message, 1, true)
  end)

  it("lists the templates glsb built, deletes one by id or name and waits until it is gone", function()
    local a = builder:ensure { name = "short-lived" }
    local b = builder:ensure { name = "second", packages = { "pip" } }
    local listed = builder:list()
    table.sort(listed, function(x, y) return x.name < y.name end)
    assert.are.equal(2, #listed)
    assert.are.equal(b.ref.template_id, listed[1].template_id)
    assert.are.equal(b.hash, listed[1].hash)
    assert.are.same({ "pip" }, listed[1].packages)
    assert.are.equal("READY", listed[2].status)
    assert.is_true(builder:delete(a.ref.template_id))
    assert.is_true(builder:delete(listed[1].name))
    assert.is_false(builder:delete("glsb_nothing_000000000000"))
    assert.are.same({}, emu:state().interpreters)
    assert.are.same({}, builder:list())
  end)
end)
