-- glsb.providers.opensandbox: the OpenSandbox sandbox adapter (a CodeInterpreterSandbox).
--
-- Reads top-down like the wire (docs/protocols/opensandbox.md), one module per plane:
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
local options = require "glsb.options"
local loop = require "glsb.loop"
local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local time = require "glsb.time"
local shell = require "glsb.shell"
local workspace = require "glsb.workspace"
local registry = require "glsb.registry"
local lifecycle = require "glsb.providers.opensandbox.lifecycle"
local IDS = lifecycle.IDS
local execd = require "glsb.providers.opensandbox.execd"
local files = require "glsb.providers.opensandbox.files"
local snapshot = require "glsb.providers.opensandbox.snapshot"
local network = require "glsb.network"
local paging = require "glsb.paging"
local answer = require "glsb.answer"

local Stage = models.Stage

local M = { name = "opensandbox" }

-- The image with execd's Jupyter behind /code, and the entrypoint that starts it.
M.DEFAULT_IMAGE = lifecycle.CODE_IMAGE
M.DEFAULT_ENTRYPOINT = { "/opt/code-interpreter/code-interpreter.sh" }
-- A snapshot restore without an entrypoint gets the server's ["tail", "-f", "/dev/null"]; the code
-- interpreter still has to be started.
M.DEFAULT_RESOURCES = { cpu = "1", memory = "2Gi" }
-- The lifecycle API refuses a timeout below 60 s (422): a shorter lease is created with 60 and renewed
-- down to what was asked right after.
M.MIN_TIMEOUT = 60
-- Metadata key of the token that finds a sandbox whose create answer was lost.
M.CREATE_TOKEN = "glsb-create-token"
-- Sandboxes per page of glsb.list (the lifecycle API takes pageSize 1..200,
-- docs/protocols/opensandbox.md §1.2); a spec sets it lower to cross pages with a few sandboxes.
M.LIST_PAGE_SIZE = 200

-- The code-interpreter image's kernels (sandboxes/code-interpreter/README.md: ipykernel, tslab for
-- javascript and typescript, bash_kernel, IJava, gonb); a server whose image lacks one answers "no
-- kernel specs found", which reaches the caller as the call's error.
local Sandbox = sandbox.CodeInterpreterSandbox:extend("opensandbox", {
  languages = { python = true, javascript = true, typescript = true, bash = true, java = true, go = true },
  pause_on_timeout_unsupported = "OpenSandbox deletes a sandbox when its lease ends (pause it with sb:pause() before)",
})
M.Sandbox = Sandbox
-- refs given to connect and kill: an OpenSandbox sandbox id, a UUID (docs/protocols/opensandbox.md §6)
Sandbox.id_grammar = lifecycle.IDS.sandbox

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
  protocol = { "string", "`http` or `https`, also for execd's endpoint", values = { "http", "https" },
    default = "$OPEN_SANDBOX_PROTOCOL or http" },
  use_server_proxy = { "boolean", "reach execd through the server's `/sandboxes/{id}/proxy/44772` route",
    default = "$OPEN_SANDBOX_USE_SERVER_PROXY or false" },
  request_timeout = { "seconds", "seconds per lifecycle request; `<= 0`: none",
    default = "$OPEN_SANDBOX_REQUEST_TIMEOUT or 30" },
  cainfo = { "string", "a CA bundle to check the server's certificate with" },
}
M.CREATE_OPTIONS = {
  image = { "string", "the sandbox's image (`execute_code` needs a code-interpreter image)", default = "" },
  entrypoint = { "string_list", "the sandbox's entry process", default = "" },
  resources = { "string_map", "`resourceLimits`", default = "{cpu = \"1\", memory = \"2Gi\"}" },
  network_policy = { "table", "`{default_action = \"deny\"|\"allow\", egress = {{action, target}, ...}}`" },
  network = { network.OPTION[1], "egress: `false` none, `true` open, `{allow = {...}, deny = {...}}` as a "
    .. "`networkPolicy` (default deny when `deny` has `0.0.0.0/0`); not with `network_policy`", default = "open" },
  volumes = { "table", "the API's `volumes` (`{{name, host = {path} or pvc = {claimName}, mountPath, readOnly, "
    .. "subPath}, ...}`), passed as they are" },
  ready_timeout = { "seconds", "seconds to wait for execd's `/ping` after create or connect; `<= 0`: none",
    default = "30" },
}
M.CREATE_OPTIONS.image.default = M.DEFAULT_IMAGE
M.CREATE_OPTIONS.entrypoint.default = table.concat(M.DEFAULT_ENTRYPOINT, " ")
Sandbox.options = {
  provider = M.PROVIDER_OPTIONS,
  create = M.CREATE_OPTIONS,
  connect = { ready_timeout = M.CREATE_OPTIONS.ready_timeout },
}

