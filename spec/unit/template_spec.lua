-- glsb.template: spec validation/normalization, canonical content hash, TemplateBuilder.ensure.
local template = require "glsb.template"
local errors = require "glsb.errors"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"

local function identity(s) return s end

-- Misuse (a bad spec) is a plain argument error naming the field, never a TemplateBuildError.
local function arg_error(fn, pattern)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an argument error")
  assert.is_string(err, "an argument error is a string, not a glsb error object")
  if pattern then assert.matches(pattern, err) end
  return err
end

local function build_error(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected a TemplateBuildError")
  assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
  assert.are.equal("template_build", err.stage)
  return err
end

describe("glsb.template #unit", function()
  describe("canonical", function()
    it("sorts keys, keeps array order, normalizes numbers, escapes bytes", function()
      assert.are.equal('{"a":1,"b":[3,1,2],"c":{"x":true}}',
        template.canonical({ c = { x = true }, b = { 3, 1, 2 }, a = 1 }))
      assert.are.equal("[2,2.5]", template.canonical({ 2.0, 2.5 }))
      assert.are.equal('"q\\x22\\x5c\\x0a\\xff"', template.canonical('q"\\\n\255'))
      assert.are.equal("{}", template.canonical({}))
    end)

    it("is independent of construction order", function()
      local a, b = {}, {}
      for i = 1, 50 do a["k" .. i] = i end
      for i = 50, 1, -1 do b["k" .. i] = i end
      assert.are.equal(template.canonical(a), template.canonical(b))
    end)

    it("refuses what it cannot serialize", function()
      assert.has_error(function() template.canonical({ f = print }) end)
      assert.has_error(function() template.canonical({ [true] = 1 }) end)
      assert.has_error(function() template.canonical(0 / 0) end)
      local cyc = {}
      cyc.self = cyc
      assert.has_error(function() template.canonical(cyc) end)
    end)
  end)

  describe("normalize", function()
    it("validates and canonicalizes a full spec", function()
      local n = template.normalize({
        name = "my-base", base_image = "python:3.11-slim", packages = { "pandas", "numpy", "pandas" },
        apt_packages = { "git", "curl=7.88.1-10" }, files = { { path = "/etc/b", data = "B" },
          { filename = "a.txt", data = "A", mode = 420 } }, run = { "echo 1", "echo 2" }, env = { A = "1" },
        workdir = "/home/user", start_cmd = "serve", ready_cmd = "curl -f localhost", cpu = 2, memory_mb = 2048,
        provider = { e2b = { team = "x" } },
      })
      assert.are.same({ "numpy", "pandas" }, n.packages)
      assert.are.same({ "curl=7.88.1-10", "git" }, n.apt_packages)
      assert.are.same({ "/etc/b", "a.txt" }, { n.files[1].path, n.files[2].path })
      assert.are.same({ "echo 1", "echo 2" }, n.run)
      assert.are.equal(2048, n.memory_mb)
    end)

    it("rejects bad specs with a plain argument error naming the field", function()
      arg_error(function() template.normalize("x") end)
      arg_error(function() template.normalize({}) end)
      arg_error(function() template.normalize({ name = "bad name" }) end)
      arg_error(function() template.normalize({ name = "a", colour = "red" }) end, "unknown field 'colour'")
      arg_error(function() template.normalize({ name = "a", pakages = { "x" } }) end,
        "unknown field 'pakages' %(did you mean 'packages'%?%)")
      arg_error(function() template.normalize({ name = "a", base_image = "x", base_template = "y" }) end)
      arg_error(function() template.normalize({ name = "a", packages = { "-e ." } }) end)
      arg_error(function() template.normalize({ name = "a", apt_packages = { "git; reboot" } }) end)
      arg_error(function() template.normalize({ name = "a", files = { { path = "../x", data = "" } } }) end)
      arg_error(function() template.normalize({ name = "a", files = { { path = "x" } } }) end)
      arg_error(function() template.normalize({ name = "a", files = { { path = "x", data = "1" },
        { path = "x", data = "2" } } }) end)
      arg_error(function() template.normalize({ name = "a", run = { 42 } }) end)
      arg_error(function() template.normalize({ name = "a", env = { ["1A"] = "x" } }) end)
      arg_error(function() template.normalize({ name = "a", workdir = "rel" }) end)
      arg_error(function() template.normalize({ name = "a", cpu = 0 }) end)
      arg_error(function() template.normalize({ name = "a", memory_mb = 1.5 }) end)
      arg_error(function() template.normalize({ name = "a", provider = { f = print } }) end)
    end)
  end)

  describe("hash", function()
    it("ignores the name, order of packages and empty fields; changes with content", function()
      local h = function(s) return template.hash(s, identity) end
      local base = h({ name = "a", packages = { "numpy", "pandas" } })
      assert.are.equal(base, h({ name = "b", packages = { "pandas", "numpy" } }))
      assert.are.equal(base, h({ name = "a", packages = { "numpy", "pandas" }, apt_packages = {}, env = {} }))
      assert.are_not.equal(base, h({ name = "a", packages = { "numpy" } }))
      assert.are_not.equal(base, h({ name = "a", packages = { "numpy", "pandas" }, run = { "x" } }))
      assert.are_not.equal(h({ name = "a", run = { "x", "y" } }), h({ name = "a", run = { "y", "x" } }))
      assert.truthy(base:find("^glsb%-template%-v1\n"))
    end)

    it("is the sha256 of the content via glsb.core", function()
      local ok, core = pcall(require, "glsb.core")
      assert.is_true(ok, "glsb.core is needed (run make): " .. tostring(core))
      local spec = { name = "a", packages = { "numpy" } }
      local h = template.hash(spec)
      assert.truthy(h:match("^%x+$") and #h == 64, h)
      assert.are.equal(core.sha256(template.content(spec)), h)
    end)
  end)

  describe("TemplateBuilder.ensure", function()
    local provider, backend
    before_each(function()
      provider, backend = fake_provider.new("faketpl")
      registry.register("faketpl", provider)
    end)
    after_each(function() registry.unregister("faketpl") end)

    it("builds once, then finds the identical template", function()
      local b = require("glsb").template("faketpl", { api_key = "k" })
      assert.are.equal("k", b.options.api_key)
      local r1 = b:ensure({ name = "my-base", packages = { "pandas", "numpy" } })
      assert.is_true(r1.built)
      assert.truthy(r1.ref.template_id:find("^my%-base%-"))
      local r2 = b:ensure({ name = "my-base", packages = { "numpy", "pandas" } })
      assert.is_false(r2.built)
      assert.are.same(r1.ref, r2.ref)
      assert.are.equal(1, backend.count("_build"))
      local r3 = b:ensure({ name = "my-base", packages = { "numpy" } })
      assert.is_true(r3.built)
    end)

    it("wraps build failures as TemplateBuildError and keeps the cause", function()
      backend.build_failure = errors.http_failure(500, {}, "boom")
      local b = provider.Template.new()
      local err = build_error(function() b:ensure({ name = "x" }) end)
      assert.are.equal(500, err.cause.http_status)
      arg_error(function() b:ensure({ name = "bad name" }) end, "template spec: name must be")
      arg_error(function() b:ensure(nil) end, "template spec must be a table, got nil")
    end)

    it("needs a _build hook and a table reference", function()
      local Bare = template.TemplateBuilder:extend("bare")
      Bare.hasher = identity
      build_error(function() Bare.new():ensure({ name = "x" }) end)
      function Bare:_build() return "id" end
      local err = build_error(function() Bare.new():ensure({ name = "x" }) end)
      assert.truthy(err.message:find("no template reference", 1, true))
    end)
  end)
end)
