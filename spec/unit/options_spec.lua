-- Strict options (issue 14): every public function checks its options against declared schemas; misuse
-- is a plain Lua argument error at the caller's line, naming the key and the closest known one.
local glsb = require "glsb"
local options = require "glsb.options"
local registry = require "glsb.registry"
local fake_provider = require "support.fake_provider"

local THIS_FILE = "spec/unit/options_spec.lua"

-- Calls fn, expects a plain argument error (a string) pointing at this file, matching `pattern`.
local function misuse(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an argument error matching " .. pattern)
  assert.is_string(err, "misuse must be a plain Lua error, not a glsb error object: " .. tostring(err))
  assert.matches(pattern, err)
  return err
end

describe("glsb.options #unit", function()
  it("suggests the closest known name, or none when nothing is close", function()
    local known = { memory_mb = 1, timeout = 1, template = 1, on_stdout = 1 }
    assert.equal("memory_mb", options.closest("memroy_mb", known))
    assert.equal("timeout", options.closest("timout", known))
    assert.equal("template", options.closest("templat", known))
    assert.equal("on_stdout", options.closest("on_stdot", known))
    assert.is_nil(options.closest("colour", known))
  end)

  it("checks types, and says what it expected and what it got", function()
    local schema = { n = { "seconds" }, s = { "string|table" }, m = { "string_map" }, l = { "string_list" },
      c = { "count" }, p = { "positive" } }
    assert.same({ n = 1, s = {}, m = { A = "1", B = 2 }, l = { "x" }, c = 3, p = 0.5 },
      options.check({ n = 1, s = {}, m = { A = "1", B = 2 }, l = { "x" }, c = 3, p = 0.5 }, schema, "f"))
    assert.same({}, options.check(nil, schema, "f"))
    misuse("f: option 'n' must be a number of seconds, got NaN", options.check, { n = 0 / 0 }, schema, "f")
    misuse("f: option 's' must be a string or a table, got number 5", options.check, { s = 5 }, schema, "f")
    misuse("f: option 'm' must be a table of string keys to strings, got string", options.check, { m = "A=1" },
      schema, "f")
    misuse("f: option 'l' must be an array of strings", options.check, { l = { 1 } }, schema, "f")
    misuse("f: option 'c' must be a positive integer", options.check, { c = 1.5 }, schema, "f")
    misuse("f: option 'p' must be a number > 0, got number 0", options.check, { p = 0 }, schema, "f")
    misuse("f: options must be a table, got string", options.check, "opts", schema, "f")
    misuse("f: option names must be strings", options.check, { 1 }, schema, "f")
  end)

  it("checks declared bounds, whole numbers, values and required keys", function()
    local schema = { n = { "number", min = 0, max = 1 }, i = { "integer", min = 1 }, w = { "number", integer = true },
      p = { "string", values = { "a", "b" } }, r = { "string", "who it is", required = true } }
    assert.same({ r = "x", n = 0, i = 1, w = 3.0, p = "b" }, options.check({ r = "x", n = 0, i = 1, w = 3.0, p = "b" },
      schema, "f"))
    assert.same({ r = "x", n = 1 }, options.check({ r = "x", n = 1 }, schema, "f"), "bounds are inclusive")
    misuse("f: option 'n' must be from 0 to 1, got number 1.5", options.check, { r = "x", n = 1.5 }, schema, "f")
    misuse("f: option 'n' must be from 0 to 1, got number %-0.1", options.check, { r = "x", n = -0.1 }, schema, "f")
    misuse("f: option 'i' must be >= 1, got number 0", options.check, { r = "x", i = 0 }, schema, "f")
    misuse("f: option 'i' must be an integer, got number 2.5", options.check, { r = "x", i = 2.5 }, schema, "f")
    misuse("f: option 'w' must be an integer, got number inf", options.check, { r = "x", w = math.huge }, schema, "f")
    misuse("f: option 'p' must be one of \"a\", \"b\", got string \"c\"", options.check, { r = "x", p = "c" },
      schema, "f")
    misuse("f: option 'r' is required: who it is", options.check, {}, schema, "f")
    misuse("f: option 'r' is required", options.check, nil, schema, "f")
    -- one value declared like an option (a positional argument)
    assert.equal(2, options.check_value(2, schema.i, "g", "i"))
    assert.is_nil(options.check_value(nil, schema.i, "g", "i"))
    misuse("g: option 'i' must be >= 1, got number 0", options.check_value, 0, schema.i, "g", "i")
  end)

  it("has one time rule: nil is the default, <= 0 is no limit", function()
    assert.equal(5, options.timeout(5, 30))
    assert.equal(30, options.timeout(nil, 30))
    assert.is_nil(options.timeout(nil, nil))
    assert.is_nil(options.timeout(0, 30))
    assert.is_nil(options.timeout(-1, 30))
    assert.is_nil(options.timeout(nil, 0), "a default of 0 is no limit too")
  end)

  it("suggests only what is close: one Levenshtein for every checker", function()
    assert.equal("command_timeout", options.closest("comand_timeout", { command_timeout = 1, tls_ca = 1 }))
    assert.is_nil(options.closest("zzzzzzzz", { exporter = 1, endpoint = 1 }), "far from every key: no suggestion")
    assert.equal("max_output_bytes", options.closest("max_output", { max_output_bytes = 1, timeout = 1 }))
  end)

  it("renders a schema as the README's Markdown table", function()
    local md = options.markdown({ b = { "boolean", "flag", default = "false" }, a = { "string|count", "x" } })
    assert.equal("| option | type | default | meaning |\n|---|---|---|---|\n| `a` | string or integer > 0 |  | x |\n"
      .. "| `b` | boolean | `false` | flag |", md)
    md = options.markdown({ n = { "number", "ratio", min = 0, max = 1 }, i = { "number", "count", integer = true,
      min = 1 }, p = { "string", "mode", values = { "a", "b" }, default = "a" }, r = { "string", "name", required = true } })
    assert.equal("| option | type | default | meaning |\n|---|---|---|---|\n| `i` | integer >= 1 |  | count |\n"
      .. "| `n` | number from 0 to 1 |  | ratio |\n| `p` | `a` or `b` | `a` | mode |\n| `r` | string | required | name |", md)
  end)
end)

describe("strict options on the public API #unit", function()
  local provider
  local quiet

  setup(function() quiet = glsb.log.set_handler(function() end) end)
  teardown(function() glsb.log.set_handler(quiet) end)

  before_each(function()
    provider = fake_provider.new("fake")
    registry.register("fake", provider)
  end)
  after_each(function() registry.unregister("fake") end)

  it("create: the cases the first hour found accepted silently", function()
    -- nothing is started: the checks come first (local and e2b need no sandbox, server or key here)
    misuse("^" .. THIS_FILE .. ":%d+: create: unknown option 'memroy_mb' %(did you mean 'memory_mb'%?%)",
      glsb.create, "local", { memroy_mb = 512 })
    misuse("create: unknown option 'timout' %(did you mean 'timeout'%?%)", glsb.create, "local", { timout = 5 })
    misuse("create: unknown option 'templat' %(did you mean 'template'%?%)", glsb.create, "e2b", { templat = "x" })
    misuse("create: option 'network' must be a boolean or a table, got string \"yes\"", glsb.create, "local",
      { network = "yes" })
    misuse("create: option 'retry' must be a boolean or a table, got string \"x\"", glsb.create, "fake", { retry = "x" })
    misuse("create: option 'env' must be a table of string keys to strings, got string", glsb.create, "local",
      { env = "A=1" })
    misuse("create: option 'timeout' must be a number of seconds, got NaN", glsb.create, "fake", { timeout = 0 / 0 })
    misuse("create: option 'env' has a bad variable name", glsb.create, "fake", { env = { ["A B"] = "1" } })
    misuse("create: additional_packages%[1%]", glsb.create, "fake", { additional_packages = { "x; rm -rf /" } })
    -- a provider's own value rules are argument errors too, before anything starts (no server is running here)
    misuse("^" .. THIS_FILE .. ":%d+: create: option 'network_policy': egress%[1%] must be", glsb.create, "opensandbox",
      { network_policy = { egress = { { action = "maybe", target = "x" } } } })
    misuse("create: option 'protocol' must be one of \"http\", \"https\"", glsb.create, "opensandbox",
      { protocol = "ftp" })
    misuse("create: option 'cpus' must be from 0.01 to 4096", glsb.create, "local", { cpus = 0 })
    -- each provider's own options are known to it only
    misuse("create: unknown option 'api_key'", glsb.create, "local", { api_key = "k" })
    misuse("create: unknown option 'memory_mb'", glsb.create, "e2b", { memory_mb = 512 })
  end)

  it("the calls of a running sandbox", function()
    local sb = glsb.create("fake", { api_key = "k", metadata = { team = "ml" } })
    misuse("^" .. THIS_FILE .. ":%d+: execute_code: unknown option 'timout' %(did you mean 'timeout'%?%)",
      sb.execute_code, sb, "1", { timout = 1 })
    misuse("execute_code: unknown option 'on_stdot' %(did you mean 'on_stdout'%?%)", sb.execute_code, sb, "1",
      { on_stdot = print })
    misuse("execute_code: option 'on_stdout' must be a function", sb.execute_code, sb, "1", { on_stdout = "print" })
    misuse("execute_code: code must be a string", sb.execute_code, sb, 42)
    misuse("execute_command: unknown option 'cdw' %(did you mean 'cwd'%?%)", sb.execute_command, sb, "ls",
      { cdw = "/" })
    misuse("download_file: unknown option 'timeot'", sb.download_file, sb, "/x", { timeot = 1 })
    misuse("terminate: option 'timeout' must be a number of seconds, got NaN", sb.terminate, sb, { timeout = 0 / 0 })
    misuse("ref: unknown option 'secret' %(did you mean 'secrets'%?%)", sb.ref, sb, { secret = true })
    misuse("files%[1%]: ", sb.execute_code, sb, "1", { files = { { filename = "/etc/passwd", data = "" } } })
    -- a language the provider does not run is refused per call too (fake runs python and bash)
    misuse("execute_code: provider 'fake' does not run language 'r'", sb.execute_code, sb, "1", { language = "r" })
    assert.equal("success", sb:execute_code("1", { language = "bash" }).status)
    assert.same({ team = "ml" }, sb.metadata)
    assert.is_true(sb:is_running(), "misuse changed nothing")
    sb:terminate()
  end)

  it("connect, list and the template builders", function()
    misuse("connect: unknown option 'api_kye' %(did you mean 'api_key'%?%)", glsb.connect, "e2b", "i123",
      { api_kye = "k" })
    misuse("connect: expected a sandbox id", glsb.connect, "e2b", 42, {})
    misuse("list: option 'limit' must be a positive integer", glsb.list, "e2b", { limit = 0 })
    misuse("template%(local%): unknown option 'cache_dri' %(did you mean 'cache_dir'%?%)", glsb.template, "local",
      { cache_dri = "/tmp" })
    misuse("template%(e2b%): option 'poll_interval' must be a number > 0", glsb.template, "e2b", { poll_interval = -1 })
    -- on_log and progress are every builder's (builders report progress through them)
    assert.is_table(glsb.template("local", { on_log = print, progress = false }))
    local b = glsb.template("e2b", { api_key = "k", progress = false })
    misuse("template spec must be a table, got nil", b.ensure, b, nil)
    misuse("template spec: unknown field 'pakages' %(did you mean 'packages'%?%)", b.ensure, b,
      { name = "x", pakages = {} })
    misuse("delete: name must be a non%-empty string", b.delete, b, "")
  end)
end)

describe("strict options on the workspace primitives #unit", function()
  it("names the unknown key before touching the sandbox", function()
    local sb = { is_running = function() return true end }
    misuse("write_workspace_file: unknown option 'relative_pth' %(did you mean 'relative_path'%?%)",
      glsb.write_workspace_file, sb, { relative_pth = "x", data = "" })
    misuse("run_workspace_command: unknown option 'max_output' %(did you mean 'max_output_bytes'%?%)",
      glsb.run_workspace_command, sb, { "true" }, { max_output = 1 })
    misuse("run_workspace_command: option 'env_allowlist' must be an array of strings",
      glsb.run_workspace_command, sb, { "true" }, { env_allowlist = "PATH" })
  end)
end)
