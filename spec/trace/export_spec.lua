-- The OTLP/HTTP exporter and the batch processor against the loopback receiver: every export checked
-- against the OTLP data model, batches, retries (429 + Retry-After, 503), final failures, a refused
-- connection, bounded memory, the flush at the end of a script, and the console exporter.
local trace = require "glsb.trace"
local loop = require "glsb.loop"
local log = require "glsb.log"
local receiver = require "support.otlp_receiver"
local process = require "glsb.process"
local sh = require "support.shell"

local ROOT = sh.repo

-- run(argv) -> stdout, exit code, stderr (a process that hangs fails the spec after 60 s)
local function run(argv)
  local out, err, st = process.run(argv, { timeout = 60 })
  assert(out, "child did not finish: " .. tostring(err))
  return out, st.code, err
end

local function capture_warnings()
  local seen = {}
  local prev = log.set_handler(function(level, msg) if level == "warn" then seen[#seen + 1] = msg end end)
  return seen, function() log.set_handler(prev) end
end

describe("glsb.trace OTLP export #trace", function()
  local rec
  setup(function() rec = receiver.start() end)
  teardown(function()
    trace.shutdown()
    if rec then rec:stop() end
  end)
  before_each(function() rec:reset() end)
  after_each(function() trace.shutdown() end)

  local function configure(extra)
    local o = { endpoint = rec.endpoint, service_name = "spec", schedule_delay = 0.05,
      export_retry = { base_delay = 0.05, max_delay = 0.1 } }
    for k, v in pairs(extra or {}) do o[k] = v end
    trace.configure(o)
  end

  it("sends spans that pass the OTLP data-model checks, with resource, scope and parent links", function()
    configure({ headers = { ["x-tenant"] = "t1" } })
    local root = trace.start_span("root", { attributes = { n = 1 } })
    trace.with_span(root, function()
      local child = trace.start_span("child")
      child:add_event("exception", { ["exception.type"] = "X" })
      child:set_status("error", "m")
      child:finish()
    end)
    root:finish()
    assert.is_true(trace.force_flush(5))
    local got = rec:received()
    assert.are.same({}, got.errors)
    assert.are.same({}, got.orphans)
    assert.are.equal(2, #got.spans)
    assert.are.equal("root\n  child", rec:tree(root.trace_id, got))
    local s = rec:named("child", got)[1]
    assert.are.equal("spec", s.resource["service.name"])
    assert.are.equal("glsb", s.scope.name)
    assert.are.equal(require("glsb").VERSION, s.scope.version)
    assert.are.equal(2, s.status.code)
    assert.are.equal("application/json", got.requests[1].content_type)
    assert.are.equal("t1", got.requests[1].headers["x-tenant"])
  end)

  it("exports with no limit when the timeouts are <= 0 (glsb's time rule), and flushes with force_flush(0)", function()
    configure({ timeout = 0, export_timeout = 0 })
    for i = 1, 3 do trace.start_span("n" .. i):finish() end
    assert.is_true(trace.force_flush(0), "force_flush(0) is no limit, not a deadline already passed")
    assert.are.equal(3, #rec:received().spans)
  end)

  it("exports in batches of at most max_export_batch_size, a full batch without waiting the delay", function()
    configure({ max_export_batch_size = 4, schedule_delay = 30 })
    for i = 1, 10 do trace.start_span("s" .. i):finish() end
    -- two full batches go at once; the last two wait for the (30 s) delay or a flush
    local deadline = loop.now() + 10
    while #rec:received().spans < 8 and loop.now() < deadline do loop.sleep(0.02) end
    local got = rec:received()
    assert.are.equal(8, #got.spans)
    assert.is_true(trace.force_flush(5))
    got = rec:received()
    assert.are.equal(10, #got.spans)
    for _, r in ipairs(got.requests) do assert.is_true(r.spans <= 4) end
    assert.are.equal(3, #got.requests)
    assert.are.same({}, got.errors)
  end)

  it("waits schedule_delay for a batch that is not full", function()
    configure({ schedule_delay = 0.2 })
    trace.start_span("lonely"):finish()
    loop.sleep(0.05)
    assert.are.equal(0, #rec:received().requests)
    local deadline = loop.now() + 10
    while #rec:received().spans < 1 and loop.now() < deadline do loop.sleep(0.02) end
    assert.are.equal(1, #rec:received().spans)
  end)

  it("retries a 429 after its Retry-After and a 503 with backoff; the spans arrive once", function()
    configure()
    rec:plan({ { status = 429, retry_after = 1 }, { status = 503 } })
    trace.start_span("patient"):finish()
    assert.is_true(trace.force_flush(10))
    local got = rec:received()
    assert.are.equal(3, #got.requests)
    assert.are.same({ 429, 503, 200 }, { got.requests[1].answer, got.requests[2].answer, got.requests[3].answer })
    assert.is_true(got.requests[2].at_ms - got.requests[1].at_ms >= 900, "Retry-After: 1 not honoured")
    assert.are.equal(1, #got.spans)
    assert.are.equal(1, trace.stats().exported)
  end)

  it("does not retry a 400; one warning, the spans counted as dropped", function()
    local warnings, restore = capture_warnings()
    configure()
    rec:plan({ { status = 400 } })
    trace.start_span("rejected"):finish()
    assert.is_false(trace.force_flush(5))
    restore()
    assert.are.equal(1, #rec:received().requests)
    assert.are.equal(1, #warnings)
    assert.matches("trace export to http://127%.0%.0%.1:%d+/v1/traces failed %(HTTP 400%)", warnings[1])
    assert.are.equal(1, trace.stats().dropped)
  end)

  it("gives up on a Retry-After beyond the export deadline instead of waiting it out", function()
    local warnings, restore = capture_warnings()
    configure({ export_timeout = 1 })
    rec:plan({ { status = 503, retry_after = 120 } })
    trace.start_span("x"):finish()
    assert.is_false(trace.force_flush(2))
    restore()
    assert.are.equal(1, #rec:received().requests)
    assert.matches("HTTP 503 %(Retry%-After 120s is past the export deadline%)", warnings[1])
  end)

  it("logs a partial success once, without retrying", function()
    local warnings, restore = capture_warnings()
    configure()
    rec:plan({ { body = { partialSuccess = { rejectedSpans = "1", errorMessage = "too old" } } } })
    trace.start_span("half"):finish()
    assert.is_true(trace.force_flush(5))
    restore()
    assert.are.equal(1, #rec:received().requests)
    assert.are.equal(1, #warnings)
    assert.matches("rejected 1 span%(s%): too old", warnings[1])
  end)

  it("survives a refused connection with one warning line, and recovers when the collector is back", function()
    local warnings, restore = capture_warnings()
    configure({ export_retry = { attempts = 3, base_delay = 0.01, max_delay = 0.02 } })
    rec:refuse()
    for i = 1, 5 do
      trace.start_span("lost" .. i):finish()
      assert.is_false(trace.force_flush(2))
    end
    rec:accept()
    trace.start_span("found"):finish()
    assert.is_true(trace.force_flush(5))
    restore()
    assert.are.equal(1, #warnings)
    assert.matches("failed %(COULDNT_CONNECT", warnings[1])
    local got = rec:received()
    assert.are.equal(1, #got.spans)
    assert.are.equal("found", got.spans[1].name)
    local st = trace.stats()
    assert.are.equal(5, st.dropped)
    assert.are.equal(1, st.exported)
  end)

  it("keeps memory bounded while the collector refuses: the queue drops and counts", function()
    local _, restore = capture_warnings()
    configure({ max_queue_size = 64, max_export_batch_size = 16, schedule_delay = 0.01 })
    rec:refuse()
    collectgarbage("collect")
    local before = collectgarbage("count")
    local N = 20000
    for i = 1, N do
      local s = trace.start_span("flood", { attributes = { i = i, text = "some attribute text" } })
      s:finish()
      if i % 1000 == 0 then loop.sleep(0) end -- let the worker try (and fail) now and then
    end
    collectgarbage("collect")
    local grown = collectgarbage("count") - before
    trace.shutdown(1)
    local st = trace.stats()
    restore()
    rec:accept()
    -- 20000 queued spans would hold several MB; the queue holds at most 64 plus one batch in flight
    assert.is_true(grown < 1024, ("heap grew by %.0f KiB"):format(grown))
    assert.are.equal(N, st.dropped) -- each one counted: dropped when the queue was full, or with its batch
    assert.is_true(st.queued < N / 2, "queued " .. st.queued)
    assert.are.equal(0, st.exported)
  end)

  it("never holds up the caller: a span's end returns while a slow collector still has the export", function()
    configure({ schedule_delay = 0.01 })
    rec:plan({ { delay_ms = 1500 } })
    trace.start_span("slow"):finish()
    loop.sleep(0.3) -- the worker's request is now in flight, waiting on the collector
    assert.are.equal(1, #rec:received().requests)
    assert.are.equal(0, trace.stats().exported)
    -- the flush waits for the export in flight rather than cancel and send the batch again
    assert.is_true(trace.force_flush(5))
    assert.are.equal(1, trace.stats().exported)
    local got = rec:received()
    assert.are.equal(1, #got.requests)
    assert.are.equal(1, #got.spans)
  end)

  it("flushes at the end of a glsb-lua script and of a plain lua5.4 script, from the environment alone", function()
    for _, interp in ipairs({ ROOT .. "/build/glsb-lua", "lua5.4" }) do
      rec:reset()
      local script = [[
        package.path = "]] .. ROOT .. [[/lua/?.lua;]] .. ROOT .. [[/lua/?/init.lua;" .. package.path
        package.cpath = "]] .. ROOT .. [[/build/lib/?.so;" .. package.cpath
        local trace = require "glsb.trace"
        local s = trace.start_span("from-env")
        s:finish()
        print(trace.enabled())
      ]]
      local out, status = run({ "env", "OTEL_EXPORTER_OTLP_ENDPOINT=" .. rec.endpoint, "OTEL_SERVICE_NAME=child",
        "OTEL_BSP_SCHEDULE_DELAY=60000", interp, "-e", script })
      assert.are.equal(0, status, out)
      assert.are.equal("true\n", out)
      local got = rec:received()
      assert.are.equal(1, #got.spans, interp)
      assert.are.equal("child", got.spans[1].resource["service.name"])
      assert.are.same({}, got.errors)
    end
  end)

  it("flushes when the script ends with an error too", function()
    rec:reset()
    local _, status, err = run({ "env", "OTEL_EXPORTER_OTLP_ENDPOINT=" .. rec.endpoint, ROOT .. "/build/glsb-lua", "-e",
      'require("glsb.trace").start_span("before-error"):finish() error("script failed")' })
    assert.are.equal(1, status)
    assert.matches("script failed", err)
    local got = rec:received()
    assert.are.equal(1, #got.spans)
    assert.are.equal("before-error", got.spans[1].name)
  end)

  it("ends a script quickly with one warning line when the collector is unreachable", function()
    rec:refuse()
    local script = [[
      package.path = "]] .. ROOT .. [[/lua/?.lua;" .. package.path
      local trace = require "glsb.trace"
      for i = 1, 3 do trace.start_span("s" .. i):finish() end
    ]]
    local out, status, err = run({ "env", "OTEL_EXPORTER_OTLP_ENDPOINT=" .. rec.endpoint,
      ROOT .. "/build/glsb-lua", "-e", script })
    rec:accept()
    assert.are.equal(0, status)
    assert.are.equal("", out)
    local lines = {}
    for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(1, #lines, err)
    assert.matches("^glsb: warn: trace: trace export to .* failed", lines[1])
  end)
end)

describe("glsb.trace console exporter #trace", function()
  after_each(function() trace.shutdown() end)

  it("prints one readable line per finished span", function()
    local lines = {}
    local sink = { write = function(_, ...) lines[#lines + 1] = table.concat({ ... }) end }
    trace.configure({ exporter = "console", console = sink })
    local root = trace.start_span("glsb.sandbox.execute_code", { attributes = { ["glsb.provider"] = "local" } })
    trace.with_span(root, function()
      local c = trace.start_span("POST", { kind = "client", attributes = { ["url.full"] = "http://h/x" } })
      c:set_status("error", "it\nbroke")
      c:finish()
    end)
    root:finish()
    assert.are.equal(2, #lines)
    assert.matches("^glsb%.trace: POST %d+%.%dms error%(it\\nbroke%) trace=" .. root.trace_id .. " span=%x+ parent="
      .. root.span_id .. " kind=client url%.full=http://h/x\n$", lines[1])
    assert.matches("^glsb%.trace: glsb%.sandbox%.execute_code %d+%.%dms unset trace=%x+ span=" .. root.span_id
      .. " glsb%.provider=local\n$", lines[2])
  end)
end)

describe("glsb.trace bring your own tracer #trace", function()
  after_each(function() trace.set_tracer(nil) end)

  it("sends glsb's spans to the tracer given, through the documented interface only", function()
    local calls = {}
    local function new_span(name, opts)
      local s = { name = name, opts = opts, attrs = {}, events = {} }
      function s.set_attribute(self, k, v) self.attrs[k] = v end
      function s.add_event(self, n, a) self.events[#self.events + 1] = { n, a } end
      function s.set_status(self, code, msg) self.status = { code, msg } end
      function s.finish(self) calls[#calls + 1] = self end
      function s.traceparent() return "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" end
      return s
    end
    trace.set_tracer({ start_span = function(_, name, opts) return new_span(name, opts) end })
    assert.is_true(trace.enabled())
    local seam = require "glsb.trace.seam"
    assert.is_true(seam.on)
    local outer = trace.start_span("outer")
    local r = trace.with_span(outer, function()
      return seam.operation("glsb.sandbox.terminate", { provider = "x", sandbox_id = "id1" }, nil, function() return 7 end)
    end)
    assert.are.equal(7, r)
    assert.are.equal(1, #calls)
    assert.are.equal("glsb.sandbox.terminate", calls[1].name)
    assert.are.equal(outer, calls[1].opts.parent)
    assert.are.equal("x", calls[1].attrs["glsb.provider"] or calls[1].opts.attributes["glsb.provider"])
    assert.are.equal("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", (trace.with_span(outer, trace.inject)))
    trace.set_tracer(nil)
    assert.is_false(trace.enabled())
    assert.is_false(seam.on)
    assert.has_error(function() trace.set_tracer({}) end, "glsb.trace.set_tracer: the tracer has no start_span method")
  end)

  it("keeps the call working when the tracer itself breaks", function()
    trace.set_tracer({ start_span = function() error("tracer bug") end })
    local seam = require "glsb.trace.seam"
    assert.are.equal(3, seam.operation("glsb.sandbox.terminate", nil, nil, function() return 3 end))
  end)
end)
