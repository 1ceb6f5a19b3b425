-- glsb.options: declared option schemas, checked strictly. Every public function that takes an options
-- table checks it here: an unknown key is an argument error naming the key and the closest known one
-- ("create: unknown option 'memroy_mb' (did you mean 'memory_mb'?)"), a wrong type names the expected
-- type. The declarations are also the source of the README's option tables (options.markdown).
--
-- A schema maps option names to declarations:
--   name = { "type", "what it does, for the README", default = "shown default" (optional),
--            min = n, max = n (inclusive bounds of a number), integer = true (a whole number),
--            values = { "a", "b" } (the only values accepted), required = true (nil is refused) }
-- type is one of
--   string, boolean, function, table, userdata, number, integer,
--   seconds     a finite number of seconds (not NaN). A timeout or a lease: <= 0 means no limit (M.timeout
--               resolves it); every public timeout is declared so, and no other rule exists
--   positive    a number > 0, not NaN (an interval or a TTL, which cannot be unbounded)
--   count       an integer > 0
--   string_map  a table of string keys to strings or numbers (env-style)
--   string_list an array of strings
--   any         anything (checked by the function itself)
-- or several joined by "|" ("string|table"). Bounds, integer and values apply to the values of the type
-- they make sense for (numbers; values: any) and are shown in the README's type column.

local M = {}

---------------------------------------------------------------------------
-- Argument errors point at the user's line: the first frame outside glsb's own Lua files (lua/glsb,
-- the provider directories), wherever the check happened inside the library.
---------------------------------------------------------------------------

local function dir_of(src) return src:match("^@(.*)/[^/]*$") end

local OWN_DIR = dir_of(debug.getinfo(1, "S").source) -- .../glsb (lua/glsb or share/lua/5.4/glsb)

