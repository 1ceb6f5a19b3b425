-- One version: the VERSION file, which glsb-lua is built with (Makefile: -DGLSB_VERSION), is what
-- glsb.VERSION (glsb.constants) says.
local HERE = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$")
local ROOT = HERE .. "/../.."

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("the version #unit", function()
  local version = read(ROOT .. "/VERSION"):match("^%s*(.-)%s*$")

  it("VERSION holds one semantic version", function()
    assert.matches("^%d+%.%d+%.%d+[%w.+-]*$", version)
  end)

  it("glsb.VERSION is the VERSION file's", function()
    assert.are.equal(version, require("glsb").VERSION)
    assert.are.equal(version, require("glsb.constants").VERSION)
  end)

  it("glsb-lua reports the VERSION file's", function()
    local p = io.popen(ROOT .. "/build/glsb-lua --version 2>&1")
    local out = p:read("a")
    p:close()
    assert.matches("^glsb%-lua " .. version:gsub("%p", "%%%0") .. " ", out)
  end)
end)
