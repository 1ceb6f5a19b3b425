-- glsb.time: the one reader and writer of wire dates (RFC 3339, HTTP dates, Retry-After), in UTC
-- whatever the machine's time zone.
local time = require "glsb.time"

describe("glsb.time #unit", function()
  it("reads RFC 3339 date-times as UTC epoch seconds", function()
    assert.are.equal(0, time.parse_iso("1970-01-01T00:00:00Z"))
    assert.are.equal(951782400, time.parse_iso("2000-02-29T00:00:00Z"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16T10:00:00Z"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16T10:00:00.123Z"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16T12:00:00+02:00"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16T08:30:00-0130"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16t10:00:00z"))
    assert.are.equal(1752660000, time.parse_iso("2025-07-16 10:00:00"), "no zone: UTC")
    assert.are.equal(-86400, time.parse_iso("1969-12-31T00:00:00Z"))
  end)

  it("refuses what is not a date-time, or a field out of range", function()
    for _, s in ipairs({ "yesterday", "", "2025-07-16", "2025-13-01T00:00:00Z", "2025-07-16T24:00:00Z",
      "2025-07-16T10:61:00Z", "2025-07-16T10:00:00 Z", "2025-07-16T10:00:00+2", "2025-07-16T10:00:00Zjunk" }) do
      assert.is_nil(time.parse_iso(s), s)
    end
    assert.is_nil(time.parse_iso(nil))
    assert.is_nil(time.parse_iso(1752660000))
  end)

  it("does not depend on the machine's time zone (os.time reads tables as local time)", function()
    local script = [[package.path = "lua/?.lua;" .. package.path
      local t = require "glsb.time"
      io.write(t.parse_iso("2025-01-02T03:04:05.678Z"), " ", t.parse_http_date("Thu, 02 Jan 2025 03:04:05 GMT"))]]
    local outs = {}
    for _, tz in ipairs({ "UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham" }) do
      local p = io.popen("TZ=" .. tz .. " lua5.4 -e '" .. script .. "'")
      outs[#outs + 1] = p:read("a")
      p:close()
    end
    assert.are.same({ "1735787045 1735787045", "1735787045 1735787045", "1735787045 1735787045",
      "1735787045 1735787045" }, outs)
  end)

  it("reads the three HTTP date forms", function()
    assert.are.equal(784111777, time.parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"))
    assert.are.equal(784111777, time.parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"))
    assert.are.equal(784111777, time.parse_http_date("Sun Nov  6 08:49:37 1994"))
    assert.are.equal(1796105666, time.parse_http_date("Tue, 01 Dec 2026 06:14:26 GMT"))
    for _, s in ipairs({ "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT", "06 Nov 1994", "soon" }) do
      assert.is_nil(time.parse_http_date(s), s)
    end
  end)

  it("writes ISO 8601 UTC, with milliseconds when asked", function()
    assert.are.equal("2025-07-16T10:00:00Z", time.iso(1752660000))
    assert.are.equal("2025-07-16T10:00:00Z", time.iso(1752660000.9), "whole seconds: floored")
    assert.are.equal("2025-07-16T10:00:00.123Z", time.iso(1752660000.123, true))
    assert.are.equal("2025-07-16T10:00:01.000Z", time.iso(1752660000.9996, true), "a rounded 1000 ms carries")
    assert.is_nil(time.iso(nil))
    assert.are.equal("2025-07-16T10:00:00Z", time.normalize_iso("2025-07-16T12:00:00.5+02:00"))
    assert.is_nil(time.normalize_iso("later"))
  end)

  it("reads Retry-After as seconds or as a date counted from the answer's own clock", function()
    assert.are.equal(120, time.retry_after("120"))
    assert.are.equal(0, time.retry_after(" 0 "))
    local now = time.parse_http_date("Tue, 01 Dec 2026 06:14:26 GMT")
    assert.are.equal(34, time.retry_after("Tue, 01 Dec 2026 06:15:00 GMT", now))
    assert.are.equal(0, time.retry_after("Tue, 01 Dec 2026 06:00:00 GMT", now), "a date past is now")
    local far = time.retry_after("Fri, 31 Dec 2100 23:59:59 GMT")
    assert.is_true(far > 365 * 86400 * 50, tostring(far))
    assert.are.equal(1.5, time.retry_after("1.5"))
    for _, v in ipairs({ "-1", ".5", "soon", "" }) do assert.is_nil(time.retry_after(v), v) end
    assert.is_nil(time.retry_after(nil))
  end)

  it("wall() is the real-time clock, with a fraction", function()
    local w = time.wall()
    assert.is_true(math.abs(w - os.time()) <= 1.5, tostring(w))
  end)
end)
