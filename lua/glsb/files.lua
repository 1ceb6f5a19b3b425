-- glsb.files: sb.files, the sandbox's filesystem without running code (as E2B's and OpenSandbox's SDKs
-- have it): write, read, list, remove, make_dir, exists.
--
--   sb.files:write("/home/user/a.txt", "hi")        -> true
--   sb.files:read("/home/user/a.txt")               -> "hi"   (raises when it cannot: see below)
--   sb.files:list("/home/user")                     -> { {name, path, type = "file"|"dir"|"symlink"|"other",
--                                                         size}, ... } sorted by path
--   sb.files:exists(path)                           -> true | false
--   sb.files:make_dir(path)                         -> true (created, parents too) | false (it existed)
--   sb.files:remove(path)                           -> nothing; recursive; a missing path is fine
-- Every method takes opts = {timeout = seconds} (default 60; <= 0: none); write and read also on_progress
-- = fn(done, total) (bytes; total nil while unknown), called as the bytes move (a progress bar). A relative
-- path is below the sandbox's workspace root (sb.workspace_root, /home/user). Failures raise SandboxExecutionError with
-- stage "files" (a missing file to read: reason = "not_found"); misuse raises argument errors.
--
-- Provider hooks (PROVIDERS.md), each optional: _files_write(path, data, opts), _files_read(path, opts),
-- _files_list(path, opts), _files_remove(path, opts), _files_make_dir(path, opts) -> bool,
-- _files_exists(path, opts) -> bool. Without them the base uses _upload / _download for write / read,
-- and an exact argv through _exec_argv (no shell around paths) for the others.

local errors = require "glsb.errors"
local options = require "glsb.options"
local constants = require "glsb.constants"
local Stage = require("glsb.models").Stage

local M = {}

local Files = {}
Files.__index = Files
M.Files = Files

local SCHEMA = {
  timeout = { "seconds", "seconds for the operation; `<= 0`: none", default = "60" },
  on_progress = { "function", "write, read: called with (bytes done, bytes in all or nil) as the bytes move" },
}
M.SCHEMA = SCHEMA

-- new(sb, guarded, require_running) -> sb.files. glsb.sandbox makes it for each instance and hands it its
-- own guarded and require_running (so this module, which the sandbox loads, never loads the sandbox).
function M.new(sb, guarded, require_running)
  return setmetatable({ sandbox = sb, _guarded = guarded, _require_running = require_running }, Files)
end

-- absolute(sb, path, what) -> path made absolute: a relative one is below sb.workspace_root (/home/user),
-- "." is that root itself. Misuse (not a string, empty, a NUL byte) is an argument error.
local function absolute(sb, path, what)
  if type(path) ~= "string" or path == "" then options.arg_error("files:%s: path must be a non-empty string", what) end
  if path:find("%z") then options.arg_error("files:%s: path contains a NUL byte", what) end
  if path:sub(1, 1) ~= "/" then
    local root = (sb.workspace_root or "/home/user"):gsub("/+$", "")
    path = path:gsub("^%./+", "")
    path = (path == "." or path == "") and root or (root .. "/" .. path)
  end
  return path
end
M.absolute = absolute

local function fail(what, path, err)
  if require("glsb.loop").is_cancelled(err) then error(err, 0) end
  if errors.is(err, errors.SandboxNotInitializedError) then error(err, 0) end
  local e = errors.new(errors.SandboxExecutionError, Stage.FILES,
    string.format("files:%s %s failed: %s", what, path, errors.describe(err)), err)
  if type(err) == "table" and (rawget(err, "reason") == "not_found" or rawget(err, "http_status") == 404) then
    e.reason = "not_found"
  end
  local c = type(err) == "table" and rawget(err, "cause")
  if type(c) == "table" and rawget(c, "http_status") == 404 then e.reason = "not_found" end
  error(e, 0)
end

