-- examples/hello.lua: build/glsb-lua examples/hello.lua
local glsb = require "glsb"

local sb <close> = glsb.create()                 -- "local": namespaces + Landlock + seccomp + rlimits
sb:execute_code("import math\nr = 21")            -- state survives between calls
local r = sb:execute_code("print(math.prod([r, 2]))", {
  timeout = 10,
  files = { glsb.SandboxFile.from_bytes("a,b\n1,2\n", "data.csv") },   -- lands at /files/data.csv
  on_stdout = function(line) io.write("live: ", line, "\n") end,
})
if r.status == glsb.ExecutionStatus.SUCCESS then print(r.stdout) else print(r.error) end

local c = sb:execute_command("wc -l /files/data.csv", { timeout = 5 })
print(c.code, c.stdout)
print(sb:download_file("/files/data.csv"))       -- bytes, or nil on any failure
-- leaving the scope terminates the sandbox; sb:terminate() does it explicitly
