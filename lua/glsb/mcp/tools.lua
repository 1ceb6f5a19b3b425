-- glsb.mcp.tools: the server's tools (docs/protocols/mcp.md §3, §4), each a thin call of the public glsb
-- API: its arguments declared once as glsb.options declarations (checked by glsb.options, and turned into
-- the tool's inputSchema here), its result shaped by glsb.mcp.present. The list is fixed for a server's
-- life and always in the same order (clients cache prompts on it).
--
--   local t = require("glsb.mcp.tools").build(cfg)   -- cfg: glsb.mcp.config's (providers, timeouts, limits)
--   t.listed -> what tools/list gives, in order        t.by_name[name] -> a tool
--   local args, why = tools.check(tool, arguments)      -- nil, why: the message for the model
--   tool.run(session, args, ctx) -> a CallToolResult   -- ctx: progress(msg), stdout(line), stderr(line)
local glsb = require "glsb"
local options = require "glsb.options"
local errors = require "glsb.errors"
local loop = require "glsb.loop"
local codec = require "glsb.codec"
local files = require "glsb.files"
local json = require "glsb.mcp.json"
local present = require "glsb.mcp.present"
local redact = require "glsb.trace.redact"

local M = {}

local arr = json.array

---------------------------------------------------------------------------------------------------
-- declarations -> JSON Schema (2020-12, the MCP default dialect)

local STRING_LIST = { type = "string" }

local KIND = {
  string = function() return { type = "string" } end,
  boolean = function() return { type = "boolean" } end,
  number = function() return { type = "number" } end,
  seconds = function() return { type = "number" } end,
  positive = function() return { type = "number", exclusiveMinimum = 0 } end,
  integer = function() return { type = "integer" } end,
  count = function() return { type = "integer", minimum = 1 } end,
  string_map = function() return { type = "object", additionalProperties = { type = "string" } } end,
  string_list = function() return { type = "array", items = STRING_LIST } end,
  table = function() return { type = "object" } end,
}

local function property(decl)
  local s = decl.schema
  if not s then
    local alts = {}
    for kind in decl[1]:gmatch("[^|]+") do alts[#alts + 1] = KIND[kind]() end
    s = #alts == 1 and alts[1] or { anyOf = arr(alts) }
  end
  s.description = decl[2]
  if decl.values then s.enum = arr(decl.values) end
  if decl.min then s.minimum = decl.min end
  if decl.max then s.maximum = decl.max end
  return s
end

local function input_schema(args)
  local props, required = {}, {}
  for name, decl in pairs(args) do
    props[name] = property(decl)
    if decl.required then required[#required + 1] = name end
  end
  table.sort(required)
  return { type = "object", properties = props, required = #required > 0 and arr(required) or nil,
    additionalProperties = false }
end

---------------------------------------------------------------------------------------------------
-- shared pieces of the schemas

local SANDBOX_ID = { "string", "a sandbox_id returned by sandbox_create", required = true }

local RUN_OUTPUT = {
  type = "object",
  properties = {
    sandbox_id = { type = "string" },
    run = { type = "integer", description = "this sandbox's run number (names its resources)" },
    status = { type = "string", enum = arr { "success", "error", "timeout", "unknown" } },
    exit_code = { type = "integer" },
    duration_ms = { type = "number" },
    stdout_truncated = { type = "boolean", description = "past glsb's cap of 10 MiB per stream: the rest was dropped" },
    stderr_truncated = { type = "boolean" },
    stdout_clipped = { type = "boolean", description = "cut to fit this result: the whole is at stdout_uri" },
    stderr_clipped = { type = "boolean" },
    stdout_uri = { type = "string" },
    stderr_uri = { type = "string" },
    images = { type = "integer" },
    results_truncated = { type = "boolean" },
    retry_safe = { type = "boolean", description = "true: the code never ran, running it again is safe" },
  },
  required = arr { "sandbox_id", "status" },
}

local function object(props, required)
  return { type = "object", properties = props, required = required and arr(required) or nil }
end

local ANNOTATE = {
  read = { readOnlyHint = true, openWorldHint = false },
  run = { readOnlyHint = false, destructiveHint = true, idempotentHint = false, openWorldHint = true },
}

---------------------------------------------------------------------------------------------------
-- helpers for the bodies

-- describe(err) -> the words of a failure (a glsb error with its class and stage, an argument error
-- without the Lua position that points into glsb).
local function describe(err)
  if errors.is_error(err) then return tostring(err) end
  local s = tostring(type(err) == "table" and (err.message or errors.describe(err)) or err)
  s = s:gsub("^[^:\n]*:%d+: ", "")
  return s
end

local failure_of

-- attempt(what, fn, ...) -> true, fn's results | false, the failure result for the model. A cancellation
-- of the request goes on up (the server then answers nothing, as the protocol asks).
local function attempt(what, fn, ...)
  local res = table.pack(pcall(fn, ...))
  if res[1] then return true, table.unpack(res, 2, res.n) end
  if loop.is_cancelled(res[2]) then error(res[2], 0) end
  return false, failure_of(what, res[2])
end

-- on_sandbox(entry, what, fn, ...): attempt, for a call on a sandbox: a cancellation also ends the
-- sandbox (the glsb API terminates what a cancelled call held), which the entry then says.
local function on_sandbox(entry, what, fn, ...)
  local res = table.pack(pcall(fn, ...))
  if res[1] then return true, table.unpack(res, 2, res.n) end
  if loop.is_cancelled(res[2]) then
    entry.cancelled = true
    error(res[2], 0)
  end
  return false, failure_of(what, res[2])
end

-- failure_of(what, err) -> the failure result for the model of a call that raised err.
failure_of = function(what, err)
  -- URLs lose their credentials and query values (signed URLs carry their signature there); the secrets
  -- themselves go when the line is sent (glsb.mcp.server's one way out)
  local msg = redact.text(describe(err))
  if msg:sub(1, #what + 1) ~= what .. ":" then msg = what .. ": " .. msg end
  return present.failure(msg)
end

-- keep(s, uri, data, name, links, description) -> where the whole is, in words: data stored as uri (read
-- in parts when it is larger than one message), its links appended to links.
function M.keep(s, uri, data, name, links, description)
  s:put(uri, data, "text/plain", name)
  local parts = s:part_list(uri)
  for k, p in ipairs(parts) do
    links[#links + 1] = present.link(p.uri, #parts > 1 and (name .. " part " .. k) or name, "text/plain", p.size,
      #parts > 1 and (description .. ", part " .. k .. " of " .. #parts) or description)
  end
  if #parts == 1 then return uri end
  return string.format("%s ... %s (%d parts)", parts[1].uri, parts[#parts].uri, #parts)
end

local function file_uri(entry, path)
  return "glsb://sandbox/" .. entry.id .. "/files" .. present.uri_path(path)
end
M.file_uri = file_uri

local function status_line(r, what)
  local parts = { "status: " .. tostring(r.status) }
  if r.code ~= nil and (what == "execute_command" or r.code ~= 0) then parts[#parts + 1] = "exit code " .. r.code end
  if r.duration_ms then parts[#parts + 1] = string.format("%.0f ms", r.duration_ms) end
  local line = table.concat(parts, ", ")
  local f = r.failure or {}
  if r.status == "unknown" then
    line = line .. "\nThe outcome is UNKNOWN: the code was sent and its answer was lost, so it may have run. "
      .. "Do not retry it blindly: look at the sandbox's state (files, variables) first."
  elseif r.status == "timeout" then
    line = line .. "\nThe run did not finish within its timeout and was stopped."
  elseif r.status == "error" and f.retry_safe == true then
    line = line .. "\nThe code never ran (retry-safe): running it again is safe."
  end
  if f.exception_type == "SandboxGoneError" then
    line = line .. "\nThe sandbox is gone: create another with sandbox_create."
  end
  return line
end

-- streams(s, entry, r, base, budget) -> text of stdout and stderr within budget, the flags, the links.
local function streams(s, r, base, budget, structured, links)
  local out, err = r.stdout or "", r.stderr or ""
  local half = budget // 2
  local max = { stdout = half, stderr = half }
  if #out <= half then max.stdout, max.stderr = #out, budget - #out
  elseif #err <= half then max.stderr, max.stdout = #err, budget - #err end
  local text = {}
  for _, name in ipairs({ "stdout", "stderr" }) do
    local data = name == "stdout" and out or err
    if data ~= "" then
      local uri = base .. name
      local where = #data > max[name] and M.keep(s, uri, data, name, links, "the whole " .. name .. " of the run")
      local shown, cut = present.clip(data, max[name], where or nil)
      if cut > 0 then
        structured[name .. "_clipped"] = true
        structured[name .. "_uri"] = uri
      end
      text[#text + 1] = name .. ":\n" .. shown
    end
    if r[name .. "_truncated"] then structured[name .. "_truncated"] = true end
  end
  return text
end

-- The result of a run (execute_code, execute_command): status and output as text within the budget, the
-- images as blocks while they fit and always named and linked, the structured result.
local function run_result(s, entry, r, what, limits)
  entry.runs = entry.runs + 1
  local base = "glsb://sandbox/" .. entry.id .. "/runs/" .. entry.runs .. "/"
  local structured = { sandbox_id = entry.id, run = entry.runs, status = r.status,
    exit_code = math.tointeger(r.code),
    duration_ms = r.duration_ms and math.floor(r.duration_ms * 1000 + 0.5) / 1000 }
  if r.failure and r.failure.retry_safe ~= nil then structured.retry_safe = r.failure.retry_safe == true end
  local links, images = {}, {}
  local text = { status_line(r, what) }
  local used = #text[1]
  local err_text = r.error and r.error ~= "" and present.clip(r.error, 8000) or nil
  local value = r.text and present.clip(r.text, 4000) or nil
  used = used + (err_text and #err_text or 0) + (value and #value or 0)
  local text_budget = math.max(1000, limits.max_result_chars // 2 - used)
  for _, t in ipairs(streams(s, r, base, text_budget, structured, links)) do text[#text + 1] = t end
  if err_text then text[#text + 1] = "error:\n" .. err_text end
  if value then text[#text + 1] = "value: " .. value end
  -- rich results: images as blocks (while the budget lasts) and links; other displays as text
  local imgs = r.images and r:images() or {}
  local room = limits.max_result_chars - used - text_budget
  local shown = 0
  for k, img in ipairs(imgs) do
    local ext = img.mime == "image/svg+xml" and "svg" or img.mime == "image/jpeg" and "jpg" or "png"
    local uri = base .. "image-" .. k .. "." .. ext
    s:put(uri, img.data, img.mime, "image " .. k)
    local b64 = math.ceil(#img.data / 3) * 4
    local inline = present.INLINE_IMAGE[img.mime] and shown < limits.max_images and b64 <= room
    if inline then
      images[#images + 1] = present.image(img.data, img.mime)
      shown, room = shown + 1, room - b64
    end
    text[#text + 1] = string.format("image %d: %s, %d bytes%s: %s", k, img.mime, #img.data,
      inline and " (shown)" or "", uri)
    links[#links + 1] = present.link(uri, "image-" .. k .. "." .. ext, img.mime, #img.data,
      "image " .. k .. " of the run")
  end
  structured.images = #imgs
  if r.results_truncated then structured.results_truncated = true end
  for i, b in ipairs(r.results or {}) do
    if not b.is_main_result and not (b.png or b.jpeg or b.svg) then
      local t = b.text or b.markdown or (b.json ~= nil and json.encode(b.json)) or b.html
      if t then text[#text + 1] = string.format("display %d: %s", i, present.clip(t, 2000)) end
    end
  end
  for _, img in ipairs(images) do links[#links + 1] = img end
  -- images first after the text, then the links
  table.sort(links, function(a, b) return (a.type == "image" and 0 or 1) < (b.type == "image" and 0 or 1) end)
  return present.result({ table.concat(text, "\n") }, structured, links, r.status ~= "success")
end
M.run_result = run_result


---------------------------------------------------------------------------------------------------
-- the tools, in the order tools/list gives them

function M.build(cfg)
  local providers = {}
  for name in pairs(cfg.providers) do providers[#providers + 1] = name end
  table.sort(providers)
  local limits = cfg.limits
  local T = {}

  -- execution(s, entry, ctx, method, payload, opts) -> the result of sb:execute_code / sb:execute_command,
  -- its output lines streamed as progress.
  local function execution(s, entry, ctx, method, payload, opts)
    opts.on_stdout, opts.on_stderr = ctx.stdout, ctx.stderr
    local ok, r = on_sandbox(entry, method, entry.sb[method], entry.sb, payload, opts)
    if not ok then return r end
    return run_result(s, entry, r, method, limits)
  end

  T[#T + 1] = {
    name = "sandbox_create",
    title = "Create a sandbox",
    description = "Start an isolated sandbox with a persistent code interpreter and return its sandbox_id, which "
      .. "every other tool takes. Variables, files and installed packages persist across calls until sandbox_kill, "
      .. "or until it has been idle for `timeout` seconds. Providers served: " .. table.concat(providers, ", ")
      .. " (default " .. cfg.default_provider .. ").",
    args = {
      provider = { "string", "where the sandbox runs", values = providers },
      template = { "string", "the provider's template (image) id or name; default: the provider's" },
      language = { "string", "the interpreter's language (default python)" },
      timeout = { "positive", string.format("seconds the sandbox lives unused (renewed by each call; default %d)",
        cfg.timeout), max = cfg.max_timeout },
      packages = { "string_list", "pip packages installed before it is handed over (Python)" },
      metadata = { "string_map", "labels kept with the sandbox" },
      network = { "boolean|table", "outbound network where the provider has the option: true, or "
        .. "{allow = [...], deny = [...]} of addresses, CIDRs and (allow) domain names; default none", schema = {
        anyOf = arr { { type = "boolean" }, { type = "object", additionalProperties = false, properties = {
          allow = { type = "array", items = STRING_LIST }, deny = { type = "array", items = STRING_LIST } } } } } },
      keep_alive = { "boolean", "leave it running when this server exits (it ends with its lease)" },
    },
    output = object({ sandbox_id = { type = "string" }, provider = { type = "string" }, language = { type = "string" },
      template = { type = "string" }, state = { type = "string" }, ends_at = { type = "string" },
      provider_sandbox_id = { type = "string", description = "the provider's own id of the sandbox" } },
      { "sandbox_id", "provider" }),
    annotations = { readOnlyHint = false, destructiveHint = false, idempotentHint = false, openWorldHint = true },
    run = function(s, a, ctx)
      local provider = a.provider or cfg.default_provider
      local running = {}
      for _, e in ipairs(s:list()) do
        if not e.killed and e.sb:is_running() then running[#running + 1] = e.id end
      end
      if #running >= limits.max_sandboxes then
        return present.failure(string.format("sandbox_create: this session already has %d sandboxes running (%s), "
          .. "the most it keeps at once: kill one with sandbox_kill first", #running, table.concat(running, ", ")))
      end
      local opts = {}
      for k, v in pairs(cfg.providers[provider]) do opts[k] = v end
      opts.template, opts.language, opts.keep_alive = a.template, a.language, a.keep_alive
      opts.timeout = a.timeout or cfg.timeout
      opts.additional_packages = a.packages
      opts.network = a.network
      local md = {}
      for k, v in pairs(a.metadata or {}) do md[k] = tostring(v) end
      md.glsb_mcp_session = s.tag
      opts.metadata = md
      -- "ready" is said by the result itself, which follows at once: the official client drops a progress
      -- notification that reaches it in the same read as the answer (docs/protocols/mcp.md §6)
      opts.on_progress = function(event)
        if event.stage ~= "ready" then ctx.progress(event.message) end
      end
      ctx.progress("creating a " .. provider .. " sandbox")
      local ok, sb = attempt("sandbox_create", glsb.create, provider, opts)
      if not ok then return sb end
      local entry = s:add(sb, { provider = provider, keep_alive = a.keep_alive, timeout = opts.timeout })
      local info = sb:info()
      local st = { sandbox_id = entry.id, provider = provider, language = sb.language, state = info.state,
        ends_at = info.ends_at, template = type(sb.template_id) == "string" and sb.template_id or nil,
        provider_sandbox_id = sb.sandbox_id }
      return present.result({ string.format("sandbox_id: %s (%s, %s)%s", entry.id, provider, tostring(sb.language),
        a.keep_alive and "; it stays when this server exits" or "") }, st)
    end,
  }

  T[#T + 1] = {
    name = "sandbox_list",
    title = "List sandboxes",
    description = "The sandboxes this session created, with their state (running, killed, expired, ...).",
    args = {},
    output = object({ sandboxes = { type = "array", items = object({ sandbox_id = { type = "string" },
      provider = { type = "string" }, language = { type = "string" }, state = { type = "string" },
      started_at = { type = "string" }, ends_at = { type = "string" }, runs = { type = "integer" },
      keep_alive = { type = "boolean" } }, { "sandbox_id", "state" }) } }, { "sandboxes" }),
    annotations = ANNOTATE.read,
    run = function(s)
      local list, lines = arr(), {}
      for _, e in ipairs(s:list()) do
        local state = s.state(e)
        local info = {}
        if state == "running" then
          local ok, i = pcall(e.sb.info, e.sb)
          if ok then info = i end
        end
        list[#list + 1] = { sandbox_id = e.id, provider = e.provider, language = e.sb.language, state = state,
          started_at = info.started_at, ends_at = info.ends_at, runs = e.runs, keep_alive = e.keep_alive or nil }
        lines[#lines + 1] = string.format("%s  %s  %s  %s%s", e.id, e.provider, tostring(e.sb.language), state,
          info.ends_at and ("  ends " .. info.ends_at) or "")
      end
      local text = #lines > 0 and table.concat(lines, "\n") or "no sandboxes yet: sandbox_create makes one"
      return present.result({ text }, { sandboxes = list })
    end,
  }

  T[#T + 1] = {
    name = "sandbox_kill",
    title = "Kill a sandbox",
    description = "Terminate a sandbox and everything running in it. Killing one already ended is not an error.",
    args = { sandbox_id = SANDBOX_ID },
    output = object({ sandbox_id = { type = "string" }, state = { type = "string" } }, { "sandbox_id", "state" }),
    annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
    run = function(s, a)
      local e = s.sandboxes[a.sandbox_id]
      if not e then
        local _, msg = s:get(a.sandbox_id, "sandbox_kill")
        return present.failure(msg)
      end
      if not e.killed then
        local ok, err = attempt("sandbox_kill", s.kill, s, e, 10)
        if not ok then return err end
      end
      return present.result({ "killed " .. e.id }, { sandbox_id = e.id, state = "killed" })
    end,
  }

  T[#T + 1] = {
    name = "execute_code",
    title = "Run code",
    description = "Run code in a sandbox's interpreter; variables persist between calls. The result has the status, "
      .. "stdout, stderr, the error with its traceback, the last expression's value and any images (charts).",
    args = {
      sandbox_id = SANDBOX_ID,
      code = { "string", "the code", required = true },
      language = { "string", "run this call in another language the sandbox runs (default: the sandbox's)" },
      timeout = { "positive", "seconds before the run is stopped (default 300)", max = cfg.max_timeout },
    },
    output = RUN_OUTPUT,
    annotations = ANNOTATE.run,
    sandbox = true,
    run = function(s, a, ctx, e)
      return execution(s, e, ctx, "execute_code", a.code, { language = a.language, timeout = a.timeout })
    end,
  }

  T[#T + 1] = {
    name = "execute_command",
    title = "Run a shell command",
    description = "Run a shell command line in a sandbox and wait for it to end (for work longer than a minute, "
      .. "command_start).",
    args = {
      sandbox_id = SANDBOX_ID,
      command = { "string", "the shell command line", required = true },
      cwd = { "string", "working directory" },
      env = { "string_map", "environment variables of the command" },
      timeout = { "positive", "seconds before it is stopped (default 30)", max = cfg.max_timeout },
    },
    output = RUN_OUTPUT,
    annotations = ANNOTATE.run,
    sandbox = true,
    run = function(s, a, ctx, e)
      return execution(s, e, ctx, "execute_command", a.command, { cwd = a.cwd, env = a.env, timeout = a.timeout })
    end,
  }

  T[#T + 1] = {
    name = "files_write",
    title = "Write a file",
    description = "Write a file in a sandbox (parents are made; an existing file is replaced). Relative paths are "
      .. "below the sandbox's home directory.",
    args = {
      sandbox_id = SANDBOX_ID,
      path = { "string", "the file's path", required = true },
      content = { "string", "the content: text, or base64 with encoding = base64", required = true },
      encoding = { "string", "how content is written (default text)", values = { "text", "base64" } },
    },
    output = object({ path = { type = "string" }, bytes = { type = "integer" }, uri = { type = "string" } },
      { "path", "bytes" }),
    annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
    sandbox = true,
    run = function(_, a, _, e)
      local data = a.content
      if a.encoding == "base64" then
        local bytes, msg = codec.b64decode((a.content:gsub("%s", "")))
        if not bytes then return present.failure("files_write: content is not valid base64: " .. tostring(msg)) end
        data = bytes
      end
      local okp, path = attempt("files_write", files.absolute, e.sb, a.path, "write")
      if not okp then return path end
      local ok, err = attempt("files_write", e.sb.files.write, e.sb.files, path, data)
      if not ok then return err end
      return present.result({ string.format("wrote %d bytes to %s", #data, path) },
        { path = path, bytes = #data, uri = file_uri(e, path) })
    end,
  }

  T[#T + 1] = {
    name = "files_read",
    title = "Read a file",
    description = "Read a file from a sandbox: text as text, other bytes as base64; images are also shown. A file "
      .. "too large for the result comes back cut, with a resource link that reads it whole.",
    args = {
      sandbox_id = SANDBOX_ID,
      path = { "string", "the file's path", required = true },
      encoding = { "string", "auto (default): text when it is UTF-8, else base64",
        values = { "auto", "text", "base64" } },
    },
    output = object({ path = { type = "string" }, bytes = { type = "integer" }, mime_type = { type = "string" },
      encoding = { type = "string" }, complete = { type = "boolean", description = "false: cut; the uri has it all" },
      uri = { type = "string" } }, { "path", "bytes" }),
    annotations = ANNOTATE.read,
    sandbox = true,
    run = function(_, a, _, e)
      local okp, path = attempt("files_read", files.absolute, e.sb, a.path, "read")
      if not okp then return path end
      local ok, entry = attempt("files_read", M.stat, e.sb, path)
      if not ok then return entry end
      if not entry then return present.failure("files_read: no such file: " .. path) end
      if entry.type == "dir" then
        return present.failure("files_read: " .. path .. " is a directory: use files_list")
      end
      local uri = file_uri(e, path)
      if entry.size and entry.size > limits.max_file_bytes then
        return present.failure(string.format("files_read: %s is %d bytes, more than this server reads (%d): read a "
          .. "part with execute_command (head, tail, split)", path, entry.size, limits.max_file_bytes))
      end
      local okr, data = attempt("files_read", e.sb.files.read, e.sb.files, path)
      if not okr then return data end
      local mime = present.mime_of(path, data)
      local is_text = utf8.len(data) ~= nil and not data:find("%z")
      local enc = a.encoding or "auto"
      if enc == "text" and not is_text then
        return present.failure("files_read: " .. path .. " is not UTF-8 text: ask with encoding = base64")
      end
      if enc == "auto" then enc = is_text and "text" or "base64" end
      local body = enc == "base64" and codec.b64encode(data) or data
      local budget = limits.max_result_chars // 2
      local shown, cut = present.clip(body, budget, uri)
      if enc == "base64" and cut > 0 then shown = nil end -- half a base64 text is of no use: the link has it
      local st = { path = path, bytes = #data, mime_type = mime, encoding = enc, complete = cut == 0, uri = uri }
      local blocks = {}
      if present.INLINE_IMAGE[mime] and math.ceil(#data / 3) * 4 <= budget then
        blocks[#blocks + 1] = present.image(data, mime)
      end
      blocks[#blocks + 1] = present.link(uri, path:match("[^/]*$"), mime, #data, "the file " .. path)
      local head = string.format("%s: %d bytes, %s, %s%s", path, #data, mime, enc,
        cut > 0 and ("; cut to fit: the link reads it whole (" .. uri .. ")") or "")
      return present.result(shown and { head, shown } or { head }, st, blocks)
    end,
  }

  T[#T + 1] = {
    name = "files_list",
    title = "List a directory",
    description = "List a directory of a sandbox (default: its home directory).",
    args = {
      sandbox_id = SANDBOX_ID,
      path = { "string", "the directory (default: the home directory)" },
    },
    output = object({ path = { type = "string" }, entries = { type = "array", items = object({
      name = { type = "string" }, path = { type = "string" }, type = { type = "string" }, size = { type = "integer" } },
      { "name", "path", "type" }) },
      truncated = { type = "boolean" } }, { "path", "entries" }),
    annotations = ANNOTATE.read,
    sandbox = true,
    run = function(_, a, _, e)
      local okp, path = attempt("files_list", files.absolute, e.sb, a.path or ".", "list")
      if not okp then return path end
      local ok, list = attempt("files_list", e.sb.files.list, e.sb.files, path)
      if not ok then return list end
      local entries, lines = arr(), {}
      for i, x in ipairs(list) do
        if i > limits.max_entries then break end
        entries[#entries + 1] = { name = x.name, path = x.path, type = x.type, size = math.tointeger(x.size) }
        lines[#lines + 1] = string.format("%-7s %10s  %s%s", x.type, x.size and tostring(math.tointeger(x.size)) or "",
          x.path, x.type == "dir" and "/" or "")
      end
      local truncated = #list > limits.max_entries
      if truncated then lines[#lines + 1] = string.format("[%d more entries not shown]", #list - limits.max_entries) end
      return present.result({ #lines > 0 and table.concat(lines, "\n") or (path .. " is empty") },
        { path = path, entries = entries, truncated = truncated or nil })
    end,
  }

  T[#T + 1] = {
    name = "command_start",
    title = "Start a background command",
    description = "Start a shell command in a sandbox in the background and return a command_id at once: for work "
      .. "longer than a client waits (servers, builds, long jobs). Read it with command_output, stop it with "
      .. "command_kill.",
    args = {
      sandbox_id = SANDBOX_ID,
      command = { "string", "the shell command line", required = true },
      cwd = { "string", "working directory" },
      env = { "string_map", "environment variables of the command" },
      timeout = { "positive", "seconds before it is killed (default: none; it ends with the sandbox)" },
    },
    output = object({ command_id = { type = "string" }, sandbox_id = { type = "string" }, pid = { type = "integer" } },
      { "command_id", "sandbox_id" }),
    annotations = ANNOTATE.run,
    sandbox = true,
    run = function(s, a, _, e)
      local ok, h = attempt("command_start", e.sb.start_command, e.sb, a.command, { cwd = a.cwd, env = a.env,
        timeout = a.timeout })
      if not ok then return h end
      local cmd = s:add_command(e, h, a.command)
      local pid = math.tointeger(h.pid)
      local text = string.format("command_id: %s (in %s%s)", cmd.id, e.id, pid and (", pid " .. pid) or "")
      return present.result({ text }, { command_id = cmd.id, sandbox_id = e.id, pid = pid })
    end,
  }

  T[#T + 1] = {
    name = "command_output",
    title = "Read a background command",
    description = "What a background command printed since the last command_output, and whether it has ended (its "
      .. "status and exit code). `wait` waits up to that many seconds for it to end first.",
    args = {
      command_id = { "string", "a command_id returned by command_start", required = true },
      wait = { "number", "seconds to wait for the command to end (default 0, at most 50)", min = 0, max = 50 },
    },
    output = object({ command_id = { type = "string" }, sandbox_id = { type = "string" }, done = { type = "boolean" },
      status = { type = "string" }, exit_code = { type = "integer" }, stdout_bytes = { type = "integer" },
      stderr_bytes = { type = "integer" }, stdout_clipped = { type = "boolean" },
      stderr_clipped = { type = "boolean" } },
      { "command_id", "done" }),
    annotations = ANNOTATE.read,
    run = function(s, a, ctx)
      local cmd, why = s:command(a.command_id, "command_output")
      if not cmd then return present.failure(why) end
      local h = cmd.handle
      if a.wait and a.wait > 0 and not h:done() then
        -- the wait runs in a task of its own: a cancelled request stops waiting, and the command (and its
        -- sandbox, which a cancelled wait would end) go on
        local waiter = loop.spawn(function() return h:wait(a.wait) end)
        ctx.progress("waiting for " .. cmd.id)
        waiter:wait()
      end
      local ok, out, err = attempt("command_output", h.output, h)
      if not ok then return out end
      local st = { command_id = cmd.id, sandbox_id = cmd.entry.id, done = h:done(), stdout_bytes = #out,
        stderr_bytes = #err }
      local text, links = {}, {}
      local budget = limits.max_result_chars // 4
      for _, name in ipairs({ "stdout", "stderr" }) do
        local data = name == "stdout" and out or err
        local new = data:sub(cmd.sent[name] + 1)
        cmd.sent[name] = #data
        if new ~= "" then
          local uri = "glsb://sandbox/" .. cmd.entry.id .. "/commands/" .. cmd.id .. "/" .. name
          local where = #new > budget and M.keep(s, uri, data, name, links, "all the " .. name .. " so far") or nil
          local shown, cut = present.clip(new, budget, where)
          if cut > 0 then st[name .. "_clipped"] = true end
          text[#text + 1] = name .. " (new):\n" .. shown
        end
      end
      local is_error = false
      if st.done then
        local okw, r = attempt("command_output", h.wait, h, 1)
        if okw and type(r) == "table" then
          st.status, st.exit_code = r.status, math.tointeger(r.code)
          is_error = r.status ~= "success"
          table.insert(text, 1, status_line(r, "execute_command"))
        end
      else
        table.insert(text, 1, "running (" .. string.format("%.0f", loop.now() - cmd.started) .. " s)")
      end
      return present.result({ table.concat(text, "\n") }, st, links, is_error)
    end,
  }

  T[#T + 1] = {
    name = "command_kill",
    title = "Kill a background command",
    description = "Stop a background command. Killing one that already ended is not an error.",
    args = { command_id = { "string", "a command_id returned by command_start", required = true } },
    output = object({ command_id = { type = "string" }, killed = { type = "boolean" } }, { "command_id", "killed" }),
    annotations = { readOnlyHint = false, destructiveHint = true, idempotentHint = true, openWorldHint = false },
    run = function(s, a)
      local cmd, why = s:command(a.command_id, "command_kill")
      if not cmd then return present.failure(why) end
      local ok, killed = attempt("command_kill", cmd.handle.kill, cmd.handle)
      if not ok then return killed end
      return present.result({ killed and ("killed " .. cmd.id) or (cmd.id .. " had already ended") },
        { command_id = cmd.id, killed = killed == true })
    end,
  }

  if not cfg.network then T[1].args.network = nil end
  local by_name, listed = {}, arr()
  for _, t in ipairs(T) do
    if t.sandbox then
      -- a tool on a sandbox: its id is looked up (only this session's, running) and its lease renewed first
      local body = t.run
      t.run = function(s, a, ctx)
        local e, why = s:get(a.sandbox_id, t.name)
        if not e then return present.failure(why) end
        s:touch(e)
        return body(s, a, ctx, e)
      end
    end
    t.schema = options.merge(t.args)
    by_name[t.name] = t
    listed[#listed + 1] = { name = t.name, title = t.title, description = t.description,
      inputSchema = input_schema(t.args), outputSchema = t.output,
      annotations = t.annotations }
  end
  return { list = T, by_name = by_name, listed = listed }
end

-- stat(sb, path) -> the files:list entry of path (its parent listed), or nil when it does not exist.
function M.stat(sb, path)
  local dir = path:match("^(.*)/[^/]+$")
  if dir == nil then return { type = "dir", path = path } end
  if dir == "" then dir = "/" end
  local ok, list = pcall(sb.files.list, sb.files, dir)
  if not ok then
    if loop.is_cancelled(list) then error(list, 0) end
    if type(list) == "table" and list.reason == "not_found" then return nil end
    error(list, 0)
  end
  for _, x in ipairs(list) do
    if x.path == path or x.path == dir:gsub("/$", "") .. "/" .. path:match("[^/]+$") then return x end
  end
  return nil
end

-- check(tool, args) -> the arguments (JSON nulls taken as absent) | nil, the message for the model.
function M.check(tool, args)
  local clean = {}
  for k, v in pairs(args) do
    -- JSON has one number type; cjson gives floats: a whole one is the integer the client wrote
    if v ~= json.null then clean[k] = math.type(v) == "float" and math.tointeger(v) or v end
  end
  local ok, err = pcall(options.check, clean, tool.schema, tool.name)
  if ok then return clean end
  local msg = tostring(err):gsub("^[^:\n]*:%d+: ", ""):gsub("option '", "argument '")
    :gsub("options must", "arguments must")
  return nil, msg
end

return M
