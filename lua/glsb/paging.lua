-- glsb.paging: a list read page by page ends, whatever the server says. A server that always sends a next
-- token (E2B's X-Next-Token, AWS's nextToken) or always says there is a next page (OpenSandbox's
-- hasNextPage) was followed forever: 49,176 page requests in 15 s. Every paged read goes through a pager:
--
--   local pager = paging.new("E2B list", errors.SandboxStartError, Stage.LIST)
--   repeat
--     local items, token = fetch(token)
--     token = pager:next(token, #items)      -- nil: the list has ended (no token, or an empty page)
--   until not token
--   pager:more(has_next_page, #items)        -- the same for numbered pages: true to fetch the next
--
-- A token the server sent before (a loop) and more than MAX_PAGES pages raise `class` at `stage`, naming the
-- list and how many pages were read. An empty page ends the list (a token after nothing is not followed).
local errors = require "glsb.errors"
local codec = require "glsb.codec"

local M = {}

-- 1,000 pages of 100 are 100,000 sandboxes or templates: more than any account lists, fewer requests than a
-- loop can cost.
M.MAX_PAGES = 1000

local Pager = {}
Pager.__index = Pager

-- new(what, class, stage[, max_pages]) -> a pager for one paged read.
function M.new(what, class, stage, max_pages)
  return setmetatable({ what = what, class = class, stage = stage, max = max_pages or M.MAX_PAGES, pages = 0,
    seen = {} }, Pager)
end

local function fail(self, why)
  errors.raise(self.class, self.stage, string.format("%s: %s; stopped after %d pages", self.what, why,
    self.pages), { code = "ENDLESS_LIST", pages = self.pages })
end

local function past_limit(self)
  if self.pages >= self.max then fail(self, string.format("the list has more than %d pages", self.max)) end
end

-- pager:next(token, count) -> the token to fetch next, or nil when the list has ended. count: the items of
-- the page just read. Raises on a token seen before or past MAX_PAGES.
function Pager:next(token, count)
  self.pages = self.pages + 1
  if count == 0 or type(token) ~= "string" or token == "" then return nil end
  past_limit(self)
  local key = codec.sha256(token) -- a server's tokens are kept by digest: a long one costs 64 bytes
  if self.seen[key] then fail(self, "the server sent a next-page token it had sent before (a loop)") end
  self.seen[key] = true
  return token
end

-- pager:more(has_next, count) -> true to fetch the next numbered page. Raises past MAX_PAGES.
function Pager:more(has_next, count)
  self.pages = self.pages + 1
  if count == 0 or has_next ~= true then return false end
  past_limit(self)
  return true
end

return M
