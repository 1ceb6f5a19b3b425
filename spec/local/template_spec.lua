-- glsb.template("local"): content-addressed layers, build once, concurrent
-- builds, create from a template, export/import, failures.
local glsb = require "glsb"
local errors = require "glsb.errors"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus

describe("local templates #local", function()
  local tmp, cache, wheels, root

  local function builder(extra)
    local opts = { cache_dir = cache }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return glsb.template("local", opts)
  end

  local function create(template, extra)
    local opts = { template = template, cache_dir = cache, workspace_root = root }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return glsb.create("local", opts)
  end

  setup(function()
    tmp = helper.private_tmp()
    os.execute("chmod 755 " .. helper.q(tmp))
    cache = tmp .. "/cache"
    wheels = tmp .. "/wheels"
    root = tmp .. "/ws"
    os.execute("mkdir -m 755 " .. helper.q(wheels) .. " " .. helper.q(root))
    helper.make_wheel(wheels, "glsbtiny", "0.1", "VALUE = 42\n")
  end)

  teardown(function()
    local left = helper.list_dir(root)
    local scratch = helper.list_dir(cache .. "/local/tmp")
    helper.rm_rf(tmp)
    assert.are.same({}, left)
    assert.are.same({}, scratch)
  end)

  it("builds a layer once, then finds it; a sandbox starts from it with packages, files, run output, env, workdir", function()
    local spec = {
      name = "tiny", packages = { "glsbtiny" },
      files = { { path = "notes.txt", data = "template notes\n" }, { path = "bin/hello.sh", data = "echo hello\n", mode = 493 } },
      run = { "echo built-by-run > stamp.txt" },
      env = { TEMPLATE_FLAVOUR = "tiny" }, workdir = "/home/user/work",
      provider = { pip_find_links = wheels },
    }
    local res = builder():ensure(spec)
    assert.is_true(res.built)
    assert.truthy(res.ref.template_id:match("^%x+$") and #res.ref.template_id == 64)
    local again = builder():ensure(spec)
    assert.is_false(again.built)
    assert.are.equal(res.ref.template_id, again.ref.template_id)

    local sb = create(res.ref.template_id)
    local r = sb:execute_code("import glsbtiny, os\nprint(glsbtiny.VALUE, os.getcwd(), os.environ['TEMPLATE_FLAVOUR'])\n"
      .. "print(open('/home/user/notes.txt').read().strip(), open('stamp.txt').read().strip())")
    local c = sb:execute_command("/home/user/bin/hello.sh && touch /opt/glsb/template/x 2>&1; echo rc=$?")
    sb:terminate()
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("42 /home/user/work tiny\ntemplate notes built-by-run\n", r.stdout)
    assert.truthy(c.stdout:find("^hello\n"), c.stdout)
    assert.truthy(c.stdout:find("rc=1", 1, true), "the layer is writable: " .. c.stdout)

    -- by name too
    sb = create("tiny")
    assert.are.equal("42\n", sb:execute_code("import glsbtiny; print(glsbtiny.VALUE)").stdout)
    sb:terminate()
  end)

  it("builds the same spec concurrently without corruption: one layer, both get it", function()
    local spec = { name = "conc", files = { { path = "f.txt", data = string.rep("z", 100000) } },
      run = { "sleep 0.3; echo ok > done.txt" } }
    local a, b
    glsb.run(function()
      local t1 = glsb.spawn(function() return builder():ensure(spec) end)
      local t2 = glsb.spawn(function() return builder():ensure(spec) end)
      a, b = glsb.gather(t1, t2)
    end)
    assert.are.equal(a.ref.template_id, b.ref.template_id)
    local layers = 0
    for _, name in ipairs(helper.list_dir(cache .. "/local/templates")) do
      if name == a.ref.template_id then layers = layers + 1 end
    end
    assert.are.equal(1, layers)
    assert.are.same({}, helper.list_dir(cache .. "/local/tmp"))
    local sb = create(a.ref.template_id)
    local r = sb:execute_code("print(len(open('f.txt').read()), open('done.txt').read().strip())")
    sb:terminate()
    assert.are.equal("100000 ok\n", r.stdout)
  end)

  it("exports a layer as tar.gz and imports it into another cache", function()
    local res = builder():ensure({ name = "port", files = { { path = "a/b.txt", data = "portable" } } })
    local tgz = tmp .. "/port.tgz"
    builder():export(res.ref.template_id, tgz)
    local data = helper.read(tgz)
    assert.are.equal("\31\139", data:sub(1, 2)) -- gzip magic
    local other = glsb.template("local", { cache_dir = tmp .. "/cache2" })
    local imp = other:import(tgz)
    assert.is_true(imp.imported)
    assert.are.equal(res.ref.template_id, imp.template_id)
    assert.is_false(other:import(tgz).imported)
    local sb = create(imp.template_id, { cache_dir = tmp .. "/cache2" })
    local r = sb:execute_code("print(open('/home/user/a/b.txt').read())")
    sb:terminate()
    assert.are.equal("portable\n", r.stdout)
  end)

  it("a failing build raises TemplateBuildError with the log and leaves no scratch", function()
    local ok, err = pcall(function()
      return builder():ensure({ name = "broken", run = { "echo about to fail; exit 7" } })
    end)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    assert.are.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
    assert.truthy(err.message:find("exit code 7", 1, true), err.message)
    assert.truthy(err.message:find("about to fail", 1, true), err.message)
    assert.are.same({}, helper.list_dir(cache .. "/local/tmp"))
    ok, err = pcall(function()
      return builder():ensure({ name = "nopkg", packages = { "glsb-not-there" }, provider = { pip_find_links = wheels } })
    end)
    assert.is_false(ok)
    assert.truthy(err.message:find("pip install failed", 1, true), err.message)
  end)

  it("refuses what the local provider cannot build", function()
    for _, spec in ipairs({
      { name = "img", base_image = "python:3.12" },
      { name = "apt", apt_packages = { "curl" } },
      { name = "svc", start_cmd = "server" },
    }) do
      local ok, err = pcall(function() return builder():ensure(spec) end)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
      assert.truthy(err.message:find("do not support", 1, true), err.message)
    end
  end)

  it("a sandbox from an unknown template fails with SandboxStartError(create)", function()
    local ok, err = pcall(create, string.rep("ab", 32))
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal(glsb.Stage.CREATE, err.stage)
    assert.truthy(err.message:find("not found", 1, true), err.message)
  end)
end)
