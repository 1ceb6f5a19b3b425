-- spec/security/hostile/helper.lua: what the hostile-world specs (issue 25) share: a hostile loopback server
-- (server.py beside this file, told rule by rule what to answer) and a fresh glsb-lua process per case, so
-- that its peak resident size (VmHWM) and its wall time are the case's own.
--
--   local hostile = require "security.hostile.helper"
--   local srv = hostile.server()                      -- srv.url, srv:plan(rules), srv:requests(), srv:stop()
--   local got = hostile.run(script, {args = {...}, env = {K = "v"}})
--   got.hwm_mib, got.seconds, got.out (what the script passed to report(), decoded), got.stdout, got.stderr
--
-- A script runs with `report(t)` defined (writes t as the last line, with hwm_kb and seconds added) and
-- `glsb` loaded, logs going to stderr. It must call report() once.
local shell = require "support.shell"
local server = require "support.server"
local cjson = require "cjson"
local core = require "glsb.core"
local codec = require "glsb.codec"

local M = {}

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
M.SERVER = here .. "/server.py"
-- GLSB_HOSTILE_REPO: run the cases' processes from another checkout (its glsb-lua and its Lua tree), to
-- measure the figures of a build before a fix against the same servers and cases.
M.REPO = os.getenv("GLSB_HOSTILE_REPO") or shell.repo
M.GLSB_LUA = M.REPO .. "/build/glsb-lua"
M.MiB = 1024 * 1024

M.b64 = codec.b64encode

local Server = {}
Server.__index = Server

-- A blocking JSON request to the server's admin routes (through curl: the spec's own process keeps no
-- transfer of the library under test open).
local function admin(srv, method, path, body)
  local cmd = "curl -s -X " .. method .. " " .. shell.q(srv.url .. path)
  if body then cmd = cmd .. " -H 'Content-Type: application/json' --data-binary @-" end
  local tmp
  if body then
    tmp = os.tmpname()
    local f = assert(io.open(tmp, "wb"))
    f:write(body)
    f:close()
    cmd = cmd .. " < " .. shell.q(tmp)
  end
  local out, code = shell.sh(cmd)
  if tmp then os.remove(tmp) end
  assert(code == 0, "hostile server admin " .. path .. " failed: " .. tostring(out))
  return cjson.decode(out)
end

-- srv:plan(rules): what the server answers from now on (the requests seen are forgotten).
function Server:plan(rules)
  admin(self, "POST", "/_plan", cjson.encode({ rules = rules }))
end

-- srv:requests() -> the requests seen since the last plan: {method, path, headers = {{name, value}}, body_len}
function Server:requests() return admin(self, "GET", "/_requests") end

function Server:stop() self.srv.stop() end

function M.server()
  local srv = server.start({ "/usr/bin/python3", M.SERVER })
  return setmetatable({ url = srv.url, srv = srv }, Server)
end

local PRELUDE = [[
local glsb = require "glsb"
local cjson = require "cjson"
local clock = require("glsb.loop").now
local started = clock()
local function report(t)
  t = t or {}
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmHWM:%s+(%d+)")
    if kb then t.hwm_kb = tonumber(kb) end
  end
  t.seconds = clock() - started
  io.stdout:write("\n@@report ", cjson.encode(t), "\n")
  io.stdout:flush()
end
]]