-- Runs body(sb, path, timeout) guarded (terminate on cancel) with errors shaped as above.
local function call(self, what, path, opts, body)
  local sb = self.sandbox
  path = absolute(sb, path, what)
  opts = options.check(opts, SCHEMA, "files:" .. what)
  local timeout = options.timeout(opts.timeout, constants.DEFAULT_DOWNLOAD_TIMEOUT)
  local require_running = self._require_running
  local fn = opts.on_progress
  -- a user's callback: one that raises is logged and the transfer goes on (glsb.output.call_back)
  local progress = fn and function(done, total)
    require("glsb.output").call_back(function() fn(done, total) end)
  end
  return self._guarded(sb, function()
    require_running(sb, "files:" .. what)
    local res = table.pack(pcall(body, sb, path, { timeout = timeout, on_progress = progress }))
    if not res[1] then fail(what, path, res[2]) end
    return table.unpack(res, 2, res.n)
  end)
end

-- exec(sb, argv, opts) -> stdout; raises with the command's stderr when it exits non-zero.
local function exec(sb, argv, opts)
  if type(sb._exec_argv) ~= "function" then
    error(string.format("provider '%s' has no files hooks and no _exec_argv", tostring(sb.provider)), 0)
  end
  local r = sb:_exec_argv(argv, { timeout = opts.timeout })
  if r.exit_code ~= 0 then
    local e = { message = ((r.stderr or "") ~= "" and r.stderr:gsub("%s+$", "") or (r.error or
      ("exit code " .. tostring(r.exit_code)))) }
    if r.exit_code == 2 then e.reason = "not_found" end
    error(e, 0)
  end
  return r.stdout or ""
end

function Files:write(path, data, opts)
  if type(data) ~= "string" then options.arg_error("files:write: data must be a string") end
  return call(self, "write", path, opts, function(sb, p, o)
    if type(sb._files_write) == "function" then
      sb:_files_write(p, data, o)
    elseif type(sb._upload) == "function" then
      sb:_upload({ { filename = p:match("[^/]+$"), data = data, path = p } },
        { upload_dir = p:match("^(.*)/[^/]*$"), timeout = o.timeout, on_progress = o.on_progress })
    else
      error(string.format("provider '%s' cannot write files", tostring(sb.provider)), 0)
    end
    return true
  end)
end

function Files:read(path, opts)
  return call(self, "read", path, opts, function(sb, p, o)
    local data
    if type(sb._files_read) == "function" then
      data = sb:_files_read(p, o)
    elseif type(sb._download) == "function" then
      data = sb:_download(p, o)
    else
      error(string.format("provider '%s' cannot read files", tostring(sb.provider)), 0)
    end
    if type(data) ~= "string" then error({ message = "no such file", reason = "not_found" }, 0) end
    return data
  end)
end

local TYPES = { f = "file", d = "dir", l = "symlink" }

function Files:list(path, opts)
  return call(self, "list", path, opts, function(sb, p, o)
    if type(sb._files_list) == "function" then return sb:_files_list(p, o) end
    -- GNU find: one entry per line, type, size, path; names with a newline are skipped (rare)
    local out = exec(sb, { "find", p, "-mindepth", "1", "-maxdepth", "1", "-printf", "%y\t%s\t%p\n" }, o)
    local entries = {}
    for t, size, full in out:gmatch("(%a)\t(%d+)\t([^\n]*)\n") do
      entries[#entries + 1] = { name = full:match("[^/]+$"), path = full, type = TYPES[t] or "other",
        size = tonumber(size) }
    end
    table.sort(entries, function(a, b) return a.path < b.path end)
    return entries
  end)
end

function Files:exists(path, opts)
  return call(self, "exists", path, opts, function(sb, p, o)
    if type(sb._files_exists) == "function" then return sb:_files_exists(p, o) == true end
    local r = sb:_exec_argv({ "test", "-e", p }, { timeout = o.timeout })
    return r.exit_code == 0
  end)
end

function Files:make_dir(path, opts)
  return call(self, "make_dir", path, opts, function(sb, p, o)
    if type(sb._files_make_dir) == "function" then return sb:_files_make_dir(p, o) == true end
    if sb:_exec_argv({ "test", "-d", p }, { timeout = o.timeout }).exit_code == 0 then return false end
    exec(sb, { "mkdir", "-p", "--", p }, o)
    return true
  end)
end

function Files:remove(path, opts)
  return call(self, "remove", path, opts, function(sb, p, o)
    if type(sb._files_remove) == "function" then
      sb:_files_remove(p, o)
    else
      exec(sb, { "rm", "-rf", "--", p }, o)
    end
  end)
end

Files.__tostring = function(self) return "Files(" .. tostring(self.sandbox) .. ")" end

return M
