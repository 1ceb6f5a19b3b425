-- A scriptable in-memory provider for the contract specs. fake_provider.new()
-- returns a provider module (name, Sandbox, Template) and its backend: the
-- state the hooks read and write, so a spec can inject failures and inspect
-- what the base classes asked for.
local sandbox = require "glsb.sandbox"
local template = require "glsb.template"
local loop = require "glsb.loop"

local M = {}

function M.new(name)
  name = name or "fake"
  local backend = {
    calls = {},              -- { hook, arg } in call order
    live = {},               -- sandbox_id -> true while "running"
    next_id = 0,
    start_failures = {},     -- queue: each _start attempt pops one and raises it
    id_before_failure = false, -- assign sandbox_id before raising a start failure
    start_delay = nil,       -- seconds _start sleeps (cancellation specs)
    code_delay = nil,        -- seconds _run_code sleeps
    code_results = {},       -- code -> result table | function(self, code, opts) | error to raise
    pip_result = nil,        -- result of the package install code (default success)
    files = {},              -- path -> data (uploads)
    upload_failure = nil,
    upload_delay = nil,      -- seconds _upload takes (cut at its opts.deadline)
    download_failure = nil,
    terminate_failures = {}, -- queue: each _terminate pops one and raises it
    set_timeout_failure = nil,
    templates = {},          -- hash -> ref
  }

  local function record(hook, arg, opts) backend.calls[#backend.calls + 1] = { hook = hook, arg = arg, opts = opts } end

  function backend.count(hook)
    local n = 0
    for _, c in ipairs(backend.calls) do if c.hook == hook then n = n + 1 end end
    return n
  end

  function backend.last(hook)
    for i = #backend.calls, 1, -1 do
      if backend.calls[i].hook == hook then return backend.calls[i] end
    end
  end

  function backend.live_count()
    local n = 0
    for _ in pairs(backend.live) do n = n + 1 end
    return n
  end

  local Sandbox = sandbox.CodeInterpreterSandbox:extend(name, {
    languages = { python = true, bash = true },
    default_code_timeout = 120,
    create_retry = { base_delay = 0, jitter = 0 },
    terminate_retry = { base_delay = 0, jitter = 0 },
    -- its own options, declared once (glsb.options): accepted by create, connect and list
    options = { provider = { api_key = { "string", "a credential the fake ignores" } } },
  })

  function Sandbox:_start(opts)
    record("_start", nil, opts)
    backend.next_id = backend.next_id + 1
    local id = name .. "-" .. backend.next_id
    local failure = table.remove(backend.start_failures, 1)
    if failure ~= nil then
      if backend.id_before_failure then
        self.sandbox_id = id
        backend.live[id] = true
      end
      error(failure, 0)
    end
    self.sandbox_id = id
    backend.live[id] = true
    if backend.start_delay then loop.sleep(backend.start_delay) end
  end

  function Sandbox:_run_code(code, opts)
    record("_run_code", code, opts)
    if backend.code_delay then loop.sleep(backend.code_delay) end
    if code:find("-m\", \"pip\", \"install\"", 1, true) then
      return backend.pip_result or { status = "success", code = 0 }
    end
    local r = backend.code_results[code]
    if type(r) == "function" then return r(self, code, opts) end
    if type(r) == "table" and r.raise ~= nil then error(r.raise, 0) end
    if r ~= nil then return r end
    if opts.on_stdout then opts.on_stdout("ran: " .. code) end
    return { status = "success", code = 0, stdout = "ran: " .. code .. "\n" }
  end

  function Sandbox:_run_command(command, opts)
    record("_run_command", command, opts)
    local r = backend.code_results[command]
    if type(r) == "table" and r.raise ~= nil then error(r.raise, 0) end
    if r ~= nil then return r end
    return { exit_code = 0, stdout = "cmd: " .. command .. "\n" }
  end

  function Sandbox:_upload(files, opts)
    record("_upload", files, opts)
    if backend.upload_delay then
      -- an upload that takes upload_delay seconds, cut at its own deadline as a transport's would be
      local done_at = loop.now() + backend.upload_delay
      if opts.deadline and opts.deadline < done_at then
        loop.wait(nil, opts.deadline)
        error({ phase = "receive", code = "OPERATION_TIMEDOUT", timeout = true, message = "upload timed out" }, 0)
      end
      loop.wait(nil, done_at)
    end
    if backend.upload_failure then error(backend.upload_failure, 0) end
    for _, f in ipairs(files) do backend.files[f.path] = f.data end
  end

  function Sandbox:_download(path, opts)
    record("_download", path, opts)
    if backend.download_failure then error(backend.download_failure, 0) end
    return backend.files[path]
  end

  function Sandbox:_set_timeout(seconds)
    record("_set_timeout", seconds)
    if backend.set_timeout_failure then error(backend.set_timeout_failure, 0) end
  end

  function Sandbox:_terminate(opts)
    record("_terminate", self.sandbox_id, opts)
    local failure = table.remove(backend.terminate_failures, 1)
    if failure ~= nil then error(failure, 0) end
    backend.live[self.sandbox_id] = nil
  end

  local Template = template.TemplateBuilder:extend(name, {
    options = { provider = { api_key = { "string", "a credential the fake ignores" } } },
  })
  Template.hasher = function(s) return "h" .. #s .. ":" .. s:sub(-16) end

  function Template:_find(spec, hash)
    record("_find", spec, hash)
    return backend.templates[hash]
  end

  function Template:_build(spec, hash)
    record("_build", spec, hash)
    if backend.build_failure then error(backend.build_failure, 0) end
    local ref = { template_id = spec.name .. "-" .. hash:sub(1, 8) }
    backend.templates[hash] = ref
    return ref
  end

  return { name = name, Sandbox = Sandbox, Template = Template }, backend
end

return M
