-- glsb.sandbox.send_create: the base's one rule for a create whose answer was lost (the sandbox may
-- exist: the provider's _find_created looks for it by the token the request carried).
local sandbox = require "glsb.sandbox"
local loop = require "glsb.loop"
local log = require "glsb.log"

local function fake(find)
  return { provider = "fake", _find_created = find }
end

describe("glsb.sandbox.send_create #unit", function()
  local prev, lines
  before_each(function()
    lines = {}
    prev = log.set_handler(function(level, message) lines[#lines + 1] = level .. ": " .. message end)
  end)
  after_each(function() log.set_handler(prev) end)

  it("sends one fresh token and returns a good answer as it is, asking nothing more", function()
    local tokens, asked = {}, 0
    local sb = fake(function() asked = asked + 1 end)
    local ok = { status = 201, json = { id = "a" } }
    assert.are.equal(ok, sandbox.send_create(sb, function(t) tokens[#tokens + 1] = t return ok end))
    sandbox.send_create(sb, function(t) tokens[#tokens + 1] = t return ok end)
    assert.matches("^%x+$", tokens[1])
    assert.are.equal(32, #tokens[1])
    assert.are_not.equal(tokens[1], tokens[2])
    assert.are.equal(0, asked)
  end)

  it("a delivered request whose answer was lost: adopts what _find_created finds by that token", function()
    local sent, looked
    local found = { status = 200, json = { id = "made" } }
    local sb = fake(function(_, token) looked = token return found end)
    local lost = { error = { phase = "receive", code = "RECV_ERROR", retry_safe = false } }
    assert.are.equal(found, sandbox.send_create(sb, function(t) sent = t return lost end))
    assert.are.equal(sent, looked)
    assert.matches("adopted the sandbox it created", lines[#lines])
    -- nothing found: the lost answer stands
    sb = fake(function() return nil end)
    assert.are.equal(lost, sandbox.send_create(sb, function() return lost end))
  end)

  it("never looks when the request provably never left, or the provider cannot look", function()
    local asked = 0
    local sb = fake(function() asked = asked + 1 return {} end)
    local unsent = { error = { phase = "connect", code = "COULDNT_CONNECT", retry_safe = true } }
    assert.are.equal(unsent, sandbox.send_create(sb, function() return unsent end))
    assert.are.equal(0, asked)
    local lost = { error = { phase = "receive", retry_safe = false } }
    assert.are.equal(lost, sandbox.send_create({ provider = "x" }, function() return lost end))
  end)

  it("a lookup that fails is logged and the lost answer stands; a cancellation goes through", function()
    local lost = { error = { phase = "receive", retry_safe = false } }
    local sb = fake(function() error({ message = "the list endpoint is down" }, 0) end)
    assert.are.equal(lost, sandbox.send_create(sb, function() return lost end))
    assert.matches("^warn: .*the list endpoint is down", lines[#lines])
    local seen
    loop.run(function()
      local task = loop.spawn(function()
        local _, e = pcall(sandbox.send_create, fake(function() loop.sleep(10) end), function() return lost end)
        seen = e
        error(e, 0)
      end)
      loop.sleep(0.01)
      task:cancel()
      pcall(task.wait, task)
    end)
    assert.is_true(loop.is_cancelled(seen), tostring(seen))
  end)
end)
