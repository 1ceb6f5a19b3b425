-- glsb.errors: class tree, is(), the one classifier, transient derived on read, tostring, builders.
local errors = require "glsb.errors"

describe("glsb.errors #unit", function()
  local E = errors

  it("has the class tree rooted at CodeInterpreterError", function()
    for _, name in ipairs({ "SandboxStartError", "SandboxExecutionError", "SandboxNotInitializedError",
      "SandboxTerminateError", "TemplateBuildError", "WorkspaceError", "PoolError", "PoolEmptyError",
      "PoolAcquireFailedError", "PoolNotRunningError", "PoolStateStoreUnavailableError", "PoolDestroyedError" }) do
      local e = E.new(E[name], "create", "x")
      assert.is_true(E.is(e, E[name]), name)
      assert.is_true(E.is(e, E.CodeInterpreterError), name .. " is a CodeInterpreterError")
      assert.is_true(E.is(e, name), "by name")
      assert.are.equal(name, e.class)
    end
  end)

  it("puts every pool error under PoolError", function()
    for _, name in ipairs({ "PoolEmptyError", "PoolAcquireFailedError", "PoolNotRunningError",
      "PoolStateStoreUnavailableError", "PoolDestroyedError" }) do
      assert.is_true(E.is(E.new(E[name], "pool", "x"), E.PoolError), name)
    end
    assert.is_false(E.is(E.new(E.SandboxStartError, "create", "x"), E.PoolError))
  end)

  it("is() respects inheritance and does not cross siblings", function()
    local e = E.new(E.SandboxStartError, "create", "boom")
    assert.is_false(E.is(e, E.SandboxTerminateError))
    assert.is_false(E.is(E.new(E.CodeInterpreterError, "create", "x"), E.SandboxStartError))
    assert.is_false(E.is("a string", E.CodeInterpreterError))
    assert.is_false(E.is({ class = "SandboxStartError" }, E.SandboxStartError), "look-alike tables are not errors")
    assert.is_false(E.is(e, "NoSuchClass"))
  end)

  it("keeps stage, message and cause; raises with error(obj, 0)", function()
    local cause = { phase = "connect", code = "COULDNT_CONNECT", message = "refused", retry_safe = true }
    local ok, e = pcall(E.raise, E.SandboxStartError, "create", "cannot reach api", cause)
    assert.is_false(ok)
    assert.are.equal("create", e.stage)
    assert.are.equal("cannot reach api", e.message)
    assert.are.equal(cause, e.cause)
  end)

  it("rejects unknown classes and non-string stages", function()
    assert.has_error(function() E.new("Nope", "create", "x") end)
    assert.has_error(function() E.new(E.SandboxStartError, nil, "x") end)
  end)

  describe("classifier", function()
    local function http(status) return E.http_failure(status, {}, "") end

    it("calls 429/502/503/504 transient and 400/401/403/404 permanent", function()
      for _, s in ipairs({ 429, 502, 503, 504 }) do assert.is_true(E.classify(http(s)), tostring(s)) end
      for _, s in ipairs({ 400, 401, 403, 404 }) do assert.is_false(E.classify(http(s)), tostring(s)) end
    end)

    it("calls connect/send failures, refused, reset and timeouts transient", function()
      assert.is_true(E.classify({ phase = "connect", code = "COULDNT_RESOLVE_HOST" }))
      assert.is_true(E.classify({ phase = "send", code = "SOMETHING_ELSE" }))
      assert.is_true(E.classify({ phase = "receive", code = "OPERATION_TIMEDOUT" }))
      assert.is_true(E.classify({ phase = "receive", code = "CURLE_99", timeout = true }))
      assert.is_true(E.classify({ phase = "receive", code = "RECV_ERROR", message = "Connection reset by peer" }))
      assert.is_true(E.classify("connect: Connection refused"))
      assert.is_true(E.classify("read: connection reset by peer"))
      assert.is_true(E.classify("operation timed out after 30000 ms"))
    end)

    it("makes no claim about unrecognised failures", function()
      assert.is_nil(E.classify("attempt to index a nil value (field 'timeout')"))
      assert.is_nil(E.classify({ phase = "receive", code = "WEIRD" }))
      assert.is_false(E.classify({ phase = "framing", code = "FRAME_TOO_LARGE" }))
      assert.is_nil(E.classify(nil))
    end)

    it("walks the cause chain: first link with an opinion decides", function()
      local inner = E.new(E.SandboxStartError, "create", "api said no", http(503))
      local outer = E.new(E.SandboxStartError, "create", "create failed", inner)
      assert.is_true(outer.transient)
      local perm = E.new(E.SandboxStartError, "create", "bad key",
        E.new(E.CodeInterpreterError, "create", "x", http(401)))
      assert.is_false(perm.transient)
      -- an outer link with an opinion wins over the inner one
      local mixed = E.new(E.SandboxStartError, "create", "x", { http_status = 401, cause = http(503) })
      assert.is_false(mixed.transient)
    end)

    it("derives transient on read, never stores it", function()
      local e = E.new(E.SandboxStartError, "create", "x", { phase = "receive", code = "WEIRD" })
      assert.is_false(e.transient)
      e.cause = http(429)
      assert.is_true(e.transient, "changing the cause changes the verdict")
      assert.is_nil(rawget(e, "transient"))
      assert.has_error(function() e.transient = false end)
    end)

    it("survives a cause cycle", function()
      local a = E.new(E.SandboxStartError, "create", "a")
      local b = E.new(E.SandboxStartError, "create", "b", a)
      a.cause = b
      assert.is_false(a.transient)
      assert.is_string(tostring(a))
    end)
  end)

  it("finds retry_after along the chain (Retry-After header)", function()
    local e = E.new(E.SandboxStartError, "create", "x", E.http_failure(429, { ["Retry-After"] = "7" }, "slow down"))
    assert.are.equal(7, E.retry_after(e))
    assert.are.equal(7, e.retry_after)
    assert.is_nil(E.retry_after(E.new(E.SandboxStartError, "create", "x")))
  end)

  it("retry-after-ms wins over Retry-After; an HTTP-date counts from now; junk is nil", function()
    assert.are.equal(0.25, E.http_failure(429, { ["retry-after-ms"] = "250", ["retry-after"] = "9" }, "").retry_after)
    assert.are.equal(9, E.http_failure(429, { ["retry-after-ms"] = "soon", ["retry-after"] = "9" }, "").retry_after)
    assert.are.equal(1.5, E.retry_after_of({ ["Retry-After"] = "1.5" }))
    local utc_now = 1445412480 -- 2015-10-21T07:28:00Z
    assert.are.equal(30, require("glsb.time").retry_after("Wed, 21 Oct 2015 07:28:30 GMT", utc_now))
    assert.are.equal(0, require("glsb.time").retry_after("Wed, 21 Oct 2015 07:27:00 GMT", utc_now))
    assert.is_nil(require("glsb.time").retry_after("tomorrow"))
    assert.is_nil(E.retry_after_of({ ["retry-after"] = "-3" }))
    assert.is_nil(E.retry_after_of(nil))
  end)

  it("reads a Retry-After HTTP date against the answer's own Date header", function()
    local f = E.http_failure(503, { ["retry-after"] = "Tue, 01 Dec 2026 06:15:00 GMT",
      date = "Tue, 01 Dec 2026 06:14:26 GMT" })
    assert.are.equal(34, f.retry_after)
    assert.is_nil(E.http_failure(503, { ["retry-after"] = "whenever" }).retry_after)
  end)

  it("renders class, stage, message, transient and the cause chain", function()
    local e = E.new(E.SandboxStartError, "create", "429 Too Many Requests",
      E.new(E.CodeInterpreterError, "create", "inner", { phase = "receive", code = "X", http_status = 429,
        message = "rate limited" }))
    local s = tostring(e)
    assert.are.equal("SandboxStartError[create]: 429 Too Many Requests (transient) <- cause: "
      .. "CodeInterpreterError[create]: inner <- cause: transport receive X HTTP 429: rate limited", s)
    local p = tostring(E.new(E.SandboxTerminateError, "terminate", "gone", "plain string"))
    assert.are.equal("SandboxTerminateError[terminate]: gone <- cause: plain string", p)
  end)

  describe("builders", function()
    it("http_failure names the status and clips the body", function()
      local f = E.http_failure(401, {}, string.rep("x", 1000))
      assert.are.equal(401, f.http_status)
      assert.truthy(f.message:find("^401 Unauthorized: x+%.%.%.$"))
      assert.is_true(#f.message < 400)
    end)

    it("from_response returns nil for success, wraps transport errors and HTTP statuses", function()
      assert.is_nil(E.from_response(E.SandboxStartError, "create", { status = 201, headers = {} }))
      local t = E.from_response(E.SandboxStartError, "create",
        { status = 0, error = { phase = "connect", code = "COULDNT_CONNECT", message = "refused", retry_safe = true } })
      assert.is_true(E.is(t, E.SandboxStartError))
      assert.is_true(t.transient)
      assert.are.equal("connect", t.cause.phase)
      local h = E.from_response(E.SandboxStartError, "create", { status = 403, headers = {}, body = "no" })
      assert.are.equal(403, h.cause.http_status)
      assert.is_false(h.transient)
      assert.truthy(h.message:find("403 Forbidden", 1, true))
    end)

    it("wrap keeps an error of the wanted class and wraps anything else", function()
      local e = E.new(E.SandboxStartError, "health_check", "not ready")
      assert.are.equal(e, E.wrap(E.SandboxStartError, "create", e))
      local w = E.wrap(E.SandboxStartError, "create", "socket closed")
      assert.are.equal("create", w.stage)
      assert.are.equal("socket closed", w.cause)
      local x = E.wrap(E.SandboxStartError, "create", E.new(E.SandboxExecutionError, "execute", "y"))
      assert.are.equal("SandboxStartError", x.class)
    end)

    it("transport_failure finds the table with a phase", function()
      local tf = { phase = "send", code = "SEND_ERROR" }
      local e = E.new(E.SandboxExecutionError, "execute", "x", E.new(E.CodeInterpreterError, "execute", "y", tf))
      assert.are.equal(tf, E.transport_failure(e))
      assert.is_nil(E.transport_failure(E.new(E.SandboxExecutionError, "execute", "x", "str")))
    end)
  end)

  describe("rendering a cause chain", function()
    it("never prints <error table>: a report's own words, else its fields", function()
      local e = E.new(E.SandboxStartError, "create", "could not set up", { ok = false, error = "landlock missing" })
      assert.matches("could not set up <%- cause: landlock missing$", tostring(e))
      local odd = E.new(E.SandboxStartError, "create", "x", { flag = true, count = 3, nested = {} })
      assert.are.equal("SandboxStartError[create]: x", tostring(odd))
      assert.are.equal("{count=3, flag=true}", E.describe(odd.cause))
    end)

    it("renders each cause once and never a raw table (issue 27)", function()
      -- a build failure whose cause is its data ({log = "", exit = {...}}): no `<- cause: {log=""}`
      local b = E.new(E.TemplateBuildError, "template_build", "the template build failed (glsb-confine: bind "
        .. "source /srv/wheels: No such file or directory)", { log = "", exit = { code = 1 } })
      assert.are.equal("TemplateBuildError[template_build]: the template build failed (glsb-confine: bind source "
        .. "/srv/wheels: No such file or directory)", tostring(b))
      -- a message that quotes its cause says it once
      local cause = E.http_failure(404, {}, "FILE_NOT_FOUND: file not found")
      local d = E.new(E.SandboxExecutionError, "download", "download of /nope/x failed: " .. cause.message, cause)
      assert.are.equal("SandboxExecutionError[download]: download of /nope/x failed: 404 Not Found: "
        .. "FILE_NOT_FOUND: file not found", tostring(d))
      -- a wrapper of an error with the same message: the inner one is not repeated, what it wraps still is
      local inner = E.new(E.SandboxStartError, "create", "refused", "socket closed")
      local w = E.new(E.SandboxStartError, "create", "create failed: refused", inner)
      assert.are.same({ "socket closed" }, E.causes(w))
      assert.are.equal("SandboxStartError[create]: create failed: refused <- cause: socket closed", tostring(w))
      -- a cause with new words still shows, class and stage first
      local x = E.new(E.SandboxStartError, "create", "outer", E.new(E.SandboxExecutionError, "execute", "inner"))
      assert.are.same({ "SandboxExecutionError[execute]: inner" }, E.causes(x))
    end)

    it("puts the transport's reason and the HTTP body in the first line", function()
      local t = E.from_response(E.SandboxExecutionError, "download", { error = { phase = "receive",
        code = "OPERATION_TIMEDOUT", message = "Operation timed out after 500 ms", timeout = true } }, "download failed")
      assert.matches("^SandboxExecutionError%[download%]: download failed: transport receive OPERATION_TIMEDOUT: "
        .. "Operation timed out after 500 ms", tostring(t))
      local h = E.from_response(E.SandboxStartError, "create", { status = 403, headers = {},
        body = '{"code":403,"message":"you do not have access"}' }, "create failed")
      assert.matches("create failed: 403 Forbidden: {\"code\":403,\"message\":\"you do not have access\"}",
        h.message)
    end)

    it("shows a result in a chain by its status, not its whole output", function()
      local models = require "glsb.models"
      local r = models.ExecutionResult.new { status = "error", code = 1, stdout = string.rep("x", 5000) }
      local e = E.new(E.SandboxStartError, "package_install", "failed", r)
      assert.matches("<%- cause: ExecutionResult%(status=error, code=1%)$", tostring(e))
    end)
  end)
end)
