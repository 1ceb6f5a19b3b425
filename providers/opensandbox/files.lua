-- glsb.providers.opensandbox.files: execd's file API (docs/protocols/opensandbox.md §2.5):
--   POST /files/upload      multipart/form-data, `metadata` then `file` parts in pairs, both with a
--                           filename= (metadata: JSON {path, mode?}); parents are created
--   GET /files/download?path=     the bytes (404 FILE_NOT_FOUND)
--   GET /files/info?path=...      {path: FileInfo}
--   GET /directories/list?path=&depth=1
--   DELETE /files?path= , POST /directories
-- Failures raise error objects (class and stage given by the caller) whose cause keeps the status,
-- the server's code and X-Request-ID when there is one. opts.timeout: seconds, nil for none (the caller
-- resolved it: sb.files' default, what is left of an execution's budget).

local http = require "glsb.http"
local errors = require "glsb.errors"
local codec = require "glsb.codec"
local answer = require "glsb.answer"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"

local M = {}

-- The most of a directory listing kept (some 200 bytes an entry).
M.LIST_ANSWER_CAP = 32 * 1024 * 1024

local function check(class, stage, res, what)
  return lifecycle.raise_if(class, stage, res, what)
end

-- A multipart boundary that cannot occur in the data.
local function boundary(parts)
  local seed = codec.sha256(string.format("%.9f:%s", require("glsb.loop").now(), tostring(parts)))
  local b = "glsb-" .. seed:sub(1, 32)
  for _, p in ipairs(parts) do
    while p:find(b, 1, true) do b = b .. seed:sub(1, 4) end
  end
  return b
end

-- A filename= value: Go's multipart reader takes it verbatim between the quotes.
local function quoted_name(s)
  return (s:gsub('[%c"\\]', "_"))
end

