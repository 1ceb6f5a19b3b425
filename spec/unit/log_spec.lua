-- glsb.log: replaceable handler, default stderr line, broken handlers never raise.
local log = require "glsb.log"

describe("glsb.log #unit", function()
  it("sends every level to the installed handler (debug at level debug) and restores the previous one", function()
    local seen = {}
    local prev = log.set_handler(function(level, msg, fields) seen[#seen + 1] = { level, msg, fields } end)
    local prev_level = log.set_level("debug")
    log.debug("d")
    log.info("i", { a = 1 })
    log.warn("w")
    log.error("e")
    log.set_level(prev_level)
    log.debug("not at level warn")
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

  it("GLSB_LOG sets the level the default handler shows; debug lists HTTP requests without secrets", function()
    local function run(env, chunk)
      local p = io.popen(env .. [[ build/glsb-lua -e ']] .. chunk .. [[' 2>&1]])
      local out = p:read("a")
      p:close()
      return out
    end
    local chunk = [[local log = require "glsb.log" log.debug("d") log.info("i") log.warn("w")]]
    assert.are.equal("glsb: warn: w\n", run("", chunk))
    assert.are.equal("glsb: info: i\nglsb: warn: w\n", run("GLSB_LOG=info", chunk))
    assert.are.equal("glsb: debug: d\nglsb: info: i\nglsb: warn: w\n", run("GLSB_LOG=debug", chunk))
    local out = run("GLSB_LOG=debug", [[local http = require "glsb.http"
      http.request{ url = "http://user:pw@127.0.0.1:1/x?signature=s3cret", headers = { ["X-API-KEY"] = "k3y" },
        connect_timeout = 1, timeout = 2 }]])
    assert.matches("glsb: debug: http GET http://REDACTED:REDACTED@127.0.0.1:1/x%?signature=REDACTED %-> "
      .. "COULDNT_CONNECT %(connect%) in [%d.]+ ms", out)
    assert.is_nil(out:find("s3cret", 1, true))
    assert.is_nil(out:find("k3y", 1, true))
    assert.is_nil(out:find("pw@", 1, true))
  end)

  it("set_level and enabled: a handler of the user's gets info and above, debug at level debug", function()
    local prev_level = log.set_level("error")
    assert.is_false(log.enabled("warn"))
    local seen = {}
    local prev = log.set_handler(function(level) seen[#seen + 1] = level end)
    assert.is_true(log.enabled("info"))
    assert.is_false(log.enabled("debug"))
    log.debug("x")
    log.info("y")
    log.set_level("debug")
    log.debug("z")
    log.set_handler(prev)
    log.set_level(prev_level)
    assert.same({ "info", "debug" }, seen)
    assert.has_error(function() log.set_level("loud") end)
  end)
end)
