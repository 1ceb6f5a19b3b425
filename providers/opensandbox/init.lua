-- glsb.providers.opensandbox: the OpenSandbox sandbox adapter (a CodeInterpreterSandbox).
--
-- Reads top-down like the wire (shared/protocols/opensandbox.md), one module per plane:
--   lifecycle.lua   the lifecycle API: config, requests, errors with X-Request-ID
--   execd.lua       execd at the endpoint the lifecycle API hands out: /ping, /command, /code streams
--   files.lua       execd's file API: multipart upload, download, info, list
--   snapshot.lua    snapshots (OpenSandbox's templates): name -> id, create, wait
--   template.lua    the template builder (a snapshot per spec)
-- This file: the create options, then the hooks glsb.sandbox calls.
--
-- The base class (glsb.sandbox) owns the contract rules (argument checks, create retries of transient
-- failures, terminate retries that keep the handle, download_file's nil-on-failure); glsb.output and
-- glsb.outcome name what each run printed and how it ended.

local sandbox = require "glsb.sandbox"
local errors = require "glsb.errors"
local models = require "glsb.models"
local core = require "glsb.core"
local log = require "glsb.log"
local registry = require "glsb.registry"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"
local execd = require "glsb.providers.opensandbox.execd"
local files = require "glsb.providers.opensandbox.files"
local snapshot = require "glsb.providers.opensandbox.snapshot"

local Stage = models.Stage

local M = { name = "opensandbox" }

-- The image with execd's Jupyter behind /code, and the entrypoint that starts it.
M.DEFAULT_IMAGE = "opensandbox/code-interpreter:v1.1.0"
M.DEFAULT_ENTRYPOINT = { "/opt/code-interpreter/code-interpreter.sh" }
-- A snapshot restore without an entrypoint gets the server's ["tail", "-f", "/dev/null"]; the code
-- interpreter still has to be started.
M.DEFAULT_RESOURCES = { cpu = "1", memory = "2Gi" }
-- The lifecycle API refuses a timeout below 60 s (422): a shorter lease is created with 60 and renewed
-- down to what was asked right after.
M.MIN_TIMEOUT = 60
-- Metadata key of the token that finds a sandbox whose create answer was lost.
M.CREATE_TOKEN = "glsb-create-token"

local Sandbox = sandbox.CodeInterpreterSandbox:extend("opensandbox", {
  languages = { python = true },
})
M.Sandbox = Sandbox

-- Relative paths of the workspace primitives land in the code-interpreter image's WORKDIR.
Sandbox.workspace_root = "/workspace"

---------------------------------------------------------------------------
-- Options
---------------------------------------------------------------------------

-- The provider's options, declared once in glsb.options' form ({type, what it does, default = shown}):
-- PROVIDER for create, connect, list and the template builder; CREATE for create only.
M.PROVIDER_OPTIONS = {
  domain = { "string", "the lifecycle server, `host[:port][/prefix]` or a URL (its scheme wins over `protocol`)",
    default = "$OPEN_SANDBOX_DOMAIN or localhost:8080" },
  api_key = { "string", "sent as `OPEN-SANDBOX-API-KEY` on lifecycle calls (never to execd)",
    default = "$OPEN_SANDBOX_API_KEY" },
  protocol = { "string", "`http` or `https`, also for execd's endpoint", default = "$OPEN_SANDBOX_PROTOCOL or http" },
  use_server_proxy = { "boolean", "reach execd through the server's `/sandboxes/{id}/proxy/44772` route",
    default = "$OPEN_SANDBOX_USE_SERVER_PROXY or false" },
  request_timeout = { "positive", "seconds per lifecycle request", default = "$OPEN_SANDBOX_REQUEST_TIMEOUT or 30" },
  cainfo = { "string", "a CA bundle to check the server's certificate with" },
}
M.CREATE_OPTIONS = {
  image = { "string", "the sandbox's image (`execute_code` needs a code-interpreter image)", default = "" },
  entrypoint = { "string_list", "the sandbox's entry process", default = "" },
  resources = { "string_map", "`resourceLimits`", default = "{cpu = \"1\", memory = \"2Gi\"}" },
  network_policy = { "table", "`{default_action = \"deny\"|\"allow\", egress = {{action, target}, ...}}`" },
  ready_timeout = { "positive", "seconds to wait for execd's `/ping` after create or connect", default = "30" },
}
M.CREATE_OPTIONS.image.default = M.DEFAULT_IMAGE
M.CREATE_OPTIONS.entrypoint.default = table.concat(M.DEFAULT_ENTRYPOINT, " ")
Sandbox.options = {
  provider = M.PROVIDER_OPTIONS,
  create = M.CREATE_OPTIONS,
  connect = { ready_timeout = M.CREATE_OPTIONS.ready_timeout },
}

-- Until glsb.options checks declared options in the base class, this file checks its own (the same
-- rules: an unknown key names the closest known one, a wrong type the expected one).
local HAS_OPTIONS_MODULE = pcall(require, "glsb.options")
local BASE_OPTIONS = { timeout = "number", template = "string|table", env = "table", metadata = "table",
  retry = "boolean|table", language = "string", additional_packages = "table", package_install_timeout = "number" }
local LUA_TYPE = { string = "string", boolean = "boolean", table = "table", number = "number", positive = "number",
  seconds = "number", integer = "number", count = "number", string_map = "table", string_list = "table",
  ["function"] = "function" }

local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a:sub(i, i) == b:sub(j, j) and 0 or 1))
    end
    prev = cur
  end
  return prev[#b]
end

-- check_options(opts, level, schemas...): plain argument errors for an unknown key or a wrong type.
function M.check_options(opts, level, ...)
  local known = {}
  for _, schema in ipairs({ ... }) do
    for k, d in pairs(schema) do known[k] = type(d) == "table" and d[1] or d end
  end
  for k, v in pairs(opts) do
    local want = known[k]
    if want == nil then
      local best, bd = nil, math.huge
      for name in pairs(known) do
        local d = distance(tostring(k), name)
        if d < bd or (d == bd and name < best) then best, bd = name, d end
      end
      error(string.format("opensandbox: unknown option '%s'%s", tostring(k),
        bd <= 3 and (" (did you mean '" .. best .. "'?)") or ""), level + 1)
    end
    local ok, names = false, {}
    for t in want:gmatch("[^|]+") do
      names[#names + 1] = LUA_TYPE[t] or t
      if type(v) == (LUA_TYPE[t] or t) then ok = true end
    end
    if not ok then
      error(string.format("opensandbox: option '%s' must be a %s, got %s", k, table.concat(names, " or "), type(v)),
        level + 1)
    end
  end
end

if not HAS_OPTIONS_MODULE then
  function Sandbox._prepare_create(sopts, level)
    M.check_options(sopts, level + 1, BASE_OPTIONS, M.PROVIDER_OPTIONS, M.CREATE_OPTIONS)
    sandbox.CodeInterpreterSandbox._prepare_create(sopts, level + 1)
  end
end

local function string_map(t, what)
  if t == nil then return {} end
  local out = {}
  for k, v in pairs(t) do
    if type(k) ~= "string" then error("opensandbox: " .. what .. " keys must be strings", 4) end
    out[k] = tostring(v)
  end
  return out
end

local function network_policy(p)
  if p == nil then return nil end
  local egress = {}
  for i, r in ipairs(p.egress or {}) do
    if type(r) ~= "table" or (r.action ~= "allow" and r.action ~= "deny") or type(r.target) ~= "string" then
      error(string.format('opensandbox: network_policy.egress[%d] must be {action = "allow"|"deny", target = ...}', i),
        4)
    end
    egress[i] = { action = r.action, target = r.target }
  end
  local body = { defaultAction = p.default_action or "deny" }
  if #egress > 0 then body.egress = egress end
  return body
end

---------------------------------------------------------------------------
-- Requests
---------------------------------------------------------------------------

function Sandbox:_api(method, path, body, opts)
  return lifecycle.request(self._cfg, method, path, body, opts)
end

-- Is the sandbox still there? GET /sandboxes/{id}: 200 -> true (false when it is Terminated or
-- Failed); 404 -> false; anything else (a transport failure too) -> nil, cannot tell.
function Sandbox:_alive()
  local res = self:_api("GET", lifecycle.sandbox_path(self.sandbox_id), nil, { timeout = 5 })
  if res.error then return nil end
  if res.status == 404 then return false end
  if res.status ~= 200 then return nil end
  local state = type(res.json) == "table" and type(res.json.status) == "table" and res.json.status.state
  if state == "Terminated" or state == "Failed" then return false end
  return true
end

local function alive_fn(self)
  return function() return self:_alive() end
end

---------------------------------------------------------------------------
-- Executions
---------------------------------------------------------------------------

function Sandbox:_run_code(code, opts)
  return execd.run_code(self._conn, code, { timeout = opts.timeout, language = opts.language, env = opts.env,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, alive = alive_fn(self) })
end

function Sandbox:_run_command(command, opts)
  return execd.run_command(self._conn, command, { timeout = opts.timeout, env = opts.env, cwd = opts.cwd,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, alive = alive_fn(self) })
end

function Sandbox:_upload(list, opts)
  local entries = {}
  for i, f in ipairs(list) do entries[i] = { path = f.path, data = f.data } end
  files.upload(self._conn, entries,
    { timeout = opts.timeout, class = errors.SandboxExecutionError, stage = Stage.UPLOAD })
end

function Sandbox:_download(path, opts)
  return files.download(self._conn, path, { timeout = opts.timeout, class = errors.SandboxExecutionError,
    stage = Stage.DOWNLOAD })
end

---------------------------------------------------------------------------
-- Workspace primitives: argv through /command, exactly
---------------------------------------------------------------------------

local function octal_escapes(s)
  return (s:gsub(".", function(c) return string.format("\\%03o", c:byte()) end))
end

-- A POSIX sh word for s. UTF-8 text goes in single quotes; other bytes cannot cross execd's JSON intact,
-- so such an argument is rebuilt inside the sandbox from octal escapes by printf (a trailing "_" keeps
-- trailing newlines through the command substitution). Returns word, assignment or nil.
local function sh_word(s, i)
  if utf8.len(s) then return "'" .. s:gsub("'", "'\\''") .. "'" end
  local var = "_glsb_a" .. i
  return '"$' .. var .. '"', string.format("%s=$(printf '%s_'); %s=${%s%%_}", var, octal_escapes(s), var, var)
end

local function random_name()
  return core.sha256(string.format("%.9f:%d:%s", core.now(), math.random(0, 2 ^ 30), tostring({}))):sub(1, 24)
end

-- _exec_argv(argv, {stdin, timeout}) -> {exit_code, stdout, stderr, status, error}: argv run exactly, no
-- shell syntax of ours around it beyond quoting; stdin (bytes) is staged as a file through the upload
-- API, opened as the program's stdin and unlinked before the exec.
function Sandbox:_exec_argv(argv, opts)
  local words, pre = {}, {}
  for i, a in ipairs(argv) do
    local w, assign = sh_word(a, i)
    words[i] = w
    if assign then pre[#pre + 1] = assign end
  end
  if opts.stdin ~= nil then
    local staged = "/tmp/.glsb/stdin-" .. random_name()
    files.upload(self._conn, { { path = staged, data = opts.stdin } },
      { timeout = 120, class = errors.WorkspaceError, stage = Stage.WORKSPACE })
    pre[#pre + 1] = string.format("exec 0<'%s' || exit 127; rm -f -- '%s'", staged, staged)
  end
  pre[#pre + 1] = "exec " .. table.concat(words, " ")
  local r = execd.run_command(self._conn, table.concat(pre, "; "), { timeout = opts.timeout, alive = alive_fn(self) })
  return { exit_code = r.code, stdout = r.stdout, stderr = r.stderr, status = r.status, error = r.error }
end

---------------------------------------------------------------------------
-- Life cycle: create, set_timeout, terminate
---------------------------------------------------------------------------

-- After a create whose answer was lost: the sandbox carrying our token, if the server made it.
function Sandbox:_find_created(token)
  local q = lifecycle.query { { "metadata", lifecycle.metadata_filter { [M.CREATE_TOKEN] = token } } }
  local res = self:_api("GET", "/sandboxes", nil, { query = q, timeout = 15 })
  if res.error or res.status ~= 200 or type(res.json) ~= "table" or type(res.json.items) ~= "table" then return nil end
  local item = res.json.items[1]
  if type(item) ~= "table" or type(item.id) ~= "string" then return nil end
  log.info("OpenSandbox create: the answer was lost; adopted the sandbox it created", { sandbox_id = item.id })
  return item.id
end

function Sandbox:_create_body(opts)
  local body = {
    entrypoint = opts.entrypoint or nil,
    resourceLimits = string_map(opts.resources or M.DEFAULT_RESOURCES, "resources"),
    env = string_map(opts.env, "env"),
    metadata = string_map(opts.metadata, "metadata"),
    networkPolicy = network_policy(opts.network_policy),
    extensions = {},
    secureAccess = false,
  }
  if opts.entrypoint then
    for i, a in ipairs(opts.entrypoint) do
      if type(a) ~= "string" then error(string.format("opensandbox: entrypoint[%d] must be a string", i), 4) end
    end
  end
  local template = opts.template
  if type(template) == "table" then template = template.template_id or template.snapshot_id or template.name end
  if template then
    self.template_id = snapshot.resolve(self._cfg, template, errors.SandboxStartError, Stage.CREATE)
    body.snapshotId = self.template_id
    body.entrypoint = body.entrypoint or M.DEFAULT_ENTRYPOINT
  else
    body.image = { uri = opts.image or M.DEFAULT_IMAGE }
    body.entrypoint = body.entrypoint or M.DEFAULT_ENTRYPOINT
  end
  -- timeout nil = no expiry (manual cleanup); the server wants >= 60 s
  if opts.timeout then body.timeout = math.max(M.MIN_TIMEOUT, math.ceil(opts.timeout)) end
  return body
end

function Sandbox:_start(opts)
  self._cfg = lifecycle.config(opts)
  local body = self:_create_body(opts)
  local token = random_name():sub(1, 32)
  body.metadata[M.CREATE_TOKEN] = token
  local res = self:_api("POST", "/sandboxes", body)
  if res.error and not res.error.retry_safe then
    local id = self:_find_created(token)
    if id then
      self.sandbox_id = id
      res = nil
    end
  end
  if res then
    lifecycle.raise_if(errors.SandboxStartError, Stage.CREATE, res, "OpenSandbox create failed")
    local j = res.json
    if type(j) ~= "table" or type(j.id) ~= "string" then
      errors.raise(errors.SandboxStartError, Stage.CREATE, "OpenSandbox create: the answer has no id",
        lifecycle.failure(res))
    end
    self.sandbox_id = j.id
  end
  -- execd answers before we hand the sandbox out (the base deletes it if this fails), polled as the
  -- official SDKs do: the endpoint, then GET /ping every 200 ms up to 30 s.
  self._conn = execd.connect(self._cfg, self.sandbox_id, errors.SandboxStartError, Stage.HEALTH_CHECK)
  local ready_timeout = opts.ready_timeout or execd.READY_TIMEOUT
  local ok, why = execd.wait_ready(self._conn, ready_timeout)
  if not ok then
    errors.raise(errors.SandboxStartError, Stage.HEALTH_CHECK, string.format(
      "OpenSandbox sandbox %s: execd did not answer /ping within %gs (last: %s)", self.sandbox_id, ready_timeout,
      errors.describe(why)), { message = "readiness timed out", sandbox_id = self.sandbox_id, last = why })
  end
  if opts.timeout and opts.timeout < M.MIN_TIMEOUT then self:_set_timeout(opts.timeout) end
end

-- renew-expiration: expiresAt = now + seconds (whole seconds up, so it is never in the past).
function Sandbox:_set_timeout(seconds)
  local res = self:_api("POST", lifecycle.sandbox_path(self.sandbox_id, "/renew-expiration"),
    { expiresAt = lifecycle.iso(os.time() + math.ceil(seconds)) })
  lifecycle.raise_if(errors.SandboxExecutionError, Stage.EXECUTE, res, "OpenSandbox renew-expiration failed")
end

-- DELETE /sandboxes/{id}: 204, or 404 (already gone) both mean "not running any more".
function Sandbox:_terminate(opts)
  local res = self:_api("DELETE", lifecycle.sandbox_path(self.sandbox_id), nil, { timeout = opts.timeout })
  if not res.error and res.status == 404 then return end
  lifecycle.raise_if(errors.SandboxTerminateError, Stage.TERMINATE, res, "OpenSandbox delete failed")
end

---------------------------------------------------------------------------
-- Module
---------------------------------------------------------------------------

M.lifecycle, M.execd, M.files, M.snapshot = lifecycle, execd, files, snapshot

return registry.lazy_template(M, "glsb.providers.opensandbox.template")