local function own_prefixes()
  local out = { OWN_DIR and (OWN_DIR .. "/") }
  local reg = package.loaded["glsb.registry"]
  if reg then
    for _, d in ipairs(reg.search_dirs()) do out[#out + 1] = d .. "/" end
  end
  return out
end

local function is_own(source, prefixes)
  if source:sub(1, 1) ~= "@" then return source == "=[C]" end
  local path = source:sub(2)
  for _, p in ipairs(prefixes) do
    if path:sub(1, #p) == p then return true end
  end
  return false
end

-- user_level() -> the `level` for error() that names the first caller outside glsb.
function M.user_level()
  local prefixes = own_prefixes()
  local level = 2
  while true do
    local info = debug.getinfo(level + 1, "S")
    if not info then return 0 end
    if not is_own(info.source, prefixes) then return level end
    level = level + 1
  end
end

-- arg_error(fmt, ...): raises a plain Lua argument error (a string, with the user's position).
function M.arg_error(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(msg, M.user_level())
end

local function levenshtein(a, b)
  local la, lb = #a, #b
  if la == 0 then return lb end
  if lb == 0 then return la end
  local prev = {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    local cur = { [0] = i }
    local ca = a:byte(i)
    for j = 1, lb do
      local cost = ca == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[lb]
end

-- closest(name, known) -> the known name closest to name (edit distance), or nil when none is close.
function M.closest(name, known)
  local best, best_d
  local low = name:lower()
  for k in pairs(known) do
    local kl = k:lower()
    -- a prefix (max_output for max_output_bytes) is as close as one typo
    local d = (#low >= 3 and kl:sub(1, #low) == low) and 1 or levenshtein(low, kl)
    if d < (best_d or math.huge) or (d == best_d and k < best) then best, best_d = k, d end
  end
  if best and best_d <= math.max(2, #name // 3) then return best end
  return nil
end

local function is_array_of_strings(v)
  local n = 0
  for k, x in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or type(x) ~= "string" then return false end
    n = n + 1
  end
  return n == #v
end

local CHECK = {
  string = function(v) return type(v) == "string" end,
  boolean = function(v) return type(v) == "boolean" end,
  ["function"] = function(v) return type(v) == "function" end,
  table = function(v) return type(v) == "table" end,
  userdata = function(v) return type(v) == "userdata" end,
  number = function(v) return type(v) == "number" and v == v end,
  integer = function(v) return math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v)) end,
  -- finite: an infinite timeout is no limit's business (<= 0), and a deadline at infinity is no deadline
  seconds = function(v) return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge end,
  positive = function(v) return type(v) == "number" and v == v and v > 0 end,
  count = function(v) return type(v) == "number" and v == math.floor(v) and v > 0 end,
  string_map = function(v)
    if type(v) ~= "table" then return false end
    for k, x in pairs(v) do
      if type(k) ~= "string" or (type(x) ~= "string" and type(x) ~= "number") then return false end
    end
    return true
  end,
  string_list = function(v) return type(v) == "table" and is_array_of_strings(v) end,
  any = function() return true end,
}

local NAMES = {
  seconds = "a number of seconds", positive = "a number > 0", count = "a positive integer",
  integer = "an integer", string_map = "a table of string keys to strings", string_list = "an array of strings",
  number = "a number", table = "a table", userdata = "a userdata (a file)", string = "a string",
  boolean = "a boolean", ["function"] = "a function", any = "anything",
}

local function type_of(decl)
  if type(decl) == "string" then return decl end
  return decl[1] or decl.type
end

-- expected(decl) -> the words for what a declaration accepts ("a string or a table").
function M.expected(decl)
  local out = {}
  for t in type_of(decl):gmatch("[^|]+") do out[#out + 1] = NAMES[t] or t end
  return table.concat(out, " or ")
end

local function matches(decl, v)
  for t in type_of(decl):gmatch("[^|]+") do
    local check = CHECK[t]
    if not check then error("glsb.options: unknown type '" .. t .. "' in a declaration", 3) end
    if check(v) then return true end
  end
  return false
end

local function describe(v)
  if type(v) == "number" and v ~= v then return "NaN" end
  if type(v) == "string" then return string.format("string %q", #v > 40 and v:sub(1, 40) .. "..." or v) end
  if type(v) == "number" or type(v) == "boolean" then return type(v) .. " " .. tostring(v) end
  return type(v)
end

local function shown_value(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

-- The words for a declaration's bounds ("an integer", ">= 0", "from 0 to 1"), or nil when it has none.
local function bounds(decl)
  if type(decl) ~= "table" then return nil end
  local lo, hi = decl.min, decl.max
  local range
  if lo and hi then range = string.format("from %s to %s", shown_value(lo), shown_value(hi))
  elseif lo then range = ">= " .. shown_value(lo)
  elseif hi then range = "<= " .. shown_value(hi) end
  if decl.integer then return range and ("an integer " .. range) or "an integer" end
  return range
end

local function is_whole(v) return math.type(v) == "integer" or (v == math.floor(v) and v - v == 0) end

-- The first broken constraint of a value of the right type (bounds, integer, values), as words, or nil.
local function constraint(decl, v)
  if type(decl) ~= "table" then return nil end
  if type(v) == "number" then
    if (decl.integer and not is_whole(v)) or (decl.min and v < decl.min) or (decl.max and v > decl.max) then
      return bounds(decl)
    end
  end
  local values = decl.values
  if values then
    for _, x in ipairs(values) do
      if x == v then return nil end
    end
    local words = {}
    for i, x in ipairs(values) do words[i] = shown_value(x) end
    return "one of " .. table.concat(words, ", ")
  end
  return nil
end

-- Per schema, its required names (computed once: a schema is a declaration, never changed after).
local required_of = setmetatable({}, { __mode = "k" })

local function required(schema)
  local list = required_of[schema]
  if list == nil then
    list = {}
    for k, d in pairs(schema) do
      if type(d) == "table" and d.required then list[#list + 1] = k end
    end
    table.sort(list)
    required_of[schema] = list
  end
  return list
end

-- check_value(v, decl, what, name) -> v. The check of one value against one declaration (a positional
-- argument declared like an option: pool:wait_idle's n and timeout); nil is accepted unless required.
function M.check_value(v, decl, what, name)
  if v == nil then
    if type(decl) == "table" and decl.required then
      M.arg_error("%s: option '%s' is required%s", what, name, decl[2] and (": " .. decl[2]) or "")
    end
    return v
  end
  if not matches(decl, v) then
    M.arg_error("%s: option '%s' must be %s, got %s", what, name, M.expected(decl), describe(v))
  end
  local broken = constraint(decl, v)
  if broken then M.arg_error("%s: option '%s' must be %s, got %s", what, name, broken, describe(v)) end
  return v
end

-- check(opts, schema, what) -> opts (or {} for nil). Raises an argument error (arg_error: at the user's
-- line) for a non-table, an unknown key, a value of the wrong type, out of its bounds or not one of its
-- values, or a required key missing. nil values mean "the default".
function M.check(opts, schema, what)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then
    M.arg_error("%s: options must be a table, got %s", what, type(opts))
  end
  for k, v in pairs(opts) do
    if type(k) ~= "string" then
      M.arg_error("%s: option names must be strings, got %s %s", what, type(k), tostring(k))
    end
    local decl = schema[k]
    if decl == nil then
      local near = M.closest(k, schema)
      M.arg_error("%s: unknown option '%s'%s", what, k, near and string.format(" (did you mean '%s'?)", near) or "")
    end
    M.check_value(v, decl, what, k)
  end
  for _, k in ipairs(required(schema)) do
    if opts[k] == nil then M.check_value(nil, schema[k], what, k) end
  end
  return opts
end

-- timeout(value, default) -> seconds > 0, or nil for no limit: the one time rule of every public
-- timeout. nil takes the default (itself nil: no limit); <= 0 is no limit. value is a declared `seconds`
-- (already checked: a number, not NaN).
function M.timeout(value, default)
  if value == nil then value = default end
  if value == nil or value <= 0 then return nil end
  return value
end

-- merge(a, b, ...) -> a new schema with every key of the given schemas (later ones win).
function M.merge(...)
  local out = {}
  for i = 1, select("#", ...) do
    for k, v in pairs(select(i, ...) or {}) do out[k] = v end
  end
  return out
end

-- collect(cls, what[, also]) -> the schema of `what` for a class: the `options[what]` (and
-- `options[also]`) tables declared by the class and each ancestor (`super` chain), nearer ones winning.
-- Cached on the class.
function M.collect(cls, what, also)
  local key = what .. "+" .. tostring(also)
  local cache = rawget(cls, "_option_schemas")
  if not cache then
    cache = {}
    rawset(cls, "_option_schemas", cache)
  end
  if cache[key] then return cache[key] end
  local chain, c = {}, cls
  while c do
    table.insert(chain, 1, c)
    c = rawget(c, "super")
  end
  local merged = {}
  for _, k in ipairs(chain) do
    local decl = rawget(k, "options")
    if decl then
      for name, spec in pairs(also and decl[also] or {}) do merged[name] = spec end
      for name, spec in pairs(decl[what] or {}) do merged[name] = spec end
    end
  end
  cache[key] = merged
  return merged
end

-- own(cls, what[, also]) -> what this class itself declares (not its ancestors): a provider's README.
function M.own(cls, what, also)
  local decl = rawget(cls, "options") or {}
  return M.merge(also and decl[also] or {}, decl[what] or {})
end

-- names(schema) -> sorted array of option names.
function M.names(schema)
  local out = {}
  for k in pairs(schema) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local SHOWN = { positive = "number > 0", count = "integer > 0", string_map = "map of strings",
  string_list = "list of strings" }

local function shown(t)
  local out = {}
  for x in t:gmatch("[^|]+") do out[#out + 1] = SHOWN[x] or x end
  return table.concat(out, " or ")
end

-- markdown(schema) -> a Markdown table (option | type | default | meaning), sorted by name: what the
-- README shows (spec/unit/readme_options_spec.lua keeps them equal).
function M.markdown(schema)
  local lines = { "| option | type | default | meaning |", "|---|---|---|---|" }
  for _, k in ipairs(M.names(schema)) do
    local d = schema[k]
    local doc = type(d) == "table" and (d[2] or d.doc) or ""
    local default = type(d) == "table" and d.default or nil
    local t = shown(type_of(d))
    if type(d) == "table" then
      if d.integer then t = t:gsub("^number", "integer") end
      local range = bounds({ min = d.min, max = d.max })
      if range then t = t .. " " .. range end
      if d.values then
        local words = {}
        for i, x in ipairs(d.values) do words[i] = "`" .. tostring(x) .. "`" end
        t = table.concat(words, " or ")
      end
    end
    local shown_default = default and ("`" .. default .. "`")
      or (type(d) == "table" and d.required and "required") or ""
    lines[#lines + 1] = string.format("| `%s` | %s | %s | %s |", k, t, shown_default, doc)
  end
  return table.concat(lines, "\n")
end

return M
