-- glsb-lua --mcp over raw JSON-RPC lines: the handshake of every revision, the 2026-07-28 era, and what
-- no official client sends (broken JSON, a line of 100 MB, bad ids, wrong argument types, 1,000 requests
-- at once): each gets a clear answer, memory stays bounded, and the server goes on serving.
local client = require "mcp.client"
local fs = require "glsb.fs"
local loop = require "glsb.loop"
local cjson = require "cjson.safe"

local MODERN_META = {
  ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28",
  ["io.modelcontextprotocol/clientCapabilities"] = {},
  ["io.modelcontextprotocol/clientInfo"] = { name = "spec", version = "1" },
}

local function meta(extra)
  local m = {}
  for k, v in pairs(MODERN_META) do m[k] = v end
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

-- workspaces(tmp) -> the local sandboxes' workspace folders left under a private TMPDIR
local function workspaces(tmp)
  local out = {}
  for _, uid_dir in ipairs(fs.listdir(tmp) or {}) do
    if uid_dir:match("^glsb%-%d+$") then
      for _, w in ipairs(fs.listdir(tmp .. "/" .. uid_dir) or {}) do out[#out + 1] = w end
    end
  end
  return out
end

describe("glsb-lua --mcp (raw JSON-RPC)", function()
  local c, tmp

  before_each(function() tmp = assert(fs.mkdtemp("glsb-mcp-spec-")) end)
  after_each(function()
    if c then c:kill() end
    c = nil
    fs.rmtree(tmp)
  end)

  it("answers initialize with the client's revision when it has it, else its newest", function()
    for _, v in ipairs({ "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25" }) do
      c = client.start { tmpdir = tmp }
      local r = c:initialize(v)
      assert.equal(v, r.protocolVersion)
      assert.equal("glsb", r.serverInfo.name)
      assert.is_table(r.capabilities.tools)
      assert.truthy(r.instructions:find("sandbox_create", 1, true))
      assert.same({}, c:call("ping").result)
      c:close()
    end
    c = client.start { tmpdir = tmp }
    assert.equal("2025-11-25", c:initialize("2023-01-01").protocolVersion)
    local lvl = c:call("logging/setLevel", { level = "loud" })
    assert.equal(-32602, lvl.error.code)
    assert.same({}, c:call("logging/setLevel", { level = "info" }).result)
  end)

  it("refuses a bad command line or config file at start, saying why, before it serves anything", function()
    local bad = tmp .. "/bad.lua"
    assert(fs.write_file_atomic(bad, "return { limits = { max_result_chars = 'many' } }"))
    local typo = tmp .. "/typo.lua"
    assert(fs.write_file_atomic(typo, "return { provder = 'e2b' }"))
    local cases = {
      { { "--provider", "nowhere" }, "unknown provider 'nowhere' (known: " },
      { { "--bogus" }, "unknown argument '--bogus' (usage: glsb-lua --mcp [--provider NAME] [--config FILE])" },
      { { "--config" }, "--config needs a value" },
      { { "--config", tmp .. "/none.lua" }, "cannot load the config file" },
      { { "--config", bad }, "config.limits: option 'max_result_chars' must be a positive integer" },
      { { "--config", typo }, "config: unknown option 'provder' (did you mean 'provider'?)" },
    }
    for _, case in ipairs(cases) do
      c = client.start { tmpdir = tmp, args = case[1] }
      local st = c:close(10)
      assert.equal(2, st.code, table.concat(case[1], " "))
      assert.truthy(c:stderr():find(case[2], 1, true), c:stderr())
    end
    c = nil
  end)

  it("is dual-era: server/discover, per-request _meta, resultType, -32022 for a revision it lacks", function()
    c = client.start { tmpdir = tmp }
    -- an unknown method before initialize: -32601, which makes a dual-era client fall back
    assert.equal(-32601, c:call("nothing/here").error.code)
    local d = c:call("server/discover", { _meta = meta() }).result
    assert.equal("complete", d.resultType)
    assert.same({ "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }, d.supportedVersions)
    assert.equal("glsb", d._meta["io.modelcontextprotocol/serverInfo"].name)
    assert.is_number(d.ttlMs)
    local l = c:call("tools/list", { _meta = meta() }).result
    assert.equal("complete", l.resultType)
    assert.equal("public", l.cacheScope)
    assert.equal("sandbox_create", l.tools[1].name)
    local bad = c:call("tools/list", { _meta = meta { ["io.modelcontextprotocol/protocolVersion"] = "1900-01-01" } })
    assert.equal(-32022, bad.error.code)
    assert.equal("1900-01-01", bad.error.data.requested)
    assert.equal("2026-07-28", bad.error.data.supported[1])
    -- initialize with modern _meta is a mistake of era, said as such
    local init = c:call("initialize", { _meta = meta(), protocolVersion = "2026-07-28" })
    assert.equal(-32600, init.error.code)
  end)

  it("says 'not found' in each era's code, and logs to a client only when it asked", function()
    c = client.start { tmpdir = tmp, env = { GLSB_LOG = "warn" } }
    c:initialize()
    local legacy = c:call("resources/read", { uri = "glsb://sandbox/local-00000000/runs/1/stdout" })
    assert.equal(-32002, legacy.error.code)
    assert.truthy(legacy.error.message:find("dropped to keep the server's memory bounded", 1, true))
    local modern = c:call("resources/read", { uri = "glsb://nowhere", _meta = meta() })
    assert.equal(-32602, modern.error.code)
    -- glsb.log lines of a request (each tools/call logs one at info): sent only to a request that set a
    -- level (2026-07-28) or after logging/setLevel (the handshake revisions); stderr has them at GLSB_LOG's
    local function messages()
      local out = {}
      for _, m in ipairs(c.notes) do
        if m.method == "notifications/message" then out[#out + 1] = m.params.level .. " " .. m.params.data end
      end
      c.notes = {}
      return out
    end
    c:call("tools/call", { name = "sandbox_list", arguments = {}, _meta = meta() })
    c:call("tools/call", { name = "sandbox_list", arguments = {} })
    assert.same({}, messages())
    local r = c:call("tools/call", { name = "sandbox_list", arguments = {},
      _meta = meta { ["io.modelcontextprotocol/logLevel"] = "info" } })
    assert.same({ "info mcp: tools/call sandbox_list (request " .. r.id .. ")" }, messages())
    c:call("tools/call", { name = "sandbox_list", arguments = {},
      _meta = meta { ["io.modelcontextprotocol/logLevel"] = "warning" } })
    assert.same({}, messages())
    c:call("logging/setLevel", { level = "info" })
    r = c:call("tools/call", { name = "sandbox_list", arguments = {} })
    assert.same({ "info mcp: tools/call sandbox_list (request " .. r.id .. ")" }, messages())
    assert.is_nil(c:stderr():find("tools/call sandbox_list", 1, true))
  end)

  it("lists the same tools in the same order, byte for byte, run after run", function()
    local lines = {}
    for i = 1, 2 do
      c = client.start { tmpdir = tmp }
      c:initialize()
      local id = c:next_id()
      c:send({ jsonrpc = "2.0", id = id, method = "tools/list" })
      local _, line = c:recv()
      lines[i] = line
      c:close()
    end
    assert.equal(lines[1], lines[2])
    local names = {}
    for _, t in ipairs(cjson.decode(lines[1]).result.tools) do names[#names + 1] = t.name end
    assert.same({ "sandbox_create", "sandbox_list", "sandbox_kill", "execute_code", "execute_command", "files_write",
      "files_read", "files_list", "command_start", "command_output", "command_kill" }, names)
  end)

  it("answers broken input with the JSON-RPC error it calls for, and goes on serving", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local cases = {
      { "{not json", -32700 },
      { "[1,2,3]", -32600 },
      { '"a string"', -32600 },
      { '{"jsonrpc":"1.0","id":7,"method":"ping"}', -32600, 7 },
      { '{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}', -32600 },
      { '{"jsonrpc":"2.0","id":8,"method":42}', -32600, 8 },
      { '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[1]}', -32602, 9 },
      { '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"no_such_tool"}}', -32602, 10 },
      { '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"execute_code","arguments":[1]}}', -32602, 11 },
      { '{"jsonrpc":"2.0","id":12,"method":"prompts/list"}', -32601, 12 },
      { string.rep("[", 200) .. string.rep("]", 200), -32700 },
    }
    for _, case in ipairs(cases) do
      c:send(case[1])
      local m = assert(c:recv())
      assert.equal(case[2], m.error and m.error.code, case[1]:sub(1, 60))
      if case[3] then assert.equal(case[3], m.id) else assert.equal(cjson.null, m.id) end
    end
    -- a notification with a bad shape, and a response nobody asked for: no answer at all
    c:send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"a":1}}}')
    c:send('{"jsonrpc":"2.0","id":99,"result":{}}')
    c:send("")
    c:send("   ")
    assert.same({}, c:call("ping").result)
  end)

  it("refuses a line of 100 MB without keeping it, and keeps serving", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local before = c:rss_peak_kb()
    local chunk = string.rep("a", 1024 * 1024)
    local task = loop.spawn(function()
      c.p:write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"', loop.now() + 60)
      for _ = 1, 100 do assert(c.p:write(chunk, loop.now() + 60)) end
      c.p:write('"}}\n', loop.now() + 60)
    end)
    local m = assert(c:recv(60))
    task:wait()
    assert.equal(-32600, m.error.code)
    assert.truthy(m.error.message:find("refused", 1, true))
    assert.same({}, c:call("ping").result)
    local grew_mb = (c:rss_peak_kb() - before) / 1024
    assert.is_true(grew_mb < 40, string.format("peak RSS grew by %.1f MB for a 100 MB line", grew_mb))
  end)

  it("turns wrong argument types into execution errors the model can correct", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local cases = {
      { "execute_code", { sandbox_id = "x", code = 1 }, "argument 'code' must be a string" },
      { "execute_code", { sandbox_id = "x" }, "argument 'code' is required" },
      { "execute_code", { sandbox_id = "x", code = "1", timout = 3 }, "unknown argument 'timout' (did you mean 'timeout'?)" },
      { "execute_code", { sandbox_id = "x", code = "1", timeout = -1 }, "argument 'timeout' must be a number > 0" },
      { "files_read", { sandbox_id = "x", path = "a", encoding = "rot13" }, "must be one of" },
      { "command_output", { command_id = "cmd-1", wait = 500 }, "from 0 to 50" },
      { "sandbox_create", { provider = "nowhere" }, "must be one of \"local\"" },
      { "execute_code", { sandbox_id = "local-0000", code = "1" }, "no sandbox 'local-0000' in this session" },
      { "command_kill", { command_id = "cmd-9" }, "no command 'cmd-9'" },
    }
    for _, case in ipairs(cases) do
      local r = c:tool(case[1], case[2])
      assert.is_true(r.isError, case[3])
      assert.truthy(client.text(r):find(case[3], 1, true), client.text(r))
      assert.equal(case[1], client.text(r):match("^([%w_]+):"))
    end
  end)

  it("serves 1,000 requests in flight with bounded memory, and says busy past its limit", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local lines = {}
    for i = 1, 1000 do
      lines[i] = cjson.encode({ jsonrpc = "2.0", id = 1000 + i, method = "tools/call",
        params = { name = "execute_code", arguments = { sandbox_id = id, code = "print(" .. i .. ")" } } })
    end
    local writer = loop.spawn(function() assert(c.p:write(table.concat(lines, "\n") .. "\n", loop.now() + 60)) end)
    local seen = 0
    for i = 1, 1000 do
      local m = assert(c:response(1000 + i, 120))
      assert.equal(tostring(i) .. "\n", m.result.structuredContent and m.result.content[1].text:match("stdout:\n(.*)$"))
      seen = seen + 1
    end
    writer:wait()
    assert.equal(1000, seen)
    local peak_mb = c:rss_peak_kb() / 1024
    assert.is_true(peak_mb < 200, string.format("peak RSS %.1f MB", peak_mb))
    c:close()

    local cfg = tmp .. "/busy.lua"
    assert(fs.write_file_atomic(cfg, "return { limits = { max_in_flight = 4 } }"))
    c = client.start { tmpdir = tmp, args = { "--config", cfg } }
    c:initialize()
    id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    for i = 1, 20 do
      c:send({ jsonrpc = "2.0", id = i + 100, method = "tools/call", params = { name = "execute_code",
        arguments = { sandbox_id = id, code = "import time; time.sleep(0.2)" } } })
    end
    local busy, served = 0, 0
    for i = 1, 20 do
      local m = assert(c:response(i + 100, 30))
      if m.error then
        assert.equal(-32000, m.error.code)
        assert.truthy(m.error.message:find("busy", 1, true))
        busy = busy + 1
      else
        served = served + 1
      end
    end
    assert.equal(4, served)
    assert.equal(16, busy)
    assert.same({}, c:call("ping").result)
  end)

  it("starts no more work while a client does not read its answers, so that they never pile up", function()
    local cfg = tmp .. "/small.lua"
    assert(fs.write_file_atomic(cfg, "return { limits = { max_message_bytes = 1048576, store_bytes = 4194304 } }"))
    c = client.start { tmpdir = tmp, args = { "--config", cfg } }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local base = c:rss_peak_kb()
    local lines = {}
    for i = 1, 600 do
      lines[i] = cjson.encode({ jsonrpc = "2.0", id = 5000 + i, method = "tools/call",
        params = { name = "execute_code", arguments = { sandbox_id = id, code = "print('y' * 60000)" } } })
    end
    -- 600 answers of 60 kB each (36 MB) asked for, none read for 3 s
    local writer = loop.spawn(function() c.p:write(table.concat(lines, "\n") .. "\n", loop.now() + 120) end)
    loop.sleep(3)
    local grew_mb = (c:rss_peak_kb() - base) / 1024
    for i = 1, 600 do
      local m = assert(c:response(5000 + i, 60))
      assert.equal("success", m.result.structuredContent.status)
    end
    writer:wait()
    -- without the bound it grew by 102 MB (every answer queued, every stdout stored); with it, 18 MB
    assert.is_true(grew_mb < 30, string.format("the server grew by %.1f MB with 36 MB of answers unread", grew_mb))
  end)

  it("cancelling a run stops it and frees its sandbox; no answer comes for it", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    assert.equal(1, #workspaces(tmp))
    c:send({ jsonrpc = "2.0", id = 77, method = "tools/call", params = { name = "execute_code",
      arguments = { sandbox_id = id, code = "import time; time.sleep(30)" } } })
    loop.sleep(0.5)
    c:send({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = 77, reason = "spec" } })
    -- the next answer is the one to this ping: none ever comes for 77
    c:call("tools/call", { name = "sandbox_list", arguments = {} })
    assert.is_nil(c.pending[77])
    local deadline = loop.now() + 5
    while #workspaces(tmp) > 0 and loop.now() < deadline do loop.sleep(0.05) end
    assert.same({}, workspaces(tmp))
    local r = c:tool("execute_code", { sandbox_id = id, code = "1" })
    assert.is_true(r.isError)
    assert.truthy(client.text(r):find("cancelled", 1, true), client.text(r))
    assert.is_nil(c.pending[77])
  end)

  it("exits when stdin closes, within its bounded time, leaving no sandbox behind", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    for _ = 1, 3 do c:tool("sandbox_create", {}) end
    -- one run still going when the input ends
    c:send({ jsonrpc = "2.0", id = 5, method = "tools/call", params = { name = "execute_code",
      arguments = { sandbox_id = c:tool("sandbox_list").structuredContent.sandboxes[1].sandbox_id,
        code = "import time; time.sleep(60)" } } })
    assert.equal(3, #workspaces(tmp))
    local st, took = c:close(10)
    c = nil
    assert.equal(0, st.code)
    -- limits.shutdown is 3 s; the official clients send SIGKILL 4 s after closing stdin
    assert.is_true(took < 6, "took " .. took .. " s")
    assert.same({}, workspaces(tmp))
  end)

  it("ends its sandboxes on SIGTERM too", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    c:tool("sandbox_create", {})
    assert.equal(1, #workspaces(tmp))
    c.p:kill("TERM")
    local st = c.p:wait(loop.now() + 10)
    assert.equal(0, st and st.code)
    assert.same({}, workspaces(tmp))
  end)

  it("keeps at most limits.max_sandboxes sandboxes running in one session; network = false hides network", function()
    local cfg = tmp .. "/two.lua"
    assert(fs.write_file_atomic(cfg, "return { network = false, limits = { max_sandboxes = 2 } }"))
    c = client.start { tmpdir = tmp, args = { "--config", cfg } }
    c:initialize()
    local a = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    c:tool("sandbox_create", {})
    local r = c:tool("sandbox_create", {})
    assert.is_true(r.isError)
    assert.truthy(client.text(r):find("already has 2 sandboxes running", 1, true), client.text(r))
    c:tool("sandbox_kill", { sandbox_id = a })
    assert.is_nil(c:tool("sandbox_create", {}).isError)
    assert.equal(2, #workspaces(tmp))
    assert.is_nil(c:call("tools/list").result.tools[1].inputSchema.properties.network)
    r = c:tool("sandbox_create", { network = true })
    assert.truthy(client.text(r):find("unknown argument 'network'", 1, true), client.text(r))
  end)

  it("one session cannot reach another's sandboxes", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local other = client.start { tmpdir = tmp }
    other:initialize()
    local r = other:tool("execute_code", { sandbox_id = id, code = "print(1)" })
    assert.is_true(r.isError)
    assert.truthy(client.text(r):find("no sandbox '" .. id .. "' in this session", 1, true))
    r = other:tool("sandbox_kill", { sandbox_id = id })
    assert.is_true(r.isError)
    other:close()
    assert.is_nil(c:tool("execute_code", { sandbox_id = id, code = "print(1)" }).isError)
  end)

  it("a sandbox lives `timeout` seconds after its last use: calls renew its lease, idleness ends it", function()
    local cfg = tmp .. "/short.lua"
    assert(fs.write_file_atomic(cfg, "return { timeout = 3 }"))
    c = client.start { tmpdir = tmp, args = { "--config", cfg } }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    -- used every 1.2 s for 4.8 s: past its 3 s lease, still running
    for _ = 1, 4 do
      loop.sleep(1.2)
      local r = c:tool("execute_code", { sandbox_id = id, code = "1" })
      assert.equal("success", r.structuredContent and r.structuredContent.status, client.text(r))
    end
    loop.sleep(4)
    local r = c:tool("execute_code", { sandbox_id = id, code = "1" })
    assert.is_true(r.isError)
    assert.truthy(client.text(r):find("its lease ended", 1, true), client.text(r))
  end)

  it("command_output gives what is new since the last call; command_kill stops a command once", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local cmd = c:tool("command_start", { sandbox_id = id, command = "echo one; sleep 0.3; echo two; sleep 600" })
      .structuredContent.command_id
    local seen, deadline = "", loop.now() + 15
    while not seen:find("two", 1, true) and loop.now() < deadline do
      local r = c:tool("command_output", { command_id = cmd })
      assert.is_false(r.structuredContent.done, client.text(r))
      seen = seen .. client.text(r)
      loop.sleep(0.1)
    end
    assert.equal(1, select(2, seen:gsub("one", "")), "each line once: " .. seen)
    assert.equal(1, select(2, seen:gsub("two", "")), "each line once: " .. seen)
    assert.is_true(c:tool("command_kill", { command_id = cmd }).structuredContent.killed)
    local r = c:tool("command_output", { command_id = cmd, wait = 10 })
    assert.is_true(r.structuredContent.done, client.text(r))
    assert.is_true(r.isError)
    assert.not_equal("success", r.structuredContent.status)
    assert.is_nil(client.text(r):find("one", 1, true), "nothing new to give: " .. client.text(r))
    local again = c:tool("command_kill", { command_id = cmd })
    assert.is_false(again.structuredContent.killed)
    assert.truthy(client.text(again):find("had already ended", 1, true), client.text(again))
    assert.equal("success", c:tool("execute_code", { sandbox_id = id, code = "1" }).structuredContent.status)
  end)

  it("gives clients of revisions before 2025-06-18 neither resource links nor structuredContent", function()
    c = client.start { tmpdir = tmp }
    c:initialize("2025-03-26")
    local id = c:tool("sandbox_create", {}).structuredContent
    assert.is_nil(id)
    local list = cjson.decode(c:tool("sandbox_list").content[2].text)
    local sid = list.sandboxes[1].sandbox_id
    c:tool("files_write", { sandbox_id = sid, path = "a.txt", content = "hi" })
    local r = c:tool("files_read", { sandbox_id = sid, path = "a.txt" })
    for _, b in ipairs(r.content) do assert.not_equal("resource_link", b.type) end
    assert.truthy(client.text(r):find("a.txt", 1, true))
  end)

  it("sends progress while a run prints, rate-limited, and none without a progressToken", function()
    c = client.start { tmpdir = tmp }
    c:initialize()
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local t0 = loop.now()
    local r = c:tool("execute_code", { sandbox_id = id, code = "import time\nfor i in range(2000):\n  print(i)\n"
      .. "  if i % 500 == 0: time.sleep(0.3)" }, 30, { progressToken = "p1" })
    local took = loop.now() - t0
    assert.equal("success", r.structuredContent.status)
    local n, last = 0, 0
    for _, m in ipairs(c.notes) do
      if m.method == "notifications/progress" then
        assert.equal("p1", m.params.progressToken)
        assert.is_true(m.params.progress > last)
        last = m.params.progress
        n = n + 1
      end
    end
    assert.is_true(n >= 3, n .. " notifications")
    assert.is_true(n <= took / 0.1 + 3, n .. " notifications in " .. took .. " s")
    c.notes = {}
    c:tool("execute_code", { sandbox_id = id, code = "print(1)" })
    assert.same({}, c.notes)
  end)

  it("keeps secrets out of results, errors and log lines", function()
    local secret = "sk-mcp-spec-5ecret-0123456789"
    -- a server that echoes the request's headers into its 401, as a hostile one may
    local server = require("support.server").start({ "node", "-e", [[
      const http = require('http');
      const s = http.createServer((req, res) => {
        res.writeHead(401, {'Content-Type': 'application/json'});
        res.end(JSON.stringify({message: 'bad key', headers: req.headers}));
      });
      s.listen(0, '127.0.0.1', () => console.log('listening http://127.0.0.1:' + s.address().port));
      process.stdin.on('end', () => process.exit(0)); process.stdin.resume();
    ]] })
    local cfg = tmp .. "/e2b.lua"
    assert(fs.write_file_atomic(cfg, string.format("return { providers = { e2b = { api_url = %q, sandbox_url = %q, "
      .. "retry = false } } }", server.url, server.url)))
    c = client.start { tmpdir = tmp, args = { "--config", cfg }, env = { E2B_API_KEY = secret, GLSB_LOG = "debug" } }
    c:initialize()
    c:call("logging/setLevel", { level = "debug" })
    local r = c:tool("sandbox_create", { provider = "e2b" })
    server.stop()
    assert.is_true(r.isError)
    assert.truthy(client.text(r):find("REDACTED", 1, true), client.text(r))
    local id = c:tool("sandbox_create", {}).structuredContent.sandbox_id
    local out = c:tool("execute_code", { sandbox_id = id, code = "print('" .. secret .. "')" })
    assert.truthy(client.text(out):find("REDACTED", 1, true))
    c:close()
    local everything = cjson.encode(c.notes) .. c:stderr() .. cjson.encode(r) .. cjson.encode(out)
    assert.is_nil(everything:find(secret, 1, true))
    assert.is_nil(everything:find(secret:gsub("%-", "%%-")))
  end)
end)
