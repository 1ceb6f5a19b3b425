-- http.lua: blocking-style HTTP on top of glsb.core.http: buffered requests, streamed frames, JSON.
--
-- A call waits on the loop (yielding when inside a task). Transport failures never raise: the result
-- carries `error = {phase, code, message, retry_safe, timeout}` from the core, which providers turn into
-- error objects with a stage. Cancelling the calling task aborts the transfer and re-raises.
local core = require "glsb.core"
local loop = require "glsb.loop"
local trace_seam = require "glsb.trace.seam"
local log = require "glsb.log"

local M = {}

local function header_list(headers)
  if headers == nil then return nil end
  local list = {}
  for k, v in pairs(headers) do
    if type(k) == "number" then
      list[#list + 1] = v
    else
      list[#list + 1] = k .. ": " .. tostring(v)
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

local cjson = require "cjson.safe"
M.json_null = cjson.null

-- json(opts) -> result with `json` (decoded body, when it parses) added. opts.json is encoded as the body.
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
  copy.json = nil
  local res = M.request(copy)
  if res.body and res.body ~= "" then res.json = cjson.decode(res.body) end
  return res
end

M.encode_json = cjson.encode
M.decode_json = cjson.decode

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

return M
