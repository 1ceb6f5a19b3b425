-- glsb.providers.bedrock.template: templates on AgentCore are custom code interpreters.
--
-- AgentCore has no image build: a custom interpreter fixes the network mode and the execution role
-- (CreateCodeInterpreter, docs/protocols/bedrock.md §2), and sandboxes created from it install
-- the spec's packages at start (their list travels in the ref, and in the interpreter's description
-- for glsb.create(..., {template = "<id>"})). The interpreter's name ends with the first 12 hex
-- digits of the spec's content hash and its description holds the whole hash, so the same spec
-- twice creates one interpreter.
--   spec.provider: network_mode ("PUBLIC" default: packages come from PyPI; "SANDBOX", "VPC"),
--   execution_role_arn, vpc_config ({security_groups, subnets}), description (kept for humans).
-- Fields AgentCore cannot honour (base_image, base_template, apt_packages, files, run, env, workdir,
-- start_cmd, ready_cmd, cpu, memory_mb) are refused by name.
local template = require "glsb.template"
local errors = require "glsb.errors"
local models = require "glsb.models"
local http = require "glsb.http"
local loop = require "glsb.loop"
local log = require "glsb.log"
local api = require "glsb.providers.bedrock.api"
local ids = require "glsb.ids"
local paging = require "glsb.paging"
local answer = require "glsb.answer"

local Stage = models.Stage

local M = {}

M.BUILD_TIMEOUT = 900       -- seconds to wait for CREATING to end
M.POLL_FIRST = 0.2
M.POLL_MAX = 5

local Template = template.TemplateBuilder:extend("bedrock", {
  -- declared once (glsb.options): the provider's (credentials, endpoints) and the builder's own
  options = {
    provider = api.OPTIONS,
    builder = {
      build_timeout = { "seconds", "seconds until the interpreter is READY; `<= 0`: none", default = "900" },
      sleep = { "function", "the pause between status polls (tests)", default = "glsb.sleep" },
    },
  },
})
M.Template = Template

local UNSUPPORTED = { "base_image", "base_template", "apt_packages", "files", "run", "env", "workdir", "start_cmd",
  "ready_cmd", "cpu", "memory_mb" }

local function fail(message, cause)
  errors.raise(errors.TemplateBuildError, Stage.TEMPLATE_BUILD, message, cause)
end

local function call(self, method, path, o)
  local ok, res = pcall(api.call, self.cfg, "control", method, path, o)
  if ok then return res end
  if loop.is_cancelled(res) or errors.is_error(res) then error(res, 0) end
  return nil, res
end

function Template:_init(opts)
  opts = opts or {}
  local cfg, err = api.config(opts)
  if not cfg then require("glsb.options").arg_error("bedrock template: %s", err) end
  self.cfg = cfg
  self.build_timeout = require("glsb.options").timeout(opts.build_timeout, M.BUILD_TIMEOUT)
  self.sleep = opts.sleep or loop.sleep
end

-- The interpreter name for a spec: [a-zA-Z][a-zA-Z0-9_]{0,47} (control model).
function M.interpreter_name(spec, hash)
  local base = tostring(spec.name):gsub("[^%w_]", "_"):sub(1, 30)
  return "glsb_" .. base .. "_" .. hash:sub(1, 12)
end

local function description(spec, hash)
  local d = http.encode_json { glsb = "template-v1", hash = hash, packages = spec.packages or {},
    note = spec.provider and spec.provider.description or nil }
  if #d > 4096 then
    fail("bedrock template: the package list is too long for an interpreter description (4096 bytes)")
  end
  return d
end

local function check_spec(spec)
  for _, k in ipairs(UNSUPPORTED) do
    if spec[k] ~= nil then
      fail(("bedrock template: '%s' is not supported: an AgentCore custom code interpreter has no image to build "
        .. "(supported: name, packages, provider.network_mode/execution_role_arn/vpc_config)"):format(k))
    end
  end
  local p = spec.provider or {}
  for k in pairs(p) do
    if k ~= "network_mode" and k ~= "execution_role_arn" and k ~= "vpc_config" and k ~= "description" then
      fail("bedrock template: unknown provider option '" .. tostring(k) .. "'")
    end
  end
end

