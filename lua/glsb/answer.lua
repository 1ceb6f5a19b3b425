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
--     local id = a:id(s.sandboxID, "[" .. i .. "].sandboxID", api.IDS.sandbox)
--     local state = a:string(s.state, "[" .. i .. "].state", true)   -- optional: nil or JSON null -> nil
--   end
--
-- Ids are data, never syntax. Each provider declares the grammar of each kind of id it is handed
-- (answer.grammar: E2B's sandbox ids are lowercase letters and digits, OpenSandbox's are UUIDs, AgentCore's
-- sessions [0-9a-zA-Z]{1,40}; docs/protocols/<provider>.md says where each comes from upstream), and an id is
-- checked against it where it arrives: a create or connect answer, a list entry, a ref given to connect or
-- kill, an id or name the user passes. An id put into a URL path or a header is then one segment or one
-- value whatever the server sent, and one the provider never makes is refused with a clear error before
-- anything is sent with it. answer.ANY is the grammar of a provider that declares none.
local errors = require "glsb.errors"

local M = {}

M.ID = "^[%w][%w_.-]*$"
M.ID_MAX = 128
-- A UUID as Python's str(uuid4()) and Go's uuid.String() write it: 8-4-4-4-12 lowercase hex digits.
local function hex(n) return ("[0-9a-f]"):rep(n) end
M.UUID = "^" .. hex(8) .. "%-" .. hex(4) .. "%-" .. hex(4) .. "%-" .. hex(4) .. "%-" .. hex(12) .. "$"
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

---------------------------------------------------------------------------
-- Grammars of ids
---------------------------------------------------------------------------

local Grammar = {}
Grammar.__index = Grammar

-- answer.grammar{what, says, max, pattern | test, source[, short]} -> a grammar of one kind of id:
--   what    its name, with an article ("an E2B sandbox id")
--   says    the rule in words ("lowercase letters and digits")
--   max     the longest one accepted (bytes); an id is never empty
--   pattern a Lua pattern, anchored, the whole id must match; or test(s) -> true for a function of it
--   source  where the rule is written down (docs/protocols/<provider>.md §N, which cites upstream)
--   short   optional, for ids a user passes: short(s) -> the id the provider means by an older spelling of
--           it that it still accepts (E2B's "<sandboxID>-<clientID>"), or nil
function M.grammar(g)
  assert(type(g.what) == "string" and type(g.says) == "string" and math.type(g.max) == "integer",
    "answer.grammar: what, says and max are required")
  assert(type(g.pattern) == "string" or type(g.test) == "function", "answer.grammar: a pattern or a test")
  return setmetatable(g, Grammar)
end

-- g:holds(v) -> true when v is a string in the grammar.
function Grammar:holds(v)
  if type(v) ~= "string" or v == "" or #v > self.max then return false end
  if self.pattern then return v:match(self.pattern) ~= nil end
  return self.test(v) == true
end

-- g:describe() -> "an E2B sandbox id (lowercase letters and digits, at most 64; docs/protocols/e2b.md §1)".
function Grammar:describe()
  return string.format("%s (%s, at most %d%s)", self.what, self.says, self.max,
    self.source and ("; " .. self.source) or "")
end

-- g:given(v) -> the id a user gave, as the provider names it (an older spelling shortened), or nil when v
-- is none of its ids.
function Grammar:given(v)
  if self:holds(v) then return v end
  if self.short and type(v) == "string" and #v <= 2 * self.max then
    local s = self.short(v)
    if self:holds(s) then return s end
  end
  return nil
end

-- The grammar of a provider that declares none: every provider's ids keep to it.
M.ANY = M.grammar { what = "an id", says = "letters, digits, '_', '-', '.' not first", max = M.ID_MAX,
  pattern = M.ID }

-- answer.uuid(what, source) -> the grammar of ids that are UUIDs.
function M.uuid(what, source)
  return M.grammar { what = what, says = "a UUID, 8-4-4-4-12 lowercase hex digits", max = 36, pattern = M.UUID,
    source = source }
end

-- answer.given(grammar, v, what) -> the id, or raises an argument error at the caller's line saying which
-- grammar v is not in: for ids the user passes (a ref's sandbox_id, a template name). what names the value
-- ("connect: ref.sandbox_id").
function M.given(grammar, v, what)
  local id = (grammar or M.ANY):given(v)
  if id then return id end
  require("glsb.options").arg_error("%s is %s, not %s", what, shown(v), (grammar or M.ANY):describe())
end

---------------------------------------------------------------------------
-- Readers
---------------------------------------------------------------------------

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

-- a:id(v, field, grammar[, optional]) -> v, a string in the grammar (answer.grammar; nil: answer.ANY).
function Reader:id(v, field, grammar, optional)
  if optional and M.clean(v) == nil then return nil end
  grammar = grammar or M.ANY
  if not grammar:holds(v) then self:fail(field, v, grammar:describe()) end
  return v
end

-- a:host(v, field[, optional]) -> v, a host name (and port) fit for a URL's authority.
function Reader:host(v, field, optional)
  if optional and M.clean(v) == nil then return nil end
  local host = type(v) == "string" and (v:match("^(.*):%d+$") or v)
  if not host or #v > 260 or not (host:match(M.HOST) or host:match("^%w$")) then self:fail(field, v, "a host name") end
  return v
end

-- answer.is_id(v[, grammar]) -> true when v is a string in the grammar (nil: answer.ANY).
function M.is_id(v, grammar)
  return (grammar or M.ANY):holds(v)
end

return M
