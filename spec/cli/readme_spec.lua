-- Every ```lua block of README.md and providers/*/README.md runs, each in a fresh glsb-lua, as a reader
-- would paste it (issue 14: no example that only looks right). Remote providers run against their
-- loopback emulators through their environment variables; paths a reader would have (a wheel directory)
-- are substituted by private ones. A README with Lua blocks and no setup here fails: add one.
-- #readme #local #e2b
local shell = require "support.shell"
local helper = require "local.helper"
local emulator = require "e2b.emulator"

local GLSB_LUA = shell.repo .. "/build/glsb-lua"

-- blocks(path) -> array of {code, line}
local function blocks(path)
  local text = assert(shell.read(shell.repo .. "/" .. path), path)
  local out, line_no, current = {}, 0, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    line_no = line_no + 1
    if current then
      if line:match("^```%s*$") then
        out[#out + 1] = current
        current = nil
      else
        current.code = current.code .. line .. "\n"
      end
    elseif line:match("^```lua%s*$") then
      current = { code = "", line = line_no + 1 }
    end
  end
  assert(current == nil, path .. ": an unclosed ```lua block")
  return out
end

local function readmes()
  local list = { "README.md" }
  local out = shell.sh("cd " .. shell.q(shell.repo) .. " && ls providers/*/README.md 2>/dev/null")
  for p in out:gmatch("[^\n]+") do list[#list + 1] = p end
  return list
end

describe("README examples run #readme #local #e2b", function()
  local tmp, emu, env, subst

  setup(function()
    tmp = helper.private_tmp()
    os.execute("chmod 755 " .. shell.q(tmp))
    os.execute("mkdir -m 755 " .. shell.q(tmp .. "/cache") .. " " .. shell.q(tmp .. "/ws") .. " " .. shell.q(tmp .. "/wheels"))
    helper.make_wheel(tmp .. "/wheels", "mylib", "1.0", "VALUE = 1\n")
    helper.make_wheel(tmp .. "/wheels", "otherlib", "1.0", "VALUE = 2\n")
    -- "..." is the README's placeholder key: the emulator accepts it too
    emu = emulator.start { api_keys = { "e2b_test_key", "..." } }
    env = {
      XDG_CACHE_HOME = tmp .. "/cache", TMPDIR = tmp .. "/ws",
      E2B_API_KEY = emu.api_key, E2B_API_URL = emu.base, E2B_SANDBOX_URL = emu.base,
    }
    subst = { ["/srv/wheels"] = tmp .. "/wheels" }
  end)

  teardown(function()
    if emu then emu:stop() end
    if tmp then helper.rm_rf(tmp) end
  end)

  local function run(code)
    for from, to in pairs(subst) do code = code:gsub(from:gsub("%p", "%%%0"), (to:gsub("%%", "%%%%"))) end
    local file = tmp .. "/block.lua"
    local f = assert(io.open(file, "wb"))
    f:write(code)
    f:close()
    local vars = {}
    for k, v in pairs(env) do vars[#vars + 1] = k .. "=" .. shell.q(v) end
    table.sort(vars)
    return shell.sh("cd " .. shell.q(tmp) .. " && env " .. table.concat(vars, " ") .. " timeout 300 "
      .. shell.q(GLSB_LUA) .. " " .. shell.q(file) .. " 2>&1")
  end

  local SETUP = { ["README.md"] = true, ["providers/e2b/README.md"] = true, ["providers/local/README.md"] = true }

  for _, path in ipairs(readmes()) do
    local list = blocks(path)
    if #list > 0 then
      it(path .. " has a setup here for its Lua blocks", function()
        assert.is_true(SETUP[path] == true, path .. " has Lua blocks: add what they need to run to "
          .. "spec/cli/readme_spec.lua (an emulator's environment, substitutions)")
      end)
    end
    for _, b in ipairs(list) do
      it(("%s:%d runs as written"):format(path, b.line), function()
        local out, code = run(b.code)
        assert.are.equal(0, code, ("%s:%d failed:\n%s"):format(path, b.line, out))
        assert.is_nil(out:find("glsb: error", 1, true), out)
        -- nothing left behind: local workspaces, E2B sandboxes
        assert.are.same({}, helper.list_dir(tmp .. "/ws"))
        local left = {}
        for _, s in ipairs(emu:state().sandboxes or {}) do left[#left + 1] = s.sandboxID end
        assert.are.same({}, left, "E2B sandboxes left by " .. path .. ":" .. b.line)
      end)
    end
  end
end)
