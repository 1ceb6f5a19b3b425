-- Issue 25 §3, each provider's own id grammar: an id is checked where it arrives (a create answer, a list
-- entry, a ref given to connect or kill, an id or name the user passes, a snapshot or template builder's
-- answer) against the grammar of that provider's ids, written down with its upstream source in
-- docs/protocols/<provider>.md: E2B's sandbox ids are lowercase letters and digits (infra id.go
-- ValidateSandboxID), its templates [namespace/]name[:tag], its builds UUIDs; OpenSandbox's sandboxes and
-- snapshots are UUIDs (str(uuid4())); AgentCore's sessions are [0-9a-zA-Z]{1,40} and its code interpreters
-- "aws.codeinterpreter.v1" or "<name>-<10 alphanumerics>" (the service models' patterns).
--
-- Before, one permissive grammar served every provider (letters, digits, '_', '-', '.'; at most 128):
-- every id below that the hostile server hands out (or the user passes) was taken, and later requests were
-- sent with it. Each case holds an id in that old grammar and outside the provider's own.
-- #security
local glsb = require "glsb"
local hostile = require "security.hostile.helper"
local errors = require "glsb.errors"
local cjson = require "cjson"

local function quiet(fn, ...)
  local prev = glsb.log.set_handler(function() end)
  local r = table.pack(pcall(fn, ...))
  glsb.log.set_handler(prev)
  return table.unpack(r, 1, r.n)
end

describe("each provider's own id grammar (issue 25 §3) #security", function()
  local srv

  setup(function() srv = hostile.server() end)
  teardown(function() if srv then srv:stop() end end)

  local function paths()
    local out = {}
    for _, r in ipairs(srv:requests()) do out[#out + 1] = r.method .. " " .. r.path end
    return out
  end

  -- The create routes and answers of each provider, with an id to put in them.
  local CREATE = {
    e2b = { method = "POST", path = "^/v2/sandboxes$", status = 201, answer = function(id)
      return { sandboxID = id, templateID = "code-interpreter-v1", envdVersion = "0.2.0" } end },
    opensandbox = { method = "POST", path = "^/v1/sandboxes$", status = 202, answer = function(id) return { id = id } end },
    bedrock = { method = "PUT", path = "/sessions/start", status = 200, answer = function(id)
      return { sessionId = id, codeInterpreterIdentifier = "aws.codeinterpreter.v1" } end },
  }
  local BAD_CREATE = {
    e2b = { "isb-1", "Isb1", "i.sb1", "isb_1" },
    opensandbox = { "osb-1", "0B6E2F3C-4D5A-4E6F-8A9B-0C1D2E3F4A5B", "0b6e2f3c4d5a4e6f8a9b0c1d2e3f4a5b" },
    bedrock = { "sess-1", "sess.1", "sess_1", ("s"):rep(41) },
  }

  for _, provider in ipairs({ "e2b", "opensandbox", "bedrock" }) do
    for _, id in ipairs(BAD_CREATE[provider]) do
      it(string.format("%s: a create answering the id %q is refused, and nothing is sent with it", provider,
        id:sub(1, 40)), function()
        local c = CREATE[provider]
        srv:plan(hostile.with({ { method = c.method, path = c.path, respond = { status = c.status,
          json = c.answer(id) } } }, hostile.rules(provider, srv.url)))
        local ok, err = quiet(glsb.create, provider, hostile.opts(provider, srv.url, { retry = false }))
        if ok then pcall(err.terminate, err) end
        assert.is_false(ok, "the create was accepted")
        assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
        assert.are.equal("create", err.stage)
        assert.matches("docs/protocols/" .. provider .. ".md §", tostring(err), 1, true)
        -- the create, and nothing with the id in it (no terminate of a sandbox named so)
        for _, p in ipairs(paths()) do assert.is_nil(p:find(id, 1, true), p) end
      end)
    end
  end

  -- List answers with one entry whose id is outside the grammar.
  local LIST = {
    e2b = { method = "GET", path = "^/v2/sandboxes\\?", json = { { sandboxID = "a.b", state = "running" } },
      field = "sandboxID" },
    opensandbox = { method = "GET", path = "^/v1/sandboxes\\?", json = { items = { { id = "sbx_1" } },
      pagination = { hasNextPage = false } }, field = "items%[1%]%.id" },
    bedrock = { method = "POST", path = "/sessions/list", json = { items = { { sessionId = "s-1", status = "READY" } } },
      field = "sessionId" },
  }
  for _, provider in ipairs({ "e2b", "opensandbox", "bedrock" }) do
    it(provider .. ": a list entry whose id is outside the grammar makes list fail naming the field", function()
      local l = LIST[provider]
      srv:plan { { method = l.method, path = l.path, respond = { json = l.json } } }
      local ok, err = quiet(glsb.list, provider, hostile.opts(provider, srv.url))
      assert.is_false(ok, "list took the entry: " .. (ok and cjson.encode(err) or ""))
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
      assert.are.equal("list", err.stage)
      assert.matches(l.field, tostring(err))
    end)
  end

  -- Refs and ids a user (or a shared store another process wrote) passes: refused before anything is sent.
  local BAD_REF = { e2b = { "Abc1", "abc_1", "abc-", "-abc" }, opensandbox = { "osb-1", "5d3b1f0e" },
    bedrock = { "s_1", "s-1", ("s"):rep(41) } }
  for _, provider in ipairs({ "e2b", "opensandbox", "bedrock" }) do
    it(provider .. ": connect and kill refuse a ref whose id is outside the grammar, sending nothing", function()
      srv:plan(hostile.rules(provider, srv.url))
      for _, id in ipairs(BAD_REF[provider]) do
        for _, call in ipairs({ glsb.connect, glsb.kill }) do
          local ok, err = quiet(call, provider, { provider = provider, sandbox_id = id }, hostile.opts(provider, srv.url))
          assert.is_false(ok, id)
          assert.is_string(err) -- an argument error, at the caller's line
          assert.matches("ref.sandbox_id is a string", err, 1, true)
          assert.matches("docs/protocols/" .. provider .. ".md §", err, 1, true)
        end
      end
      assert.are.same({}, paths())
    end)
  end

  it("e2b: a ref id in the older '<sandboxID>-<clientID>' form, which E2B's API still takes, means sandboxID",
    function()
      srv:plan(hostile.with({
        { method = "POST", path = "^/v2/sandboxes/abc123/connect$", respond = { status = 201, json = {
          sandboxID = "abc123", envdVersion = "0.2.0", envdAccessToken = "envd-token-0123" } } },
        { method = "GET", path = "^/sandboxes/abc123$", respond = { json = { sandboxID = "abc123", state = "running" } } },
      }, hostile.rules("e2b", srv.url)))
      local ok, sb = quiet(glsb.connect, "e2b", { provider = "e2b", sandbox_id = "abc123-6532622b" },
        hostile.opts("e2b", srv.url))
      assert.is_true(ok, tostring(sb))
      assert.are.equal("abc123", sb.sandbox_id)
      for _, p in ipairs(paths()) do assert.is_nil(p:find("6532622b", 1, true), p) end
      rawset(sb, "keep_alive", true)
    end)

  it("a template or interpreter name outside the grammar is an argument error at create, nothing sent", function()
    srv:plan(hostile.with(hostile.rules("e2b", srv.url), hostile.rules("bedrock", srv.url)))
    for _, case in ipairs({
      { "e2b", { template = "my template" } }, { "e2b", { template = "a/b/c" } }, { "e2b", { template = "x:y:z" } },
      { "e2b", { template = { template_id = "../x" } } },
      { "bedrock", { identifier = "my.interpreter" } }, { "bedrock", { template = "ci-abc" } },
      { "bedrock", { identifier = "arn:aws:bedrock-agentcore:us-east-1:123456789012:code-interpreter/../x" } },
    }) do
      local provider, extra = case[1], case[2]
      local ok, err = quiet(glsb.create, provider, hostile.opts(provider, srv.url, extra))
      if ok then pcall(err.terminate, err) end
      assert.is_false(ok, cjson.encode(extra))
      assert.is_string(err)
      assert.matches("docs/protocols/" .. provider .. ".md §", err, 1, true)
    end
    assert.are.same({}, paths())
  end)

  it("bedrock: connect refuses a ref whose interpreter is no interpreter id or ARN, sending nothing", function()
    srv:plan(hostile.rules("bedrock", srv.url))
    local ok, err = quiet(glsb.connect, "bedrock", { provider = "bedrock", sandbox_id = "sess1",
      identifier = "x/../../y" }, hostile.opts("bedrock", srv.url))
    assert.is_false(ok)
    assert.matches("identifier", tostring(err))
    assert.matches("docs/protocols/bedrock.md §", tostring(err), 1, true)
    assert.are.same({}, paths())
  end)

  it("bedrock: a Start answering a codeInterpreterIdentifier outside the grammar is refused", function()
    srv:plan(hostile.with({ { method = "PUT", path = "/sessions/start", respond = { json = { sessionId = "sess1",
      codeInterpreterIdentifier = "../../other" } } } }, hostile.rules("bedrock", srv.url)))
    local ok, err = quiet(glsb.create, "bedrock", hostile.opts("bedrock", srv.url, { retry = false }))
    if ok then pcall(err.terminate, err) end
    assert.is_false(ok)
    assert.matches("codeInterpreterIdentifier", tostring(err))
  end)

  it("e2b: a snapshot answering a snapshotID that names no template is refused", function()
    srv:plan(hostile.with({ { method = "POST", path = "^/sandboxes/isb1/snapshots$", respond = { status = 201,
      json = { snapshotID = "emulator/a/b:c:d", names = {} } } } }, hostile.rules("e2b", srv.url)))
    local ok, sb = quiet(glsb.create, "e2b", hostile.opts("e2b", srv.url))
    assert.is_true(ok, tostring(sb))
    local sok, err = quiet(sb.snapshot, sb)
    sb:terminate()
    assert.is_false(sok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
    assert.matches("snapshotID", tostring(err))
  end)

  it("opensandbox: a snapshot answering an id that is no UUID is refused before it is polled", function()
    local id = hostile.ID.opensandbox
    srv:plan(hostile.with({ { method = "POST", path = "^/v1/sandboxes/" .. id .. "/snapshots$", respond = {
      status = 202, json = { id = "snap_123", status = { state = "Creating" } } } } }, hostile.rules("opensandbox", srv.url)))
    local ok, sb = quiet(glsb.create, "opensandbox", hostile.opts("opensandbox", srv.url))
    assert.is_true(ok, tostring(sb))
    local sok, err = quiet(sb.snapshot, sb)
    sb:terminate()
    assert.is_false(sok)
    assert.matches("OpenSandbox snapshot create: the answer's id", tostring(err), 1, true)
    for _, p in ipairs(paths()) do assert.is_nil(p:find("snap_123", 1, true), p) end
  end)

  it("e2b template builder: a create answering a buildID that is no UUID is refused before the build starts",
    function()
      srv:plan { { method = "GET", path = "^/templates/aliases/", respond = { status = 404, json = { code = 404,
        message = "not found" } } },
        { method = "POST", path = "^/v3/templates$", respond = { status = 202, json = { templateID = "tpl1",
          buildID = "../../x" } } } }
      local b = glsb.template("e2b", { api_key = "e2b-key-0123456789", api_url = srv.url, progress = false })
      local ok, err = quiet(b.ensure, b, { name = "ids", packages = {} })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
      assert.matches("buildID", tostring(err))
      for _, p in ipairs(paths()) do assert.is_nil(p:find("%.%.") or p:find("%%2E", 1, true), p) end
    end)

  it("bedrock template builder: a CreateCodeInterpreter answering an id outside the grammar is refused", function()
    srv:plan { { method = "POST", path = "^/code-interpreters", respond = { json = { codeInterpreterSummaries = {} } } },
      { method = "PUT", path = "^/code-interpreters$", respond = { status = 202, json = {
        codeInterpreterId = "../other", status = "CREATING" } } } }
    local b = glsb.template("bedrock", hostile.opts("bedrock", srv.url, { progress = false }))
    local ok, err = quiet(b.ensure, b, { name = "ids", packages = { "six" } })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    assert.matches("codeInterpreterId", tostring(err))
    for _, p in ipairs(paths()) do assert.is_nil(p:find("other", 1, true), p) end
  end)
end)
