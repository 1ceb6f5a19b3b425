-- The failure codes as data: every code glsb.core can report is listed in core.codes, every listed code
-- has a verdict in glsb.errors (transient, permanent, or an explicit no claim), the core's failures come
-- back in one shape (nil, message, CODE) with codes from that list, and free text is classified only
-- where nothing better is known.
local core = require "glsb.core"
local errors = require "glsb.errors"

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

-- Asserts the failure shape nil, message, code with a listed code; returns the code.
local function failure(want_code, ...)
  local n = select("#", ...)
  local v, msg, code = ...
  assert.is_true(n >= 3, "three values: nil, message, code")
  assert.is_nil(v)
  assert.is_string(msg)
  assert.is_string(code)
  assert.is_string(core.codes[code], "core.codes lists " .. code)
  if want_code then assert.equal(want_code, code, msg) end
  return code
end

describe("glsb.core codes #core #unit", function()
  it("lists libcurl's codes by name, errno names and glsb's own, each with its source", function()
    assert.equal("curl", core.codes.HTTP2_STREAM)
    assert.equal("curl", core.codes.HTTP2)
    assert.equal("curl", core.codes.COULDNT_RESOLVE_PROXY)
    assert.equal("errno", core.codes.EAGAIN)
    assert.equal("glsb", core.codes.FRAME_TOO_LARGE)
    assert.is_true(count(core.codes) > 150)
    for name, source in pairs(core.codes) do
      assert.truthy(name:match("^[A-Z][A-Z0-9_]*$"), name)
      assert.truthy(source == "curl" or source == "errno" or source == "glsb", name)
      assert.is_nil(name:match("^CURLE_"), "libcurl codes keep their names without the number: " .. name)
    end
  end)

  it("gives every code the core can report exactly one verdict in glsb.errors", function()
    local missing, twice = {}, {}
    for name in pairs(core.codes) do
      local n = 0
      for _, tbl in pairs(errors.codes) do
        if tbl[name] then n = n + 1 end
      end
      if n == 0 then missing[#missing + 1] = name end
      if n > 1 then twice[#twice + 1] = name end
    end
    table.sort(missing)
    table.sort(twice)
    assert.same({}, missing, "codes with no verdict: " .. table.concat(missing, ", "))
    assert.same({}, twice, "codes with two verdicts: " .. table.concat(twice, ", "))
  end)

  it("decides every listed code from the code (or its phase), never from the message", function()
    -- A message full of words the text rules would read as transient.
    local noise = "503 Service Unavailable: connection reset, timed out, broken pipe"
    for name in pairs(core.codes) do
      local f = { phase = "receive", code = name, message = noise, retry_safe = false }
      local verdict, rule = errors.explain(f)
      assert.are_not.equal("text", rule, name)
      if errors.codes.transient[name] then assert.is_true(verdict, name) end
      if errors.codes.permanent[name] then assert.is_false(verdict, name) end
      if errors.codes.no_claim[name] then assert.is_nil(verdict, name) end
    end
    -- a no-claim code still lets the phase and the timeout flag speak
    assert.is_true(errors.classify({ phase = "connect", code = "HTTP_SETUP_FAILED", message = "x" }))
    assert.is_true(errors.classify({ phase = "receive", code = "CURL_OTHER", timeout = true }))
    assert.is_false(errors.classify({ phase = "framing", code = "OUT_OF_MEMORY" }))
  end)

  -- The only places whose text is read: nothing better comes with it.
  describe("text is classified only where nothing better is known", function()
    it("a string raised by a provider hook and wrapped as a cause (sandbox.lua wraps _create etc.)", function()
      local e = errors.wrap(errors.SandboxStartError, "create", "local: agent did not start: Connection refused")
      local verdict, rule, link = errors.explain(e)
      assert.is_true(verdict)
      assert.equal("text", rule)
      assert.equal(2, link)
    end)

    it("the body of an HTTP response whose status makes no claim (500, 501, ...)", function()
      local f = errors.http_failure(500, {}, "upstream timed out")
      local verdict, rule = errors.explain(f)
      assert.is_true(verdict)
      assert.equal("text", rule)
      -- a status with an opinion wins over any body
      local verdict2, rule2 = errors.explain(errors.http_failure(404, {}, "upstream timed out"))
      assert.is_false(verdict2)
      assert.equal("status", rule2)
    end)

    it("a failure table whose code glsb.core does not know (a provider's own protocol code)", function()
      assert.is_nil(core.codes.deadline_exceeded)
      local verdict, rule = errors.explain({ phase = "receive", code = "deadline_exceeded", message = "timed out" })
      assert.is_true(verdict)
      assert.equal("text", rule)
    end)

    it("nowhere else: a transport failure from glsb.core is decided by its code", function()
      local verdict, rule = errors.explain({ phase = "receive", code = "WRITE_ERROR", message = "timed out" })
      assert.is_nil(verdict)
      assert.is_nil(rule)
    end)
  end)

  describe("every C entry point reports a failure of the world as nil, message, CODE", function()
    local dir
    before_each(function() dir = assert(core.mkdtemp("/tmp/glsb-codes-XXXXXX")) end)
    after_each(function() assert(core.rmtree(dir)) end)

    it("files: mkdtemp, realpath, write_file_atomic, rmtree", function()
      failure("ENOENT", core.mkdtemp("/nonexistent-glsb/x-XXXXXX"))
      failure("ENOENT", core.realpath(dir .. "/missing"))
      failure("ENOENT", core.write_file_atomic(dir .. "/missing/f", "x"))
      assert(core.write_file_atomic(dir .. "/file", "x"))
      failure("ENOTDIR", core.rmtree(dir .. "/file/x"))
      failure("EINVAL", core.rmtree("/"))
    end)

    it("archives: tar_unpack", function()
      failure("TAR_CORRUPT", core.tar_unpack("garbage"))
      failure("TAR_UNSAFE_ENTRY", core.tar_unpack(core.tar_pack({ { name = "l", type = "symlink", target = "/etc" } })))
      failure("TAR_TOO_LARGE", core.tar_unpack(core.tar_pack({ { name = "a", data = "xx" } }), { max_bytes = 1 }))
    end)

    it("codecs: b64decode", function()
      failure("BAD_BASE64", core.b64decode("Zm9v YmE="))
      failure("BAD_BASE64", core.b64decode("Zm9vY"))
    end)

    it("framers: decode_frames, with the frames decoded before the failure after the code", function()
      local frames, msg, code, partial = core.decode_frames("lines", { "ok\n", ("x"):rep(20) }, 10)
      failure("FRAME_TOO_LARGE", frames, msg, code)
      assert.same({ "ok" }, partial)
      failure("TRUNCATED_ENVELOPE", core.decode_frames("connect", { "\0\0\0\0\9{" }))
      -- oversized = "cut" (lines only): not a failure; the line comes out cut, the ones after it whole
      assert.same({ "ok", { head = ("x"):rep(10), length = 20 }, "z" },
        core.decode_frames("lines", { "ok\n", ("x"):rep(20), "\nz\n" }, 10, "cut"))
    end)

    it("processes: spawn, read with nothing ready, read and write on a closed pipe", function()
      failure("ENOENT", core.spawn({ argv = { dir .. "/no-such-program" } }))
      local p <close> = assert(core.spawn({ argv = { "sleep", "5" }, stdin = "pipe", stdout = "pipe" }))
      failure("EAGAIN", p:read("stdout"))
      p:close_fd("stdin")
      failure("EBADF", p:write("x"))
      p:close_fd("stdout")
      failure("EBADF", p:read("stdout"))
      assert.is_true(p:kill("KILL"))
      local st
      repeat st = p:poll() until st
      failure("ESRCH", p:kill("TERM"))
    end)

    it("HTTP: a transfer's failure table carries a listed code (a refused connection)", function()
      local res = require("glsb.http").request({ url = "http://127.0.0.1:1/" })
      assert.equal("COULDNT_CONNECT", res.error.code)
      assert.equal("curl", core.codes[res.error.code])
    end)

    it("misuse still raises an argument error", function()
      assert.has_error(function() core.rmtree() end)
      assert.has_error(function() core.decode_frames("bogus", {}) end)
      assert.has_error(function() core.decode_frames("lines", {}, 10, "truncate") end)
      assert.has_error(function() core.decode_frames("sse", {}, 10, "cut") end)
      assert.has_error(function() core.spawn({ argv = {} }) end)
      assert.has_error(function() core.b64decode("x", "bogus") end)
    end)
  end)
end)
