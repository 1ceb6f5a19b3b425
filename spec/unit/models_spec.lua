-- glsb.models: value sets, ExecutionResult, FailureDetail, SandboxFile.
local models = require "glsb.models"

describe("glsb.models #unit", function()
  it("has string-valued ExecutionStatus, Stage and Language", function()
    local S = models.ExecutionStatus
    assert.are.same({ "error", "success", "timeout", "unknown" },
      (function() local t = {} for _, v in pairs(S) do t[#t + 1] = v end table.sort(t) return t end)())
    local stages = { "create", "health_check", "package_install", "not_initialized", "execute", "upload",
      "download", "terminate", "template_build", "workspace", "pool", "connect", "files", "set_timeout", "info",
      "get_host", "list" }
    for _, s in ipairs(stages) do
      assert.is_true(models.is_stage(s), s)
      assert.are.equal(s, models.Stage[s:upper()])
    end
    assert.are.equal("python", models.Language.PYTHON)
    assert.are.equal("bash", models.Language.BASH)
    assert.are.equal("javascript", models.Language.JAVASCRIPT)
  end)

  it("catches typos and writes on the value sets", function()
    assert.has_error(function() return models.ExecutionStatus.SUCESS end)
    assert.has_error(function() models.Stage.CREATE = "x" end)
  end)

  describe("ExecutionResult", function()
    local R = models.ExecutionResult
    it("derives status from the exit code when not given", function()
      assert.are.equal("success", R.new({ code = 0 }).status)
      assert.are.equal("error", R.new({ exit_code = 2 }).status)
      assert.are.equal(2, R.new({ exit_code = 2 }).code)
      assert.are.equal("error", R.new({ code = 0, error = "NameError" }).status)
      assert.are.equal("unknown", R.new({}).status)
    end)

    it("defaults stdout/stderr to empty strings and rejects bad statuses", function()
      local r = R.new({ status = "timeout" })
      assert.are.equal("", r.stdout)
      assert.are.equal("", r.stderr)
      assert.has_error(function() R.new({ status = "ok" }) end)
    end)

    it("turns a plain failure table into a FailureDetail", function()
      local r = R.new({ status = "error", failure = { exception_type = "TransportError", retry_safe = true } })
      assert.are.equal(models.FailureDetail, getmetatable(r.failure))
      assert.is_true(r.failure.retry_safe)
      assert.is_false(models.FailureDetail.new("ProtocolError").retry_safe, "retry_safe defaults to false")
    end)

    it("takes exception_type only from the closed set glsb.FailureType; the provider's name goes beside it",
      function()
      local F = models.FailureDetail
      for name, value in pairs(models.FailureType) do
        assert.are.equal(value, F.new(value).exception_type, name)
        assert.is_true(models.is_failure_type(value))
      end
      local ok, err = pcall(F.new, "Timeout")
      assert.is_false(ok)
      assert.matches("exception_type must be one of glsb.FailureType %(.*TimeoutError.*%), got Timeout", err)
      assert.has_error(function() R.new({ status = "error", failure = { exception_type = "ThrottlingException" } }) end)
      local f = F.new { exception_type = "RefusedError", provider_type = "ThrottlingException", retry_safe = true }
      assert.are.same({ "RefusedError", "ThrottlingException", true }, { f.exception_type, f.provider_type, f.retry_safe })
      assert.are.equal("ProviderError", F.new(nil).exception_type, "no word: what glsb cannot name")
      assert.has_error(function() models.FailureType.TIMEOUT = "x" end)
    end)

    it("gives every TIMEOUT its word, and keeps a provider's own detail", function()
      local r = R.new({ status = "timeout" })
      assert.are.same({ "TimeoutError", false }, { r.failure.exception_type, r.failure.retry_safe })
      r = R.new({ status = "timeout", failure = { exception_type = "SandboxGoneError" } })
      assert.are.equal("SandboxGoneError", r.failure.exception_type)
      assert.is_nil(R.new({ status = "error", code = 1 }).failure)
    end)

    it("prints readably", function()
      local r = R.new({ status = "success", code = 0, stdout = "hi\n", duration_ms = 12.7,
        failure = { exception_type = "ServerError", provider_type = "ContextRestarting", retry_safe = false } })
      assert.are.equal('ExecutionResult(status=success, code=0, duration_ms=12, stdout="hi\\\n", '
        .. 'failure=FailureDetail(ServerError [ContextRestarting], retry_safe=false))', tostring(r))
    end)
  end)

  describe("SandboxFile", function()
    local F = models.SandboxFile
    it("from_bytes keeps data and filename", function()
      local f = F.from_bytes("a,b\n1,2\n", "data.csv")
      assert.are.equal("data.csv", f.filename)
      assert.are.equal("a,b\n1,2\n", f.data)
      assert.are.equal("SandboxFile(data.csv, 8 bytes)", tostring(f))
    end)

    it("from_path reads the file and defaults the name", function()
      local path = os.tmpname()
      local h = assert(io.open(path, "wb"))
      h:write("\0binary\255")
      h:close()
      local ok, f = pcall(F.from_path, path)
      local g = ok and F.from_path(path, "x.bin")
      os.remove(path)
      assert.is_true(ok, tostring(f))
      assert.are.equal(path:match("[^/]+$"), f.filename)
      assert.are.equal("\0binary\255", f.data)
      assert.are.equal("x.bin", g.filename)
      assert.has_error(function() F.from_path("/nonexistent/glsb-file") end)
    end)

    it("rejects absolute names, '..' and non-strings", function()
      assert.has_error(function() F.from_bytes("x", "/etc/passwd") end)
      assert.has_error(function() F.from_bytes("x", "a/../../b") end)
      assert.has_error(function() F.from_bytes("x", "") end)
      assert.has_error(function() F.from_bytes(42, "a") end)
    end)

    it("normalize accepts any {filename, data} table", function()
      local f = F.normalize({ filename = "sub/a.txt", data = "A" })
      assert.are.equal(F, getmetatable(f))
      assert.are.equal("sub/a.txt", f.filename)
      assert.has_error(function() F.normalize({ filename = "a" }) end)
      assert.has_error(function() F.normalize("a") end)
    end)
  end)
end)
