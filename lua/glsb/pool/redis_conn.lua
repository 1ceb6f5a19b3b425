-- glsb.pool.redis_conn: one Redis connection on the glsb loop (core.redis_connect, a loop source), pipelined:
-- any number of tasks may have commands in flight; replies come back in order and a reader task hands each
-- request its own. No call blocks other tasks: connecting, TLS, sending and reading all wait on the loop.
--
--   local conn = redis_conn.open(params, { connect_timeout = 5, tls_ca = ..., tls_verify = true })
--   local replies = conn:pipeline({ { "GET", "k" }, { "INCR", "n" } }, deadline)   -- one round trip
--   local reply = conn:call({ "PING" }, deadline)
--   conn:close()
--
-- Replies: bulk and status strings -> string, integers -> integer, nil -> false, arrays -> table (with n),
-- a Redis error reply -> { err = "ERR ..." } (returned, not raised: the command reached the server).
-- Failures of the connection (refused, reset, TLS, protocol, a reply later than the deadline) raise a table
-- { message, code } and break the connection: every request in flight gets the same failure, and the
-- owner opens a new connection for the next one. Messages never hold the password (url.redact).

local core = require "glsb.core"
local loop = require "glsb.loop"

local M = {}

local Conn = {}
Conn.__index = Conn
M.Conn = Conn

local Failure = {}
Failure.__index = Failure
Failure.__tostring = function(f) return f.message end

local function failure(message, code)
  return setmetatable({ message = message, code = code }, Failure)
end
M.failure = failure

-- Waits until the connection is ready (the C source makes the progress; its token says something changed).
local function drive_until_ready(c, deadline, what)
  while true do
    local st, msg, code = c:state()
    if not st then return nil, failure(msg, code) end
    if st == "ready" then return true end
    if loop.wait(c.token, deadline) == "timeout" then
      return nil, failure("redis: timed out while " .. what, "ETIMEDOUT")
    end
  end
end

-- open(params, opts) -> Conn, ready, authenticated, on its database. params: from glsb.pool.url.parse.
-- opts: connect_timeout (seconds, default 5) or deadline (absolute, on glsb.loop's clock; math.huge: none),
-- tls_ca (CA file), tls_verify (default true), tls_servername, hello (commands pipelined after AUTH/SELECT;
-- their replies are returned as the second value).
function M.open(params, opts)
  opts = opts or {}
  local deadline = opts.deadline or (loop.now() + (opts.connect_timeout or 5))
  if deadline == math.huge then deadline = nil end
  local where = params.path or (params.host .. ":" .. tostring(params.port))
  local c, msg, code = core.redis_connect {
    path = params.path, host = params.host, port = params.port, tls = params.tls,
    cafile = opts.tls_ca, verify = opts.tls_verify ~= false, servername = opts.tls_servername,
  }
  if not c then error(failure(msg .. " (" .. where .. ")", code), 0) end
  local ok, ready, f = pcall(drive_until_ready, c, deadline, "connecting to " .. where)
  if not ok or not ready then
    c:close()
    local err = ok and f or ready
    if getmetatable(err) == Failure and not err.message:find(where, 1, true) then
      err.message = err.message .. " (" .. where .. ")"
    end
    error(err, 0)
  end
  local self = setmetatable({ c = c, queue = {}, head = 1, tail = 0, where = where }, Conn)
  local cmds = {}
  if params.password then
    cmds[#cmds + 1] = params.user and { "AUTH", params.user, params.password } or { "AUTH", params.password }
  elseif params.user then
    cmds[#cmds + 1] = { "AUTH", params.user, "" }
  end
  if params.db and params.db ~= 0 then cmds[#cmds + 1] = { "SELECT", params.db } end
  local first = #cmds
  for _, h in ipairs(opts.hello or {}) do cmds[#cmds + 1] = h end
  if #cmds == 0 then return self, {} end
  local rok, replies = pcall(self.pipeline, self, cmds, deadline)
  if not rok then
    self:close()
    error(replies, 0)
  end
  for i = 1, first do
    local r = replies[i]
    if type(r) == "table" and r.err then
      self:close()
      -- Redis's own texts ("WRONGPASS invalid username-password pair ...") never echo the password
      local what = cmds[i][1] == "AUTH" and "authentication" or "SELECT " .. tostring(params.db)
      error(failure(string.format("redis: %s failed on %s: %s", what, where, r.err),
        r.err:match("^(%u+)") or "REDIS_ERROR"), 0)
    end
  end
  local rest = {}
  for i = first + 1, #cmds do rest[#rest + 1] = replies[i] end
  return self, rest
end

-- Fails every request in flight with err and closes the socket. Safe twice.
function Conn:_break(err)
  if self.broken then return end
  self.broken = err
  local reader = self.reader
  self.reader = nil
  if reader and reader ~= loop.current() then reader:cancel() end
  for i = self.head, self.tail do
    local req = self.queue[i]
    self.queue[i] = nil
    req.err = err
    req.cond:broadcast()
  end
  self.head, self.tail = 1, 0
  self.c:close()
end

-- Hands replies to the requests in order.
local function dispatch(self, replies)
  for i = 1, replies.n do
    local req = self.queue[self.head]
    if not req then
      self:_break(failure("redis: a reply nobody asked for (the stream is out of step)", "WEIRD_SERVER_REPLY"))
      return
    end
    req.replies[#req.replies + 1] = replies[i]
    if #req.replies == req.n then
      self.queue[self.head] = nil
      self.head = self.head + 1
      req.done = true
      req.cond:broadcast()
    end
  end
end

-- The reader task: runs while requests wait, then ends (a connection at rest has no task on the loop).
local function read_replies(self)
  while not self.broken and self.head <= self.tail do
    local replies, msg, code = self.c:replies()
    if not replies then return self:_break(failure(msg, code)) end
    dispatch(self, replies)
    if self.broken or self.head > self.tail then break end
    loop.wait(self.c.token, nil) -- the source read more (or failed): look again
  end
  if self.reader == loop.current() then self.reader = nil end
end

-- pipeline(cmds, deadline) -> replies (one per command, in order). Raises a failure (see above).
function Conn:pipeline(cmds, deadline)
  if self.broken then error(self.broken, 0) end
  local req = { n = #cmds, replies = {}, cond = loop.condition() }
  if req.n == 0 then return {} end
  local ok, msg, code = self.c:send(cmds)
  if not ok then
    local f = failure(msg, code)
    self:_break(f)
    error(f, 0)
  end
  self.tail = self.tail + 1
  self.queue[self.tail] = req
  if not self.reader then
    local task
    task = loop.spawn(function()
      local rok, err = pcall(read_replies, self)
      if self.reader == task then self.reader = nil end
      if not rok and not loop.is_cancelled(err) then self:_break(failure("redis: " .. tostring(err), "EOTHER")) end
    end)
    self.reader = task
  end
  while not req.done and not req.err do
    if req.cond:wait(deadline) == "timeout" then
      -- the reply may still come, but the stream position is lost for whoever asks next: start afresh
      self:_break(failure(string.format("redis: no reply from %s in time", self.where), "ETIMEDOUT"))
    end
  end
  if req.err then error(req.err, 0) end
  return req.replies
end

function Conn:call(argv, deadline)
  return self:pipeline({ argv }, deadline)[1]
end

function Conn:close()
  self:_break(failure("redis: the connection was closed", "EBADF"))
end

return M