-- All custom interpreters (ListCodeInterpreters, every page).
function Template:_summaries()
  local out, token = {}, nil
  local pager = paging.new("bedrock template: ListCodeInterpreters", errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
  repeat
    local q = { { "maxResults", "100" }, { "type", "CUSTOM" } }
    if token then q[#q + 1] = { "nextToken", token } end
    local j, err = call(self, "POST", "/code-interpreters", { query = q })
    if not j then fail("bedrock template: ListCodeInterpreters failed: " .. errors.describe(err), err) end
    local page = type(j.codeInterpreterSummaries) == "table" and j.codeInterpreterSummaries or {}
    -- each id goes into the next request's path: a code interpreter id (docs/protocols/bedrock.md §7)
    local a = answer.reader("bedrock template: ListCodeInterpreters", errors.TemplateBuildError, Stage.TEMPLATE_BUILD)
    for i, s in ipairs(page) do
      local f = "codeInterpreterSummaries[" .. i .. "]"
      a:id(a:object(s, f).codeInterpreterId, f .. ".codeInterpreterId", api.IDS.interpreter_id)
      out[#out + 1] = s
    end
    token = pager:next(j.nextToken, #page)
  until not token
  return out
end

-- Polls GetCodeInterpreter until the status leaves `from` -> the detail, or nil when it is gone.
function Template:_wait(id, from)
  local deadline = loop.deadline(self.build_timeout)
  local pause = M.POLL_FIRST
  while true do
    local j, err = call(self, "GET", "/code-interpreters/" .. http.segment(id))
    if not j then
      if type(err) == "table" and err.http_status == 404 then return nil end
      fail("bedrock template: GetCodeInterpreter " .. id .. " failed: " .. errors.describe(err), err)
    end
    if j.status ~= from then return j end
    if loop.expired(deadline) then
      fail(("bedrock template: %s is still %s after %gs"):format(id, from, self.build_timeout))
    end
    self.sleep(pause)
    pause = math.min(pause * 2, M.POLL_MAX)
  end
end

local function ref_of(detail, spec)
  return { template_id = detail.codeInterpreterId, arn = detail.codeInterpreterArn, name = detail.name,
    packages = spec.packages or {} }
end

function Template:_remove(id)
  local _, err = call(self, "DELETE", "/code-interpreters/" .. http.segment(id),
    { query = { { "clientToken", ids.uuid() } } })
  if err and not (type(err) == "table" and err.http_status == 404) then
    fail("bedrock template: DeleteCodeInterpreter " .. id .. " failed: " .. errors.describe(err), err)
  end
  self:_wait(id, "DELETING")
end

-- An interpreter built from the same content (its name ends with the hash). One still CREATING is
-- waited for; a failed one is deleted so that it can be built again.
function Template:_find(spec, hash)
  check_spec(spec)
  local suffix = "_" .. hash:sub(1, 12)
  for _, s in ipairs(self:_summaries()) do
    if type(s.name) == "string" and s.name:sub(-#suffix) == suffix then
      local d = s
      if d.status == "CREATING" then d = self:_wait(s.codeInterpreterId, "CREATING") end
      if d and d.status == "READY" then return ref_of(d, spec) end
      if d and (d.status == "CREATE_FAILED" or d.status == "DELETE_FAILED") then
        log.info("bedrock template: rebuilding " .. tostring(s.codeInterpreterId) .. " (" .. tostring(d.status) .. ")")
        self:_remove(s.codeInterpreterId)
      elseif d and d.status == "DELETING" then
        self:_wait(s.codeInterpreterId, "DELETING")
      end
    end
  end
  return nil
end

function Template:_build(spec, hash)
  check_spec(spec)
  local p = spec.provider or {}
  local network = { networkMode = p.network_mode or "PUBLIC" }
  if p.vpc_config then
    network.vpcConfig = { securityGroups = p.vpc_config.security_groups, subnets = p.vpc_config.subnets }
  end
  local body = { name = M.interpreter_name(spec, hash), networkConfiguration = network,
    executionRoleArn = p.execution_role_arn, description = description(spec, hash),
    -- one token for this build, whatever retries follow: the service creates it once
    clientToken = ids.uuid() }
  local j, err = call(self, "PUT", "/code-interpreters", { json = body })
  if not j then
    if type(err) == "table" and err.aws_error == "ConflictException" then
      -- built meanwhile by someone else with the same content
      local found = self:_find(spec, hash)
      if found then return found end
    end
    fail("bedrock template: CreateCodeInterpreter failed: " .. errors.describe(err), err)
  end
  if j.codeInterpreterId == nil then fail("bedrock template: CreateCodeInterpreter answered no codeInterpreterId") end
  local id = answer.reader("bedrock template: CreateCodeInterpreter", errors.TemplateBuildError,
    Stage.TEMPLATE_BUILD):id(j.codeInterpreterId, "codeInterpreterId", api.IDS.interpreter_id)
  local d = j.status == "READY" and j or self:_wait(id, "CREATING")
  if not d then fail("bedrock template: " .. id .. " disappeared while it was being created") end
  if d.status ~= "READY" then
    fail(("bedrock template: %s is %s: %s"):format(id, tostring(d.status),
      tostring(d.failureReason or "no reason given")),
      { aws_status = d.status, failure_reason = d.failureReason })
  end
  d.codeInterpreterId = d.codeInterpreterId or id
  return ref_of(d, spec)
end

-- builder:list(): the custom interpreters glsb built (their description says so), with their hash.
function Template:_list()
  local out = {}
  for _, d in ipairs(self:_summaries()) do
    local ok, j = pcall(http.decode_json, d.description or "")
    if ok and type(j) == "table" and j.glsb == "template-v1" then
      out[#out + 1] = { name = d.name, template_id = d.codeInterpreterId, hash = j.hash, status = d.status,
        packages = j.packages, arn = d.codeInterpreterArn }
    end
  end
  return out
end

-- builder:delete(name): a template id, or an interpreter's name; waits until it is gone. -> true, or
-- false when there is no such template.
function Template:_delete(name)
  for _, d in ipairs(self:_summaries()) do
    if d.codeInterpreterId == name or d.name == name then
      self:_remove(d.codeInterpreterId)
      return true
    end
  end
  return false
end

return M
