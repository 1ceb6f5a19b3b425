-- Issue 25 §4, secrets: a known key goes through each provider (from its environment variable and from the
-- options) to a loopback server that quotes every request header back in its 401/403 body; the spec greps
-- the error's text, every log line (GLSB_LOG=debug) and every exported span (OTEL_TRACES_EXPORTER=console)
-- for it. Before: the OpenSandbox and E2B keys came back verbatim in tostring(err), and keys taken from the
-- environment appeared in span exception events (those passed as options were scrubbed). Now every secret
-- glsb sends is registered with glsb.secrets and scrubbed at the one choke point of errors, logs and spans.
-- Also: sb:ref() keeps no user:password@ of an endpoint; a connect takes credentials from its options.
-- #security
local hostile = require "security.hostile.helper"
local cjson = require "cjson"

local KEY = "hostile-KEY-7f3a9c1e5b"
local TOKEN = "hostile-TOKEN-e2b-envd-42"
local SESSION = "hostile-SESSION-aws-0042x"
local SECRET = "hostile-SECRET-aws-0042y"

-- Runs a call that fails on the echoing server in a fresh process with tracing to the console and debug
-- logs on stderr; reports the error's text.
local CASE = [[
local provider, o, what = arg[1], cjson.decode(arg[2]), arg[3]
local text
local ok, err = pcall(function()
  if what == "lm" then
    local lm = glsb.lm.openai { model = "m", retry = false }
    return lm:invoke { messages = { { role = "user", content = "hi" } } }
  end
  if what == "list" then
    o.retry = nil
    return glsb.list(provider, o)
  end
  local sb = glsb.create(provider, o)
  if what == "files" then
    local fok, ferr = pcall(sb.files.list, sb.files, "/")
    text = tostring(fok) .. " " .. tostring(ferr)
  else
    local r = sb:execute_command("true", { timeout = 10 })
    text = tostring(r.error) .. " " .. tostring(r)
  end
  sb:terminate()
end)
if not ok then text = tostring(err) .. " " .. (type(err) == "table" and tostring(err.message) or "") end
report { text = text }
]]

local ENV_BASE = { GLSB_LOG = "debug", OTEL_TRACES_EXPORTER = "console", OTEL_SERVICE_NAME = "hostile" }

local function env_with(extra)
  local e = {}
  for k, v in pairs(ENV_BASE) do e[k] = v end
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

