-- Every document a tracked file cites is in the repository: a comment or a page that says where a rule
-- or a wire fact is written cites a path from the repository root (`docs/protocols/e2b.md §2.1`), and
-- that path and section exist. scripts/check-paths (make lint) refuses paths that leave the checkout;
-- this spec checks that the ones inside it lead somewhere. #unit
--
-- What counts as a citation:
--   docs/... and spec/fixtures/...      any path below them (a file or a folder)
--   <top>/.../NAME.md                   a page under one of the repository's top-level folders
--   NAME.md                             a page named alone: some tracked page has that name
--   <page> §N[.M][, §K ...]             each section is a heading "N. ..." / "N.M ..." of that page
-- Third-party data (spec/fixtures/*/) is not read; generated outputs (git-ignored, bench/results/) may be
-- cited before they exist.

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  local ok = p:close()
  return out, ok
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local files, in_git = lines_of("git ls-files 2>/dev/null")
local tracked, page_names, top_dirs = {}, {}, {}
for _, f in ipairs(files) do
  tracked[f] = true
  local dir = f:match("^(.*)/[^/]*$")
  while dir do
    tracked[dir] = true
    dir = dir:match("^(.*)/[^/]*$")
  end
  if f:match("%.md$") then page_names[f:match("[^/]+$")] = true end
  local top = f:match("^([^/]+)/")
  if top then top_dirs[top] = true end
end

-- Files read: every tracked text file but third-party data, the lock file, and the two files that
-- state the rules (this spec's examples, scripts/check-paths' list of refused names).
local SELF = { ["spec/unit/citations_spec.lua"] = true, ["scripts/check-paths"] = true }
local function scanned(f)
  return not f:match("^spec/fixtures/[^/]+/") and not f:match("package%-lock%.json$") and not SELF[f]
end

local PATH_CHAR = "[%w_./%-]"

-- citations(text) -> array of {path, sections = {...}, line}.
local function citations(text)
  local out = {}
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local pos = 1
    while true do
      local s, e = line:find("[%w_][%w_./%-]*%.?[%w_]*", pos)
      if not s then break end
      local word = line:sub(s, e):gsub("[./]+$", "")
      local before = s > 1 and line:sub(s - 1, s - 1) or ""
      pos = e + 1
      -- a path inside a longer one, a URL, another repository's path (owner/repo:path) or a member access
      local inside = before:match(PATH_CHAR) or before == ":" or before == "@" or before == "$"
      local top = word:match("^([^/]+)/")
      local cited
      if not inside then
        if word:match("^docs/") or word:match("^spec/fixtures/") then
          cited = word
        elseif top and top_dirs[top] and word:match("%.md$") then
          cited = word
        elseif not top and word:match("^[%w_-][%w_-]+%.md$") then
          cited = "NAME:" .. word
        end
      end
      if cited then
        local sections = {}
        local tail = line:sub(e + 1):match("^[`'\"%)]?[%s,]*(§[§%d%.%s,%-–]*)")
        if tail then
          for sec in tail:gmatch("§%s*([%d%.]+)") do sections[#sections + 1] = (sec:gsub("%.+$", "")) end
        end
        out[#out + 1] = { path = cited, sections = sections, line = n }
      end
    end
  end
  return out
end

local function has_section(page, sec)
  local num = sec:gsub("%.", "%%.")
  for line in (page .. "\n"):gmatch("([^\n]*)\n") do
    -- "## 2. Title", "### 2.1 Title" or "## §2.1 Title" (§ is two bytes: no "?" after it)
    local rest = line:match("^#+%s+" .. num .. "(.*)$") or line:match("^#+%s+§" .. num .. "(.*)$")
    if rest and (rest == "" or rest == "." or rest:match("^%.?%s")) then return true end
  end
  return false
end

describe("citations of documents #unit", function()
  if not in_git or #files == 0 then
    pending("not a git checkout: the tracked files are listed with git ls-files")
    return
  end

  it("finds citations to check (docs/contract.md and docs/protocols/ are cited)", function()
    local seen = {}
    for _, f in ipairs(files) do
      if scanned(f) then
        for _, c in ipairs(citations(read(f) or "")) do seen[c.path] = true end
      end
    end
    assert.is_true(seen["docs/contract.md"], "no file cites docs/contract.md")
    for _, p in ipairs({ "e2b", "opensandbox", "bedrock", "otlp" }) do
      assert.is_true(seen["docs/protocols/" .. p .. ".md"], "no file cites docs/protocols/" .. p .. ".md")
    end
  end)

  it("every cited path and section exists in the repository", function()
    local missing, ignored_candidates = {}, {}
    for _, f in ipairs(files) do
      local text = scanned(f) and read(f)
      if text and not text:find("\0", 1, true) then
        for _, c in ipairs(citations(text)) do
          local where = f .. ":" .. c.line .. ": "
          if c.path:match("^NAME:") then
            local name = c.path:sub(6)
            if not page_names[name] then missing[#missing + 1] = where .. name .. " (no tracked page has that name)" end
          elseif not tracked[c.path] then
            ignored_candidates[#ignored_candidates + 1] = { where = where, path = c.path }
          elseif #c.sections > 0 then
            local page = read(c.path) or ""
            for _, sec in ipairs(c.sections) do
              if not has_section(page, sec) then
                missing[#missing + 1] = where .. c.path .. " §" .. sec .. " (no such heading)"
              end
            end
          end
        end
      end
    end
    -- a generated output (git-ignored) may be cited before any run made it
    for _, c in ipairs(ignored_candidates) do
      if not os.execute("git check-ignore -q --no-index '" .. c.path:gsub("'", "") .. "' 2>/dev/null") then
        missing[#missing + 1] = c.where .. c.path .. " (not in the repository)"
      end
    end
    assert.are.same({}, missing)
  end)

  it("reads a citation the way this spec says", function()
    local c = citations("-- facts: docs/protocols/e2b.md §2.1 - §2.4; see SOMEPAGE.md and `lua/glsb/PROVIDERS.md`.\n"
      .. "x = a.docs/b; e2b-dev/infra:docs/ARCHITECTURE.md; https://h/docs/z.md; c.md")
    local got = {}
    for _, x in ipairs(c) do got[#got + 1] = x.path .. (#x.sections > 0 and (" " .. table.concat(x.sections, ",")) or "") end
    assert.are.same({ "docs/protocols/e2b.md 2.1,2.4", "NAME:SOMEPAGE.md", "lua/glsb/PROVIDERS.md" }, got)
    assert.is_true(has_section("# t\n### 2.1 Connect\n", "2.1"))
    assert.is_true(has_section("## 4. Results\n", "4"))
    assert.is_false(has_section("## 4.1 x\n", "4"))
    assert.is_false(has_section("## 12. x\n", "1"))
  end)
end)
