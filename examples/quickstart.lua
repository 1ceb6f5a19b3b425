-- quickstart.lua: the README's demo on the local provider (no account needed).
--   build/glsb-lua examples/quickstart.lua
-- Code with state across two calls, a file in and a file out, a streamed
-- line, and a shell command, in a confined sandbox on this machine.
local glsb = require "glsb"

local function show(title, r)
  print(string.format("== %s: %s (%d ms)", title, r.status, math.floor(r.duration_ms or 0)))
  if r.stdout ~= "" then io.write(r.stdout) end
  if r.error then print("error: " .. r.error) end
end

local sb <close> = glsb.create()            -- the local provider is the default
print("sandbox " .. sb.sandbox_id .. " is up")

-- 1. state survives between calls, like a notebook kernel
show("define", sb:execute_code("counter = 40\nprint('counter is', counter)"))
show("reuse", sb:execute_code("counter += 2\nprint('counter is now', counter)"))

-- 2. a file in: it lands at /files/<name> inside the sandbox
local csv = "name,score\nada,36\ngrace,42\n"
show("file in", sb:execute_code([[
import csv
rows = list(csv.DictReader(open("/files/scores.csv")))
best = max(rows, key=lambda r: int(r["score"]))
with open("/files/best.txt", "w") as f:
    f.write(best["name"] + "\n")
print(len(rows), "rows read")
]], { files = { glsb.SandboxFile.from_bytes(csv, "scores.csv") } }))

-- 3. a file out
local best = sb:download_file("/files/best.txt")
print("== file out: best.txt says " .. tostring(best and best:gsub("\n$", "")))

-- 4. a line streamed while the code runs
show("stream", sb:execute_code("import time\nprint('working...', flush=True)\ntime.sleep(0.2)\nprint('done')", {
  on_stdout = function(line) print("   (streamed) " .. line) end,
}))

-- 5. a shell command in the same sandbox
show("command", sb:execute_command("ls /files; echo \"I am $(whoami) in $PWD\""))

-- 6. a failing program reports its exception
show("error", sb:execute_code("1 / 0"))

sb:terminate()
print("terminated; nothing left behind")