describe("secrets never reach an error, a log line or a span (issue 25 §4) #security", function()
  local srv

  setup(function() srv = hostile.server() end)
  teardown(function() if srv then srv:stop() end end)

  local function run(provider, opts, env, what)
    local got = hostile.run(CASE, { args = { provider, cjson.encode(opts), what or "create" }, env = env_with(env),
      timeout = 60 })
    local out = hostile.must(got)
    return out.text, got.stderr
  end

  local function clean(text, stderr, ...)
    assert.is_string(text)
    assert.matches("glsb: debug: http ", stderr) -- the requests were logged
    assert.matches("glsb.trace:", stderr) -- the spans were exported
    for _, secret in ipairs({ ... }) do
      assert.is_nil(text:find(secret, 1, true), "the error holds a secret: " .. text)
      for line in stderr:gmatch("[^\n]+") do
        assert.is_nil(line:find(secret, 1, true), "a log line or span holds a secret: " .. line)
      end
    end
  end

  local ECHO = { status = 401, echo = true }

  for _, how in ipairs({ "environment", "options" }) do
    it("e2b: the API key from " .. how .. ", quoted back by a 401", function()
      srv:plan { { path = ".", respond = ECHO } }
      local o = { api_url = srv.url, sandbox_url = srv.url, retry = false }
      local env = {}
      if how == "options" then o.api_key = KEY else env.E2B_API_KEY = KEY end
      local text, stderr = run("e2b", o, env)
      assert.matches("REDACTED", text) -- the server did quote it: it was scrubbed
      clean(text, stderr, KEY)
      srv:plan { { path = ".", respond = ECHO } }
      text, stderr = run("e2b", o, env, "list")
      clean(text, stderr, KEY)
    end)

    it("opensandbox: the API key from " .. how .. ", quoted back by a 401", function()
      srv:plan { { path = ".", respond = ECHO } }
      local o = { domain = srv.url, retry = false }
      local env = {}
      if how == "options" then o.api_key = KEY else env.OPEN_SANDBOX_API_KEY = KEY end
      local text, stderr = run("opensandbox", o, env)
      assert.matches("REDACTED", text)
      clean(text, stderr, KEY)
      srv:plan { { path = ".", respond = ECHO } }
      text, stderr = run("opensandbox", o, env, "list")
      clean(text, stderr, KEY)
    end)

    it("bedrock: the session token and secret key from " .. how .. ", quoted back by a 403", function()
      srv:plan { { path = ".", respond = { status = 403, echo = true,
        headers = { ["x-amzn-errortype"] = "AccessDeniedException" } } } }
      local o = { region = "us-east-1", endpoint = srv.url, control_endpoint = srv.url, retry = false }
      local env = { AWS_CONFIG_FILE = "/nonexistent", AWS_SHARED_CREDENTIALS_FILE = "/nonexistent" }
      if how == "options" then
        o.access_key_id, o.secret_access_key, o.session_token = "AKIAHOSTILE00000001", SECRET, SESSION
      else
        env.AWS_ACCESS_KEY_ID, env.AWS_SECRET_ACCESS_KEY, env.AWS_SESSION_TOKEN = "AKIAHOSTILE00000001", SECRET,
          SESSION
      end
      local text, stderr = run("bedrock", o, env)
      clean(text, stderr, SESSION, SECRET)
    end)
  end

  it("e2b: the envd token a create handed out, quoted back by envd's 401", function()
    srv:plan(hostile.with({ { method = "POST", path = "Filesystem/ListDir", respond = { status = 401,
      echo = { "x-access-token" } } } }, {
      { method = "POST", path = "^/v2/sandboxes$", respond = { status = 201, json = { sandboxID = "isb1",
        envdVersion = "0.2.0", envdAccessToken = TOKEN } } },
      { method = "DELETE", path = "^/sandboxes/", respond = { status = 204 } },
    }))
    local text, stderr = run("e2b", { api_url = srv.url, sandbox_url = srv.url, api_key = KEY }, {}, "files")
    assert.matches("401", text)
    assert.matches("X%-Access%-Token: REDACTED", text) -- quoted, and scrubbed
    clean(text, stderr, KEY, TOKEN)
  end)

  it("lm: an OpenAI key from OPENAI_API_KEY, quoted back by a 401 (the same choke point)", function()
    srv:plan { { path = ".", respond = ECHO } }
    local text, stderr = run("e2b", {}, { OPENAI_API_KEY = KEY, OPENAI_BASE_URL = srv.url .. "/v1" }, "lm")
    clean(text, stderr, KEY)
  end)

  it("sb:ref() and glsb.list keep no user:password@ of an endpoint; connect takes them from its options", function()
    local glsb = require "glsb"
    local with_user = srv.url:gsub("^http://", "http://alice:hunter2pass@")
    srv:plan(hostile.rules("e2b", srv.url))
    local sb = glsb.create("e2b", { api_key = KEY, api_url = with_user, sandbox_url = with_user })
    local ref = sb:ref()
    sb:terminate()
    assert.is_nil(cjson.encode(ref):find("hunter2pass", 1, true), cjson.encode(ref))
    assert.is_nil(cjson.encode(ref):find("alice", 1, true), cjson.encode(ref))
    assert.are.equal(srv.url, ref.api_url)
    srv:plan(hostile.rules("opensandbox", srv.url))
    sb = glsb.create("opensandbox", { api_key = KEY, domain = with_user })
    local oref = sb:ref()
    sb:terminate()
    assert.is_nil(cjson.encode(oref):find("hunter2pass", 1, true), cjson.encode(oref))
    srv:plan { { method = "GET", path = "^/v2/sandboxes", respond = { json = { { sandboxID = "isb2" } } } } }
    for _, r in ipairs(glsb.list("e2b", { api_key = KEY, api_url = with_user, sandbox_url = with_user })) do
      assert.is_nil(cjson.encode(r):find("hunter2pass", 1, true), cjson.encode(r))
    end
    -- a connect with the ref goes where its options say, credentials included
    srv:plan(hostile.with({ { method = "POST", path = "/connect$", respond = { status = 200, json = {
      sandboxID = "isb1", envdVersion = "0.2.0" } } }, { method = "GET", path = "^/sandboxes/isb1$",
      respond = { json = { sandboxID = "isb1", state = "running" } } } }, hostile.rules("e2b", srv.url)))
    local again = glsb.connect("e2b", ref, { api_key = KEY, api_url = with_user, sandbox_url = with_user })
    again:terminate()
    local auth
    for _, r in ipairs(srv:requests()) do
      for _, h in ipairs(r.headers) do if h[1]:lower() == "authorization" then auth = h[2] end end
    end
    assert.are.equal("Basic " .. require("glsb.codec").b64encode("alice:hunter2pass"), auth)
  end)
end)
