-- glsb.providers.e2b: the E2B sandbox adapter (a CodeInterpreterSandbox).
--
-- Split the way E2B's own SDK splits it, on one connection per sandbox (api.connection):
--   api.lua          where E2B lives, the control-plane request, the data-plane connection, answers
--   envd.lua         the sandbox daemon (49983): processes (Connect stream), files (REST and RPC)
--   interpreter.lua  the code interpreter (49999): POST /execute, NDJSON
--   template.lua     the template builder (build system v2)
-- This file is the control plane (POST /v2/sandboxes, POST /sandboxes/{id}/timeout, DELETE
-- /sandboxes/{id}) and the hooks glsb.sandbox calls (lua/glsb/PROVIDERS.md).
--
-- The base class (glsb.sandbox) owns the contract rules (argument checks, create retries of
-- transient failures with backoff + jitter honouring Retry-After, terminate retries that keep
-- the handle, download_file's nil-on-failure); the kit (glsb.output, glsb.outcome,
-- glsb.confine_helper) owns streaming, outcome classification and the workspace helper.

local sandbox = require "glsb.sandbox"
local options = require "glsb.options"
local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local time = require "glsb.time"
local workspace = require "glsb.workspace"
local loop = require "glsb.loop"
local log = require "glsb.log"
local registry = require "glsb.registry"
local confine_helper = require "glsb.confine_helper"
local network = require "glsb.network"
local paging = require "glsb.paging"
local answer = require "glsb.answer"
local api = require "glsb.providers.e2b.api"
local envd = require "glsb.providers.e2b.envd"
local interpreter = require "glsb.providers.e2b.interpreter"

local Stage = models.Stage
local Status = models.ExecutionStatus

local M = { name = "e2b" }

M.DEFAULT_TEMPLATE = "code-interpreter-v1"
-- Commands and files run as root unless `user` says otherwise: E2B's code interpreter runs code as root
-- (Jupyter is a systemd service without User=: e2b-dev/code-interpreter template/systemd/
-- jupyter.service) while envd's default user is the template's (`user` there), so files code writes
-- would be root's and out of reach of commands and of the workspace helper. One identity per sandbox,
-- the one code has.
M.DEFAULT_USER = "root"
M.version_at_least = envd.version_at_least

