-- Issue 25 §2, "no wrong answer reported as a right one": against a loopback hostile server.
--   - a DELETE answered 302 terminated nothing: before, OpenSandbox and E2B reported success and cleared
--     the handle while the sandbox ran on; now SandboxTerminateError, the handle kept;
--   - an HTTP/1.0 close-delimited download cut after 4 bytes came back from download_file and files:read as
--     the whole file; now the size the provider's stat/info gives is checked and the body refused;
--   - wrong JSON types gave raw Lua errors ("init.lua:391: attempt to index a number value") or silence; now
--     a provider error naming the field. A local sandbox that forges its answer's text (a table) no longer
--     makes r.text a table.
-- #security
local glsb = require "glsb"
local hostile = require "security.hostile.helper"
local helper = require "local.helper"
local errors = require "glsb.errors"

local ID = hostile.ID

describe("no wrong answer reported as a right one (issue 25 §2) #security", function()
  local srv

  setup(function() srv = hostile.server() end)
  teardown(function() if srv then srv:stop() end end)

  local function create(provider, rules)
    srv:plan(hostile.with(rules or {}, hostile.rules(provider, srv.url)))
    return glsb.create(provider, hostile.opts(provider, srv.url))
  end

  for _, provider in ipairs({ "e2b", "opensandbox" }) do
    local delete = provider == "e2b" and "^/sandboxes/" or "^/v1/sandboxes/"

    it(provider .. ": a DELETE answered 302 is no terminate: SandboxTerminateError, the handle kept", function()
      local sb = create(provider, {
        { method = "DELETE", path = delete, respond = { status = 302, headers = { Location = "/elsewhere" } } },
      })
      local prev = glsb.log.set_handler(function() end) -- the retries' warnings
      local ok, err = pcall(sb.terminate, sb)
      glsb.log.set_handler(prev)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxTerminateError), tostring(err))
      assert.matches("302", tostring(err))
      assert.are.equal(ID[provider], sb.sandbox_id)
      -- the server's 404 ("already gone") is success: the handle ends
      srv:plan(hostile.with({ { method = "DELETE", path = delete, respond = { status = 404, json = {} } } },
        hostile.rules(provider, srv.url)))
      sb:terminate()
      assert.is_nil(sb.sandbox_id)
    end)
  end

  local DOWNLOAD = { e2b = "^/files\\?path=", opensandbox = "^/execd/files/download" }
  local function size_rule(provider, size)
    if provider == "e2b" then
      return { method = "POST", path = "Filesystem/Stat", respond = { json = { entry = { name = "f", path = "/f",
        type = "FILE_TYPE_FILE", size = tostring(size) } } } }
    end
    return { method = "GET", path = "^/execd/files/info", respond = { json = { ["/f"] = { path = "/f", size = size } } } }
  end

  for _, provider in ipairs({ "e2b", "opensandbox" }) do
    it(provider .. ": a close-delimited download cut after 4 bytes is refused, a whole one kept", function()
      local sb = create(provider, {
        { method = "GET", path = DOWNLOAD[provider], respond = { http10 = true, body = ("x"):rep(1000), cut = 4 } },
        size_rule(provider, 1000),
      })
      finally(function() pcall(sb.terminate, sb) end)
      local prev = glsb.log.set_handler(function() end)
      local data = sb:download_file("/f")
      glsb.log.set_handler(prev)
      assert.is_nil(data)
      local ok, err = pcall(sb.files.read, sb.files, "/f")
      assert.is_false(ok)
      assert.matches("cut short", tostring(err))
      -- the same file whole, close-delimited: its size checks out
      srv:plan(hostile.with({
        { method = "GET", path = DOWNLOAD[provider], respond = { http10 = true, body = ("x"):rep(1000) } },
        size_rule(provider, 1000),
      }, hostile.rules(provider, srv.url)))
      assert.are.equal(("x"):rep(1000), sb.files:read("/f"))
      -- a declared length cut short is refused by the transport itself
      srv:plan(hostile.with({
        { method = "GET", path = DOWNLOAD[provider], respond = { headers = { ["Content-Length"] = "1000" },
          body = ("x"):rep(1000), cut = 4 } },
      }, hostile.rules(provider, srv.url)))
      assert.is_false((pcall(sb.files.read, sb.files, "/f")))
    end)
  end

  it("opensandbox: glsb.list on items [1, \"x\", null] is a list error naming the item", function()
    srv:plan { { method = "GET", path = "^/v1/sandboxes\\?", respond = { json = { items = { 1, "x" },
      pagination = { hasNextPage = false } } } } }
    local ok, err = pcall(glsb.list, "opensandbox", hostile.opts("opensandbox", srv.url))
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal("list", err.stage)
    assert.matches("items%[1%] is a number %(1%), not an object", err.message)
    assert.is_nil(tostring(err):find("attempt to", 1, true))
  end)

  it("e2b: glsb.list on [1, \"x\", null] and on a sandboxID that is a table name the field", function()
    srv:plan { { method = "GET", path = "^/v2/sandboxes\\?", respond = { json = { 1, "x" } } } }
    local ok, err = pcall(glsb.list, "e2b", hostile.opts("e2b", srv.url))
    assert.is_false(ok)
    assert.are.equal("list", err.stage)
    assert.matches("%[1%] is a number %(1%), not an object", err.message)
    srv:plan { { method = "GET", path = "^/v2/sandboxes\\?", respond = { json = { { sandboxID = { 1 } } } } } }
    ok, err = pcall(glsb.list, "e2b", hostile.opts("e2b", srv.url))
    assert.is_false(ok)
    assert.matches("%[1%]%.sandboxID is a list, not an E2B sandbox id", err.message)
  end)

  it("e2b and opensandbox: files:list on entries of the wrong type names the field", function()
    local sb = create("e2b", { { method = "POST", path = "Filesystem/ListDir", respond = { json = { entries = { 7 } } } } })
    local ok, err = pcall(sb.files.list, sb.files, "/home/user")
    sb:terminate()
    assert.is_false(ok)
    assert.are.equal("files", err.stage)
    assert.matches("entries%[1%] is a number %(7%), not an object", err.message)
    sb = create("opensandbox", { { method = "GET", path = "^/execd/directories/list",
      respond = { json = { { path = 3 } } } } })
    ok, err = pcall(sb.files.list, sb.files, "/workspace")
    sb:terminate()
    assert.is_false(ok)
    assert.are.equal("files", err.stage)
    assert.matches("%[1%]%.path is a number %(3%), not a string", err.message)
  end)

  it("local: code that forges its answer's text as a table gets an unknown outcome, never r.text a table", function()
    local root = helper.private_tmp()
    local sb = glsb.create("local", { host_workspace_dir = root })
    finally(function()
      sb:terminate()
      helper.remove_root(root)
    end)
    local r = sb:execute_code([[
import __main__
__main__.send({"ev": "done", "id": __main__.STATE.current, "ok": True, "text": {"a": 1}})
]])
    assert.is_true(r.text == nil or type(r.text) == "string", tostring(r.text))
    assert.are.equal("unknown", r.status)
    assert.matches("text", r.error)
  end)
end)
