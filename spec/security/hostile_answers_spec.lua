-- Issue 25 §1, "decoded size, not wire size" and "paging that never ends", against a loopback hostile server.
-- Before: a 60 MiB `[[],[],...]` list answer became 1,863 MiB of Lua tables (the 256 MiB answer cap allowed
-- some 8 GiB); four lists at once against endless bodies peaked at 1,291 MiB (each body held twice, in C and
-- in Lua); E2B (X-Next-Token) and Bedrock (nextToken) followed a next token forever (49,176 and 23,676 page
-- requests in 15 s), OpenSandbox a hasNextPage that never turned false. Now control-plane answers are capped
-- (glsb.http.ANSWER_CAP, refused by their declared length before a byte is read), JSON is decoded at the
-- cost of what it holds (glsb.codec.decode_json), the body is moved out of C as it goes to Lua, and every
-- paged read ends (glsb.paging).
-- #security
local hostile = require "security.hostile.helper"
local http = require "glsb.http"
local cjson = require "cjson"

local MiB = hostile.MiB
local VMEM = 3072

local LIST = [[
local provider, o, n = arg[1], cjson.decode(arg[2]), tonumber(arg[3] or "1")
local loop = require "glsb.loop"
local errs = {}
loop.run(function()
  local tasks = {}
  for i = 1, n do
    tasks[i] = loop.spawn(function()
      local ok, err = pcall(glsb.list, provider, o)
      errs[i] = ok and "ok" or tostring(err)
    end)
  end
  for _, t in ipairs(tasks) do t:wait() end
end)
report { errors = errs }
]]

describe("answers cost what they hold, lists end (issue 25 §1) #security", function()
  local srv, baseline

  setup(function()
    srv = hostile.server()
    baseline = hostile.baseline_mib(srv.url)
  end)
  teardown(function() if srv then srv:stop() end end)

  local function list(provider, rules, n)
    srv:plan(rules)
    local got = hostile.run(LIST, { args = { provider, cjson.encode(hostile.opts(provider, srv.url)), n or 1 },
      timeout = 90, vmem_mib = VMEM })
    local out = hostile.must(got)
    return out.errors, got
  end


  local function nested(bytes) return "[" .. ("[],"):rep(bytes // 3 - 1) .. "[]]" end

  it("e2b: a 30 MiB list answer of empty lists is refused by its length, before a byte is decoded", function()
    local errs, got = list("e2b", { { method = "GET", path = "^/v2/sandboxes", respond = {
      body_b64 = hostile.b64(nested(30 * MiB)), headers = { ["Content-Type"] = "application/json" } } } })
    assert.matches("BODY_TOO_LARGE", errs[1])
    hostile.under(got, baseline + 16)
  end)

  it("e2b: a 6 MiB answer (under the cap) of 2 M empty lists is refused by what it would cost decoded", function()
    local errs, got = list("e2b", { { method = "GET", path = "^/v2/sandboxes", respond = {
      body_b64 = hostile.b64(nested(6 * MiB)), headers = { ["Content-Type"] = "application/json" } } } })
    assert.matches("refused undecoded", errs[1])
    -- the answer, once in C and once in Lua for a moment, and no tables
    hostile.under(got, baseline + 2 * 6 + 16)
  end)

  it("four lists at once against endless bodies hold the answer cap each, once", function()
    local errs, got = list("opensandbox", { { method = "GET", path = "^/v1/sandboxes", respond = {
      headers = { ["Content-Type"] = "application/json" }, ["repeat"] = { chunk = ("[1,"):rep(1000), count = -1 } } } },
      4)
    for i = 1, 4 do assert.matches("BODY_TOO_LARGE", errs[i]) end
    -- (8 MiB: glsb.http.ANSWER_CAP, written out so that a build from before it measures against the same bound)
    hostile.under(got, baseline + 4 * (http.ANSWER_CAP or 8 * MiB) / MiB + 24)
  end)

  it("e2b: the same X-Next-Token again is a loop: refused at the second page", function()
    local errs = list("e2b", { { method = "GET", path = "^/v2/sandboxes", respond = {
      headers = { ["X-Next-Token"] = "again" }, json = { { sandboxID = "isb{{n}}" } } } } })
    assert.matches("sent before %(a loop%); stopped after 2 pages", errs[1])
    assert.are.equal(2, #srv:requests())
  end)

  it("e2b: a new X-Next-Token on every page ends at the page limit", function()
    local errs, got = list("e2b", { { method = "GET", path = "^/v2/sandboxes", respond = {
      headers = { ["X-Next-Token"] = "t{{n}}" }, json = { { sandboxID = "isb{{n}}" } } } } })
    assert.matches("more than 1000 pages", errs[1])
    assert.are.equal(require("glsb.paging").MAX_PAGES, #srv:requests())
    assert.is_true(got.seconds < 60, got.seconds)
  end)

  it("e2b: an empty page ends the list, whatever token comes with it", function()
    local errs = list("e2b", { { method = "GET", path = "^/v2/sandboxes", respond = {
      headers = { ["X-Next-Token"] = "t{{n}}" }, json = {} } } })
    assert.are.equal("ok", errs[1])
    assert.are.equal(1, #srv:requests())
  end)

  it("bedrock: a nextToken on every page ends at the page limit; the same one at once", function()
    local errs = list("bedrock", { { method = "POST", path = "/sessions/list", respond = { json = {
      items = { { sessionId = "s{{n}}", status = "READY" } }, nextToken = "n{{n}}" } } } })
    assert.matches("more than 1000 pages", errs[1])
    errs = list("bedrock", { { method = "POST", path = "/sessions/list", respond = { json = {
      items = { { sessionId = "s{{n}}", status = "READY" } }, nextToken = "same" } } } })
    assert.matches("sent before %(a loop%)", errs[1])
  end)

  it("opensandbox: hasNextPage that never turns false ends at the page limit", function()
    local errs = list("opensandbox", { { method = "GET", path = "^/v1/sandboxes", respond = { json = {
      items = { { id = hostile.ID.opensandbox, status = { state = "Running" } } }, pagination = { hasNextPage = true } } } } })
    assert.matches("more than 1000 pages", errs[1])
  end)
end)
