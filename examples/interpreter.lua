-- examples/interpreter.lua: the seed's task. A language model drives a local sandbox until it answers;
-- the chart comes back as bytes and as the file the code wrote.
--
--   OPENAI_API_KEY=sk-... build/glsb-lua examples/interpreter.lua              # OpenAI (gpt-4o-mini)
--   ANTHROPIC_API_KEY=sk-ant-... build/glsb-lua examples/interpreter.lua       # Anthropic
--   GLSB_LM_MODEL=qwen2.5 OPENAI_BASE_URL=http://127.0.0.1:11434/v1 build/glsb-lua examples/interpreter.lua
--                                                                              # any OpenAI-compatible server
--   build/glsb-lua examples/interpreter.lua --emulator                          # no key: the test emulator
--
-- --emulator starts spec/emulators/openai (its rule-driven model glsb-rules writes the code) and stops it
-- at the end. The PNGs are written to the current directory.
local glsb = require "glsb"

local task = "Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png"

local emulator
local function model_client()
  if arg[1] == "--emulator" then
    local process = require "glsb.process"
    local here = debug.getinfo(1, "S").source:match("^@(.*)/examples/[^/]*$") or "."
    emulator = assert(process.spawn { argv = { here .. "/scripts/emulator", "openai", "--port", "0",
      "--exit-with-parent" }, stdin = "null", stdout = "pipe", stderr = "null" })
    local line = glsb.run(function() return emulator:read_line("stdout", glsb.now() + 20) end)
    local base = assert(line and line:match("^listening (%S+)"), "the emulator did not start")
    return glsb.lm.openai { model = "glsb-rules", base_url = base .. "/v1", api_key = "sk-glsb-test-key" }
  end
  if os.getenv("OPENAI_API_KEY") or os.getenv("OPENAI_BASE_URL") then
    return glsb.lm.openai { model = os.getenv("GLSB_LM_MODEL") or "gpt-4o-mini" }
  end
  if os.getenv("ANTHROPIC_API_KEY") then
    return glsb.lm.anthropic { model = os.getenv("GLSB_LM_MODEL") or "claude-sonnet-4-5" }
  end
  io.stderr:write("set OPENAI_API_KEY or ANTHROPIC_API_KEY (or OPENAI_BASE_URL for a local server), "
    .. "or run with --emulator\n")
  os.exit(2)
end

local lm = model_client()
local ok, err = pcall(function()
  local sb <close> = glsb.create("local")
  local ai = glsb.interpreter { sandbox = sb, lm = lm, vision = true, max_steps = 8 }
  local r = ai:execute(task, {
    on_step = function(step)
      io.write(string.format("step %d: %s\n", step.index, step.result and step.result.status or step.error))
    end,
  })
  print(r.text)
  print(string.format("stop_reason: %s, %d steps, %d ms, tokens %d in / %d out", r.stop_reason, #r.steps,
    r.duration_ms, r.usage.input_tokens, r.usage.output_tokens))
  for _, f in ipairs(r.files) do
    local out = assert(io.open(f.filename, "wb"))
    out:write(f.data)
    out:close()
    print(string.format("file %s (%d bytes) -> ./%s", f.path, #f.data, f.filename))
  end
  for i, im in ipairs(r.images) do
    if im.source == "display" then
      local name = string.format("chart-%d.%s", i, im.mime == "image/png" and "png" or "jpg")
      local out = assert(io.open(name, "wb"))
      out:write(im.data)
      out:close()
      print(string.format("displayed image %s (%s, %d bytes) -> ./%s", im.name, im.mime, #im.data, name))
    end
  end
end)
if emulator then
  emulator:kill("TERM")
  glsb.run(function() return emulator:wait(glsb.now() + 10) end)
  emulator:close()
end
if not ok then error(err, 0) end
