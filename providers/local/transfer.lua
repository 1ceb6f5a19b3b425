-- glsb.providers.local.transfer: uploads, downloads and sb.files, on glsb-confine's control channel
-- (control.lua), never through the agent the code in the sandbox could rewrite. init.lua's hooks
-- (_upload, _download, _files_*) are these functions; control_failure also words the workspace
-- helper's failures (init.lua's _exec_argv).

local codec = require "glsb.codec"
local fs = require "glsb.fs"
local cjson = require "cjson.safe"
local loop = require "glsb.loop"
local process = require "glsb.process"
local sandbox = require "glsb.sandbox"
local agent = require "glsb.providers.local.agent"
local control = require "glsb.providers.local.control"
local layout = require "glsb.providers.local.layout"

local mark_dead, unusable = agent.mark_dead, agent.unusable

local M = {}

M.DEFAULT_MAX_DOWNLOAD = layout.DEFAULT_MAX_DOWNLOAD

-- Uploads, downloads and the workspace helper go through glsb-confine's control channel (control.lua):
-- the supervisor runs `glsb-confine write|read|run` in a confined child the code in the sandbox cannot
-- reach, so their results and byte counts cannot be forged by replacing the agent's handlers.

-- Why a control call failed, for the errors of uploads, downloads and helper runs.
local function control_failure(self, why, timeout)
  if why == "busy" then
    return string.format("timed out after %gs waiting for another transfer on this sandbox to end", timeout or 0)
  end
  if sandbox.lease_over(self) then return "the sandbox lease expired and the sandbox was terminated" end
  if why == "gone" then return self._dead or "the sandbox has ended" end
  if why == "broken" then
    local msg = "the control channel broke: " .. tostring(self._control.broken)
    mark_dead(self, msg)
    return msg
  end
  return self._dead or unusable(self) or tostring(why)
end

-- The writable root a sandbox path is in, and the path below it (relative paths: below /home/user).
-- -> root, rel | nil, message
local WRITABLE_ROOTS = { "/home/user", "/files", "/tmp" }

