-- Issue 25 §3, "ids and names are data, never syntax": against a loopback hostile server that answers a
-- create with the id it likes. Before: an id "." or ".." survived escaping and libcurl resolved it, so
-- terminate sent `DELETE /` (E2B) and `DELETE /v1/` (OpenSandbox); an id with CR LF put a header of the
-- server's choosing into later requests (E2b-Sandbox-Id, X-Amzn-Code-Interpreter-Session-Id). Now ids are
-- checked against their grammar as they arrive (glsb.answer), every path segment is escaped with its dot
-- segments (glsb.http.segment), and core.http refuses CR, LF and NUL in any header value or URL.
-- #security
local glsb = require "glsb"
local hostile = require "security.hostile.helper"
local errors = require "glsb.errors"
local http = require "glsb.http"

local CREATE = {
  e2b = { method = "POST", path = "^/v2/sandboxes$", field = "sandboxID" },
  opensandbox = { method = "POST", path = "^/v1/sandboxes$", field = "id" },
  bedrock = { method = "PUT", path = "/sessions/start", field = "sessionId" },
}

describe("ids are data, never syntax (issue 25 §3) #security", function()
  local srv

  setup(function() srv = hostile.server() end)
  teardown(function() if srv then srv:stop() end end)

  -- Every request the server saw outside the create and the provider's own known routes.
  local function strays(provider)
    local out = {}
    for _, r in ipairs(srv:requests()) do
      local p = r.path
      local known = (provider == "e2b" and p:match("^/v2/sandboxes")) or (provider == "opensandbox"
        and p:match("^/v1/sandboxes$")) or (provider == "bedrock" and p:match("/sessions/start"))
      if not known then out[#out + 1] = r.method .. " " .. p end
      for _, h in ipairs(r.headers) do
        if h[1]:lower():match("^x%-injected") then out[#out + 1] = "header " .. h[1] end
      end
    end
    return out
  end

  for _, provider in ipairs({ "e2b", "opensandbox", "bedrock" }) do
    for _, id in ipairs({ "..", ".", "", "a/../../x", "sb1\r\nX-Injected: yes", "sb1\0tail", ("z"):rep(300) }) do
      it(string.format("%s: a create answering the id %q is refused; nothing goes where the id points", provider,
        id:sub(1, 24)), function()
        local c = CREATE[provider]
        local answer = { [c.field] = id, templateID = "t", codeInterpreterIdentifier = "aws.codeinterpreter.v1" }
        srv:plan(hostile.with({ { method = c.method, path = c.path, respond = { status = 201, json = answer } } },
          hostile.rules(provider, srv.url)))
        local prev = glsb.log.set_handler(function() end)
        local ok, err = pcall(glsb.create, provider, hostile.opts(provider, srv.url, { retry = false }))
        glsb.log.set_handler(prev)
        if ok then pcall(err.terminate, err) end
        assert.is_false(ok, "the create was accepted")
        assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
        assert.matches(c.field, tostring(err))
        assert.are.same({}, strays(provider))
      end)
    end
  end

  it("core.http refuses CR, LF and NUL in a header value or the URL before anything is sent", function()
    srv:plan { { path = ".", respond = { status = 200, body = "sent" } } }
    for _, bad in ipairs({ { headers = { ["X-Id"] = "a\r\nX-Injected: 1" } }, { headers = { "X-Id: a\nb" } },
      { headers = { ["X-Id"] = "a\0b" } }, { url = srv.url .. "/a\0/../b" } }) do
      local res = http.request { url = bad.url or (srv.url .. "/ok"), headers = bad.headers, timeout = 5 }
      assert.is_table(res.error)
      assert.are.equal("BAD_HEADER_VALUE", res.error.code)
      assert.is_false(errors.is_transient(res.error))
    end
    assert.are.same({}, srv:requests())
    assert.are.equal(200, http.request({ url = srv.url .. "/ok", headers = { ["X-Id"] = "fine" }, timeout = 5 }).status)
  end)

  it("glsb.http.segment escapes dot segments and refuses an empty one", function()
    assert.are.equal("%2E%2E", http.segment(".."))
    assert.are.equal("%2E", http.segment("."))
    assert.are.equal("a..b", http.segment("a..b"))
    assert.are.equal("a%2Fb%0D%0A", http.segment("a/b\r\n"))
    assert.has_error(function() http.segment("") end)
  end)

  it("connect refuses a ref whose id is no id (a ref from a shared store another process wrote)", function()
    srv:plan(hostile.rules("e2b", srv.url))
    for _, id in ipairs({ "..", "a/b", "x\r\nY: z" }) do
      local ok, err = pcall(glsb.connect, "e2b", { provider = "e2b", sandbox_id = id }, hostile.opts("e2b", srv.url))
      assert.is_false(ok)
      assert.matches("not an E2B sandbox id", tostring(err))
    end
    assert.are.same({}, srv:requests())
  end)
end)
