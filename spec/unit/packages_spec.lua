-- glsb.packages: package name validation and the generated install code / command.
local packages = require "glsb.packages"

-- Parses Python source with the real python3 and returns the argv list literal
-- passed to subprocess.run, decoded (so quoting is checked by Python itself).
local function python_argv(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(code)
  f:close()
  local p = io.popen("python3 -c '\n"
    .. "import ast, json, sys\n"
    .. "tree = ast.parse(open(sys.argv[1]).read())\n"
    .. "for node in ast.walk(tree):\n"
    .. "    if isinstance(node, ast.Call) and getattr(node.func, \"attr\", \"\") == \"run\":\n"
    .. "        lst = node.args[0]\n"
    .. "        print(json.dumps([ast.literal_eval(e) if isinstance(e, ast.Constant) else \"<expr>\"\n"
    .. "                          for e in lst.elts]))\n"
    .. "' " .. path .. " 2>&1")
  local out = p:read("a")
  p:close()
  os.remove(path)
  return require("cjson").decode(out)
end

local function shell_words(cmd)
  local p = io.popen("sh -c 'for a in \"$@\"; do printf \"%s\\n\" \"$a\"; done' sh " .. cmd)
  local words = {}
  for line in p:lines() do words[#words + 1] = line end
  p:close()
  return words
end

describe("glsb.packages #unit", function()
  it("accepts PEP 508 names with extras and version clauses", function()
    for _, s in ipairs({ "numpy", "a", "scikit-learn", "zope.interface", "pandas==2.2.1", "requests[socks,security]",
      "torch>=2,<3", "x~=1.4.2", "pkg!=1.0", "Django===4.2", "ab_c" }) do
      assert.is_true(packages.check(s), s)
    end
  end)

  it("rejects anything that could become an option, a URL or shell syntax", function()
    for _, s in ipairs({ "", "-e", "--index-url=http://evil", "numpy; rm -rf /", "a b", "pkg @ https://x/y.whl",
      "$(id)", "`id`", "a'b", 'a"b', "a\nb", "x=>1", "x==", "foo[bar", "../x", ".hidden", "x-" }) do
      assert.is_nil(packages.check(s), s)
    end
    assert.is_nil(packages.check(42))
    assert.is_nil(packages.check(string.rep("a", 201)))
  end)

  it("validate copies the list and names the bad entry", function()
    local list = { "numpy", "pandas" }
    local out = packages.validate(list)
    assert.are.same(list, out)
    assert.are_not.equal(list, out)
    assert.has_error(function() packages.validate({ "numpy", "-U" }) end, nil)
    local ok, err = pcall(packages.validate, { "numpy", "-U" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("additional_packages[2]", 1, true))
    assert.has_error(function() packages.validate("numpy") end)
    assert.has_error(function() packages.validate({ "a", x = "b" }) end)
    assert.are.same({}, packages.validate(nil))
  end)

  it("generates Python that pip-installs through sys.executable with exact argv", function()
    local code = packages.python_install_code({ "numpy", "pandas>=2,<3", "requests[socks]" })
    assert.truthy(code:find("import importlib as _glsb_il, subprocess as _glsb_sp, sys as _glsb_sys", 1, true))
    assert.truthy(code:find("raise RuntimeError", 1, true))
    assert.is_nil(code:find("shell=True", 1, true))
    local argv = python_argv(code)
    assert.are.same({ "<expr>", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
      "numpy", "pandas>=2,<3", "requests[socks]" }, argv)
  end)

  it("refuses to generate code for a bad name", function()
    assert.has_error(function() packages.python_install_code({ "numpy\"]); import os; os.system('id') #" }) end)
  end)

  it("python_string survives any byte", function()
    local s = "a\"b\\c\n\0\255'"
    local code = "import subprocess\nsubprocess.run([" .. packages.python_string(s) .. "])\n"
    local argv = python_argv(code)
    -- literal_eval yields a str: \xff is U+00FF, which JSON hands back as UTF-8 (C3 BF)
    assert.are.equal("a\"b\\c\n\0\195\191'", argv[1])
  end)

  it("shell command quotes every word", function()
    local cmd = packages.shell_install_command({ "numpy", "pandas>=2,<3" })
    assert.are.same({ "python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
      "numpy", "pandas>=2,<3" }, shell_words(cmd))
  end)
end)
