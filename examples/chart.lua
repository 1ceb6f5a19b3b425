-- chart.lua: a chart drawn in a sandbox comes back as a PNG (r.results), on the local provider.
--   build/glsb-lua examples/chart.lua [path]       -- writes the PNG to path (default hist.png)
-- The code draws "a histogram of [10, 20, 20, 30, 40]" with matplotlib and leaves the figure open: the
-- sandbox shows it at the end of the cell, as a Jupyter kernel does, and the PNG's bytes come back in
-- r.results, with the chart's data (extra.chart) for a reader that cannot see pictures.
-- The local sandbox runs this machine's python3: it needs python3-matplotlib (scripts/install-deps).
local glsb = require "glsb"

local path = arg and arg[1] or "hist.png"

local sb <close> = glsb.create()
local r = sb:execute_code([[
import matplotlib.pyplot as plt
plt.hist([10, 20, 20, 30, 40], bins=[5, 15, 25, 35, 45], color="steelblue", edgecolor="white")
plt.xticks([10, 20, 30, 40])
plt.title("a histogram of [10, 20, 20, 30, 40]")
plt.xlabel("value")
_ = plt.ylabel("count")
]], { timeout = 120 })

if not r:ok() then
  io.stderr:write("chart.lua: the code failed: ", tostring(r.error), "\n")
  if tostring(r.error):find("No module named 'matplotlib'", 1, true) then
    io.stderr:write("chart.lua: the local sandbox runs this machine's python3, which lacks matplotlib: "
      .. "run scripts/install-deps (as root), or apt-get install python3-matplotlib\n")
  end
  os.exit(1)
end

local images = r:images()
if #images == 0 then
  io.stderr:write("chart.lua: the code drew no picture: ", tostring(r), "\n")
  os.exit(1)
end

local png = images[1].data
local f = assert(io.open(path, "wb"))
assert(f:write(png))
assert(f:close())
print(string.format("wrote %s (%d bytes, %s) from %d result(s): %s", path, #png, images[1].mime, #r.results,
  tostring(images[1].result)))

-- what a model without vision reads instead: the chart's type, title, axes and bars (each bar named by
-- the x tick label under it, as E2B's chart extraction names them)
local chart = images[1].result.extra.chart
if chart then
  print(string.format("chart: %s %q, x %q, y %q", chart.type, chart.title or "", chart.x_label or "",
    chart.y_label or ""))
  for _, bar in ipairs(chart.elements) do
    print(string.format("  %s: %g", bar.label, bar.value))
  end
end
