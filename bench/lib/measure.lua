-- bench/lib/measure.lua: what the benchmark scripts share to turn samples into figures and to read
-- this process's own costs, so every script reports a percentile the same way.
-- A script run from the checkout's top (as `make bench` runs them) reaches it with
--   package.path = "bench/?.lua;" .. package.path; local measure = require "lib.measure"
-- (bench/lib/ is not a folder of scripts: bench/run.lua runs bench/*.lua only).
local loop = require "glsb.loop"
local core = require "glsb.core"

local M = {}

-- The interpreter every reference runs (python3 on PATH may be a slow shim here).
M.PY = "/usr/bin/python3"

-- bubblewrap as the reference sandbox: a read-only /usr, fresh /proc, /dev and /tmp, every namespace
-- unshared; append the command.
M.BWRAP = { "bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
  "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib32", "/lib32",
  "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
  "--unshare-all", "--die-with-parent", "--new-session", "--" }

local function sorted(samples)
  local s = { table.unpack(samples) }
  table.sort(s)
  return s
end

-- The nearest-rank percentile (p in 0..1) of samples; nil when there are none.
function M.percentile(samples, p)
  local s = sorted(samples)
  if #s == 0 then return nil end
  return s[math.max(1, math.min(#s, math.ceil(p * #s)))]
end

-- The middle sample, or the mean of the two middle ones; nil when there are none.
function M.median(samples)
  local s = sorted(samples)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- {median, p90, n} of samples (the shape of bench/local*.lua's JSON).
function M.stats(samples)
  return { median = M.median(samples), p90 = M.percentile(samples, 0.9), n = #samples }
end

-- Milliseconds fn() took on the loop's clock.
function M.timed(fn)
  local t = loop.now()
  fn()
  return (loop.now() - t) * 1000
end

-- A "Name:  N kB" field of /proc/self/status (VmRSS, VmHWM...), in kB.
function M.status_kb(field)
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s+(%d+)"))
end

-- CPU time (user + system) this process has used, in ms.
function M.cpu_ms()
  local f = assert(io.open("/proc/self/stat"))
  local s = f:read("a")
  f:close()
  local ut, st = s:match("^%d+ %b() %a " .. ("%-?%d+ "):rep(10) .. "(%d+) (%d+)")
  return (tonumber(ut) + tonumber(st)) * 10 -- clock ticks of 1/100 s (USER_HZ is 100 on Linux)
end

-- How many descriptors this process holds.
function M.open_fds()
  local p = assert(io.popen("ls /proc/" .. core.getpid() .. "/fd"))
  local n = 0
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n - 1 -- the ls's own pipe
end

return M
