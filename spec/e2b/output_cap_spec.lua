-- Output caps on E2B (issue 14, "one behaviour behind one API"): a single write whose NDJSON line is
-- longer than the adapter reads whole (interpreter.MAX_FRAME) is capped like any output (SUCCESS,
-- stdout_truncated, glsb.output's note), never an UNKNOWN with FRAME_TOO_LARGE, and the host never
-- buffers the line: the lines framer cuts it (oversized = "cut") and counts the rest as it streams past.
-- #e2b
local glsb = require "glsb"
local emulator = require "e2b.emulator"
local output = require "glsb.output"
local core = require "glsb.core"
local interpreter = require "glsb.providers.e2b.interpreter"

local Status = glsb.ExecutionStatus
local MiB = 1024 * 1024

-- Runs in a fresh glsb-lua process, so that its peak resident size (VmHWM) is this call's own.
local SCRIPT = [[
local glsb = require "glsb"
glsb.log.set_handler(function() end)
local key, url, code, dir = arg[1], arg[2], arg[3], arg[4]
local sb = glsb.create("e2b", { api_key = key, api_url = url, sandbox_url = url, timeout = 300 })
local r = sb:execute_code(code, { timeout = 240 })
sb:terminate()
local hwm
for line in io.lines("/proc/self/status") do
  hwm = hwm or line:match("^VmHWM:%s+(%d+)")
end
local function put(name, data)
  local f = assert(io.open(dir .. "/" .. name, "wb"))
  f:write(data)
  f:close()
end
put("stdout", r.stdout)
put("stderr", r.stderr)
put("meta", table.concat({ r.status, tostring(r.stdout_truncated), r.text or "", tostring(tonumber(hwm) // 1024),
  (tostring(r.error):gsub("\n", " ")) }, "\n"))
]]

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The escaped forms the server's json.dumps (ensure_ascii) gives each piece of TEXT, for working out
-- which whole escapes fit in a cut line's head.
local UNIT = { { "a", "a" }, { '\\"', '"' }, { "\\\\", "\\" }, { "\\u0001", "\1" }, { "\\u00e9", "é" },
  { "\\ud83d\\ude00", "😀" }, { "\\t", "\t" } }
local REPEAT = 20
local TEXT = ""
for _, u in ipairs(UNIT) do TEXT = TEXT .. u[2] end
TEXT = TEXT:rep(REPEAT)
-- `{"type": "stdout", "text": "` in front of the text on the wire
local ENVELOPE = 28

-- The text whose escaped form is the longest run of whole escapes within n escaped bytes.
local function whole_prefix(n)
  local kept, used = {}, 0
  for _ = 1, REPEAT do
    for _, u in ipairs(UNIT) do
      if used + #u[1] > n then return table.concat(kept) end
      used = used + #u[1]
      kept[#kept + 1] = u[2]
    end
  end
  return table.concat(kept)
end

-- The text kept of a stream and the count in its note.
local function split_note(s)
  local kept, dropped = s:match("^(.-)\n%[glsb: output truncated at %d+ bytes; (%d+) more bytes dropped%]\n$")
  return kept, tonumber(dropped)
end

describe("e2b output caps: a line too long to read whole #e2b", function()
  local emu, sb
  local max_frame, piece = interpreter.MAX_FRAME, interpreter.DECODE_PIECE

  setup(function()
    emu = emulator.start()
    sb = glsb.create("e2b", emu:opts { timeout = 300 })
  end)

  teardown(function()
    interpreter.MAX_FRAME, interpreter.DECODE_PIECE = max_frame, piece
    if sb then pcall(sb.terminate, sb) end
    if emu then emu:stop() end
  end)

  after_each(function() interpreter.MAX_FRAME, interpreter.DECODE_PIECE = max_frame, piece end)

  it("a 20 MiB write of \\x01 (a 120 MiB line) is capped: SUCCESS, stdout_truncated, the note, "
    .. "the call goes on, the host's memory bounded", function()
    local dir = assert(core.mkdtemp("/tmp/glsb-e2b-cap-XXXXXX"))
    finally(function() core.rmtree(dir) end)
    local script = dir .. "/run.lua"
    local f = assert(io.open(script, "w"))
    f:write(SCRIPT)
    f:close()
    local code = "import sys\nsys.stdout.write('\\x01' * (20 * 1024 * 1024))\nsys.stdout.flush()\n"
      .. "print('after')\nsys.stderr.write('done\\n')\n42"
    local argv = {}
    for _, a in ipairs({ emulator.ROOT .. "/build/glsb-lua", script, emu.api_key, emu.base, code, dir }) do
      argv[#argv + 1] = sh_quote(a)
    end
    local ok = os.execute(table.concat(argv, " "))
    local function read(name) return assert(io.open(dir .. "/" .. name, "rb")):read("a") end
    assert.is_true(ok, "glsb-lua failed")
    local status, truncated, text, hwm, err = read("meta"):match("^([^\n]*)\n([^\n]*)\n([^\n]*)\n(%d+)\n(.*)$")
    local stdout = read("stdout")
    assert.are.equal(Status.SUCCESS, status, err)
    assert.are.equal("true", truncated)
    assert.are.equal("done\n", read("stderr"))
    assert.are.equal("42", text)
    local kept, dropped = split_note(stdout)
    assert.truthy(kept, stdout:sub(-200))
    assert.are.equal(("\1"):rep(output.CAP), kept) -- the cap's worth, like local keeps
    assert.are.equal(output.note(dropped), stdout:sub(output.CAP + 1))
    -- at least what was dropped (the rest of the write and "after\n"); at most the rest as sent, escaped
    assert.is_true(dropped >= 20 * MiB - output.CAP + 6, dropped)
    assert.is_true(dropped <= 6 * (20 * MiB - output.CAP) + 200, dropped)
    -- The line is 120 MiB; the host holds at most its first MAX_FRAME bytes, in the framer and once as
    -- a Lua string, and the cap's worth of decoded text. Buffering the line would take 240 MiB.
    assert.is_true(tonumber(hwm) < 2 * interpreter.MAX_FRAME // MiB + 48, "peak resident size " .. hwm .. " MiB")
  end)

  it("a cut line keeps the whole escapes its head holds, wherever the cut and the decoding pieces fall", function()
    -- TEXT as a Python literal (its escaped form, with Python's own escapes for é and the emoji)
    local code = "import sys\nsys.stdout.write(" .. (function()
      local parts = {}
      for _, u in ipairs(UNIT) do parts[#parts + 1] = u[1] end
      return '"' .. table.concat(parts):gsub("\\u00e9", "\\xe9"):gsub("\\ud83d\\ude00", "\\U0001F600") .. '"'
    end)() .. " * " .. REPEAT .. ")\nsys.stdout.flush()\nsys.stderr.write('after\\n')\n"
    local function check(frame, decode_piece)
      interpreter.MAX_FRAME, interpreter.DECODE_PIECE = frame, decode_piece
      local r = sb:execute_code(code, { timeout = 60 })
      assert.are.equal(Status.SUCCESS, r.status, r.error)
      assert.is_true(r.stdout_truncated)
      assert.are.equal("after\n", r.stderr)
      local kept, dropped = split_note(r.stdout)
      assert.are.equal(whole_prefix(frame - ENVELOPE), kept, "max_frame " .. frame .. ", piece " .. decode_piece)
      -- never less than what was really dropped, never more than the rest of the line
      assert.is_true(dropped >= #TEXT - #kept, dropped)
      assert.is_true(dropped <= 31 * REPEAT + 80, dropped)
    end
    for frame = ENVELOPE + 200, ENVELOPE + 231 do check(frame, 1024 * 1024) end
    for decode_piece = 12, 25 do check(ENVELOPE + 400, decode_piece) end
  end)

  it("a cut result line is dropped and noted (results_truncated); a cut error line makes the call UNKNOWN", function()
    interpreter.MAX_FRAME = 300
    local r = sb:execute_code("'x' * 400", { timeout = 60 })
    assert.are.equal(Status.SUCCESS, r.status, r.error)
    assert.is_true(r.results_truncated)
    assert.are.equal(1, #r.results)
    assert.matches("^%[glsb: results truncated at %d+ bytes; 1 more result %(%d+ bytes%) dropped%]$", r.results[1].text)
    assert.is_nil(r.text) -- the main result was in the line that was dropped
    r = sb:execute_code("raise ValueError('x' * 400)", { timeout = 60 })
    assert.are.equal(Status.UNKNOWN, r.status)
    assert.matches("the code interpreter sent a error line of %d+ bytes, over the 300%-byte limit %(FRAME_TOO_LARGE%)",
      r.error)
    interpreter.MAX_FRAME = max_frame
    r = sb:execute_code("print('still here')", { timeout = 60 })
    assert.are.equal(Status.SUCCESS, r.status, r.error)
    assert.are.equal("still here\n", r.stdout)
  end)
end)
