-- glsb.shell: a quoted word is read back by a real sh as exactly the bytes it stands for.
local shell = require "glsb.shell"

-- What sh makes of a command line's words (one per line; the words below hold no newline).
local function sh_words(line)
  local p = io.popen("sh -c 'for a in \"$@\"; do printf \"%s\\n\" \"$a\"; done' sh " .. line)
  local words = {}
  for w in p:lines() do words[#words + 1] = w end
  p:close()
  return words
end

describe("glsb.shell #unit", function()
  it("leaves a plain word bare and quotes anything else", function()
    assert.are.equal("numpy", shell.quote("numpy"))
    assert.are.equal("/tmp/a-b_c.d:e=f@g%h+i,j", shell.quote("/tmp/a-b_c.d:e=f@g%h+i,j"))
    assert.are.equal("'it'\\''s'", shell.quote("it's"))
    assert.are.equal("''", shell.quote(""))
    assert.are.equal("'pandas>=2,<3'", shell.quote("pandas>=2,<3"), "> and < are redirections")
    assert.are.equal("7", shell.quote(7))
  end)

  it("gives sh back exactly the words, whatever they hold", function()
    local words = { "a b", "$(id)", "it's", "`uname`", "x;y", "~root", "!1", "*", "<in", ">out", "a\\b", "\"q\"",
      "$HOME", "tab\there", "" }
    assert.are.same(words, sh_words(shell.join(words)))
  end)

  it("joins a whole argv", function()
    assert.are.equal("pip install 'numpy>=1' requests", shell.join({ "pip", "install", "numpy>=1", "requests" }))
    assert.are.equal("", shell.join({}))
  end)
end)
