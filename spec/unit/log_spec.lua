-- glsb.log: replaceable handler, default stderr line, broken handlers never raise.
local log = require "glsb.log"

describe("glsb.log #unit", function()
  it("sends every level to the installed handler and restores the previous one", function()
    local seen = {}
    local prev = log.set_handler(function(level, msg, fields) seen[#seen + 1] = { level, msg, fields } end)
    log.debug("d")
    log.info("i", { a = 1 })
    log.warn("w")
    log.error("e")
    local mine = log.set_handler(prev)
    assert.is_function(mine)
    assert.are.same({ { "debug", "d" }, { "info", "i", { a = 1 } }, { "warn", "w" }, { "error", "e" } }, seen)
  end)

  it("never lets a broken handler raise", function()
    local prev = log.set_handler(function() error("handler bug") end)
    assert.has_no.errors(function() log.warn("x") end)
    log.set_handler(prev)
    assert.has_error(function() log.set_handler("not a function") end)
  end)

  it("writes warnings and errors to stderr by default, with sorted fields", function()
    local p = io.popen([[lua5.4 -e 'package.path="lua/?.lua;"..package.path
      local log = require "glsb.log"
      log.info("quiet") log.warn("loud", { b = 2, a = 1 })' 2>&1]])
    local out = p:read("a")
    p:close()
    assert.are.equal("glsb: warn: loud (a=1 b=2)\n", out)
  end)
end)
