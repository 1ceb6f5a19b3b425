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

    it("defaults to the code interpreter template as the base", function()
      local p = e2b_template.build_plan(require("glsb.template").normalize { name = "x" })
      assert.equal("code-interpreter-v1", p.body.fromTemplate)
      assert.same({}, p.body.steps)
    end)

    it("lower-cases names for E2B", function()
      assert.equal("my-base", e2b_template.e2b_name("My-Base"))
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
      assert.matches("^glsb%-e2b%-spec:glsb%-%x+$", res.ref.name)
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
  end)
end)
