-- bench/lib/cold_local.lua: the whole script a user times (issue 26): load glsb, create a local sandbox,
-- run print(1) in it, terminate. Run as its own process by bench/startup.lua (`glsb-lua <this file>`).
local glsb = require "glsb"
local sb = glsb.create("local")
local r = sb:execute_code("print(1)")
assert(r.stdout == "1\n", tostring(r))
sb:terminate()
