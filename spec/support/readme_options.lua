-- spec/support/readme_options.lua: the option tables of README.md, docs/pool.md, docs/tracing.md and
-- providers/*/README.md come from the declarations (glsb.options). A table sits between
--   <!-- glsb-options: WHO WHAT -->   and   <!-- /glsb-options -->
-- WHO = "base" (the common options, every provider) or a provider name; WHAT = create, connect, list,
-- execute_code, execute_command, download_file, terminate, ref (the sandbox's), write_workspace_file,
-- run_workspace_command (glsb.workspace's), pool, pool_acquire, pool_shutdown (glsb.pool's), trace
-- (glsb.trace.configure's), provider (a provider's
-- own credentials/endpoints), template (a template builder's); WHO = "lm": openai, anthropic (the clients'
-- options), request, invoke (client:invoke's); WHO = "interpreter": new, execute.
--
--   lua5.4 spec/support/readme_options.lua --write    regenerates every table in place
-- spec/unit/readme_options_spec.lua fails when a table differs from what this renders.
local M = {}

local function options() return require "glsb.options" end

M.FILES = { "README.md", "docs/pool.md", "docs/tracing.md", "docs/lm.md", "docs/interpreter.md", "providers/e2b/README.md",
  "providers/local/README.md", "providers/opensandbox/README.md", "providers/bedrock/README.md" }

-- glsb.lm's declarations by marker (WHO = "lm").
local LM = {
  openai = function() return require("glsb.lm.openai").OPTIONS end,
  anthropic = function() return require("glsb.lm.anthropic").OPTIONS end,
  request = function() return require("glsb.lm.client").REQUEST end,
  invoke = function() return require("glsb.lm.client").INVOKE end,
}
-- glsb.interpreter's (WHO = "interpreter": new, execute).
local INTERPRETER = { new = "OPTIONS", execute = "EXECUTE" }

-- glsb.pool's declarations (lua/glsb/pool/options.lua) by marker.
local POOL = { pool = "SCHEMA", pool_acquire = "ACQUIRE", pool_shutdown = "SHUTDOWN" }

-- schema(who, what) -> the schema a marker names.
function M.schema(who, what)
  local opts = options()
  if who == "lm" then return assert(LM[what], "no glsb.lm schema " .. what)() end
  if who == "interpreter" then return require("glsb.interpreter")[assert(INTERPRETER[what], what)] end
  if who == "base" then
    if what == "template" then return require("glsb.template").TemplateBuilder.options.builder end
    if what == "trace" then return require("glsb.trace.config").OPTIONS end
    local pool = POOL[what]
    if pool then return require("glsb.pool.options")[pool] end
    local ws = require("glsb.workspace").OPTIONS[what]
    if ws then return ws end
    local sandbox = require "glsb.sandbox"
    return sandbox.schema(sandbox.CodeInterpreterSandbox, what)
  end
  local p = require("glsb.registry").get(who)
  if what == "template" then return opts.own(p.Template, "builder") end
  return opts.own(p.Sandbox, what)
end

function M.render(who, what)
  return options().markdown(M.schema(who, what))
end

local OPEN = "<!%-%- glsb%-options: (%S+) (%S+) %-%->"
local CLOSE = "<!-- /glsb-options -->"

-- blocks(text) -> array of {who, what, body, s, e} (s/e: the body's span in text).
function M.blocks(text)
  local out, pos = {}, 1
  while true do
    local a, b, who, what = text:find(OPEN, pos)
    if not a then break end
    local c = text:find(CLOSE, b + 1, true)
    if not c then error("readme options: no " .. CLOSE .. " after the marker for " .. who .. " " .. what) end
    out[#out + 1] = { who = who, what = what, body = text:sub(b + 2, c - 2), s = b + 2, e = c - 2 }
    pos = c + #CLOSE
  end
  return out
end

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- rewrite(path) -> true when the file changed.
function M.rewrite(path)
  local text = M.read(path)
  local blocks = M.blocks(text)
  for i = #blocks, 1, -1 do
    local b = blocks[i]
    text = text:sub(1, b.s - 1) .. M.render(b.who, b.what) .. text:sub(b.e + 1)
  end
  if text == M.read(path) then return false end
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return true
end

if arg and arg[0] and arg[0]:match("readme_options%.lua$") and arg[1] == "--write" then
  package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
  package.cpath = "build/lib/?.so;" .. package.cpath
  for _, path in ipairs(M.FILES) do
    if M.rewrite(path) then print("rewrote " .. path) end
  end
end

return M
