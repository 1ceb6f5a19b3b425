-- glsb.providers.e2b.api: where E2B lives and what the envelope looks like (no I/O). #e2b
require "glsb"
local api = require "glsb.providers.e2b.api"

describe("e2b api helpers #e2b", function()
  it("derives the control plane from the domain, options winning", function()
    local cfg = api.config { api_key = "k", domain = "example.test" }
    assert.equal("https://api.example.test", cfg.api_url)
    assert.is_nil(cfg.sandbox_url)
    assert.equal("k", cfg.api_key)
    cfg = api.config { api_key = "k", api_url = "http://127.0.0.1:9/", sandbox_url = "http://127.0.0.1:8//" }
    assert.equal("http://127.0.0.1:9", cfg.api_url)
    assert.equal("http://127.0.0.1:8", cfg.sandbox_url)
  end)

  it("defaults the domain to e2b.app", function()
    if os.getenv("E2B_DOMAIN") or os.getenv("E2B_API_URL") then
      error("the test environment must not set E2B_DOMAIN / E2B_API_URL")
    end
    assert.equal("https://api.e2b.app", api.config({}).api_url)
  end)

  it("addresses envd and the interpreter by port and sandbox id, or through sandbox_url", function()
    local cfg = api.config { domain = "example.test" }
    assert.equal("https://49983-iabc.example.test/health", api.data_url(cfg, "iabc", api.ENVD_PORT, "/health"))
    assert.equal("https://49999-iabc.other.test/execute",
      api.data_url(cfg, "iabc", api.JUPYTER_PORT, "/execute", "other.test"))
    cfg = api.config { sandbox_url = "http://127.0.0.1:8" }
    assert.equal("http://127.0.0.1:8/execute", api.data_url(cfg, "iabc", api.JUPYTER_PORT, "/execute"))
  end)

  it("frames one Connect request envelope: flags 0, big-endian length, JSON", function()
    local env = api.envelope('{"a":1}')
    assert.equal("\0\0\0\0\7" .. '{"a":1}', env)
  end)
end)
