-- The core's heavy parts (libcurl, libarchive, hiredis + libssl, libcrypto) are mapped on first use, in
-- glsb-lua and in plain lua5.4 alike, and a part that cannot be found is a clear error.
local core = require "glsb.core"

local ROOT = core.realpath(".")
local GLSB_LUA = ROOT .. "/build/glsb-lua"
local LUA_ENV = ("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH='%s/build/lib/?.so;;'"):format(ROOT, ROOT, ROOT)

local function sh(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok, _, code = p:close()
  return ok and 0 or code, out
end

-- Runs, with cmd, a script that prints which of the heavy libraries its process has mapped, before and
-- after running `use`. Returns exit code, output.
local function probe(cmd, use)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(([[
local function mapped()
  local seen = {}
  for line in io.lines("/proc/self/maps") do
    for _, lib in ipairs({ "libcurl", "libarchive", "libhiredis", "libcrypto" }) do
      if line:find(lib, 1, true) then seen[lib] = true end
    end
  end
  local names = {}
  for lib in pairs(seen) do names[#names + 1] = lib end
  table.sort(names)
  return table.concat(names, ",")
end
local core = require "glsb.core"
print("before:" .. mapped())
%s
print("after:" .. mapped())
]]):format(use))
  f:close()
  local code, out = sh(cmd .. " " .. script)
  os.remove(script)
  return code, out
end

describe("glsb.core parts #core #unit", function()
  for _, interp in ipairs({ { "glsb-lua", GLSB_LUA }, { "lua5.4 + core.so", LUA_ENV .. " lua5.4" } }) do
    local name, cmd = interp[1], interp[2]

    it(name .. ": starts without libcurl, libarchive, hiredis or libcrypto", function()
      local code, out = probe(cmd, "require 'glsb'")
      assert.equal(0, code, out)
      assert.equal("before:\nafter:\n", out)
    end)

    it(name .. ": maps each part's library on first use, and the functions work", function()
      local code, out = probe(cmd, [[
assert(core.sha256("abc"):sub(1, 8) == "ba7816bf")
assert(#core.tar_unpack(core.tar_pack({ { name = "a", data = "x" } })) == 1)
local r = require("glsb.http").request({ url = "http://127.0.0.1:1/" })
assert(r.error.code == "COULDNT_CONNECT")
local conn, _, code = core.redis_connect({ path = "/nonexistent-glsb/redis.sock" })
assert(conn == nil and code == "ENOENT")
]])
      assert.equal(0, code, out)
      assert.equal("before:\nafter:libarchive,libcrypto,libcurl,libhiredis\n", out)
    end)
  end

  it("a part that is not beside the core is an error naming where it looked", function()
    local dir = assert(core.mkdtemp("/tmp/glsb-parts-XXXXXX"))
    finally(function() core.rmtree(dir) end)
    assert(os.execute(("cp %s %s/glsb-lua"):format(GLSB_LUA, dir)))
    local code, out = sh(("%s/glsb-lua -e 'print(1); require(\"glsb.core\").sha256(\"x\")'"):format(dir))
    assert.equal(1, code, out)
    assert.matches("^1\n", out)
    assert.matches("cannot load its digest part (core_digest.so)", out, 1, true)
    assert.matches(dir .. "/lib/glsb/core_digest.so", out, 1, true)
  end)
end)