-- run(script, {args, env, timeout, vmem_mib}) -> {out, hwm_mib, seconds, stdout, stderr, code}. The child is
-- killed after opts.timeout seconds (default 120): a case that hangs fails rather than stalls the suite;
-- vmem_mib caps its address space (ulimit -v), so that a build without the fix fails its case by running
-- out of memory rather than take the machine's.
function M.run(script, opts)
  opts = opts or {}
  local dir = assert(core.mkdtemp("/tmp/glsb-hostile-XXXXXX"))
  local path = dir .. "/case.lua"
  local f = assert(io.open(path, "w"))
  f:write(PRELUDE, "\n", script)
  f:close()
  local env = {}
  for k, v in pairs(opts.env or {}) do env[#env + 1] = k .. "=" .. shell.q(v) end
  local words = { M.GLSB_LUA, path }
  for _, a in ipairs(opts.args or {}) do words[#words + 1] = tostring(a) end
  local cmd = "cd " .. shell.q(M.REPO) .. " && " .. (#env > 0 and ("env " .. table.concat(env, " ") .. " ") or "")
    .. (opts.vmem_mib and ("ulimit -v " .. math.floor(opts.vmem_mib * 1024) .. " && ") or "")
    .. "timeout -s KILL " .. tostring(opts.timeout or 120) .. " " .. shell.join(words)
    .. " 2>" .. shell.q(dir .. "/stderr")
  local stdout, code = shell.sh(cmd)
  local stderr = shell.read(dir .. "/stderr") or ""
  core.rmtree(dir)
  local line = stdout:match("\n@@report ([^\n]*)\n?$")
  local out = line and cjson.decode(line) or nil
  local got = { out = out, stdout = stdout, stderr = stderr, code = code }
  if out then
    got.hwm_mib = out.hwm_kb / 1024
    got.seconds = out.seconds
  end
  return got
end

-- under(got, bound): asserts the case's peak resident size is under bound (MiB). GLSB_HOSTILE_FIGURES=file
-- appends "spec:line<TAB>peak MiB<TAB>bound MiB<TAB>seconds" to that file: the figures of the closing note,
-- before and after a fix, from the same cases.
function M.under(got, bound)
  local figures = os.getenv("GLSB_HOSTILE_FIGURES")
  if figures then
    local where = debug.getinfo(2, "Sl")
    local f = io.open(figures, "a")
    if f then
      f:write(string.format("%s:%d\t%.1f\t%.1f\t%.2f\n", where.short_src:match("[^/]*$"), where.currentline,
        got.hwm_mib or -1, bound, got.seconds or -1))
      f:close()
    end
  end
  require("luassert").is_true(got.hwm_mib ~= nil and got.hwm_mib < bound,
    string.format("peak %s MiB, bound %.1f MiB", got.hwm_mib and string.format("%.1f", got.hwm_mib) or "?", bound))
end

-- must(got) -> got.out, or fails with what the child printed.
function M.must(got)
  if not got.out then
    error(string.format("the case's process ended with %s and no report:\nstdout: %s\nstderr: %s", tostring(got.code),
      got.stdout:sub(-3000), got.stderr:sub(-3000)), 2)
  end
  return got.out
end

-- The baseline: what a fresh glsb-lua process that loads glsb and makes one request peaks at, so that
-- a bound reads "cap + this + margin" (measured, not guessed: builds differ).
local baseline
function M.baseline_mib(url)
  if baseline then return baseline end
  local got = M.run([[
local http = require "glsb.http"
http.request { url = arg[1] .. "/nothing", timeout = 5 }
report {}
]], { args = { url } })
  baseline = M.must(got) and got.hwm_mib
  return baseline
end

-- Connect envelopes (E2B's envd streams): flags byte, 4-byte big-endian length, JSON.
function M.envelope(json_text, flags)
  return string.pack(">BI4", flags or 0, #json_text) .. json_text
end

-- One AWS event stream message (Bedrock's InvokeCodeInterpreter answer): headers {{name, value}} (strings).
function M.event_message(headers, payload)
  local hb = {}
  for _, h in ipairs(headers) do hb[#hb + 1] = string.pack(">s1Bs2", h[1], 7, h[2]) end
  local hblock = table.concat(hb)
  local total = 12 + #hblock + #payload + 4
  local prelude = string.pack(">I4I4", total, #hblock)
  prelude = prelude .. string.pack(">I4", core.crc32(prelude))
  local body = prelude .. hblock .. payload
  return body .. string.pack(">I4", core.crc32(body))
end

-- A Bedrock `result` event carrying a CodeInterpreterResult.
function M.result_event(result)
  return M.event_message({ { ":message-type", "event" }, { ":event-type", "result" },
    { ":content-type", "application/json" } }, cjson.encode(result))
end

-- The ids the base rules hand out.
M.ID = { opensandbox = "0b6e2f3c-4d5a-4e6f-8a9b-0c1d2e3f4a5b", e2b = "isb1", bedrock = "sess1" }

-- rules(provider, url) -> the rules of a well-behaved create and terminate for that provider, to append after
-- a case's own (the first rule that matches answers). url: the server's own.
function M.rules(provider, url)
  if provider == "opensandbox" then
    return {
      { method = "POST", path = "^/v1/sandboxes$", respond = { status = 202, json = { id = M.ID.opensandbox } } },
      { method = "GET", path = "^/v1/sandboxes/[^/]+/endpoints/44772", respond = {
        json = { endpoint = url:gsub("^https?://", "") .. "/execd" } } },
      { method = "GET", path = "^/execd/ping", respond = { status = 200, body = "pong" } },
      { method = "DELETE", path = "^/v1/sandboxes/", respond = { status = 204 } },
    }
  elseif provider == "e2b" then
    return {
      { method = "POST", path = "^/v2/sandboxes$", respond = { status = 201, json = { sandboxID = M.ID.e2b,
        templateID = "code-interpreter-v1", envdVersion = "0.2.0", envdAccessToken = "envd-token-0123" } } },
      { method = "DELETE", path = "^/sandboxes/", respond = { status = 204 } },
    }
  elseif provider == "bedrock" then
    return {
      { method = "PUT", path = "/sessions/start", respond = { json = { sessionId = M.ID.bedrock,
        codeInterpreterIdentifier = "aws.codeinterpreter.v1" } } },
      { method = "PUT", path = "/sessions/stop", respond = { json = {} } },
    }
  end
  error("no rules for " .. tostring(provider))
end

-- opts(provider, url[, extra]) -> create options that reach the hostile server.
function M.opts(provider, url, extra)
  local o
  if provider == "opensandbox" then
    o = { domain = url, api_key = "osb-key-0123456789" }
  elseif provider == "e2b" then
    o = { api_key = "e2b-key-0123456789", api_url = url, sandbox_url = url }
  elseif provider == "bedrock" then
    o = { region = "us-east-1", endpoint = url, control_endpoint = url, access_key_id = "AKIAHOSTILE0123",
      secret_access_key = "hostile-secret-0123456789" }
  end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

-- with(rules, ...) -> one list: rules, then each further list in order.
function M.with(...)
  local out = {}
  for i = 1, select("#", ...) do
    for _, r in ipairs((select(i, ...))) do out[#out + 1] = r end
  end
  return out
end

return M
