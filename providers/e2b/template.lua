-- glsb.providers.e2b.template: TemplateSpec -> an E2B template, through the build system v2
-- (docs/protocols/e2b.md §4):
--
--   POST /v3/templates {name, tags, cpuCount?, memoryMB?}         -> 202 {templateID, buildID}
--   per COPY: GET /templates/{tid}/files/{filesHash}              -> 201 {present, url?, headers?}
--             PUT <url> (tar.gz, exact Content-Length) only when !present
--   POST /v2/templates/{tid}/builds/{bid} {steps, fromImage|fromTemplate, startCmd?, readyCmd?}
--   GET /templates/{tid}/builds/{bid}/status?logsOffset=N every 200 ms until ready/error and
--       no new log entries
--
-- "Same spec twice builds once": every build is tagged "glsb-<content hash>.<nonce>", a tag of its
-- own (plus "default", so the bare name and the template id mean the newest ensured content). E2B
-- assigns a build's tags when the build is *requested*, whatever becomes of it, and lists only the
-- latest assignment per tag (infra template/register_build.go, db list_template_tags.sql): a shared
-- content tag would name a failed or still running rebuild and hide the ready build before it. With
-- one tag per build, ensure() sees every build of this content (GET /templates/aliases/{name},
-- /templates/{tid}/tags), reads their statuses from the builds list (GET /templates/{tid}, 100 a page,
-- X-Next-Token), takes the newest ready one, or waits for one still building.
--
-- Builder options (glsb.template("e2b", opts)): api_key, domain, api_url (as the sandbox),
-- on_log(entry) with entry = {timestamp, level, message, step?}, progress (nil = a progress
-- line on stdout when it is a terminal; false = never), poll_interval (s, default 0.2),
-- build_timeout (s, default 3600), base_template (default "code-interpreter-v1": the code
-- interpreter lives there; give a spec base_image to start from a plain image instead).

local template = require "glsb.template"
local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local codec = require "glsb.codec"
local fs = require "glsb.fs"
local ids = require "glsb.ids"
local paging = require "glsb.paging"
local shell = require "glsb.shell"
local loop = require "glsb.loop"
local answer = require "glsb.answer"
local api = require "glsb.providers.e2b.api"

local Stage = models.Stage
local IDS = api.IDS

local M = {}

M.DEFAULT_BASE_TEMPLATE = "code-interpreter-v1"
-- The code-interpreter template starts Jupyter only through its start command and is ready when the
-- server answers (e2b-dev/code-interpreter template/template.py: "sudo systemctl start jupyter",
-- wait_for_url("http://localhost:49999/health"); its systemd unit is not enabled). A build's start or
-- ready command replaces both of the base's (infra orchestrator/pkg/template/build/phases/finalize/
-- builder.go Layer), so on that base the spec's commands are chained after them.
M.CI_START = "sudo systemctl start jupyter"
M.CI_READY = 'curl -s -o /dev/null -w "%{http_code}" http://localhost:49999/health | grep -q "200"'
M.TAG_PREFIX = "glsb-"
local HOME = "/home/user"
local UPLOAD_TIMEOUT = 3600
local LOG_TAIL = 8 -- build log lines a failure message repeats

local function fail(message, cause)
  errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, message, cause)
end

local function check(res, what)
  local e = errors.from_response(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, res, what)
  if e then error(e, 0) end
end

-- A reader of one answer of the template API: ids checked against their grammar (docs/protocols/e2b.md §6)
-- before they go into the next request's path.
local function reader(what) return answer.reader(what, errors.TemplateBuildError, Stage.TEMPLATE_BUILD) end

---------------------------------------------------------------------------
-- Spec -> build steps (pure: no I/O)
---------------------------------------------------------------------------

-- E2B template names match ^[a-z0-9-_]+$ after trimming and lower-casing; only tags may contain dots
-- (infra shared/pkg/id/id.go identifierRegex, ParseName): anything else becomes "-".
function M.e2b_name(name)
  return (name:lower():gsub("[^a-z0-9_-]", "-"))
end

-- The content tag of a spec's hash, and the tag of one build of it: "<content tag>.<nonce>" (tags
-- match ^[a-z0-9-_.]+$ and are not UUIDs).
function M.tag(hash) return M.TAG_PREFIX .. hash:sub(1, 32) end

