-- http.lua: blocking-style HTTP on top of glsb.core.http: buffered requests, streamed frames, JSON.
--
-- A call waits on the loop (yielding when inside a task). Transport failures never raise: the result
-- carries `error = {phase, code, message, retry_safe, timeout}` from the core, which providers turn into
-- error objects with a stage. Cancelling the calling task aborts the transfer and re-raises.
local core = require "glsb.core"
local loop = require "glsb.loop"
local trace_seam = require "glsb.trace.seam"
local log = require "glsb.log"
local secrets = require "glsb.secrets"

local M = {}

-- The header lines of a request; the values of those that carry credentials are registered with
-- glsb.secrets as they go (the one place every request passes): no error, log line or span shows them.
local function header_list(headers)
  if headers == nil then return nil end
  local list = {}
  for k, v in pairs(headers) do
    if type(k) == "number" then
      list[#list + 1] = v
      local name, value = tostring(v):match("^([^:]+):%s*(.-)%s*$")
      if name then secrets.register_header(name, value) end
    else
      list[#list + 1] = k .. ": " .. tostring(v)
      secrets.register_header(k, tostring(v))
    end
  end
  table.sort(list) -- stable wire order, so captures and signatures are reproducible
  return list
end

-- request(opts) -> result
-- opts: as core.http (method, url, headers as map or array, body, timeouts, framer, ...) plus
--   on_headers(status, headers) called once the response head arrives (return false to abort),
--   on_frame(frame) called for each frame in order (return false to abort),
--   on_progress(sent, to_send, received, to_receive) called at most every PROGRESS_INTERVAL while the
--   transfer runs, and once at its end (the body's bytes; to_receive -1 while unknown): a progress bar.
-- result: { status, headers, body (buffered), error (nil on success), aborted }
-- opts.trace = false: no client span for this request (the span exporter's own requests).
-- opts.sign(opts) -> opts: a request signer (AWS SigV4) run last, after any seam added its headers
-- (tracing's traceparent), so that every header that goes out is one the signature covers.
M.PROGRESS_INTERVAL = 0.1

-- sent_progress(fn[, size]) / received_progress(fn) -> an on_progress for request that calls fn(done,
-- total) with the body's bytes going out / coming in (total nil while unknown); nil for fn nil. What a
-- provider hands a transfer so that files:write / files:read report as the bytes move (sb.files
-- on_progress). size: the data's own size when the body wraps it (multipart, base64 in JSON): the bytes
-- sent are scaled to it.
function M.sent_progress(fn, size)
  if not fn then return nil end
  return function(sent, to_send)
    if size and to_send > 0 then fn(math.floor(size * sent / to_send), size) else fn(sent, to_send) end
  end
end

function M.received_progress(fn)
  return fn and function(_, _, received, to_receive) fn(received, to_receive >= 0 and to_receive or nil) end or nil
end

local function request(opts)
  if opts.sign then opts = opts.sign(opts) end
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  copy.headers = header_list(opts.headers)
  if type(opts.userpwd) == "string" then secrets.register(opts.userpwd:match(":(.*)$")) end
  copy.on_frame, copy.on_headers, copy.sign, copy.on_progress = nil, nil, nil, nil
  local on_frame, on_headers, on_progress = opts.on_frame, opts.on_headers, opts.on_progress
  local req <close>, setup_err, setup_code = core.http(copy)
  if not req then
    -- libcurl could not even start the transfer: nothing was sent.
    return { status = 0, headers = {},
      error = { phase = "connect", code = setup_code, message = setup_err, retry_safe = true } }
  end
  local saw_head = false
  local ok, err = pcall(function()
    while true do
      if on_headers and not saw_head then
        local status, headers = req:status()
        if status ~= 0 then
          saw_head = true
          if on_headers(status, headers) == false then return "aborted" end
        end
      end
      if copy.framer then
        for _, frame in ipairs(req:frames()) do
          if on_frame(frame) == false then return "aborted" end
        end
      end
      if on_progress then on_progress(req:progress()) end
      if req:done() then
        -- frames that arrived with the last bytes
        if copy.framer then
          for _, frame in ipairs(req:frames()) do
            if on_frame(frame) == false then return "aborted" end
          end
        end
        return "done"
      end
      -- the token wakes us when something arrives; an upload says nothing until it ends, so a progress
      -- line is also fed on a clock
      loop.wait(req.token, on_progress and (loop.now() + M.PROGRESS_INTERVAL) or nil)
    end
  end)
  if not ok then error(err, 0) end
  if err == "aborted" then
    -- a caller that stops reading once it has what it wanted (Bedrock's first result) still hears how far
    -- the transfer got
    if on_progress then on_progress(req:progress()) end
    local status, headers = req:status()
    return { status = status, headers = headers, aborted = true }
  end
  return req:result()
end

-- GLSB_LOG=debug: one line per request (the URL without its query values or credentials; headers, and
-- so keys and tokens, never logged). Costs one call when debug is off.
local function logged(fn, opts)
  local started = loop.now()
  local res = fn(opts)
  local e = res.error
  log.debug(string.format("http %s %s -> %s in %.1f ms", opts.method or "GET",
    require("glsb.trace.redact").url(opts.url), e and (tostring(e.code) .. " (" .. tostring(e.phase) .. ")")
      or tostring(res.status), (loop.now() - started) * 1000),
    { bytes_out = type(opts.body) == "string" and #opts.body or nil,
      bytes_in = type(res.body) == "string" and #res.body or nil })
  return res
end

function M.request(opts)
  if type(opts) ~= "table" then error("glsb.http.request: opts must be a table", 2) end
  local fn = request
  if log.enabled("debug") then fn = function(o) return logged(request, o) end end
  -- tracing's choke point: a client span per request when tracing is on (one field read when off)
  if trace_seam.on and opts.trace ~= false then return trace_seam.http(fn, opts) end
  return fn(opts)
end

-- The most of an answer to a control-plane call kept (a page of a list, a sandbox's detail: kilobytes);
-- http.json's default max_body. A bigger answer is BODY_TOO_LARGE, refused by its declared length before a
-- byte of it is read, or once it passes the cap.
M.ANSWER_CAP = 8 * 1024 * 1024

-- The most of an error answer kept (an API's error is a few hundred bytes; a server that sends an endless
-- one costs this much): core.http's error_body for framed requests, and body_reader's cap.
M.ERROR_BODY = 64 * 1024

-- body_reader([cap]) -> r: the text of an answer a framed request got where frames were expected (a status
-- that is not the stream's), kept up to cap bytes (default M.ERROR_BODY). r:add(piece) -> false once the cap
-- is reached (an on_frame handler returns it: the transfer stops there); r:text() -> what was kept.
function M.body_reader(cap)
  cap = cap or M.ERROR_BODY
  local kept = require("glsb.output").pieces()
  local r = {}
  function r.add(piece)
    local room = cap - kept.size
    if #piece > room then piece = piece:sub(1, room) end
    kept:add(piece)
    return kept.size < cap
  end
  function r.text() return kept:text() end
  return r
end

local cjson = require "cjson.safe"
local codec = require "glsb.codec"
M.json_null = cjson.null

-- json(opts) -> result with `json` (decoded body, when it parses) added, or `json_error` (why it did not:
-- not JSON, or too costly to decode: opts.json_budget, glsb.codec.decode_json). opts.json is encoded as the
-- body. The answer is buffered up to opts.max_body bytes (default ANSWER_CAP).
function M.json(opts)
  local copy = {}
  for k, v in pairs(opts) do copy[k] = v end
  local headers = {}
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  if opts.json ~= nil then
    copy.body = assert(cjson.encode(opts.json))
    headers["Content-Type"] = headers["Content-Type"] or "application/json"
  end
  headers["Accept"] = headers["Accept"] or "application/json"
  copy.headers = headers
  copy.json, copy.json_budget = nil, nil
  copy.max_body = opts.max_body or M.ANSWER_CAP
  local res = M.request(copy)
  if res.body and res.body ~= "" then res.json, res.json_error = codec.decode_json(res.body, opts.json_budget) end
  return res
end

M.encode_json = cjson.encode
-- decode_json(text[, budget]) -> value, or nil, message: glsb.codec.decode_json (what comes from outside is
-- decoded at the cost of what it holds, refused past the budget).
M.decode_json = codec.decode_json

-- decode_frames(framer, chunks[, max_frame[, oversized]]) -> frames, or nil, message, code and the frames
-- decoded before the failure: a body that arrived whole (chunks: an array of strings) cut by one of the
-- framers of requests ("eventstream", "sse", ...; src/core/README.md), for a transfer that could not
-- frame it on the way (a provider that buffers first).
function M.decode_frames(framer, chunks, max_frame, oversized)
  return core.decode_frames(framer, chunks, max_frame, oversized)
end

-- Percent-encodes a URL component (RFC 3986 unreserved characters are kept).
function M.escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- delimited_by_close(res) -> true when only the connection's end said where a buffered body ended (HTTP/1.x
-- with neither Content-Length nor chunked encoding: an HTTP/1.0 server's way). A cut connection then looks
-- like the body's end: whoever reads such a body whole (a file) checks its size another way. A declared
-- length or chunked encoding cut short is a transfer failure already (libcurl's PARTIAL_FILE, RECV_ERROR).
function M.delimited_by_close(res)
  if type(res) ~= "table" or res.error or res.http_version == "2" or res.http_version == "3" then return false end
  local h = res.headers or {}
  if h["content-length"] ~= nil then return false end
  local te = h["transfer-encoding"]
  return not (type(te) == "string" and te:lower():find("chunked", 1, true))
end

-- segment(s) -> s as one path segment of a URL: escape(s), and a segment of dots only written with %2E
-- (".." and "." are unreserved, and libcurl and proxies resolve them: "/sandboxes/.." was "/"). An empty
-- segment is refused (misuse: "/sandboxes/" names no sandbox); ids that arrive from a server are checked
-- against their grammar before (glsb.answer).
function M.segment(s)
  s = tostring(s)
  if s == "" then error("glsb.http.segment: an empty path segment", 2) end
  if s:match("^%.+$") then return (s:gsub("%.", "%%2E")) end
  return M.escape(s)
end

return M
