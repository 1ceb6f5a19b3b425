-- glsb.retry: only retryable failures, bounded exponential backoff with jitter, retry_after honoured.
local retry = require "glsb.retry"
local errors = require "glsb.errors"

local function transient() return errors.new(errors.SandboxStartError, "create", "busy", errors.http_failure(503)) end
local function permanent() return errors.new(errors.SandboxStartError, "create", "denied", errors.http_failure(401)) end

describe("glsb.retry #unit", function()
  local sleeps
  local policy
  before_each(function()
    sleeps = {}
    policy = { attempts = 4, base_delay = 1, factor = 2, max_delay = 3, jitter = 0,
      sleep = function(s) sleeps[#sleeps + 1] = s end }
  end)

  it("returns every result of a first success without sleeping", function()
    local a, b, c = retry.call(function(x) return x, nil, "z" end, policy, "x")
    assert.are.same({ "x", nil, "z" }, { a, b, c })
    assert.are.same({}, sleeps)
  end)

  it("retries transient failures with exponential, capped backoff", function()
    local n = 0
    local r = retry.call(function()
      n = n + 1
      if n < 4 then error(transient(), 0) end
      return "ok"
    end, policy)
    assert.are.equal("ok", r)
    assert.are.equal(4, n)
    assert.are.same({ 1, 2, 3 }, sleeps)
  end)

  it("gives up after the attempt budget with the last error", function()
    local n = 0
    local ok, err = pcall(retry.call, function() n = n + 1 error(transient(), 0) end, policy)
    assert.is_false(ok)
    assert.are.equal(4, n)
    assert.is_true(errors.is(err, errors.SandboxStartError))
    assert.are.equal(3, #sleeps)
  end)

  it("does not retry permanent or unclassified failures", function()
    local n = 0
    local ok, err = pcall(retry.call, function() n = n + 1 error(permanent(), 0) end, policy)
    assert.is_false(ok)
    assert.are.equal(1, n)
    assert.are.equal("denied", err.message)
    n = 0
    ok = pcall(retry.call, function() n = n + 1 error("attempt to call a nil value", 0) end, policy)
    assert.is_false(ok)
    assert.are.equal(1, n)
  end)

  it("honours retry_after up to max_retry_after", function()
    local n = 0
    policy.max_retry_after = 5
    retry.call(function()
      n = n + 1
      if n == 1 then error(errors.new(errors.SandboxStartError, "create", "slow",
        errors.http_failure(429, { ["retry-after"] = "4" })), 0) end
      if n == 2 then error(errors.new(errors.SandboxStartError, "create", "slow",
        errors.http_failure(429, { ["retry-after"] = "100" })), 0) end
      return true
    end, policy)
    assert.are.same({ 4, 5 }, sleeps)
  end)

  it("takes no wait that would end past the deadline: the last error is raised then", function()
    local clock = 100
    policy.now = function() return clock end
    policy.sleep = function(s) sleeps[#sleeps + 1] = s clock = clock + s end
    policy.deadline = 103.5 -- waits of 1 and 2 fit, the next 3 would not
    local n = 0
    local ok, err = pcall(retry.call, function() n = n + 1 error(transient(), 0) end, policy)
    assert.is_false(ok)
    assert.are.equal("busy", err.message)
    assert.are.same({ 1, 2 }, sleeps)
    assert.are.equal(3, n)
    -- a Retry-After beyond the deadline ends it at once
    sleeps, clock, n = {}, 100, 0
    ok = pcall(retry.call, function()
      n = n + 1
      error(errors.new(errors.SandboxStartError, "create", "slow", errors.http_failure(429, { ["retry-after"] = "9" })), 0)
    end, policy)
    assert.is_false(ok)
    assert.are.same({}, sleeps)
    assert.are.equal(1, n)
  end)

  it("applies jitter within +/- the fraction", function()
    local p = { base_delay = 10, factor = 1, max_delay = 10, jitter = 0.5 }
    assert.are.equal(5, retry.delay(1, p, nil, function() return 0 end))
    assert.are.equal(15, retry.delay(1, p, nil, function() return 1 end))
    for _ = 1, 50 do
      local d = retry.delay(1, p)
      assert.is_true(d >= 5 and d <= 15, tostring(d))
    end
  end)

  it("uses a custom predicate and calls on_retry before sleeping", function()
    local seen = {}
    policy.retryable = function(err) return err == "again" end
    policy.on_retry = function(err, attempt, delay) seen[#seen + 1] = { err, attempt, delay } end
    local n = 0
    retry.call(function() n = n + 1 if n < 3 then error("again", 0) end end, policy)
    assert.are.same({ { "again", 1, 1 }, { "again", 2, 2 } }, seen)
  end)

  it("attempts = 1 means no retry", function()
    policy.attempts = 1
    local n = 0
    pcall(retry.call, function() n = n + 1 error(transient(), 0) end, policy)
    assert.are.equal(1, n)
  end)
end)
