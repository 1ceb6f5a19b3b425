-- glsb.mcp: glsb as a Model Context Protocol server on stdio (`glsb-lua --mcp [--provider NAME]
-- [--config FILE]`; docs/protocols/mcp.md, README "MCP server"). Any MCP client (Claude Code, Claude
-- Desktop, Cursor, an SDK) gets sandboxes of every provider as tools, sessions that persist, results that
-- fit, and nothing left running when it goes.
--
--   require("glsb.mcp").main(arg)           what glsb-lua --mcp runs (arg: the words after --mcp)
--   require("glsb.mcp").serve(cfg, io)      the server on given fds: io = {input = fd, output = fd}
--   require("glsb.mcp").config(args)        -> cfg from the command line words (and the file they name)
--
-- The server is a client of the public API only: glsb.create / sb:execute_code / sb.files / ..., with the
-- provider's options from its environment or the config file, never a provider's internals.
local loop = require "glsb.loop"
local log = require "glsb.log"
local options = require "glsb.options"
local constants = require "glsb.constants"
local registry = require "glsb.registry"
local redact = require "glsb.trace.redact"
local secrets = require "glsb.secrets"
local stdio = require "glsb.mcp.stdio"
local session_mod = require "glsb.mcp.session"
local server_mod = require "glsb.mcp.server"
local tools_mod = require "glsb.mcp.tools"

local M = {}

-- The limits a server keeps (config `limits`; docs/protocols/mcp.md §4 says why each is what it is).
M.LIMITS = {
  max_result_chars = { "count", "characters of one tool result, text and images together (Claude Code refuses "
    .. "results over 25,000 tokens)", default = "80000", min = 2000 },
  max_images = { "integer", "images shown as image blocks in one result (the others are linked)", default = "4",
    min = 0 },
  max_line_bytes = { "count", "bytes of one incoming message", default = "16777216", min = 1024 },
  max_in_flight = { "count", "requests in flight, running or waiting to (more get a busy error)", default = "1024" },
  max_running = { "count", "requests running at once (the others wait their turn)", default = "64" },
  max_sandboxes = { "count", "sandboxes of one session running at once (sandbox_create refuses more)",
    default = "16" },
  max_file_bytes = { "count", "bytes files_read and resources/read read from a sandbox", default = "4194304" },
  max_message_bytes = { "count", "bytes of one outgoing message (the official clients drop the connection "
    .. "past 10 MiB); a longer resource is read in parts of half this", default = "8388608", min = 65536 },
  max_entries = { "count", "entries files_list shows", default = "1000" },
  store_bytes = { "count", "bytes of outputs and images kept for resource links (oldest dropped first)",
    default = "67108864" },
  progress_interval = { "positive", "seconds between two progress notifications of one request", default = "0.1" },
  heartbeat = { "positive", "seconds between progress notifications while a run prints nothing", default = "5" },
  shutdown = { "positive", "seconds the server takes at exit to end its sandboxes", default = "3" },
}

-- The config file's fields (a Lua file returning a table).
M.CONFIG = {
  provider = { "string", "the default provider (--provider wins)", default = "local" },
  providers = { "table", "the providers served, each with its options: `{e2b = {api_key = ...}, ...}`" },
  timeout = { "positive", "seconds a sandbox lives unused (a call renews it)", default = "600" },
  max_timeout = { "positive", "the longest timeout sandbox_create and a run accept", default = "86400" },
  network = { "boolean", "`false`: sandbox_create has no `network` argument (the model cannot ask for one)",
    default = "true" },
  limits = { "table", "the limits above" },
}

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

local function load_file(path)
  local chunk, err = loadfile(path, "t", setmetatable({}, { __index = _G }))
  if not chunk then fail("glsb --mcp: cannot load the config file: %s", err) end
  local ok, cfg = pcall(chunk)
  if not ok then fail("glsb --mcp: the config file %s failed: %s", path, tostring(cfg)) end
  if type(cfg) ~= "table" then fail("glsb --mcp: the config file %s must return a table, not %s", path, type(cfg)) end
  return cfg
end

-- config(args) -> the server's configuration from the words after --mcp (raises a message on misuse).
function M.config(args)
  local flag_provider, file
  local i = 1
  while args[i] ~= nil do
    local a = args[i]
    if a == "--provider" or a == "--config" then
      if args[i + 1] == nil then fail("glsb --mcp: %s needs a value", a) end
      if a == "--provider" then flag_provider = args[i + 1] else file = args[i + 1] end
      i = i + 2
    else
      local k, v = a:match("^(%-%-[%w-]+)=(.*)$")
      if k == "--provider" then flag_provider = v elseif k == "--config" then file = v
      else fail("glsb --mcp: unknown argument '%s' (usage: glsb-lua --mcp [--provider NAME] [--config FILE])", a) end
      i = i + 1
    end
  end
  local raw = file and load_file(file) or {}
  local ok, err = pcall(options.check, raw, M.CONFIG, "config")
  if not ok then fail("glsb --mcp: %s", tostring(err):gsub("^[^:\n]*:%d+: ", "")) end
  local limits = {}
  for k, d in pairs(M.LIMITS) do limits[k] = tonumber(d.default) end
  if raw.limits then
    ok, err = pcall(options.check, raw.limits, M.LIMITS, "config.limits")
    if not ok then fail("glsb --mcp: %s", tostring(err):gsub("^[^:\n]*:%d+: ", "")) end
    for k, v in pairs(raw.limits) do limits[k] = v end
  end
  local providers = {}
  for name, opts in pairs(raw.providers or {}) do
    if type(name) ~= "string" or type(opts) ~= "table" then
      fail("glsb --mcp: config.providers maps provider names to option tables")
    end
    providers[name] = opts
  end
  local default = flag_provider or raw.provider or constants.DEFAULT_PROVIDER
  providers[default] = providers[default] or {}
  local known = {}
  for _, n in ipairs(registry.known()) do known[n] = true end
  for name in pairs(providers) do
    if not known[name] then
      fail("glsb --mcp: unknown provider '%s' (known: %s)", name, table.concat(registry.known(), ", "))
    end
  end
  return { default_provider = default, providers = providers, limits = limits, network = raw.network ~= false,
    timeout = raw.timeout or tonumber(M.CONFIG.timeout.default),
    max_timeout = raw.max_timeout or tonumber(M.CONFIG.max_timeout.default) }
