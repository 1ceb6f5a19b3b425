-- The provider contract suite against E2B's cloud (make test-live; not part of make test). Needs
-- E2B_API_KEY; E2B_DOMAIN / E2B_API_URL are honoured as the adapter reads them.
describe("e2b live contract run #live", function()
  if not os.getenv("E2B_API_KEY") then
    error("E2B_API_KEY is not set (make test-live skips this run without it)")
  end
  require("contract.suite")("e2b", function()
    return { timeout = 120 }
  end, { tag = "#live", lease_slack = 10, host_python = false })
end)
