-- Span trees of real scripts, exported over OTLP/HTTP to the loopback receiver (which checks every
-- export against the OTLP data model): the local provider, and E2B against its emulator, with a
-- failed create and its retries, a TIMEOUT and an UNKNOWN execution.
local glsb = require "glsb"
local trace = require "glsb.trace"
local receiver = require "support.otlp_receiver"

local Status = glsb.ExecutionStatus

-- Everything under the span named root_name: the receiver's tree of that trace, where only operation
-- spans (glsb.*) and the script's own are kept when ops_only.
local function script_tree(rec, got, root, ops_only)
  return rec:tree(root.trace_id, got, function(s)
    if ops_only then return s.name:match("^glsb%.") ~= nil or s.name == "script" end
    return true
  end)
end

local function attrs_of(rec, got, name, n)
  return rec:named(name, got)[n or 1].attributes
end

describe("glsb.trace span trees #trace", function()
  local rec, prev_log
  setup(function()
    rec = receiver.start()
    prev_log = glsb.log.set_handler(function() end)
  end)
  teardown(function()
    trace.shutdown()
    glsb.log.set_handler(prev_log)
    if rec then rec:stop() end
  end)
  before_each(function()
    rec:reset()
    trace.configure { endpoint = rec.endpoint, service_name = "spec", schedule_delay = 0.05 }
  end)
  after_each(function() trace.shutdown() end)

  local function flushed()
    assert.is_true(trace.force_flush(10))
    local got = rec:received()
    assert.are.same({}, got.errors, "exports that break the OTLP data model")
    return got
  end

  describe("on the local provider #local", function()
    local helper = require "local.helper"
    local root_dir
    setup(function() root_dir = helper.private_tmp() end)
    teardown(function() helper.rm_rf(root_dir) end)

    it("create -> execute -> workspace -> terminate, and a TIMEOUT", function()
      local root = trace.start_span("script")
      local r, t
      trace.with_span(root, function()
        local sb = glsb.create("local", { host_workspace_dir = root_dir })
        r = sb:execute_code("print(6 * 7)")
        t = sb:execute_code("import time\ntime.sleep(5)", { timeout = 0.5 })
        glsb.write_workspace_file(sb, { relative_path = "a.txt", data = "hello" })
        glsb.run_workspace_command(sb, { "/bin/cat", "a.txt" })
        sb:terminate()
      end)
      root:finish()
      assert.are.equal(Status.SUCCESS, r.status)
      assert.are.equal(Status.TIMEOUT, t.status)
      local got = flushed()
      assert.are.equal(table.concat({
        "script",
        "  glsb.sandbox.create",
        "    glsb.sandbox.create.attempt",
        "  glsb.sandbox.execute_code",
        "  glsb.sandbox.execute_code",
        "  glsb.workspace.write",
        "  glsb.workspace.run",
        "  glsb.sandbox.terminate",
      }, "\n"), script_tree(rec, got, root))
      local create = attrs_of(rec, got, "glsb.sandbox.create")
      assert.are.equal("local", create["glsb.provider"])
      assert.matches("^local%-", create["glsb.sandbox.id"])
      assert.are.equal("python", create["glsb.language"])
      local execs = rec:named("glsb.sandbox.execute_code", got)
      assert.are.equal("success", execs[1].attributes["glsb.execution.status"])
      assert.are.equal(0, execs[1].status.code)
      assert.are.equal("timeout", execs[2].attributes["glsb.execution.status"])
      assert.are.equal(2, execs[2].status.code)
      assert.are.equal(5, tonumber(attrs_of(rec, got, "glsb.workspace.write")["glsb.transfer.bytes"].int))
      assert.are.equal(0, tonumber(attrs_of(rec, got, "glsb.workspace.run")["glsb.execution.exit_code"].int))
      assert.are.equal("spec", execs[1].resource["service.name"])
    end)

    it("a template build: glsb.template.ensure with a child per build step, the failing one marked", function()
      local tmp = helper.private_tmp()
      finally(function() helper.rm_rf(tmp) end)
      os.execute("chmod 755 " .. helper.q(tmp))
      local b = glsb.template("local", { cache_dir = tmp .. "/cache", progress = false })
      local root = trace.start_span("script")
      local built, ok, err
      trace.with_span(root, function()
        built = b:ensure { name = "trace-steps", run = { "echo one", "echo two" } }
        ok, err = pcall(b.ensure, b, { name = "trace-broken", run = { "echo fine", "exit 7" } })
      end)
      root:finish()
      assert.is_true(built.built)
      assert.is_false(ok)
      assert.is_true(glsb.errors.is(err, glsb.errors.TemplateBuildError), tostring(err))
      local got = flushed()
      assert.are.equal(table.concat({
        "script",
        "  glsb.template.ensure",
        "    glsb.template.build_step",
        "    glsb.template.build_step",
        "  glsb.template.ensure",
        "    glsb.template.build_step",
        "    glsb.template.build_step",
      }, "\n"), script_tree(rec, got, root))
      local ensures, steps = {}, {}
      for _, s in ipairs(rec:named("glsb.template.ensure", got)) do ensures[s.attributes["glsb.template.name"]] = s end
      for _, s in ipairs(rec:named("glsb.template.build_step", got)) do
        local list = steps[s.parentSpanId] or {}
        steps[s.parentSpanId] = list
        list[#list + 1] = s
      end
      local function steps_of(name)
        local list = steps[ensures[name].spanId]
        table.sort(list, function(x, y) return x.attributes["glsb.step"] < y.attributes["glsb.step"] end)
        return list
      end
      local good, bad = steps_of("trace-steps"), steps_of("trace-broken")
      assert.are.same({ "1", "2" }, { good[1].attributes["glsb.step"], good[2].attributes["glsb.step"] })
      assert.are.same({ 0, 0 }, { good[1].status.code, good[2].status.code })
      assert.are.equal(2, ensures["trace-broken"].status.code)
      assert.are.same({ "1", "2" }, { bad[1].attributes["glsb.step"], bad[2].attributes["glsb.step"] })
      assert.are.equal(0, bad[1].status.code)
      assert.are.equal(2, bad[2].status.code) -- the step that failed, with the build's error
      assert.are.equal("exception", bad[2].events[1].name)
      -- step spans carry the step number only: no command text
      for _, st in ipairs(bad) do
        for k, v in pairs(st.attributes) do assert.is_nil(tostring(v):find("exit 7", 1, true), k) end
      end
    end)
  end)

  describe("on the E2B emulator #e2b", function()
    local emulator = require "e2b.emulator"
    local emu
    setup(function() emu = emulator.start() end)
    teardown(function() if emu then emu:stop() end end)
    after_each(function() if emu then emu:clear_faults() end end)

    -- the script's operations, each with its client spans, under one root
    local function run_script(fn)
      local root = trace.start_span("script")
      local ok, err = pcall(trace.with_span, root, fn)
      root:finish()
      return root, ok, err
    end

    it("create -> execute -> terminate, each operation over its HTTP client spans", function()
      local r
      local root = run_script(function()
        local sb = glsb.create("e2b", emu:opts { timeout = 60 })
        r = sb:execute_code("print(6 * 7)")
        sb:terminate()
      end)
      assert.are.equal("42\n", r.stdout)
      local got = flushed()
      assert.are.equal(table.concat({
        "script",
        "  glsb.sandbox.create",
        "    glsb.sandbox.create.attempt",
        "  glsb.sandbox.execute_code",
        "  glsb.sandbox.terminate",
      }, "\n"), script_tree(rec, got, root, true))
      -- every operation made its requests under it, with the HTTP conventions
      local by_id = {}
      for _, s in ipairs(got.spans) do by_id[s.spanId] = s end
      local clients = {}
      for _, s in ipairs(got.spans) do
        if s.kind == 3 and s.traceId == root.trace_id then
          local op = by_id[s.parentSpanId]
          clients[op.name] = (clients[op.name] or 0) + 1
          assert.are.equal("127.0.0.1", s.attributes["server.address"])
          assert.is_string(s.attributes["url.full"])
          assert.is_nil(s.attributes["url.full"]:find(emu.api_key, 1, true))
          assert.is_table(s.attributes["http.response.status_code"])
        end
      end
      assert.is_true((clients["glsb.sandbox.create.attempt"] or 0) >= 1)
      assert.is_true((clients["glsb.sandbox.execute_code"] or 0) >= 1)
      assert.is_true((clients["glsb.sandbox.terminate"] or 0) >= 1)
      local create = attrs_of(rec, got, "glsb.sandbox.create")
      assert.are.equal("e2b", create["glsb.provider"])
      assert.is_string(create["glsb.sandbox.id"])
    end)

    it("a create that failed twice with 503: three attempts, the failed ones marked with their cause", function()
      emu:fault { method = "POST", path = "^/v2/sandboxes$", status = 503, times = 2 }
      local root = run_script(function()
        local sb = glsb.create("e2b", emu:opts { timeout = 60, retry = { base_delay = 0.05, jitter = 0 } })
        sb:terminate()
      end)
      local got = flushed()
      local attempts = {}
      for _, s in ipairs(rec:named("glsb.sandbox.create.attempt", got)) do
        if s.traceId == root.trace_id then attempts[#attempts + 1] = s end
      end
      table.sort(attempts, function(a, b) return tonumber(a.attributes["glsb.retry.attempt"].int)
        < tonumber(b.attributes["glsb.retry.attempt"].int) end)
      assert.are.equal(3, #attempts)
      for i = 1, 2 do
        local a = attempts[i]
        assert.are.equal(2, a.status.code)
        assert.are.equal("SandboxStartError", a.attributes["error.type"])
        assert.is_true(a.attributes["glsb.error.transient"])
        assert.are.equal("exception", a.events[1].name)
        -- its HTTP span says 503
        local client
        for _, s in ipairs(got.spans) do if s.parentSpanId == a.spanId then client = s end end
        assert.are.equal("503", client.attributes["error.type"])
        assert.are.equal(503, tonumber(client.attributes["http.response.status_code"].int))
      end
      assert.are.equal(0, attempts[3].status.code)
    end)

    it("a template build: glsb.template.ensure with a child per build step, the failing one marked", function()
      local b = glsb.template("e2b", { api_key = emu.api_key, api_url = emu.base, progress = false })
      local root = run_script(function()
        b:ensure { name = "glsb-trace-steps", env = { A = "1" }, run = { "echo one", "echo two" } }
        pcall(b.ensure, b, { name = "glsb-trace-broken", run = { "echo fine", "exit 7" } })
      end)
      local got = flushed()
      local ensures = {}
      for _, s in ipairs(rec:named("glsb.template.ensure", got)) do
        if s.traceId == root.trace_id then ensures[s.attributes["glsb.template.name"]] = s end
      end
      local function steps_of(parent)
        local out = {}
        for _, s in ipairs(got.spans) do
          if s.parentSpanId == parent.spanId and s.name == "glsb.template.build_step" then out[#out + 1] = s end
        end
        table.sort(out, function(a, b2) return a.attributes["glsb.step"] < b2.attributes["glsb.step"] end)
        return out
      end
      local ok_steps = steps_of(ensures["glsb-trace-steps"])
      assert.is_true(#ok_steps >= 3, "steps: " .. #ok_steps)
      for _, st in ipairs(ok_steps) do assert.are.equal(0, st.status.code) end
      assert.is_true(ensures["glsb-trace-steps"].attributes["glsb.template.built"])
      local broken = ensures["glsb-trace-broken"]
      assert.are.equal(2, broken.status.code)
      assert.are.equal("TemplateBuildError", broken.attributes["error.type"])
      local bad_steps = steps_of(broken) -- "1", "2", "base" (E2B names the FROM step "base")
      assert.are.same({ "1", "2", "base" }, { bad_steps[1].attributes["glsb.step"],
        bad_steps[2].attributes["glsb.step"], bad_steps[3].attributes["glsb.step"] })
      assert.are.equal(0, bad_steps[1].status.code)
      assert.are.equal(0, bad_steps[3].status.code)
      assert.are.equal(2, bad_steps[2].status.code)
      assert.are.equal("exception", bad_steps[2].events[1].name)
      -- step spans carry the step number only: no command text
      for _, st in ipairs(bad_steps) do
        for k, v in pairs(st.attributes) do assert.is_nil(tostring(v):find("exit 7", 1, true), k) end
      end
    end)

    it("a TIMEOUT (sandbox killed mid-request) and an UNKNOWN (stream cut after delivery)", function()
      local t, u
      run_script(function()
        local sb = glsb.create("e2b", emu:opts { timeout = 60 })
        emu:fault { plane = "jupyter", path = "^/execute$", action = "kill_sandbox", afterMs = 300 }
        t = sb:execute_code("import time\nprint('start', flush=True)\ntime.sleep(5)")
        local sb2 = glsb.create("e2b", emu:opts { timeout = 60 })
        emu:fault { plane = "jupyter", path = "^/execute$", action = "cut_after_bytes", bytes = 60 }
        u = sb2:execute_code("import time\nprint('a', flush=True)\ntime.sleep(0.3)\nprint('b')")
        pcall(sb.terminate, sb)
        sb2:terminate()
      end)
      assert.are.equal(Status.TIMEOUT, t.status)
      assert.are.equal(Status.UNKNOWN, u.status)
      local got = flushed()
      local execs = rec:named("glsb.sandbox.execute_code", got)
      assert.are.equal(2, #execs)
      table.sort(execs, function(a, b) return #a.start < #b.start or (#a.start == #b.start and a.start < b.start) end)
      assert.are.equal("timeout", execs[1].attributes["glsb.execution.status"])
      assert.are.equal("unknown", execs[2].attributes["glsb.execution.status"])
      assert.is_false(execs[2].attributes["glsb.failure.retry_safe"])
      for _, s in ipairs(execs) do assert.are.equal(2, s.status.code) end
    end)
  end)
end)
