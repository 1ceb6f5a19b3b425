-- Rich results on the local provider (issue 21): the agent's display protocol (providers/local/display.py)
-- without IPython, matplotlib as Jupyter's inline backend shows it, chart data with E2B's field names, and
-- the results' cap, kept by the agent and by the host whatever the sandbox sends.
local glsb = require "glsb"
local helper = require "local.helper"
local python = require "support.python"
local shell = require "support.shell"

local Status = glsb.ExecutionStatus

-- Runs one cell in a fresh glsb-lua process, so that its peak resident size (VmHWM) is this call's own:
-- -> {status, truncated, images, results, last (the last bundle's text), hwm (KiB), error}.
local SCRIPT = [=[
local glsb = require "glsb"
glsb.log.set_handler(function() end)
local code, root, out = arg[1], arg[2], arg[3]
local sb = glsb.create("local", { host_workspace_dir = root })
local r = sb:execute_code(code, { timeout = 120 })
sb:terminate()
local hwm
for line in io.lines("/proc/self/status") do hwm = hwm or line:match("^VmHWM:%s+(%d+)") end
local last = r.results[#r.results]
local f = assert(io.open(out, "wb"))
f:write(table.concat({ r.status, tostring(r.results_truncated), #r:images(), #r.results, tostring(hwm),
  last and last.text or "", (tostring(r.error):gsub("\n", " ")) }, "\n"))
f:close()
]=]

local function run_fresh(code, root)
  local dir = helper.private_tmp()
  local script, out = dir .. "/run.lua", dir .. "/out"
  local f = assert(io.open(script, "w"))
  f:write(SCRIPT)
  f:close()
  local _, rc = helper.sh(shell.join({ helper.root .. "/build/glsb-lua", script, code, root, out }) .. " 2>&1")
  local text = shell.read(out) or ""
  helper.rm_rf(dir)
  assert.are.equal(0, rc, text)
  local status, truncated, images, results, hwm, last, err =
    text:match("^([^\n]*)\n([^\n]*)\n(%d+)\n(%d+)\n(%d+)\n([^\n]*)\n(.*)$")
  return { status = status, truncated = truncated == "true", images = tonumber(images), results = tonumber(results),
    hwm = tonumber(hwm), last = last, error = err }
end

-- 1,000 displays of a 1 MiB "PNG" (a GiB in all), after `prelude`
local function thousand_images(prelude)
  return prelude .. [[
blob = b"\x89PNG\r\n\x1a\n" + bytes(1024 * 1024)
class Big:
    def _repr_png_(self):
        return blob
    def __repr__(self):
        return "Big()"
for _ in range(1000):
    display(Big())
]]
end

describe("local rich results #local", function()
  local root, sb

  setup(function() root = helper.private_tmp() end)
  teardown(function() helper.remove_root(root) end)
  before_each(function() sb = glsb.create("local", { host_workspace_dir = root }) end)
  after_each(function() if sb then sb:terminate() sb = nil end end)

  it("follows IPython's display protocol: _repr_mimebundle_ first, then each _repr_*_, raw bundles", function()
    local r = sb:execute_code([[
import base64
class Rich:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/markdown": "**md**", "application/vnd.glsb.test+json": {"k": 1}}
    def _repr_html_(self):
        return "<i>html</i>", {"isolated": True}
    def _repr_png_(self):
        return base64.b64encode(b"\x89PNG\r\n\x1a\npixels").decode()
    def _repr_latex_(self):
        raise ValueError("no latex today")
    def _repr_json_(self):
        return {"a": [1, 2.5, None]}
    def __repr__(self):
        return "Rich()"
display(Rich())
display({"text/plain": "raw text", "image/svg+xml": "<svg/>"}, raw=True)
Rich()
]])
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(3, #r.results)
    local a = r.results[1]
    assert.are.same({ "text", "html", "markdown", "png", "json" }, a:formats())
    assert.are.equal("Rich()", a.text)
    assert.are.equal("**md**", a.markdown)
    assert.are.equal("<i>html</i>", a.html)                    -- (data, metadata): the data
    assert.are.equal("\137PNG\r\n\26\npixels", a.png)          -- a str png is base64: bytes here
    assert.are.same({ a = { 1, 2.5 } }, { a = { a.json.a[1], a.json.a[2] } })
    assert.are.same({ k = 1 }, a.extra["application/vnd.glsb.test+json"])
    assert.is_false(a.is_main_result)
    assert.matches("glsb display: _repr_latex_ failed: ValueError: no latex today", r.stderr)
    assert.are.same({ "text", "svg" }, r.results[2]:formats())
    assert.are.equal("raw text", r.results[2].text)
    assert.is_true(r.results[3].is_main_result)
    assert.are.equal("Rich()", r.text)
  end)

  it("IPython.display where IPython is not installed: the display classes, display(), clear_output()", function()
    local has_ipython = python.has("IPython")
    local r = sb:execute_code([[
from IPython.display import display, HTML, Markdown, Image, JSON, clear_output
import IPython.core.display
open('/tmp/p.png', 'wb').write(b'\x89PNG\r\n\x1a\nzz')
display(HTML("<b>x</b>"), Markdown("# t"), JSON('{"a": 1}'), Image('/tmp/p.png'), Image(data=b'\xff\xd8\xffjj'))
clear_output()
IPython.core.display.HTML is HTML
]])
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(6, #r.results)
    assert.are.same({ "<b>x</b>", "# t", 1, "\137PNG\r\n\26\nzz", "\255\216\255jj" }, { r.results[1].html,
      r.results[2].markdown, r.results[3].json.a, r.results[4].png, r.results[5].jpeg })
    assert.are.equal("True", r.text)
    if not has_ipython then
      assert.matches("stand%-in", sb:execute_code("import IPython\nIPython.__doc__").text)
    end
  end)

  it("imports nothing for code that shows nothing rich, and bash cells give text only", function()
    local r = sb:execute_code("import sys\nsorted(m for m in ('matplotlib', 'pandas', 'numpy', 'base64', "
      .. "'glsb_inline') if m in sys.modules), callable(display)")
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("([], True)", r.text)
    assert.are.equal(1, #r.results)
    assert.are.same({ "text" }, r.results[1]:formats())
    r = sb:execute_code("echo from-bash", { language = "bash" })
    assert.are.equal("from-bash\n", r.stdout)
    assert.are.same({}, r.results)
  end)

  it("matplotlib as the inline backend: plt.show() shows and closes, open figures at the end, also after an error",
    function()
    python.need("matplotlib", pending)
    local r = sb:execute_code([[
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [4, 5, 6], label="up")
plt.title("first")
plt.show()
plt.plot([3, 2, 1])
plt.show()
plt.figure().add_subplot().bar(["Author A", "Author B", "Author C"], [100, 200, 300], label="Books Sold")
plt.xlabel("Authors")
plt.ylabel("Number of Books Sold (units)")
plt.title("Book Sales")
import matplotlib
matplotlib.get_backend()
]], { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(4, #r.results, tostring(r.results[5]))
    local first, second, main, bars = r.results[1], r.results[2], r.results[3], r.results[4]
    assert.are.equal("line", first.extra.chart.type)
    assert.are.equal("first", first.extra.chart.title)
    assert.are.equal("up", first.extra.chart.elements[1].label)
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, first.extra.chart.elements[1].points)
    assert.are.equal("linear", first.extra.chart.x_scale)
    -- plt.show() closed the first figure: the second plot made a figure of its own
    assert.are.equal(1, #second.extra.chart.elements)
    assert.are.equal("Line 0", second.extra.chart.elements[1].label)
    assert.is_nil(second.extra.chart.title)                    -- JSON null: absent
    assert.are.equal("module://glsb_inline", main.text)
    assert.is_true(main.is_main_result)
    local c = bars.extra.chart
    assert.are.same({ "bar", "Book Sales", "Authors", "Number of Books Sold (units)", "units" },
      { c.type, c.title, c.x_label, c.y_label, c.y_unit })
    local labels, values, groups = {}, {}, {}
    for i, e in ipairs(c.elements) do labels[i], values[i], groups[i] = e.label, e.value, e.group end
    assert.are.same({ "Author A", "Author B", "Author C" }, labels)
    assert.are.same({ 100, 200, 300 }, values)
    assert.are.same({ "Books Sold", "Books Sold", "Books Sold" }, groups)
    for _, b in ipairs({ first, second, bars }) do
      assert.are.equal("\137PNG\r\n\26\n", b.png:sub(1, 8))
      assert.are.equal("<Figure size 640x480 with 1 Axes>", b.text)
    end
    -- the end of a cell that failed shows what it left open
    r = sb:execute_code("plt.pie([1, 3], labels=['a', 'b'])\nraise RuntimeError('after the pie')")
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal(1, #r.results)
    assert.are.same({ "pie", "a", 90, "b", 270 }, { r.results[1].extra.chart.type,
      r.results[1].extra.chart.elements[1].label, r.results[1].extra.chart.elements[1].angle,
      r.results[1].extra.chart.elements[2].label, r.results[1].extra.chart.elements[2].angle })
    assert.are.same({}, sb:execute_code("plt.get_fignums()").results[1].extra)
    assert.are.equal("[]", sb:execute_code("plt.get_fignums()").text)
  end)

  it("MPLBACKEND in the sandbox's env is kept: plt.show() does nothing, the open figure is still shown", function()
    python.need("matplotlib", pending)
    sb:terminate()
    sb = glsb.create("local", { host_workspace_dir = root, env = { MPLBACKEND = "agg" } })
    local r = sb:execute_code("import warnings\nwarnings.simplefilter('ignore')\nimport matplotlib\n"
      .. "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nmatplotlib.get_backend()", { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal("agg", r.text)
    assert.are.equal(2, #r.results)
    assert.are.equal("\137PNG", r.results[2].png:sub(1, 4))
  end)

  it("a DataFrame gives html and text", function()
    python.need("pandas", pending)
    local r = sb:execute_code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndisplay(df)\ndf",
      { timeout = 120 })
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(2, #r.results)
    for _, b in ipairs(r.results) do
      assert.matches('<table border="1" class="dataframe">', b.html, 1, true)
      assert.matches("^   a  b\n0  1  x\n1  2  y$", b.text)
    end
    assert.is_true(r.results[2].is_main_result)
  end)

  it("1,000 large images: the agent keeps 10 MiB of them and notes the rest; host RSS stays bounded", function()
    local base = run_fresh("display(1)", root)
    local r = run_fresh(thousand_images(""), root)
    assert.are.equal(Status.SUCCESS, r.status, r.error)
    assert.is_true(r.truncated)
    local per = 8 + 1024 * 1024 + #"Big()"
    local kept = glsb.results.CAP // per
    assert.are.equal(kept, r.images)
    assert.are.equal(kept + 1, r.results)
    assert.are.equal(("[glsb: results truncated at %d bytes; %d more results (%d bytes) dropped]"):format(
      glsb.results.CAP, 1000 - kept, (1000 - kept) * per), r.last)
    -- the kept 10 MiB and what the collector has not yet reclaimed: nowhere near the GiB displayed
    assert.is_true(r.hwm - base.hwm < 48 * 1024, ("peak RSS %d KiB, %d KiB for one small display"):format(r.hwm,
      base.hwm))
  end)

  it("a sandbox that ignores the cap sends 1,000 large images: the host keeps 10 MiB, RSS stays bounded", function()
    -- the code can reach the agent's own objects (it runs in the agent's process): it lifts the agent's cap,
    -- so every image reaches the host, which caps on its own
    local base = run_fresh("display(1)", root)
    local r = run_fresh(thousand_images("import __main__ as agent\nagent.OUT.capture.results_room = 1 << 40\n"), root)
    assert.are.equal(Status.SUCCESS, r.status, r.error)
    assert.is_true(r.truncated)
    assert.is_true(r.images >= 9 and r.images <= 10, tostring(r.images))
    assert.matches("^%[glsb: results truncated at %d+ bytes; " .. (1000 - r.images) .. " more results", r.last)
    assert.is_true(r.hwm - base.hwm < 48 * 1024, ("peak RSS %d KiB, %d KiB for one small display"):format(r.hwm,
      base.hwm))
  end)

  it("a res frame whose parts do not describe its payload is not a result: dropped and counted", function()
    local r = sb:execute_code([=[
import __main__ as agent
agent.send({"ev": "res", "id": agent.OUT.capture.rid, "main": False, "parts": [["png", 99]]}, b"short")
]=])
    assert.are.equal(Status.SUCCESS, r.status, tostring(r))
    assert.are.equal(1, #r.results)
    assert.is_true(glsb.results.is_note(r.results[1]))
    assert.is_true(sb:execute_code("1").status == Status.SUCCESS)
  end)
end)
