-- Off means off: with tracing unconfigured (and no OTEL_* variable asking for it), no tracing code
-- beyond the seam's flag is loaded, no task or timer exists for it, and a call allocates no more than
-- the same call with the seam taken out.
local process = require "glsb.process"
local sh = require "support.shell"

-- Runs a Lua chunk in a fresh lua5.4 with a clean environment (no OTEL_*); returns its stdout.
local function fresh(chunk)
  local script = "package.path = '" .. sh.repo .. "/lua/?.lua;" .. sh.repo .. "/lua/?/init.lua;" .. sh.repo
    .. "/spec/?.lua;' .. package.path\npackage.cpath = '" .. sh.repo .. "/build/lib/?.so;' .. package.cpath\n" .. chunk
  local out, err, st = process.run({ "env", "-i", "PATH=" .. os.getenv("PATH"), "HOME=/tmp", "lua5.4", "-e", script },
    { timeout = 120 })
  assert(out and st.code == 0, "child failed: " .. tostring(err))
  return out
end

describe("glsb.trace off #trace", function()
  it("loads no exporter, makes no task, and adds no allocation to an HTTP call", function()
    local out = fresh([[
      local server = require "support.server"
      local http = require "glsb.http"
      local loop = require "glsb.loop"
      local srv = server.start({ "node", "]] .. sh.repo .. [[/spec/support/fault_server.mjs", "0" })
      local url = srv.url .. "/ok"
      -- the function the seam wraps, called directly: the baseline
      local inner
      for i = 1, 10 do
        local name, value = debug.getupvalue(http.request, i)
        if name == "request" then inner = value end
      end
      assert(inner, "http.request has no 'request' upvalue")
      local function measure(fn, n)
        for _ = 1, 50 do fn({ url = url, timeout = 5 }) end -- warm: connection, interned strings
        collectgarbage("collect")
        collectgarbage("stop")
        local before = collectgarbage("count")
        for _ = 1, n do fn({ url = url, timeout = 5 }) end
        local used = collectgarbage("count") - before
        collectgarbage("restart")
        return used * 1024 / n
      end
      local N = 400
      local base, wrapped = {}, {}
      for r = 1, 3 do base[r] = measure(inner, N); wrapped[r] = measure(http.request, N) end
      table.sort(base); table.sort(wrapped)
      srv.stop()
      local loaded = {}
      for name in pairs(package.loaded) do
        if name:match("^glsb%.trace") then loaded[#loaded + 1] = name end
      end
      table.sort(loaded)
      print(string.format("%.1f %.1f", base[2], wrapped[2]))
      print(table.concat(loaded, ","))
      print(tostring(require("glsb.trace.seam").on))
      -- nothing of tracing's left waiting on the loop: drain returns at once
      local t0 = loop.now(); loop.drain(5); print(string.format("%.2f", loop.now() - t0))
    ]])
    local base, wrapped, loaded, on, drain = out:match("^(%S+) (%S+)\n([^\n]*)\n(%S+)\n(%S+)\n$")
    assert.is_not_nil(base, out)
    -- per-call bytes: the seam adds nothing beyond measurement noise (a few bytes of amortised table growth)
    assert.is_true(math.abs(tonumber(wrapped) - tonumber(base)) < 16,
      ("off: %s bytes per call, baseline %s"):format(wrapped, base))
    -- the seam alone: with no OTEL_* variable that asks for spans it does not load the config either
    assert.are.equal("glsb.trace.seam", loaded)
    assert.are.equal("false", on)
    assert.is_true(tonumber(drain) < 1)
  end)

  it("adds no allocation to a sandbox operation: the traced wrapper costs what the bare guarded call does", function()
    local out = fresh([[
      local fake = require "support.fake_provider"
      local sandbox = require "glsb.sandbox"
      local provider, backend = fake.new("fake")
      local sb = provider.Sandbox.create {}
      -- execute_code's upvalues, and those of the function it hands the call to (code_call, shared with
      -- a context's execute_code)
      local up = {}
      local function collect(fn)
        for i = 1, 30 do
          local name, value = debug.getupvalue(fn, i)
          if not name then break end
          if up[name] == nil then up[name] = value end
        end
      end
      collect(sandbox.CodeInterpreterSandbox.execute_code)
      if type(up.code_call) == "function" then collect(up.code_call) end
      assert(up.traced_op and up.execution_body, "execute_code has no traced_op/execution_body upvalue")
      local hopts, files = { language = "python" }, {}
      local function via_seam()
        return up.traced_op("glsb.sandbox.execute_code", sb, up.execution_body, "execute_code", "_run_code",
          "x", hopts, files, "/files")
      end
      local function bare()
        return sandbox.guarded(sb, up.execution_body, "execute_code", "_run_code", "x", hopts, files, "/files")
      end
      local function measure(fn, n)
        backend.calls = {} -- the fake's call log grows the same way in every run
        for _ = 1, 50 do fn() end
        collectgarbage("collect")
        collectgarbage("stop")
        local before = collectgarbage("count")
        for _ = 1, n do fn() end
        local used = collectgarbage("count") - before
        collectgarbage("restart")
        return used * 1024 / n
      end
      local a, b = {}, {}
      for r = 1, 3 do a[r] = measure(bare, 2000); b[r] = measure(via_seam, 2000) end
      table.sort(a); table.sort(b)
      sb:terminate()
      print(string.format("%.1f %.1f", a[2], b[2]))
      local loaded = {}
      for name in pairs(package.loaded) do
        if name:match("^glsb%.trace") then loaded[#loaded + 1] = name end
      end
      table.sort(loaded)
      print(table.concat(loaded, ","))
    ]])
    local bare, seam, loaded = out:match("^(%S+) (%S+)\n([^\n]*)\n$")
    assert.is_not_nil(bare, out)
    assert.is_true(math.abs(tonumber(seam) - tonumber(bare)) < 16,
      ("off: %s bytes per execute_code, bare guarded call %s"):format(seam, bare))
    -- off: the seam alone (its config only loads when an OTEL_* variable can ask for spans)
    assert.are.equal("glsb.trace.seam", loaded)
  end)
end)
