-- glsb-lua loads glsb's modules from the bytecode `make` and `make install` compile (src/core/load.c),
-- and only when it is the module's: fresh (not older than the source), loadable by this liblua, and
-- named after the source's path. Shown on a scratch tree laid out as a checkout (a copy of glsb-lua in
-- <tree>/build, a module in <tree>/lua, its bytecode in <tree>/build/luac/lua), whose module says which
-- of the two files it came from.
local core = require "glsb.core"
local process = require "glsb.process"

local ROOT = core.realpath(".")
local GLSB_LUA = ROOT .. "/build/glsb-lua"

local function run(argv, env)
  local out, err, st = process.run(argv, { timeout = 30, env = env })
  assert(out, err)
  return out, err, st.code
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  assert(f:close())
end

-- bytecode of `text` named "@name", as scripts/luac.lua writes it (debug information kept)
local function compile(text, name)
  return string.dump(assert(load(text, "@" .. name, "t")))
end

describe("glsb-lua's precompiled modules #core", function()
  local tree, src, bc

  before_each(function()
    tree = assert(core.realpath(assert(core.mkdtemp("/tmp/glsb-bytecode-XXXXXX"))))
    assert(core.mkdir(tree .. "/build", 493) and core.mkdir(tree .. "/lua", 493))
    assert(core.mkdir(tree .. "/build/luac", 493) and core.mkdir(tree .. "/build/luac/lua", 493))
    local _, err, code = run({ "cp", GLSB_LUA, tree .. "/build/glsb-lua" })
    assert.equal(0, code, err)
    src, bc = tree .. "/lua/m.lua", tree .. "/build/luac/lua/m.luac"
    write(src, 'return { from = "source", where = debug.getinfo(1, "S").source }\n')
  end)
  after_each(function() assert(core.rmtree(tree)) end)

  local function from()
    local out, err, code = run({ tree .. "/build/glsb-lua", "-e",
      'local m = require "m"; io.write(m.from, " ", m.where)' })
    assert.equal(0, code, err)
    return out
  end

  it("loads a module from its fresh bytecode, under the source's name", function()
    write(bc, compile('return { from = "bytecode", where = debug.getinfo(1, "S").source }\n', src))
    assert.equal("bytecode @" .. src, from())
  end)

  it("loads a provider of the checkout's providers/ from its bytecode (glsb.registry's searcher)", function()
    for _, d in ipairs({ "/lua/glsb", "/providers", "/providers/fake", "/build/luac/providers",
      "/build/luac/providers/fake" }) do
      assert(core.mkdir(tree .. d, 493))
    end
    local _, err, code = run({ "cp", ROOT .. "/lua/glsb/registry.lua", tree .. "/lua/glsb/registry.lua" })
    assert.equal(0, code, err)
    local psrc = tree .. "/providers/fake/init.lua"
    write(psrc, 'return "source"\n')
    write(tree .. "/build/luac/providers/fake/init.luac", compile('return "bytecode"\n', psrc))
    local out
    out, err, code = run({ tree .. "/build/glsb-lua", "-e", 'io.write((require "glsb.providers.fake"))' })
    assert.equal(0, code, err)
    assert.equal("bytecode", out)
  end)

  it("loads the source when it is newer than its bytecode (an edited checkout runs what was edited)", function()
    write(bc, compile('return { from = "bytecode" }\n', src))
    local _, err, code = run({ "touch", "-d", "+1 minute", src })
    assert.equal(0, code, err)
    assert.equal("source @" .. src, from())
  end)

  it("loads the source when the bytecode names another file (a moved tree) or does not load", function()
    write(bc, compile('return { from = "bytecode" }\n', tree .. "/elsewhere/m.lua"))
    assert.equal("source @" .. src, from())
    write(bc, "\27Lua not really bytecode")
    assert.equal("source @" .. src, from())
    write(bc, compile('return { from = "bytecode" }\n', src):sub(1, 40)) -- cut short
    assert.equal("source @" .. src, from())
  end)

  it("never uses bytecode for a module outside its own folders (GLSB_PATH providers, the user's)", function()
    local extra = tree .. "/extra"
    assert(core.mkdir(extra, 493))
    write(extra .. "/p.lua", 'return "source"\n')
    write(extra .. "/p.luac", compile('return "bytecode"\n', extra .. "/p.lua"))
    local out, err, code = run({ tree .. "/build/glsb-lua", "-e", 'package.path = "' .. extra
      .. '/?.lua;" .. package.path; io.write((require "p"))' })
    assert.equal(0, code, err)
    assert.equal("source", out)
    -- a provider module found through GLSB_PATH (glsb.registry's searcher)
    assert(core.mkdir(extra .. "/mine", 493))
    write(extra .. "/mine/init.lua", 'return "source"\n')
    write(extra .. "/mine/init.luac", compile('return "bytecode"\n', extra .. "/mine/init.lua"))
    out, err, code = run({ GLSB_LUA, "-e", 'io.write((require "glsb.providers.mine"))' },
      { "GLSB_PATH=" .. extra, "PATH=" .. os.getenv("PATH") })
    assert.equal(0, code, err)
    assert.equal("source", out)
  end)

  it("says which files it tried for a module it cannot find, as lua5.4 does", function()
    local _, err, code = run({ tree .. "/build/glsb-lua", "-e", 'require "no.such.mod"' })
    assert.equal(1, code)
    assert.matches("module 'no.such.mod' not found:", err, 1, true)
    assert.matches("no file '" .. tree .. "/lua/no/such/mod.lua'", err, 1, true)
    assert.matches("no file '" .. tree .. "/lua/no/such/mod/init.lua'", err, 1, true)
  end)

  it("reports a module's syntax error with its file, as lua5.4 does", function()
    write(src, "return {\n")
    local _, err, code = run({ tree .. "/build/glsb-lua", "-e", 'require "m"' })
    assert.equal(1, code)
    assert.matches("error loading module 'm' from file '" .. src .. "'", err, 1, true)
  end)

  it("core.loadfile is loadfile where no bytecode folder is registered (plain lua5.4)", function()
    local f = assert(core.loadfile(src))
    assert.equal("source", f().from)
    local none, msg = core.loadfile(tree .. "/lua/missing.lua")
    assert.is_nil(none)
    assert.matches("missing.lua", msg, 1, true)
  end)

  it("the build compiled every module of lua/ and providers/, under its source's path", function()
    local count = 0
    for _, top in ipairs({ "lua", "providers" }) do
      local p = assert(io.popen("cd " .. ROOT .. " && find " .. top .. " -name '*.lua' -type f"))
      for rel in p:lines() do
        local f = assert(loadfile(ROOT .. "/build/luac/" .. rel:gsub("%.lua$", ".luac"), "b"), rel)
        assert.equal("@" .. ROOT .. "/" .. rel, debug.getinfo(f, "S").source)
        count = count + 1
      end
      p:close()
    end
    assert.is_true(count > 50)
  end)
end)
