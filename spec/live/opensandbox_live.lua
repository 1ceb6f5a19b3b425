-- The provider contract suite against a real OpenSandbox server (make test-live; not part of make test).
-- Needs OPEN_SANDBOX_DOMAIN (and OPEN_SANDBOX_API_KEY when the server checks one); optional
-- OPEN_SANDBOX_PROTOCOL, OPEN_SANDBOX_USE_SERVER_PROXY, OPEN_SANDBOX_IMAGE (default: the adapter's
-- code-interpreter image). Every sandbox is tagged with this run's id; leftovers() lists the tagged ones
-- still there.
local glsb = require "glsb"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"

local RUN = ("glsb-live-%d-%d"):format(os.time(), math.random(1, 1e6))

describe("opensandbox live contract run #live", function()
  if not os.getenv("OPEN_SANDBOX_DOMAIN") then
    error("OPEN_SANDBOX_DOMAIN is not set (make test-live skips this run without it)")
  end
  local cfg = lifecycle.config {}

  local function tagged()
    local q = lifecycle.query { { "metadata", lifecycle.metadata_filter { ["glsb-live"] = RUN } },
      { "pageSize", "200" } }
    local res = lifecycle.request(cfg, "GET", "/sandboxes", nil, { query = q })
    if res.error or res.status ~= 200 or type(res.json) ~= "table" then
      return { "cannot list sandboxes: " .. tostring(res.status or (res.error and res.error.message)) }
    end
    local out = {}
    for _, s in ipairs(res.json.items or {}) do
      local state = type(s.status) == "table" and s.status.state or "?"
      if state ~= "Terminated" and state ~= "Stopping" then out[#out + 1] = "sandbox " .. tostring(s.id) .. " " .. state end
    end
    return out
  end

  require("contract.suite")("opensandbox", function()
    return { image = os.getenv("OPEN_SANDBOX_IMAGE"), timeout = 300, metadata = { ["glsb-live"] = RUN } }
  end, {
    tag = "#live",
    call_languages = {}, -- the adapter runs python only (as the emulator run says)
    host_python = false, displays = false, charts = false, -- execd forwards only execute_result
    lease_slack = 15, -- a real server reaps expired sandboxes on its own schedule
    leftovers = function()
      -- deletion is asynchronous on a real server: give it a moment
      local left
      for _ = 1, 30 do
        left = tagged()
        if #left == 0 then return left end
        glsb.sleep(1)
      end
      return left
    end,
  })
end)
