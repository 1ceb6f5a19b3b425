-- confine_run_env_spec.lua: `glsb-confine run --env-allow NAME` with an environment that holds
-- NAME many times (execve allows duplicates). The allowlist array was sized by argc while one
-- entry was added per matching environment entry: a heap overflow (segfault, or ASan's
-- heap-buffer-overflow in ws_run.c). Now each allowed name is taken once, as getenv finds it.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

-- Runs argv with exactly the environment list env (duplicates kept), through execve.
local function exec_with_env(argv, env)
  local script = [[
import ctypes, sys
n = int(sys.argv[1]); argv = sys.argv[2:2 + n]; env = sys.argv[2 + n:]
libc = ctypes.CDLL(None, use_errno=True)
A = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
E = (ctypes.c_char_p * (len(env) + 1))(*[e.encode() for e in env], None)
libc.execve(argv[0].encode(), A, E)
sys.exit("execve failed: %d" % ctypes.get_errno())
]]
  local words = { "/usr/bin/python3", "-c", script, tostring(#argv) }
  for _, a in ipairs(argv) do words[#words + 1] = a end
  for _, e in ipairs(env) do words[#words + 1] = e end
  return H.sh(H.join(words) .. " 2>&1")
end

describe("glsb-confine run with duplicate environment names #security #confine", function()
  local root
  setup(function()
    H.require_binary()
    root = H.mktemp_dir()
  end)
  teardown(function() H.rm_rf(root) end)

  it("takes an allowed name once (the first entry, as getenv) and does not overflow", function()
    local env = {}
    for i = 0, 199 do env[#env + 1] = "DUP=" .. i end
    env[#env + 1] = "OTHER=x"
    local out, code = exec_with_env({ H.bin, "run", "--root", root, "--env-allow", "DUP",
      "--env-allow", "DUP", "--env-allow", "OTHER", "--", "/usr/bin/env" }, env)
    assert.are.equal(0, code, out)
    local r = require("cjson").decode(out)
    assert.is_true(r.ok, out)
    local seen = H.sh("printf %s " .. H.q(r.stdout) .. " | base64 -d")
    local lines = {}
    for l in seen:gmatch("[^\n]+") do lines[#lines + 1] = l end
    table.sort(lines)
    assert.are.same({ "DUP=0", "OTHER=x" }, lines)
  end)

  it("lets --env win over an allowed name the environment holds many times", function()
    local env = {}
    for i = 0, 99 do env[#env + 1] = "DUP=" .. i end
    local out, code = exec_with_env({ H.bin, "run", "--root", root, "--env", "DUP=given",
      "--env-allow", "DUP", "--", "/usr/bin/env" }, env)
    assert.are.equal(0, code, out)
    local r = require("cjson").decode(out)
    local seen = H.sh("printf %s " .. H.q(r.stdout) .. " | base64 -d")
    assert.are.equal("DUP=given\n", seen)
  end)
end)
