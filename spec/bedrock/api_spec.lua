-- glsb.providers.bedrock.api: how an AWS refusal becomes a cause table (its name, its message, how long
-- it asks to be left alone).
require "glsb" -- installs the provider searcher (glsb.registry)
local api = require "glsb.providers.bedrock.api"

describe("bedrock api: aws_failure #bedrock", function()
  local function failure(status, headers, json)
    return api.aws_failure({ status = status, headers = headers or {}, json = json, body = "" }, nil)
  end

  it("names the error from x-amzn-errortype or the body, as the SDKs do", function()
    assert.are.equal("ThrottlingException", failure(429, { ["x-amzn-errortype"] = "ThrottlingException:http://x" }).aws_error)
    assert.are.equal("ValidationException", failure(400, {}, { __type = "com.amazon#ValidationException" }).aws_error)
    assert.are.equal("HTTP500", failure(500).aws_error)
  end)

  it("reads x-amz-retry-after as milliseconds and Retry-After as seconds or a date, never guessing", function()
    assert.are.equal(0.05, failure(429, { ["x-amz-retry-after"] = "50" }).retry_after)
    assert.are.equal(5, failure(429, { ["x-amz-retry-after"] = "5000" }).retry_after)
    assert.are.equal(2, failure(429, { ["retry-after"] = "2" }).retry_after)
    assert.are.equal(200, failure(429, { ["retry-after"] = "200" }).retry_after, "seconds, even when large")
    assert.are.equal(30, failure(503, { ["retry-after"] = "Tue, 01 Dec 2026 06:15:00 GMT",
      date = "Tue, 01 Dec 2026 06:14:30 GMT" }).retry_after)
    assert.are.equal(0.25, failure(429, { ["x-amz-retry-after"] = "250", ["retry-after"] = "9" }).retry_after,
      "the AWS header wins")
    assert.is_nil(failure(429, { ["x-amz-retry-after"] = "1.5" }).retry_after)
    assert.is_nil(failure(429).retry_after)
  end)
end)
