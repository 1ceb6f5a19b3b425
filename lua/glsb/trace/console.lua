-- glsb.trace.console: OTEL_TRACES_EXPORTER=console. One readable line per finished span, written when
-- the span ends (the specification pairs the console exporter with the simple, synchronous processor),
-- for someone debugging a script:
--
--   glsb.trace: glsb.sandbox.execute_code 12.3ms unset trace=5b8e… span=eee1… parent=51a2…
--     glsb.provider=local glsb.execution.status=success
--
-- (one line; shown wrapped here). Values are quoted when they hold spaces; newlines are escaped.
local M = {}

local function value_text(v)
  if type(v) == "table" then
    local parts = {}
    for i = 1, #v do parts[i] = tostring(v[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local s = tostring(v):gsub("\n", "\\n"):gsub("\r", "\\r")
  if s:find("[%s\"]") or s == "" then s = '"' .. s:gsub('"', '\\"') .. '"' end
  return s
end

-- line(span) -> the text for one span (without the newline).
function M.line(span)
  local ms = (span.end_ns - span.start_ns) / 1e6
  local out = { "glsb.trace:", span.name, string.format("%.1fms", ms), span.status_code }
  if span.status_code == "error" and span.status_message then
    out[#out] = "error(" .. value_text(span.status_message) .. ")"
  end
  out[#out + 1] = "trace=" .. span.trace_id
  out[#out + 1] = "span=" .. span.span_id
  if span.parent_span_id then out[#out + 1] = "parent=" .. span.parent_span_id end
  if span.kind ~= "internal" then out[#out + 1] = "kind=" .. span.kind end
  for _, k in ipairs(span.attribute_keys) do out[#out + 1] = k .. "=" .. value_text(span.attributes[k]) end
  for _, e in ipairs(span.events or {}) do
    local attrs = {}
    for _, k in ipairs(e.attribute_keys) do attrs[#attrs + 1] = k .. "=" .. value_text(e.attributes[k]) end
    out[#out + 1] = "event=" .. e.name .. (#attrs > 0 and ("{" .. table.concat(attrs, " ") .. "}") or "")
  end
  return table.concat(out, " ")
end

local Console = {}
Console.__index = Console

-- new(file) -> a span processor writing to file (io.stderr by default; anything with :write).
function M.new(file)
  return setmetatable({ file = file or io.stderr, stats = { exported = 0, dropped = 0 } }, Console)
end

function Console:on_end(span)
  -- what leaves the process: scrubbed of the secrets glsb knows (glsb.secrets), whatever set the attributes
  local ok = pcall(self.file.write, self.file, require("glsb.secrets").scrub(M.line(span)), "\n")
  if ok then self.stats.exported = self.stats.exported + 1 else self.stats.dropped = self.stats.dropped + 1 end
end

function Console:force_flush()
  if self.file.flush then pcall(self.file.flush, self.file) end
  return true
end

Console.shutdown = Console.force_flush

return M
