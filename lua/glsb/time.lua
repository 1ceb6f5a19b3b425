-- glsb.time: wall-clock dates on the wire, read and written one way: ISO 8601 / RFC 3339 timestamps,
-- HTTP dates (RFC 9110 §5.6.7) and the Retry-After header (RFC 9110 §10.2.3). Every date is read as
-- UTC by arithmetic (H. Hinnant's days_from_civil), never through os.time, which reads a table in the
-- machine's local time zone.
local M = {}

local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10,
  Nov = 11, Dec = 12 }

-- Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar.
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

-- epoch(y, mo, d, h, mi, s) -> seconds since 1970-01-01T00:00:00Z, or nil when a field is out of range
-- (a month 13 or a 25th hour is a broken date, not a date to roll over).
local function epoch(y, mo, d, h, mi, s)
  y, mo, d, h, mi, s = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(s)
  if not (y and mo and d and h and mi and s) then return nil end
  if mo < 1 or mo > 12 or d < 1 or d > 31 or h > 23 or mi > 59 or s > 60 then return nil end
  return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s
end

-- wall() -> seconds since the epoch by the machine's real-time clock, with a fraction.
local core
function M.wall()
  if core == nil then
    local ok, c = pcall(require, "glsb.core")
    core = ok and c.realtime_ns and c or false
  end
  if core then return core.realtime_ns() / 1e9 end
  return os.time()
end

-- parse_iso(s) -> epoch seconds (an integer; a fraction of a second is dropped), or nil when s is not
-- an RFC 3339 date-time: "2026-01-02T03:04:05Z", with ".678", with an offset "+01:00" / "-0130", or with
-- no zone at all (read as UTC: what AWS's and E2B's answers mean by it). A lower-case "t"/"z" and a
-- space for the "T" are RFC 3339's too.
function M.parse_iso(s)
  if type(s) ~= "string" then return nil end
  local y, mo, d, h, mi, sec, rest = s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)[Tt ](%d%d):(%d%d):(%d%d)(.*)$")
  local t = y and epoch(y, mo, d, h, mi, sec)
  if not t then return nil end
  rest = rest:gsub("^%.%d+", "")
  if rest == "" or rest == "Z" or rest == "z" then return t end
  local sign, oh, om = rest:match("^([+-])(%d%d):?(%d%d)$")
  if not sign then return nil end
  local off = tonumber(oh) * 3600 + tonumber(om) * 60
  return sign == "+" and t - off or t + off
end

-- parse_http_date(s) -> epoch seconds, or nil. The three forms RFC 9110 §5.6.7 has a recipient accept:
-- IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", the obsolete RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT"
-- (a two-digit year is 19xx or 20xx, whichever is not more than 50 years ahead) and asctime
-- "Sun Nov  6 08:49:37 1994".
function M.parse_http_date(s)
  if type(s) ~= "string" then return nil end
  local d, mon, y, h, mi, sec = s:match("^%s*%a+,%s*(%d%d?)%s+(%a%a%a)%s+(%d%d%d%d)%s+(%d%d):(%d%d):(%d%d)%s+GMT%s*$")
  if not d then
    d, mon, y, h, mi, sec = s:match("^%s*%a+,%s*(%d%d)%-(%a%a%a)%-(%d%d)%s+(%d%d):(%d%d):(%d%d)%s+GMT%s*$")
    if y then
      y = 1900 + tonumber(y)
      local this_year = tonumber(os.date("!%Y"))
      while y < this_year - 49 do y = y + 100 end
    end
  end
  if not d then
    mon, d, h, mi, sec, y = s:match("^%s*%a%a%a%s+(%a%a%a)%s+(%d%d?)%s+(%d%d):(%d%d):(%d%d)%s+(%d%d%d%d)%s*$")
  end
  if not d or not MONTHS[mon] then return nil end
  return epoch(y, MONTHS[mon], d, h, mi, sec)
end

-- iso(epoch_seconds[, ms]) -> "2026-01-02T03:04:05Z" (UTC); with ms = true, milliseconds too
-- ("2026-01-02T03:04:05.678Z", the form JavaScript's toISOString writes). nil gives nil.
function M.iso(t, ms)
  if t == nil then return nil end
  if not ms then return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) end
  local whole = math.floor(t)
  local frac = math.floor((t - whole) * 1000 + 0.5)
  if frac >= 1000 then whole, frac = whole + 1, frac - 1000 end
  return os.date("!%Y-%m-%dT%H:%M:%S", whole) .. string.format(".%03dZ", frac)
end

-- normalize_iso(s) -> s as iso() writes it (UTC, whole seconds), or nil when it is not a date: the form
-- every provider's info() and list() give their times in, whatever the server wrote.
function M.normalize_iso(s)
  return M.iso(M.parse_iso(s))
end

-- retry_after(value[, now]) -> seconds to wait (>= 0), or nil when value is not a Retry-After value:
-- delay-seconds ("120"; a fraction "1.5" is taken as meant, though RFC 9110 has whole seconds) or an
-- HTTP date, counted from `now` (epoch seconds: the answer's own Date
-- header where it has one, so that a server whose clock is off still means what it says; default the
-- machine's clock). A date in the past is 0.
function M.retry_after(value, now)
  if type(value) == "number" then return value >= 0 and value or nil end
  if type(value) ~= "string" then return nil end
  local secs = value:match("^%s*(%d+%.?%d*)%s*$")
  if secs then return tonumber(secs) end
  local at = M.parse_http_date(value)
  if not at then return nil end
  return math.max(0, at - (now or math.floor(M.wall())))
end

return M
