-- bench/run.lua: `make bench` runs every benchmark in bench/ in turn (each writes its figures to
-- bench/results/ and prints its own table). Not a test: nothing here passes or fails on a number.
local process = require "glsb.process"

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
local interp = arg and arg[-1] or "lua5.4"

local scripts = {}
local p = assert(io.popen("ls " .. here .. "/*.lua"))
for path in p:lines() do
  if not path:match("/run%.lua$") then scripts[#scripts + 1] = path end
end
p:close()
table.sort(scripts)

os.execute("mkdir -p " .. here .. "/results")
local failed = 0
for _, script in ipairs(scripts) do
  io.write("== ", script, "\n")
  io.flush()
  local proc = assert(process.spawn({ argv = { interp, script }, stdin = "null",
                                      stdout = "inherit", stderr = "inherit" }))
  local st = proc:wait()
  proc:close()
  if st.code ~= 0 then
    failed = failed + 1
    io.write(script, " ended with ", st.code and ("code " .. st.code) or ("signal " .. tostring(st.signal)), "\n")
  end
end
io.write(("bench: %d scripts, %d did not finish; figures in %s/results/\n"):format(#scripts, failed, here))
os.exit(failed == 0 and 0 or 1)
