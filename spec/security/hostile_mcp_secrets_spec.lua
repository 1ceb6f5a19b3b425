-- Issue 25 §4, the one redaction point, for the MCP server: `glsb-lua --mcp` scrubs every line it writes with
-- glsb.secrets (no scrubber of its own).
--
-- A key given to `glsb-lua --mcp` through the environment (E2B_API_KEY, with a "/" that lua-cjson writes as
-- "\/") goes to a loopback server that quotes every request header: in its 401 to the first create, and in
-- the stdout of an execution, where it also quotes the envd access token the second create handed out. No
-- tool result, log line (notifications and stderr at debug) or error holds either. Before: the server had
-- a scrubber of its own, built once at start from the options and the environment, so the token a server
-- handed out later (registered with glsb.secrets as glsb.http sent it) came back verbatim in the tool
-- result.
-- #security #mcp
local hostile = require "security.hostile.helper"
local client = require "mcp.client"
local fs = require "glsb.fs"

local KEY = "hostile/MCP+key-0123456789"
local TOKEN = "hostile/envd-token-0123456789"

-- Every string inside a decoded value, joined (what a client reads, whatever the escaping on the wire).
local function strings(v, out)
  out = out or {}
  if type(v) == "string" then
    out[#out + 1] = v
  elseif type(v) == "table" then
    for k, x in pairs(v) do
      strings(k, out)
      strings(x, out)
    end
  end
  return out
end

describe("the one redaction point: the MCP server (issue 25 §4) #security", function()
  local srv, tmp

  setup(function() srv = hostile.server() end)
  teardown(function() if srv then srv:stop() end end)
  before_each(function() tmp = assert(fs.mkdtemp("glsb-hostile-mcp-")) end)
  after_each(function() fs.rmtree(tmp) end)

  it("glsb-lua --mcp: a key from the environment and a token a server handed out appear in no result, log "
    .. "line or error, though the server quotes both", function()
    srv:plan {
      { method = "POST", path = "^/v2/sandboxes$", sequence = { { status = 401, echo = true },
        { status = 201, json = { sandboxID = "isb1", envdVersion = "0.2.0", envdAccessToken = TOKEN } } } },
      { method = "POST", path = "^/execute", respond = { headers = { ["Content-Type"] = "application/x-ndjson" },
        echo = true, echo_into = '{"type": "stdout", "text": "{{headers}}", "timestamp": "t"}\n'
          .. '{"type": "end_of_execution"}\n' } },
      { method = "DELETE", path = "^/sandboxes/", respond = { status = 204 } },
    }
    local cfg = tmp .. "/e2b.lua"
    assert(fs.write_file_atomic(cfg, string.format("return { providers = { e2b = { api_url = %q, sandbox_url = %q, "
      .. "retry = false } } }", srv.url, srv.url)))
    local c = client.start { tmpdir = tmp, args = { "--config", cfg }, env = { E2B_API_KEY = KEY, GLSB_LOG = "debug" } }
    finally(function() c:kill() end)
    c:initialize()
    c:call("logging/setLevel", { level = "debug" })
    local refused = c:tool("sandbox_create", { provider = "e2b" })
    assert.is_true(refused.isError)
    assert.matches("REDACTED", client.text(refused)) -- quoted, and scrubbed
    local made = c:tool("sandbox_create", { provider = "e2b" })
    assert.is_nil(made.isError, client.text(made))
    local out = c:tool("execute_code", { sandbox_id = made.structuredContent.sandbox_id, code = "print(1)" })
    c:close()
    local seen = table.concat(strings(out), "\n")
    assert.matches("[xX]%-[aA]ccess%-[tT]oken: REDACTED", seen) -- the server did quote the token
    local lines = c:stderr()
    assert.matches("glsb: debug: http ", lines) -- the requests were logged
    local everything = table.concat(strings({ c.notes, refused, made, out }), "\n") .. "\n" .. lines
    for _, secret in ipairs({ KEY, TOKEN }) do
      assert.is_nil(everything:find(secret, 1, true), "a result, log line or error holds " .. secret)
      assert.is_nil(everything:find(secret:gsub("/", "\\/"), 1, true))
    end
  end)
end)
