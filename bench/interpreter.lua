-- bench/interpreter.lua: glsb.interpreter's own cost per step, beside the same loop written with the
-- official OpenAI and E2B JS SDKs (bench/interpreter.mjs), on the same emulators: the model is a script
-- of the OpenAI emulator (N tool calls, then an answer), the sandbox an E2B emulator sandbox running
-- `x = 1\nx`. Per step: the whole step, and the loop's own part (the step minus the time inside the model
-- call and inside the execution, measured on each side); peak RSS of each process. One run each, after a
-- short warm-up run.
--
--   build/glsb-lua bench/interpreter.lua [N]            # default N = 20 steps
--
-- glsb runs twice: as it ships (output files found by listing /files and the working directory after
-- each step: two sb.files:list calls), and with output_dirs = {} (no file discovery, what the JS loop
-- does not do either). Writes bench/results/interpreter.json. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local loop = require "glsb.loop"
local process = require "glsb.process"
local http = require "glsb.http"
local e2b_emulator = require "e2b.emulator"
local lm_emulator = require "lm.emulator"

local N = tonumber(arg and arg[1]) or 20
local CODE = "x = 1\nx"

local function script(emu, name, steps)
  local replies = {}
  for i = 1, steps do
    replies[i] = { tool_calls = { { name = "execute_code", arguments = { code = CODE } } } }
  end
  replies[#replies + 1] = { text = "done" }
  return emu:script(name, replies)
end

local lm_emu = lm_emulator.start("openai")
local e2b = e2b_emulator.start()
local results = {}
local ok, err = pcall(function()
  glsb.log.set_level("error")
  -- one glsb run: N steps; model time and sandbox time measured around the calls the loop makes
  local function glsb_run(name, steps, extra)
    local sb <close> = glsb.create("e2b", e2b:opts { timeout = 600 })
    local client = lm_emu:client({ model = script(lm_emu, name, steps) })
    local model_s, sandbox_s = 0, 0
    local invoke, execute = client.invoke, sb.execute_code
    client.invoke = function(self, ...)
      local t = loop.now()
      local r = invoke(self, ...)
      model_s = model_s + loop.now() - t
      return r
    end
    sb.execute_code = function(self, ...)
      local t = loop.now()
      local r = execute(self, ...)
      sandbox_s = sandbox_s + loop.now() - t
      return r
    end
    local o = { sandbox = sb, lm = client, max_steps = steps + 1 }
    for k, v in pairs(extra or {}) do o[k] = v end
    local t0 = loop.now()
    local r = glsb.interpreter(o):execute("count")
    local total = loop.now() - t0
    assert(r.stop_reason == "answer" and #r.steps == steps, "glsb run: " .. tostring(r))
    return { steps = steps, total_ms = total * 1000, model_ms = model_s * 1000, sandbox_ms = sandbox_s * 1000 }
  end
  local function js_run(name, steps)
    local model = script(lm_emu, name, steps)
    local out, errs, st = process.run({ "node", lm_emulator.ROOT .. "/bench/interpreter.mjs", lm_emu.base,
      lm_emu.api_key, model, e2b.base, e2b.api_key }, { timeout = 300 })
    assert(out and st and st.code == 0, "JS loop failed: " .. tostring(errs))
    local j = http.decode_json(out:match("([^\n]+)\n?$") or "")
    assert(j, "JS loop printed: " .. out:sub(-300))
    assert(j.steps == steps, "JS loop ran " .. tostring(j.steps) .. " steps")
    return j
  end

  glsb_run("warm-glsb", 2)
  js_run("warm-js", 2)
  local g = glsb_run("glsb", N)
  local g0 = glsb_run("glsb-nofiles", N, { output_dirs = {} })
  g.max_rss_kb = measure.status_kb("VmHWM")
  local j = js_run("js", N)
  local function per_step(x)
    x.step_ms = x.total_ms / x.steps
    x.overhead_ms = (x.total_ms - x.model_ms - x.sandbox_ms) / x.steps
    return x
  end
  results.glsb, results.glsb_no_files, results.js = per_step(g), per_step(g0), per_step(j)

  local function row(figure, value, unit, reference, reference_value)
    return { figure = figure, value = value, unit = unit, reference = reference, reference_value = reference_value }
  end
  local JS = "same loop, openai + @e2b/code-interpreter JS SDKs"
  results.summary = {
    row("interpreter: loop's own time per step (file discovery off)", g0.overhead_ms, "ms", JS, j.overhead_ms),
    row("interpreter: loop's own time per step (as shipped: 2 listings a step)", g.overhead_ms, "ms", JS,
      j.overhead_ms),
    row("interpreter: a whole step (model + execution + loop, file discovery off)", g0.step_ms, "ms", JS, j.step_ms),
    row("interpreter: peak RSS of the process", g.max_rss_kb / 1024, "MiB", JS, j.max_rss_kb / 1024),
  }
  local doc = { benchmark = "interpreter loop overhead", steps = N, code = CODE, date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    js = j.version, note = "one run each after a 2-step warm-up; same OpenAI and E2B emulators; model and "
      .. "sandbox time measured around the calls on each side and taken out", results = results,
    summary = results.summary }
  os.execute("mkdir -p " .. lm_emulator.ROOT .. "/bench/results")
  local f = assert(io.open(lm_emulator.ROOT .. "/bench/results/interpreter.json", "w"))
  f:write(http.encode_json(doc), "\n")
  f:close()

  print(string.format("interpreter loop, %d steps of %s, one run each (after a warm-up), same emulators", N,
    (CODE:gsub("\n", "\\n"))))
  print(string.format("%-44s %10s %10s %10s %10s %10s", "loop", "step ms", "own ms", "model ms", "sandbox ms",
    "peak MiB"))
  local function line(name, x, rss)
    print(string.format("%-44s %10.2f %10.2f %10.2f %10.2f %10s", name, x.step_ms, x.overhead_ms, x.model_ms / x.steps,
      x.sandbox_ms / x.steps, rss and string.format("%.1f", rss / 1024) or "-"))
  end
  line("glsb.interpreter (as shipped)", g, g.max_rss_kb)
  line("glsb.interpreter (output_dirs = {})", g0)
  line("JS: " .. j.version, j, j.max_rss_kb)
  print("written: bench/results/interpreter.json")
end)
lm_emu:stop()
e2b:stop()
if not ok then io.stderr:write("bench failed: ", tostring(err), "\n") os.exit(1) end
