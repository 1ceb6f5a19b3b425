-- glsb.interpreter against a real model API (make test-live; not part of make test): the seed's histogram
-- task on a local sandbox. Needs OPENAI_API_KEY (model GLSB_LIVE_LM_MODEL, default gpt-4o-mini), or
-- ANTHROPIC_API_KEY (default claude-sonnet-4-5), or GLSB_LIVE_LM_BASE_URL: an OpenAI-compatible server
-- (llama.cpp, vLLM, Ollama's /v1), whose model GLSB_LIVE_LM_MODEL names.
local glsb = require "glsb"

local function client()
  local model = os.getenv("GLSB_LIVE_LM_MODEL")
  local base = os.getenv("GLSB_LIVE_LM_BASE_URL")
  if base then return glsb.lm.openai { model = model or "default", base_url = base } end
  if os.getenv("OPENAI_API_KEY") then return glsb.lm.openai { model = model or "gpt-4o-mini" } end
  if os.getenv("ANTHROPIC_API_KEY") then return glsb.lm.anthropic { model = model or "claude-sonnet-4-5" } end
  error("none of OPENAI_API_KEY, ANTHROPIC_API_KEY, GLSB_LIVE_LM_BASE_URL is set (make test-live skips this run)")
end

describe("glsb.interpreter live run #live", function()
  it("the histogram task ends with an answer, a PNG and hist.png", function()
    local lm = client()
    local sb <close> = glsb.create("local")
    local r = glsb.interpreter { sandbox = sb, lm = lm, vision = true, max_steps = 8, max_duration = 300 }
      :execute("Plot a histogram of [10, 20, 20, 30, 40] and save it as hist.png")
    print(r)
    assert.equal("answer", r.stop_reason)
    assert.truthy(#r.text > 0)
    local file
    for _, f in ipairs(r.files) do if f.filename == "hist.png" then file = f end end
    assert.truthy(file, "hist.png among the files")
    assert.equal("\137PNG\r\n\26\n", file.data:sub(1, 8))
    assert.truthy(#r.images > 0)
  end)
end)