-- t: a declared string_map (glsb.options checked its keys and values) -> a copy with string values.
local function string_map(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = tostring(v) end
  return out
end

local function network_policy(p)
  if p == nil then return nil end
  local egress = {}
  for i, r in ipairs(p.egress or {}) do
    if type(r) ~= "table" or (r.action ~= "allow" and r.action ~= "deny") or type(r.target) ~= "string" then
      options.arg_error('create: option \'network_policy\': egress[%d] must be {action = "allow"|"deny", target = ...}',
        i)
    end
    egress[i] = { action = r.action, target = r.target }
  end
  local body = { defaultAction = p.default_action or "deny" }
  if #egress > 0 then body.egress = egress end
  return body
end

-- glsb.network's policy as a networkPolicy (specs/sandbox-lifecycle.yml NetworkPolicy, the egress
-- sidecar's rules: domains, IPs and CIDRs): false denies everything, a table allows its `allow` entries
-- and denies its `deny` ones, by default allowing unless `deny` holds 0.0.0.0/0 (then deny is the
-- default and that rule goes). nil and true: no policy (open).
local function network_as_policy(value)
  if value == nil or value == true then return nil end
  if value == false then return { defaultAction = "deny" } end
  local p = network.policy(value, "create")
  local egress, deny_all = {}, false
  for _, t in ipairs(p.allow) do egress[#egress + 1] = { action = "allow", target = t:gsub("/32$", "") } end
  for _, t in ipairs(p.allow_domains) do egress[#egress + 1] = { action = "allow", target = t } end
  for _, t in ipairs(p.deny) do
    if t == "0.0.0.0/0" then deny_all = true
    else egress[#egress + 1] = { action = "deny", target = t:gsub("/32$", "") } end
  end
  return { defaultAction = deny_all and "deny" or "allow", egress = #egress > 0 and egress or nil }
end

local function check_volumes(v)
  if v == nil then return end
  for i, x in ipairs(v) do
    if type(x) ~= "table" then options.arg_error("create: option 'volumes': volumes[%d] must be a table", i) end
  end
  if #v == 0 and next(v) ~= nil then options.arg_error("create: option 'volumes' must be an array of volumes") end
end

-- What the declarations cannot say, checked before anything starts (an argument error at the caller's
-- line, as every misuse): the shape of network_policy's rules, network, volumes.
function Sandbox._prepare_create(sopts)
  sandbox.CodeInterpreterSandbox._prepare_create(sopts)
  network_policy(sopts.network_policy)
  if sopts.network ~= nil and sopts.network_policy ~= nil then
    options.arg_error("create: give either 'network' or 'network_policy', not both")
  end
  network_as_policy(sopts.network)
  check_volumes(sopts.volumes)
end

---------------------------------------------------------------------------
-- Requests
---------------------------------------------------------------------------

-- The user's metadata: the create token is ours.
local function user_metadata(m)
  local out = {}
  for k, v in pairs(type(m) == "table" and m or {}) do
    if k ~= M.CREATE_TOKEN then out[k] = v end
  end
  return out
end

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
  return execd.run_code(self._conn, code, { deadline = sandbox.deadline(opts), timeout = opts.timeout,
    language = opts.language, env = opts.env, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr,
    alive = alive_fn(self), context = opts.context })
end

-- Code contexts: execd's POST /code/context and DELETE /code/contexts/{id}.
function Sandbox:_context_create(spec)
  return execd.create_context(self._conn, spec)
end

function Sandbox:_context_close(ctx)
  execd.close_context(self._conn, ctx)
end

function Sandbox:_run_command(command, opts)
  return execd.run_command(self._conn, command, { deadline = sandbox.deadline(opts), timeout = opts.timeout,
    env = opts.env, cwd = opts.cwd, on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, alive = alive_fn(self) })
end

function Sandbox:_upload(list, opts)
  local entries = {}
  for i, f in ipairs(list) do entries[i] = { path = f.path, data = f.data } end
  -- one request for all the files, with what is left of the execution's budget
  files.upload(self._conn, entries,
    { timeout = loop.remaining(sandbox.deadline(opts)), class = errors.SandboxExecutionError, stage = Stage.UPLOAD })
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

-- A POSIX sh word for s. UTF-8 text is quoted (glsb.shell); other bytes cannot cross execd's JSON intact,
-- so such an argument is rebuilt inside the sandbox from octal escapes by printf (a trailing "_" keeps
-- trailing newlines through the command substitution). Returns word, assignment or nil.
local function sh_word(s, i)
  if utf8.len(s) then return shell.quote(s) end
  local var = "_glsb_a" .. i
  return '"$' .. var .. '"', string.format("%s=$(printf '%s_'); %s=${%s%%_}", var, octal_escapes(s), var, var)
end

-- _exec_argv(argv, {stdin, timeout}) -> {exit_code, stdout, stderr, status, error}: argv run exactly, no
-- shell syntax of ours around it beyond quoting; stdin (bytes) is staged as a file through the upload
-- API (glsb.workspace.stage_stdin), opened as the program's stdin and unlinked before the exec.
function Sandbox:_exec_argv(argv, opts)
  local deadline = sandbox.deadline(opts) -- one budget for staging stdin and running argv
  if opts.stdin ~= nil then
    argv = workspace.stdin_argv(workspace.stage_stdin(self, opts.stdin, { deadline = deadline }), argv)
  end
  local words, pre = {}, {}
  for i, a in ipairs(argv) do
    local w, assign = sh_word(a, i)
    words[i] = w
    if assign then pre[#pre + 1] = assign end
  end
  pre[#pre + 1] = "exec " .. table.concat(words, " ")
  local r = execd.run_command(self._conn, table.concat(pre, "; "), { deadline = deadline, timeout = opts.timeout,
    alive = alive_fn(self) })
  return { exit_code = r.code, stdout = r.stdout, stderr = r.stderr, status = r.status, error = r.error }
end

---------------------------------------------------------------------------
-- Life cycle: create, set_timeout, terminate
---------------------------------------------------------------------------

-- After a create whose answer was lost (glsb.sandbox.send_create): the sandbox carrying our token, if
-- the server made it, as a create answer ({id = ...}).
function Sandbox:_find_created(token)
  local q = lifecycle.query { { "metadata", lifecycle.metadata_filter { [M.CREATE_TOKEN] = token } } }
  local res = self:_api("GET", "/sandboxes", nil, { query = q, timeout = 15 })
  if res.error or res.status ~= 200 or type(res.json) ~= "table" or type(res.json.items) ~= "table" then return nil end
  local item = res.json.items[1]
  if type(item) ~= "table" or not answer.is_id(item.id, IDS.sandbox) then return nil end
  return { status = 200, headers = res.headers, json = { id = item.id } }
end

function Sandbox:_create_body(opts)
  local body = {
    entrypoint = opts.entrypoint or nil,
    resourceLimits = string_map(opts.resources or M.DEFAULT_RESOURCES),
    env = string_map(opts.env),
    metadata = string_map(opts.metadata),
    networkPolicy = network_policy(opts.network_policy) or network_as_policy(opts.network),
    volumes = opts.volumes,
    extensions = {},
    secureAccess = false,
  }
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

-- execd answers before we hand the sandbox out (the base deletes it if this fails), polled as the
-- official SDKs do: the endpoint, then GET /ping every 200 ms up to 30 s.
function Sandbox:_ready(ready_timeout)
  self._conn = execd.connect(self._cfg, self.sandbox_id, errors.SandboxStartError, Stage.HEALTH_CHECK)
  ready_timeout = options.timeout(ready_timeout, execd.READY_TIMEOUT)
  local ok, why = execd.wait_ready(self._conn, ready_timeout)
  if not ok then
    errors.raise(errors.SandboxStartError, Stage.HEALTH_CHECK, string.format(
      "OpenSandbox sandbox %s: execd did not answer /ping within %gs (last: %s)", self.sandbox_id, ready_timeout or 0,
      errors.describe(why)), { message = "readiness timed out", sandbox_id = self.sandbox_id, last = why })
  end
end

function Sandbox:_start(opts)
  self._cfg = lifecycle.config(opts)
  local body = self:_create_body(opts)
  -- A create token in the metadata: a create whose answer is lost is found by it (_find_created)
  local res = sandbox.send_create(self, function(token)
    body.metadata[M.CREATE_TOKEN] = token
    return self:_api("POST", "/sandboxes", body)
  end)
  lifecycle.raise_if(errors.SandboxStartError, Stage.CREATE, res, "OpenSandbox create failed")
  local j = res.json
  if type(j) ~= "table" or j.id == nil then
    errors.raise(errors.SandboxStartError, Stage.CREATE, "OpenSandbox create: the answer has no id",
      lifecycle.failure(res))
  end
  -- the id goes into every later URL: one in the grammar of OpenSandbox's ids, or the create is refused
  self.sandbox_id = answer.reader("OpenSandbox create", errors.SandboxStartError, Stage.CREATE):id(j.id, "id",
    IDS.sandbox)
  self:_ready(opts.ready_timeout)
  if opts.timeout and opts.timeout < M.MIN_TIMEOUT then self:_set_timeout(opts.timeout) end
end

-- renew-expiration: expiresAt = now + seconds, to the millisecond.
function Sandbox:_set_timeout(seconds)
  local res = self:_api("POST", lifecycle.sandbox_path(self.sandbox_id, "/renew-expiration"),
    { expiresAt = lifecycle.expires_in(seconds) })
  lifecycle.raise_if(errors.SandboxExecutionError, Stage.SET_TIMEOUT, res, "OpenSandbox renew-expiration failed")
end

-- POST /sandboxes/{id}/pause (202): `docker pause` on the Docker runtime (the cgroup freezer: processes
-- and the kernels' state kept); connect resumes it (POST /resume).
function Sandbox:_pause()
  local res = self:_api("POST", lifecycle.sandbox_path(self.sandbox_id, "/pause"))
  lifecycle.raise_if(errors.SandboxExecutionError, Stage.PAUSE, res, "OpenSandbox pause failed")
end

-- POST /sandboxes/{id}/snapshots, then until it is Ready: a snapshot create starts from (snapshotId).
M.SNAPSHOT_TIMEOUT = 600
function Sandbox:_snapshot(opts)
  local snap = snapshot.create(self._cfg, self.sandbox_id, opts.name, errors.SandboxExecutionError, Stage.SNAPSHOT)
  local ready = snapshot.wait_ready(self._cfg, snap.id, M.SNAPSHOT_TIMEOUT, errors.SandboxExecutionError,
    Stage.SNAPSHOT)
  return { template_id = ready.id, name = type(ready.name) == "string" and ready.name or nil }
end

-- DELETE /sandboxes/{id}: 204, or 404 (already gone) both mean "not running any more".
-- glsb.kill: DELETE /sandboxes/{id} straight away (connect resumes a paused sandbox: not to kill it);
-- 404 is no such sandbox (glsb.kill's SandboxStartError[connect]).
function Sandbox._kill(_cls, ref, opts)
  local cfg = lifecycle.config(opts)
  local res = lifecycle.request(cfg, "DELETE", lifecycle.sandbox_path(ref.sandbox_id), nil,
    { timeout = options.timeout(opts.timeout, 10) or 0 }) -- 0: none
  if not res.error and res.status == 404 then
    error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, Stage.CONNECT,
      string.format("OpenSandbox kill: no sandbox '%s'", ref.sandbox_id), lifecycle.failure(res))), 0)
  end
  lifecycle.raise_if(errors.SandboxTerminateError, Stage.TERMINATE, res, "OpenSandbox delete failed")
end

function Sandbox:_terminate(opts)
  local res = self:_api("DELETE", lifecycle.sandbox_path(self.sandbox_id), nil, { timeout = opts.timeout or 0 })
  if not res.error and res.status == 404 then return end
  lifecycle.raise_if(errors.SandboxTerminateError, Stage.TERMINATE, res, "OpenSandbox delete failed")
end

---------------------------------------------------------------------------
-- Handles that outlive a process: ref, connect, list
---------------------------------------------------------------------------

-- sb:ref(): what connect needs besides the id (no key: credentials come from connect's options or
-- the environment).
function Sandbox:_ref(_opts)
  local pub = lifecycle.public(self._cfg)
  return { domain = pub.domain, use_server_proxy = pub.use_server_proxy, template_id = self.template_id }
end

-- Seconds left in a lease, by the server's clock: expiresAt against the answer's Date header.
local function lease_left(res)
  local j = res.json
  local ends = type(j) == "table" and time.parse_iso(j.expiresAt)
  if not ends then return nil end
  local now = time.parse_http_date(res.headers and res.headers.date) or time.wall()
  return math.max(0, ends - now)
end

-- connect: GET /sandboxes/{id} (404: gone); a Paused sandbox is resumed (POST /resume), as the SDK's
-- Sandbox.resume does; then the endpoint and /ping as after create. opts.timeout renews the lease.
function Sandbox:_attach(ref, opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.domain == nil then o.domain = ref.domain end
  if o.use_server_proxy == nil then o.use_server_proxy = ref.use_server_proxy end
  self._cfg = lifecycle.config(o)
  local id = ref.sandbox_id
  local res = self:_api("GET", lifecycle.sandbox_path(id))
  if not res.error and res.status == 404 then
    local e = lifecycle.check(errors.SandboxStartError, Stage.CONNECT, res,
      string.format("OpenSandbox connect: no sandbox '%s' (it was deleted or expired)", id))
    error(errors.no_such_sandbox(e), 0)
  end
  lifecycle.raise_if(errors.SandboxStartError, Stage.CONNECT, res, "OpenSandbox connect failed")
  local j = type(res.json) == "table" and res.json or {}
  local state = type(j.status) == "table" and j.status.state or nil
  if state == "Terminated" or state == "Failed" or state == "Stopping" then
    errors.raise(errors.SandboxStartError, Stage.CONNECT,
      string.format("OpenSandbox connect: sandbox '%s' is %s", id, tostring(state)))
  end
  self.sandbox_id = id
  self.template_id = answer.reader("OpenSandbox connect", errors.SandboxStartError, Stage.CONNECT):id(j.snapshotId,
    "snapshotId", IDS.snapshot, true)
  self.metadata = user_metadata(j.metadata)
  if state == "Paused" then
    local r = self:_api("POST", lifecycle.sandbox_path(id, "/resume"))
    lifecycle.raise_if(errors.SandboxStartError, Stage.CONNECT, r, "OpenSandbox resume failed")
  end
  self._lease_remaining = lease_left(res)
  self:_ready(opts.ready_timeout)
  if opts.timeout then
    self:_set_timeout(opts.timeout)
    self._lease_remaining = opts.timeout
  end
end

local STATES = { running = "Running", paused = "Paused", pending = "Pending" }

-- list: GET /sandboxes?state=Running&state=Paused&metadata=k%3Dv&page=N&pageSize=200, every page (an
-- empty page ends it too, whatever hasNextPage says: a server that keeps saying yes cannot loop us).
function Sandbox._list(_cls, opts)
  local cfg = lifecycle.config(opts)
  local q = {}
  local states = opts.state or { "running", "paused" }
  if type(states) == "string" then states = { states } end
  for _, s in ipairs(states) do q[#q + 1] = { "state", STATES[s:lower()] or s } end
  if opts.metadata and next(opts.metadata) then
    q[#q + 1] = { "metadata", lifecycle.metadata_filter(opts.metadata) }
  end
  local refs, page = {}, 1
  local pub = lifecycle.public(cfg)
  local pager = paging.new("OpenSandbox list", errors.SandboxStartError, Stage.LIST)
  while true do
    local pq = { table.unpack(q) }
    pq[#pq + 1] = { "page", tostring(page) }
    pq[#pq + 1] = { "pageSize", tostring(M.LIST_PAGE_SIZE) }
    local res = lifecycle.request(cfg, "GET", "/sandboxes", nil, { query = lifecycle.query(pq) })
    lifecycle.raise_if(errors.SandboxStartError, Stage.LIST, res, "OpenSandbox list failed")
    -- ListSandboxesResponse {items: [Sandbox], pagination} (docs/protocols/opensandbox.md §1.2), checked
    local a = answer.reader("OpenSandbox list", errors.SandboxStartError, Stage.LIST)
    local j = a:object(a:body(res), "body")
    local items = a:list(j.items, "items")
    for i, s in ipairs(items) do
      local f = "items[" .. i .. "]"
      a:object(s, f)
      local status = a:object(s.status, f .. ".status", true)
      local image = a:object(s.image, f .. ".image", true)
      refs[#refs + 1] = { sandbox_id = a:id(s.id, f .. ".id", IDS.sandbox),
        state = status and a:string(status.state, f .. ".status.state", true),
        metadata = user_metadata(a:object(s.metadata, f .. ".metadata", true)),
        started_at = a:string(s.createdAt, f .. ".createdAt", true),
        ends_at = a:string(s.expiresAt, f .. ".expiresAt", true),
        template_id = a:id(s.snapshotId, f .. ".snapshotId", IDS.snapshot, true),
        domain = pub.domain, use_server_proxy = pub.use_server_proxy,
        extra = { image = image and a:string(image.uri, f .. ".image.uri", true) } }
      if opts.limit and #refs >= opts.limit then return refs end
    end
    local p = a:object(j.pagination, "pagination", true) or {}
    if not pager:more(p.hasNextPage, #items) then return refs end
    page = page + 1
  end
end

---------------------------------------------------------------------------
-- Background commands, ports, files, info
---------------------------------------------------------------------------

-- start_command: the same /command stream, read by a task; kill() is DELETE /command?id=.
function Sandbox:_start_command(command, opts)
  return execd.start_command(self._conn, command, { timeout = opts.timeout, env = opts.env, cwd = opts.cwd,
    on_stdout = opts.on_stdout, on_stderr = opts.on_stderr, alive = alive_fn(self) })
end

-- sb:get_endpoint(port) -> {endpoint = "host[:port][/path]", headers = {...}}: where that port of the
-- sandbox is reached (GET /sandboxes/{id}/endpoints/{port}); every header must go on every request.
function Sandbox:get_endpoint(port, use_server_proxy)
  return sandbox.guarded(self, function()
    local proxy = use_server_proxy
    if proxy == nil then proxy = self._cfg.use_server_proxy end
    return execd.endpoint(self._cfg, self.sandbox_id, port, proxy, errors.SandboxExecutionError, Stage.GET_HOST)
  end)
end

-- get_host(port): the endpoint when it needs no header; a gateway that routes by header does not fit in
-- one string, so then the server proxy's route, which needs none.
function Sandbox:_get_host(port)
  local ep = execd.endpoint(self._cfg, self.sandbox_id, port, self._cfg.use_server_proxy,
    errors.SandboxExecutionError, Stage.GET_HOST)
  if ep.headers and next(ep.headers) then
    ep = execd.endpoint(self._cfg, self.sandbox_id, port, true, errors.SandboxExecutionError, Stage.GET_HOST)
  end
  return ep.endpoint
end

local function fopts(opts)
  return { timeout = opts and opts.timeout, class = errors.SandboxExecutionError, stage = Stage.FILES,
    on_progress = opts and opts.on_progress }
end

function Sandbox:_files_write(path, data, opts)
  files.upload(self._conn, { { path = path, data = data } }, fopts(opts))
end

function Sandbox:_files_read(path, opts)
  return files.download(self._conn, path, fopts(opts))
end

local TYPES = { file = "file", directory = "dir", symlink = "symlink" }

function Sandbox:_files_list(path, opts)
  local out = {}
  for _, f in ipairs(files.list(self._conn, path, fopts(opts))) do
    local p = f.path
    out[#out + 1] = { name = p:match("[^/]*$"), path = p, type = TYPES[f.type] or "other", size = f.size }
  end
  table.sort(out, function(x, y) return x.name < y.name end)
  return out
end

function Sandbox:_files_exists(path, opts)
  return files.info(self._conn, path, fopts(opts)) ~= nil
end

function Sandbox:_files_make_dir(path, opts)
  if files.info(self._conn, path, fopts(opts)) ~= nil then return false end
  files.mkdir(self._conn, path, fopts(opts))
  return true
end

function Sandbox:_files_remove(path, opts)
  files.remove_all(self._conn, path, fopts(opts))
end

-- info(): what the lifecycle API says (GET /sandboxes/{id}).
function Sandbox:_info()
  local res = self:_api("GET", lifecycle.sandbox_path(self.sandbox_id))
  lifecycle.raise_if(errors.SandboxExecutionError, Stage.INFO, res, "OpenSandbox sandbox info failed")
  local j = type(res.json) == "table" and res.json or {}
  local st = type(j.status) == "table" and j.status or {}
  return { server_state = st.state, template_id = j.snapshotId ~= http.json_null and j.snapshotId or nil,
    started_at = j.createdAt, ends_at = j.expiresAt, metadata = user_metadata(j.metadata),
    extra = { server_reason = st.reason, image = type(j.image) == "table" and j.image.uri or nil,
      entrypoint = j.entrypoint } }
end

---------------------------------------------------------------------------
-- Module
---------------------------------------------------------------------------

M.lifecycle, M.execd, M.files, M.snapshot = lifecycle, execd, files, snapshot

return registry.lazy_template(M, "glsb.providers.opensandbox.template")
