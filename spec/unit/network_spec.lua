-- glsb.network: the one shape of the `network` option (issue 25 §7), checked and normalised.
local network = require("glsb.network")

describe("glsb.network.policy", function()
  it("nil and false are no network; true is the outside with no rules", function()
    assert.is_nil(network.policy(nil))
    assert.is_nil(network.policy(false))
    assert.are.same({ allow = {}, allow_domains = {}, deny = {} }, network.policy(true))
    assert.are.same({ allow = {}, allow_domains = {}, deny = {} }, network.policy({}))
  end)

  it("normalises addresses and CIDRs (host bits cleared) and names (lower case, no final dot)", function()
    local p = network.policy({ allow = { "203.0.113.7", "10.1.2.3/8", "PyPI.org.", "*.Example.com", "db" },
      deny = { "0.0.0.0/0", "192.168.1.1/24" } })
    assert.are.same({ "203.0.113.7/32", "10.0.0.0/8" }, p.allow)
    assert.are.same({ "pypi.org", "*.example.com", "db" }, p.allow_domains)
    assert.are.same({ "0.0.0.0/0", "192.168.1.0/24" }, p.deny)
  end)

  it("refuses what is neither, at the caller's line, naming the entry", function()
    local cases = {
      { { allow = { "256.1.1.1" } }, "network.allow%[1%] \"256.1.1.1\" is not" },
      { { allow = { "1.2.3.4", "010.0.0.1" } }, "network.allow%[2%] \"010.0.0.1\"" },
      { { allow = { "1.2.3.4/33" } }, "network.allow%[1%]" },
      { { allow = { "::1" } }, "network.allow%[1%] \"::1\"" },
      { { allow = { "-bad.example" } }, "network.allow%[1%]" },
      { { allow = { "a..b" } }, "network.allow%[1%]" },
      { { allow = { "*" } }, "network.allow%[1%]" },
      { { deny = { "evil.example" } }, "network.deny%[1%] \"evil.example\" is not an IPv4 address or CIDR %(a name" },
      { { deny = { "1.2.3" } }, "network.deny%[1%] \"1.2.3\"" },
      { { alow = { "1.2.3.4" } }, "unknown option 'alow' %(did you mean 'allow'%?%)" },
      { { allow = "1.2.3.4" }, "option 'allow' must be an array of strings" },
      { "yes", "option 'network' must be a boolean or a table" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(network.policy, c[1], "create")
      assert.is_false(ok)
      assert.is_string(err)
      assert.matches(c[2], err)
      assert.matches("network_spec%.lua:%d+: create", err)
    end
  end)

  it("offers one declaration for the providers' schemas", function()
    assert.are.equal("boolean|table", network.OPTION[1])
    assert.is_string(network.OPTION[2])
  end)
end)
