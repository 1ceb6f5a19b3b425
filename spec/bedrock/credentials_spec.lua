-- glsb.aws.credentials: every source of the chain, in order, on loopback (a stand-in container
-- credentials endpoint and IMDSv2 from spec/bedrock/metadata_server.mjs), refreshing before
-- expiry, the region, and secrets kept out of tostring, errors and logs. #unit #bedrock
local credentials = require "glsb.aws.credentials"
local core = require "glsb.core"
local glsb = require "glsb"
local http = require "glsb.http"
local server = require "support.server"

local HERE = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local ROOT = HERE .. "/../.."

-- getenv from a table (the real environment is read in the subprocess test below)
local function env(t) return function(k) return t[k] end end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected a failure")
  return e
end

local function message(e)
  return type(e) == "table" and tostring(e.message) or tostring(e)
end

describe("AWS credential chain #unit #bedrock", function()
  local dir
  before_each(function() dir = core.mkdtemp("glsb-aws-creds-") end)
  after_each(function() core.rmtree(dir) end)

  it("takes options first, then the environment", function()
    local e = env { AWS_ACCESS_KEY_ID = "AKIDENV", AWS_SECRET_ACCESS_KEY = "envsecret", AWS_SESSION_TOKEN = "envtoken" }
    local c = credentials.chain { access_key_id = "AKIDOPT", secret_access_key = "optsecret", getenv = e }:get()
    assert.are.equal("AKIDOPT", c.access_key_id)
    assert.are.equal("optsecret", c.secret_access_key)
    assert.is_nil(c.session_token)
    assert.are.equal("options", c.source)
    c = credentials.chain { getenv = e }:get()
    assert.are.same({ "AKIDENV", "envsecret", "envtoken", "environment" },
      { c.access_key_id, c.secret_access_key, c.session_token, c.source })
  end)

  it("refuses half a key pair in the options as misuse", function()
    assert.has_error(function() credentials.chain { access_key_id = "AKID" } end,
      "aws credentials: access_key_id and secret_access_key go together")
  end)

  it("reads the shared files: the profile, credentials file over config file, ~/.aws by default", function()
    os.execute("mkdir -p '" .. dir .. "/.aws'")
    write(dir .. "/.aws/credentials", "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = defsecret\n"
      .. "# a comment\n[dev]\naws_access_key_id=AKIDDEVCREDS\naws_secret_access_key=devsecret\naws_session_token = devtoken\n")
    write(dir .. "/.aws/config", "[default]\nregion = eu-west-1\n[profile dev]\naws_access_key_id = AKIDDEVCONFIG\n"
      .. "region = ap-south-1\n[profile cfgonly]\naws_access_key_id = AKIDCFG\naws_secret_access_key = cfgsecret\n"
      .. "[profile assume]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = default\n")
    local home = { HOME = dir }
    local c = credentials.chain { getenv = env(home) }:get()
    assert.are.same({ "AKIDDEFAULT", "defsecret", "profile default" }, { c.access_key_id, c.secret_access_key, c.source })
    c = credentials.chain { getenv = env { HOME = dir, AWS_PROFILE = "dev" } }:get()
    assert.are.same({ "AKIDDEVCREDS", "devsecret", "devtoken" }, { c.access_key_id, c.secret_access_key, c.session_token })
    c = credentials.chain { profile = "cfgonly", getenv = env(home) }:get()
    assert.are.equal("AKIDCFG", c.access_key_id)
    assert.are.equal("eu-west-1", credentials.region { getenv = env(home) })
    assert.are.equal("ap-south-1", credentials.region { getenv = env { HOME = dir, AWS_PROFILE = "dev" } })
    local e = err_of(function() credentials.chain { profile = "nope", getenv = env(home) }:get() end)
    assert.matches("the profile 'nope' is in neither shared file", message(e), 1, true)
    e = err_of(function() credentials.chain { profile = "assume", getenv = env(home) }:get() end)
    assert.matches("role_arn, which glsb does not support", message(e), 1, true)
  end)

  it("reads the files named by AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE", function()
    write(dir .. "/c", "[ci]\naws_access_key_id = AKIDFILE\naws_secret_access_key = filesecret\n")
    write(dir .. "/f", "[profile ci]\nregion = us-east-2\n")
    local e = env { AWS_SHARED_CREDENTIALS_FILE = dir .. "/c", AWS_CONFIG_FILE = dir .. "/f", AWS_PROFILE = "ci", HOME = "/nonexistent" }
    assert.are.equal("AKIDFILE", credentials.chain { getenv = e }:get().access_key_id)
    assert.are.equal("us-east-2", credentials.region { getenv = e })
  end)

  it("finds the region in options, AWS_REGION, AWS_DEFAULT_REGION, then the profile", function()
    write(dir .. "/f", "[default]\nregion = from-profile-1\n")
    local full = { AWS_REGION = "from-env-1", AWS_DEFAULT_REGION = "from-default-1", AWS_CONFIG_FILE = dir .. "/f" }
    assert.are.same({ "opt-1", "options" }, { credentials.region { region = "opt-1", getenv = env(full) } })
    assert.are.same({ "from-env-1", "AWS_REGION" }, { credentials.region { getenv = env(full) } })
    full.AWS_REGION = nil
    assert.are.same({ "from-default-1", "AWS_DEFAULT_REGION" }, { credentials.region { getenv = env(full) } })
    full.AWS_DEFAULT_REGION = nil
    assert.are.equal("from-profile-1", credentials.region { getenv = env(full) })
    assert.is_nil(credentials.region { getenv = env {} })
  end)

  it("reads the real process environment", function()
    local cmd = ("cd '%s' && env -i PATH=\"$PATH\" AWS_ACCESS_KEY_ID=AKIDREAL AWS_SECRET_ACCESS_KEY=realsecret "
      .. "AWS_REGION=us-west-1 build/glsb-lua -e 'local c = require(\"glsb.aws.credentials\"); "
      .. "local x = c.chain():get(); print(x.access_key_id, x.source, (c.region()))'"):format(ROOT)
    local p = io.popen(cmd)
    local out = p:read("a")
    p:close()
    assert.are.equal("AKIDREAL\tenvironment\tus-west-1\n", out)
  end)

  describe("from the container and instance metadata endpoints", function()
    local srv
    local function admin(method, body)
      local res = http.json { method = method, url = srv.url .. "/_admin", json = body, timeout = 5 }
      assert(res.status == 200, "metadata admin failed")
      return res.json
    end
    before_each(function()
      srv = server.start({ "node", HERE .. "/metadata_server.mjs", "--token", "Bearer glsb-container-token" })
    end)
    after_each(function() srv.stop() end)

    it("uses AWS_CONTAINER_CREDENTIALS_RELATIVE_URI with the authorization token", function()
      local e = env { AWS_CONTAINER_CREDENTIALS_RELATIVE_URI = "/v2/credentials/abc",
        AWS_CONTAINER_AUTHORIZATION_TOKEN = "Bearer glsb-container-token" }
      local c = credentials.chain { getenv = e, container_host = srv.url }:get()
      assert.are.equal("ASIAGLSBTEST000001", c.access_key_id)
      assert.matches("^glsbToken1", c.session_token)
      assert.are.equal("container", c.source)
      assert.is_true(c.expiration > os.time() + 3000)
      local log = admin("GET").requests
      assert.are.equal("/v2/credentials/abc", log[1].path)
      assert.are.equal("Bearer glsb-container-token", log[1].authorization)
    end)

    it("uses AWS_CONTAINER_CREDENTIALS_FULL_URI with the token file, and refuses a wrong token clearly", function()
      write(dir .. "/token", "Bearer glsb-container-token\n")
      local c = credentials.chain { getenv = env { AWS_CONTAINER_CREDENTIALS_FULL_URI = srv.url .. "/creds",
        AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE = dir .. "/token" } }:get()
      assert.are.equal("container", c.source)
      local e = err_of(function()
        credentials.chain { getenv = env { AWS_CONTAINER_CREDENTIALS_FULL_URI = srv.url .. "/creds",
          AWS_CONTAINER_AUTHORIZATION_TOKEN = "Bearer wrong" } }:get()
      end)
      assert.matches("answered HTTP 403", message(e), 1, true)
      e = err_of(function()
        credentials.chain { getenv = env { AWS_CONTAINER_CREDENTIALS_FULL_URI = "http://192.0.2.1/creds" } }:get()
      end)
      assert.matches("must be https, or http on a loopback", message(e), 1, true)
    end)

    it("uses IMDSv2: a token PUT, then the role, then its credentials", function()
      local c = credentials.chain { getenv = env { AWS_EC2_METADATA_SERVICE_ENDPOINT = srv.url } }:get()
      assert.are.equal("imds", c.source)
      assert.are.equal("ASIAGLSBTEST000001", c.access_key_id)
      local log = admin("GET").requests
      assert.are.same({ "PUT", "GET", "GET" }, { log[1].method, log[2].method, log[3].method })
      assert.are.equal("/latest/api/token", log[1].path)
      assert.are.equal("21600", log[1].ttlHeader)
      assert.are.equal("/latest/meta-data/iam/security-credentials/glsb-test-role", log[3].path)
      assert.is_string(log[3].imdsToken)
      -- AWS_EC2_METADATA_DISABLED skips it: nothing left to try
      local e = err_of(function()
        credentials.chain { getenv = env { AWS_EC2_METADATA_SERVICE_ENDPOINT = srv.url,
          AWS_EC2_METADATA_DISABLED = "true" } }:get()
      end)
      assert.matches("none found %(tried options, environment, profile, web identity, container, imds%)", message(e))
    end)

    it("stops at AWS_WEB_IDENTITY_TOKEN_FILE with a clear error instead of taking the instance's role", function()
      local e = err_of(function()
        credentials.chain { getenv = env { AWS_EC2_METADATA_SERVICE_ENDPOINT = srv.url,
          AWS_WEB_IDENTITY_TOKEN_FILE = "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
          AWS_ROLE_ARN = "arn:aws:iam::123456789012:role/pod" } }:get()
      end)
      assert.matches("AWS credentials (web identity): AWS_WEB_IDENTITY_TOKEN_FILE is set", message(e), 1, true)
      assert.are.equal(0, #admin("GET").requests, "IMDS was not asked")
      -- keys before it in the chain still win
      local c = credentials.chain { getenv = env { AWS_ACCESS_KEY_ID = "AKIDENV", AWS_SECRET_ACCESS_KEY = "s",
        AWS_WEB_IDENTITY_TOKEN_FILE = "/token" } }:get()
      assert.are.equal("environment", c.source)
    end)

    it("refreshes temporary credentials before they expire, once for concurrent callers", function()
      local t0 = os.time()
      local now = t0
      local p = credentials.chain { getenv = env { AWS_EC2_METADATA_SERVICE_ENDPOINT = srv.url }, now = function() return now end }
      admin("POST", { ttl = 600 })
      local first = p:get()                                 -- expires at t0 + 600
      assert.are.equal(first, p:get())                      -- still fresh: no new fetch
      admin("POST", { ttl = 3600 })
      now = t0 + 600 - credentials.REFRESH_WINDOW + 100      -- inside the refresh window
      local got = {}
      glsb.run(function()
        local t1 = glsb.spawn(function() return p:get() end)
        local t2 = glsb.spawn(function() return p:get() end)
        got[1], got[2] = glsb.gather(t1, t2)
      end)
      assert.are.equal("ASIAGLSBTEST000002", got[1].access_key_id)
      assert.are.equal(got[1], got[2])
      assert.are.equal(2, admin("GET").issued, "one refresh for both tasks")
      -- a failed refresh keeps the current credentials while they are valid, then gives up
      admin("POST", { fail = 500 })
      now = t0 + 3600 - credentials.REFRESH_WINDOW + 100
      local warned = {}
      local prev = glsb.log.set_handler(function(level, msg) warned[#warned + 1] = level .. " " .. msg end)
      local kept = p:get()
      glsb.log.set_handler(prev)
      assert.are.equal(got[1], kept)
      assert.matches("refreshing AWS credentials failed", warned[1], 1, true)
      now = t0 + 3600 + 10
      local e = err_of(function() p:get() end)
      assert.matches("answered HTTP 500", message(e), 1, true)
    end)

    it("keeps secrets out of tostring, error messages and logs", function()
      local logged = {}
      local prev = glsb.log.set_handler(function(level, msg, fields)
        logged[#logged + 1] = level .. " " .. msg .. " " .. require("cjson").encode(fields or {})
      end)
      local now = os.time()
      local p = credentials.chain { getenv = env { AWS_EC2_METADATA_SERVICE_ENDPOINT = srv.url }, now = function() return now end }
      local c = p:get()
      admin("POST", { fail = 503 })
      now = now + 3500
      p:get()
      now = now + 3600
      local e = err_of(function() p:get() end)
      glsb.log.set_handler(prev)
      local texts = { tostring(c), tostring(p), message(e), require("glsb.errors").describe(e), table.concat(logged, "\n") }
      for _, t in ipairs(texts) do
        assert.falsy(t:find(c.secret_access_key, 1, true), t)
        assert.falsy(t:find(c.session_token, 1, true), t)
      end
      assert.matches("^AwsCredentials%(ASIAGLSBTEST000001, source=imds, temporary, expires ", tostring(c))
      local text = "canonical request: x-amz-security-token:" .. c.session_token .. " key " .. c.secret_access_key
      assert.are.equal("canonical request: x-amz-security-token:<redacted> key <redacted>", credentials.redact(text, c))
    end)
  end)
end)
