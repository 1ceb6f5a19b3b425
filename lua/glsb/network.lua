-- glsb.network: the `network` create option, one shape for every provider. The local provider enforces
-- it in the sandbox's own network namespace; a remote provider maps it onto its egress rules.
--   network = nil | false                 no network (local: a loopback of its own only)
--   network = true                        the outside: what the host reaches, never the host itself
--   network = { allow = {...}, deny = {...} }   the outside, filtered
-- An entry is an IPv4 address ("203.0.113.7"), an IPv4 CIDR ("203.0.113.0/24"), or, in allow only, a
-- domain name ("pypi.org", "*.example.com"). A destination that matches allow is reachable (allow wins,
-- as E2B's allowOut wins over denyOut); else one that matches deny is not; else it is. So
-- deny = {"0.0.0.0/0"} turns allow into an allowlist. A name cannot be denied: it is reached by its
-- addresses (deny those, or allow the names wanted and deny the rest).

local options = require("glsb.options")

local M = {}

-- The declaration every provider's create schema uses for `network`.
M.OPTION = { "boolean|table",
  "`true`: the outside, never the host; `{allow = {...}, deny = {...}}`: filtered (IPv4 addresses, CIDRs, "
    .. "names in allow; allow wins over deny)", default = "false" }

local SHAPE = {
  allow = { "string_list", "addresses, CIDRs or domain names that are reachable (wins over deny)" },
  deny = { "string_list", "addresses or CIDRs that are not reachable" },
}

-- ipv4(s) -> the 32-bit value of a dotted quad, or nil. Four decimal parts 0..255 without leading zeros
-- ("010" is octal to inet_aton and decimal to others: refused rather than guessed).
function M.ipv4(s)
  if type(s) ~= "string" then return nil end
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  local v = 0
  for _, part in ipairs({ a, b, c, d }) do
    if #part > 3 or (#part > 1 and part:sub(1, 1) == "0") then return nil end
    local n = tonumber(part)
    if n > 255 then return nil end
    v = v * 256 + n
  end
  return v
end

local function dotted(v)
  return string.format("%d.%d.%d.%d", v >> 24 & 255, v >> 16 & 255, v >> 8 & 255, v & 255)
end

-- cidr(s) -> "a.b.c.d/n" with the host bits cleared (an address alone is /32), or nil.
function M.cidr(s)
  if type(s) ~= "string" then return nil end
  local addr, bits = s:match("^([%d.]+)/(%d+)$")
  if not addr then addr, bits = s, "32" end
  local v = M.ipv4(addr)
  local n = #bits <= 2 and tonumber(bits) or nil
  if not v or not n or n > 32 or (#bits > 1 and bits:sub(1, 1) == "0") then return nil end
  local mask = n == 0 and 0 or (0xffffffff << (32 - n)) & 0xffffffff
  return dotted(v & mask) .. "/" .. n
end

-- domain(s) -> the name in lower case without a final dot, or nil: labels of letters, digits and inner
-- hyphens (1..63 bytes, 253 in all, RFC 1123), the first label may be "*" (every name below the rest).
function M.domain(s)
  if type(s) ~= "string" then return nil end
  local name = (s:lower():gsub("%.$", ""))
  if #name == 0 or #name > 253 or M.ipv4(name) or name:match("^[%d.]+$") then return nil end
  local i = 0
  for label in (name .. "."):gmatch("([^.]*)%.") do
    i = i + 1
    local wild = i == 1 and label == "*"
    if not wild and (#label == 0 or #label > 63 or not label:match("^[a-z0-9][a-z0-9-]*$") or label:match("%-$")) then
      return nil
    end
  end
  if name == "*" then return nil end
  return name
end

-- policy(v[, what]) -> nil (no network) or { allow = {cidr...}, allow_domains = {name...}, deny = {cidr...} }
-- ({} lists for true). v is what the caller passed as `network`; a wrong shape or entry is an argument
-- error at the caller's line naming what ("create") and the entry.
function M.policy(v, what)
  what = what or "create"
  if v == nil or v == false then return nil end
  local out = { allow = {}, allow_domains = {}, deny = {} }
  if v == true then return out end
  if type(v) ~= "table" then
    options.arg_error("%s: option 'network' must be a boolean or a table {allow = {...}, deny = {...}}, got %s",
      what, type(v))
  end
  options.check(v, SHAPE, what .. ": network")
  for i, s in ipairs(v.allow or {}) do
    local c = M.cidr(s)
    if c then
      out.allow[#out.allow + 1] = c
    else
      local d = M.domain(s)
      if not d then
        options.arg_error("%s: network.allow[%d] %q is not an IPv4 address, an IPv4 CIDR or a domain name",
          what, i, s)
      end
      out.allow_domains[#out.allow_domains + 1] = d
    end
  end
  for i, s in ipairs(v.deny or {}) do
    local c = M.cidr(s)
    if not c then
      options.arg_error("%s: network.deny[%d] %q is not an IPv4 address or CIDR%s", what, i, s,
        M.domain(s) and " (a name is reached by its addresses: allow the names wanted and deny 0.0.0.0/0)" or "")
    end
    out.deny[#out.deny + 1] = c
  end
  return out
end

return M
