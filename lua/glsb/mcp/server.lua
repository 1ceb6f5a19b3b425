-- glsb.mcp.server: the MCP server's protocol side (docs/protocols/mcp.md): JSON-RPC 2.0 messages in,
-- answers out, for both eras: the handshake revisions (initialize, 2024-11-05 to 2025-11-25) and the
-- stateless one (2026-07-28: server/discover, version and capabilities in each request's _meta,
-- resultType on results). A request is served in a glsb.loop task of its own, so a long run never holds
-- up the others; notifications/cancelled cancels that task (the glsb API then ends what the run held).
--
--   local srv = server.new{session = s, tools = t, send = fn(line), limits = {...}, scrub = fn}
--   srv:receive(line)            one line of input (a message, or garbage: answered as the spec says)
--   srv:too_long(bytes)          a line past the cap arrived and was dropped
--   srv:shutdown(budget)         cancels what is in flight, then ends every sandbox of the session
local loop = require "glsb.loop"
local log = require "glsb.log"
local constants = require "glsb.constants"
local json = require "glsb.mcp.json"
local present = require "glsb.mcp.present"
local tools_mod = require "glsb.mcp.tools"

local M = {}

M.MODERN = { "2026-07-28" }
M.LEGACY = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
M.VERSIONS = { "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
local IS_MODERN, IS_LEGACY = {}, {}
for _, v in ipairs(M.MODERN) do IS_MODERN[v] = true end
for _, v in ipairs(M.LEGACY) do IS_LEGACY[v] = true end

local META_VERSION = "io.modelcontextprotocol/protocolVersion"
local META_LOG = "io.modelcontextprotocol/logLevel"
local META_SERVER = "io.modelcontextprotocol/serverInfo"

-- JSON-RPC and MCP error codes (schema.ts of each revision)
local PARSE, INVALID_REQUEST, NO_METHOD, INVALID_PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603
local RESOURCE_NOT_FOUND, UNSUPPORTED_VERSION, BUSY = -32002, -32022, -32000

-- RFC 5424 levels as MCP names them, and glsb.log's words for them
local LEVELS = { debug = 1, info = 2, notice = 3, warning = 4, error = 5, critical = 6, alert = 7, emergency = 8 }
local FROM_GLSB = { debug = "debug", info = "info", warn = "warning", error = "error" }

local REQUEST_KEY = {} -- loop task-local context: the request a task serves (for log notifications)

M.INSTRUCTIONS = "Sandboxes for running code. Call sandbox_create first and pass the sandbox_id it returns to "
  .. "every other tool; the interpreter keeps its variables, files and packages between calls. Only ids from "
  .. "sandbox_create (see sandbox_list) are accepted. For work longer than about a minute use command_start and "
  .. "poll command_output. Results are cut to fit; the whole output is a resource (resources/read). Kill "
  .. "sandboxes you no longer need with sandbox_kill; the rest end when this server exits."

local Server = {}
Server.__index = Server

local function protocol_error(code, message, data)
  return setmetatable({ code = code, message = message, data = data }, { __name = "glsb.mcp.protocol_error" })
end
M.protocol_error = protocol_error

local function is_protocol_error(e)
  return type(e) == "table" and getmetatable(e) and getmetatable(e).__name == "glsb.mcp.protocol_error"
end

function M.new(opts)
  local self = setmetatable({
    session = opts.session, tools = opts.tools, send_line = opts.send, scrub = opts.scrub or function(s) return s end,
    limits = opts.limits, info = { name = "glsb", title = "glsb sandboxes", version = constants.VERSION },
    inflight = {}, inflight_n = 0, legacy = nil, log_level = nil, closing = false,
    -- requests wait here for a task: at most limits.max_running run at once, and none starts while the
    -- answers not yet taken by the client pass limits.max_message_bytes * 2 (backlog(): bytes queued)
    waiting = {}, wait_head = 1, wait_tail = 0, running = 0, backlog = opts.backlog or function() return 0 end,
  }, Server)
  return self
end

---------------------------------------------------------------------------------------------------
-- output

-- send(msg): the one way out: encoded, scrubbed of every secret the server knows, one line.
function Server:send(msg)
  local ok, line = pcall(json.encode, msg)
  if not ok then
    log.error("mcp: a message could not be encoded: " .. tostring(line))
    if msg.id == nil then return end
    line = json.encode({ jsonrpc = "2.0", id = msg.id, error = { code = INTERNAL, message = "internal error: the "
      .. "answer could not be encoded" } })
  end
  if #line > self.limits.max_message_bytes then
    -- the official clients close the connection on a message past 10 MiB: say why instead
    log.warn(string.format("mcp: an answer of %d bytes was not sent (limits.max_message_bytes = %d)", #line,
      self.limits.max_message_bytes))
    if msg.id == nil or msg.error then return end
    line = json.encode({ jsonrpc = "2.0", id = msg.id, error = { code = INTERNAL, message = string.format(
      "the answer is %d bytes, more than a message may carry (%d): ask for less", #line,
      self.limits.max_message_bytes) } })
  end
  self.send_line(self.scrub(line))
end

local function key_of(id) return type(id) .. ":" .. tostring(id) end

function Server:reply_error(id, code, message, data)
  self:send({ jsonrpc = "2.0", id = id == nil and json.null or id, error = { code = code, message = message,
    data = data } })
end

-- decorate(req, result): what each era adds to a result.
function Server:decorate(req, result, cacheable)
  if req.modern then
    result.resultType = result.resultType or "complete"
    result._meta = result._meta or {}
    result._meta[META_SERVER] = self.info
    if cacheable then
      result.ttlMs = cacheable.ttl
      result.cacheScope = cacheable.scope
    end
  end
  return result
end

function Server:notify(method, params)
  self:send({ jsonrpc = "2.0", method = method, params = params })
end

---------------------------------------------------------------------------------------------------
-- progress: notifications/progress for a request that asked (a progressToken), rate-limited, with the
-- lines a run prints as messages and a heartbeat while nothing else comes (a client that resets its
-- timeout on progress then keeps waiting)

local Progress = {}
Progress.__index = Progress

function Progress.new(server, req)
  return setmetatable({ server = server, req = req, n = 0, last = 0, lines = {}, size = 0 }, Progress)
end

function Progress:send(message)
  if self.closed or self.req.cancelled then return end
  self.n = self.n + 1
  self.last = loop.now()
  local params = { progressToken = self.req.token, progress = self.n }
  if message and message ~= "" then params.message = message end
  self.server:notify("notifications/progress", params)
end

function Progress:flush()
  if #self.lines == 0 then return end
  local msg = table.concat(self.lines, "\n")
  self.lines, self.size = {}, 0
  self:send(msg)
end

-- line(stream, text): one line the run printed; sent at once when the last notification is old enough,
-- else gathered (at most 2,000 bytes of the latest lines) and sent by a timer.
function Progress:line(stream, text)
  if self.closed then return end
  local limit = self.server.limits
  if #text > 500 then text = text:sub(1, 500) .. "..." end
  local line = stream == "stderr" and ("stderr: " .. text) or text
  self.lines[#self.lines + 1] = line
  self.size = self.size + #line
  while self.size > 2000 and #self.lines > 1 do self.size = self.size - #table.remove(self.lines, 1) end
  local wait = limit.progress_interval - (loop.now() - self.last)
  if wait <= 0 then
    self:flush()
  elseif not self.timer then
    self.timer = loop.spawn(function()
      loop.sleep(wait)
      self.timer = nil
      self:flush()
    end)
  end
end

function Progress:start_heartbeat()
  local every = self.server.limits.heartbeat
  local started = loop.now()
  self.heart = loop.spawn(function()
    while not self.closed do
      loop.sleep(every)
      if self.closed then break end
      if loop.now() - self.last >= every * 0.9 then
        self:send(string.format("running (%.0f s)", loop.now() - started))
      end
    end
  end)
end

function Progress:close()
  self.closed = true
  if self.timer then self.timer:cancel() end
  if self.heart then self.heart:cancel() end
end

---------------------------------------------------------------------------------------------------
-- the methods

local CAPABILITIES = { tools = { listChanged = false }, resources = {}, logging = {} }

local function legacy_version(requested)
  if IS_LEGACY[requested] then return requested end
  return M.LEGACY[1]
end

local methods = {}

methods["initialize"] = function(self, req, params)
  if req.modern then
    error(protocol_error(INVALID_REQUEST, "initialize belongs to the handshake revisions: a request with "
      .. "modern _meta needs none (this server speaks " .. table.concat(M.VERSIONS, ", ") .. ")"), 0)
  end
  local v = legacy_version(params.protocolVersion)
  self.legacy = { version = v, client = type(params.clientInfo) == "table" and params.clientInfo or nil }
  return { protocolVersion = v, capabilities = CAPABILITIES, serverInfo = self.info, instructions = M.INSTRUCTIONS }
end

methods["ping"] = function() return {} end

methods["logging/setLevel"] = function(self, _, params)
  if not LEVELS[params.level] then
    error(protocol_error(INVALID_PARAMS, "logging/setLevel: level must be one of debug, info, notice, warning, "
      .. "error, critical, alert, emergency"), 0)
  end
  self.log_level = params.level
  return {}
end

methods["server/discover"] = function()
  return { supportedVersions = json.array(M.VERSIONS), capabilities = CAPABILITIES, instructions = M.INSTRUCTIONS },
    { ttl = 3600000, scope = "public" }
end

methods["tools/list"] = function(self)
  return { tools = self.tools.listed }, { ttl = 3600000, scope = "public" }
end

local function uri_sandbox_file(self, uri)
  local sid, path = uri:match("^glsb://sandbox/([%w%-]+)/files(/.*)$")
  if not sid then return nil end
  return sid, present.uri_unpath(path)
end

function Server:not_found(req, uri, why)
  error(protocol_error(req.modern and INVALID_PARAMS or RESOURCE_NOT_FOUND, "Resource not found: " .. uri
    .. (why and (": " .. why) or ""), { uri = uri }), 0)
end

-- resources/read: a stored output or image, or a file of a session sandbox read now.
local function read_resource(self, req, params)
  local uri = params.uri
  if type(uri) ~= "string" then error(protocol_error(INVALID_PARAMS, "resources/read: uri must be a string"), 0) end
  local stored, too_big = self.session:resource(uri)
  if too_big then error(protocol_error(INVALID_PARAMS, "resources/read: " .. uri .. " is " .. too_big), 0) end
  if stored then
    local c = { uri = uri, mimeType = stored.mime }
    if stored.mime:match("^text/") or stored.mime == "image/svg+xml" then
      c.text = stored.data
    else
      c.blob = require("glsb.codec").b64encode(stored.data)
    end
    return { contents = json.array { c } }, { ttl = 0, scope = "private" }
  end
  local sid, path = uri_sandbox_file(self, uri)
  if not sid then
    self:not_found(req, uri, uri:match("^glsb://sandbox/[^/]+/runs/")
      and "it was dropped to keep the server's memory bounded (run the code again)" or nil)
  end
  local entry, why = self.session:get(sid, "resources/read")
  if not entry then self:not_found(req, uri, why) end
  local st = tools_mod.stat(entry.sb, path)
  if not st or st.type == "dir" then self:not_found(req, uri, st and "a directory" or "no such file") end
  if st.size and st.size > self.limits.max_file_bytes then
    error(protocol_error(INVALID_PARAMS, string.format("resources/read: %s is %d bytes, more than this server "
      .. "reads (%d)", path, st.size, self.limits.max_file_bytes)), 0)
  end
  local data = entry.sb.files:read(path)
  local mime = present.mime_of(path, data)
  local c = { uri = uri, mimeType = mime }
  if utf8.len(data) and not data:find("%z") then c.text = data else c.blob = require("glsb.codec").b64encode(data) end
  return { contents = json.array { c } }, { ttl = 0, scope = "private" }
end
methods["resources/read"] = read_resource

methods["resources/list"] = function(self)
  local list = json.array()
  for _, r in ipairs(self.session:resources()) do
    local parts = self.session:part_list(r.uri)
    for k, p in ipairs(parts) do
      list[#list + 1] = { uri = p.uri, name = (r.name or r.uri) .. (#parts > 1 and (" part " .. k) or ""),
        mimeType = r.mime, size = p.size }
    end
  end
  return { resources = list }, { ttl = 0, scope = "private" }
end

methods["resources/templates/list"] = function()
  return { resourceTemplates = json.array { { uriTemplate = "glsb://sandbox/{sandbox_id}/files{+path}",
    name = "sandbox file", title = "A file of a sandbox of this session",
    description = "Any file of a sandbox this session created; path is absolute (/home/user/out.csv)" } } },
    { ttl = 3600000, scope = "public" }
end

-- tools/call: a tool's result, or a protocol error for an unknown tool or malformed params.
methods["tools/call"] = function(self, req, params)
  local name = params.name
  if type(name) ~= "string" then error(protocol_error(INVALID_PARAMS, "tools/call: name must be a string"), 0) end
  local tool = self.tools.by_name[name]
  if not tool then
    error(protocol_error(INVALID_PARAMS, "Unknown tool: " .. name .. " (tools/list gives the tools)"), 0)
  end
  local args = params.arguments
  if args == nil or args == json.null then args = {} end
  if type(args) ~= "table" or (next(args) ~= nil and args[1] ~= nil) then
    error(protocol_error(INVALID_PARAMS, "tools/call: arguments must be an object"), 0)
  end
  local checked, why = tools_mod.check(tool, args)
  if not checked then return present.failure(why) end
  local ctx = { progress = function() end, stdout = nil, stderr = nil }
  if req.token ~= nil then
    local p = Progress.new(self, req)
    req.progress = p
    ctx.progress = function(msg) p:send(msg) end
    ctx.stdout = function(line) p:line("stdout", line) end
    ctx.stderr = function(line) p:line("stderr", line) end
    p:start_heartbeat()
  end
  local result = tool.run(self.session, checked, ctx)
  local v = self.legacy and self.legacy.version
  if not req.modern and v and v < "2025-06-18" then
    -- resource_link and structuredContent came with 2025-06-18: older clients get the text (which names
    -- every link) and the JSON text block
    local content = json.array()
    for _, b in ipairs(result.content) do
      if b.type ~= "resource_link" then content[#content + 1] = b end
    end
    result.content, result.structuredContent = content, nil
  end
  return result
end

local ASYNC = { ["tools/call"] = true, ["resources/read"] = true }

---------------------------------------------------------------------------------------------------
-- input

local function is_id(id)
  return type(id) == "string" or (type(id) == "number" and id == id and id ~= math.huge and id ~= -math.huge)
end

function Server:too_long(bytes)
  self:reply_error(nil, INVALID_REQUEST, string.format("message of %d bytes refused: this server reads messages of "
    .. "at most %d bytes", bytes, self.limits.max_line_bytes))
end

function Server:receive(line)
  if line == "" or line:match("^%s*$") then return end
  local msg, err = json.decode(line)
  if msg == nil then
    self:reply_error(nil, PARSE, "Parse error: " .. tostring(err))
    return
  end
  if type(msg) ~= "table" or msg[1] ~= nil or next(msg) == nil then
    self:reply_error(nil, INVALID_REQUEST, type(msg) == "table" and msg[1] ~= nil
      and "Invalid Request: batches are not part of MCP (one message per line)"
      or "Invalid Request: a message is a JSON object")
    return
  end
  local id = msg.id
  local has_id = id ~= nil and id ~= json.null
  if msg.jsonrpc ~= "2.0" then
    self:reply_error(has_id and is_id(id) and id or nil, INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"")
    return
  end
  if msg.method == nil then
    -- a response: this server sends no requests, so there is nothing to match it with
    if msg.result == nil and msg.error == nil then
      self:reply_error(has_id and is_id(id) and id or nil, INVALID_REQUEST, "Invalid Request: no method")
    end
    return
  end
  if type(msg.method) ~= "string" then
    self:reply_error(has_id and is_id(id) and id or nil, INVALID_REQUEST, "Invalid Request: method must be a string")
    return
  end
  if not has_id then
    if msg.id == json.null then
      self:reply_error(nil, INVALID_REQUEST, "Invalid Request: id must not be null")
      return
    end
    return self:notification(msg.method, msg.params)
  end
  if not is_id(id) then
    self:reply_error(nil, INVALID_REQUEST, "Invalid Request: id must be a string or a number")
    return
  end
  self:request(id, msg.method, msg.params)
end

function Server:notification(method, params)
  if method == "notifications/cancelled" then
    if type(params) ~= "table" or not is_id(params.requestId) then return end -- malformed: ignored, as asked
    local req = self.inflight[key_of(params.requestId)]
    if req and not req.cancelled then
      req.cancelled = true
      if req.progress then req.progress:close() end
      log.info("mcp: request " .. tostring(params.requestId) .. " cancelled" .. (type(params.reason) == "string"
        and (": " .. params.reason) or ""))
      if req.task then
        req.task:cancel()
      else
        -- still waiting for a task: it never starts
        self.inflight[req.key] = nil
        self.inflight_n = self.inflight_n - 1
      end
    end
  end
  -- notifications/initialized, roots/list_changed, ...: nothing to do
end

function Server:request(id, method, params)
  local handler = methods[method]
  if not handler then
    self:reply_error(id, NO_METHOD, "Method not found: " .. method)
    return
  end
  if params == nil or params == json.null then params = {} end
  if type(params) ~= "table" or (params[1] ~= nil) then
    self:reply_error(id, INVALID_PARAMS, method .. ": params must be an object")
    return
  end
  local meta = type(params._meta) == "table" and params._meta or {}
  local req = { id = id, method = method, token = meta.progressToken }
  if req.token ~= nil and type(req.token) ~= "string" and math.type(req.token) == nil then req.token = nil end
  if meta[META_VERSION] ~= nil then
    req.modern = true
    if not IS_MODERN[meta[META_VERSION]] then
      self:reply_error(id, UNSUPPORTED_VERSION, "Unsupported protocol version", { supported = json.array(M.VERSIONS),
        requested = tostring(meta[META_VERSION]) })
      return
    end
    if LEVELS[meta[META_LOG]] then req.log_level = meta[META_LOG] end
  end
  local key = key_of(id)
  if self.inflight[key] then
    self:reply_error(id, INVALID_REQUEST, "Invalid Request: id " .. tostring(id) .. " is already in use by a "
      .. "request in flight")
    return
  end
  if not ASYNC[method] then
    return self:finish(req, pcall(handler, self, req, params))
  end
  if self.closing then
    self:reply_error(id, BUSY, "the server is shutting down")
    return
  end
  if self.inflight_n >= self.limits.max_in_flight then
    self:reply_error(id, BUSY, string.format("server busy: %d requests in flight (the most it serves at once); "
      .. "send this one again when some have been answered", self.inflight_n))
    return
  end
  self.inflight[key] = req
  self.inflight_n = self.inflight_n + 1
  req.key, req.handler, req.params = key, handler, params
  self.wait_tail = self.wait_tail + 1
  self.waiting[self.wait_tail] = req
  self:dispatch()
end

-- dispatch(): starts the waiting requests there is room for (called as a request comes, ends, or the
-- client takes answers: Server:drained).
function Server:dispatch()
  while self.wait_head <= self.wait_tail and self.running < self.limits.max_running
    and self.backlog() <= 2 * self.limits.max_message_bytes do
    local req = self.waiting[self.wait_head]
    self.waiting[self.wait_head] = nil
    self.wait_head = self.wait_head + 1
    if not req.cancelled then self:start(req) end
  end
  if self.wait_head > self.wait_tail then self.wait_head, self.wait_tail = 1, 0 end
end

function Server:drained() self:dispatch() end

function Server:start(req)
  self.running = self.running + 1
  req.task = loop.spawn(function()
    loop.context_set(REQUEST_KEY, req)
    if log.enabled("info") then
      log.info(string.format("mcp: %s%s (request %s)", req.method, type(req.params.name) == "string"
        and (" " .. req.params.name) or "", tostring(req.id)))
    end
    local res = table.pack(pcall(req.handler, self, req, req.params))
    req.params = nil
    self.inflight[req.key] = nil
    self.inflight_n = self.inflight_n - 1
    self.running = self.running - 1
    if req.progress then req.progress:close() end
    self:finish(req, table.unpack(res, 1, res.n))
    self:dispatch()
  end)
end

-- finish(req, ok, result, cacheable): the answer of one request (none for a cancelled one).
function Server:finish(req, ok, result, cacheable)
  if req.cancelled then return end
  if ok then
    self:send({ jsonrpc = "2.0", id = req.id, result = self:decorate(req, result, cacheable) })
  elseif is_protocol_error(result) then
    self:reply_error(req.id, result.code, result.message, result.data)
  elseif loop.is_cancelled(result) then
    return -- the server is shutting down: nobody reads any more
  else
    log.error("mcp: " .. req.method .. " failed: " .. tostring(result))
    self:reply_error(req.id, INTERNAL, "Internal error: " .. (tostring(result):match("^[^\n]*") or "?"))
  end
end

---------------------------------------------------------------------------------------------------
-- log lines: to stderr always (through glsb.log's own handler), and as notifications/message when the
-- client asked (logging/setLevel; or, in the 2026-07-28 era, the request's own logLevel)

function Server:log_handler(previous)
  return function(level, message, fields)
    message = self.scrub(message)
    if fields then
      local f = {}
      for k, v in pairs(fields) do f[k] = type(v) == "string" and self.scrub(v) or v end
      fields = f
    end
    previous(level, message, fields)
    local name = FROM_GLSB[level] or "info"
    local req = loop.context_get(REQUEST_KEY)
    local wanted = (req and req.modern) and req.log_level or (not (req and req.modern) and self.log_level)
    if wanted and LEVELS[name] >= LEVELS[wanted] and not (req and req.cancelled) and not self.closed then
      self:notify("notifications/message", { level = name, logger = "glsb", data = message })
    end
  end
end

---------------------------------------------------------------------------------------------------
-- the end

function Server:shutdown(budget)
  self.closing = true
  local tasks = {}
  self.waiting, self.wait_head, self.wait_tail = {}, 1, 0
  for _, req in pairs(self.inflight) do
    req.cancelled = true
    if req.progress then req.progress:close() end
    if req.task then
      req.task:cancel()
      tasks[#tasks + 1] = req.task
    end
  end
  local deadline = loop.deadline(budget)
  for _, t in ipairs(tasks) do t:wait(loop.remaining(deadline)) end
  self.closed = true
  return self.session:close(loop.remaining(deadline))
end

return M
