-- Rich results on Bedrock AgentCore (issue 21): the content blocks of a CodeInterpreterResult (image,
-- resource, resource_link) as bundles after the cell wrapper's own (display(), the last value), the
-- wrapper's cap, and the note when a figure open at the end came back as no image. The emulator's
-- `content` fault stands for whatever blocks the service sends. #bedrock
local emulator = require "bedrock.emulator"
local glsb = require "glsb"
local core = require "glsb.core"

local Status = glsb.ExecutionStatus
local PNG = "\137PNG\r\n\26\n"

describe("bedrock rich results #bedrock", function()
  local emu, sb, prev_log

  setup(function()
    emu = emulator.start()
    prev_log = glsb.log.set_handler(function() end)
    sb = glsb.create("bedrock", emu:opts { timeout = 600 })
  end)
  teardown(function()
    if sb then pcall(sb.terminate, sb) end
    glsb.log.set_handler(prev_log)
    if emu then emu:stop() end
  end)
  after_each(function() emu:clear_faults() end)

  it("maps image, resource and resource_link blocks into bundles, after the wrapper's, in order", function()
    emu:fault { action = "content", tool = "executeCode", content = {
      { type = "image", mimeType = "image/jpeg", data = core.b64encode("\255\216\255jpeg") },
      { type = "image", mimeType = "image/gif", data = core.b64encode("GIF89a") },
      { type = "resource", resource = { type = "blob", uri = "file:///tmp/plot.png", mimeType = "image/png",
        blob = core.b64encode(PNG .. "rest") } },
      { type = "resource", resource = { type = "text", uri = "file:///tmp/t.csv", mimeType = "text/csv",
        text = "a,b\n1,2\n" } },
      { type = "resource_link", uri = "s3://bucket/big.parquet", name = "big.parquet", mimeType = "application/x-parquet",
        size = 123456789 },
    } }
    local r = sb:execute_code("display('shown')\nprint('out')\n41 + 1")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("out\n", r.stdout)
    assert.are.equal("42", r.text)
    assert.are.equal(7, #r.results)
    assert.are.same({ "shown", false }, { r.results[1].text, r.results[1].is_main_result })
    assert.are.same({ "42", true }, { r.results[2].text, r.results[2].is_main_result })
    assert.are.equal("\255\216\255jpeg", r.results[3].jpeg)
    assert.are.equal("GIF89a", r.results[4].extra["image/gif"])
    assert.are.equal(PNG .. "rest", r.results[5].png)
    assert.are.equal("file:///tmp/plot.png", r.results[5].extra.uri)
    assert.are.equal("a,b\n1,2\n", r.results[6].extra["text/csv"])
    assert.are.equal("file:///tmp/t.csv", r.results[6].extra.uri)
    assert.are.equal("big.parquet", r.results[7].text)
    assert.are.same({ uri = "s3://bucket/big.parquet", name = "big.parquet", mime_type = "application/x-parquet",
      size = 123456789 }, r.results[7].extra.resource_link)
    local mimes = {}
    for i, img in ipairs(r:images()) do mimes[i] = img.mime .. "@" .. img.index end
    assert.are.same({ "image/jpeg@3", "image/png@5" }, mimes)
  end)

  it("a figure open at the end that came back as no image is noted, not silent", function()
    require("support.python").need("matplotlib", pending)
    -- the service's answer without the emulator's image block (one empty text block: cjson encodes an
    -- empty table as an object)
    emu:fault { action = "content", tool = "executeCode", content = { { type = "text", text = "" } } }
    local r = sb:execute_code("import matplotlib.pyplot as plt\n_ = plt.plot([1, 2])", { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(1, #r.results)
    assert.is_true(glsb.results.is_note(r.results[1]))
    assert.matches("^%[glsb: 1 matplotlib figure that was open at the end of the cell came back from AgentCore as no image",
      r.results[1].text)
    -- the emulator closed it all the same: the next run shows and notes nothing
    assert.are.same({}, sb:execute_code("x = 1").results)
    -- with the image block, no note
    r = sb:execute_code("_ = plt.plot([3, 1])")
    assert.are.equal(1, #r.results)
    assert.are.equal(PNG, r.results[1].png:sub(1, 8))
  end)

  it("sends the display module once per session, and again when the interpreter lost it", function()
    -- which calls carried display.py's source (the adapter calls cell.encode through the module table)
    local cell = require "glsb.providers.bedrock.cell"
    local encode, carried = cell.encode, {}
    cell.encode = function(...)
      local code, id = encode(...)
      carried[#carried + 1] = code:find("def figure_bundle(", 1, true) ~= nil
      return code, id
    end
    finally(function() cell.encode = encode end)
    local other = glsb.create("bedrock", emu:opts { timeout = 600 })
    finally(function() other:terminate() end)
    assert.are.equal(2, #other:execute_code("display('a')\n1").results)
    assert.are.equal(2, #other:execute_code("display('b')\n2").results)
    -- the interpreter forgets it (as one that started again would): the next call finds no runner, runs
    -- nothing, and goes again with it
    local r = other:execute_code("import sys\ndel sys.modules['_glsb_display']")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    r = other:execute_code("display('back')\nn = globals().get('n', 0) + 1\n'x' * n")
    assert.are.equal("x", r.text) -- ran once
    assert.are.same({ "back", "x" }, { r.results[1].text, r.results[2].text })
    -- a display() of the code's own is left alone
    r = other:execute_code("def display(*a):\n    print('mine', *a)\ndisplay('x')\n4")
    assert.are.equal("mine x\n", r.stdout)
    assert.are.equal(1, #r.results)
    assert.are.same({ true, false, false, false, true, false }, carried)
    assert.are.equal(6, #carried)
  end)

  it("the wrapper keeps glsb.results.CAP of the displays and notes the rest", function()
    local r = sb:execute_code("blob = b'\\x89PNG\\r\\n\\x1a\\n' + bytes(1024 * 1024)\nclass Big:\n"
      .. "    def _repr_png_(self):\n        return blob\nfor _ in range(30):\n    display(Big())", { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.is_true(r.results_truncated)
    local kept = #r:images()
    assert.is_true(kept >= 5 and kept < 10, tostring(kept)) -- base64 in the verdict: 4/3 of each image
    assert.matches("^%[glsb: results truncated at %d+ bytes; " .. (30 - kept) .. " more results", r.results[kept + 1].text)
    assert.are.equal(PNG, r:images()[1].data:sub(1, 8))
    assert.are.equal(1024 * 1024 + 8, #r:images()[1].data)
  end)
end)
