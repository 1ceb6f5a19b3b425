-- info() and list(): the base normalises what providers report into one set of fields (glsb.sandbox
-- INFO_FIELDS), a provider's extras under its own key, and the old names read for one release.
local glsb = require "glsb"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"

describe("info() and list() fields #unit", function()
  local provider, logs, prev

  before_each(function()
    provider = fake_provider.new("fake")
    registry.register("fake", provider)
    logs = {}
    prev = glsb.log.set_handler(function(level, msg) logs[#logs + 1] = level .. ": " .. msg end)
  end)
  after_each(function()
    glsb.log.set_handler(prev)
    registry.unregister("fake")
  end)

  it("info(): times in one form, the provider's state in lower case, extras under the provider's key", function()
    provider.Sandbox._info = function()
      return { server_state = "Running", started_at = "2026-01-02T04:04:05.678+01:00", ends_at = "not a time",
        template_id = "tpl", extra = { cpu_count = 2 } }
    end
    local sb = glsb.create("fake", { metadata = { a = "1" } })
    local i = sb:info()
    assert.are.equal("running", i.state, "the handle's state is the base's")
    assert.are.equal("running", i.server_state)
    assert.are.equal("2026-01-02T03:04:05Z", i.started_at)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", i.ends_at, "not a time: the base's lease end stands")
    assert.are.equal("tpl", i.template_id)
    assert.are.same({ a = "1" }, i.metadata)
    assert.are.same({ cpu_count = 2 }, i.fake)
    local keys = {}
    for k in pairs(i) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "ends_at", "fake", "language", "metadata", "provider", "sandbox_id", "server_state",
      "started_at", "state", "template_id" }, keys)
    sb:terminate()
  end)

  it("the old names read for one release, each with one warning", function()
    provider.Sandbox._info = function() return { ends_at = "2026-01-02T03:04:05Z", extra = { image = "img" } } end
    local sb = glsb.create("fake")
    local i = sb:info()
    assert.are.equal("2026-01-02T03:04:05Z", i.expires_at)
    assert.are.equal("img", i.image)
    assert.are.equal("2026-01-02T03:04:05Z", i.expires_at)
    assert.are.equal("img", sb:info().image, "a second read, and another info(): no second warning")
    local warnings = {}
    for _, l in ipairs(logs) do if l:find("deprecated", 1, true) then warnings[#warnings + 1] = l end end
    assert.are.same({ "warn: info().expires_at is deprecated and goes in the next release: read info().ends_at",
      "warn: info().image is deprecated and goes in the next release: read info().fake.image" }, warnings)
    assert.is_nil(i.nothing_like_it)
    sb:terminate()
  end)

  it("list(): the same fields, connect's own as they are, the state in lower case", function()
    provider.Sandbox._list = function()
      return { { sandbox_id = "s1", state = "Paused", started_at = "2026-01-02T03:04:05.1Z", domain = "d.example",
        extra = { image = "img" } } }
    end
    local refs = glsb.list("fake")
    assert.are.equal(1, #refs)
    local r = refs[1]
    assert.are.same({ "fake", "s1", "paused", "2026-01-02T03:04:05Z", "d.example" },
      { r.provider, r.sandbox_id, r.state, r.started_at, r.domain })
    assert.are.same({ image = "img" }, r.fake)
    assert.is_nil(rawget(r, "extra"))
    assert.are.equal("img", r.image, "an extra's old place reads for one release")
  end)
end)
