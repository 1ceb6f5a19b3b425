-- The span model: ids, W3C trace context, samplers, spans, and their OTLP JSON form.
local ids = require "glsb.trace.ids"
local propagation = require "glsb.trace.propagation"
local sampler = require "glsb.trace.sampler"
local span_mod = require "glsb.trace.span"
local otlp_json = require "glsb.trace.otlp_json"
local clock = require "glsb.trace.clock"
local core = require "glsb.core"
local cjson = require "cjson"

local function collector()
  local ended = {}
  return ended, { on_end = function(_, s) ended[#ended + 1] = s end }
end

describe("glsb.trace ids #unit", function()
  it("are lowercase hex of 32 and 16 digits, never all zero, and do not repeat", function()
    local seen = {}
    for _ = 1, 2000 do
      local t, s = ids.trace_id(), ids.span_id()
      assert.matches("^[0-9a-f]+$", t)
      assert.matches("^[0-9a-f]+$", s)
      assert.are.equal(32, #t)
      assert.are.equal(16, #s)
      assert.is_nil(seen[t])
      assert.is_nil(seen[s])
      seen[t], seen[s] = true, true
    end
  end)

  it("do not depend on math.random: two equal seeds still give different ids", function()
    math.randomseed(42)
    local a = ids.trace_id()
    math.randomseed(42)
    local b = ids.trace_id()
    assert.are_not.equal(a, b)
    -- and drawing ids does not move the user's sequence
    math.randomseed(7)
    local x = math.random()
    math.randomseed(7)
    ids.trace_id()
    assert.are.equal(x, math.random())
  end)

  it("use all 16 hex digits about evenly (a broken source shows at once)", function()
    local counts = {}
    for _ = 1, 500 do
      for c in ids.trace_id():gmatch(".") do counts[c] = (counts[c] or 0) + 1 end
    end
    for d in ("0123456789abcdef"):gmatch(".") do
      -- 16000 digits: 1000 expected per digit; 800..1200 is > 6 standard deviations wide
      assert.is_true(counts[d] > 800 and counts[d] < 1200, d .. ": " .. tostring(counts[d]))
    end
  end)

  it("still work from the clock-seeded fallback when /dev/urandom is unreadable", function()
    ids._use_fallback(true)
    local a, b = ids.trace_id(), ids.trace_id()
    ids._use_fallback(nil)
    assert.matches("^[0-9a-f]+$", a)
    assert.are.equal(32, #a)
    assert.are_not.equal(a, b)
  end)
end)

describe("glsb.trace W3C trace context #unit", function()
  local TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

  it("parses a valid traceparent and formats it back", function()
    local ctx = propagation.extract(TP, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    assert.are.equal("0af7651916cd43dd8448eb211c80319c", ctx.trace_id)
    assert.are.equal("b7ad6b7169203331", ctx.span_id)
    assert.is_true(ctx.sampled)
    assert.is_true(ctx.remote)
    assert.are.equal("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", ctx.tracestate)
    assert.are.equal(TP, propagation.format(ctx))
    local unsampled = propagation.extract("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
    assert.is_false(unsampled.sampled)
  end)

  it("ignores every malformed traceparent (nil, never an error)", function()
    for _, bad in ipairs({
      "", "garbage", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", -- no flags
      "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",              -- uppercase
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",              -- version ff
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",              -- zero trace id
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",              -- zero span id
      "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",               -- short trace id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",               -- short span id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",        -- v00 must be 55 chars
      "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",              -- not hex
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
    }) do
      assert.is_nil(propagation.extract(bad), bad)
    end
    assert.is_nil(propagation.extract(nil))
    assert.is_nil(propagation.extract(42))
  end)

  it("accepts a future version with more fields, reading it as version 00", function()
    local ctx = propagation.extract("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-holds")
    assert.are.equal("b7ad6b7169203331", ctx.span_id)
    assert.is_nil(propagation.extract("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x"))
  end)

  it("drops an invalid tracestate alone and keeps the traceparent", function()
    for _, bad in ipairs({ "UPPER=1", "a=b,a=c", "k=", "=v", "k=v,", string.rep("x", 257) .. "=v", "k=v=w" }) do
      local ctx = propagation.extract(TP, bad)
      assert.is_not_nil(ctx, bad)
      if bad == "k=v," then
        assert.are.equal("k=v", ctx.tracestate) -- an empty member is allowed and skipped
      else
        assert.is_nil(ctx.tracestate, bad)
      end
    end
    local members = {}
    for i = 1, 33 do members[i] = "k" .. i .. "=v" end
    assert.is_nil(propagation.extract(TP, table.concat(members, ",")).tracestate) -- more than 32
    assert.are.equal("tenant@sys=v,a-b*c/d=x y", propagation.extract(TP, " tenant@sys=v , a-b*c/d=x y").tracestate)
  end)

  it("reads headers and environment carriers in any case", function()
    assert.are.equal("b7ad6b7169203331", propagation.extract({ TraceParent = TP }).span_id)
    local ctx = propagation.extract({ TRACEPARENT = TP, TRACESTATE = "a=1" })
    assert.are.equal("a=1", ctx.tracestate)
  end)
end)

describe("glsb.trace samplers #unit", function()
  local root = nil
  local sampled_parent = { trace_id = string.rep("a", 32), span_id = string.rep("b", 16), sampled = true }
  local unsampled_parent = { trace_id = string.rep("a", 32), span_id = string.rep("b", 16), sampled = false }

  it("always_on / always_off", function()
    assert.is_true(sampler.from_name("always_on"):should_sample(root, ids.trace_id()))
    assert.is_false(sampler.from_name("always_off"):should_sample(root, ids.trace_id()))
  end)

  it("traceidratio keeps about the ratio, deterministically per trace id", function()
    local s = sampler.from_name("traceidratio", "0.25")
    local kept = 0
    for _ = 1, 4000 do if s:should_sample(root, ids.trace_id()) then kept = kept + 1 end end
    assert.is_true(kept > 800 and kept < 1200, tostring(kept))
    local id = ids.trace_id()
    local first = s:should_sample(root, id)
    for _ = 1, 10 do assert.are.equal(first, s:should_sample(root, id)) end
    -- the bound is on the last 8 bytes: the smallest id is kept, the largest dropped
    assert.is_true(s:should_sample(root, string.rep("f", 16) .. string.rep("0", 16)))
    assert.is_false(s:should_sample(root, string.rep("0", 16) .. string.rep("f", 16)))
    assert.is_false(sampler.from_name("traceidratio", "0"):should_sample(root, ids.trace_id()))
    assert.is_true(sampler.from_name("traceidratio", "1"):should_sample(root, ids.trace_id()))
  end)

  it("parentbased_* follow the parent and use their root sampler only for roots", function()
    local on = sampler.from_name("parentbased_always_on")
    local off = sampler.from_name("parentbased_always_off")
    assert.is_true(on:should_sample(root, ids.trace_id()))
    assert.is_false(off:should_sample(root, ids.trace_id()))
    assert.is_true(off:should_sample(sampled_parent, sampled_parent.trace_id))
    assert.is_false(on:should_sample(unsampled_parent, unsampled_parent.trace_id))
    local ratio = sampler.from_name("parentbased_traceidratio", "0")
    assert.is_false(ratio:should_sample(root, ids.trace_id()))
    assert.is_true(ratio:should_sample(sampled_parent, sampled_parent.trace_id))
  end)

  it("names the bad value of an unknown sampler or ratio", function()
    local s, why = sampler.from_name("sometimes")
    assert.is_nil(s)
    assert.matches("unknown sampler sometimes", why)
    s, why = sampler.from_name("traceidratio", "2")
    assert.is_nil(s)
    assert.matches("ratio in %[0, 1%], got 2", why)
  end)
end)

describe("glsb.trace spans #unit", function()
  it("link children to parents, keep attributes in the order set, and end once", function()
    local ended, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    local parent = tracer:start_span("parent", { attributes = { b = 2, a = "x" } })
    local child = tracer:start_span("child", { parent = parent, kind = "client" })
    assert.are.equal(parent.trace_id, child.trace_id)
    assert.are.equal(parent.span_id, child.parent_span_id)
    child:set_attribute("n", 1.5)
    child:set_attribute("list", { "a", "b" })
    child:set_attribute("mixed", { "a", 1 })   -- not a homogeneous array: ignored
    child:set_attribute("fn", print)           -- not an attribute value: ignored
    child:finish()
    child:finish()
    child:set_attribute("late", true)          -- after the end: ignored
    parent:finish()
    assert.are.equal(2, #ended)
    assert.are.same({ "n", "list" }, ended[1].attribute_keys)
    local start_keys = { table.unpack(ended[2].attribute_keys) }
    table.sort(start_keys)
    assert.are.same({ "a", "b" }, start_keys)
    assert.is_true(ended[1].end_ns >= ended[1].start_ns)
  end)

  it("give a dropped span ids and the unsampled flag, and record nothing", function()
    local ended, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_off, processors = { proc } }
    local s = tracer:start_span("x")
    assert.is_false(s:is_recording())
    assert.matches("^00%-" .. s.trace_id .. "%-" .. s.span_id .. "%-00$", (s:traceparent()))
    s:set_attribute("a", 1)
    s:finish()
    assert.are.equal(0, #ended)
  end)

  it("follow the specification's status rules (ok is final, a message only with error)", function()
    local _, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    local s = tracer:start_span("x")
    s:set_status("error", "bad")
    assert.are.equal("bad", s.status_message)
    s:set_status("ok", "ignored")
    assert.are.equal("ok", s.status_code)
    assert.is_nil(s.status_message)
    s:set_status("error", "too late")
    assert.are.equal("ok", s.status_code)
  end)

  it("bound attributes, events and string lengths", function()
    local _, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    local s = tracer:start_span("x")
    for i = 1, 200 do s:set_attribute("k" .. i, i) end
    for i = 1, 200 do s:add_event("e" .. i) end
    s:set_attribute("k1", string.rep("x", 10000))
    assert.are.equal(128, #s.attribute_keys)
    assert.are.equal(72, s.dropped_attributes)
    assert.are.equal(128, #s.events)
    assert.are.equal(72, s.dropped_events)
    assert.are.equal(4096, #s.attributes.k1)
  end)

  it("carry a remote parent's trace id and tracestate", function()
    local _, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.from_name("parentbased_always_on"), processors = { proc } }
    local remote = propagation.extract("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "a=1")
    local s = tracer:start_span("x", { parent = remote })
    assert.are.equal("0af7651916cd43dd8448eb211c80319c", s.trace_id)
    assert.are.equal("b7ad6b7169203331", s.parent_span_id)
    local tp, ts = s:traceparent()
    assert.are.equal("00-0af7651916cd43dd8448eb211c80319c-" .. s.span_id .. "-01", tp)
    assert.are.equal("a=1", ts)
  end)
end)

describe("glsb.trace clock #unit", function()
  it("gives nanoseconds since the epoch that agree with os.time and never go back", function()
    local a = clock.now_ns()
    assert.are.equal("integer", math.type(a))
    assert.is_true(math.abs(a // 1000000000 - os.time()) <= 2)
    assert.is_true(math.abs(core.realtime_ns() - a) < 2 * 1000000000)
    local b = clock.now_ns()
    assert.is_true(b >= a)
  end)
end)

describe("glsb.trace OTLP JSON encoding #unit", function()
  local function encode_one(fill)
    local ended, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    local parent = tracer:start_span("parent")
    local s = tracer:start_span("glsb.sandbox.create", { parent = parent, kind = "client" })
    fill(s)
    s:finish()
    local body = otlp_json.encode(ended, { ["service.name"] = "svc" }, { name = "glsb", version = "1.0" })
    return cjson.decode(body), s
  end

  it("follows the OTLP JSON rules: hex ids, integer enums, 64-bit integers as strings", function()
    local doc, s = encode_one(function(s)
      s:set_attribute("str", "v")
      s:set_attribute("int", 9007199254740993) -- > 2^53: exact only as a string
      s:set_attribute("neg", -5)
      s:set_attribute("dbl", 0.1)
      s:set_attribute("bool", false)
      s:set_attribute("arr", { 1, 2 })
      s:add_event("exception", { ["exception.type"] = "X" })
      s:set_status("error", "m")
    end)
    local rs = doc.resourceSpans[1]
    assert.are.same({ key = "service.name", value = { stringValue = "svc" } }, rs.resource.attributes[1])
    assert.are.same({ name = "glsb", version = "1.0" }, rs.scopeSpans[1].scope)
    local j = rs.scopeSpans[1].spans[1]
    assert.are.equal(s.trace_id, j.traceId)
    assert.are.equal(s.span_id, j.spanId)
    assert.are.equal(s.parent_span_id, j.parentSpanId)
    assert.are.equal(3, j.kind)
    assert.are.equal(string.format("%d", s.start_ns), j.startTimeUnixNano)
    assert.are.equal("string", type(j.endTimeUnixNano))
    local attrs = {}
    for _, kv in ipairs(j.attributes) do attrs[kv.key] = kv.value end
    assert.are.same({ stringValue = "v" }, attrs.str)
    assert.are.same({ intValue = "9007199254740993" }, attrs.int)
    assert.are.same({ intValue = "-5" }, attrs.neg)
    assert.are.same({ doubleValue = 0.1 }, attrs.dbl)
    assert.are.same({ boolValue = false }, attrs.bool)
    assert.are.same({ arrayValue = { values = { { intValue = "1" }, { intValue = "2" } } } }, attrs.arr)
    assert.are.equal("exception", j.events[1].name)
    assert.are.equal("string", type(j.events[1].timeUnixNano))
    assert.are.same({ code = 2, message = "m" }, j.status)
  end)

  it("encodes each span's own value when a key repeats (0 and 0.0 differ), request after request", function()
    local ended, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    local values = { 0, 0.0, 0, true, "x", 0.0, false, "x", 7 }
    for _, v in ipairs(values) do
      local s = tracer:start_span("s")
      s:set_attribute("n", v)
      s:finish()
    end
    local function spans_of(list)
      return cjson.decode(otlp_json.encode(list, { ["service.name"] = "s" }, { name = "glsb" }))
        .resourceSpans[1].scopeSpans[1].spans
    end
    local want = { { intValue = "0" }, { doubleValue = 0 }, { intValue = "0" }, { boolValue = true },
      { stringValue = "x" }, { doubleValue = 0 }, { boolValue = false }, { stringValue = "x" }, { intValue = "7" } }
    for round = 1, 2 do -- the second time from the memo
      local spans = spans_of(ended)
      assert.are.equal(#values, #spans)
      for i, w in ipairs(want) do
        assert.are.same({ { key = "n", value = w } }, spans[i].attributes, "round " .. round .. ", span " .. i)
      end
    end
    -- a smaller request after a larger one: nothing of the earlier one in it
    local one = spans_of({ ended[9] })
    assert.are.equal(1, #one)
    assert.are.equal(ended[9].span_id, one[1].spanId)
  end)

  it("leaves out what is empty: no parent, no attributes, unset status", function()
    local ended, proc = collector()
    local tracer = span_mod.new_tracer { sampler = sampler.always_on, processors = { proc } }
    tracer:start_span("root"):finish()
    local j = cjson.decode(otlp_json.encode(ended, { ["service.name"] = "s" }, { name = "glsb" }))
      .resourceSpans[1].scopeSpans[1].spans[1]
    assert.is_nil(j.parentSpanId)
    assert.is_nil(j.attributes)
    assert.is_nil(j.status)
    assert.are.equal(1, j.kind)
  end)

  it("escapes control characters and repairs invalid UTF-8 instead of sending it", function()
    local doc = encode_one(function(s)
      s:set_attribute("ctl", 'a"b\\c\n\0\127')
      s:set_attribute("bad", "ok\255\254 é \237\160\128 \192\175 end")
    end)
    local attrs = {}
    for _, kv in ipairs(doc.resourceSpans[1].scopeSpans[1].spans[1].attributes) do attrs[kv.key] = kv.value end
    assert.are.equal('a"b\\c\n\0\127', attrs.ctl.stringValue)
    local fixed = attrs.bad.stringValue
    assert.is_not_nil(utf8.len(fixed))
    assert.are.equal("ok\239\191\189\239\191\189 é \239\191\189\239\191\189\239\191\189 \239\191\189\239\191\189 end", fixed)
  end)
end)
