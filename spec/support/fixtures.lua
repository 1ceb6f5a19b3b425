-- spec/support/fixtures.lua: the third-party test data kept in spec/fixtures/ (where each set comes from
-- and its licence: spec/fixtures/NOTICE). A set that is missing or empty is an error when the spec file
-- loads, so a checkout without it fails loudly instead of running zero cases.
local M = {}

-- spec/fixtures, found from this file's own path (spec/support/fixtures.lua), wherever busted runs from.
M.ROOT = (debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or ".") .. "/../fixtures"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- dir(set) -> the folder of one set ("sigv4", "eventstream"); raises when it is not there.
function M.dir(set)
  local d = M.ROOT .. "/" .. set
  local ok = os.execute("test -d " .. quote(d))
  if not ok then error("test fixture set '" .. set .. "' is missing: no folder " .. d .. " (see spec/fixtures/NOTICE)", 2) end
  return d
end

-- files(set, under) -> sorted paths relative to the set's folder of every file below `under` (default:
-- the whole set); raises when there are none.
function M.files(set, under)
  local d = M.dir(set) .. (under and ("/" .. under) or "")
  local p = io.popen("cd " .. quote(d) .. " 2>/dev/null && find . -type f | LC_ALL=C sort")
  local out = {}
  for line in p:lines() do out[#out + 1] = line:sub(3) end
  p:close()
  if #out == 0 then error("test fixture set '" .. set .. "' has no files under " .. d, 2) end
  return out
end

-- read(set, rel) -> the bytes of one file of a set; raises when it cannot be read.
function M.read(set, rel)
  local path = M.dir(set) .. "/" .. rel
  local f, err = io.open(path, "rb")
  if not f then error("test fixture " .. path .. " cannot be read: " .. tostring(err), 2) end
  local s = f:read("a")
  f:close()
  return s
end

return M
