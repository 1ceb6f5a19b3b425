-- The OpenSandbox template builder (snapshots) against the OpenSandbox emulator. #opensandbox
local glsb = require "glsb"
local emulator = require "opensandbox.emulator"
local ostemplate = require "glsb.providers.opensandbox.template"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("opensandbox template builder #opensandbox", function()
  describe("steps (no I/O)", function()
    it("maps a spec to apt, pip, workdir, files, run, in that order", function()
      local spec = require("glsb.template").normalize {
        name = "x", packages = { "numpy" }, apt_packages = { "curl" }, workdir = "/app",
        files = { { path = "main.py", data = "print(1)\n", mode = 493 }, { path = "/etc/x.conf", data = "x" } },
        run = { "echo hi" },
      }
      local steps = ostemplate.steps(spec)
      assert.equal(5, #steps)
      assert.matches("^apt%-get update", steps[1].command)
      assert.matches("pip install", steps[2].command)
      assert.equal("mkdir -p /app", steps[3].command)
      -- (normalize sorts files by path)
      assert.same({ { path = "/etc/x.conf", data = "x" }, { path = "/app/main.py", data = "print(1)\n", mode = 493 } },
        steps[4].files)
      assert.equal("echo hi", steps[5].command)
      assert.equal("my-base@glsb-0123456789abcdef", ostemplate.snapshot_name("my-base", ("0123456789abcdef"):rep(4)))
    end)
  end)

  describe("against the emulator", function()
    local emu, prev_log

    setup(function()
      emu = emulator.start()
      prev_log = glsb.log.set_handler(function() end)
    end)
    teardown(function()
      glsb.log.set_handler(prev_log)
      if emu then emu:stop() end
    end)
    after_each(function() emu:clear_faults() end)

    local function builder(extra)
      local o = { domain = emu.base, api_key = emu.api_key, progress = false }
      for k, v in pairs(extra or {}) do o[k] = v end
      return glsb.template("opensandbox", o)
    end

    local spec = {
      name = "glsb-os-spec",
      files = { { path = "app/hello.txt", data = "hello from the template\n" },
        { path = "/opt/tool/run.sh", data = "#!/bin/sh\necho tool\n", mode = 493 } },
      run = { "echo built > /workspace/marker", "echo to-stderr >&2" },
      env = { TEMPLATE_ENV = "te" },
    }

    it("builds a snapshot once, logs every step, deletes the build sandbox; create restores it", function()
      local logs = {}
      local b = builder { on_log = function(e) logs[#logs + 1] = e end }
      local res = b:ensure(spec)
      assert.is_true(res.built)
      assert.matches("^%x+%-", res.ref.template_id)
      assert.matches("^glsb%-os%-spec@glsb%-%x+$", res.ref.name)
      local text = {}
      for _, e in ipairs(logs) do text[#text + 1] = e.message end
      text = table.concat(text, "\n")
      assert.matches("step 1/3: copy 2 files", text)
      assert.matches("step 3/3: run echo to%-stderr", text)
      assert.matches("to%-stderr", text)
      local snap = emu:api("GET", "/snapshots/" .. res.ref.template_id)
      assert.equal("Ready", snap.status.state)
      assert.equal(res.ref.name, snap.name)
      assert.same({}, emu:leftovers(), "the build sandbox is gone")

      for _, ref in ipairs({ res.ref.template_id, res.ref.name, "glsb-os-spec", res.ref }) do
        local sb = glsb.create("opensandbox", emu:opts { template = ref })
        finally(function() pcall(sb.terminate, sb) end)
        local r = sb:execute_command("cat /workspace/app/hello.txt /workspace/marker; /opt/tool/run.sh; echo $TEMPLATE_ENV")
        assert.equal(Status.SUCCESS, r.status, tostring(r))
        assert.equal("hello from the template\nbuilt\ntool\nte\n", r.stdout)
        sb:terminate()
      end

      -- the same spec again: found by its name and content hash, nothing built
      local again = b:ensure(spec)
      assert.is_false(again.built)
      assert.equal(res.ref.template_id, again.ref.template_id)
      assert.equal(1, #emu:state().snapshots)
    end)

    it("rebuilds when the content changes; the bare name then means the newest", function()
      local b = builder()
      local first = b:ensure(spec)
      local changed = {}
      for k, v in pairs(spec) do changed[k] = v end
      changed.run = { "echo changed > /workspace/marker" }
      local res = b:ensure(changed)
      assert.is_true(res.built)
      assert.are_not.equal(first.ref.template_id, res.ref.template_id)
      local sb = glsb.create("opensandbox", emu:opts { template = "glsb-os-spec" })
      finally(function() pcall(sb.terminate, sb) end)
      assert.equal("changed\n", sb:execute_command("cat /workspace/marker").stdout)
    end)

    it("a failing step is TemplateBuildError[template_build] naming it; the build sandbox is deleted anyway", function()
      local b = builder()
      local ok, err = pcall(b.ensure, b, { name = "glsb-os-broken", run = { "true", "echo why >&2; exit 7" } })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("step 2", err.message)
      assert.matches("exit 7", err.message)
      assert.matches("why", err.message)
      assert.same({}, emu:leftovers())
    end)

    it("a snapshot that fails to be created is a TemplateBuildError; nothing is left running", function()
      emu:fault { plane = "lifecycle", method = "POST", path = "/snapshots$", status = 409 }
      local b = builder()
      local ok, err = pcall(b.ensure, b, { name = "glsb-os-snapfail", run = { "true" } })
      assert.is_false(ok)
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("snapshot create failed", err.message)
      assert.same({}, emu:leftovers())
    end)

    it("what a snapshot cannot carry is refused; a bad key and a bad spec too", function()
      local b = builder()
      local ok, err = pcall(b.ensure, b, { name = "x", start_cmd = "python -m http.server" })
      assert.is_false(ok)
      assert.matches("start_cmd", err.message)
      b = builder { api_key = "wrong" }
      ok, err = pcall(b.ensure, b, spec)
      assert.is_false(ok)
      assert.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.matches("401", tostring(err))
      ok, err = pcall(b.ensure, b, { name = "x", bogus = 1 })
      assert.is_false(ok)
      assert.is_string(err, "a bad spec is misuse: a plain argument error (glsb.template)")
      assert.matches("unknown field 'bogus'", err)
      ok, err = pcall(glsb.template, "opensandbox", { domain = emu.base, api_kye = "x" })
      assert.is_false(ok)
      assert.matches("unknown option 'api_kye'", err)
      assert.same({}, emu:leftovers())
    end)
  end)
end)