function M.build_tag(hash)
  return M.tag(hash) .. "." .. ids.hex(8)
end

-- Does this tag name a build of that content? Its own tag, or the shared tag older builders gave.
local function content_tag(tag, hash)
  local t = M.tag(hash)
  return type(tag) == "string" and (tag == t or tag:sub(1, #t + 1) == t .. ".")
end

-- E2B's build resources (infra api/internal/team/limits.go): CPU 1..32, 1 or even; memory >= 128
-- MiB and even. -> cpuCount, memoryMB rounded up to the nearest valid values (at least what was
-- asked), or raises TemplateBuildError naming the value E2B cannot give.
function M.resources(spec)
  local cpu, mem
  if spec.cpu then
    cpu = math.max(1, math.ceil(spec.cpu))
    if cpu > 1 and cpu % 2 == 1 then cpu = cpu + 1 end
    if cpu > 32 then
      fail(string.format("E2B builds take at most 32 CPUs (the spec asks for cpu = %s)", tostring(spec.cpu)))
    end
    cpu = math.tointeger(cpu)
  end
  if spec.memory_mb then
    mem = math.max(128, math.ceil(spec.memory_mb))
    if mem % 2 == 1 then mem = mem + 1 end
    mem = math.tointeger(mem)
  end
  return cpu, mem
end

-- Absolute destination of a spec file: relative paths land below workdir (or the E2B user's
-- home), as a relative COPY destination does in a Dockerfile.
local function destination(path, workdir)
  if path:sub(1, 1) == "/" then return path end
  return (workdir or HOME):gsub("/+$", "") .. "/" .. path
end

-- files_hash(src, dest, entries) -> hex sha256 the way the E2B SDK computes a COPY's filesHash:
-- "COPY <src> <dest>", then per file (sorted by path) its relative path, st_mode and size in
-- decimal, then its contents. The server only uses it as a cache key for the uploaded archive.
function M.files_hash(src, dest, files)
  local parts = { "COPY " .. src .. " " .. dest }
  for _, f in ipairs(files) do
    parts[#parts + 1] = f.name
    parts[#parts + 1] = tostring(0x8000 | (f.mode or 420))
    parts[#parts + 1] = tostring(#f.data)
    parts[#parts + 1] = f.data
  end
  return codec.sha256(table.concat(parts))
end


local function step(type_, args, files_hash)
  return { type = type_, args = args, force = false, filesHash = files_hash }
end

-- build_plan(spec, opts) -> {body = TemplateBuildStartV2 table, uploads = {{hash, archive}}}.
-- spec is a normalized TemplateSpec. Order as a Dockerfile would have it: ENV, apt, pip, COPY,
-- RUN, WORKDIR; start/ready commands are top-level fields.
function M.build_plan(spec, opts)
  opts = opts or {}
  local steps, uploads = {}, {}
  if spec.env then
    local keys = {}
    for k in pairs(spec.env) do keys[#keys + 1] = k end
    table.sort(keys)
    local args = {}
    for _, k in ipairs(keys) do
      args[#args + 1] = k
      args[#args + 1] = spec.env[k]
    end
    steps[#steps + 1] = step("ENV", args)
  end
  if spec.apt_packages then
    steps[#steps + 1] = step("RUN", {
      "apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y "
        .. shell.join(spec.apt_packages), "root" })
  end
  if spec.packages then
    steps[#steps + 1] = step("RUN", { "pip install " .. shell.join(spec.packages), "root" })
  end
  for _, f in ipairs(spec.files or {}) do
    local dest = destination(f.path, spec.workdir)
    local src = dest:gsub("^/+", "")
    local entry = { name = src, data = f.data, mode = f.mode or 420 }
    local hash = M.files_hash(src, dest, { entry })
    steps[#steps + 1] = step("COPY", { src, dest, "", f.mode and string.format("%04o", f.mode) or "" }, hash)
    uploads[#uploads + 1] = { hash = hash, entries = { entry } }
  end
  for _, cmd in ipairs(spec.run or {}) do
    steps[#steps + 1] = step("RUN", { cmd })
  end
  if spec.workdir then steps[#steps + 1] = step("WORKDIR", { spec.workdir }) end
  local body = { steps = steps, force = false, startCmd = spec.start_cmd, readyCmd = spec.ready_cmd }
  if spec.base_image then
    body.fromImage = spec.base_image
  else
    body.fromTemplate = spec.base_template or opts.base_template or M.DEFAULT_BASE_TEMPLATE
  end
  if body.fromTemplate == M.DEFAULT_BASE_TEMPLATE and (spec.start_cmd or spec.ready_cmd) then
    -- keep the code interpreter: its start first, then the spec's; ready when both are
    body.startCmd = M.CI_START .. (spec.start_cmd and (" && (" .. spec.start_cmd .. ")") or "")
    body.readyCmd = M.CI_READY .. (spec.ready_cmd and (" && (" .. spec.ready_cmd .. ")") or "")
  end
  return { body = body, uploads = uploads }
end

---------------------------------------------------------------------------
-- The builder
---------------------------------------------------------------------------

local Template = template.TemplateBuilder:extend("e2b", {
  options = {
    provider = api.OPTIONS,
    builder = {
      poll_interval = { "positive", "seconds between build status polls", default = "0.2" },
      build_timeout = { "seconds", "seconds a build may take; `<= 0`: none", default = "3600" },
      base_template = { "string", "what a spec without base_image starts from", default = M.DEFAULT_BASE_TEMPLATE },
    },
  },
})
M.Template = Template

function Template:_init(opts)
  self._cfg = api.config(opts)
  self.poll_interval = opts.poll_interval or 0.2
  self.build_timeout = require("glsb.options").timeout(opts.build_timeout, 3600)
  self.base_template = opts.base_template
end

function Template:_api(method, path, body, timeout)
  if not self._cfg.api_key then fail("E2B needs an API key: pass api_key or set E2B_API_KEY") end
  return api.request(self._cfg, method, path, body, { timeout = timeout })
end

-- The statuses of the given builds (wanted: buildID -> anything): GET /templates/{tid} lists builds
-- newest first, 100 a page; X-Next-Token is followed until every one is seen.
-- -> { {build_id, status}, ... } newest first
function Template:_build_statuses(tid, wanted)
  local found, seen, left = {}, {}, 0
  for _ in pairs(wanted) do left = left + 1 end
  local token
  local pager = paging.new("E2B template lookup", errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
  repeat
    local path = "/templates/" .. http.segment(tid) .. "?limit=100"
    if token then path = path .. "&nextToken=" .. http.escape(token) end
    local res = self:_api("GET", path)
    check(res, "E2B template lookup failed")
    local builds = type(res.json) == "table" and type(res.json.builds) == "table" and res.json.builds or {}
    for _, b in ipairs(builds) do
      if wanted[b.buildID] and not seen[b.buildID] then
        seen[b.buildID] = true
        found[#found + 1] = { build_id = b.buildID, status = b.status }
        left = left - 1
      end
    end
    token = pager:next(api.header(res.headers, "x-next-token"), #builds)
  until left <= 0 or not token
  return found
end

-- An existing template built from exactly this content: a build with its content tag that is ready,
-- or, when none is, one still building that then succeeds. nil when there is none.
function Template:_find(spec, hash)
  local name = M.e2b_name(spec.name)
  local res = self:_api("GET", "/templates/aliases/" .. http.segment(name))
  if not res.error and (res.status == 404 or res.status == 403) then return nil end
  check(res, "E2B template lookup failed")
  local a = reader("E2B template lookup")
  local tid = a:id(a:object(a:body(res), "body").templateID, "templateID", IDS.template)
  res = self:_api("GET", "/templates/" .. http.segment(tid) .. "/tags")
  if not res.error and res.status == 404 then return nil end
  check(res, "E2B template tags lookup failed")
  local tag_of, any = {}, false
  a = reader("E2B template tags lookup")
  for i, t in ipairs(a:list(a:body(res), "body")) do
    if type(t) == "table" and content_tag(t.tag, hash) then
      tag_of[a:id(t.buildID, "[" .. i .. "].buildID", IDS.build)] = t.tag
      any = true
    end
  end
  if not any then return nil end
  local newest_ready, building
  for _, b in ipairs(self:_build_statuses(tid, tag_of)) do
    if b.status == "ready" and not newest_ready then newest_ready = b.build_id end
    if (b.status == "building" or b.status == "waiting") and not building then building = b.build_id end
  end
  if newest_ready then
    return { template_id = tid, build_id = newest_ready, name = name .. ":" .. tag_of[newest_ready] }
  end
  if building then
    -- the same content being built right now (another process's ensure): wait for it, not a second build
    local ok, err = pcall(self._wait, self, name, tid, building)
    if ok then return { template_id = tid, build_id = building, name = name .. ":" .. tag_of[building] } end
    if loop.is_cancelled(err) then error(err, 0) end
    require("glsb.log").info("E2B template: the build of the same content failed; building again",
      { template_id = tid, build_id = building })
  end
  return nil
end

-- Uploads one COPY archive unless the server already has it. Returns true when uploaded.
function Template:_upload(tid, up)
  local res = self:_api("GET", "/templates/" .. http.segment(tid) .. "/files/" .. up.hash)
  check(res, "E2B template files check failed")
  local j = res.json
  if type(j) ~= "table" then fail("E2B template files check: no JSON answer") end
  if j.present == true then return false end
  if type(j.url) ~= "string" then fail("E2B template files check: absent but no upload URL") end
  -- Exactly the headers the API returned: the URL is signed, and a V2 signature covers Content-Type
  -- (infra storage_google.go UploadSignedURL signs none). libcurl would add its own
  -- "Content-Type: application/x-www-form-urlencoded" to a body given as a string: an empty value
  -- removes it unless the API named one.
  local headers = { ["User-Agent"] = api.USER_AGENT, ["Content-Type"] = "" }
  if type(j.headers) == "table" then
    for k, v in pairs(j.headers) do
      if type(k) == "string" and k:lower() == "content-type" then headers["Content-Type"] = nil end
      headers[k] = tostring(v)
    end
  end
  -- a string body gets an exact Content-Length (object stores reject chunked uploads)
  local put = api.http(self._cfg, {
    method = "PUT", url = j.url, headers = headers,
    body = fs.tar_pack(up.entries, { gzip = true }),
    connect_timeout = api.CONNECT_TIMEOUT, timeout = UPLOAD_TIMEOUT,
  })
  check(put, "E2B template files upload failed")
  return true
end


-- The progress line's words for a log entry: the step it names out of the plan's (E2B's steps are the
-- plan's numbers, "1".."N", or a phase: "base", "finalize"), else the build's status.
local function step_status(name, total, status)
  local i = tonumber(name)
  if i and total and total > 0 then return string.format("step %d/%d", i, total) end
  if type(name) == "string" and name ~= "" then return name end
  return status
end

-- Polls the build until it is ready (returns) or failed (raises), streaming log entries. total: the
-- plan's number of steps (the progress line's counter).
function Template:_wait(name, tid, bid, total)
  local deadline = loop.deadline(self.build_timeout)
  local offset, status, last = 0, "waiting", {}
  local path = "/templates/" .. http.segment(tid) .. "/builds/" .. http.segment(bid) .. "/status?logsOffset="
  -- a glsb.template.build_step span per step the log entries name (tracing; a no-op when it is off)
  local steps <close> = require("glsb.trace").steps("glsb.template.build_step")
  while true do
    local res = self:_api("GET", path .. offset)
    check(res, "E2B build status failed")
    local j = res.json
    if type(j) ~= "table" then fail("E2B build status: no JSON answer") end
    status = type(j.status) == "string" and j.status or status
    local entries = type(j.logEntries) == "table" and j.logEntries or {}
    for _, e in ipairs(entries) do
      if type(e) == "table" then
        local at = e.step ~= http.json_null and e.step or nil
        self:_log({ timestamp = e.timestamp, level = e.level, message = e.message,
          step = at, status = step_status(at, total, status) })
        if e.step ~= nil and e.step ~= http.json_null then steps:step(e.step) end
        if type(e.message) == "string" then
          last[#last + 1] = e.message
          if #last > LOG_TAIL then table.remove(last, 1) end
        end
      end
    end
    offset = offset + #entries
    local finished = status == "ready" or status == "error"
    if #entries == 0 then self:_progress(name, status) end
    if finished and #entries == 0 then
      if status == "ready" then return end
      local reason = type(j.reason) == "table" and j.reason or {}
      local msg = type(reason.message) == "string" and reason.message or "the build failed"
      local step_ = reason.step ~= http.json_null and reason.step or nil
      local where = step_ ~= nil and (" (step " .. tostring(step_) .. ")") or ""
      -- the build's last log lines, once: what the failing step printed (pip's reason, a command's error)
      local tail = {}
      for _, line in ipairs(last) do
        if not msg:find(line, 1, true) then tail[#tail + 1] = "  " .. line end
      end
      fail(string.format("E2B build of template '%s' failed%s: %s%s", name, where, msg,
        #tail > 0 and ("\nlast build log lines:\n" .. table.concat(tail, "\n")) or ""),
        { step = reason.step, build_id = bid, template_id = tid })
    end
    if loop.expired(deadline) then
      fail(string.format("E2B build of template '%s' did not finish within %ds (build %s still %s)",
        name, self.build_timeout, bid, status))
    end
    if #entries == 0 then loop.sleep(self.poll_interval) end
  end
end

function Template:_build(spec, hash)
  local name = M.e2b_name(spec.name)
  local tag = M.build_tag(hash)
  local plan = M.build_plan(spec, { base_template = self.base_template })
  local req = { name = name, tags = { "default", tag } }
  req.cpuCount, req.memoryMB = M.resources(spec)
  local res = self:_api("POST", "/v3/templates", req)
  check(res, "E2B template create failed")
  local a = reader("E2B template create")
  local j = a:object(a:body(res), "body")
  local tid, bid = a:id(j.templateID, "templateID", IDS.template), a:id(j.buildID, "buildID", IDS.build)
  local uploaded = 0
  for _, up in ipairs(plan.uploads) do
    if self:_upload(tid, up) then uploaded = uploaded + 1 end
  end
  -- lua-cjson writes an empty table as {}; the API wants "steps": [] (a spec with no steps)
  local body = http.encode_json(plan.body):gsub('"steps":{}', '"steps":[]')
  res = api.request(self._cfg, "POST", "/v2/templates/" .. http.segment(tid) .. "/builds/" .. http.segment(bid), nil,
    { raw_body = body, content_type = "application/json" })
  check(res, "E2B build start failed")
  self:_wait(name, tid, bid, #plan.body.steps)
  return { template_id = tid, build_id = bid, name = name .. ":" .. tag, uploaded = uploaded }
end

---------------------------------------------------------------------------
-- list and delete (GET /templates, GET /templates/aliases/{name}, DELETE /templates/{id})
---------------------------------------------------------------------------

function Template:_list()
  local res = self:_api("GET", "/templates")
  check(res, "E2B template list failed")
  local out = {}
  local a = reader("E2B template list")
  for i, t in ipairs(a:list(a:body(res), "body")) do
    local f = "[" .. i .. "]"
    a:object(t, f)
    local names = a:list(t.aliases, f .. ".aliases", true) or a:list(t.names, f .. ".names", true) or {}
    if not t.public then
      out[#out + 1] = { name = names[1], names = names,
        template_id = a:id(t.templateID, f .. ".templateID", IDS.template),
        build_id = a:id(t.buildID, f .. ".buildID", IDS.build, true), status = t.buildStatus, created_at = t.createdAt,
        updated_at = t.updatedAt }
    end
  end
  table.sort(out, function(x, y) return tostring(x.name) < tostring(y.name) end)
  return out
end

-- delete(name): by name (an alias) or template id; false when there is none.
function Template:_delete(name)
  local tid = name
  local res = self:_api("GET", "/templates/aliases/" .. http.segment(M.e2b_name(name)))
  if not res.error and res.status == 200 then
    local a = reader("E2B template lookup")
    tid = a:id(a:object(a:body(res), "body").templateID, "templateID", IDS.template)
  end
  res = self:_api("DELETE", "/templates/" .. http.segment(tid))
  if not res.error and res.status == 404 then return false end
  check(res, "E2B template delete failed")
  return true
end

return M
