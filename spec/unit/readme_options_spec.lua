-- The README's option tables are the declarations (glsb.options), rendered: a key declared but not shown,
-- shown but not declared, or described differently fails here. Regenerate with
-- `lua5.4 spec/support/readme_options.lua --write`.
local readme = require "support.readme_options"
local options = require "glsb.options"

describe("README option tables #unit", function()
  local expected = {
    ["README.md"] = { "base create", "base execute_code", "base execute_command", "base download_file",
      "base terminate", "base connect", "base list", "base kill", "base ref", "base template", "base write_workspace_file",
      "base run_workspace_command" },
    ["docs/tracing.md"] = { "base trace" },
    ["docs/pool.md"] = { "base pool", "base pool_acquire", "base pool_shutdown" },
    ["docs/lm.md"] = { "lm request", "lm invoke", "lm openai", "lm anthropic" },
    ["docs/interpreter.md"] = { "interpreter new", "interpreter execute" },
    ["providers/e2b/README.md"] = { "e2b provider", "e2b create", "e2b connect", "e2b template" },
    ["providers/local/README.md"] = { "local provider", "local create", "local template", "local snapshot" },
    ["providers/opensandbox/README.md"] = { "opensandbox provider", "opensandbox create", "opensandbox template" },
    ["providers/bedrock/README.md"] = { "bedrock provider", "bedrock create", "bedrock template" },
  }

  for _, path in ipairs(readme.FILES) do
    it(path .. " shows exactly the declared options", function()
      local blocks = readme.blocks(readme.read(path))
      local seen = {}
      for _, b in ipairs(blocks) do
        seen[#seen + 1] = b.who .. " " .. b.what
        assert.equal(readme.render(b.who, b.what), b.body,
          path .. ": the table for " .. b.who .. " " .. b.what .. " is not what the declarations say; run "
            .. "lua5.4 spec/support/readme_options.lua --write")
      end
      assert.same(expected[path], seen)
    end)
  end

  it("every option a provider declares is in its README", function()
    local glsb = require "glsb"
    for _, name in ipairs({ "e2b", "local", "opensandbox", "bedrock" }) do
      local p = glsb.provider(name)
      local text = readme.read("providers/" .. name .. "/README.md")
      local declared = options.merge(options.own(p.Sandbox, "create", "provider"), options.own(p.Sandbox, "connect"),
        options.own(p.Template, "builder"))
      for _, k in ipairs(options.names(declared)) do
        assert.truthy(text:find("| `" .. k .. "` |", 1, true), name .. " README lacks option " .. k)
      end
    end
  end)
end)
