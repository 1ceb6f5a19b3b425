-- Handles that outlive a process on Bedrock AgentCore: sb:ref() (no secret in it), glsb.connect to a
-- READY session (the same interpreter state, the session's own TTL as the lease), glsb.list over
-- ListCodeInterpreterSessions (every page, limit, filters AgentCore cannot satisfy). #bedrock
local emulator = require "bedrock.emulator"
local glsb = require "glsb"
local errors = require "glsb.errors"
local bedrock = require "glsb.providers.bedrock"

describe("bedrock connect, ref and list #bedrock", function()
  local emu, made, prev_log

  setup(function()
    emu = emulator.start()
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  before_each(function() made = {} end)
  after_each(function()
    for _, sb in ipairs(made) do pcall(sb.terminate, sb) end
    assert.are.same({}, emu:leftovers())
  end)

  local function create(extra)
    local sb = glsb.create("bedrock", emu:opts(extra))
    made[#made + 1] = sb
    return sb
  end

  it("a ref names the session and where it is, and holds no secret", function()
    local sb = create { session_token = "FwoGZXIvYXdzEHRva2VuLXJlZi10ZXN0" }
    local ref = sb:ref()
    assert.are.equal("bedrock", ref.provider)
    assert.are.equal(sb.sandbox_id, ref.sandbox_id)
    assert.are.equal("aws.codeinterpreter.v1", ref.identifier)
    assert.are.equal(emulator.REGION, ref.region)
    assert.are.equal(emu.base, ref.endpoint)
    for _, v in pairs(ref) do
      assert.is_true(type(v) == "string" or type(v) == "number")
      assert.falsy(tostring(v):find(emulator.SECRET_ACCESS_KEY, 1, true))
      assert.falsy(tostring(v):find("FwoGZXIvYXdzEHRva2VuLXJlZi10ZXN0", 1, true))
    end
  end)

  it("connects to a READY session by ref or by id, with its state and its TTL", function()
    local sb = create { timeout = 600 }
    sb:execute_code("shared = 'from the first handle'")
    local again = glsb.connect("bedrock", sb:ref(), emu:opts())
    made[#made + 1] = again
    assert.is_true(again:is_running())
    assert.are.equal("from the first handle\n", again:execute_code("print(shared)").stdout)
    local by_id = glsb.connect("bedrock", sb.sandbox_id, emu:opts())
    assert.are.equal(sb.sandbox_id, by_id.sandbox_id)
    -- the lease is the session's own: created + 600 s, not a new one
    local left = require("glsb.time").parse_iso(by_id:info().ends_at) - os.time()
    assert.is_true(left > 590 and left <= 601, "lease left: " .. tostring(left))
    local bumped = glsb.connect("bedrock", sb.sandbox_id, emu:opts { timeout = 5000 })
    left = require("glsb.time").parse_iso(bumped:info().ends_at) - os.time()
    assert.is_true(left <= 601, "connect cannot extend a session's TTL")
  end)

  it("refuses a stopped or unknown session with SandboxStartError[connect]", function()
    local sb = create()
    local id = sb.sandbox_id
    sb:terminate()
    local ok, err = pcall(glsb.connect, "bedrock", id, emu:opts())
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal("connect", err.stage)
    assert.matches("TERMINATED", err.message, 1, true)
    ok, err = pcall(glsb.connect, "bedrock", "NOSUCHSESSION", emu:opts())
    assert.is_false(ok)
    assert.matches("ResourceNotFoundException", tostring(err), 1, true)
    assert.is_false(err.transient)
  end)

  it("lists the READY sessions over every page, with limit and the filters AgentCore cannot meet", function()
    local a, b, c = create(), create(), create()
    c:terminate()
    local saved = bedrock.LIST_PAGE
    bedrock.LIST_PAGE = 1
    local ok, refs = pcall(glsb.list, "bedrock", emu:opts())
    local since = emu:last_seq()
    local ok2, one = pcall(glsb.list, "bedrock", emu:opts { limit = 1 })
    local pages = #emu:requests(since)
    bedrock.LIST_PAGE = saved
    assert.is_true(ok, tostring(refs))
    assert.is_true(ok2, tostring(one))
    local ids = {}
    for _, r in ipairs(refs) do
      ids[r.sandbox_id] = true
      assert.are.equal("bedrock", r.provider)
      assert.are.equal("running", r.state)
    end
    assert.is_true(ids[a.sandbox_id] and ids[b.sandbox_id])
    assert.is_nil(ids[c.sandbox_id])
    assert.are.equal(1, #one)
    assert.are.equal(1, pages, "limit stops paging")
    assert.are.same({}, glsb.list("bedrock", emu:opts { state = "paused" }))
    assert.are.same({}, glsb.list("bedrock", emu:opts { metadata = { team = "ml" } }))
    -- a listed ref connects
    local again = glsb.connect("bedrock", refs[1], emu:opts())
    assert.are.equal(refs[1].sandbox_id, again.sandbox_id)
  end)
end)
