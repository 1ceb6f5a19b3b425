-- Client spans around glsb.http requests: OpenTelemetry's HTTP client conventions, glsb's failure
-- phase and retry_safe, W3C headers on the request, redacted URLs, and the opt-outs.
local trace = require "glsb.trace"
local http = require "glsb.http"
local seam = require "glsb.trace.seam"
local span_mod = require "glsb.trace.span"
local sampler = require "glsb.trace.sampler"
local server = require "support.server"

-- A built-in tracer whose ended spans land in a list (the same span code configure{} uses).
local function memory_tracer()
  local ended = {}
  local tracer = span_mod.new_tracer { sampler = sampler.from_name("parentbased_always_on"),
    processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } }
  trace.set_tracer(tracer)
  return ended
end

local function unused_port()
  -- a port nobody listens on: bind-free guess from a closed listener is racy, so use port 1 (tcpmux),
  -- which nothing on a test machine serves
  return 1
end

describe("glsb.trace HTTP client spans #trace", function()
  local srv
  setup(function() srv = server.start({ "node", "spec/support/fault_server.mjs", "0" }) end)
  teardown(function() if srv then srv.stop() end end)
  after_each(function()
    trace.set_tracer(nil)
    trace.shutdown()
  end)

  it("follow the HTTP client conventions for a 200", function()
    local ended = memory_tracer()
    local res = http.request { url = srv.url .. "/ok?x=1", timeout = 5 }
    assert.are.equal(200, res.status)
    assert.are.equal(1, #ended)
    local s = ended[1]
    local port = tonumber(srv.url:match(":(%d+)$"))
    assert.are.equal("GET", s.name)
    assert.are.equal("client", s.kind)
    assert.are.same({ ["http.request.method"] = "GET", ["server.address"] = "127.0.0.1", ["server.port"] = port,
      ["url.full"] = srv.url .. "/ok?x=REDACTED", ["url.scheme"] = "http", ["http.response.status_code"] = 200 },
      s.attributes)
    assert.are.equal("unset", s.status_code)
  end)

  it("mark a 4xx/5xx answer as an error with error.type = the status", function()
    local ended = memory_tracer()
    http.request { method = "POST", url = srv.url .. "/status?code=503", body = "x", timeout = 5 }
    http.request { method = "BREW", url = srv.url .. "/status?code=404", timeout = 5 }
    local s = ended[1]
    assert.are.equal("POST", s.name)
    assert.are.equal(503, s.attributes["http.response.status_code"])
    assert.are.equal("503", s.attributes["error.type"])
    assert.are.equal("error", s.status_code)
    assert.are.equal("HTTP", ended[2].name)
    assert.are.equal("_OTHER", ended[2].attributes["http.request.method"])
    assert.are.equal("BREW", ended[2].attributes["http.request.method_original"])
  end)

  it("record a transport failure with its code, phase and retry_safe", function()
    local ended = memory_tracer()
    local res = http.request { url = "http://127.0.0.1:" .. unused_port() .. "/", timeout = 5, connect_timeout = 2 }
    assert.is_not_nil(res.error)
    local s = ended[1]
    assert.are.equal(res.error.code, s.attributes["error.type"])
    assert.are.equal("connect", s.attributes["glsb.failure.phase"])
    assert.is_true(s.attributes["glsb.failure.retry_safe"])
    assert.are.equal("error", s.status_code)
    assert.is_nil(s.attributes["http.response.status_code"])

    http.request { url = srv.url .. "/close-before-response", timeout = 5 }
    local cut = ended[2]
    assert.are.equal("receive", cut.attributes["glsb.failure.phase"])
    assert.is_false(cut.attributes["glsb.failure.retry_safe"])
  end)

  it("send traceparent/tracestate naming the client span, replacing the caller's own", function()
    local ended = memory_tracer()
    local remote = trace.extract("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=x")
    local res = trace.with_span(remote, function()
      return http.json { url = srv.url .. "/echo", timeout = 5, headers = { TraceParent = "00-bogus" } }
    end)
    local h = res.json.headers
    local s = ended[1]
    assert.are.equal("0af7651916cd43dd8448eb211c80319c", s.trace_id)
    assert.are.equal("b7ad6b7169203331", s.parent_span_id)
    assert.are.equal("00-0af7651916cd43dd8448eb211c80319c-" .. s.span_id .. "-01", h.traceparent)
    assert.are.equal("vendor=x", h.tracestate)
    -- headers given as "Name: value" lines too
    res = http.json { url = srv.url .. "/echo", timeout = 5, headers = { "traceparent: 00-bogus", "X-A: 1" } }
    assert.are.equal("00-" .. ended[2].trace_id .. "-" .. ended[2].span_id .. "-01", res.json.headers.traceparent)
    assert.are.equal("1", res.json.headers["x-a"])
  end)

  it("send no headers when propagation is off, globally or for the operation's provider", function()
    trace.configure { exporter = "none", propagate = false }
    local res = http.json { url = srv.url .. "/echo", timeout = 5 }
    assert.is_nil(res.json.headers.traceparent)
    trace.configure { exporter = "none", propagate = { e2b = false } }
    local function under(provider)
      return seam.operation("glsb.sandbox.execute_code", { provider = provider }, nil, function()
        return http.json { url = srv.url .. "/echo", timeout = 5 }
      end)
    end
    assert.is_nil(under("e2b").json.headers.traceparent)
    assert.is_string(under("local").json.headers.traceparent)
  end)

  it("redact credentials and every query value from url.full", function()
    local ended = memory_tracer()
    local base = srv.url:gsub("^http://", "")
    http.request { url = "http://user:pass@" .. base .. "/ok?signature=abc&expires=1#frag", timeout = 5 }
    assert.are.equal("http://REDACTED:REDACTED@" .. base .. "/ok?signature=REDACTED&expires=REDACTED",
      ended[1].attributes["url.full"])
  end)

  it("make no span for a request with trace = false, nor when tracing is off", function()
    local ended = memory_tracer()
    local res = http.json { url = srv.url .. "/echo", timeout = 5, trace = false }
    assert.are.equal(0, #ended)
    assert.is_nil(res.json.headers.traceparent)
    trace.set_tracer(nil)
    assert.is_false(seam.on)
    res = http.json { url = srv.url .. "/echo", timeout = 5 }
    assert.is_nil(res.json.headers.traceparent)
    assert.are.equal(0, #ended)
  end)

  it("end the span and re-raise when the request raises (a cancelled task)", function()
    local ended = memory_tracer()
    local loop = require "glsb.loop"
    local t = loop.spawn(function() return http.request { url = srv.url .. "/slow?ms=2000", timeout = 5 } end)
    loop.run(function() loop.sleep(0.1) end)
    t:cancel()
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(loop.is_cancelled(err))
    assert.are.equal(1, #ended)
    assert.are.equal("Cancelled", ended[1].attributes["error.type"])
    assert.are.equal("error", ended[1].status_code)
  end)
end)