local Sandbox = sandbox.CodeInterpreterSandbox:extend("e2b", {
  languages = { python = true, javascript = true, typescript = true, r = true, java = true, bash = true },
  -- lifecycle onTimeout "pause" (the SDK's lifecycle option: autoPause in the create body)
  pause_on_timeout = true,
  options = {
    provider = api.OPTIONS, -- credentials and endpoints (api.lua); the README's tables come from these
    create = {
      network = { network.OPTION[1], "egress: `false` none, `true` open, `{allow = {...}, deny = {...}}` as "
        .. "`allowOut`/`denyOut` (names only with `deny = {\"0.0.0.0/0\"}`, as E2B requires)", default = "open" },
      user = { "string", "user for commands (`Authorization: Basic`) and files (`?username=`); root, as code runs",
        default = "root" },
      create_timeout = { "seconds", "the create request", default = "60" },
    },
    connect = {
      user = { "string", "user for commands and files", default = "the ref's" },
      create_timeout = { "seconds", "the connect request", default = "60" },
      health_timeout = { "seconds", "envd's `GET /health` when connecting with a ref's token and no API key",
        default = "30" },
    },
  },
})
M.Sandbox = Sandbox
-- refs given to connect and kill: an E2B sandbox id (docs/protocols/e2b.md §6)
Sandbox.id_grammar = api.IDS.sandbox
local IDS = api.IDS

local clean, header = api.clean, api.header

function Sandbox:_api(method, path, body, timeout)
  return api.request(self._cfg, method, path, body, { timeout = timeout })
end

---------------------------------------------------------------------------
-- Executions: code through the interpreter, commands through envd
---------------------------------------------------------------------------

function Sandbox:_run_code(code, opts)
  local o = setmetatable({ sandbox_env = self._create_env }, { __index = opts })
  return interpreter.run_code(self._conn, code, o)
end

function Sandbox:_run_command(command, opts)
  return envd.run(self._conn, { cmd = "/bin/bash", args = { "-l", "-c", command } }, opts)
end

function Sandbox:_upload(files, opts)
  -- the files share the execution's budget: each one gets what is left of it
  local deadline = sandbox.deadline(opts)
  for _, f in ipairs(files) do
    envd.write_file(self._conn, f.path, f.data, loop.remaining(deadline), Stage.UPLOAD)
  end
end

function Sandbox:_download(path, opts)
  return envd.read_file(self._conn, path, opts.timeout, Stage.DOWNLOAD)
end

---------------------------------------------------------------------------
-- Workspace primitives (glsb.workspace): glsb-confine uploaded once, exact argv through envd
---------------------------------------------------------------------------

local HELPER_DIR = confine_helper.REMOTE_DIR

local function require_running(self, what)
  if not self:is_running() then
    errors.raise(errors.SandboxNotInitializedError, Stage.NOT_INITIALIZED, what .. ": the sandbox is not running")
  end
end

-- sb:ensure_helper([local_path]) -> the helper's path inside the sandbox: this machine's static
-- glsb-confine (local_path, default glsb.confine_helper.find()) uploaded once per sandbox and content.
-- Raises WorkspaceError[workspace] when it cannot.
function Sandbox:ensure_helper(local_path)
  require_running(self, "ensure_helper")
  return sandbox.guarded(self, confine_helper.ensure_uploaded, { path = local_path })
end

-- sb:run_helper(argv, opts) -> ExecutionResult of the exact argv (no shell around it), run
-- through envd's process channel. opts: timeout (s, nil = none), stdin (string: staged as a
-- file through /files, opened as the process's stdin and unlinked before the exec).
function Sandbox:run_helper(argv, opts)
  opts = opts or {}
  if type(argv) ~= "table" or type(argv[1]) ~= "string" then
    options.arg_error("run_helper: argv must be an array of strings")
  end
  require_running(self, "run_helper")
  local deadline = sandbox.deadline(opts) -- one budget for staging stdin and running the program
  return sandbox.guarded(self, function()
    local run = argv
    if opts.stdin ~= nil then
      local ok, staged = pcall(workspace.stage_stdin, self, opts.stdin, { deadline = deadline, dir = HELPER_DIR })
      if not ok then
        if loop.is_cancelled(staged) then error(staged, 0) end
        return models.ExecutionResult.new { status = Status.ERROR, error = tostring(staged),
          failure = { exception_type = models.FailureType.UPLOAD, retry_safe = true } }
      end
      run = workspace.stdin_argv(staged, argv)
    end
    local args = {}
    for i = 2, #run do args[i - 1] = tostring(run[i]) end
    return envd.run(self._conn, { cmd = run[1], args = args }, { deadline = deadline, timeout = opts.timeout })
  end)
end

-- The workspace root is the sandbox user's home.
Sandbox.workspace_root = "/home/user"

function Sandbox:_workspace_helper()
  return self:ensure_helper()
end

function Sandbox:_exec_argv(argv, opts)
  local r = self:run_helper(argv, { stdin = opts.stdin, timeout = opts.timeout })
  return { exit_code = r.code, stdout = r.stdout, stderr = r.stderr, status = r.status, error = r.error }
end

---------------------------------------------------------------------------
-- Life cycle: create, set_timeout, terminate
---------------------------------------------------------------------------

-- t: a declared string_map (glsb.options checked it at the caller's line) -> a copy with string values,
-- nil when empty.
local function string_map(t)
  if t == nil then return nil end
  local out = {}
  for k, v in pairs(t) do out[tostring(k)] = tostring(v) end
  if next(out) == nil then return nil end
  return out
end

local CREATE_TOKEN = "glsb_create_token"

-- After a create whose answer was lost (glsb.sandbox.send_create): GET /v2/sandboxes?metadata=<token>
-- and, when the sandbox is there, its detail (GET /sandboxes/{id} carries envdAccessToken), shaped like
-- a create answer. nil when not found or when the lookup itself fails.
function Sandbox:_find_created(token)
  local q = http.escape(CREATE_TOKEN .. "=" .. token)
  local res = self:_api("GET", "/v2/sandboxes?metadata=" .. q, nil, 15)
  if res.error or res.status ~= 200 or type(res.json) ~= "table" or type(res.json[1]) ~= "table" then return nil end
  local id = res.json[1].sandboxID
  if not answer.is_id(id, IDS.sandbox) then return nil end
  local d = self:_api("GET", "/sandboxes/" .. http.segment(id), nil, 15)
  if d.error or d.status ~= 200 or type(d.json) ~= "table" then
    -- found but unusable: kill it rather than leak it
    self:_api("DELETE", "/sandboxes/" .. http.segment(id), nil, 10)
    return nil
  end
  return d
end

-- Keeps what a create or connect answer (a `Sandbox` object) says about where the sandbox lives, each
-- field checked: the id goes into URLs and headers, the domain into host names, the tokens into headers.
-- what: the call ("E2B create"), stage: its stage.
function Sandbox:_adopt(j, what, stage)
  local a = answer.reader(what or "E2B connect", errors.SandboxStartError, stage or Stage.CONNECT)
  a:object(j, "body")
  self.sandbox_id = a:id(j.sandboxID, "sandboxID", IDS.sandbox)
  self.template_id = a:id(j.templateID, "templateID", IDS.template, true)
  self.envd_version = a:string(j.envdVersion, "envdVersion", true)
  self._conn = api.connection {
    cfg = self._cfg, sandbox_id = self.sandbox_id, user = self._user, envd_version = self.envd_version,
    envd_token = a:string(j.envdAccessToken, "envdAccessToken", true),
    traffic_token = a:string(j.trafficAccessToken, "trafficAccessToken", true),
    domain = a:host(j.domain, "domain", true),
  }
end

-- A create or connect answer: a `Sandbox` object, or the failure it is (SandboxStartError[stage]).
function Sandbox:_adopt_answer(res, stage, what)
  local e = errors.from_response(errors.SandboxStartError, stage, res, what .. " failed")
  if e then error(e, 0) end
  local j = res.json
  if type(j) ~= "table" or j.sandboxID == nil then
    errors.raise(errors.SandboxStartError, stage, what .. ": the response has no sandboxID",
      errors.http_failure(res.status, res.headers, res.body))
  end
  self:_adopt(j, what, stage)
end

function Sandbox:_health_check(timeout)
  local h = self._conn:http {
    method = "GET", url = self._conn:url(api.ENVD_PORT, "/health"), headers = self._conn:headers(api.ENVD_PORT),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = options.timeout(timeout, 30) or 0, -- 0: none
  }
  local he = errors.from_response(errors.SandboxStartError, Stage.HEALTH_CHECK, h, "envd health check failed")
  if he then error(he, 0) end
end

local function configure(self, opts, stage, key_optional)
  local cfg = api.config(opts)
  self._cfg = cfg
  self._user = opts.user or M.DEFAULT_USER
  if not cfg.api_key and not key_optional then
    errors.raise(errors.SandboxStartError, stage or Stage.CREATE,
      "E2B needs an API key: pass api_key or set E2B_API_KEY")
  end
end

-- The user's metadata: what E2B keeps, without our create token.
local function user_metadata(m)
  local out = {}
  for k, v in pairs(type(m) == "table" and m or {}) do
    if k ~= CREATE_TOKEN then out[k] = v end
  end
  return out
end

-- E2B's public self-hosted infra has no POST /v2/sandboxes nor POST /v2/sandboxes/{id}/connect (infra
-- spec/openapi.yml: create is POST /sandboxes with `secure`, connect POST /sandboxes/{id}/connect with a
-- required timeout); E2B's cloud has both. The route-missing answer comes from the API's request
-- validator ("no matching operation was found" / "method not allowed"), never with a template or sandbox
-- in it. Once seen for an API URL, the legacy routes are used directly.
local legacy_routes = {}

local function route_missing(res)
  if res.error then return false end
  if res.status == 405 then return true end
  if res.status ~= 404 and res.status ~= 400 then return false end
  local m = api.body_message(res):lower()
  if m:find("no matching operation", 1, true) or m:find("method not allowed", 1, true) then return true end
  return res.status == 404 and not m:find("template", 1, true) and not m:find("sandbox", 1, true)
end

-- POST <v2 path> body, or the legacy path when the API has no v2 route. legacy(body) adjusts the body.
function Sandbox:_post_versioned(v2_path, legacy_path, body, legacy, timeout)
  local cfg = self._cfg
  if not legacy_routes[cfg.api_url] then
    local res = self:_api("POST", v2_path, body, timeout)
    if not route_missing(res) then return res end
    log.info("E2B: the API has no " .. v2_path:gsub("/[^/]+/connect$", "/{id}/connect") .. "; using the self-hosted "
      .. "routes", { api_url = cfg.api_url })
    legacy_routes[cfg.api_url] = true
  end
  return self:_api("POST", legacy_path, legacy(body), timeout)
end

-- The concurrency limit's 429 comes without Retry-After and names the limit ("you have reached the
-- maximum number of concurrent E2B sandboxes (N)...": infra api/internal/orchestrator/create_instance.go;
-- the rate limiter's 429 always sends Retry-After: api/internal/middleware/ratelimit/ratelimit.go). No
-- retry mends it until a sandbox ends: a permanent failure (code QUOTA_EXCEEDED, glsb.errors).
local function quota_exceeded(res)
  if res.error or res.status ~= 429 or header(res.headers, "retry-after") then return nil end
  local m = api.body_message(res)
  if not m:lower():find("maximum number of concurrent", 1, true) then return nil end
  return { code = "QUOTA_EXCEEDED", message = m, cause = errors.http_failure(res.status, res.headers, res.body) }
end

-- glsb.network's policy as E2B's create body (infra api/internal/handlers/sandbox_create.go): false is
-- allow_internet_access = false (every egress denied); a table is network.allowOut (addresses, CIDRs
-- and names) and network.denyOut (CIDRs); nil and true leave E2B's default (open).
local function network_body(body, value)
  if value == nil or value == true then return end
  if value == false then body.allow_internet_access = false return end
  local p = network.policy(value, "create")
  local allow = {}
  for _, c in ipairs(p.allow) do allow[#allow + 1] = c end
  for _, d in ipairs(p.allow_domains) do allow[#allow + 1] = d end
  body.network = { allowOut = #allow > 0 and allow or nil, denyOut = #p.deny > 0 and p.deny or nil }
end

-- A template ref from builder:ensure or sb:snapshot, or an id / name.
local function template_id(t)
  if type(t) == "table" then return t.template_id or t.name end
  return t
end

-- A bad `network`, or a template that is no E2B template name, is an argument error at the caller's line,
-- before anything starts.
function Sandbox._prepare_create(sopts)
  sandbox.CodeInterpreterSandbox._prepare_create(sopts)
  if type(sopts.network) == "table" then network.policy(sopts.network, "create") end
  if sopts.template ~= nil then answer.given(IDS.template, template_id(sopts.template), "create: template") end
end

function Sandbox:_start(opts)
  configure(self, opts)
  self.metadata = user_metadata(opts.metadata)
  local body = {
    templateID = template_id(opts.template) or M.DEFAULT_TEMPLATE,
    metadata = string_map(opts.metadata),
    envVars = string_map(opts.env),
  }
  network_body(body, opts.network)
  -- on_timeout = "pause": the lease's end pauses the sandbox (memory kept), connect resumes it
  if opts.on_timeout == "pause" then body.autoPause = true end
  self._create_env = body.envVars
  -- E2B has no unbounded lease; nil leaves the server default (300 s), which the base then knows.
  if opts.timeout then body.timeout = math.max(1, math.ceil(opts.timeout)) else self._lease_remaining = 300 end
  -- A create token in the metadata: a create whose answer is lost is found by it (_find_created)
  local res = sandbox.send_create(self, function(token)
    body.metadata = body.metadata or {}
    body.metadata[CREATE_TOKEN] = token
    return self:_post_versioned("/v2/sandboxes", "/sandboxes", body, function(b)
      -- the legacy create: `secure` for an envd access token, and its default lease is 15 s
      local l = {}
      for k, v in pairs(b) do l[k] = v end
      l.secure, l.allow_internet_access, l.timeout = true, true, b.timeout or 300
      return l
    end, options.timeout(opts.create_timeout, api.API_TIMEOUT) or 0) -- 0: none
  end)
  local quota = quota_exceeded(res)
  if quota then errors.raise(errors.SandboxStartError, Stage.CREATE, "E2B create failed: " .. quota.message, quota) end
  self:_adopt_answer(res, Stage.CREATE, "E2B create")
  self._born = loop.now()
  -- No envd /health round trip: E2B answers a create once the sandbox runs, and the SDK does not probe
  -- either (a first call that finds it gone reports so).
end

-- _alive() -> true | false | nil: envd's /health (the SDK's probe; see api.connection).
function Sandbox:_alive() return self._conn:alive() end

-- The shortest plan's cap on a sandbox's whole life (1 h Hobby; 24 h Pro). E2B never moves the end
-- of a sandbox past its start + the plan's cap and answers 204 all the same (infra orchestrator/
-- keep_alive.go getMaxAllowedTTL): when the new end could pass the shortest cap, the granted end is
-- read back (GET /sandboxes/{id} endAt) so the lease clock ends where E2B will end it.
M.SHORTEST_LIFETIME_CAP = 3600

function Sandbox:_set_timeout(seconds)
  local res = self:_api("POST", "/sandboxes/" .. http.segment(self.sandbox_id) .. "/timeout",
    { timeout = math.max(1, math.ceil(seconds)) })
  local e = errors.from_response(errors.SandboxExecutionError, Stage.SET_TIMEOUT, res, "E2B set_timeout failed")
  if e then error(e, 0) end
  local age = self._born and (loop.now() - self._born) or math.huge
  if age + seconds <= M.SHORTEST_LIFETIME_CAP then return nil end
  local _, left = self:_detail()
  return left
end

-- POST /sandboxes/{id}/pause: E2B snapshots the VM with its memory (infra handlers/sandbox_pause.go);
-- connect resumes it. 409: it is paused already (the same outcome).
function Sandbox:_pause()
  local res = self:_api("POST", "/sandboxes/" .. http.segment(self.sandbox_id) .. "/pause", {})
  if not res.error and res.status == 409 then return end
  local e = errors.from_response(errors.SandboxExecutionError, Stage.PAUSE, res, "E2B pause failed")
  if e then error(e, 0) end
end

-- POST /sandboxes/{id}/snapshots {name?} -> {snapshotID, names} (handlers/snapshot_template_create.go): a
-- template, "<namespace>/<name>:<tag>" or "<templateID>:default", that create starts sandboxes from.
function Sandbox:_snapshot(opts)
  local res = self:_api("POST", "/sandboxes/" .. http.segment(self.sandbox_id) .. "/snapshots",
    opts.name and { name = opts.name } or {})
  local e = errors.from_response(errors.SandboxExecutionError, Stage.SNAPSHOT, res, "E2B snapshot failed")
  if e then error(e, 0) end
  -- the snapshot id is the template later creates name: one of E2B's template names, or refused
  local a = answer.reader("E2B snapshot", errors.SandboxExecutionError, Stage.SNAPSHOT)
  local j = a:object(a:body(res), "body")
  local names = a:list(j.names, "names", true)
  return { template_id = a:id(j.snapshotID, "snapshotID", IDS.template),
    name = names and a:id(names[1], "names[1]", IDS.template, true) or nil }
end

-- Code contexts of the code interpreter (POST /contexts, DELETE /contexts/{id}).
function Sandbox:_context_create(spec)
  return interpreter.create_context(self._conn, spec)
end

function Sandbox:_context_close(ctx)
  interpreter.close_context(self._conn, ctx)
end

---------------------------------------------------------------------------
-- Handles that outlive a process: ref, connect (POST /v2/sandboxes/{id}/connect), list
---------------------------------------------------------------------------

-- GET /sandboxes/{id}: SandboxDetail (state, startedAt, endAt, metadata, cpuCount, memoryMB, ...).
-- -> detail, seconds left in its lease, its age in seconds (both by the server's own Date header)
--    | nil, error
function Sandbox:_detail(timeout)
  local res = self:_api("GET", "/sandboxes/" .. http.segment(self.sandbox_id), nil, timeout or 15)
  local e = errors.from_response(errors.SandboxExecutionError, Stage.INFO, res, "E2B sandbox info failed")
  if e then return nil, e end
  local j = res.json
  if type(j) ~= "table" then return nil, "E2B sandbox info: no JSON answer" end
  local ends, server_now = time.parse_iso(clean(j.endAt)), time.parse_http_date(header(res.headers, "date"))
  local started = time.parse_iso(clean(j.startedAt))
  return j, (ends and server_now) and math.max(0, ends - server_now) or nil,
    (started and server_now) and math.max(0, server_now - started) or nil
end

function Sandbox:_ref(opts)
  local cfg = self._cfg
  local r = { template_id = self.template_id, api_url = cfg.api_url, domain = self._conn.domain or cfg.domain,
    sandbox_url = cfg.sandbox_url, envd_version = self.envd_version, user = self._user }
  if opts.secrets then
    -- the data plane's tokens: enough to run code without the API key (connect with no api_key)
    r.envd_access_token = self._conn.envd_token
    r.traffic_access_token = self._conn.traffic_token
  end
  return r
end

-- connect: the control plane's POST /v2/sandboxes/{id}/connect (running: extends the lease to at least
-- opts.timeout; paused: resumes it) answers like a create, with the envd token. A ref made with
-- secrets = true can also reach the data plane with no API key (no lease change then).
function Sandbox:_attach(ref, opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for _, k in ipairs({ "api_url", "domain", "sandbox_url", "user" }) do
    if o[k] == nil then o[k] = ref[k] end
  end
  configure(self, o, Stage.CONNECT, ref.envd_access_token ~= nil)
  self.metadata = {}
  local id = ref.sandbox_id
  if not self._cfg.api_key then
    self:_adopt({ sandboxID = id, templateID = ref.template_id, envdVersion = ref.envd_version,
      envdAccessToken = ref.envd_access_token, trafficAccessToken = ref.traffic_access_token, domain = ref.domain })
    self:_health_check(opts.health_timeout)
    return
  end
  local body = {}
  if opts.timeout then body.timeout = math.max(1, math.ceil(opts.timeout)) end
  local res = self:_post_versioned("/v2/sandboxes/" .. http.segment(id) .. "/connect",
    "/sandboxes/" .. http.segment(id) .. "/connect", body, function(b)
      -- the legacy connect requires a timeout; 0 leaves the lease as it is (it is only ever extended)
      return { timeout = b.timeout or 0 }
    end, options.timeout(opts.create_timeout, api.API_TIMEOUT) or 0) -- 0: none
  if not res.error and res.status == 404 then
    error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, Stage.CONNECT, string.format(
      "E2B connect: no sandbox '%s' (it has ended, or it belongs to another team)", id),
      errors.http_failure(res.status, res.headers, res.body))), 0)
  end
  self:_adopt_answer(res, Stage.CONNECT, "E2B connect")
  local detail, left, age = self:_detail()
  if detail then
    self.metadata = user_metadata(clean(detail.metadata))
    self._lease_remaining = left
    self._born = age and loop.now() - age or nil
  end