-- multipart(files) -> body, content type: one metadata/file pair per {path, data, mode?}, in order.
function M.multipart(files)
  local datas = {}
  for _, f in ipairs(files) do datas[#datas + 1] = f.data end
  local b = boundary(datas)
  local out = {}
  for _, f in ipairs(files) do
    local meta = { path = f.path }
    if f.mode then meta.mode = tonumber(string.format("%o", f.mode)) end -- decimal digits = octal mode
    out[#out + 1] = "--" .. b .. "\r\n"
      .. 'Content-Disposition: form-data; name="metadata"; filename="metadata"\r\n'
      .. "Content-Type: application/json\r\n\r\n" .. http.encode_json(meta) .. "\r\n"
    out[#out + 1] = "--" .. b .. "\r\n"
      .. 'Content-Disposition: form-data; name="file"; filename="' .. quoted_name(f.path:match("[^/]*$")) .. '"\r\n'
      .. "Content-Type: application/octet-stream\r\n\r\n"
    out[#out + 1] = f.data
    out[#out + 1] = "\r\n"
  end
  out[#out + 1] = "--" .. b .. "--\r\n"
  return table.concat(out), "multipart/form-data; boundary=" .. b
end

-- upload(conn, files, opts) -> raises on failure. files: {{path, data, mode?}}; one request for all.
function M.upload(conn, files, opts)
  if #files == 0 then return end
  local body, ctype = M.multipart(files)
  local size = 0
  for _, f in ipairs(files) do size = size + #f.data end
  local res = conn:http { method = "POST", url = conn:url("/files/upload"),
    headers = conn:hdrs { ["Content-Type"] = ctype }, body = body, timeout = opts.timeout or 0,
    on_progress = http.sent_progress(opts.on_progress, size) }
  local more = #files > 1 and (" and " .. (#files - 1) .. " more") or ""
  check(opts.class, opts.stage, res, "upload of " .. files[1].path .. more .. " failed")
end

-- download(conn, path, opts) -> bytes, or raises.
function M.download(conn, path, opts)
  local res = conn:http { method = "GET", url = conn:url("/files/download?path=" .. http.escape(path)),
    headers = conn:hdrs(), timeout = opts.timeout or 0, on_progress = http.received_progress(opts.on_progress) }
  check(opts.class, opts.stage, res, "download of " .. path .. " failed")
  local body = res.body or ""
  if http.delimited_by_close(res) then
    -- nothing but the connection's end said where the file ended: execd's file info says how long it is
    local info = M.info(conn, path, opts)
    if not info or info.size ~= #body then
      errors.raise(opts.class, opts.stage, string.format("download of %s failed: the answer ended with the connection "
        .. "after %d bytes and the file is %s: cut short, refused", path, #body,
        info and (tostring(info.size) .. " bytes") or "gone"),
        { code = "PARTIAL_FILE", got = #body, size = info and info.size })
    end
  end
  return body
end

-- info(conn, path, opts) -> FileInfo table, nil when missing, or raises.
function M.info(conn, path, opts)
  local res = conn:http { method = "GET", url = conn:url("/files/info?path=" .. http.escape(path)),
    headers = conn:hdrs(), timeout = opts.timeout or 0 }
  if not res.error and res.status == 404 then return nil end
  check(opts.class, opts.stage, res, "info of " .. path .. " failed")
  -- {path: FileInfo} (execd's file API), checked
  local a = answer.reader("files:info " .. path, opts.class, opts.stage)
  local j, why = http.decode_json(res.body or "")
  if j == nil then a:fail("body", res.body, "JSON (" .. tostring(why) .. ")") end
  a:object(j, "body")
  local info = a:object(j[path], "[path]", true)
  if info then a:number(info.size, "[path].size", true) end
  return info
end

-- list(conn, path, opts) -> array of FileInfo (depth 1), or raises.
function M.list(conn, path, opts)
  local res = conn:http { method = "GET",
    url = conn:url("/directories/list?path=" .. http.escape(path) .. "&depth=" .. tostring(opts.depth or 1)),
    headers = conn:hdrs(), timeout = opts.timeout or 0, max_body = M.LIST_ANSWER_CAP }
  check(opts.class, opts.stage, res, "listing " .. path .. " failed")
  -- [FileInfo] (execd's file API), each one checked: path a string, type and size as documented
  local a = answer.reader("files:list " .. path, opts.class, opts.stage)
  local j, why = http.decode_json(res.body or "")
  if j == nil then a:fail("body", res.body, "JSON (" .. tostring(why) .. ")") end
  local out = {}
  for i, f in ipairs(a:list(j, "body")) do
    local field = "[" .. i .. "]"
    a:object(f, field)
    out[i] = { path = a:string(f.path, field .. ".path"), type = a:string(f.type, field .. ".type", true),
      size = a:number(f.size, field .. ".size", true) }
  end
  return out
end

-- remove(conn, path, opts): DELETE /files?path= (a file; missing is fine), raises on failure.
function M.remove(conn, path, opts)
  local res = conn:http { method = "DELETE", url = conn:url("/files?path=" .. http.escape(path)),
    headers = conn:hdrs(), timeout = opts.timeout or 0 }
  check(opts.class, opts.stage, res, "removing " .. path .. " failed")
end

-- remove_all(conn, path, opts): DELETE /directories?path= (os.RemoveAll: a file or a tree; missing is fine).
function M.remove_all(conn, path, opts)
  local res = conn:http { method = "DELETE", url = conn:url("/directories?path=" .. http.escape(path)),
    headers = conn:hdrs(), timeout = opts.timeout or 0 }
  check(opts.class, opts.stage, res, "removing " .. path .. " failed")
end

-- mkdir(conn, path, opts): POST /directories {path: {mode: 755}} (mkdir -p), raises on failure.
function M.mkdir(conn, path, opts)
  local res = conn:http { method = "POST", url = conn:url("/directories"),
    headers = conn:hdrs { ["Content-Type"] = "application/json" },
    body = http.encode_json { [path] = { mode = 755 } }, timeout = opts.timeout or 0 }
  check(opts.class, opts.stage, res, "creating " .. path .. " failed")
end

return M
