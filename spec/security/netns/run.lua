-- spec/security/netns/run.lua OUT DIR: what networked local sandboxes reach, run by local_network_spec.lua
-- inside the "host" network namespace it made (198.51.100.1, the internet's stand-ins beyond it at
-- 198.51.100.10, .11 and 169.254.169.254; canaries of the host on 127.0.0.1:8081 and 198.51.100.1:8082).
-- DIR holds server.py and probe.py. Writes one JSON object to OUT.
local glsb = require "glsb"
local cjson = require "cjson"

local out_path, dir = arg[1], arg[2]
local out = {}

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function sh(cmd)
  local f = assert(io.popen(cmd, "r"))
  local s = f:read("a")
  f:close()
  return s
end

local PROBE = read(dir .. "/probe.py")
local SERVER = read(dir .. "/server.py")

-- probe(sb, {name = "host:port", ...}) -> {name = what came back}
local function probe(sb, targets)
  sb.files:write("probe.py", PROBE)
  local args = {}
  for name, t in pairs(targets) do args[#args + 1] = name .. "=" .. t end
  local r = sb:execute_command("python3 /home/user/probe.py " .. table.concat(args, " "), { timeout = 60 })
  return cjson.decode(r.stdout) or { error = r.stdout .. r.stderr }
end

-- The same from here (the host's namespace).
local function host_probe(targets)
  local args = {}
  for name, t in pairs(targets) do args[#args + 1] = name .. "=" .. t end
  return cjson.decode(sh("python3 " .. dir .. "/probe.py " .. table.concat(args, " ")))
end

-- Listening TCP sockets of this namespace ("addr:port" in /proc/net/tcp's hex).
local function listeners()
  local set = {}
  for line in io.lines("/proc/net/tcp") do
    local local_addr, state = line:match("^%s*%d+:%s+(%x+:%x+)%s+%x+:%x+%s+(%x+)")
    if local_addr and state == "0A" then
      local a, p = local_addr:match("(%x+):(%x+)")
      local n = tonumber(a, 16)
      set[string.format("%d.%d.%d.%d:%d", n & 255, n >> 8 & 255, n >> 16 & 255, n >> 24 & 255, tonumber(p, 16))] = true
    end
  end
  return set
end

-- The slirp4netns children of a sandbox's supervisor.
local function helpers_of(sb)
  local found = {}
  for pid in sh("ls /proc"):gmatch("%d+") do
    local stat = read("/proc/" .. pid .. "/stat")
    local comm, ppid = (stat or ""):match("^%d+ %((.-)%) %a (%d+)")
    if comm == "slirp4netns" and tonumber(ppid) == sb._proc.pid then found[#found + 1] = tonumber(pid) end
  end
  return found
end

local function alive(pid)
  local stat = read("/proc/" .. pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %b() [ZX]")
end

local INTERNET = { outside_a = "198.51.100.10:80", outside_b = "198.51.100.11:80",
  metadata = "169.254.169.254:80", host_loopback_via_gateway = "10.0.2.2:8081",
  own_loopback = "127.0.0.1:8081", host_address = "198.51.100.1:8082" }

local made, helpers = {}, {}
local function create(net)
  local sb = glsb.create("local", { network = net })
  made[#made + 1] = sb
  for _, p in ipairs(helpers_of(sb)) do helpers[#helpers + 1] = p end
  return sb
end

-- Each part on its own: one that fails (an option refused, say) leaves the others to run.
local function part(name, fn)
  local ok, err = pcall(fn)
  if not ok then out[name] = { error = tostring(err) } end
end

local a, b
part("open", function()
  a = create(true)
  out.open = probe(a, INTERNET)
  out.helpers_per_sandbox = #helpers
end)

-- b serves on 0.0.0.0:8000 and 127.0.0.1:8001; the host gets one port for each, and nothing else
part("forward", function()
  b = create(true)
  b.files:write("server.py", SERVER)
  local srv = b:start_command("python3 /home/user/server.py 0.0.0.0:8000:sandbox-b 127.0.0.1:8001:sandbox-b-loopback")
  glsb.sleep(1)
  local before = listeners()
  local h0 = b:get_host(8000)
  local after = listeners()
  local new = {}
  for k in pairs(after) do if not before[k] then new[#new + 1] = k end end
  local h1 = b:get_host(8001)
  out.forward = { host = h0, again = b:get_host(8000), new_listeners = new, loopback_host = h1 }
  out.forward_reach = host_probe({ any = h0, loopback = h1 })
  local hp = h0:match(":(%d+)$")
  out.cross = probe(a, { b_via_gateway = "10.0.2.2:" .. hp, b_via_host_address = "198.51.100.1:" .. hp,
    b_port_in_a = "10.0.2.100:8000", b_port_in_a_loopback = "127.0.0.1:8000" })
  srv:kill()
end)

part("allowlist", function()
  out.allowlist = probe(create({ allow = { "198.51.100.11", "169.254.169.254" }, deny = { "0.0.0.0/0" } }), INTERNET)
end)
part("denylist", function()
  out.denylist = probe(create({ deny = { "198.51.100.10" } }), INTERNET)
end)
part("by_name", function()
  local e = create({ allow = { "api.example.test" }, deny = { "0.0.0.0/0" } })
  out.by_name = probe(e, { by_name = "api.example.test:80", outside_a = "198.51.100.10:80" })
  out.by_name_hosts = e:execute_command("cat /etc/hosts").stdout
end)

-- a supervisor killed with SIGKILL takes its slirp4netns with it
part("killed_supervisor_helpers", function()
  local f = create(true)
  local fh = helpers_of(f)
  os.execute("kill -9 " .. f._proc.pid)
  local gone = false
  for _ = 1, 60 do
    gone = true
    for _, p in ipairs(fh) do if alive(p) then gone = false end end
    if gone then break end
    glsb.sleep(0.05)
  end
  out.killed_supervisor_helpers = { count = #fh, gone = gone }
end)

for _, sb in ipairs(made) do pcall(sb.terminate, sb) end
local left = {}
for _, p in ipairs(helpers) do if alive(p) then left[#left + 1] = p end end
out.helpers_left = left
out.helpers = #helpers
local f = assert(io.open(out_path, "w"))
f:write(cjson.encode(out))
f:close()
