-- glsb.answer: what a server answered, checked before it is used. A decoded answer can hold anything (a
-- list of [1, "x", null] where objects were expected, a table where a string was, an id of "..", an id with
-- CR LF in it): read through a reader, a value of the wrong type, or an id outside its grammar, raises a
-- glsb error of the caller's class and stage naming the call and the field, never a Lua error from deep
-- inside a provider ("init.lua:391: attempt to index a number value").
--
--   local answer = require "glsb.answer"
--   local a = answer.reader("E2B list", errors.SandboxStartError, Stage.LIST)
--   for i, s in ipairs(a:list(res.json, "the answer")) do
--     a:object(s, "[" .. i .. "]")
--     local id = a:id(s.sandboxID, "[" .. i .. "].sandboxID")
--     local state = a:string(s.state, "[" .. i .. "].state", true)   -- optional: nil or JSON null -> nil
--   end
--
-- Ids are data, never syntax: answer.ID is the grammar every provider's ids keep to (letters, digits,
-- '_', '-', '.', not first; at most 128), so that an id put into a URL path or a header is one segment or
-- one value whatever the server sent.
local errors = require "glsb.errors"

local M = {}

M.ID = "^[%w][%w_.-]*$"
M.ID_MAX = 128
-- A host name a server hands out for later requests (E2B's domain): labels and dots, then an optional port.
M.HOST = "^[%w][%w.-]*[%w]$"

local cjson_null -- the JSON null of glsb.http's decoder, loaded on first use
local function null()
  if cjson_null == nil then cjson_null = require("cjson.safe").null end
  return cjson_null
end

-- answer.clean(v) -> v, or nil for JSON null.
function M.clean(v)
  if v == null() then return nil end
  return v
end

-- How a bad value is shown: its type and, for scalars, a clipped view of it (no control bytes).
local function shown(v)
  if v == nil then return "missing" end
  if v == null() then return "null" end
  local t = type(v)
  if t == "string" then
    local s = v:sub(1, 40):gsub("[%c\128-\255]", "?")
    return string.format("a string (%q%s)", s, #v > 40 and "..." or "")
  end
  if t == "number" then return string.format("a number (%s)", tostring(math.tointeger(v) or v)) end
  if t == "boolean" then return string.format("a boolean (%s)", tostring(v)) end
  if t == "table" then return (v[1] ~= nil or next(v) == nil) and "a list" or "an object" end
  return "a " .. t
end
M.shown = shown

local Reader = {}
Reader.__index = Reader

-- reader(what, class, stage) -> a reader of one call's answer: what names the call ("E2B list").
function M.reader(what, class, stage)
  return setmetatable({ what = what, class = class, stage = stage }, Reader)
end

-- a:fail(field, value, want): raises "<what>: the answer's <field> is <value>, not <want>".
function Reader:fail(field, value, want)
  errors.raise(self.class, self.stage, string.format("%s: the answer's %s is %s, not %s", self.what, field,
    shown(value), want), { code = "BAD_ANSWER", field = field })
end

-- a:body(res) -> the decoded answer of a glsb.http.json result: res.json, or a failure naming why there is
-- none (not JSON, or refused undecoded: glsb.http's json_error).
function Reader:body(res)
  if res.json ~= nil then return res.json end
  errors.raise(self.class, self.stage, string.format("%s: the answer is not JSON the decoder took%s", self.what,
    res.json_error and (": " .. res.json_error) or ""), { code = "BAD_ANSWER", field = "body" })
end

local function is_list(v)
  if type(v) ~= "table" then return false end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

-- a:object(v, field[, optional]) -> v, a table (a JSON object; an empty one decodes like an empty list).
function Reader:object(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if type(v) ~= "table" or (v[1] ~= nil and is_list(v)) then self:fail(field, v, "an object") end
  return v
end

-- a:list(v, field[, optional]) -> v, a table whose keys are 1..#v.
function Reader:list(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if not is_list(v) then self:fail(field, v, "a list") end
  return v
end

-- a:string(v, field[, optional]) -> v, a string (nil when optional and missing or null).
function Reader:string(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if type(v) ~= "string" then self:fail(field, v, "a string") end
  return v
end

-- a:number(v, field[, optional]) -> v, a number (an integer when it is one).
function Reader:number(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if type(v) ~= "number" or v ~= v then self:fail(field, v, "a number") end
  return math.tointeger(v) or v
end

-- a:boolean(v, field[, optional]) -> v.
function Reader:boolean(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if type(v) ~= "boolean" then self:fail(field, v, "a boolean") end
  return v
end

-- a:id(v, field[, optional]) -> v, a string in answer.ID's grammar.
function Reader:id(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  if type(v) ~= "string" or #v > M.ID_MAX or not v:match(M.ID) then
    self:fail(field, v, string.format("an id (letters, digits, '_', '-', '.' not first, at most %d)", M.ID_MAX))
  end
  return v
end

-- a:host(v, field[, optional]) -> v, a host name (and port) fit for a URL's authority.
function Reader:host(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  local host = type(v) == "string" and (v:match("^(.*):%d+$") or v)
  if not host or #v > 260 or not (host:match(M.HOST) or host:match("^%w$")) then self:fail(field, v, "a host name") end
  return v
end

-- answer.is_id(v) -> true when v is a string in answer.ID's grammar (for values that are not an answer's:
-- a ref's sandbox_id).
function M.is_id(v)
  return type(v) == "string" and #v <= M.ID_MAX and v:match(M.ID) ~= nil
end

return M
