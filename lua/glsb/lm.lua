-- glsb.lm: clients of language models, one normalised request and response over three backends
-- (docs/lm.md):
--
--   local lm = glsb.lm.openai{ model = "gpt-4o" }                 -- OPENAI_API_KEY, OPENAI_BASE_URL
--   local lm = glsb.lm.anthropic{ model = "claude-sonnet-4-5" }   -- ANTHROPIC_API_KEY
--   local lm = glsb.lm.fn(function(request, ctx) return { text = "..." } end)
--   local r = lm:invoke({ system = "...", messages = {{ role = "user", content = "hi" }}, tools = {...} },
--                       { on_token = function(piece) io.write(piece) end })
--   r.text, r.tool_calls, r.finish_reason, r.usage, r.message (append it to the conversation)
--
-- A failed call raises an LMError (stage "lm") with reason (auth, rate_limit, context_length, server,
-- timeout, transport, stream, bad_request, not_found, bad_response, response_too_large, fn),
-- http_status, request_id; transient ones (429, 5xx, broken connections and streams) are retried first.
local client = require "glsb.lm.client"

local M = {}

M.Response = client.Response
M.is_client = client.is_client

function M.openai(opts) return require("glsb.lm.openai").new(opts) end
function M.anthropic(opts) return require("glsb.lm.anthropic").new(opts) end
function M.fn(f, opts) return client.fn(f, opts) end

return M
