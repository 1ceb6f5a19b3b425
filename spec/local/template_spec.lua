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
    local opts = { template = template, cache_dir = cache, host_workspace_dir = root }
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
    helper.make_wheel(wheels, "glsbextra", "0.1", "VALUE = 'extra'\n")
  end)

  teardown(function()
    local left = helper.list_dir(helper.workspace_root(root))
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

  it("reports each line of the build to on_log as it comes, with its step; a failure names its step", function()
    local entries = {}
    local b = builder({ on_log = function(e) entries[#entries + 1] = e end, progress = false })
    b:ensure({ name = "logged", files = { { path = "a.txt", data = "a" } },
      run = { "echo first line; echo to stderr >&2", "echo second step" } })
    local seen = {}
    for _, e in ipairs(entries) do
      assert.is_string(e.timestamp)
      seen[#seen + 1] = string.format("%s %s %s", tostring(e.step), e.level, e.message)
    end
    local all = table.concat(seen, "\n")
    for _, want in ipairs({ "1 info [glsb step 1/3] write 1 file", "2 info [glsb step 2/3] run[1]: echo first line;",
      "2 info first line", "2 warn to stderr", "3 info [glsb step 3/3] run[2]: echo second step",
      "3 info second step" }) do
      assert.truthy(all:find(want, 1, true), want .. " missing from:\n" .. all)
    end
    -- on a terminal (progress = true) the one progress line shows the step that runs
    local out = helper.sh("cd " .. helper.q(helper.repo) .. " && build/glsb-lua -e " .. helper.q(
      "local b = require('glsb').template('local', { cache_dir = " .. string.format("%q", cache)
      .. ", progress = true }) pcall(b.ensure, b, { name = 'prog', run = { 'echo one', 'echo two; exit 3' } })") .. " 2>&1")
    assert.truthy(out:find("step 2/2: run[2]: echo two; exit 3", 1, true), out)
    local ok, err = pcall(function() return builder():ensure({ name = "prog", run = { "echo one", "echo two; exit 3" } }) end)
    assert.is_false(ok)
    assert.truthy(err.message:find("failed at step 2/2: run[2]: echo two; exit 3", 1, true), err.message)
    assert.are.same({}, helper.list_dir(cache .. "/local/tmp"))
  end)

  it("lists the layers with their names, and deletes one by name or id with every name of it", function()
    local b = builder()
    local one = b:ensure({ name = "list-one", files = { { path = "x", data = "1" } } })
    b:ensure({ name = "list-one-alias", files = { { path = "x", data = "1" } } }) -- same content, second name
    local two = b:ensure({ name = "list-two", files = { { path = "x", data = "2" } } })
    local by_id = {}
    for _, t in ipairs(b:list()) do by_id[t.template_id] = t end
    assert.are.same({ "list-one", "list-one-alias" }, by_id[one.ref.template_id].names)
    assert.are.equal("list-one", by_id[one.ref.template_id].name)
    assert.are.same({ "list-two" }, by_id[two.ref.template_id].names)
    assert.is_number(by_id[two.ref.template_id].built_at)

    assert.is_true(b:delete("list-one-alias"))
    assert.is_nil(require("glsb.providers.local.template").resolve("list-one", { cache_dir = cache }))
    assert.is_false(b:delete("list-one"), "gone with its other name")
    assert.is_true(b:delete(two.ref.template_id))
    assert.is_false(b:delete("list-two"))
    assert.is_false(b:delete("never-built"))
    for _, t in ipairs(b:list()) do
      assert.is_nil(t.names[1] and t.names[1]:match("^list%-"), "still listed: " .. tostring(t.names[1]))
      assert.are_not.equal(one.ref.template_id, t.template_id)
    end
    local ok, err = pcall(create, "list-two")
    assert.is_false(ok)
    assert.truthy(err.message:find("not found", 1, true), err.message)
    assert.are.same({}, helper.list_dir(cache .. "/local/tmp"))
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

  it("a child of base_template starts from the parent's packages, files and env, adds and overrides its own", function()
    local parent = builder():ensure({
      name = "fam-base", packages = { "glsbtiny" },
      files = { { path = "base.txt", data = "from parent\n" }, { path = "shared.txt", data = "parent\n", mode = 292 } },
      run = { "echo parent-run > parent-run.txt; ln -s /etc/hostname abs-link; ln -s base.txt rel-link" },
      env = { FAM_A = "parent-a", FAM_B = "parent-b" }, workdir = "/home/user/pw",
      provider = { pip_find_links = wheels },
    })
    local spec = {
      name = "fam-child", base_template = "fam-base", packages = { "glsbextra" },
      files = { { path = "child.txt", data = "from child\n" }, { path = "shared.txt", data = "child\n" } },
      run = { "cat ../base.txt > /home/user/seen-by-run.txt" }, -- runs in the inherited workdir
      env = { FAM_B = "child-b" }, provider = { pip_find_links = wheels },
    }
    local child = builder():ensure(spec)
    assert.is_true(child.built)
    assert.are_not.equal(parent.ref.template_id, child.ref.template_id)
    local again = builder():ensure(spec)
    assert.is_false(again.built)
    assert.are.equal(child.ref.template_id, again.ref.template_id)
    -- the parent's id instead of its name is the same spec
    local by_id = {}
    for k, v in pairs(spec) do by_id[k] = v end
    by_id.base_template = parent.ref.template_id
    local third = builder():ensure(by_id)
    assert.is_false(third.built)
    assert.are.equal(child.ref.template_id, third.ref.template_id)

    local meta = require("cjson").decode(helper.read(child.ref.path .. "/meta.json"))
    assert.are.equal(parent.ref.template_id, meta.base_template)
    assert.are.same({ "glsbextra", "glsbtiny" }, meta.packages)
    -- symlinks of the parent are copied as symlinks, not followed
    local links = helper.sh("cd " .. helper.q(child.ref.path .. "/home/pw") -- run ran in the workdir
      .. " && test -L abs-link && test -L rel-link && readlink abs-link rel-link")
    assert.are.equal("/etc/hostname\nbase.txt\n", links)

    local code = "import glsbtiny, glsbextra, os\n"
      .. "print(glsbtiny.VALUE, glsbextra.VALUE, os.getcwd(), os.environ['FAM_A'], os.environ['FAM_B'])\n"
      .. "for f in ('base.txt', 'child.txt', 'shared.txt', 'pw/parent-run.txt', 'seen-by-run.txt'):\n"
      .. "    print(open('/home/user/' + f).read().strip())\n"
    local want = "42 extra /home/user/pw parent-a child-b\nfrom parent\nfrom child\nchild\nparent-run\nfrom parent\n"
    local sb = create("fam-child")
    local r = sb:execute_code(code)
    sb:terminate()
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(want, r.stdout)

    -- self-contained: the child's sandboxes do not need the parent any more
    helper.rm_rf(parent.ref.path)
    sb = create(child.ref.template_id)
    r = sb:execute_code(code)
    sb:terminate()
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(want, r.stdout)
  end)

  it("a child's id follows its parent's content, not its name", function()
    local p1 = builder():ensure({ name = "gen", files = { { path = "v.txt", data = "v1" } } })
    local spec = { name = "gen-child", base_template = "gen", files = { { path = "c.txt", data = "c" } } }
    local c1 = builder():ensure(spec)
    assert.is_true(c1.built)
    -- the same name rebuilt with other content: the child is another layer
    local p2 = builder():ensure({ name = "gen", files = { { path = "v.txt", data = "v2" } } })
    assert.are_not.equal(p1.ref.template_id, p2.ref.template_id)
    local c2 = builder():ensure(spec)
    assert.is_true(c2.built)
    assert.are_not.equal(c1.ref.template_id, c2.ref.template_id)
    assert.is_false(builder():ensure(spec).built)
    local got = {}
    for i, id in ipairs({ c1.ref.template_id, c2.ref.template_id }) do
      local sb = create(id)
      got[i] = sb:execute_code("print(open('v.txt').read(), open('c.txt').read())").stdout
      sb:terminate()
    end
    assert.are.same({ "v1 c\n", "v2 c\n" }, got)
  end)

  it("a child's package version replaces the parent's, metadata included", function()
    local wheels2 = tmp .. "/wheels2"
    os.execute("mkdir -m 755 " .. helper.q(wheels2))
    helper.make_wheel(wheels2, "glsbtiny", "0.2", "VALUE = 43\n")
    builder():ensure({ name = "ver-base", packages = { "glsbtiny" }, provider = { pip_find_links = wheels } })
    local child = builder():ensure({ name = "ver-child", base_template = "ver-base", packages = { "glsbtiny==0.2" },
      provider = { pip_find_links = wheels2 } })
    local sb = create(child.ref.template_id)
    local r = sb:execute_code("import glsbtiny, importlib.metadata as m\n"
      .. "print(glsbtiny.VALUE, m.version('glsbtiny'))")
    sb:terminate()
    assert.are.equal("43 0.2\n", r.stdout, tostring(r))
    assert.are.same({ "glsbtiny", "glsbtiny-0.2.dist-info" }, helper.list_dir(child.ref.path .. "/site"))
  end)

  it("an unknown base_template raises TemplateBuildError naming it and leaves no scratch", function()
    for _, base in ipairs({ "no-such-parent", string.rep("cd", 32) }) do
      local ok, err = pcall(function()
        return builder():ensure({ name = "orphan", base_template = base, files = { { path = "x", data = "x" } } })
      end)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
      assert.are.equal(glsb.Stage.TEMPLATE_BUILD, err.stage)
      assert.truthy(err.message:find("base_template '" .. base .. "'", 1, true), err.message)
    end
    assert.are.same({}, helper.list_dir(cache .. "/local/tmp"))
  end)

  it("a sandbox from an unknown template fails with SandboxStartError(create)", function()
    local ok, err = pcall(create, string.rep("ab", 32))
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.are.equal(glsb.Stage.CREATE, err.stage)
    assert.truthy(err.message:find("not found", 1, true), err.message)
  end)
end)
