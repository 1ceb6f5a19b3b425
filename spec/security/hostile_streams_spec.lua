-- Issue 25 §1, "streams other than stdout/stderr have no cap": every accumulation from a remote stream is
-- capped, error bodies included. Before: Bedrock Invoke kept every raw chunk of its event stream (300 MiB
-- of events: 919 MiB peak) and every byte of a 500's body (300 MiB: 1,217 MiB, 6 s); OpenSandbox and E2B
-- kept every `result` event (500,000 empty ones: 158 and 154 MiB) and joined an error body line by line
-- (quadratic: execute_code{timeout = 20} against a 500 with endless lines had not returned after 150 s);
-- Bedrock's start_command grew what it had seen on every poll (15 s of 4 MiB answers: 332 MiB).
--
-- Each case runs in a fresh glsb-lua process (its VmHWM is its own), under an address-space limit so that a
-- build without the fixes fails by running out of memory rather than take the machine's. Floods are
-- finite where the call would otherwise read them to the end.
-- #security
local hostile = require "security.hostile.helper"
local cjson = require "cjson"

local MiB = hostile.MiB
local VMEM = 3072
local ES = { ["Content-Type"] = "application/vnd.amazon.eventstream" }

-- A Bedrock tool's answer: one result event with this structuredContent.
local function tool_result(sc)
  return { headers = ES, body_b64 = hostile.b64(hostile.result_event({ content = {}, structuredContent = sc })) }
end

