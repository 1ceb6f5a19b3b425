-- The provider contract suite against AWS Bedrock AgentCore (make test-live; not part of make test).
-- Runs when GLSB_LIVE_BEDROCK=1; credentials and region come from the AWS chain as the adapter reads
-- them (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN], AWS_PROFILE, container, IMDSv2;
-- AWS_REGION). Each sandbox is a real code-interpreter session on aws.codeinterpreter.v1 (billed).
local credentials = require "glsb.aws.credentials"

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
    return { timeout = 300 }
  end, { tag = "#live", streams = false, renewable_lease = false, lease_slack = 15, ports = false,
    -- executeCode's other languages (service model ProgrammingLanguage); AgentCore has no bash for code
    call_languages = { "javascript", "typescript" } })
end)
