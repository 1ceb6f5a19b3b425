-- spec/support/core_smoke.lua: drives every Lua-facing part of glsb.core once (HTTP with each framer and
-- each failure phase, processes, archives, codecs, files, Redis connections) so that `make check-c` can run it under
-- valgrind and ASan: the C code behind Lua must free everything when the state closes.
--   build/glsb-lua spec/support/core_smoke.lua
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
local core = require "glsb.core"
local http = require "glsb.http"
local loop = require "glsb.loop"
local process = require "glsb.process"
local server = require "support.server"

local srv = server.start({ "node", "spec/support/fault_server.mjs", "0" })
local ok, err = pcall(function()
  local u = srv.url
  assert(http.request({ url = u .. "/ok" }).status == 200)
  assert(http.json({ url = u .. "/echo", method = "POST", json = { a = 1 } }).json.method == "POST")
  local n = 0
  http.request({ url = u .. "/ndjson?n=3", framer = "lines", on_frame = function() n = n + 1 end })
  http.request({ url = u .. "/sse", framer = "sse", on_frame = function() n = n + 1 end })
  http.request({ url = u .. "/connect", framer = "connect", on_frame = function() n = n + 1 end })
  http.request({ url = u .. "/ndjson?n=20&gap=20", framer = "lines", on_frame = function() return false end })
  assert(n == 8, "frames: " .. n)
  -- an error answer to a framed request, buffered (error_body), and one cut at its cap
  assert(http.request({ url = u .. "/error-body?code=429", framer = "sse", error_body = 4096,
                        on_frame = function() end }).body:find("as asked", 1, true))
  assert(http.request({ url = u .. "/error-body?code=500&endless=1", framer = "sse", error_body = 70000,
                        on_frame = function() end }).body_truncated == true)
  assert(http.request({ url = "http://127.0.0.1:1/" }).error.phase == "connect")
  assert(http.request({ url = u .. "/close-before-response", method = "POST", body = "x" }).error.phase == "receive")
  assert(http.request({ url = u .. "/huge-line?n=5000", framer = "lines", max_frame = 100,
                        on_frame = function() end }).error.phase == "framing")
  http.request({ url = u .. "/drop-on-reuse?key=s", method = "POST", body = "b" })
  assert(http.request({ url = u .. "/drop-on-reuse?key=s", method = "POST", body = "b" }).error.code == "NOT_RESENT")
  -- a request abandoned mid-flight is freed by its owner's close
  local t = loop.spawn(function() return http.request({ url = u .. "/slow?ms=3000" }) end)
  loop.run(function() loop.sleep(0.05) t:cancel() end)
  pcall(t.wait, t)
  local req = core.http({ url = u .. "/slow?ms=3000" }) -- left to __gc at close
  assert(req.token)

  local out, _, st = process.run({ "sh", "-c", "cat; echo e >&2; exit 4" }, { input = "in" })
  assert(out == "in" and st.code == 4)
  assert(process.run({ "sleep", "5" }, { timeout = 0.05 }) == nil)
  local p = assert(process.spawn({ argv = { "sleep", "5" } })) -- left running: __gc kills and reaps it
  assert(p.pid > 0)
  -- nil here; under valgrind posix_spawn cannot see the exec fail, so the child exits 127 instead
  local missing = process.spawn({ argv = { "/nonexistent" } })
  if missing then missing:close() end

  local tar = core.tar_pack({ { name = "a/b.txt", data = "x" }, { name = "l", type = "symlink", target = "a" } }, { gzip = true })
  assert(#core.tar_unpack(tar) == 2)
  assert(core.tar_unpack("garbage") == nil)
  assert(core.tar_unpack(core.tar_pack({ { name = "l", type = "symlink", target = "../x" } })) == nil)
  assert(core.b64decode(core.b64encode("\0\1")) == "\0\1")
  assert(#core.sha256("abc") == 64)
  assert(core.sha256_stream():update("a"):update("bc"):digest() == core.sha256("abc"))
  assert(not pcall(function() local h = core.sha256_stream() h:digest() h:digest() end))
  core.sha256_stream():update("dropped unfinished") -- its context freed by __gc
  assert(core.hmac_sha256("Jefe", "what do ya want for nothing?") ==
    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
  local dir = core.mkdtemp("/tmp/glsb-smoke-XXXXXX")
  core.write_file_atomic(dir .. "/f", "data")
  assert(core.lstat(dir .. "/f").type == "file" and core.lstat(dir).uid == core.geteuid())
  assert(core.read_own_file(dir .. "/f", 4) == "data" and not core.read_own_file(dir .. "/f", 3))
  assert(core.mkdir(dir .. "/d") and not core.mkdir(dir .. "/d"))
  os.execute("mkfifo " .. dir .. "/p && ln -s /dev/zero " .. dir .. "/z")
  assert(not core.read_own_file(dir .. "/p", 10) and not core.read_own_file(dir .. "/z", 10))
  assert(core.rmtree(dir))
  assert(core.module_path())

  -- buffer.c: filled by a process's reads, cut, searched, taken, cleared, closed, one left to __gc;
  -- load.c: core.loadfile of a source and of a missing file
  local buf = core.buffer(4 * 1024 * 1024)
  local bp = assert(process.spawn({ argv = { "head", "-c", "3000000", "/dev/zero" }, stdout = "pipe" }))
  loop.run(function()
    while assert(bp:read_into("stdout", loop.now() + 10, 1024 * 1024, buf)) > 0 do end
  end)
  bp:wait(loop.now() + 10)
  bp:close()
  buf:append("\nend")
  assert(buf:len() == 3000004 and buf:find("\n") == 3000001 and buf:sub(-3, -1) == "end")
  assert(#buf:take(2) == 3000003)
  buf:append("again")
  buf:clear()
  buf:close()
  local kept = core.buffer(1024)
  kept:append("left to __gc")
  assert(core.loadfile("lua/glsb/constants.lua"))
  assert(not core.loadfile("lua/glsb/no-such-module.lua"))

  -- stdio.c: raw fd writes and reads on a child's pipes, a signal as a byte (take_stdio is left to its C
  -- test: it would take this script's own stdout)
  local sp = assert(process.spawn({ argv = { "cat" }, stdin = "pipe", stdout = "pipe" }))
  assert(core.fd_write(sp:fd("stdin"), "xyz", 2) == 2)
  sp:close_stdin()
  loop.run(function() loop.wait_fd(sp:fd("stdout"), "r", loop.now() + 10) end)
  assert(core.fd_read(sp:fd("stdout"), 16) == "yz")
  sp:wait(loop.now() + 10)
  sp:close()
  local sfd = assert(core.signal_fd({ "USR2" }))
  os.execute("kill -USR2 " .. core.getpid())
  loop.run(function() loop.wait_fd(sfd, "r", loop.now() + 10) end)
  assert(core.fd_read(sfd, 8) == "\12", "SIGUSR2 arrives as its number")

  -- redis.c: a connection per transport, a failure per stage, a lookup abandoned mid-flight, one left to __gc
  local rconn = require "glsb.pool.redis_conn"
  local rurl = require "glsb.pool.url"
  local rs = require("support.redis").start({ password = "smoke", tls = true })
  local rok, rerr = pcall(function()
    for _, o in ipairs({ { rs.url }, { rs.tls_url, { tls_ca = rs.ca } } }) do
      local c = loop.run(rconn.open, rurl.parse(o[1]), o[2] or {})
      local r = loop.run(function() return c:pipeline({ { "SET", "k", "v" }, { "GET", "k" }, { "LRANGE", "k", 0, 1 } }) end)
      assert(r[2] == "v" and r[3].err)
      c:close()
    end
    assert(not pcall(loop.run, rconn.open, rurl.parse(rs.tls_url), {}))                   -- certificate refused
    assert(not pcall(loop.run, rconn.open, rurl.parse("redis://127.0.0.1:1"), {}))        -- refused
    assert(not pcall(loop.run, rconn.open, rurl.parse("redis://no-such-host.invalid"), {})) -- lookup failed
    local pending = core.redis_connect({ host = "localhost", port = 1 })                  -- lookup in flight
    if pending then pending:close() end
    local leaked = core.redis_connect({ path = rs.socket })                               -- left to __gc
    assert(leaked.token)
    -- the lookup threads free glibc's resolver state as they exit, right after answering
    loop.run(function() loop.sleep(0.2) end)
  end)
  rs:stop()
  if not rok then error(rerr, 0) end
end)
srv.stop()
if not ok then error(err, 0) end
print("core smoke: ok")
