-- glsb.results: the rich results of a run (r.results), the same on every provider.
--
-- A result bundle is what one display of a value produced (Jupyter's display_data / execute_result):
-- the MIME forms it came with, under short names (results.FORMS: text, html, markdown, svg, png, jpeg,
-- pdf, latex, json, javascript), `is_main_result` (true for the value of the cell's last expression),
-- and `extra` for what a provider adds (E2B's chart under extra.chart, its DataFrame data under
-- extra.data, a MIME type glsb has no name for under extra[mime]). Binary forms (png, jpeg, pdf) are
-- the bytes themselves, decoded once by the adapter; svg and the other text forms are text; json is the
-- decoded value (a table).
--
--   local results = require "glsb.results"       -- also glsb.results
--   results.new{png = bytes, text = "<Figure ...>"} -> a bundle (metatable results.Result)
--   bundle:formats() -> {"text", "png"}            -- the forms it has, in results.FORMS order
--   bundle:best() -> form, mime, data               -- the richest form (results.BEST order)
--   r:images() -> {{mime, data, result, index}}     -- every png / jpeg / svg of r.results, in order
--   results.save(r, dir) -> {paths}                 -- each bundle's best form written to dir
--   tostring(bundle)                                -- one short line, never the bytes
--
-- The cap (results.CAP, 10 MiB per call, counted apart from stdout's and stderr's): a bundle's size is
-- the bytes of its forms as kept (binary forms decoded) plus the JSON text of its json and extra. A
-- bundle that does not fit in what is left is dropped, not kept and not decoded where the adapter can
-- tell before decoding; the call then has results_truncated = true and its results end with a note
-- bundle (results.is_note) saying how many were dropped. At most results.MAX_BUNDLES bundles are kept
-- (their tables cost what their size does not count); the rest are dropped and noted the same way. The
-- status is never changed by the cap.

local cjson = require "cjson.safe"

local M = {}

M.CAP = 10 * 1024 * 1024

-- The forms a bundle can have, in the order E2B's Result lists them, and their MIME types.
M.FORMS = { "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript" }
M.MIME = {
  text = "text/plain", html = "text/html", markdown = "text/markdown", svg = "image/svg+xml",
  png = "image/png", jpeg = "image/jpeg", pdf = "application/pdf", latex = "text/latex",
  json = "application/json", javascript = "application/javascript",
}
M.FORM_OF_MIME = {}
for form, mime in pairs(M.MIME) do M.FORM_OF_MIME[mime] = form end
-- Forms that are bytes (decoded from base64 by the adapter that received them).
M.BINARY = { png = true, jpeg = true, pdf = true }
-- The richest form first: what save() writes and best() returns.
M.BEST = { "png", "jpeg", "svg", "pdf", "html", "markdown", "latex", "json", "javascript", "text" }
M.EXTENSION = { png = "png", jpeg = "jpg", svg = "svg", pdf = "pdf", html = "html", markdown = "md",
  latex = "tex", json = "json", javascript = "js", text = "txt" }
local IMAGE = { png = true, jpeg = true, svg = true }

local Result = {}
Result.__index = Result
M.Result = Result

local function is_form_value(form, v)
  if form == "json" then return v ~= nil and v ~= cjson.null end
  return type(v) == "string"
end

-- results.new(t) -> a bundle from a table of forms, is_main_result, extra. Values of the wrong type are
-- left out (a provider's JSON can hold anything); extra is always a table.
function M.new(t)
  if getmetatable(t) == Result then return t end
  if type(t) ~= "table" then error("glsb.results.new: a table expected, got " .. type(t), 2) end
  local b = setmetatable({ is_main_result = t.is_main_result == true,
    extra = type(t.extra) == "table" and t.extra or {} }, Result)
  for _, form in ipairs(M.FORMS) do
    local v = t[form]
    if is_form_value(form, v) then b[form] = v end
  end
  return b
end

-- results.clean(v) -> v without JSON nulls as values of string keys, at any depth (a chart's
-- x_unit = null is then absent, as nil is in Lua: cjson.null is a truthy userdata); nulls in lists stay
-- (a list keeps its length). Changes v in place.
function M.clean(v)
  if type(v) ~= "table" then return v end
  for k, x in pairs(v) do
    if x == cjson.null then
      if type(k) == "string" then v[k] = nil end
    elseif type(x) == "table" then
      M.clean(x)
    end
  end
  return v
end

-- results.note(text) -> a bundle that is glsb's own word about the results (dropped, not returned by
-- the provider), not something the code displayed: text only, extra.glsb_note = true.
function M.note(text)
  return setmetatable({ is_main_result = false, text = text, extra = { glsb_note = true } }, Result)
end

function M.is_note(b) return type(b) == "table" and type(b.extra) == "table" and b.extra.glsb_note == true end

function Result:formats()
  local out = {}
  for _, form in ipairs(M.FORMS) do
    if self[form] ~= nil then out[#out + 1] = form end
  end
  return out
end

-- bundle:best() -> form, mime, data of its richest form (nil when it has none).
function Result:best()
  for _, form in ipairs(M.BEST) do
    local v = self[form]
    if v ~= nil then return form, M.MIME[form], v end
  end
  return nil
end

local function json_size(v)
  if v == nil then return 0 end
  if type(v) == "string" then return #v end
  local s = cjson.encode(v)
  return s and #s or 0
end

-- bundle:size() -> the bytes it counts against results.CAP.
function Result:size()
  local n = 0
  for _, form in ipairs(M.FORMS) do
    local v = self[form]
    if v ~= nil then n = n + (form == "json" and json_size(v) or #v) end
  end
  if next(self.extra) ~= nil then n = n + json_size(self.extra) end
  return n
end

local function clip(s, n)
  s = s:gsub("[%c]", " ")
  if #s > n then return s:sub(1, n) .. "..." end
  return s
end

Result.__tostring = function(self)
  local parts = {}
  if self.is_main_result then parts[1] = "main" end
  if M.is_note(self) then parts[#parts + 1] = "note" end
  for _, form in ipairs(M.FORMS) do
    local v = self[form]
    if v ~= nil then
      if M.BINARY[form] or form == "svg" then
        parts[#parts + 1] = string.format("%s %d bytes", form, #v)
      elseif form == "json" then
        parts[#parts + 1] = string.format("json %d bytes", json_size(v))
      else
        parts[#parts + 1] = string.format("%s %q", form, clip(v, 60))
      end
    end
  end
  local keys = {}
  for k in pairs(self.extra) do if k ~= "glsb_note" then keys[#keys + 1] = tostring(k) end end
  table.sort(keys)
  if #keys > 0 then parts[#parts + 1] = "extra: " .. table.concat(keys, ", ") end
  return "Result(" .. table.concat(parts, ", ") .. ")"
end

---------------------------------------------------------------------------
-- The cap, applied while results arrive
---------------------------------------------------------------------------

-- The note that ends results that were cut, saying what cut them: why.bytes bundles over the cap of bytes,
-- why.count past MAX_BUNDLES, why.decode the decoder refused (too costly to decode within its budget). why
-- nil: all over the cap of bytes. "[glsb: results truncated at 10485760 bytes and at 10000 results; 3 more
-- results (5000 bytes) dropped]".
function M.note_text(dropped, bytes, cap, why)
  why = why or { bytes = dropped }
  local at = {}
  if (why.bytes or 0) > 0 then at[#at + 1] = string.format("at %d bytes", cap or M.CAP) end
  if (why.count or 0) > 0 then at[#at + 1] = string.format("at %d results", M.MAX_BUNDLES) end
  if (why.decode or 0) > 0 then
    at[#at + 1] = string.format("where the decoder refused %d (too costly to decode)", why.decode)
  end
  return string.format("[glsb: results truncated %s; %d more result%s (%d bytes) dropped]", table.concat(at, " and "),
    dropped, dropped == 1 and "" or "s", bytes)
end

local Collector = {}
Collector.__index = Collector

-- Lists a collector made: already capped (the base class does not count them again).
local capped = setmetatable({}, { __mode = "k" })
function M.is_capped(list) return capped[list] == true end

-- The most bundles kept per call, whatever their size: a bundle's tables cost a few hundred bytes that its
-- size does not count, so half a million empty `result` events (a hostile server's) cost 800 MiB under a
-- cap of bytes alone. Past it bundles are dropped and noted like those over the cap.
M.MAX_BUNDLES = 10000

-- results.collector([cap]) -> a collector for one call: add(bundle) keeps it when it fits, drop(bytes[, why])
-- counts one the adapter did not even decode, finish(r) sets r.results and r.results_truncated.
function M.collector(cap)
  return setmetatable({ cap = cap or M.CAP, size = 0, list = {}, dropped = 0, dropped_bytes = 0, notes = {},
    why = {} }, Collector)
end

-- room() -> bytes still free (0 once MAX_BUNDLES are kept). An adapter that knows a bundle's encoded size
-- can drop it undecoded when even its decoded size cannot fit (base64: 3/4 of the text).
function Collector:room()
  if #self.list >= M.MAX_BUNDLES then return 0 end
  return self.cap - self.size
end

-- drop(bytes[, why]): one bundle dropped; why "bytes" (over the cap), "count" (past MAX_BUNDLES) or "decode"
-- (the decoder refused it); nil: what the collector's state says (count once MAX_BUNDLES are kept).
function Collector:drop(bytes, why)
  self:drops(1, bytes, why or (#self.list >= M.MAX_BUNDLES and "count" or "bytes"))
end

-- drops(count, bytes[, why]): bundles the far side dropped itself (its own cap: why "bytes"), counted and
-- noted like ours.
function Collector:drops(count, bytes, why)
  count = math.tointeger(tonumber(count)) or 0
  if count <= 0 then return end
  why = why or "bytes"
  self.why[why] = (self.why[why] or 0) + count
  self.dropped = self.dropped + count
  local n = tonumber(bytes) or 0
  if n ~= n or n < 0 or n == math.huge then n = 0 end
  self.dropped_bytes = self.dropped_bytes + math.floor(n)
end

-- add(bundle or table) -> true when kept.
function Collector:add(b)
  b = M.new(b)
  local n = b:size()
  if n > self.cap - self.size or #self.list >= M.MAX_BUNDLES then
    self:drop(n, #self.list >= M.MAX_BUNDLES and "count" or "bytes")
    return false
  end
  self.size = self.size + n
  self.list[#self.list + 1] = b
  return true
end

-- note(text): glsb's own word about this call's results (e.g. what the provider cannot return),
-- appended after the bundles; not counted against the cap.
function Collector:note(text) self.notes[#self.notes + 1] = M.note(text) end

function Collector:finish(r)
  r = r or {}
  local list = self.list
  if self.dropped > 0 then
    list[#list + 1] = M.note(M.note_text(self.dropped, self.dropped_bytes, self.cap, self.why))
  end
  for _, n in ipairs(self.notes) do list[#list + 1] = n end
  capped[list] = true
  r.results = list
  r.results_truncated = self.dropped > 0
  return r
end

-- results.cap(list[, cap]) -> list, truncated: a list of bundles (or tables) normalised and capped the
-- same way (the base class's backstop for a hook that returned its results whole).
function M.cap(list, cap)
  if type(list) ~= "table" then list = {} end
  if next(list) == nil then
    capped[list] = true
    return list, false
  end
  local c = M.collector(cap)
  for _, b in ipairs(list) do
    if type(b) == "table" then
      if M.is_note(b) then c.notes[#c.notes + 1] = M.new(b) else c:add(b) end
    end
  end
  local r = c:finish()
  return r.results, r.results_truncated
end

---------------------------------------------------------------------------
-- Helpers over an ExecutionResult
---------------------------------------------------------------------------

-- results.images(r) -> every png, jpeg and svg of r.results in order: {mime, data, result, index}
-- (index: the bundle's position in r.results). Also r:images().
function M.images(r)
  local out = {}
  for i, b in ipairs(type(r) == "table" and type(r.results) == "table" and r.results or {}) do
    for _, form in ipairs(M.FORMS) do
      if IMAGE[form] and type(b) == "table" and type(b[form]) == "string" then
        out[#out + 1] = { mime = M.MIME[form], data = b[form], result = b, index = i }
      end
    end
  end
  return out
end

-- results.save(r, dir) -> list of the paths written: each bundle's best form to dir/result-<i>.<ext>
-- (i: its position in r.results; notes are not written). dir must exist. A file that cannot be written
-- raises a CodeInterpreterError with stage "files" naming it; what was written before stays.
function M.save(r, dir)
  if type(r) ~= "table" or type(r.results) ~= "table" then
    error("glsb.results.save: an ExecutionResult (with results) expected, got " .. type(r), 2)
  end
  if type(dir) ~= "string" or dir == "" then error("glsb.results.save: dir must be a non-empty string", 2) end
  local paths = {}
  for i, b in ipairs(r.results) do
    if type(b) == "table" and not M.is_note(b) then
      local form, _, data = Result.best(M.new(b))
      if form then
        if form == "json" and type(data) ~= "string" then data = cjson.encode(data) or "null" end
        local path = string.format("%s/result-%d.%s", dir:gsub("/+$", ""), i, M.EXTENSION[form])
        local f, err = io.open(path, "wb")
        local ok, werr = f ~= nil, err
        if f then
          ok, werr = f:write(data)
          local closed, cerr = f:close()
          ok, werr = ok and closed, werr or cerr
        end
        if not ok then
          local errors = require "glsb.errors"
          -- io.open's message starts with the path, which the sentence names already
          local why = tostring(werr)
          if why:sub(1, #path + 2) == path .. ": " then why = why:sub(#path + 3) end
          errors.raise(errors.CodeInterpreterError, "files",
            string.format("glsb.results.save: cannot write %s: %s", path, why))
        end
        paths[#paths + 1] = path
      end
    end
  end
  return paths
end

return M