end

-- scrubber(cfg) -> fn(line): glsb.secrets' scrub, the one redaction point, once every secret the server
-- knows from the start is registered there: the config's provider options and the environment's
-- secret-named variables (E2B_API_KEY, OPEN_SANDBOX_API_KEY, AWS_SECRET_ACCESS_KEY, ...), which a provider
-- may send without its options naming them. What glsb learns later (a token a server hands out, a header
-- glsb.http sends) is registered where it is learnt, and scrubbed from every line as well: results, log
-- lines and errors, raw or JSON-escaped (glsb.secrets registers both forms).
function M.scrubber(cfg)
  for _, opts in pairs(cfg.providers) do
    for _, s in ipairs(redact.secrets(opts)) do secrets.register(s) end
  end
  for _, s in ipairs(redact.environment()) do secrets.register(s) end
  return secrets.scrub
end

-- serve(cfg, fds) -> when the input ends (or a TERM/INT/HUP arrives): every request in flight cancelled and
-- every sandbox of the session ended (but those made with keep_alive), within cfg.limits.shutdown seconds.
function M.serve(cfg, fds)
  local scrub = fds.scrub or M.scrubber(cfg)
  local session = session_mod.new { store_bytes = cfg.limits.store_bytes,
    part_bytes = cfg.limits.max_message_bytes // 2 }
  local tools = tools_mod.build(cfg)
  local stop = loop.condition()
  local stopped = false
  local function halt() stopped = true stop:broadcast() end
  local srv
  local writer = stdio.writer(fds.output, { on_broken = halt, on_drain = function() if srv then srv:drained() end end })
  srv = server_mod.new { session = session, tools = tools, limits = cfg.limits, scrub = scrub,
    send = function(line) writer:send(line) end, backlog = function() return writer:queued() end }
  local previous = log.set_handler(nil)
  log.set_handler(srv:log_handler(previous))
  local ok, err = pcall(loop.run, function()
    local reader = stdio.reader(fds.input, { max_line = cfg.limits.max_line_bytes })
    local readers = { loop.spawn(function()
      while not stopped do
        -- a client that does not read its answers makes them pile up here: read no more requests until
        -- it has taken most of them (memory stays bounded by what a few answers hold)
        writer:wait_below(2 * cfg.limits.max_message_bytes)
        local lines = reader:read()
        if not lines then break end
        for _, line in ipairs(lines) do
          if type(line) == "table" then srv:too_long(line.too_long) else srv:receive(line) end
        end
      end
      halt()
    end) }
    if fds.signals then
      readers[2] = loop.spawn(function()
        loop.wait_fd(fds.signals, "r")
        log.info("mcp: signal received: ending")
        halt()
      end)
    end
    while not stopped do stop:wait() end
    for _, t in ipairs(readers) do t:cancel() end
    local n = srv:shutdown(cfg.limits.shutdown)
    if n > 0 then log.info(string.format("mcp: ended %d sandbox(es) at exit", n)) end
    writer:flush(loop.deadline(1))
  end)
  log.set_handler(previous)
  if not ok then error(err, 0) end
end

-- main(arg): glsb-lua --mcp. Takes the process's stdin and stdout for the protocol (fd 1 then points at
-- stderr, so nothing printed elsewhere reaches the client), serves until stdin closes.
function M.main(arg)
  local args = {}
  for i = 1, #(arg or {}) do args[i] = arg[i] end
  local ok, cfg = pcall(M.config, args)
  if not ok then
    io.stderr:write(tostring(cfg), "\n")
    os.exit(2)
  end
  local core = require "glsb.core"
  local input, output = core.take_stdio()
  if not input then
    io.stderr:write("glsb --mcp: ", tostring(output), "\n")
    os.exit(1)
  end
  local signals = core.signal_fd({ "TERM", "INT", "HUP" })
  local scrub = M.scrubber(cfg)
  local served, err = pcall(M.serve, cfg, { input = input, output = output, signals = signals, scrub = scrub })
  if not served then
    -- what ends the server unexpectedly is said on stderr, like every other line of it: without secrets
    io.stderr:write("glsb --mcp: ", scrub(tostring(err)), "\n")
    require("glsb.sandbox").close_all()
    os.exit(1)
  end
end

return M
