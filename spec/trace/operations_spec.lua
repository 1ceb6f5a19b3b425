-- Spans of the public operations (sandbox, template), on the in-memory fake provider: names, the tree,
-- attributes, create attempts and package install, statuses of executions, errors as exception events,
-- TRACEPARENT into the sandbox when asked, and no secret in any attribute.
local trace = require "glsb.trace"
local errors = require "glsb.errors"
local loop = require "glsb.loop"
local span_mod = require "glsb.trace.span"
local sampler = require "glsb.trace.sampler"
local fake = require "support.fake_provider"
local glsb = require "glsb"

local ended

local function memory_tracer()
  ended = {}
  local tracer = span_mod.new_tracer { sampler = sampler.from_name("parentbased_always_on"),
    processors = { { on_end = function(_, s) ended[#ended + 1] = s end } } }
  trace.set_tracer(tracer)
end

local function named(name)
  local out = {}
  for _, s in ipairs(ended) do if s.name == name then out[#out + 1] = s end end
  return out
end

-- "name\n  child" of the spans under root (by start order)
local function tree(root)
  local lines = {}
  local function walk(s, depth)
    lines[#lines + 1] = string.rep("  ", depth) .. s.name
    local kids = {}
    for _, c in ipairs(ended) do if c.parent_span_id == s.span_id then kids[#kids + 1] = c end end
    table.sort(kids, function(a, b) return a.start_ns < b.start_ns end)
    for _, c in ipairs(kids) do walk(c, depth + 1) end
  end
  walk(root, 0)
  return table.concat(lines, "\n")
end

local function event(s, name)
  for _, e in ipairs(s.events or {}) do if e.name == name then return e end end
end

describe("glsb.trace operation spans #trace", function()
  local provider, backend, restore_log
  before_each(function()
    provider, backend = fake.new("fake")
    memory_tracer()
    local prev = require("glsb.log").set_handler(function() end)
    restore_log = function() require("glsb.log").set_handler(prev) end
  end)
  after_each(function()
    restore_log()
    trace.set_tracer(nil)
    trace.shutdown()
  end)

  it("make a tree of a script: create, execute, transfer, terminate, under the caller's span", function()
    local root = trace.start_span("script")
    trace.with_span(root, function()
      local sb = provider.Sandbox.create { additional_packages = { "numpy" } }
      sb:execute_code("print(1)", { files = { glsb.SandboxFile.from_bytes("abc", "a.txt") } })
      sb:execute_command("ls")
      assert.are.equal("abc", sb:download_file("/files/a.txt"))
      assert.is_true(sb:set_timeout(60))
      sb:terminate()
    end)
    root:finish()
    assert.are.equal(table.concat({
      "script",
      "  glsb.sandbox.create",
      "    glsb.sandbox.create.attempt",
      "    glsb.sandbox.package_install",
      "  glsb.sandbox.execute_code",
      "    glsb.sandbox.upload",
      "  glsb.sandbox.execute_command",
      "  glsb.sandbox.download",
      "  glsb.sandbox.set_timeout",
      "  glsb.sandbox.terminate",
    }, "\n"), tree(root))
    local create = named("glsb.sandbox.create")[1]
    assert.are.equal("fake", create.attributes["glsb.provider"])
    assert.are.equal("fake-1", create.attributes["glsb.sandbox.id"])
    assert.are.equal("python", create.attributes["glsb.language"])
    assert.are.equal(1, named("glsb.sandbox.create.attempt")[1].attributes["glsb.retry.attempt"])
    assert.are.equal(1, named("glsb.sandbox.package_install")[1].attributes["glsb.packages.count"])
    assert.are.equal("success", named("glsb.sandbox.package_install")[1].attributes["glsb.execution.status"])
    local exec = named("glsb.sandbox.execute_code")[1]
    assert.are.equal("success", exec.attributes["glsb.execution.status"])
    assert.are.equal(0, exec.attributes["glsb.execution.exit_code"])
    assert.are.equal("fake-1", exec.attributes["glsb.sandbox.id"])
    assert.are.equal("unset", exec.status_code)
    local up = named("glsb.sandbox.upload")[1]
    assert.are.same({ 1, 3 }, { up.attributes["glsb.files.count"], up.attributes["glsb.transfer.bytes"] })
    assert.are.equal(3, named("glsb.sandbox.download")[1].attributes["glsb.transfer.bytes"])
    -- terminate clears sandbox_id on the handle; the span keeps the id it started with
    assert.are.equal("fake-1", named("glsb.sandbox.terminate")[1].attributes["glsb.sandbox.id"])
    for _, s in ipairs(ended) do assert.are.equal(root.trace_id, s.trace_id) end
  end)

  it("give a failed create one child per attempt, each failure recorded, the create itself fine", function()
    local busy = errors.new(errors.SandboxStartError, "create", "busy", errors.http_failure(503))
    backend.start_failures = { busy, busy }
    provider.Sandbox.create {}
    local attempts = named("glsb.sandbox.create.attempt")
    assert.are.equal(3, #attempts)
    for i, a in ipairs(attempts) do
      assert.are.equal(i, a.attributes["glsb.retry.attempt"])
      assert.are.equal(named("glsb.sandbox.create")[1].span_id, a.parent_span_id)
    end
    for i = 1, 2 do
      local a = attempts[i]
      assert.are.equal("error", a.status_code)
      assert.are.equal("SandboxStartError", a.attributes["error.type"])
      assert.are.equal("create", a.attributes["glsb.error.stage"])
      assert.is_true(a.attributes["glsb.error.transient"])
      local e = event(a, "exception")
      assert.are.equal("SandboxStartError", e.attributes["exception.type"])
      assert.are.equal("create", e.attributes["glsb.error.stage"])
      assert.matches("503 Service Unavailable", e.attributes["exception.message"])
    end
    assert.are.equal("unset", attempts[3].status_code)
    assert.are.equal("unset", named("glsb.sandbox.create")[1].status_code)
  end)

  it("mark a create that failed for good, with the stage of the failure", function()
    backend.pip_result = { status = "error", code = 1, stderr = "no such package" }
    assert.has_error(function() provider.Sandbox.create { additional_packages = { "nope" } } end)
    local create = named("glsb.sandbox.create")[1]
    assert.are.equal("error", create.status_code)
    assert.are.equal("package_install", create.attributes["glsb.error.stage"])
    assert.are.equal("SandboxStartError", event(create, "exception").attributes["exception.type"])
    local install = named("glsb.sandbox.package_install")[1]
    assert.are.equal("error", install.attributes["glsb.execution.status"])
    assert.are.equal("error", install.status_code)
  end)

  it("carry the execution status: ERROR, TIMEOUT and UNKNOWN are errors with their type", function()
    local sb = provider.Sandbox.create {}
    backend.code_results["fail"] = { status = "error", code = 1, error = "NameError: x (user text)" }
    backend.code_results["slow"] = { raise = { phase = "receive", code = "OPERATION_TIMEDOUT", timeout = true,
      message = "timed out", retry_safe = false } }
    backend.code_results["cut"] = { raise = { phase = "receive", code = "RECV_ERROR", message = "reset",
      retry_safe = false } }
    assert.are.equal("error", sb:execute_code("fail").status)
    assert.are.equal("timeout", sb:execute_code("slow").status)
    assert.are.equal("unknown", sb:execute_code("cut").status)
    local execs = named("glsb.sandbox.execute_code")
    assert.are.same({ "error", "timeout", "unknown" }, { execs[1].attributes["glsb.execution.status"],
      execs[2].attributes["glsb.execution.status"], execs[3].attributes["glsb.execution.status"] })
    assert.are.equal(1, execs[1].attributes["glsb.execution.exit_code"])
    assert.are.equal("error", execs[1].attributes["error.type"])
    assert.are.equal("TimeoutError", execs[2].attributes["error.type"])
    assert.are.equal("TransportError", execs[3].attributes["error.type"])
    assert.is_false(execs[3].attributes["glsb.failure.retry_safe"])
    for _, s in ipairs(execs) do
      assert.are.equal("error", s.status_code)
      -- the status, never the user's exception text
      assert.matches("^execution ended with status %a+$", s.status_message)
    end
  end)

  it("put TRACEPARENT of the execution span into the sandbox's env only when asked", function()
    local sb = provider.Sandbox.create {}
    sb:execute_code("a", { env = { A = "1" } })
    assert.are.same({ A = "1" }, backend.last("_run_code").opts.env)
    sb:execute_code("b", { env = { A = "1" }, trace_into_sandbox = true })
    local env = backend.last("_run_code").opts.env
    local exec = named("glsb.sandbox.execute_code")[2]
    assert.are.equal("00-" .. exec.trace_id .. "-" .. exec.span_id .. "-01", env.TRACEPARENT)
    assert.are.equal("1", env.A)
    sb:execute_command("c", { trace_into_sandbox = true })
    assert.is_string(backend.last("_run_command").opts.env.TRACEPARENT)
    local ok, err = pcall(sb.execute_code, sb, "d", { trace_into_sandbox = "yes" })
    assert.is_false(ok)
    assert.matches("execute_code: option 'trace_into_sandbox' must be a boolean, got string \"yes\"", err)
  end)

  it("follow configure{trace_into_sandbox = true}, which a call can turn off", function()
    trace.set_tracer(nil)
    trace.configure { exporter = "none", trace_into_sandbox = true }
    local sb = provider.Sandbox.create {}
    sb:execute_code("a")
    assert.matches("^00%-%x+%-%x+%-01$", backend.last("_run_code").opts.env.TRACEPARENT)
    sb:execute_code("b", { trace_into_sandbox = false })
    assert.is_nil(backend.last("_run_code").opts.env)
  end)

  it("never hold code, file contents, environment values, API keys or signed URLs", function()
    local secrets = { "CODE_TEXT_1234", "FILE_CONTENT_5678", "ENV_VALUE_9012", "sk-api-key-3456",
      "sig=SIGNED_7890" }
    backend.download_failure = "GET https://files.example/x?sig=SIGNED_7890 failed for key sk-api-key-3456"
    backend.code_results["CODE_TEXT_1234"] = { status = "error", error = "Error: ENV_VALUE_9012 FILE_CONTENT_5678" }
    local sb = provider.Sandbox.create { api_key = "sk-api-key-3456" }
    sb:execute_code("CODE_TEXT_1234", { env = { V = "ENV_VALUE_9012" },
      files = { glsb.SandboxFile.from_bytes("FILE_CONTENT_5678", "f.txt") } })
    sb:execute_command("echo CODE_TEXT_1234", { env = { V = "ENV_VALUE_9012" } })
    assert.is_nil(sb:download_file("/x"))
    backend.terminate_failures = { "403 for key sk-api-key-3456 at https://api/x?token=SIGNED_7890",
      "403 for key sk-api-key-3456" }
    pcall(sb.terminate, sb)
    local function scan(where, v)
      local text = type(v) == "table" and table.concat(v, ",") or tostring(v)
      for _, secret in ipairs(secrets) do
        assert.is_nil(text:find(secret, 1, true), secret .. " leaked into " .. where .. ": " .. text)
      end
    end
    assert.is_true(#ended >= 6)
    for _, s in ipairs(ended) do
      scan(s.name .. " name", s.name)
      for k, v in pairs(s.attributes) do scan(s.name .. " " .. k, v) end
      for _, e in ipairs(s.events or {}) do for k, v in pairs(e.attributes) do scan(s.name .. " event " .. k, v) end end
      if s.status_message then scan(s.name .. " status", s.status_message) end
    end
    -- the terminate failure is there, with its secrets replaced
    local term = named("glsb.sandbox.terminate")[1]
    assert.are.equal("SandboxTerminateError", term.attributes["error.type"])
    assert.matches("REDACTED", event(term, "exception").attributes["exception.message"])
  end)

  it("follow the task: spawned tasks inherit the current span, and a child's own span stays its own", function()
    local root = trace.start_span("script")
    local sb = provider.Sandbox.create {}
    local seen = {}
    trace.with_span(root, function()
      local a = glsb.spawn(function()
        seen.a = trace.current()
        return sb:execute_code("print(1)")
      end)
      local b = glsb.spawn(function()
        local mine = trace.start_span("child.job")
        trace.with_span(mine, function()
          seen.b = trace.current()
          local grandchild = glsb.spawn(function() return trace.current(), sb:execute_command("ls") end)
          seen.grandchild = grandchild:wait()
        end)
        mine:finish()
        seen.b_after = trace.current()
      end)
      glsb.gather(a, b)
      seen.parent = trace.current()
    end)
    root:finish()
    sb:terminate()
    assert.are.equal(root, seen.a)
    assert.are.equal("child.job", seen.b.name)
    assert.are.equal(seen.b, seen.grandchild)
    assert.are.equal(root, seen.b_after)
    assert.are.equal(root, seen.parent)
    assert.are.equal(table.concat({
      "script",
      "  glsb.sandbox.execute_code",
      "  child.job",
      "    glsb.sandbox.execute_command",
    }, "\n"), tree(root))
  end)

  it("record a cancellation of the caller as the span's error", function()
    backend.code_delay = 5
    local sb = provider.Sandbox.create {}
    local t = loop.spawn(function() return sb:execute_code("long") end)
    loop.run(function() loop.sleep(0.05) end)
    t:cancel()
    assert.is_false((pcall(t.wait, t)))
    local exec = named("glsb.sandbox.execute_code")[1]
    assert.are.equal("Cancelled", exec.attributes["error.type"])
    assert.are.equal("error", exec.status_code)
  end)

  it("make a span for template.ensure with what it found or built", function()
    local builder = provider.Template.new {}
    builder:ensure { name = "base", packages = { "numpy" } }
    builder:ensure { name = "base", packages = { "numpy" } }
    local spans = named("glsb.template.ensure")
    assert.are.equal(2, #spans)
    assert.is_true(spans[1].attributes["glsb.template.built"])
    assert.is_false(spans[2].attributes["glsb.template.built"])
    assert.are.equal("fake", spans[1].attributes["glsb.provider"])
    assert.are.equal(spans[1].attributes["glsb.template.hash"], spans[2].attributes["glsb.template.hash"])
    assert.matches("^base%-", spans[1].attributes["glsb.template.id"])
    backend.build_failure = "builder down"
    assert.has_error(function() builder:ensure { name = "other" } end)
    local failed = named("glsb.template.ensure")[3]
    assert.are.equal("TemplateBuildError", failed.attributes["error.type"])
    assert.are.equal("template_build", failed.attributes["glsb.error.stage"])
  end)

  it("make a glsb.pool.acquire span: a hit has no create under it, a miss creates directly under it", function()
    local registry = require "glsb.registry"
    provider.Sandbox._alive = function(self) return backend.live[self.sandbox_id] == true end
    registry.register("tracefake", provider)
    local pool = glsb.pool("tracefake", { name = "traced", size = 1, create = { retry = false, api_key = "sk-pool-secret-1" },
      reconcile_interval = 0.2, primary_lock_ttl = 1 })
    finally(function()
      pcall(pool.shutdown, pool, { graceful = false })
      registry.unregister("tracefake")
    end)
    pool:start()
    assert.is_true(pool:wait_idle(1, 5))
    local root = trace.start_span("script")
    trace.with_span(root, function()
      pool:acquire():terminate()                    -- the warm one
      pool:acquire({ policy = "direct_create" })    -- none idle yet: created on the spot
    end)
    root:finish()
    local acquires = named("glsb.pool.acquire")
    assert.are.equal(2, #acquires)
    for _, a in ipairs(acquires) do
      assert.are.equal(root.span_id, a.parent_span_id)
      assert.are.equal("traced", a.attributes["glsb.pool.name"])
      assert.are.equal("tracefake", a.attributes["glsb.provider"])
      assert.is_string(a.attributes["glsb.sandbox.id"])
    end
    local created_under = {}
    for _, c in ipairs(named("glsb.sandbox.create")) do
      local p = c.parent_span_id or "none" -- the pool's warm-up creates are roots of their own
      created_under[p] = (created_under[p] or 0) + 1
    end
    assert.is_true(created_under.none >= 1)
    assert.is_nil(created_under[acquires[1].span_id])
    assert.are.equal(1, created_under[acquires[2].span_id])
  end)
end)
