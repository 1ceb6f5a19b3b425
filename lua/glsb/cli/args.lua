-- glsb.cli.args: a command line against a command's declared flags (glsb.cli.commands).
--
-- A flag is declared { name = "timeout", short = "t", arg = "S", type = "number", multi = true, help = "..." }:
-- without `arg` it is a switch (true when given); with it, it takes a value (`--timeout 5`,
-- `--timeout=5`, `-t 5`); `multi` collects every occurrence in order; `type = "number"` checks the
-- value. Flags and arguments may come in any order; `--` ends the flags, and a command declared with
-- `rest = n` takes everything from its (n+1)th argument on as it is (`glsb exec ID ls -la`). An unknown
-- flag is a usage error naming the closest declared one (glsb.options.closest, the edit distance that
-- unknown option keys are answered with).

local options = require "glsb.options"

local M = {}

-- A usage error: the command line is wrong (exit status 2); raised as this table, caught by glsb.cli.
local Usage = {}
Usage.__index = Usage
Usage.__tostring = function(self) return self.message end
M.Usage = Usage

function M.usage(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(setmetatable({ message = msg }, Usage), 0)
end

function M.is_usage(e) return getmetatable(e) == Usage end

-- closest_flag(word, flags) -> "--name" of the declared flag nearest word, or nil.
local function closest_flag(word, flags)
  local known = {}
  for _, f in ipairs(flags) do known[f.name] = true end
  local near = options.closest(word, known)
  return near and ("--" .. near) or nil
end

local function unknown(word, name, flags)
  local near = closest_flag(name, flags)
  M.usage("unknown flag '%s'%s", word, near and (" (did you mean '" .. near .. "'?)") or "")
end

local function take(out, f, value, word)
  if f.arg and f.type == "number" then
    local n = tonumber(value)
    if not n or n ~= n then M.usage("flag '%s' wants a number of %s, got '%s'", word, f.arg, tostring(value)) end
    value = n
  end
  if f.multi then
    local list = out[f.name] or {}
    list[#list + 1] = value
    out[f.name] = list
  else
    out[f.name] = value
  end
end

-- parse(words, cmd) -> flags (name -> value), positionals (array). words: the arguments after the
-- command's name; cmd: the declaration (flags, rest).
function M.parse(words, cmd)
  local flags = cmd.flags or {}
  local by_long, by_short = {}, {}
  for _, f in ipairs(flags) do
    by_long[f.name] = f
    if f.short then by_short[f.short] = f end
  end
  local out, pos = {}, {}
  local i, n = 1, #words
  while i <= n do
    local w = words[i]
    if cmd.rest and #pos >= cmd.rest then
      -- the command's own words, flags and all (`glsb exec ID ls -la`)
      for j = (w == "--" and #pos == cmd.rest and i + 1 or i), n do pos[#pos + 1] = words[j] end
      break
    elseif w == "--" then
      for j = i + 1, n do pos[#pos + 1] = words[j] end
      break
    elseif w:sub(1, 1) == "-" and #w > 1 then
      -- --name, --name=value, --name value; -x, -xvalue, -x=value, -x value
      local long = w:sub(2, 2) == "-"
      local name, value, word
      if long then
        name, value = w:sub(3):match("^([^=]+)=(.*)$")
        name = name or w:sub(3)
        word = "--" .. name
      else
        name, value, word = w:sub(2, 2), w:sub(3), "-" .. w:sub(2, 2)
        if value == "" then value = nil else value = value:gsub("^=", "") end
      end
      local f = (long and by_long or by_short)[name]
      if not f then unknown(w, long and name or w:sub(2), flags) end
      if f.arg then
        if value == nil then
          i = i + 1
          value = words[i]
          if value == nil then M.usage("flag '%s' needs a value (%s)", word, f.arg) end
        end
        take(out, f, value, word)
      elseif value ~= nil then
        M.usage("flag '%s' takes no value%s", word, long and "" or (" (write " .. word .. " -" .. value:sub(1, 1)
          .. ", not " .. w .. ")"))
      else
        out[f.name] = true
      end
    else
      pos[#pos + 1] = w
    end
    i = i + 1
  end
  return out, pos
end

-- pairs_of(list, what) -> {k = v}: "K=V" words (env, metadata) as a map; a word without "=" is a usage
-- error naming the flag.
function M.pairs_of(list, what)
  local map = {}
  for _, kv in ipairs(list or {}) do
    local k, v = kv:match("^([^=]+)=(.*)$")
    if not k then M.usage("%s wants KEY=VALUE, got '%s'", what, kv) end
    map[k] = v
  end
  return map
end

-- value_of(text) -> the Lua value an option word stands for: true/false, a number, JSON for a word
-- starting with { or [, else the text.
function M.value_of(text)
  if text == "true" then return true end
  if text == "false" then return false end
  local n = tonumber(text)
  if n and text:match("^%s*[-+]?[%d.]") then return n end
  local c = text:sub(1, 1)
  if c == "{" or c == "[" then
    local v = require("cjson.safe").decode(text)
    if v == nil then M.usage("option value %s is not JSON", text) end
    return v
  end
  return text
end

return M
