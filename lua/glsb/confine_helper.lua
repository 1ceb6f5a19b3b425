-- glsb.confine_helper: finding this machine's static glsb-confine, and putting it into a remote
-- sandbox once. The local provider execs the file it finds; a remote provider uploads its bytes.
--
--   helper.find([explicit]) -> absolute path | nil, message listing every place tried
--   helper.read([explicit]) -> bytes, sha256 hex | nil, message
--   helper.ensure_uploaded(sb[, opts]) -> the path inside sb (uploaded and chmod'ed once per sandbox);
--     opts: path (this machine's helper, default find()), timeout (upload seconds, default 120)
--
-- Where find looks, first match wins: explicit (an option such as local's `confine`), $GLSB_CONFINE,
-- then next to the C core: <dir of core.so>/glsb-confine (installed next to core.so),
-- <dir>/../../glsb-confine (build/lib/glsb/core.so -> build/), <dir>/../lib/lua/5.4/glsb/glsb-confine
-- (PREFIX/bin/glsb-lua with the core linked in), then the source checkout's build/glsb-confine.

local core = require "glsb.core"
local fs = require "glsb.fs"
local errors = require "glsb.errors"
local Stage = require("glsb.models").Stage

local M = {}

-- Where a remote sandbox keeps it; the file name carries the content hash, so a rebuilt helper is
-- uploaded again rather than mistaken for the old one.
M.REMOTE_DIR = "/tmp/.glsb"

local exists, dirname = fs.exists, fs.dirname

local SOURCE_BUILD = (function()
  local here = fs.source_dir()
  return here and here .. "/../../build/glsb-confine"
end)()

-- The first answer of the search is kept: core.module_path() fails once core.so has been replaced on
-- disk while we run (a rebuild: /proc/self/maps then says "(deleted)").
local found

function M.find(explicit)
  local tried = {}
  local function try(p)
    if not p or p == "" then return nil end
    tried[#tried + 1] = p
    if exists(p) then return core.realpath and core.realpath(p) or p end
  end
  if explicit then
    local path = try(explicit)
    if path then return path end
    return nil, "glsb-confine not found at " .. tostring(explicit)
  end
  local env = try(os.getenv("GLSB_CONFINE"))
  if env then return env end
  if found then return found end
  local dirs = {}
  local ok, mp = pcall(core.module_path)
  if ok and mp then dirs[#dirs + 1] = dirname(mp) end
  local so = package.searchpath("glsb.core", package.cpath)
  if so then dirs[#dirs + 1] = dirname(so) end
  local path
  for _, dir in ipairs(dirs) do
    path = try(dir .. "/glsb-confine") or try(dir .. "/../../glsb-confine")
      or try(dir .. "/../lib/lua/5.4/glsb/glsb-confine")
    if path then break end
  end
  path = path or try(SOURCE_BUILD)
  if path then
    found = path
    return path
  end
  return nil, "glsb-confine not found (tried: " .. table.concat(tried, ", ")
    .. "); build it with `make build/glsb-confine` or set GLSB_CONFINE"
end

local cache = {} -- path -> {data, sha}

function M.read(explicit)
  local path, err = M.find(explicit)
  if not path then return nil, err end
  local c = cache[path]
  if c then return c.data, c.sha end
  local f, ferr = io.open(path, "rb")
  if not f then return nil, "cannot read the helper: " .. tostring(ferr) end
  local data = f:read("a")
  f:close()
  c = { data = data, sha = core.sha256(data) }
  cache[path] = c
  return c.data, c.sha
end

local function fail(message, cause)
  local e = errors.new(errors.WorkspaceError, Stage.WORKSPACE, message, cause)
  e.reason = "helper_unavailable"
  error(e, 0)
end

-- ensure_uploaded(sb[, opts]) -> path of glsb-confine inside sb. Through the provider's hooks:
-- sb:_upload({{filename, data, path}}, {upload_dir, timeout}) and sb:_exec_argv({"/bin/chmod", ...}).
-- Done once per sandbox and helper content (remembered on the handle). Raises WorkspaceError (reason
-- helper_unavailable) when it cannot.
function M.ensure_uploaded(sb, opts)
  opts = opts or {}
  local data, sha = M.read(opts.path)
  if not data then fail(sha) end
  local path = M.REMOTE_DIR .. "/glsb-confine-" .. sha:sub(1, 16)
  sb._confine_helpers = sb._confine_helpers or {}
  if sb._confine_helpers[path] then return path end
  if type(sb._upload) ~= "function" or type(sb._exec_argv) ~= "function" then
    fail("provider '" .. tostring(sb.provider) .. "' cannot upload the workspace helper (needs _upload and _exec_argv)")
  end
  local ok, err = pcall(sb._upload, sb, { { filename = path:match("[^/]+$"), data = data, path = path } },
    { upload_dir = M.REMOTE_DIR, timeout = opts.timeout or 120 })
  if not ok then
    if require("glsb.loop").is_cancelled(err) then error(err, 0) end
    fail("could not upload the workspace helper: " .. errors.describe(err), err)
  end
  local r = sb:_exec_argv({ "/bin/chmod", "0755", path }, { timeout = 30 })
  if type(r) ~= "table" or r.exit_code ~= 0 then
    fail("could not make the uploaded helper executable: "
      .. tostring(type(r) == "table" and (r.error or r.stderr) or r))
  end
  sb._confine_helpers[path] = true
  return path
end

return M
