-- glsb.mcp.json: the JSON of the MCP server's wire, one compact message per line.
--
-- Decoding is cjson's (a private instance: its depth limit is not the rest of the process's). Encoding is
-- done here, with cjson only for strings, because cjson 2.1 cannot say "empty array" (an empty table is
-- always {}), prints integers with 14 significant digits (a request id of 2^53 would come back changed),
-- and passes bytes that are not UTF-8 through (a sandbox's output often has some; a strict client then
-- rejects the whole line). Here:
--   M.array(t)   marks t as a JSON array (also when empty); a table with t[1] ~= nil is one too
--   M.null       JSON null (cjson's lightuserdata)
--   objects are written with their keys sorted, so the same value is always the same bytes (tools/list
--   stays byte-identical between runs: clients cache prompts on it)
local cjson = require "cjson.safe"
local repair_utf8 = require("glsb.codec").repair_utf8

local M = {}

M.null = cjson.null
M.MAX_DEPTH = 64

local decoder = cjson.new()
decoder.decode_max_depth(M.MAX_DEPTH) -- tool arguments are shallow; a deep document is refused, not recursed into

local ARRAY = { __name = "glsb.mcp.json.array" }

function M.array(t) return setmetatable(t or {}, ARRAY) end

local encode_string = cjson.encode

local function number(v)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  local i = math.tointeger(v)
  if i then return string.format("%d", i) end
  local short = string.format("%.15g", v)
  if tonumber(short) == v then return short end
  return string.format("%.17g", v)
end

local function put(v, out, depth)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = encode_string(repair_utf8(v))
  elseif t == "number" then
    out[#out + 1] = number(v)
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif v == nil or v == cjson.null then
    out[#out + 1] = "null"
  elseif t == "table" then
    if depth > 100 then error("glsb.mcp.json: value nested too deep", 0) end
    if getmetatable(v) == ARRAY or v[1] ~= nil then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        put(v[i], out, depth + 1)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" then error("glsb.mcp.json: an object key is a " .. type(k), 0) end
        keys[#keys + 1] = k
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(repair_utf8(k))
        out[#out + 1] = ":"
        put(v[k], out, depth + 1)
      end
      out[#out + 1] = "}"
    end
  else
    error("glsb.mcp.json: cannot encode a " .. t, 0)
  end
end

-- encode(v) -> one line of compact JSON (no raw newline: cjson escapes them in strings).
function M.encode(v)
  local out = {}
  put(v, out, 0)
  return table.concat(out)
end

-- How many '[' and '{' a line holds, stopping once past limit: a small document of many empty containers
-- ("[[],[],...]") costs tens of bytes of Lua memory per byte of JSON, so such a line is refused before
-- it is decoded.
local function containers(line, limit)
  local n, pos = 0, 1
  while true do
    local at = line:find("[%[{]", pos)
    if not at then return n end
    n = n + 1
    if n > limit then return n end
    pos = at + 1
  end
end

M.MAX_CONTAINERS = 100000

-- decode(line) -> value | nil, reason.
function M.decode(line)
  if #line > 65536 and containers(line, M.MAX_CONTAINERS) > M.MAX_CONTAINERS then
    return nil, string.format("more than %d arrays and objects in one message", M.MAX_CONTAINERS)
  end
  return decoder.decode(line)
end

return M
