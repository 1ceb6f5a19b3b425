-- spec/support/redis.lua: a private redis-server for a spec (require "support.redis").
--
--   local srv = redis.start{ password = "pw", acl_user = { "alice", "secret" }, tcp = true, tls = true }
--   srv.url        unix:///<dir>/redis.sock (with the password when one is set)
--   srv.tcp_url    redis://127.0.0.1:<port>        (tcp = true)
--   srv.tls_url    rediss://localhost:<tls port>   (tls = true; srv.ca is the CA file that signed its certificate)
--   srv:cli(...)   runs redis-cli on the socket, returns its output
--   srv:stop()     SIGTERM, wait, reap, remove the directory; safe twice. Call it in teardown / finally.
--   srv:pause() / srv:resume()   stop the server and start it again on the same socket and ports (a Redis
--                  outage: the data is gone too, as with a restart without persistence)
--
-- Never touches a Redis it did not start: its own directory under /tmp, a unix socket there, and for TCP/TLS
-- a port on 127.0.0.1 it found free. The server runs under setpriv --pdeathsig KILL, so a crashed runner
-- takes it along.
local process = require "glsb.process"
local loop = require "glsb.loop"
local shell = require "support.shell"

local M = {}

local Server = {}
Server.__index = Server

local function free_port()
  -- bind-and-release through python is racy but fine on loopback for a test; redis retries below
  local out = shell.sh("/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); "
    .. "print(s.getsockname()[1]); s.close()'")
  return tonumber(out:match("%d+"))
end

local function make_certs(dir)
  local script = table.concat({
    "set -e; cd " .. shell.q(dir),
    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=glsb spec CA'",
    "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost'",
    "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext",
    "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext",
  }, " && ")
  local out, code = shell.sh("(" .. script .. ") 2>&1")
  assert(code == 0, "cannot make test certificates: " .. out)
end

local function argv_of(self)
  local argv = { "setpriv", "--pdeathsig", "KILL", "redis-server", "--port", tostring(self.port or 0),
    "--unixsocket", self.socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
    "--dir", self.dir, "--logfile", "", "--bind", "127.0.0.1" }
  if self.password then
    argv[#argv + 1] = "--requirepass"
    argv[#argv + 1] = self.password
  end
  if self.acl_user then
    for _, a in ipairs({ "--user", self.acl_user[1], "on", ">" .. self.acl_user[2], "~*", "&*", "+@all" }) do
      argv[#argv + 1] = a
    end
  end
  if self.tls_port then
    for _, a in ipairs({ "--tls-port", tostring(self.tls_port), "--tls-cert-file", self.dir .. "/server.crt",
      "--tls-key-file", self.dir .. "/server.key", "--tls-ca-cert-file", self.ca, "--tls-auth-clients", "no" }) do
      argv[#argv + 1] = a
    end
  end
  return argv
end

-- Starts the process and waits for "Ready to accept connections".
local function launch(self)
  local p, err = process.spawn { argv = argv_of(self), stdin = "null", stdout = "pipe", stderr = "pipe" }
  assert(p, "cannot start redis-server: " .. tostring(err))
  local lines = {}
  local ready = loop.run(function()
    local deadline = loop.now() + 10
    while true do
      local line = p:read_line("stdout", deadline)
      if not line then return false end
      lines[#lines + 1] = line
      -- "Ready to accept connections tcp", or "The server is now ready to accept connections at <socket>"
      if line:lower():find("ready to accept connections", 1, true) then return true end
    end
  end)
  if not ready then
    p:kill("KILL")
    loop.run(function() p:wait(loop.now() + 5) end)
    p:close()
    return nil, table.concat(lines, "\n")
  end
  self.proc = p
  -- keep draining its log so the pipe never fills
  self.drain = loop.spawn(function()
    while p:read_line("stdout") do end
  end)
  return true
end

-- start(opts) -> Server. opts: password, acl_user = {name, password}, tcp (bool), tls (bool).
function M.start(opts)
  opts = opts or {}
  local dir = shell.mktemp_dir("poolredis")
  local self = setmetatable({ dir = dir, socket = dir .. "/redis.sock", password = opts.password,
    acl_user = opts.acl_user }, Server)
  if opts.tls then
    make_certs(dir)
    self.ca = dir .. "/ca.crt"
  end
  local last
  for _ = 1, 5 do
    if opts.tcp then self.port = free_port() end
    if opts.tls then self.tls_port = free_port() end
    local ok, log = launch(self)
    if ok then break end
    last = log
    self.port, self.tls_port = nil, nil
  end
  if not self.proc then
    shell.rm_rf(dir)
    error("redis-server did not start: " .. tostring(last), 2)
  end
  local auth = self.password and (":" .. self.password .. "@") or ""
  self.url = "unix://" .. auth .. self.socket
  if self.port then self.tcp_url = "redis://" .. auth .. "127.0.0.1:" .. self.port end
  if self.tls_port then self.tls_url = "rediss://" .. auth .. "localhost:" .. self.tls_port end
  return self
end

function Server:cli(...)
  local args = { "redis-cli", "-s", self.socket, "--no-auth-warning" }
  if self.password then
    args[#args + 1] = "-a"
    args[#args + 1] = self.password
  end
  for _, a in ipairs({ ... }) do args[#args + 1] = tostring(a) end
  local out = shell.sh(shell.join(args) .. " 2>&1")
  return (out:gsub("%s+$", ""))
end

local function halt(self)
  local p = self.proc
  if not p then return end
  self.proc = nil
  p:kill("TERM")
  local st = loop.run(function() return p:wait(loop.now() + 10) end)
  if not st then
    p:kill("KILL")
    loop.run(function() p:wait(loop.now() + 5) end)
  end
  if self.drain then
    self.drain:cancel()
    self.drain = nil
  end
  p:close()
end

-- pause(): the server goes away (its data too). resume(): a fresh server on the same socket and ports.
function Server:pause() halt(self) end

function Server:resume()
  assert(not self.proc, "the server is running")
  local ok, log = launch(self)
  assert(ok, "redis-server did not restart: " .. tostring(log))
end

function Server:stop()
  halt(self)
  if self.dir then
    shell.rm_rf(self.dir)
    self.dir = nil
  end
end

return M
