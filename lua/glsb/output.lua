-- glsb.output: what a run printed, the same way on every provider: streaming to on_stdout/on_stderr one
-- call per line, and the capture kept for the result, capped at one documented size per stream.
--
--   local output = require "glsb.output"
--   local out = output.capture(opts)         -- opts.on_stdout / opts.on_stderr (may be nil)
--   out:push("stdout", text)                 -- as bytes arrive, in any pieces
--   out:dropped("stderr", n)                 -- bytes the far side dropped itself (counted, noted)
--   out:finish(result)                       -- flushes partial lines; sets result.stdout, .stderr,
--                                            -- .stdout_truncated, .stderr_truncated
--
-- The cap (output.CAP, 10 MiB per stream per call): bytes past it are not kept and not streamed; the
-- stream then ends with output.note(dropped) and its *_truncated flag is true. A callback that raises
-- is logged and the run goes on, except a cancellation of the task, which is re-raised (the base class
-- then terminates the sandbox).

local log = require "glsb.log"

local M = {}

M.CAP = 10 * 1024 * 1024

-- The line that ends a truncated stream.
function M.note(dropped)
  return string.format("\n[glsb: output truncated at %d bytes; %d more bytes dropped]\n", M.CAP, dropped)
end

local function is_cancelled(err)
  local loop = package.loaded["glsb.loop"]
  return loop ~= nil and loop.is_cancelled(err)
end

-- call_back(fn, line): calls a user's streaming callback; re-raises a cancellation, logs anything else.
function M.call_back(fn, line)
  local ok, err = pcall(fn, line)
  if not ok then
    if is_cancelled(err) then error(err, 0) end
    log.warn("streaming callback failed: " .. tostring(err))
  end
end

---------------------------------------------------------------------------
-- Pieces: bytes that arrive in pieces of any size, kept at the cost of their bytes
---------------------------------------------------------------------------

-- A Lua string costs some 30 bytes besides its own and a list slot 16 more: kept one by one, a million
-- one-byte pieces (a sandbox or a server that writes one byte per frame) cost 50 times what they hold.
-- Pieces joins small ones as they come, so what it holds costs its bytes and a small constant whatever the
-- framing: it keeps at most two parts per JOIN_BYTES (a run of small pieces joined, then a big piece), and
-- at most JOIN_COUNT small pieces not yet joined.
local JOIN_BYTES = 4096
local JOIN_COUNT = 256

local Pieces = {}
Pieces.__index = Pieces
M.Pieces = Pieces

-- pieces() -> an accumulator: p:add(s), p:text() (all of it, joined once and kept joined), p.size (bytes),
-- p:clear().
function M.pieces()
  return setmetatable({ parts = {}, small = {}, small_bytes = 0, size = 0 }, Pieces)
end

-- The small pieces become one; a last part still short of JOIN_BYTES takes them in (each byte is copied
-- a few times at most: a part stops growing at JOIN_BYTES).
local function join_small(p)
  local small, parts = p.small, p.parts
  if #small == 0 then return end
  local last = parts[#parts]
  if last and #last < JOIN_BYTES then
    parts[#parts] = last .. table.concat(small)
  else
    parts[#parts + 1] = #small == 1 and small[1] or table.concat(small)
  end
  p.small, p.small_bytes = {}, 0
end

function Pieces:add(s)
  local n = #s
  if n == 0 then return end
  self.size = self.size + n
  if n >= JOIN_BYTES then
    join_small(self)
    self.parts[#self.parts + 1] = s
    return
  end
  local small = self.small
  small[#small + 1] = s
  self.small_bytes = self.small_bytes + n
  if self.small_bytes >= JOIN_BYTES or #small >= JOIN_COUNT then join_small(self) end
end

function Pieces:text()
  join_small(self)
  local parts = self.parts
  if #parts == 0 then return "" end
  if #parts > 1 then self.parts = { table.concat(parts) } end
  return self.parts[1]
end

function Pieces:clear()
  self.parts, self.small, self.small_bytes, self.size = {}, {}, 0, 0
end

-- splitter(fn) -> {push(text), flush()}: one fn(line) per complete line (without its "\n"), the last
-- partial line on flush. A line that arrives in many pieces is joined once (no quadratic copying).
function M.splitter(fn)
  if not fn then return { push = function() end, flush = function() end } end
  local line = M.pieces()
  local s = {}
  local function emit()
    local text = line:text()
    line:clear()
    M.call_back(fn, text)
  end
  function s.push(text)
    local pos = 1
    while true do
      local nl = text:find("\n", pos, true)
      if not nl then break end
      line:add(text:sub(pos, nl - 1))
      emit()
      pos = nl + 1
    end
    if pos <= #text then line:add(pos == 1 and text or text:sub(pos)) end
  end
  function s.flush()
    if line.size > 0 then emit() end
  end
  return s
end

local Capture = {}
Capture.__index = Capture

-- capture(opts[, cap]) -> a Capture for one run. opts: on_stdout, on_stderr (functions or nil).
function M.capture(opts, cap)
  opts = opts or {}
  local c = setmetatable({ cap = cap or M.CAP, streams = {} }, Capture)
  for _, name in ipairs({ "stdout", "stderr" }) do
    c.streams[name] = { kept = M.pieces(), size = 0, dropped = 0, lines = M.splitter(opts["on_" .. name]) }
  end
  return c
end

function Capture:push(name, text)
  local s = self.streams[name]
  if not s then error("glsb.output: unknown stream " .. tostring(name), 2) end
  if text == nil or text == "" then return end
  local room = self.cap - s.size
  if #text > room then
    s.dropped = s.dropped + #text - math.max(room, 0)
    if room <= 0 then return end
    text = text:sub(1, room)
  end
  s.size = s.size + #text
  s.kept:add(text)
  s.lines.push(text)
end

-- dropped(name, n): the far side dropped n bytes of this stream (its own cap); noted like ours.
function Capture:dropped(name, n)
  local s = self.streams[name]
  if s and type(n) == "number" and n > 0 then s.dropped = s.dropped + n end
end

-- text(name) -> what was kept so far (without the note).
function Capture:text(name)
  return self.streams[name].kept:text()
end

-- finish([result]) -> result (a new table when nil) with stdout, stderr and the truncation flags.
function Capture:finish(result)
  result = result or {}
  for name, s in pairs(self.streams) do
    s.lines.flush()
    local t = self:text(name)
    if s.dropped > 0 then t = t .. M.note(s.dropped) end
    result[name] = t
    result[name .. "_truncated"] = s.dropped > 0
  end
  return result
end

-- cap_text(text) -> text, truncated: the same cap applied to a whole string (the base class's
-- backstop for a hook that returned its output whole without capping it).
function M.cap_text(text)
  if type(text) ~= "string" or #text <= M.CAP then return text, false end
  return text:sub(1, M.CAP) .. M.note(#text - M.CAP), true
end

return M
