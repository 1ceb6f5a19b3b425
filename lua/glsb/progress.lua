-- glsb.progress: the one line of progress a person at a terminal sees while long work runs (a template
-- build, a package install, an upload or a download of more than a few MB): a step counter
-- ("step 2/5: pip install numpy") or a bar with bytes and rate ("[=====>   ] 12.0/40.0 MiB 8.1 MiB/s").
-- The line is rewritten in place ("\r", erase to the end), at most ten times a second, on stderr; a
-- log line printed through it goes above the line, which is drawn again below it. Off (every method a
-- no-op) when stderr is not a terminal (a pipe, a file, a CI log) unless asked for, so nothing of it
-- reaches output a program reads.
--
--   local line = progress.line{ label = "local template analysis" }   -- enabled: nil = stderr is a tty
--   line:step(2, 5, "pip install numpy")
--   line:transfer(done_bytes, total_bytes)      -- a bar; nothing below progress.BAR_MIN_BYTES
--   line:above("a log line")                    -- printed whole, the progress line kept below it
--   line:done("built in 3.2s")                  -- the last state, then a newline (nil: the line is erased)

local M = {}

-- Transfers smaller than this show no bar: they are over before a person could read one.
M.BAR_MIN_BYTES = 4 * 1024 * 1024
M.INTERVAL = 0.1 -- seconds between two redraws of the same line
local BAR_WIDTH = 24

local Line = {}
Line.__index = Line

local function clock() return require("glsb.loop").now() end

-- progress.tty() -> true, columns | false: whether stderr is a terminal (and how wide it is).
function M.tty()
  return require("glsb.process").isatty(2)
end

-- progress.line(opts) -> a Line. opts.label: what the line is about (shown in brackets first);
-- opts.enabled: true / false, nil = stderr is a terminal; opts.stream: where it goes (default io.stderr).
function M.line(opts)
  opts = opts or {}
  local enabled, columns = opts.enabled, nil
  if enabled == nil then enabled, columns = M.tty() end
  if enabled and columns == nil then
    local _, c = M.tty()
    columns = c
  end
  return setmetatable({ enabled = enabled == true, label = opts.label, stream = opts.stream or io.stderr,
    columns = columns or 80, text = nil, shown_at = nil, started = nil }, Line)
end

-- A Line that draws nothing (callers hold one whatever the terminal).
M.OFF = setmetatable({ enabled = false }, Line)

local function fit(self, s)
  local max = math.max(20, self.columns - 1)
  if #s > max then s = s:sub(1, max - 3) .. "..." end
  return s
end

local function draw(self)
  local s = (self.label and ("[" .. self.label .. "] ") or "") .. (self.text or "")
  self.stream:write("\r\27[K", fit(self, s))
  self.stream:flush()
end

-- line:show(text[, force]): the line's text now; drawn unless it was drawn less than INTERVAL ago.
function Line:show(text, force)
  if not self.enabled then return end
  self.text = text
  local t = clock()
  if not force and self.shown_at and t - self.shown_at < M.INTERVAL then return end
  self.shown_at = t
  draw(self)
end

-- line:set(text): the line's text, drawn with the next show or above (a log line that starts a step
-- goes above the line that names that step).
function Line:set(text)
  if self.enabled then self.text = text end
end

-- line:step(i, n, title): "step i/n: title" (n may be nil when the count is not known).
function Line:step(i, n, title)
  if not self.enabled then return end
  self:show(string.format("step %s%s%s", tostring(i), n and ("/" .. tostring(n)) or "",
    title and (": " .. title) or ""), true)
end

-- bytes(n) -> "12.0 MiB": a size for people.
function M.bytes(n)
  n = tonumber(n) or 0
  if n < 1024 then return string.format("%d B", n) end
  local units = { "KiB", "MiB", "GiB", "TiB" }
  local u = 0
  repeat n, u = n / 1024, u + 1 until n < 1024 or u == #units
  return string.format("%.1f %s", n, units[u])
end

-- line:transfer(done, total[, what]): a bar with bytes and rate; shown only for total >= BAR_MIN_BYTES
-- (total nil or 0: bytes and rate without a bar, once done passes BAR_MIN_BYTES).
function Line:transfer(done, total, what)
  if not self.enabled then return end
  local t = clock()
  self.started = self.started or t
  local big = (total and total >= M.BAR_MIN_BYTES) or ((not total or total == 0) and done >= M.BAR_MIN_BYTES)
  if not big then return end
  local elapsed = t - self.started
  local rate = elapsed > 0 and done / elapsed or 0
  local text
  if total and total > 0 then
    local filled = math.floor(BAR_WIDTH * math.min(done, total) / total)
    text = string.format("%s[%s%s%s] %s / %s  %s/s", what and (what .. " ") or "", string.rep("=", filled),
      filled < BAR_WIDTH and ">" or "", string.rep(" ", math.max(0, BAR_WIDTH - filled - 1)), M.bytes(done),
      M.bytes(total), M.bytes(rate))
  else
    text = string.format("%s%s  %s/s", what and (what .. " ") or "", M.bytes(done), M.bytes(rate))
  end
  self:show(text, total ~= nil and done >= total)
end

-- line:above(text): prints text (a log line) on a line of its own, then the progress line again.
function Line:above(text)
  if not self.enabled then
    return
  end
  self.stream:write("\r\27[K", text, "\n")
  if self.text then draw(self) else self.stream:flush() end
end

-- line:done([text]): the line's last state followed by a newline; with no text the line is erased.
function Line:done(text)
  if not self.enabled then return end
  if text then
    self.text = text
    draw(self)
    self.stream:write("\n")
  elseif self.text then
    self.stream:write("\r\27[K")
  end
  self.stream:flush()
  self.text, self.shown_at, self.started = nil, nil, nil
end

return M
