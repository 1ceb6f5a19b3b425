-- glsb.results: bundles, the cap, r:images(), results.save, tostring.
local results = require "glsb.results"
local models = require "glsb.models"
local sandbox = require "glsb.sandbox"
local errors = require "glsb.errors"

local PNG = "\137PNG\r\n\26\n" .. string.rep("\0", 40)

describe("glsb.results #unit", function()
  it("keeps the forms it knows, of the right type, with is_main_result and extra", function()
    local b = results.new { text = "42", png = PNG, html = 7, json = { a = 1 }, is_main_result = 1,
      extra = { chart = { type = "bar" } }, bogus = "x" }
    assert.are.same({ "text", "png", "json" }, b:formats())
    assert.is_nil(b.html)       -- not a string: left out
    assert.is_nil(b.bogus)
    assert.is_false(b.is_main_result) -- only true is true
    assert.are.equal("bar", b.extra.chart.type)
    assert.are.same({}, results.new({}).extra)
    assert.has_error(function() results.new("png") end, "glsb.results.new: a table expected, got string")
  end)

  it("best() prefers pictures, then rich text, then text", function()
    local form, mime, data = results.new({ text = "t", html = "<b>", png = PNG }):best()
    assert.are.same({ "png", "image/png", PNG }, { form, mime, data })
    assert.are.equal("html", (results.new({ text = "t", html = "<b>" }):best()))
    assert.are.equal("text", (results.new({ text = "t" }):best()))
    assert.is_nil(results.new({}):best())
  end)

  it("tostring is one short line: sizes for bytes, clipped text", function()
    local big = string.rep("x", 5 * 1024 * 1024)
    local s = tostring(results.new { png = big, text = string.rep("line\n", 100), is_main_result = true,
      extra = { chart = {} } })
    assert.is_true(#s < 200, s)
    assert.matches("^Result%(main, text \"line line ", s)
    assert.matches("png 5242880 bytes", s, 1, true)
    assert.matches("extra: chart%)$", s)
  end)

  it("the collector keeps bundles up to the cap, then drops and notes", function()
    local c = results.collector(100)
    assert.is_true(c:add { text = string.rep("a", 60) })
    assert.is_false(c:add { png = string.rep("b", 50) })   -- 60 + 50 > 100
    assert.is_true(c:add { text = string.rep("c", 40) })   -- fits exactly
    c:drop(1000)                                            -- one the adapter never decoded
    local r = c:finish({})
    assert.is_true(r.results_truncated)
    assert.are.equal(3, #r.results)
    assert.is_true(results.is_note(r.results[3]))
    assert.are.equal("[glsb: results truncated at 100 bytes; 2 more results (1050 bytes) dropped]",
      r.results[3].text)
    assert.is_true(results.is_capped(r.results))
  end)

  it("counts json and extra by their JSON text", function()
    assert.are.equal(2 + #'{"a":1}', results.new({ text = "hi", json = { a = 1 } }):size())
    assert.are.equal(#'{"chart":{"type":"line"}}', results.new({ extra = { chart = { type = "line" } } }):size())
  end)

  it("the base class caps results a hook returned whole, and leaves a collector's list alone", function()
    local list = {}
    for i = 1, 30 do list[i] = { png = string.rep("p", 1024 * 1024), is_main_result = false } end
    local r = sandbox.normalize_result { status = "success", code = 0, results = list }
    assert.is_true(r.results_truncated)
    assert.are.equal(11, #r.results) -- 10 whole MiB, then the note
    assert.matches("20 more results", r.results[11].text)
    assert.are.equal(results.Result, getmetatable(r.results[1]))
    local c = results.collector()
    c:add { text = "x" }
    local kept = c:finish({}).results
    r = sandbox.normalize_result { status = "success", code = 0, results = kept }
    assert.are.equal(kept, r.results)
    assert.are.same({}, sandbox.normalize_result({ status = "success", code = 0 }).results)
    assert.is_false(sandbox.normalize_result({ status = "success", code = 0 }).results_truncated)
  end)

  it("r:images() lists png, jpeg and svg in order, with the bundle's index", function()
    local r = models.ExecutionResult.new { code = 0, results = {
      results.new { text = "1" },
      results.new { png = PNG, svg = "<svg/>" },
      results.new { jpeg = "\255\216jpeg" },
    } }
    local imgs = r:images()
    assert.are.same({ "image/svg+xml", "image/png", "image/jpeg" }, { imgs[1].mime, imgs[2].mime, imgs[3].mime })
    assert.are.same({ 2, 2, 3 }, { imgs[1].index, imgs[2].index, imgs[3].index })
    assert.are.equal(PNG, imgs[2].data)
    assert.are.equal(r.results[2], imgs[2].result)
    assert.are.same({}, models.ExecutionResult.new({ code = 0 }):images())
    assert.matches("results=3", tostring(r))
  end)

  it("save() writes each bundle's best form and returns the paths; notes are not written", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local r = models.ExecutionResult.new { code = 0, results = {
      results.new { png = PNG, text = "<Figure>" },
      results.new { html = "<table></table>", text = "df" },
      results.new { json = { a = { 1, 2 } } },
      results.note("[glsb: a note]"),
      results.new { text = "'plain'" },
    } }
    local paths = results.save(r, dir .. "/")
    assert.are.same({ dir .. "/result-1.png", dir .. "/result-2.html", dir .. "/result-3.json",
      dir .. "/result-5.txt" }, paths)
    local function read(p) local f = assert(io.open(p, "rb")) local s = f:read("a") f:close() return s end
    assert.are.equal(PNG, read(paths[1]))
    assert.are.equal("<table></table>", read(paths[2]))
    assert.are.equal('{"a":[1,2]}', read(paths[3]))
    assert.are.equal("'plain'", read(paths[4]))
    for _, p in ipairs(paths) do os.remove(p) end
    os.remove(dir)
    -- misuse is an argument error; a directory that is not there is a glsb error naming the file
    assert.has_error(function() results.save(nil, "/tmp") end)
    assert.has_error(function() results.save(r, 7) end, "glsb.results.save: dir must be a non-empty string")
    local ok, err = pcall(results.save, r, dir .. "/gone")
    assert.is_false(ok)
    assert.is_true(errors.is_error(err), tostring(err))
    assert.are.equal("files", err.stage)
    assert.are.equal("glsb.results.save: cannot write " .. dir .. "/gone/result-1.png: No such file or directory",
      err.message) -- the path once
  end)
end)
