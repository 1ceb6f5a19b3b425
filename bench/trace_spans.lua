-- bench/trace_spans.lua: where tracing's per-operation cost goes, in one process, without a sandbox:
-- N operation spans made the way sandbox.lua makes them (seam.operation around a body that returns an
-- ExecutionResult), the parts timed one by one with os.clock (CPU seconds) and the memory each
-- allocates (collectgarbage("count"), the collector stopped while a part runs). Complements
-- bench/trace.lua (the whole round trip, side by side with no tracing): this one says which part to cut.
--
--   build/glsb-lua bench/trace_spans.lua [N]        # N = 20000; needs node (the loopback receiver)
--
-- Parts: ids (a trace id and a span id), clock (two timestamps), start+finish (a span with the
-- operation's attributes, no processor), operation (seam.operation, span queued, no export), encode
-- (otlp_json of a batch of 100 such spans, per span), pipeline (seam.operation with the OTLP exporter
-- sending to the loopback receiver every 10 ms; the loop yields every 10 operations, as a round trip
-- does, so exports run in between; CPU of the whole process per operation, export included).
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath

local loop = require "glsb.loop"
local models = require "glsb.models"
local ids = require "glsb.trace.ids"
local clock = require "glsb.trace.clock"
local span_mod = require "glsb.trace.span"
local sampler = require "glsb.trace.sampler"
local otlp_json = require "glsb.trace.otlp_json"
local receiver = require "support.otlp_receiver"

local N = tonumber(arg and arg[1]) or 20000

local subject = { provider = "local", sandbox_id = "sbx-0123456789abcdef", language = "python", options = {} }
local result = models.ExecutionResult.new { status = "success", code = 0, stdout = "1\n", stderr = "" }
local function body() return result end

-- measure(name, n, fn) -> {us, bytes}: CPU microseconds and bytes allocated per call of fn(i).
local rows = {}
local function measure(name, n, fn)
  collectgarbage("collect")
  collectgarbage("stop")
  local kb0, t0 = collectgarbage("count"), os.clock()
  for i = 1, n do fn(i) end
  local t1, kb1 = os.clock(), collectgarbage("count")
  collectgarbage("restart")
  collectgarbage("collect")
  rows[#rows + 1] = { name = name, us = (t1 - t0) / n * 1e6, bytes = (kb1 - kb0) * 1024 / n }
end

measure("ids (trace id + span id)", N, function() ids.trace_id(); ids.span_id() end)
measure("clock (two timestamps)", N, function() clock.now_ns(); clock.now_ns() end)

local attrs_of = function()
  return { ["glsb.provider"] = "local", ["glsb.sandbox.id"] = "sbx-0123456789abcdef", ["glsb.language"] = "python" }
end
local bare = span_mod.new_tracer { sampler = sampler.parentbased(sampler.always_on), processors = {} }
measure("span start + 3 attributes + finish", N, function()
  local s = bare:start_span("glsb.sandbox.execute_code", { kind = "internal", attributes = attrs_of() })
  s:set_attribute("glsb.execution.status", "success")
  s:set_attribute("glsb.execution.exit_code", 0)
  s:finish()
end)

local batch_spans = {}
for i = 1, 100 do
  local s = bare:start_span("glsb.sandbox.execute_code", { kind = "internal", attributes = attrs_of() })
  s:set_attribute("glsb.execution.status", "success")
  s:set_attribute("glsb.execution.exit_code", 0)
  s:finish()
  batch_spans[i] = s
end
local resource = { ["service.name"] = "bench", ["telemetry.sdk.name"] = "glsb", ["telemetry.sdk.language"] = "lua" }
measure("encode (per span, batches of 100)", N // 100, function()
  otlp_json.encode(batch_spans, resource, { name = "glsb", version = "0" })
end)
rows[#rows].us, rows[#rows].bytes = rows[#rows].us / 100, rows[#rows].bytes / 100

local rec = receiver.start()
local ok, err = pcall(function()
  local trace = require "glsb.trace"
  local seam = require "glsb.trace.seam"
  -- queued only: a schedule delay longer than the run, a queue that holds every span
  trace.configure { endpoint = rec.endpoint, service_name = "bench", schedule_delay = 3600,
    max_queue_size = N + 1, max_export_batch_size = N + 1 }
  loop.run(function()
    measure("operation (span queued, not exported)", N, function()
      seam.operation("glsb.sandbox.execute_code", subject, nil, body)
    end)
  end)
  trace.shutdown(30)
  trace.configure { endpoint = rec.endpoint, service_name = "bench", schedule_delay = 0.01 }
  loop.run(function()
    local t0 = os.clock()
    for i = 1, N do
      seam.operation("glsb.sandbox.execute_code", subject, nil, body)
      if i % 10 == 0 then loop.sleep(0.0005) end
    end
    trace.force_flush(30)
    local t1 = os.clock()
    -- the same loop without spans: what the sleeps themselves cost
    local seam_on = seam.on
    seam.on = false
    local t2 = os.clock()
    for i = 1, N do
      if i % 10 == 0 then loop.sleep(0.0005) end
    end
    local t3 = os.clock()
    seam.on = seam_on
    rows[#rows + 1] = { name = "pipeline (operation + OTLP export to loopback)",
      us = ((t1 - t0) - (t3 - t2)) / N * 1e6 }
  end)
  local st = trace.stats()
  trace.shutdown(30)
  rows[#rows + 1] = { name = ("(exported %d spans in %d exports, %d dropped)"):format(st.exported, st.exports,
    st.dropped) }
end)
rec:stop()
if not ok then error(err, 0) end

local out = { ("%d operations\n\n| part | CPU µs per call | bytes allocated per call |\n|---|---:|---:|\n"):format(N) }
for _, r in ipairs(rows) do
  out[#out + 1] = ("| %s | %s | %s |\n"):format(r.name, r.us and ("%.2f"):format(r.us) or "",
    r.bytes and ("%.0f"):format(r.bytes) or "")
end
local text = table.concat(out)
io.write(text)

-- The parts have no reference measured beside them, so none goes in make bench's table (an empty
-- summary); bench/results/trace_spans.md keeps the breakdown.
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
os.execute("mkdir -p " .. here .. "/results")
local f = assert(io.open(here .. "/results/trace_spans.md", "w"))
f:write(text)
f:close()
f = assert(io.open(here .. "/results/trace_spans.json", "w"))
local cjson = require "cjson"
f:write(cjson.encode({ operations = N, parts = rows, summary = setmetatable({}, cjson.empty_array_mt) }), "\n")
f:close()
