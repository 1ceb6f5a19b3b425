-- The E2B template builder against the E2B emulator. #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local e2b_template = require "glsb.providers.e2b.template"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("e2b template builder #e2b", function()
  describe("build_plan (no I/O)", function()
    local spec = require("glsb.template").normalize {
      name = "My-Base", base_image = "python:3.12", packages = { "numpy", "pandas==2.2.0" },
      apt_packages = { "curl" }, env = { B = "2", A = "1" }, workdir = "/app",
      files = { { path = "main.py", data = "print(1)\n", mode = 493 }, { path = "/etc/x.conf", data = "x" } },
      run = { "echo hi" }, start_cmd = "python -m http.server", ready_cmd = "sleep 1",
    }
    local plan = e2b_template.build_plan(spec)

    it("maps the spec to v2 steps in Dockerfile order", function()
      local types = {}
      for i, s in ipairs(plan.body.steps) do types[i] = s.type end
      assert.same({ "ENV", "RUN", "RUN", "COPY", "COPY", "RUN", "WORKDIR" }, types)
      assert.same({ "A", "1", "B", "2" }, plan.body.steps[1].args)
      assert.same({ "apt-get update && DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y curl",
        "root" }, plan.body.steps[2].args)
      assert.same({ "pip install numpy pandas==2.2.0", "root" }, plan.body.steps[3].args)
      assert.same({ "etc/x.conf", "/etc/x.conf", "", "" }, plan.body.steps[4].args)
      assert.same({ "app/main.py", "/app/main.py", "", "0755" }, plan.body.steps[5].args)
      assert.same({ "echo hi" }, plan.body.steps[6].args)
      assert.same({ "/app" }, plan.body.steps[7].args)
      assert.equal("python:3.12", plan.body.fromImage)
      assert.is_nil(plan.body.fromTemplate)
      assert.equal("python -m http.server", plan.body.startCmd)
      assert.equal("sleep 1", plan.body.readyCmd)
      assert.is_false(plan.body.force)
    end)

    it("gives every COPY a files hash and one tar.gz upload", function()
      assert.equal(2, #plan.uploads)
      for i, idx in ipairs({ 4, 5 }) do
        local s = plan.body.steps[idx]
        assert.matches("^%x+$", s.filesHash)
        assert.equal(64, #s.filesHash)
        assert.equal(s.filesHash, plan.uploads[i].hash)
      end
      assert.are_not.equal(plan.uploads[1].hash, plan.uploads[2].hash)
    end)

    -- issue 15 #3: a build's start/ready commands replace the base's, and the code interpreter starts
    -- Jupyter only through its own (code-interpreter template/template.py; infra finalize/builder.go)
    it("chains a start or ready command after the code interpreter's on that base", function()
      local p = e2b_template.build_plan(require("glsb.template").normalize {
        name = "x", start_cmd = "serve", ready_cmd = "check" })
      assert.equal("sudo systemctl start jupyter && (serve)", p.body.startCmd)
      assert.equal('curl -s -o /dev/null -w "%{http_code}" http://localhost:49999/health | grep -q "200" && (check)',
        p.body.readyCmd)
      p = e2b_template.build_plan(require("glsb.template").normalize { name = "x", ready_cmd = "check" })
      assert.equal("sudo systemctl start jupyter", p.body.startCmd)
      p = e2b_template.build_plan(require("glsb.template").normalize { name = "x", base_image = "python:3", start_cmd = "serve" })
      assert.equal("serve", p.body.startCmd)
      assert.is_nil(p.body.readyCmd)
    end)

    it("defaults to the code interpreter template as the base", function()
      local p = e2b_template.build_plan(require("glsb.template").normalize { name = "x" })
      assert.equal("code-interpreter-v1", p.body.fromTemplate)
      assert.same({}, p.body.steps)
    end)

    it("lower-cases names for E2B", function()
      assert.equal("my-base", e2b_template.e2b_name("My-Base"))
    end)

    -- issue 15 #1: E2B names match ^[a-z0-9-_]+$ (only tags may contain dots; infra shared/pkg/id/id.go)
    it("gives E2B a name without dots or other characters outside [a-z0-9_-]", function()
      assert.equal("my-base-v2_x", e2b_template.e2b_name("My.Base v2_x"))
      assert.matches("^glsb%-%x+%.%x+$", e2b_template.build_tag(string.rep("ab", 32)))
    end)

    -- issue 15 #2: CPU 1..32, 1 or even; memory >= 128 MiB and even (infra api/internal/team/limits.go)
    it("rounds CPU and memory up to what E2B builds accept, and refuses more than 32 CPUs clearly", function()
      local function res(cpu, mem) return { e2b_template.resources { cpu = cpu, memory_mb = mem } } end
      assert.same({ 1, 128 }, res(0.5, 100))
      assert.same({ 4, 1002 }, res(3, 1001))
      assert.same({ 4, 2048 }, res(2.5, 2047.5))
      assert.same({ 32 }, res(31))
      local ok, err = pcall(e2b_template.resources, { cpu = 33 })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
      assert.matches("at most 32 CPUs.*cpu = 33", err.message)
    end)
  end)

  describe("against the emulator", function()
    local emu

    setup(function() emu = emulator.start() end)
    teardown(function() if emu then emu:stop() end end)
    after_each(function() emu:clear_faults() end)

    local function builder(extra)
      local o = { api_key = emu.api_key, api_url = emu.base, progress = false }
      for k, v in pairs(extra or {}) do o[k] = v end
      return glsb.template("e2b", o)
    end

    local spec = {
      name = "glsb-e2b-spec",
      files = { { path = "/home/user/app/hello.txt", data = "hello from the template\n" } },
      run = { "echo built > /home/user/marker" },
      env = { TEMPLATE_ENV = "te" },
    }

    it("builds once, streams logs, and the template makes sandboxes", function()
      local logs = {}
      local uploads = emu:fault { plane = "upload", action = "delay", delayMs = 0, times = -1 }
      local b = builder { on_log = function(e) logs[#logs + 1] = e end }
      local res = b:ensure(spec)
      assert.is_true(res.built)
      assert.is_string(res.ref.template_id)
      assert.is_string(res.ref.build_id)
      assert.matches("^glsb%-e2b%-spec:glsb%-%x+%.%x+$", res.ref.name)
      assert.is_true(#logs > 0)
      assert.is_string(logs[1].message)
      local fired
      for _, f in ipairs(emu:faults()) do if f.id == uploads.ids[1] then fired = f.fired end end
      assert.equal(1, fired)

      for _, ref in ipairs({ res.ref.template_id, res.ref.name }) do
        local sb = glsb.create("e2b", emu:opts { template = ref })
        finally(function() pcall(sb.terminate, sb) end)
        local r = sb:execute_command("cat /home/user/app/hello.txt /home/user/marker; echo $TEMPLATE_ENV")
        assert.equal(Status.SUCCESS, r.status)
        assert.equal("hello from the template\nbuilt\nte\n", r.stdout)
        sb:terminate()
      end

      -- the same spec again: found by its content tag, nothing built or uploaded
      local again = b:ensure(spec)
      assert.is_false(again.built)
      assert.equal(res.ref.template_id, again.ref.template_id)
      assert.equal(res.ref.build_id, again.ref.build_id)
      local info = emu:api("GET", "/templates/" .. res.ref.template_id)
      assert.equal(1, #info.builds)
    end)

    it("rebuilds when the content changes, without re-uploading files the server has", function()
      local uploads = emu:fault { plane = "upload", action = "delay", delayMs = 0, times = -1 }
      local b = builder()
      local first = b:ensure(spec)
      local changed = {}
      for k, v in pairs(spec) do changed[k] = v end
      changed.run = { "echo changed > /home/user/marker" }
      local res = b:ensure(changed)
      assert.is_true(res.built)
      assert.equal(first.ref.template_id, res.ref.template_id)
      assert.are_not.equal(first.ref.build_id, res.ref.build_id)
      local fired
      for _, f in ipairs(emu:faults()) do if f.id == uploads.ids[1] then fired = f.fired end end
      assert.equal(0, fired)
    end)

    it("lists the account's templates and deletes one by name or id (builder:list / delete)", function()
      local b = builder()
      local one = b:ensure { name = "glsb-e2b-list-one", run = { "echo one" } }
      local two = b:ensure { name = "glsb-e2b-list-two", run = { "echo two" } }
      local function listed()
        local out = {}
        for _, t in ipairs(b:list()) do out[t.template_id] = t end
        return out
      end
      local seen = listed()
      for name, res in pairs({ ["glsb-e2b-list-one"] = one, ["glsb-e2b-list-two"] = two }) do
        local t = seen[res.ref.template_id]
        assert.is_table(t, name .. " is not listed")
        assert.equal(name, t.name)
        assert.equal("ready", t.status)
        assert.equal(res.ref.build_id, t.build_id)
      end
      assert.is_true(b:delete("glsb-e2b-list-one"))          -- by name
      assert.is_true(b:delete(two.ref.template_id))           -- by id
      seen = listed()
      assert.is_nil(seen[one.ref.template_id])
      assert.is_nil(seen[two.ref.template_id])
      assert.is_false(b:delete("glsb-e2b-list-one"))         -- nothing by that name any more
      local ok, err = pcall(glsb.create, "e2b", emu:opts { template = one.ref.name })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    end)

    it("raises TemplateBuildError[template_build] with the failing step", function()
      local b = builder()
      local ok, err = pcall(b.ensure, b, { name = "glsb-e2b-broken",
        run = { "x=No-matching; echo \"ERROR: $x-distribution\" >&2; exit 7" } })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError))
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("step 1", err.message)
      -- what the step printed is in the message, once
      local text = tostring(err)
      assert.equal(1, select(2, text:gsub("ERROR: No%-matching%-distribution", "")), text)
    end)

    it("raises TemplateBuildError[template_build] when the archive upload fails", function()
      emu:fault { plane = "upload", status = 500 }
      local b = builder()
      local ok, err = pcall(b.ensure, b, { name = "glsb-e2b-upload", files = { { path = "/tmp/u", data = "u" } } })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError))
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("upload", err.message)
    end)

    it("raises TemplateBuildError for a bad API key, and an argument error for a bad spec", function()
      local b = builder { api_key = "e2b_wrong" }
      local ok, err = pcall(b.ensure, b, spec)
      assert.is_false(ok)
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("401", tostring(err))
      ok, err = pcall(b.ensure, b, { name = "x", bogus = 1 })
      assert.is_false(ok)
      assert.is_string(err, "a bad spec is misuse: a plain argument error")
      assert.matches("unknown field 'bogus'", err)
    end)
    -- A control-plane call whose answer the test looks at (emu:api raises on an error status).
    local function call(method, path, body)
      local http = require "glsb.http"
      return http.json { method = method, url = emu.base .. path, json = body, timeout = 10,
        headers = { ["X-API-KEY"] = emu.api_key, Connection = "close" } }
    end

    -- Requests a build of `name` with `tags` and starts it with `steps` (fromImage); -> templateID, buildID.
    local function raw_build(name, tags, steps)
      local r = call("POST", "/v3/templates", { name = name, tags = tags })
      assert.equal(202, r.status, r.body)
      local tid, bid = r.json.templateID, r.json.buildID
      local body = require("glsb.http").encode_json({ fromImage = "e2bdev/base", steps = steps or {} })
      r = require("glsb.http").request { method = "POST", url = emu.base .. "/v2/templates/" .. tid .. "/builds/" .. bid,
        body = (body:gsub('"steps":{}', '"steps":[]')), timeout = 10,
        headers = { ["X-API-KEY"] = emu.api_key, ["Content-Type"] = "application/json", Connection = "close" } }
      assert.equal(202, r.status, r.body)
      return tid, bid
    end

    local function build_status(tid, bid)
      return call("GET", "/templates/" .. tid .. "/builds/" .. bid .. "/status").json.status
    end

    local function wait_status(tid, bid, want)
      local loop = require "glsb.loop"
      local deadline = loop.now() + 10
      while build_status(tid, bid) ~= want and loop.now() < deadline do loop.sleep(0.05) end
      assert.equal(want, build_status(tid, bid))
    end

    local function content_tag(ref) return ref.name:match(":(glsb%-%x+)") end

    describe("names, resources and uploads as E2B takes them (issue 15 #1, #2, #5)", function()
      it("the emulator refuses what E2B refuses", function()
        local r = call("POST", "/v3/templates", { name = "my.base" })
        assert.equal(400, r.status)
        assert.equal("Invalid name: invalid template ID: my.base", r.json.message)
        r = call("POST", "/v3/templates", { name = "ok-name", cpuCount = 3 })
        assert.equal(400, r.status)
        assert.equal("CPU count must be 1 or an even number", r.json.message)
        r = call("POST", "/v3/templates", { name = "ok-name", memoryMB = 1001 })
        assert.equal("Memory must be divisible by 2", r.json.message)
        r = call("POST", "/v3/templates", { name = "ok-name", cpuCount = 34 })
        assert.equal("CPU count must be at most 32", r.json.message)
        r = call("POST", "/v3/templates", { name = "ok-name", tags = { "Bad Tag" } })
        assert.equal(400, r.status)
        assert.matches("^Invalid tag: ", r.json.message)
        r = call("POST", "/v3/templates", { name = "ok-name:v1.2", memoryMB = 1002 })
        assert.equal(202, r.status, r.body)
        assert.same({ "v1.2" }, r.json.tags)
      end)

      it("builds a spec whose name has dots, with CPU and memory E2B accepts", function()
        local b = builder()
        local res = b:ensure { name = "glsb.dotted.Name", cpu = 3, memory_mb = 1001 }
        assert.is_true(res.built)
        assert.matches("^glsb%-dotted%-name:", res.ref.name)
        local info = emu:api("GET", "/templates/" .. res.ref.template_id)
        assert.equal(4, info.builds[1].cpuCount)
        assert.equal(1002, info.builds[1].memoryMB)
        assert.is_false(b:ensure({ name = "glsb.dotted.Name", cpu = 3, memory_mb = 1001 }).built)
      end)

      it("uploads COPY archives with no Content-Type, as the signed URL wants", function()
        -- the emulator's upload URL refuses any Content-Type with S3/GCS's 403 SignatureDoesNotMatch
        local res = builder():ensure { name = "glsb-e2b-upload-ctype", files = { { path = "/tmp/ct", data = "ct" } } }
        assert.is_true(res.built)
      end)
    end)

    describe("start and ready commands on the code interpreter (issue 15 #3)", function()
      it("a template with its own start command still runs code", function()
        local res = builder():ensure { name = "glsb-e2b-ci-start", start_cmd = "echo started > /tmp/started.txt",
          ready_cmd = "test -f /tmp/started.txt" }
        local sb = glsb.create("e2b", emu:opts { template = res.ref.name, timeout = 60 })
        finally(function() sb:terminate() end)
        local r = sb:execute_code("print(open('/tmp/started.txt').read(), end='')")
        assert.equal(Status.SUCCESS, r.status, tostring(r))
        assert.equal("started\n", r.stdout)
      end)

      it("the emulator runs no code interpreter where the start command does not start it", function()
        -- what E2B does with a start command of the template's own on the code interpreter base
        local http = require "glsb.http"
        local r = call("POST", "/v3/templates", { name = "glsb-e2b-ci-replaced" })
        local tid, bid = r.json.templateID, r.json.buildID
        r = http.request { method = "POST", url = emu.base .. "/v2/templates/" .. tid .. "/builds/" .. bid,
          body = http.encode_json { fromTemplate = "code-interpreter-v1", startCmd = "true" }:gsub('"steps":{}', '"steps":[]'),
          timeout = 10, headers = { ["X-API-KEY"] = emu.api_key, ["Content-Type"] = "application/json", Connection = "close" } }
        assert.equal(202, r.status, r.body)
        wait_status(tid, bid, "ready")
        local sb = glsb.create("e2b", emu:opts { template = "glsb-e2b-ci-replaced", timeout = 60 })
        finally(function() sb:terminate() end)
        local x = sb:execute_code("print(1)")
        assert.equal(Status.ERROR, x.status)
        assert.matches("port is not open", x.error)
      end)
    end)

    describe("tags move when a build is requested (issue 15 #12)", function()
      it("a failed rebuild of the same content does not hide the ready build", function()
        local b = builder()
        local s1 = { name = "glsb-e2b-tag-failed", run = { "echo one" } }
        local first = b:ensure(s1)
        assert.is_true(first.built)
        -- someone rebuilds the same content; it fails (its tags were assigned when it was requested)
        local tid, bid = raw_build(s1.name, { content_tag(first.ref) }, { { type = "RUN", args = { "exit 3" }, force = false } })
        wait_status(tid, bid, "error")
        local again = b:ensure(s1)
        assert.is_false(again.built)
        assert.equal(first.ref.build_id, again.ref.build_id)
      end)

      it("a build of the same content still running is waited for, not built twice", function()
        local template = require "glsb.template"
        local s1 = { name = "glsb-e2b-tag-running", run = { "echo two" } }
        local tag = e2b_template.tag(template.hash(template.normalize(s1)))
        local tid, bid = raw_build(s1.name, { "default", tag }, { { type = "RUN", args = { "sleep 1" }, force = false } })
        assert.equal("building", build_status(tid, bid))
        local res = builder():ensure(s1)
        assert.is_false(res.built)
        assert.equal(bid, res.ref.build_id)
        assert.equal(tid, res.ref.template_id)
      end)

      it("finds its build past the first page of the builds list (100 a page)", function()
        local b = builder()
        local s1 = { name = "glsb-e2b-tag-paged", run = { "echo three > /home/user/three.txt" } }
        local first = b:ensure(s1)
        local tid, bid
        for _ = 1, 100 do tid, bid = raw_build(s1.name, { "default" }) end
        wait_status(tid, bid, "ready")
        local r = call("GET", "/templates/" .. tid)
        assert.equal(100, #r.json.builds)
        assert.is_string(r.headers["x-next-token"] or r.headers["X-Next-Token"])
        local again = b:ensure(s1)
        assert.is_false(again.built)
        assert.equal(first.ref.build_id, again.ref.build_id)
        -- and a sandbox made from the ref is that build
        local sb = glsb.create("e2b", emu:opts { template = again.ref.name })
        finally(function() sb:terminate() end)
        assert.equal("three\n", sb:execute_command("cat /home/user/three.txt").stdout)
      end)
    end)
  end)
end)
