-- glsb.providers.bedrock.cell: the verdict channel on stdout, decoded exactly. #bedrock #unit
require "glsb" -- installs the provider searcher (providers/x/... in the source tree)
local cell = require "glsb.providers.bedrock.cell"

describe("bedrock cell verdict #bedrock #unit", function()
  local mark = "[glsb-verdict-0123456789abcdef0123456789abcdef]"

  it("removes exactly the verdict, keeping output before and after it", function()
    local out, v = cell.decode("a\nb" .. mark .. '{"text": "42"}' .. mark .. "late\n", mark)
    assert.are.equal("a\nblate\n", out)
    assert.are.same({ text = "42" }, v)
    out, v = cell.decode(mark .. "{}" .. mark, mark)
    assert.are.equal("", out)
    assert.are.same({}, v)
  end)

  it("gives no verdict when the mark is absent, single, or around something that is not JSON", function()
    for _, s in ipairs({ "plain output\n", "x" .. mark .. "{}", "x" .. mark .. "{not json" .. mark,
      "x" .. mark .. "[glsb-verdict-other]" .. mark, "[glsb-verdict-ffff]{}[glsb-verdict-ffff]" }) do
      local out, v = cell.decode(s, mark)
      assert.are.equal(s, out)
      if s:find("other", 1, true) then assert.is_nil(v) end
    end
    local _, v = cell.decode("x" .. mark .. '"a string"' .. mark, mark)
    assert.is_nil(v)
  end)

  it("encodes the code as an exact bytes literal and the env as surrogate-escaped text", function()
    local code = cell.encode("print('\255\0\"\\')", { B = "é", A = "1" }, mark)
    assert.truthy(code:find([[b"print('\xff\x00\x22\x5c')"]], 1, true), code)
    assert.truthy(code:find([[{b"A".decode('utf-8', 'surrogateescape'): b"1".decode('utf-8', 'surrogateescape'), ]]
      .. [[b"B".decode('utf-8', 'surrogateescape'): b"\xc3\xa9".decode('utf-8', 'surrogateescape')}]], 1, true), code)
    assert.is_nil(code:find("\n", 1, true), "one line, one statement")
  end)
end)
