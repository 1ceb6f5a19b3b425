-- One hook list: the table "Hooks" of lua/glsb/PROVIDERS.md is the contract, glsb.sandbox's M.HOOKS the
-- same list in code (names, order, which are required), and a class that lacks a required hook is
-- refused, by name, before anything starts.
local sandbox = require "glsb.sandbox"
local registry = require "glsb.registry"

local function doc_hooks()
  local f = assert(io.open("lua/glsb/PROVIDERS.md", "rb"))
  local text = f:read("a")
  f:close()
  local block = assert(text:match("\n### Hooks\n(.-)\n### "), "PROVIDERS.md has a section ### Hooks")
  local rows = {}
  for line in block:gmatch("[^\n]+") do
    local hook, required = line:match("^| `Sandbox[:.](_[%w_]+)%(.-` | ([^|]-) |")
    if hook then
      rows[#rows + 1] = { hook, required = required == "yes" and "BaseSandbox"
        or required == "yes (code interpreter)" and "CodeInterpreterSandbox" or nil }
    end
  end
  return rows
end

describe("the hook list #unit", function()
  it("is the same in PROVIDERS.md and in glsb.sandbox.HOOKS: names, order, required", function()
    local doc = doc_hooks()
    assert.is_true(#doc >= 20, "PROVIDERS.md's table has " .. #doc .. " hooks")
    local code = {}
    for i, h in ipairs(sandbox.HOOKS) do code[i] = { h[1], required = h.required } end
    assert.are.same(code, doc)
  end)

  it("names every hook the base classes and the kit call on a sandbox", function()
    local listed = {}
    for _, h in ipairs(sandbox.HOOKS) do listed[h[1]] = true end
    -- what lua/glsb calls on an instance or a class: self:_x( / self._x( / cls._x( / sb:_x(
    -- the base's own steps, and what glsb.sandbox hands sb.files (files.lua's fields)
    local internal = { _after_start = true, _prepare_create = true, _set_close_handler = true,
      _guarded = true, _require_running = true }
    local p = io.popen("find lua/glsb -name '*.lua' | LC_ALL=C sort")
    local missing = {}
    for path in p:lines() do
      local f = assert(io.open(path, "rb"))
      local text = f:read("a")
      f:close()
      for name in text:gmatch("%f[%w_]%a+[:.](_%l[%l_]*)%(") do
        if not listed[name] and not internal[name] and not text:find("function [%w_.:]*[:.]" .. name .. "%(") then
          missing[#missing + 1] = path .. ": " .. name
        end
      end
    end
    p:close()
    assert.are.same({}, missing)
  end)

  it("refuses a class without a required hook when its provider is registered, and at new()", function()
    local Sandbox = sandbox.CodeInterpreterSandbox:extend("hookless")
    function Sandbox:_start() self.sandbox_id = "x" end
    function Sandbox:_terminate() end
    local ok, err = pcall(registry.register, "hookless", { Sandbox = Sandbox })
    assert.is_false(ok)
    assert.matches("provider 'hookless': its class does not define _run_code, a required hook", err, 1, true)
    ok, err = pcall(Sandbox.create, {})
    assert.is_false(ok)
    assert.matches("does not define _run_code", err, 1, true)
    local Base = sandbox.BaseSandbox:extend("no-terminate")
    function Base:_start() self.sandbox_id = "x" end
    ok, err = pcall(Base.new, {})
    assert.is_false(ok)
    assert.matches("does not define _terminate, a required hook of every BaseSandbox", err, 1, true)
    -- once it has its hooks it is accepted
    function Sandbox:_run_code() return { stdout = "", stderr = "" } end
    local mod = registry.register("hookless", { Sandbox = Sandbox })
    assert.are.equal(Sandbox, mod.Sandbox)
    registry.unregister("hookless")
  end)
end)