end

local function list_query(opts)
  local q = {}
  if opts.metadata and next(opts.metadata) then
    local pairs_ = {}
    for k, v in pairs(opts.metadata) do pairs_[#pairs_ + 1] = http.escape(k) .. "=" .. http.escape(v) end
    table.sort(pairs_)
    q[#q + 1] = "metadata=" .. http.escape(table.concat(pairs_, "&"))
  end
  local state = opts.state or { "running", "paused" }
  if type(state) == "string" then state = { state } end
  q[#q + 1] = "state=" .. http.escape(table.concat(state, ","))
  return q
end

-- list: GET /v2/sandboxes?metadata=&state=&limit=&nextToken=, page by page (X-Next-Token) up to limit.
function Sandbox._list(_cls, opts)
  local cfg = api.config(opts)
  if not cfg.api_key then
    errors.raise(errors.SandboxStartError, Stage.LIST, "E2B needs an API key: pass api_key or set E2B_API_KEY")
  end
  local limit = opts.limit
  local refs, token = {}, nil
  local pager = paging.new("E2B list", errors.SandboxStartError, Stage.LIST)
  repeat
    local q = list_query(opts)
    q[#q + 1] = "limit=" .. tostring(math.min(100, limit and (limit - #refs) or 100))
    if token then q[#q + 1] = "nextToken=" .. http.escape(token) end
    local res = api.request(cfg, "GET", "/v2/sandboxes?" .. table.concat(q, "&"))
    local e = errors.from_response(errors.SandboxStartError, Stage.LIST, res, "E2B list failed")
    if e then error(e, 0) end
    -- ListedSandbox objects (infra spec/openapi.yml), each field checked before use
    local a = answer.reader("E2B list", errors.SandboxStartError, Stage.LIST)
    local page = a:list(a:body(res), "body")
    for i, s in ipairs(page) do
      local f = "[" .. i .. "]"
      a:object(s, f)
      refs[#refs + 1] = { sandbox_id = a:id(s.sandboxID, f .. ".sandboxID", IDS.sandbox),
        template_id = a:id(s.templateID, f .. ".templateID", IDS.template, true),
        state = a:string(s.state, f .. ".state", true),
        metadata = user_metadata(a:object(s.metadata, f .. ".metadata", true)),
        started_at = a:string(s.startedAt, f .. ".startedAt", true), ends_at = a:string(s.endAt, f .. ".endAt", true),
        api_url = cfg.api_url, domain = cfg.domain, sandbox_url = cfg.sandbox_url }
    end
    token = pager:next(header(res.headers, "x-next-token"), #page)
  until not token or (limit and #refs >= limit)
  return refs
end

-- glsb.kill: DELETE /sandboxes/{id} straight away (a connect first would resume a paused sandbox only to
-- kill it); 404 is no such sandbox (glsb.kill's SandboxStartError[connect]).
function Sandbox._kill(_cls, ref, opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  for _, k in ipairs({ "api_url", "domain", "sandbox_url" }) do
    if o[k] == nil then o[k] = ref[k] end
  end
  local cfg = api.config(o)
  if not cfg.api_key then
    errors.raise(errors.SandboxStartError, Stage.CONNECT, "E2B needs an API key: pass api_key or set E2B_API_KEY")
  end
  local res = api.request(cfg, "DELETE", "/sandboxes/" .. http.segment(ref.sandbox_id), nil,
    { timeout = options.timeout(opts.timeout, 10) or 0 }) -- 0: none
  if not res.error and res.status == 404 then
    error(errors.no_such_sandbox(errors.new(errors.SandboxStartError, Stage.CONNECT, string.format(
      "E2B kill: no sandbox '%s' (it has ended, or it belongs to another team)", ref.sandbox_id),
      errors.http_failure(res.status, res.headers, res.body))), 0)
  end
  local e = errors.from_response(errors.SandboxTerminateError, Stage.TERMINATE, res, "E2B kill failed")
  if e then error(e, 0) end
end

-- DELETE /sandboxes/{id}: 204, or 404 (already gone) both mean "not running any more".
function Sandbox:_terminate(opts)
  local res = self:_api("DELETE", "/sandboxes/" .. http.segment(self.sandbox_id), nil, opts.timeout or 0) -- 0: none
  if not res.error and res.status == 404 then return end
  local e = errors.from_response(errors.SandboxTerminateError, Stage.TERMINATE, res, "E2B kill failed")
  if e then error(e, 0) end
end

---------------------------------------------------------------------------
-- sb.files, background commands, ports, info (glsb.files, sb:start_command, sb:get_host, sb:info)
---------------------------------------------------------------------------

function Sandbox:_files_write(path, data, opts)
  envd.write_file(self._conn, path, data, opts.timeout, Stage.FILES, opts.on_progress)
end
function Sandbox:_files_read(path, opts)
  return envd.read_file(self._conn, path, opts.timeout, Stage.FILES, opts.on_progress)
end
function Sandbox:_files_list(path, opts) return envd.list_dir(self._conn, path, 1, opts.timeout) end
function Sandbox:_files_exists(path, opts) return envd.stat(self._conn, path, opts.timeout) ~= nil end
function Sandbox:_files_make_dir(path, opts) return envd.make_dir(self._conn, path, opts.timeout) end
function Sandbox:_files_remove(path, opts) envd.remove(self._conn, path, opts.timeout) end

function Sandbox:_start_command(command, opts)
  return envd.start(self._conn, { cmd = "/bin/bash", args = { "-l", "-c", command } }, opts)
end

-- The SDK's getHost(port): "<port>-<sandboxID>.<domain>", E2B's edge proxy routes it to that port.
function Sandbox:_get_host(port)
  return string.format("%d-%s.%s", port, self.sandbox_id, self._conn.domain or self._cfg.domain)
end

-- GET /sandboxes/{id}: the control plane's view; its sizes and the lease left by E2B's clock under
-- info().e2b.
function Sandbox:_info()
  local d, left = self:_detail()
  if not d then error(left, 0) end
  local metadata = user_metadata(clean(d.metadata))
  self.metadata = metadata
  return { server_state = clean(d.state), started_at = clean(d.startedAt), ends_at = clean(d.endAt),
    metadata = metadata, template_id = clean(d.templateID),
    extra = { cpu_count = clean(d.cpuCount), memory_mb = clean(d.memoryMB), disk_size_mb = clean(d.diskSizeMB),
      lease_seconds_left = left } }
end

---------------------------------------------------------------------------
-- Module
---------------------------------------------------------------------------

-- M.Template is the template builder (glsb.providers.e2b.template), loaded on first use.
return registry.lazy_template(M, "glsb.providers.e2b.template")
