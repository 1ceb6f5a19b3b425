-- Issue 25 §3: the emulators make ids in their provider's own grammar (docs/protocols/<provider>.md), as the
-- real services do, so that the grammars glsb checks answers against hold for every spec that drives an
-- emulator. Each kind of id an emulator hands out is read back and checked against the grammar here:
-- sandbox ids from create, list and a ref, template / snapshot ids from sb:snapshot(), AgentCore's session
-- and code interpreter ids (a template build).
-- #security
local glsb = require "glsb"
local e2b_emulator = require "e2b.emulator"
local osb_emulator = require "opensandbox.emulator"
local bedrock_emulator = require "bedrock.emulator"
local e2b = require "glsb.providers.e2b.api"
local osb = require "glsb.providers.opensandbox.lifecycle"
local bedrock = require "glsb.providers.bedrock.api"

local function holds(grammar, v)
  assert.is_true(grammar:holds(v), string.format("%q is not %s", tostring(v), grammar:describe()))
end

local function listed(provider, opts, id)
  for _, r in ipairs(glsb.list(provider, opts)) do
    if r.sandbox_id == id then return r end
  end
  return nil
end

describe("the emulators' ids are in their provider's grammar (issue 25 §3) #security", function()
  it("e2b: sandbox ids, template ids and snapshot ids", function()
    local emu = e2b_emulator.start()
    finally(function() emu:stop() end)
    local sb = glsb.create("e2b", emu:opts { timeout = 60 })
    finally(function() pcall(sb.terminate, sb) end)
    holds(e2b.IDS.sandbox, sb.sandbox_id)
    holds(e2b.IDS.template, sb.template_id)
    local r = assert(listed("e2b", emu:opts(), sb.sandbox_id))
    holds(e2b.IDS.template, r.template_id)
    local snap = sb:snapshot({ name = "glsb-ids" })
    holds(e2b.IDS.template, snap.template_id)
    local anon = sb:snapshot()
    holds(e2b.IDS.template, anon.template_id)
    local from = glsb.create("e2b", emu:opts { timeout = 60, template = snap })
    finally(function() pcall(from.terminate, from) end)
    holds(e2b.IDS.sandbox, from.sandbox_id)
  end)

  it("opensandbox: sandbox ids and snapshot ids", function()
    local emu = osb_emulator.start()
    finally(function() emu:stop() end)
    local sb = glsb.create("opensandbox", emu:opts { timeout = 120 })
    finally(function() pcall(sb.terminate, sb) end)
    holds(osb.IDS.sandbox, sb.sandbox_id)
    assert(listed("opensandbox", emu:opts(), sb.sandbox_id))
    local snap = sb:snapshot({ name = "glsb-ids" })
    holds(osb.IDS.snapshot, snap.template_id)
    local again = glsb.connect("opensandbox", sb:ref(), emu:opts())
    holds(osb.IDS.sandbox, again.sandbox_id)
    rawset(again, "keep_alive", true)
  end)

  it("bedrock: session ids and code interpreter ids", function()
    local emu = bedrock_emulator.start()
    finally(function() emu:stop() end)
    local builder = glsb.template("bedrock", emu:opts { sleep = function(s) glsb.sleep(math.min(s, 0.05)) end })
    local tpl = builder:ensure({ name = "ids", packages = { "pip" } }).ref
    holds(bedrock.IDS.interpreter_id, tpl.template_id)
    finally(function() pcall(builder.delete, builder, tpl.template_id) end)
    for _, template in ipairs({ false, tpl }) do
      local sb = glsb.create("bedrock", emu:opts { timeout = 60, template = template or nil })
      finally(function() pcall(sb.terminate, sb) end)
      holds(bedrock.IDS.session, sb.sandbox_id)
      holds(bedrock.IDS.interpreter, sb.identifier)
      assert(listed("bedrock", emu:opts { identifier = sb.identifier }, sb.sandbox_id))
    end
  end)
end)
