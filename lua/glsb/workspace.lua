-- workspace.lua: write_workspace_file and run_workspace_command, one bounded contract on every provider.
--
-- The checks that matter are not done here: they run inside the sandbox, in `glsb-confine write` and
-- `glsb-confine run` (openat2 RESOLVE_BENEATH, Landlock before the mutation, exact argv, capped capture),
-- so a provider only has to run one exact argv in its sandbox. This module validates arguments, builds
-- that argv, hands it to the provider and turns the helper's one JSON object into a result or a
-- WorkspaceError naming the helper's reason code.
--
-- Provider hooks (see PROVIDERS.md):
--   Sandbox:_exec_argv(argv, {stdin = bytes|nil, timeout = seconds|nil, max_output = bytes})
--       REQUIRED: run argv exactly (no shell) inside the sandbox; return {exit_code, stdout, stderr}
--       with exact bytes. Raise on transport failure. timeout bounds the whole call (a provider that
--       cannot finish by then raises); max_output is what the helper's answer can need per stream (a
--       provider may keep no more).
--   Sandbox:_workspace_helper() -> path of glsb-confine inside the sandbox
--       optional: the default (glsb.confine_helper.ensure_uploaded) uploads this machine's static
--       glsb-confine once through _upload and makes it executable through _exec_argv.
--   Sandbox.workspace_root = "/home/user"   optional class field
local errors = require "glsb.errors"
local models = require "glsb.models"
local sandbox_mod = require "glsb.sandbox"
local trace_seam = require "glsb.trace.seam"
local options = require "glsb.options"

local Stage = models.Stage

local M = {}

M.DEFAULT_MAX_BYTES = 16 * 1024 * 1024
M.DEFAULT_TIMEOUT = 30
-- write_workspace_file's deadline for the whole write (the channel included), seconds.
M.DEFAULT_WRITE_TIMEOUT = 60
M.DEFAULT_MAX_OUTPUT = 1024 * 1024
-- The largest max_output_bytes: the helper answers with both streams in base64 inside one JSON line
-- (4/3 of each), which the host holds whole: 64 MiB per stream is a 171 MiB answer.
M.MAX_OUTPUT = 64 * 1024 * 1024
-- Beyond the command's own timeout: the helper's 2 s drain of escaped descendants, plus the channel.
local CHANNEL_GRACE = 15

