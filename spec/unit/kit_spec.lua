-- The provider kit: glsb.output (streaming + cap), glsb.outcome (failure -> status),
-- glsb.confine_helper (finding glsb-confine, uploading it once) and registry.lazy_template.
local output = require "glsb.output"
local outcome = require "glsb.outcome"
local confine_helper = require "glsb.confine_helper"
local registry = require "glsb.registry"
local loop = require "glsb.loop"
local glsb = require "glsb"

local Status = glsb.ExecutionStatus

describe("glsb.output #unit", function()
  it("calls back once per line, whatever the pieces, and flushes the last partial line", function()
    local lines = {}
    local s = output.splitter(function(l) lines[#lines + 1] = l end)
    s.push("a")
    s.push("b\nc")
    s.push("\n\nlong")
    for _ = 1, 1000 do s.push("x") end
    s.flush()
    s.flush()
    assert.same({ "ab", "c", "", "long" .. string.rep("x", 1000) }, lines)
  end)

  it("re-raises a cancellation from a callback and logs any other error", function()
    local logged = {}
    local prev = glsb.log.set_handler(function(level, msg) logged[#logged + 1] = level .. " " .. msg end)
    local s = output.splitter(function() error("user bug") end)
    s.push("x\n")
    glsb.log.set_handler(prev)
    assert.matches("warn streaming callback failed: .*user bug", logged[1])
    local ok, err = pcall(loop.run, function()
      local t = loop.spawn(function()
        local c = output.splitter(function() loop.sleep(10) end)
        c.push("line\n")
      end)
      loop.sleep(0.01)
      t:cancel()
      return t:wait()
    end)
    assert.is_false(ok)
    assert.is_true(loop.is_cancelled(err))
  end)

  it("keeps each stream up to the cap, notes and flags what it dropped, streams only what it kept", function()
    local seen = {}
    local c = output.capture({ on_stdout = function(l) seen[#seen + 1] = l end }, 10)
    c:push("stdout", "12345\n")
    c:push("stdout", "6789\nabcdef\n")
    c:push("stderr", "err\n")
    c:dropped("stderr", 7)
    local r = c:finish({})
    assert.equal("12345\n6789" .. output.note(8), r.stdout)
    assert.is_true(r.stdout_truncated)
    assert.equal("err\n" .. output.note(7), r.stderr)
    assert.is_true(r.stderr_truncated)
    assert.same({ "12345", "6789" }, seen)
    local whole = output.capture({})
    whole:push("stdout", "fine")
    local r2 = whole:finish()
    assert.same({ "fine", false, "", false },
      { r2.stdout, r2.stdout_truncated, r2.stderr, r2.stderr_truncated })
  end)

  it("caps a whole string the same way (the base class's backstop)", function()
    local big = string.rep("y", output.CAP + 5)
    local text, cut = output.cap_text(big)
    assert.is_true(cut)
    assert.equal(string.rep("y", output.CAP) .. output.note(5), text)
    assert.same({ "small", false }, { output.cap_text("small") })
  end)

  it("keeps pieces of any size as the same bytes, joined so that few parts remain (issue 25 §1)", function()
    local p = output.pieces()
    local want = {}
    for i = 1, 20000 do
      local s = string.char(65 + i % 26):rep(i % 7 == 0 and 5000 or (i % 3))
      p:add(s)
      want[#want + 1] = s
    end
    local all = table.concat(want)
    assert.equal(#all, p.size)
    -- two parts at most per 4 KiB (a short run of small pieces before a big one): a one-byte piece does not
    -- stay a string of its own
    assert.is_true(#p.parts <= 2 * (#all // 4096) + 2, #p.parts)
    assert.equal(all, p:text())
    assert.equal(all, p:text())
    p:add("tail")
    assert.equal(all .. "tail", p:text())
    p:clear()
    assert.same({ "", 0 }, { p:text(), p.size })
  end)
end)

describe("glsb.outcome #unit", function()
  local function alive(v) return function() return v end end

  it("maps failures to statuses by the contract's rules", function()
    local r = outcome.from_failure({ phase = "connect", code = "COULDNT_CONNECT", retry_safe = true })
    assert.same({ Status.ERROR, true }, { r.status, r.failure.retry_safe })
    r = outcome.from_failure({ phase = "receive", code = "OPERATION_TIMEDOUT", timeout = true }, { what = "x" })
    assert.equal(Status.TIMEOUT, r.status)
    assert.matches("^x: timed out", r.error)
    r = outcome.from_failure({ phase = "receive", code = "RECV_ERROR" }, { what = "x", alive = alive(true) })
    assert.same({ Status.UNKNOWN, false }, { r.status, r.failure.retry_safe })
    assert.matches("may have run", r.error)
    r = outcome.from_failure({ phase = "receive", code = "RECV_ERROR" }, { what = "x", alive = alive(nil) })
    assert.equal(Status.UNKNOWN, r.status)
    local gone
    r, gone = outcome.from_failure({ phase = "receive", code = "RECV_ERROR" },
      { what = "x", alive = alive(false), stdout = "partial" })
    assert.same({ Status.TIMEOUT, outcome.GONE, true, "partial" },
      { r.status, r.failure.exception_type, gone, r.stdout })
    r = outcome.from_failure("attempt to index a nil value")
    assert.equal(Status.UNKNOWN, r.status)
    assert.equal("ProviderError", r.failure.exception_type)
  end)

  it("never asks the probe when the failure already names the outcome", function()
    local asked = false
    local probe = function() asked = true return false end
    outcome.from_failure({ phase = "send", retry_safe = true }, { alive = probe })
    outcome.from_failure({ phase = "receive", timeout = true }, { alive = probe })
    assert.is_false(asked)
  end)

  it("re-raises a cancellation", function()
    local ok, err = pcall(loop.run, function()
      local t = loop.spawn(function() loop.sleep(10) end)
      loop.sleep(0.01)
      t:cancel()
      local _, cancel = pcall(t.wait, t)
      return outcome.from_failure(cancel)
    end)
    assert.is_false(ok)
    assert.is_true(loop.is_cancelled(err))
  end)
end)

describe("glsb.confine_helper #unit", function()
  it("finds this machine's helper, and names what it tried when told a wrong place", function()
    local path = confine_helper.find()
    assert.is_string(path)
    assert.matches("glsb%-confine$", path)
    local none, why = confine_helper.find("/nonexistent/glsb-confine")
    assert.is_nil(none)
    assert.matches("/nonexistent/glsb%-confine", why)
    local data, sha = confine_helper.read()
    assert.is_true(#data > 0)
    assert.matches("^%x+$", sha)
  end)

  it("uploads once per sandbox through _upload and _exec_argv, and fails as WorkspaceError", function()
    local calls = {}
    local sb = {
      provider = "fake",
      _upload = function(_, files, opts) calls[#calls + 1] = { "upload", files[1].path, opts.upload_dir } end,
      _exec_argv = function(_, argv) calls[#calls + 1] = { "exec", argv[1], argv[2] } return { exit_code = 0 } end,
    }
    local p1 = confine_helper.ensure_uploaded(sb)
    local p2 = confine_helper.ensure_uploaded(sb)
    assert.equal(p1, p2)
    assert.matches("^/tmp/%.glsb/glsb%-confine%-%x+$", p1)
    assert.same({ { "upload", p1, "/tmp/.glsb" }, { "exec", "/bin/chmod", "0755" } }, calls)
    local broken = { provider = "fake", _upload = function() error("disk full", 0) end, _exec_argv = sb._exec_argv }
    local ok, err = pcall(confine_helper.ensure_uploaded, broken)
    assert.is_false(ok)
    assert.is_true(glsb.errors.is(err, glsb.errors.WorkspaceError), tostring(err))
    assert.equal("helper_unavailable", err.reason)
    assert.matches("disk full", tostring(err))
  end)
end)

describe("registry.lazy_template #unit", function()
  it("loads the template module on first use only", function()
    local loaded = 0
    package.preload["glsb.providers.lazyx.template"] = function()
      loaded = loaded + 1
      return { Template = { name = "T" } }
    end
    local M = registry.lazy_template({ name = "lazyx" }, "glsb.providers.lazyx.template")
    assert.equal(0, loaded)
    assert.equal("T", M.Template.name)
    assert.equal("T", M.Template.name)
    assert.equal(1, loaded)
    assert.is_nil(M.Other)
    package.preload["glsb.providers.lazyx.template"] = nil
    package.loaded["glsb.providers.lazyx.template"] = nil
  end)
end)