local RUN = [[
local provider, o, what, timeout = arg[1], cjson.decode(arg[2]), arg[3], tonumber(arg[4])
if arg[5] then require("glsb.output").CAP = tonumber(arg[5]) end
local sb = glsb.create(provider, o)
local r
if what == "code" then
  r = sb:execute_code("1", { timeout = timeout })
elseif what == "command" then
  r = sb:execute_command("x", { timeout = timeout })
else
  r = sb:start_command("x", { timeout = timeout }):wait(timeout + 30)
end
sb:terminate()
local last = r.results[#r.results]
report { status = r.status, error = r.error, stdout = r.stdout, results = #r.results,
  results_truncated = r.results_truncated, note = last and glsb.results.is_note(last) and last.text or nil }
]]

describe("every accumulation from a remote stream is capped (issue 25 §1) #security", function()
  local srv, baseline

  setup(function()
    srv = hostile.server()
    baseline = hostile.baseline_mib(srv.url)
  end)
  teardown(function() if srv then srv:stop() end end)

  local function run(provider, what, timeout, rules, cap)
    srv:plan(hostile.with(rules, hostile.rules(provider, srv.url)))
    local got = hostile.run(RUN, { args = { provider, cjson.encode(hostile.opts(provider, srv.url)), what, timeout,
      cap }, timeout = timeout + 90, vmem_mib = VMEM })
    return hostile.must(got), got
  end


  it("bedrock: 300 MiB of events before the result cost one event at a time", function()
    local ev = hostile.event_message({ { ":message-type", "event" }, { ":event-type", "chunk" } }, ("z"):rep(MiB))
    local out, got = run("bedrock", "command", 60, {
      { method = "POST", path = "tools/invoke", respond = { headers = ES, ["repeat"] = {
        chunk_b64 = hostile.b64(ev), count = 300, tail_b64 = hostile.b64(hostile.result_event({ content = {},
          structuredContent = { stdout = "ok", stderr = "", exitCode = 0 } })) } } },
    })
    assert.are.equal("success", out.status, out.error)
    assert.are.equal("ok", out.stdout)
    -- the transfer's queue (8 MiB of frames), an event being framed and its copy, a margin
    hostile.under(got, baseline + 8 + 4 + 24)
  end)

  it("bedrock: a 500 with a 300 MiB body keeps the body's head and ends at once", function()
    local out, got = run("bedrock", "command", 60, {
      { method = "POST", path = "tools/invoke", respond = { status = 500,
        headers = { ["x-amzn-errortype"] = "InternalServerException" },
        ["repeat"] = { chunk = ("e"):rep(1023) .. "\n", count = 300 * 1024 } } },
    })
    assert.are.equal("unknown", out.status)
    assert.matches("InternalServerException", out.error)
    hostile.under(got, baseline + 16)
    assert.is_true(got.seconds < 5, got.seconds)
  end)

  for _, provider in ipairs({ "opensandbox", "e2b" }) do
    local path = provider == "opensandbox" and "^/execd/code" or "^/execute"

    it(provider .. ": execute_code against a 500 with endless lines ends within its timeout, the body capped",
      function()
      local out, got = run(provider, "code", 20, {
        { method = "POST", path = path, respond = { status = 500,
          ["repeat"] = { chunk = ("e"):rep(99) .. "\n", count = -1 } } },
      })
      assert.are.equal("error", out.status)
      assert.matches("500", out.error)
      assert.is_true(got.seconds < 20 + 5, got.seconds)
      hostile.under(got, baseline + 16)
    end)

    it(provider .. ": a 302 with endless lines is no stream: capped, refused, at once", function()
      local out, got = run(provider, "code", 20, {
        { method = "POST", path = path, respond = { status = 302, headers = { Location = "/elsewhere" },
          ["repeat"] = { chunk = ("r"):rep(99) .. "\n", count = -1 } } },
      })
      assert.are_not.equal("success", out.status)
      assert.matches("302", out.error)
      assert.is_true(got.seconds < 20, got.seconds)
      hostile.under(got, baseline + 16)
    end)

    it(provider .. ": 500,000 empty result events keep results.MAX_BUNDLES of them", function()
      local rule
      if provider == "e2b" then
        rule = { method = "POST", path = path, respond = { headers = { ["Content-Type"] = "application/x-ndjson" },
          ["repeat"] = { chunk = '{"type": "result", "is_main_result": false}\n', count = 500000,
            tail_b64 = hostile.b64('{"type": "end_of_execution"}\n') } } }
      else
        rule = { method = "POST", path = path, respond = { headers = { ["Content-Type"] = "text/event-stream" },
          ["repeat"] = { chunk = 'data: {"type":"result","results":{}}\n\n', count = 500000,
            tail_b64 = hostile.b64('data: {"type":"execution_complete"}\n\n') } } }
      end
      local out, got = run(provider, "code", 120, { rule })
      assert.are.equal("success", out.status, out.error)
      assert.is_true(out.results_truncated)
      assert.are.equal(require("glsb.results").MAX_BUNDLES + 1, out.results) -- and the note
      -- the note says what cut them: the count of results, not bytes (they are empty)
      assert.matches(string.format("^%%[glsb: results truncated at %d results; %d more results %%(%%d+ bytes%%) "
        .. "dropped%%]$", require("glsb.results").MAX_BUNDLES, 500000 - require("glsb.results").MAX_BUNDLES), out.note)
      hostile.under(got, baseline + 40)
    end)

    -- Before: a result line the decoder refused (its tables would cost more than the decoder's budget) was
    -- skipped in silence: results_truncated false, no note, as if the code had displayed nothing there.
    it(provider .. ": a result over the decoder's budget is counted as dropped; the note says the decoder cut it",
      function()
      local good, bad_head, tail, ctype
      if provider == "e2b" then
        ctype = "application/x-ndjson"
        good = '{"type": "result", "is_main_result": false, "text": "%s"}\n'
        bad_head = '{"type": "result", "is_main_result": false, "extra": ['
        tail = '[]]}\n' .. good:format("after") .. '{"type": "end_of_execution"}\n'
      else
        ctype = "text/event-stream"
        good = 'data: {"type":"result","results":{"text":"%s"}}\n\n'
        bad_head = 'data: {"type":"result","results":{"x":['
        tail = '[]]}}\n\n' .. good:format("after") .. 'data: {"type":"execution_complete"}\n\n'
      end
      -- 300,000 empty lists: under 1 MiB of text (one frame), ~31 MiB of Lua tables (the budget is 16 MiB)
      local out = run(provider, "code", 60, { { method = "POST", path = path, respond = { headers = {
        ["Content-Type"] = ctype }, ["repeat"] = { head_b64 = hostile.b64(good:format("before") .. bad_head),
          chunk = "[],", count = 300000, tail_b64 = hostile.b64(tail) } } } })
      assert.are.equal("success", out.status, out.error)
      assert.is_true(out.results_truncated)
      assert.are.equal(3, out.results) -- before, after and the note
      assert.matches("^%[glsb: results truncated where the decoder refused 1 %(too costly to decode%); 1 more result "
        .. "%(%d+ bytes%) dropped%]$", out.note)
    end)
  end

  it("bedrock: start_command's polls of 4 MiB answers that never extend each other cost the cap", function()
    local out, got = run("bedrock", "background", 15, {
      { method = "POST", path = "tools/invoke", body = '"name":"startCommandExecution"',
        respond = tool_result { taskId = "t1", taskStatus = "running" } },
      { method = "POST", path = "tools/invoke", body = '"name":"getTask"', sequence = {
        tool_result { taskId = "t1", taskStatus = "running", stdout = ("a"):rep(4 * MiB), stderr = "" },
        tool_result { taskId = "t1", taskStatus = "running", stdout = ("b"):rep(4 * MiB), stderr = "" } } },
      { method = "POST", path = "tools/invoke", body = '"name":"stopTask"',
        respond = tool_result { taskId = "t1", taskStatus = "canceled" } },
    }, MiB)
    assert.are.equal("timeout", out.status)
    assert.are.equal(MiB, #out.stdout:match("^(a*)"))
    -- one answer in flight is framed, copied, decoded and compared a few times over; what was seen is not
    -- kept past the cap (before: every answer, joined again on every poll)
    hostile.under(got, baseline + 12 * 4 + 16)
  end)
end)
