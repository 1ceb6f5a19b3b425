-- glsb.log JSON lines (GLSB_LOG_FORMAT=json): the stage as error_code, the active span's ids.
local log = require "glsb.log"
local errors = require "glsb.errors"
local trace = require "glsb.trace"
local process = require "glsb.process"
local cjson = require "cjson"
local sh = require "support.shell"

describe("glsb.log JSON lines #trace", function()
  after_each(function() trace.set_tracer(nil) end)

  it("are one JSON object per warning on stderr under GLSB_LOG_FORMAT=json", function()
    local script = [[package.path = "]] .. sh.repo .. [[/lua/?.lua;" .. package.path
      local log = require "glsb.log"
      log.info("quiet")
      log.warn("loud", { provider = "local", stage = "terminate", n = 3, message = "a field" })]]
    local out, err, st = process.run({ "env", "GLSB_LOG_FORMAT=json", "lua5.4", "-e", script }, { timeout = 30 })
    assert.are.equal(0, st.code)
    assert.are.equal("", out)
    local lines = {}
    for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(1, #lines, err)
    local doc = cjson.decode(lines[1])
    assert.are.equal("warn", doc.level)
    assert.are.equal("loud", doc.message)
    assert.are.equal("terminate", doc.error_code)
    assert.are.equal("local", doc.provider)
    assert.are.equal(3, doc.n)
    assert.are.equal("a field", doc["field.message"])
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", doc.time)
    assert.is_nil(doc.trace_id)
  end)

  it("take error_code and error_class from a glsb error in the fields", function()
    local e = errors.new(errors.SandboxTerminateError, "terminate", "gone wrong")
    local doc = cjson.decode(log.json_line("error", "teardown failed", { error = e }))
    assert.are.equal("terminate", doc.error_code)
    assert.are.equal("SandboxTerminateError", doc.error_class)
    assert.matches("SandboxTerminateError%[terminate%]: gone wrong", doc.error)
  end)

  it("carry trace_id and span_id while a span is active, and not otherwise", function()
    trace.configure({ exporter = "none" })
    local span = trace.start_span("op")
    local inside = trace.with_span(span, function() return cjson.decode(log.json_line("warn", "x")) end)
    local outside = cjson.decode(log.json_line("warn", "x"))
    span:finish()
    trace.shutdown()
    assert.are.equal(span.trace_id, inside.trace_id)
    assert.are.equal(span.span_id, inside.span_id)
    assert.is_nil(outside.trace_id)
    assert.is_nil(outside.span_id)
  end)

  it("from a sandbox operation: the stage as error_code, the ids of the operation's span", function()
    local fake = require "support.fake_provider"
    local provider, backend = fake.new("fake")
    trace.configure({ exporter = "none" })
    local lines = {}
    local prev = log.set_handler(function(level, msg, fields) lines[#lines + 1] = log.json_line(level, msg, fields) end)
    local sb = provider.Sandbox.create {}
    backend.download_failure = "404 Not Found"
    local root = trace.start_span("script")
    trace.with_span(root, function() assert.is_nil(sb:download_file("/nope")) end)
    root:finish()
    log.set_handler(prev)
    sb:terminate()
    trace.shutdown()
    local doc = cjson.decode(lines[#lines])
    assert.are.equal("download", doc.error_code)
    assert.are.equal(root.trace_id, doc.trace_id)
    assert.are_not.equal(root.span_id, doc.span_id) -- the download's own span, under the script's
    assert.matches("^%x+$", doc.span_id)
  end)
end)