-- The most the helper's JSON answer can be for max_output bytes per stream (base64 of both, plus the
-- fixed fields): what the channel must carry, and need not carry more of.
local function answer_bound(max_output)
  return 2 * (4 * ((max_output + 2) // 3)) + 64 * 1024
end


local function workspace_error(message, reason, cause)
  local e = errors.new(errors.WorkspaceError, Stage.WORKSPACE, message, cause)
  e.reason = reason
  return e
end

local function check_sandbox(sb, what)
  if type(sb) ~= "table" or type(sb.is_running) ~= "function" then
    options.arg_error("%s: the first argument must be a sandbox", what)
  end
  -- the base's words for why (not started, terminated, its lease expired, gone), as for every method
  sandbox_mod.require_running(sb, what)
  if type(sb._exec_argv) ~= "function" then
    errors.raise(errors.WorkspaceError, Stage.WORKSPACE,
      ("%s: provider '%s' cannot run the workspace helper (no _exec_argv hook)"):format(what, tostring(sb.provider)))
  end
end

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

-- Path of glsb-confine inside the sandbox: the provider's, or this machine's uploaded once through the
-- provider's _upload and _exec_argv (glsb.confine_helper), cached on the handle.
local function helper_path(sb)
  if sb._workspace_helper_path then return sb._workspace_helper_path end
  local path
  if type(sb._workspace_helper) == "function" then
    path = sb:_workspace_helper()
  else
    path = require("glsb.confine_helper").ensure_uploaded(sb)
  end
  sb._workspace_helper_path = path
  return path
end

---------------------------------------------------------------------------
-- For providers: stdin through a staged file (their channel carries an argv but no stdin)
---------------------------------------------------------------------------

-- Where a staged stdin goes inside the sandbox (a file per call, unlinked before the program runs).
M.STAGING_DIR = "/tmp/.glsb"

-- stage_stdin(sb, data[, {deadline | timeout, dir}]) -> path: data uploaded through sb:_upload (within the
-- call's own deadline or timeout, which the program's run then shares; nil for none) to a fresh name
-- (dir, default STAGING_DIR, then "/stdin-" and 24 random hex digits), for _exec_argv to open as the
-- program's stdin and unlink (stdin_argv does both). Raises WorkspaceError[workspace] when the upload
-- fails: then nothing ran.
function M.stage_stdin(sb, data, opts)
  opts = opts or {}
  local dir = opts.dir or M.STAGING_DIR
  local name = "stdin-" .. require("glsb.ids").hex(24)
  local path = dir .. "/" .. name
  local ok, err = pcall(sb._upload, sb, { { filename = name, data = data, path = path } },
    { upload_dir = dir, deadline = opts.deadline,
      timeout = opts.deadline and require("glsb.loop").remaining(opts.deadline) or opts.timeout })
  if ok then return path end
  if require("glsb.loop").is_cancelled(err) then error(err, 0) end
  error(workspace_error("staging stdin failed (nothing ran): " .. errors.describe(err), "channel", err), 0)
end

-- sh opens the staged file as stdin and unlinks it; argv reaches the program through "$@" untouched.
-- `command exec`: a redirection that fails on the special built-in exec makes a POSIX sh exit at once
-- (status 2, dash), before `|| exit 127` could say "not run"; `command` takes that property away.
local STDIN_SCRIPT = 'f=$1; shift; command exec 0<"$f" || exit 127; rm -f -- "$f"; exec "$@"'

-- stdin_argv(path, argv) -> the argv that runs argv exactly with the file at path (from stage_stdin) as
-- its stdin, the file unlinked before argv[1] starts (exit 127 when it cannot be opened).
function M.stdin_argv(path, argv)
  return { "/bin/sh", "-c", STDIN_SCRIPT, "glsb-stdin", path, table.unpack(argv) }
end

-- Runs the helper and decodes its one JSON object; raises WorkspaceError when it refused.
local function call_helper(sb, argv, opts)
  local r = sb:_exec_argv(argv, opts)
  local cjson = require "cjson.safe"
  local doc = type(r) == "table" and type(r.stdout) == "string" and cjson.decode(r.stdout:match("[^\n]*"))
  if type(doc) ~= "table" then
    error(workspace_error(("the workspace helper gave no result (exit %s%s): %s"):format(
      tostring(r and r.exit_code), r and r.status and (", " .. tostring(r.status)) or "",
      tostring(r and (r.error or r.stderr) or ""):sub(1, 500)), "helper_failed"), 0)
  end
  if doc.ok ~= true then
    local code = type(doc.error) == "string" and doc.error or "helper_failed"
    error(workspace_error(("%s: %s"):format(code, tostring(doc.message or code)), code), 0)
  end
  return doc
end

-- Guarded like every sandbox method: a cancelled caller terminates the sandbox; anything that is not
-- already a glsb error becomes a WorkspaceError with its cause kept.
local function run_guarded(sb, fn, ...)
  local res = table.pack(pcall(sandbox_mod.guarded, sb, fn, ...))
  if res[1] then return table.unpack(res, 2, res.n) end
  local err = res[2]
  local loop = require "glsb.loop"
  if loop.is_cancelled(err) or errors.is_error(err) then error(err, 0) end
  error(workspace_error("workspace helper channel failed: " .. errors.describe(err), "channel", err), 0)
end

-- Tracing's choke point (glsb.trace): a span per workspace operation when tracing is on (one field read
-- when it is off).
local function traced(name, sb, fn, ...)
  if trace_seam.on then return trace_seam.operation(name, sb, nil, fn, ...) end
  return fn(...)
end

-- The declared request/options (glsb.options: an unknown key or a wrong type is an argument error at the
-- caller's line; README.md's tables are generated from these).
M.OPTIONS = {
  write_workspace_file = {
    relative_path = { "string", "where, below the workspace root (no `..`, no absolute path, no symlink)",
      required = true },
    data = { "string", "the bytes to write", required = true },
    max_bytes = { "integer", "refuse more than this", min = 0, default = "16777216" },
    overwrite = { "boolean", "replace an existing file (never silently)", default = "false" },
    timeout = { "seconds", "a far side that stops reading ends the write; `<= 0`: none", default = "60" },
  },
  run_workspace_command = {
    cwd_components = { "string_list", "working directory, as path components below the workspace root" },
    env = { "string_map", "environment variables (nothing else is inherited)" },
    env_allowlist = { "string_list", "names of the sandbox's own variables to pass on" },
    timeout = { "seconds", "the whole process group is killed after it; `<= 0`: none", default = "30" },
    max_output_bytes = { "integer", "per stream; more is counted, not kept", min = 0, max = M.MAX_OUTPUT,
      default = "1048576" },
  },
}

-- write_workspace_file(sandbox, {relative_path, data, max_bytes, overwrite, timeout}) -> {bytes, path, replaced}
-- timeout: seconds for the whole write (default 60, <= 0 none): a far side that stops reading cannot
-- hold the call until the lease ends.
function M.write_workspace_file(sb, req)
  -- types, ranges and the two required fields: the declaration (M.OPTIONS) says them, glsb.options checks
  options.check(req, M.OPTIONS.write_workspace_file, "write_workspace_file")
  check_sandbox(sb, "write_workspace_file")
  local path, data = req.relative_path, req.data
  local max_bytes = math.tointeger(req.max_bytes == nil and M.DEFAULT_MAX_BYTES or req.max_bytes)
  local timeout = options.timeout(req.timeout, M.DEFAULT_WRITE_TIMEOUT)
  return traced("glsb.workspace.write", sb, run_guarded, sb, function(self)
    local argv = { helper_path(self), "write", "--root", self.workspace_root or "/home/user",
                   "--path-hex", hex(path), "--max-bytes", tostring(max_bytes) }
    if not req.overwrite then argv[#argv + 1] = "--no-overwrite" end
    -- At most max_bytes + 1: enough for the helper to see the cap exceeded, never an unbounded push.
    local doc = call_helper(self, argv, { stdin = data:sub(1, max_bytes + 1), timeout = timeout,
      max_output = answer_bound(0) })
    return { bytes = math.tointeger(doc.bytes) or doc.bytes, path = doc.path, replaced = doc.replaced == true }
  end)
end

local function string_array(t, what)
  if type(t) ~= "table" then options.arg_error("%s must be an array of strings", what) end
  for i = 1, #t do
    if type(t[i]) ~= "string" then options.arg_error("%s[%d] must be a string", what, i) end
  end
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > #t then
      options.arg_error("%s must be an array (no other keys)", what)
    end
  end
  return t
end

-- run_workspace_command(sandbox, argv, opts) -> result table (docs/contract.md §9)
function M.run_workspace_command(sb, argv, opts)
  options.check(opts, M.OPTIONS.run_workspace_command, "run_workspace_command")
  check_sandbox(sb, "run_workspace_command")
  string_array(argv, "run_workspace_command: argv")
  if #argv == 0 then options.arg_error("run_workspace_command: argv must not be empty") end
  opts = opts or {}
  local cwd = string_array(opts.cwd_components or {}, "run_workspace_command: cwd_components")
  local allow = string_array(opts.env_allowlist or {}, "run_workspace_command: env_allowlist")
  local env = opts.env or {}
  local env_keys = {}
  for k, v in pairs(env) do
    if type(k) ~= "string" or k == "" or k:find("[=%z]") or type(v) ~= "string" then
      options.arg_error("run_workspace_command: env must map names (no '=') to strings")
    end
    env_keys[#env_keys + 1] = k
  end
  table.sort(env_keys)
  local timeout = options.timeout(opts.timeout, M.DEFAULT_TIMEOUT)
  local max_output = math.tointeger(opts.max_output_bytes == nil and M.DEFAULT_MAX_OUTPUT or opts.max_output_bytes)

  return traced("glsb.workspace.run", sb, run_guarded, sb, function(self)
    local full = { helper_path(self), "run", "--root", self.workspace_root or "/home/user",
                   "--timeout", timeout and tostring(timeout) or "0", "--max-output", tostring(max_output) }
    for _, c in ipairs(cwd) do full[#full + 1] = "--cwd" full[#full + 1] = c end
    for _, k in ipairs(env_keys) do full[#full + 1] = "--env" full[#full + 1] = k .. "=" .. env[k] end
    for _, name in ipairs(allow) do full[#full + 1] = "--env-allow" full[#full + 1] = name end
    full[#full + 1] = "--"
    for _, a in ipairs(argv) do full[#full + 1] = a end
    local doc = call_helper(self, full, { timeout = timeout and timeout + CHANNEL_GRACE or nil,
      max_output = answer_bound(max_output) })
    local core = require "glsb.core"
    local cjson = require "cjson.safe"
    -- lua-cjson decodes every number as a float: counts and codes are integers.
    local function num(v) return v ~= cjson.null and v ~= nil and math.tointeger(v) or nil end
    return {
      exit_code = num(doc.exit_code), signal = num(doc.signal), timed_out = doc.timed_out == true,
      stdout = core.b64decode(doc.stdout or "") or "", stderr = core.b64decode(doc.stderr or "") or "",
      stdout_byte_count = num(doc.stdout_byte_count), stderr_byte_count = num(doc.stderr_byte_count),
      stdout_byte_count_complete = doc.stdout_byte_count_complete ~= false,
      stderr_byte_count_complete = doc.stderr_byte_count_complete ~= false,
      stdout_truncated = doc.stdout_truncated == true, stderr_truncated = doc.stderr_truncated == true,
    }
  end)
end

return M
