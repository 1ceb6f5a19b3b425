-- Every ```lua block of README.md and providers/*/README.md runs, each in a fresh glsb-lua, as a reader
-- would paste it (issue 14: no example that only looks right). Remote providers run against their
-- loopback emulators through their environment variables. Nothing a reader lacks is put in place for
-- them (no wheel directory: issue 27), only the model name the emulator answers to.
--
-- A provider whose README has Lua blocks adds spec/<provider>/readme_setup.lua:
--   return { start = function(tmp) ... return env, substitutions end, stop = function() ... end }
-- start gets a private directory and returns the environment its blocks need (its emulator's URL and
-- credentials in the variables the provider reads) and {["literal in the README"] = "replacement"};
-- stop ends what start began. Every block of every README then runs with all of them. A provider README
-- with Lua blocks and no such module fails here. (local and e2b are set up below, and the OpenAI model
-- emulator for the interpreter's block.)
-- #readme #local #e2b
local shell = require "support.shell"
local helper = require "local.helper"
local emulator = require "e2b.emulator"
local lm_emulator = require "lm.emulator"

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

-- Each provider's own README setup module, when it has one: name -> module.
local function provider_setups()
  local out = {}
  for _, path in ipairs(readmes()) do
    local name = path:match("^providers/([^/]+)/README%.md$")
    if name then
      local ok, mod = pcall(require, name .. ".readme_setup")
      if ok and type(mod) == "table" then out[name] = mod end
    end
  end
  return out
end

describe("README examples run #readme #local #e2b", function()
  local tmp, emu, lm_emu, env, subst
  local setups = provider_setups()

  setup(function()
    tmp = helper.private_tmp()
    os.execute("chmod 755 " .. shell.q(tmp))
    os.execute("mkdir -m 755 " .. shell.q(tmp .. "/cache") .. " " .. shell.q(tmp .. "/ws"))
    -- "..." is the README's placeholder key: the emulator accepts it too
    emu = emulator.start { api_keys = { "e2b_test_key", "..." } }
    env = {
      XDG_CACHE_HOME = tmp .. "/cache", TMPDIR = tmp .. "/ws",
      E2B_API_KEY = emu.api_key, E2B_API_URL = emu.base, E2B_SANDBOX_URL = emu.base,
    }
    -- the model of the interpreter's example: the OpenAI emulator's rule-driven model, through the
    -- variables the client reads
    lm_emu = lm_emulator.start("openai")
    env.OPENAI_API_KEY, env.OPENAI_BASE_URL = lm_emu.api_key, lm_emu:base_url()
    subst = { ['model = "gpt-4o-mini"'] = 'model = "glsb-rules"' }
    for name, mod in pairs(setups) do
      local dir = tmp .. "/" .. name
      os.execute("mkdir -m 755 " .. shell.q(dir))
      local e, sub = mod.start(dir)
      for k, v in pairs(e or {}) do env[k] = v end
      for k, v in pairs(sub or {}) do subst[k] = v end
    end
  end)

  teardown(function()
    for _, mod in pairs(setups) do pcall(mod.stop) end
    if emu then emu:stop() end
    if lm_emu then lm_emu:stop() end
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

  local function has_setup(path)
    local name = path:match("^providers/([^/]+)/README%.md$")
    return name == nil or name == "e2b" or name == "local" or setups[name] ~= nil
  end

  for _, path in ipairs(readmes()) do
    local list = blocks(path)
    if #list > 0 then
      it(path .. " has a setup here for its Lua blocks", function()
        assert.is_true(has_setup(path), path .. " has Lua blocks: add spec/<provider>/readme_setup.lua "
          .. "(see the head of spec/cli/readme_spec.lua)")
      end)
    end
    for _, b in ipairs(list) do
      it(("%s:%d runs as written"):format(path, b.line), function()
        local out, code = run(b.code)
        assert.are.equal(0, code, ("%s:%d failed:\n%s"):format(path, b.line, out))
        assert.is_nil(out:find("glsb: error", 1, true), out)
        -- nothing left behind: local workspaces, E2B sandboxes
        assert.are.same({}, helper.list_dir(helper.workspace_root(tmp .. "/ws")))
        local left = {}
        for _, s in ipairs(emu:state().sandboxes or {}) do left[#left + 1] = s.sandboxID end
        assert.are.same({}, left, "E2B sandboxes left by " .. path .. ":" .. b.line)
      end)
    end
  end
end)
