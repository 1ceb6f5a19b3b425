-- The provider contract suite against AWS Bedrock AgentCore (make test-live; not part of make test).
-- Runs when GLSB_LIVE_BEDROCK=1; credentials and region come from the AWS chain as the adapter reads
-- them (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN], AWS_PROFILE, container, IMDSv2;
-- AWS_REGION). Each sandbox is a real code-interpreter session on aws.codeinterpreter.v1 (billed):
-- every one is named after this run, and leftovers() lists the READY sessions of that name still there.
local glsb = require "glsb"
local credentials = require "glsb.aws.credentials"

local RUN = ("glsb-live-%08x"):format(math.random(0, 0x7fffffff))

describe("bedrock live contract run #live", function()
  if os.getenv("GLSB_LIVE_BEDROCK") ~= "1" then
    error("GLSB_LIVE_BEDROCK=1 is not set (make test-live skips this run without it)")
  end
  if not credentials.region() then
    error("no AWS region: set AWS_REGION (or AWS_DEFAULT_REGION, or a profile's region)")
  end
  local ok, err = pcall(function() return credentials.chain():get() end)
  if not ok then error("no AWS credentials: " .. tostring(type(err) == "table" and err.message or err)) end
  require("contract.suite")("bedrock", function()
    return { timeout = 300, name = RUN }
  end, { tag = "#live", streams = false, renewable_lease = false, lease_slack = 15, ports = false,
    host_python = false, charts = false,
    leftovers = function()
      -- a stop is asynchronous on the service: give it a moment
      local left
      for _ = 1, 30 do
        left = {}
        for _, ref in ipairs(glsb.list("bedrock")) do
          if ref.name == RUN then left[#left + 1] = "session " .. tostring(ref.sandbox_id) end
        end
        if #left == 0 then return left end
        glsb.sleep(1)
      end
      return left
    end,
    -- executeCode's other languages (service model ProgrammingLanguage); AgentCore has no bash for code
    call_languages = { "javascript", "typescript" } })
end)