local function split_root(path)
  if path:sub(1, 1) ~= "/" then return "/home/user", path end
  for _, root in ipairs(WRITABLE_ROOTS) do
    if path:sub(1, #root + 1) == root .. "/" and #path > #root + 1 then return root, path:sub(#root + 2) end
  end
  return nil, "not below /home/user, /files or /tmp: " .. path
end

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- The helper's one JSON line at the start of a call's stdout -> doc, the bytes after it.
local function helper_answer(stdout)
  local nl = stdout:find("\n", 1, true)
  local doc = cjson.decode(nl and stdout:sub(1, nl - 1) or stdout)
  if type(doc) ~= "table" then return nil end
  return doc, nl and stdout:sub(nl + 1) or ""
end

local function helper_refusal(doc, r)
  if doc then return tostring(doc.error) .. ": " .. tostring(doc.message) end
  if r.error then return tostring(r.error) .. ": " .. tostring(r.message) end
  return string.format("the helper gave no answer (exit %s, signal %s): %s", tostring(r.code), tostring(r.signal),
    r.stderr:sub(1, 300))
end

-- opts.timeout bounds the whole upload (the call is cancelled then).
function M.upload(self, files, opts)
  local deadline = require("glsb.sandbox").deadline(opts)
  for _, f in ipairs(files) do
    local root, rel = split_root(f.path)
    if not root then error("upload of " .. f.path .. " failed: " .. rel, 0) end
    local fn = opts.on_progress
    local r, why = self._control:call({ "write", "--root", root, "--path-hex", hex(rel),
      "--max-bytes", tostring(#f.data) }, f.data, { deadline = deadline, max_stdout = 64 * 1024,
      on_progress = fn and function(sent) if sent then fn(sent, #f.data) end end })
    if not r then error("upload of " .. f.path .. " failed: " .. control_failure(self, why, opts.timeout), 0) end
    local doc = helper_answer(r.stdout)
    if r.cancelled then error(string.format("upload of %s: timed out after %gs", f.path, opts.timeout or 0), 0) end
    if not doc or doc.ok ~= true then error("upload of " .. f.path .. " failed: " .. helper_refusal(doc, r), 0) end
    if math.tointeger(doc.bytes) ~= #f.data then
      error(string.format("upload of %s: %s bytes written of %d", f.path, tostring(doc.bytes), #f.data), 0)
    end
  end
end

-- `glsb-confine read` prints {"ok":true,"bytes":N} and the N bytes; the host keeps at most max (and the
-- answer's line) whatever arrives, read straight into one buffer (glsb.process.buffer: a 100 MB file is
-- copied once on the host, into the string returned). The sandbox keeps its buffer for the next read
-- (self._sink; closed at terminate): its pages, given back lazily, are neither faulted in nor zeroed
-- again, which was half of a 100 MB download. -> doc, data | doc (a refusal), nil | raises.
local ANSWER_MAX = 4096

-- The sandbox's buffer for a read of at most max bytes (one read at a time uses it; a concurrent one
-- makes its own), and giving it back emptied (closed when another was given back meanwhile, or the
-- sandbox has ended).
local function take_sink(self, max)
  local sink = self._sink
  self._sink = nil
  if not sink or sink:capacity() ~= max + ANSWER_MAX then sink = process.buffer(max + ANSWER_MAX) end
  return sink
end

local function give_sink(self, sink)
  sink:clear() -- whatever is left (a refusal, a failure) goes, its pages given back
  if self._sink or self._dead then sink:close() else self._sink = sink end
end

local function read_file(self, what, args, max, opts)
  local deadline = require("glsb.sandbox").deadline(opts)
  local sink = take_sink(self, max)
  local ok, doc, data = pcall(function()
    local fn = opts.on_progress
    local r, why = self._control:call(args, nil, { deadline = deadline, max_stdout = max + ANSWER_MAX, sink = sink,
      on_progress = fn and function(_, received) if received then fn(received) end end })
    if not r then error(what .. " failed: " .. control_failure(self, why, opts.timeout), 0) end
    if r.cancelled then error(string.format("%s: timed out after %gs", what, opts.timeout or 0), 0) end
    if r.stdout_over then error(string.format("%s: larger than max_download_bytes = %d", what, max), 0) end
    local nl = sink:find("\n")
    local doc = nl and nl <= ANSWER_MAX and cjson.decode(sink:sub(1, nl - 1)) or nil
    if type(doc) ~= "table" then doc = nil end
    if doc and doc.ok == false then return doc, nil end
    if not doc or doc.ok ~= true then error(what .. ": " .. helper_refusal(doc, r), 0) end
    -- the helper announces the file's size, then streams it: a file that shrank meanwhile arrives short
    -- and the helper exits 1 (src/confine/ws_read.c)
    local got = sink:len() - nl
    if math.tointeger(doc.bytes) ~= got or r.code ~= 0 then
      error(string.format("%s: %d bytes arrived of %s (exit %s: %s)", what, got, tostring(doc.bytes),
        tostring(r.code), r.stderr:sub(1, 300)), 0)
    end
    return doc, sink:take(nl + 1)
  end)
  give_sink(self, sink)
  if not ok then error(doc, 0) end
  return doc, data
end

-- sb.files (glsb.files hooks), on the control channel too

-- Like uploads and downloads, sb.files never goes through the agent: what it reports comes from
-- glsb-confine's file server (src/confine/CONTROL.md, "The file server"), a long-lived process
-- confined as a call's helper, which the code in the sandbox cannot reach: one round trip a call.
-- write and read are the helper's own write / read (read follows symlinks, but only within the
-- sandbox's root: RESOLVE_IN_ROOT); list, exists, make_dir and remove do what find, test, mkdir -p
-- and rm -rf did. The code can change its files, as it may, but not what these calls say about them.
-- With a helper that has no file server (an older one, its report says: init.lua), and for what is
-- larger than it answers (1 MiB: writes, reads and folder listings), the per-call helper as before:
-- write / read, and one exact argv of the sandbox's coreutils through `glsb-confine run` (no shell,
-- an empty environment: the C locale's messages, absolute program paths).

-- Runs argv through the helper's `run`. -> {code, signal, stdout, stderr} (the program's), or raises.
local function helper_run(self, what, argv, timeout, max_out)
  max_out = max_out or 1024 * 1024
  local args = { "run", "--root", "/home/user", "--timeout", tostring(timeout or 0), "--max-output",
    tostring(max_out), "--" }
  for _, a in ipairs(argv) do args[#args + 1] = a end
  -- the helper's own timeout ends the program; the channel's deadline is a backstop past it
  local r, why = self._control:call(args, nil, { deadline = timeout and loop.now() + timeout + 5 or nil,
    max_stdout = 2 * max_out + 64 * 1024 })
  if not r then error(what .. ": " .. control_failure(self, why, timeout), 0) end
  if r.cancelled then error(string.format("%s: timed out after %gs", what, timeout or 0), 0) end
  local doc = helper_answer(r.stdout)
  if not doc or doc.ok ~= true then error(what .. ": " .. helper_refusal(doc, r), 0) end
  if doc.timed_out then error(string.format("%s: timed out after %gs", what, timeout or 0), 0) end
  if doc.stdout_truncated then error(string.format("%s: the answer is larger than %d bytes", what, max_out), 0) end
  return { code = math.tointeger(doc.exit_code), signal = math.tointeger(doc.signal),
    stdout = codec.b64decode(doc.stdout or "") or "", stderr = codec.b64decode(doc.stderr or "") or "" }
end

-- A failed coreutils run -> the error files.lua reports (reason = "not_found" when the path is missing).
local function run_failure(what, r)
  local msg = r.stderr:gsub("%s+$", "")
  if msg == "" then msg = r.signal and ("killed by signal " .. r.signal) or ("exit code " .. tostring(r.code)) end
  return { message = what .. ": " .. msg,
    reason = msg:find("No such file or directory", 1, true) and "not_found" or nil }
end

-- The helper's file server (control:files; src/confine/ws_serve.c), where the helper has one: one round
-- trip each instead of a confined child and a coreutils program per call. -> its answer (ok true), or
-- nil, the answer (ok false: its error and message), or raises when it could not be asked.
local function serve(self, what, words, data, timeout)
  local r, why = self._control:files(words, data, timeout and loop.now() + timeout or nil)
  if not r then error(what .. ": " .. control_failure(self, why, timeout), 0) end
  if r.ev == "error" then error(what .. ": " .. tostring(r.error) .. ": " .. tostring(r.message), 0) end
  if r.ok == true then return r end
  return nil, r
end

-- An answer that failed -> the error files.lua reports (reason = "not_found" when the path is missing).
local function served_failure(r)
  return { message = tostring(r.message), reason = r.error == "not_found" and "not_found" or nil }
end

-- A file the file server opened for this process (its `open`: the descriptor comes with the answer), read
-- straight from the descriptor into the sandbox's buffer: one copy on the host, none through a pipe or
-- the channel (a 100 MB download was three processes handing the bytes on: the helper, the supervisor
-- and this one). The descriptor is read-only, of a regular file; at most the size the answer said is
-- read, and a file that shrank meanwhile is an error. mode: "beneath" (no link crossed, as download's
-- `read --root`) or "follow" (links resolved within the sandbox's root, as sb.files' read).
-- -> data, or nil, the answer (a refusal: not_found, too_large, ...) | raises.
local READ_PIECE = 8 * 1024 * 1024

local function read_opened(self, what, root, rel, max, mode, opts)
  local deadline = require("glsb.sandbox").deadline(opts)
  local r, bad = serve(self, what, { "open", root, hex(rel), tostring(max), mode }, nil, opts.timeout)
  if not r then return nil, bad end
  local fd, size = r.fd, math.tointeger(r.bytes)
  if not fd then error(what .. ": the helper's answer came without its descriptor", 0) end
  if not size or size < 0 or size > max then
    fs.close(fd)
    error(what .. ": the helper said a size of " .. tostring(r.bytes), 0)
  end
  local sink = take_sink(self, max)
  local ok, data = pcall(function()
    if size == 0 and opts.on_progress then opts.on_progress(0, 0) end
    while sink:len() < size do
      if deadline and loop.now() >= deadline then
        error(string.format("%s: timed out after %gs", what, opts.timeout or 0), 0)
      end
      local n, err = fs.read_into(fd, sink, math.min(READ_PIECE, size - sink:len()))
      if not n then error(what .. ": reading the file failed: " .. tostring(err), 0) end
      if n == 0 then
        error(string.format("%s: %d bytes arrived of %d (the file shrank)", what, sink:len(), size), 0)
      end
      if opts.on_progress then opts.on_progress(sink:len(), size) end
      if sink:len() < size then loop.sleep(0) end -- a piece at a time: the loop's other tasks go on
    end
    return sink:take()
  end)
  fs.close(fd)
  give_sink(self, sink)
  if not ok then error(data, 0) end
  return data
end

-- Downloads: with the file server, read_opened (mode beneath: what `read --root` allowed); else the
-- helper's `read` streamed on the channel (read_file).
function M.download(self, path, opts)
  local max = (self._opts and self._opts.max_download_bytes) or M.DEFAULT_MAX_DOWNLOAD
  local root, rel = split_root(path)
  if not root then error("download of " .. path .. ": " .. rel, 0) end
  local what = "download of " .. path
  if self._control.has_files then
    local data, bad = read_opened(self, what, root, rel, max, "beneath", opts)
    if data then return data end
    if bad.error == "too_large" then
      error(string.format("%s: larger than max_download_bytes = %d", what, max), 0)
    end
    error(what .. ": " .. helper_refusal(bad), 0)
  end
  local doc, data = read_file(self, what, { "read", "--root", root, "--path-hex", hex(rel),
    "--max-bytes", tostring(max) }, max, opts)
  if not data then error(what .. ": " .. helper_refusal(doc), 0) end
  return data
end

function M.files_write(self, path, data, opts)
  local root, rel = split_root(path)
  if self._control.has_files and root and #data <= control.FILES_DATA_MAX then
    local r, bad = serve(self, "write", { "write", root, hex(rel) }, data, opts.timeout)
    if not r then error("write of " .. path .. " failed: " .. helper_refusal(bad), 0) end
    if math.tointeger(r.bytes) ~= #data then
      error(string.format("write of %s: %s bytes written of %d", path, tostring(r.bytes), #data), 0)
    end
    if opts.on_progress then opts.on_progress(#data, #data) end -- one round trip: all at once
    return
  end
  self:_upload({ { path = path, data = data } }, { timeout = opts.timeout, on_progress = opts.on_progress })
end

function M.files_read(self, path, opts)
  local max = (self._opts and self._opts.max_download_bytes) or M.DEFAULT_MAX_DOWNLOAD
  if self._control.has_files then
    local r, bad = serve(self, "read", { "read", path, tostring(max) }, nil, opts.timeout)
    if r then
      if opts.on_progress then opts.on_progress(#(r.data or ""), #(r.data or "")) end -- one round trip
      return r.data or ""
    end
    if bad.error == "not_found" then error({ message = "read: no such file: " .. path, reason = "not_found" }, 0) end
    -- larger than the server answers (1 MiB): read from the descriptor it opens for us
    if bad.error ~= "too_large" or (math.tointeger(bad.bytes) or 0) > max then
      error("read: " .. helper_refusal(bad), 0)
    end
    local data, worse = read_opened(self, "read", "/", path:gsub("^/+", ""), max, "follow", opts)
    if data then return data end
    if worse.error == "not_found" then error({ message = "read: no such file: " .. path, reason = "not_found" }, 0) end
    error("read: " .. helper_refusal(worse), 0)
  end
  local doc, data = read_file(self, "read", { "read", "--root", "/", "--follow", "--path-hex",
    hex(path:gsub("^/+", "")), "--max-bytes", tostring(max) }, max, opts)
  if data then return data end
  if doc.error == "not_found" then error({ message = "read: no such file: " .. path, reason = "not_found" }, 0) end
  error("read: " .. helper_refusal(doc), 0)
end

local FILE_TYPES = { f = "file", d = "dir", l = "symlink" }

-- GNU find, NUL-ended records (any name survives): depth, type, size, path. The path itself comes
-- first (depth 0; -H: followed when it is a symlink) and must be a directory.
function M.files_list(self, path, opts)
  if self._control.has_files then
    local r, bad = serve(self, "list", { "list", path }, nil, opts.timeout)
    if r then
      local entries, base = {}, path:sub(-1) == "/" and path or (path .. "/")
      for t, size, name in (r.data or ""):gmatch("(%a)\t(%d+)\t([^%z]*)%z") do
        entries[#entries + 1] = { name = name, path = base .. name, type = FILE_TYPES[t] or "other",
          size = math.tointeger(tonumber(size)) }
      end
      table.sort(entries, function(a, b) return a.path < b.path end)
      return entries
    end
    if bad.error == "not_directory" then error({ message = "list: not a directory: " .. path }, 0) end
    -- a folder too large for one answer (1 MiB of names) is listed by find, as before
    if bad.error ~= "too_large" then error(served_failure(bad), 0) end
  end
  local r = helper_run(self, "list", { "/usr/bin/find", "-H", path, "-maxdepth", "1",
    "-printf", "%d\\t%y\\t%s\\t%p\\0" }, opts.timeout, 16 * 1024 * 1024)
  if r.code ~= 0 then error(run_failure("list", r), 0) end
  local entries, top = {}, nil
  for depth, t, size, full in r.stdout:gmatch("(%d)\t(%a)\t(%d+)\t([^%z]*)%z") do
    if depth == "0" then
      top = t
    else
      entries[#entries + 1] = { name = full:match("[^/]+$"), path = full, type = FILE_TYPES[t] or "other",
        size = math.tointeger(tonumber(size)) }
    end
  end
  if top ~= "d" then error({ message = "list: not a directory: " .. path }, 0) end
  table.sort(entries, function(a, b) return a.path < b.path end)
  return entries
end

function M.files_exists(self, path, opts)
  if self._control.has_files then
    local r, bad = serve(self, "exists", { "exists", path }, nil, opts.timeout)
    if not r then error(served_failure(bad), 0) end
    return r.exists == true
  end
  local r = helper_run(self, "exists", { "/usr/bin/test", "-e", path }, opts.timeout)
  if r.code == 0 then return true end
  if r.code == 1 then return false end
  error(run_failure("exists", r), 0)
end

-- mkdir -v names each directory it created: nothing printed means the path was a directory already.
function M.files_make_dir(self, path, opts)
  if self._control.has_files then
    local r, bad = serve(self, "make_dir", { "mkdir", path }, nil, opts.timeout)
    if not r then error(served_failure(bad), 0) end
    return r.created == true
  end
  local r = helper_run(self, "make_dir", { "/usr/bin/mkdir", "-p", "-v", "--", path }, opts.timeout)
  if r.code ~= 0 then error(run_failure("make_dir", r), 0) end
  return r.stdout ~= ""
end

function M.files_remove(self, path, opts)
  if self._control.has_files then
    local _, bad = serve(self, "remove", { "remove", path }, nil, opts.timeout)
    if bad then error(served_failure(bad), 0) end
    return
  end
  local r = helper_run(self, "remove", { "/usr/bin/rm", "-rf", "--", path }, opts.timeout)
  if r.code ~= 0 then error(run_failure("remove", r), 0) end
end

M.control_failure = control_failure

return M
