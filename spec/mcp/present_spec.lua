-- glsb.mcp.present and glsb.mcp.json: what results look like on the wire. #unit
local present = require "glsb.mcp.present"
local json = require "glsb.mcp.json"
local cjson = require "cjson.safe"

describe("glsb.mcp.present.clip #unit", function()
  it("keeps a text that fits as it is", function()
    assert.same({ "abc\n", 0 }, { present.clip("abc\n", 10) })
  end)

  it("keeps the head and the tail, cut at line ends, and says how much was cut and where the whole is", function()
    local lines = {}
    for i = 1, 1000 do lines[i] = string.format("line %04d", i) end
    local text = table.concat(lines, "\n") .. "\n"
    local out, cut = present.clip(text, 2000, "glsb://x/stdout")
    assert.is_true(#out < 2000 + 200)
    assert.is_true(cut > 0)
    assert.equal(#text, #out - #out:match("%[glsb: [^\n]*%]\n") + cut)
    assert.truthy(out:find("^line 0001\n"))
    assert.truthy(out:find("line 1000\n$"))
    local note = out:match("\n(%[glsb: [^\n]*%])\n")
    assert.equal(string.format("[glsb: %d bytes cut here to fit the result; the whole output: glsb://x/stdout]", cut), note)
    -- the cut falls between lines: what is around the note is whole lines
    local before, after = out:match("^(.*\n)%[glsb:[^\n]*%]\n(.*)$")
    assert.truthy(before:match("line %d%d%d%d\n$"))
    assert.truthy(after:match("^line %d%d%d%d\n"))
  end)

  it("cuts one long line without a line end, and never inside a UTF-8 character", function()
    local text = string.rep("é", 500000) -- 1 MB, no "\n"
    local out, cut = present.clip(text, 10001)
    assert.truthy(utf8.len(out), "the result is valid UTF-8")
    assert.equal(0, cut % 2)
    assert.is_true(#out <= 10001 + 80)
  end)
end)

describe("glsb.mcp.json #unit", function()
  it("writes compact JSON with sorted keys, empty arrays, exact integers, and UTF-8 repaired", function()
    local line = json.encode({ b = 1, a = json.array(), c = { 2 ^ 53, 1.5, -0.25 }, d = "x\n\"y\255", e = json.null,
      f = {} })
    assert.equal('{"a":[],"b":1,"c":[9007199254740992,1.5,-0.25],"d":"x\\n\\"y\239\191\189","e":null,"f":{}}', line)
    assert.is_nil(line:find("\n", 1, true))
    -- an id as cjson reads it (a double) is written back as the same double: what JSON.parse made of it
    assert.equal("12345678901234568", json.encode(cjson.decode("12345678901234567")))
    assert.equal("0.1", json.encode(0.1))
    assert.equal("null", json.encode(0 / 0))
  end)

  it("refuses documents too deep or with too many containers before building them", function()
    assert.is_nil(json.decode(string.rep("[", 100) .. string.rep("]", 100)))
    local many = "[" .. string.rep("[],", 150000) .. "[]]"
    local v, why = json.decode(many)
    assert.is_nil(v)
    assert.truthy(why:find("more than 100000 arrays and objects", 1, true))
    assert.same({ a = { 1 } }, json.decode('{"a":[1]}'))
  end)
end)
