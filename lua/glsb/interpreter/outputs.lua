-- glsb.interpreter.outputs: the files a run created or changed, found from the sandbox's filesystem (never
-- from the model's text): the output places are listed through sb.files before the first step and after
-- each one; what is new, or has a new size, is the run's output. Downloaded at the end, capped in count
-- and bytes.
local log = require "glsb.log"

local M = {}

M.DEPTH = 3           -- levels below each output place
M.MAX_ENTRIES = 2000  -- entries one listing keeps (a run that writes a million files costs this much)

-- Names that are machinery, not output: hidden files and folders (matplotlib's font cache, pip's), and
-- Python's bytecode caches.
local function ignored(name)
  return name:sub(1, 1) == "." or name == "__pycache__"
end

-- snapshot(sb, dirs, timeout) -> {path = {size, type}}, count. A place that does not exist is empty; one
-- that cannot be listed is logged once and skipped.
function M.snapshot(sb, dirs, timeout, warned)
  local seen, n = {}, 0
  local function walk(dir, depth)
    if n >= M.MAX_ENTRIES then return end
    local ok, entries = pcall(sb.files.list, sb.files, dir, { timeout = timeout })
    if not ok then
      local loop = package.loaded["glsb.loop"]
      if loop and loop.is_cancelled(entries) then error(entries, 0) end
      local reason = type(entries) == "table" and rawget(entries, "reason")
      if reason ~= "not_found" and depth == 0 and not warned[dir] then
        warned[dir] = true
        log.warn(string.format("glsb.interpreter: cannot list %s (its output files are not collected): %s", dir,
          tostring(entries)))
      end
      return
    end
    for _, e in ipairs(entries) do
      if n >= M.MAX_ENTRIES then return end
      if not ignored(e.name or "") then
        local path = (dir:gsub("/+$", "")) .. "/" .. e.name
        if e.type == "dir" then
          if depth + 1 < M.DEPTH then walk(path, depth + 1) end
        elseif e.type == "file" then
          seen[path] = { size = e.size or 0 }
          n = n + 1
        end
      end
    end
  end
  for _, d in ipairs(dirs) do walk(d, 0) end
  return seen, n
end

-- diff(before, after) -> sorted array of {path, size, created} for files new in after or of a new size.
function M.diff(before, after)
  local out = {}
  for path, e in pairs(after) do
    local b = before[path]
    if not b or b.size ~= e.size then out[#out + 1] = { path = path, size = e.size, created = b == nil } end
  end
  table.sort(out, function(a, b) return a.path < b.path end)
  return out
end

-- download(sb, paths, sizes, caps) -> files, skipped. paths in the order the run first wrote them; each
-- file a SandboxFile (filename = the base name) with `path`; skipped: {path, size, reason}.
function M.download(sb, paths, sizes, caps)
  local models = require "glsb.models"
  local files, skipped, total = {}, {}, 0
  for _, path in ipairs(paths) do
    local size = sizes[path] or 0
    if #files >= caps.max_files then
      skipped[#skipped + 1] = { path = path, size = size, reason = "max_files" }
    elseif size > caps.max_file_bytes then
      skipped[#skipped + 1] = { path = path, size = size, reason = "max_file_bytes" }
    elseif total + size > caps.max_output_bytes then
      skipped[#skipped + 1] = { path = path, size = size, reason = "max_output_bytes" }
    else
      local ok, data = pcall(sb.files.read, sb.files, path, { timeout = caps.timeout })
      if ok and type(data) == "string" and #data <= caps.max_file_bytes then
        local f = models.SandboxFile.from_bytes(data, path:match("[^/]+$"))
        f.path = path
        files[#files + 1] = f
        total = total + #data
      else
        local loop = package.loaded["glsb.loop"]
        if not ok and loop and loop.is_cancelled(data) then error(data, 0) end
        skipped[#skipped + 1] = { path = path, size = size,
          reason = ok and "max_file_bytes" or ("download failed: " .. tostring(data)) }
      end
    end
  end
  return files, skipped
end

return M
