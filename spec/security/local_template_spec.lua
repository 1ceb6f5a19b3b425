-- Issue 9, item 1: the host treats what a template build wrote as hostile. A build step (or a pip
-- package) that plants symlinks where the host expects the layer's directories must not make the host
-- move, read or expose a host directory; the build fails and the host is untouched.
local glsb = require "glsb"
local errors = require "glsb.errors"
local helper = require "local.helper"

describe("local template builds are hostile output #security #local", function()
  local tmp, cache, victim

  local function build(run)
    return pcall(function()
      return glsb.template("local", { cache_dir = cache }):ensure { name = "hostile", run = { run } }
    end)
  end

  local function victim_intact()
    assert.are.equal("host data", helper.read(victim .. "/site/keep.txt"))
    assert.are.same({ "keep.txt" }, helper.list_dir(victim .. "/site"))
  end

  before_each(function()
    tmp = helper.private_tmp()
    cache = tmp .. "/cache"
    victim = tmp .. "/victim"
    os.execute("mkdir -p " .. helper.q(victim .. "/site"))
    helper.write(victim .. "/site/keep.txt", "host data")
  end)
  after_each(function()
    -- no scratch left, no layer made of what the build pointed at
    local scratch = helper.list_dir(cache .. "/local/tmp")
    local layers = helper.list_dir(cache .. "/local/templates")
    helper.rm_rf(tmp)
    assert.are.same({}, scratch)
    assert.are.same({}, layers)
  end)

  it("a ~/.glsb-layer replaced by a symlink to a host directory is refused; the host keeps it", function()
    local ok, err = build("rm -rf ~/.glsb-layer && ln -s " .. victim .. " ~/.glsb-layer")
    assert.is_false(ok, "the build was accepted")
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    assert.truthy(tostring(err):find("symlink", 1, true), tostring(err))
    victim_intact()
  end)

  it("a site directory replaced by a symlink is refused", function()
    local ok, err = build("rm -rf ~/.glsb-layer/site && ln -s " .. victim .. "/site ~/.glsb-layer/site")
    assert.is_false(ok, "the build was accepted")
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    victim_intact()
  end)

  it("a build that floods its log keeps a bounded tail on the host", function()
    local ok, res = build("head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo the-end")
    assert.is_true(ok, tostring(res))
    local log = helper.read(res.ref.path .. "/build.log")
    assert.truthy(#log <= 2 * 1024 * 1024, "build.log is " .. #log .. " bytes")
    assert.truthy(log:find("the-end", 1, true), "the tail of the log was lost")
    helper.rm_rf(tmp) -- the layer of this case is legitimate
    os.execute("mkdir -p " .. helper.q(cache .. "/local/tmp"))
  end)
end)
