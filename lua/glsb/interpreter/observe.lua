-- glsb.interpreter.observe: what the model is shown of one execution, and how the conversation is kept
-- small. The full stdout, stderr and results stay in the run's steps; the model gets a capped text:
-- head and tail of each stream with the cut stated (as smolagents keeps the first and last halves of 20,000
-- characters: docs/protocols/llm.md §13), the exception's name and value and a
-- trimmed traceback, images as parts (vision) or one placeholder line each.
local M = {}

-- cap(text, limit) -> text of at most about limit characters: its head and tail, and a line in between
-- saying how much was cut and where the whole is.
function M.cap(text, limit)
  if #text <= limit then return text, false end
  local half = limit // 2
  local head, tail = text:sub(1, half), text:sub(-(limit - half))
  return string.format("%s\n[... %d characters cut here; the whole output is in the run's steps ...]\n%s",
    head, #text - #head - #tail, tail), true
end

-- Terminal colours (execd and IPython colour their tracebacks) are noise to a model.
local function plain(s)
  return (s:gsub("\27%[[%d;]*%a", ""))
end

local TRACEBACK_LINES, TRACEBACK_CHARS = 12, 2000

-- The last lines of a traceback (the failing frame and the exception are at its end).
function M.trim_traceback(tb)
  tb = plain(tb):gsub("%s+$", "")
  local lines = {}
  for l in (tb .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  if #lines > TRACEBACK_LINES then
    local kept = { "[... " .. (#lines - TRACEBACK_LINES) .. " lines of the traceback cut ...]" }
    for i = #lines - TRACEBACK_LINES + 1, #lines do kept[#kept + 1] = lines[i] end
    lines = kept
  end
  local s = table.concat(lines, "\n")
  if #s > TRACEBACK_CHARS then s = "..." .. s:sub(-TRACEBACK_CHARS) end
  return s
end

-- The exception of a failed run: name, value, trimmed traceback. From the contract's error_name,
-- error_value and traceback (docs/contract.md §4), filling what is missing from the error text, whose
-- last line is "Name: value" when it is a Python traceback.
function M.exception(r)
  local function str(v) return type(v) == "string" and v ~= "" and v or nil end
  local name, value = str(r.error_name), str(r.error_value)
  local tb = str(r.traceback)
  local text = str(r.error) and plain(r.error):gsub("%s+$", "")
  if text and (not name or not value or not tb) then
    local last = text:match("([^\n]*)$") or text
    local n, v = last:match("^([%w_.]+): (.*)$")
    if n and (not name or n == name or n:match("[%w_]+$") == name) then
      name, value = name or n, value or v
    elseif not name and not value then
      value = last
    end
    if not tb and text:find("\n", 1, true) then tb = text end
  end
  return name, value and plain(value) or nil, tb and M.trim_traceback(tb) or nil
end

local function kib(n)
  if n < 1024 then return n .. " bytes" end
  return string.format("%.1f KiB", n / 1024)
end

-- The size of a PNG from its IHDR chunk (for the placeholder and the result), or nil.
function M.png_size(data)
  if type(data) ~= "string" or #data < 24 or data:sub(1, 8) ~= "\137PNG\r\n\26\n" then return nil end
  local w, h = string.unpack(">I4I4", data, 17)
  return w, h
end

-- placeholder(image) -> the line a model without vision sees for an image.
function M.placeholder(img, why)
  local size = img.width and string.format(", %dx%d", img.width, img.height) or ""
  return string.format("[image %s: %s%s, %s; %s]", img.name, img.mime, size, kib(#img.data),
    why or "shown to the user, not to you")
end

-- format(r, ctx) -> text, is_error. ctx: {limit = characters, images = {placeholder lines}, files =
-- {{path, size}}, status_note}
function M.format(r, ctx)
  local limit = ctx.limit
  local parts = {}
  local failed = r.status ~= "success"
  if failed then parts[#parts + 1] = "status: " .. tostring(r.status) end
  local out = type(r.stdout) == "string" and r.stdout or ""
  local err = type(r.stderr) == "string" and r.stderr or ""
  if out ~= "" then parts[#parts + 1] = "stdout:\n" .. M.cap(plain(out), limit) end
  if err ~= "" then parts[#parts + 1] = "stderr:\n" .. M.cap(plain(err), limit // 2) end
  if type(r.text) == "string" and r.text ~= "" then parts[#parts + 1] = "value: " .. M.cap(r.text, limit // 4) end
  for _, line in ipairs(ctx.images or {}) do parts[#parts + 1] = line end
  if ctx.files and #ctx.files > 0 then
    local names = {}
    for _, f in ipairs(ctx.files) do names[#names + 1] = string.format("%s (%s)", f.path, kib(f.size or 0)) end
    parts[#parts + 1] = "files written: " .. table.concat(names, ", ")
  end
  if failed then
    local name, value, tb = M.exception(r)
    if name or value then
      parts[#parts + 1] = "error: " .. (name and (name .. ": ") or "") .. M.cap(value or "", 2000)
    elseif type(r.error) == "string" and r.error ~= "" then
      parts[#parts + 1] = "error: " .. M.cap(plain(r.error), 2000)
    end
    if tb then parts[#parts + 1] = "traceback:\n" .. tb end
    if r.status == "timeout" then
      parts[#parts + 1] = "note: the run was stopped at its time limit; make the code faster or do less per call"
    end
  end
  if #parts == 0 then parts[1] = "(the code ran and printed nothing)" end
  local text = M.cap(table.concat(parts, "\n"), limit + 4000)
  return text, failed
end

-- The text of a message's content (a string or parts) and its length.
local function text_length(content)
  if type(content) == "string" then return #content end
  local n = 0
  for _, p in ipairs(content or {}) do
    if p.type == "text" then n = n + #p.text else n = n + 1000 end
  end
  return n
end

function M.history_length(messages)
  local n = 0
  for _, m in ipairs(messages) do
    n = n + text_length(m.content)
    for _, c in ipairs(m.tool_calls or {}) do n = n + #(c.arguments_json or "") end
  end
  return n
end

-- compact(messages, keep, chars) -> how many observations were compacted: every observation (a message
-- marked `observation`) but the last `keep` ones becomes its first `chars` characters and a note; its
-- images go (placeholders stay in the text).
function M.compact(messages, keep, chars)
  local obs = {}
  for _, m in ipairs(messages) do
    if m.observation then obs[#obs + 1] = m end
  end
  local done = 0
  for i = 1, #obs - keep do
    local m = obs[i]
    if not m.compacted then
      local text = type(m.content) == "string" and m.content or ""
      if type(m.content) == "table" then
        local t = {}
        for _, p in ipairs(m.content) do if p.type == "text" then t[#t + 1] = p.text end end
        text = table.concat(t, "\n")
      end
      if #text > chars then
        text = text:sub(1, chars) .. string.format("\n[... compacted: %d characters of this older output "
          .. "dropped to keep the conversation short ...]", #text - chars)
      end
      m.content = text
      m.compacted = true
      done = done + 1
    end
  end
  return done
end

return M
