-- glsb.mcp.present: what a tool result looks like to the client (docs/protocols/mcp.md §4): text blocks
-- that fit a budget (head and tail kept, the cut stated, the whole reachable as a resource), images as
-- `image` blocks and also named in the text and linked (many clients drop image blocks), and the
-- structured result repeated as JSON text for clients that do not read structuredContent.
local json = require "glsb.mcp.json"
local codec = require "glsb.codec"

local M = {}

-- A byte that continues a UTF-8 sequence (10xxxxxx): a cut is moved off it.
local function continuation(s, i)
  local b = s:byte(i)
  return b ~= nil and b >= 0x80 and b < 0xC0
end

-- clip(text, max) -> text itself when it fits, else its head and its tail around a line saying how many
-- bytes were cut, and the number cut (0: whole). Cuts land on line ends when one is near, never inside
-- a UTF-8 character.
function M.clip(text, max, where)
  if #text <= max then return text, 0 end
  local head_n = math.floor(max * 0.6)
  local tail_n = max - head_n
  local head_end = head_n
  -- the last line end in the head's last fifth (a plain find forward from there: a pattern anchored at
  -- the end would retry from every position of a long line without one, quadratic in its length)
  local pos, nl = math.floor(head_end * 0.8), nil
  while true do
    local at = text:find("\n", pos, true)
    if not at or at > head_end then break end
    nl, pos = at, at + 1
  end
  if nl then head_end = nl end
  while head_end > 0 and continuation(text, head_end + 1) do head_end = head_end - 1 end
  local tail_start = #text - tail_n + 1
  local nl2 = text:find("\n", tail_start, true)
  if nl2 and nl2 < tail_start + tail_n * 0.2 then tail_start = nl2 + 1 end
  while tail_start <= #text and continuation(text, tail_start) do tail_start = tail_start + 1 end
  local cut = tail_start - head_end - 1
  local head = text:sub(1, head_end)
  local note = string.format("%s[glsb: %d bytes cut here to fit the result%s]\n", head:sub(-1) == "\n" and "" or "\n",
    cut, where and ("; the whole output: " .. where) or "")
  return head .. note .. text:sub(tail_start), cut
end

function M.text(s) return { type = "text", text = s } end

function M.link(uri, name, mime, size, description)
  return { type = "resource_link", uri = uri, name = name, mimeType = mime, size = size, description = description }
end

-- result(text_blocks, structured, extra_blocks, is_error) -> a CallToolResult: the text, then the
-- structured JSON as text, then images and links.
function M.result(texts, structured, extra, is_error)
  local content = json.array()
  for _, t in ipairs(texts) do content[#content + 1] = M.text(t) end
  if structured then content[#content + 1] = M.text(json.encode(structured)) end
  for _, b in ipairs(extra or {}) do content[#content + 1] = b end
  return { content = content, structuredContent = structured, isError = is_error or nil }
end

-- failure(message) -> the result of a call that could not be made (bad arguments, an unknown id, a
-- provider that refused): isError, one text block, nothing structured (clients check structuredContent
-- against the outputSchema only when there is one).
function M.failure(message)
  return { content = json.array { M.text(message) }, isError = true }
end

-- percent-encoding of a path inside a glsb:// URI (RFC 3986: unreserved characters and "/" stay).
function M.uri_path(path)
  return (path:gsub("[^%w%-%._~/]", function(c) return string.format("%%%02X", c:byte()) end))
end

function M.uri_unpath(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local MIME_OF_EXT = {
  png = "image/png", jpg = "image/jpeg", jpeg = "image/jpeg", gif = "image/gif", webp = "image/webp",
  svg = "image/svg+xml", pdf = "application/pdf", json = "application/json", csv = "text/csv",
  txt = "text/plain", md = "text/markdown", html = "text/html", htm = "text/html", py = "text/x-python",
  js = "text/javascript", sh = "text/x-shellscript", log = "text/plain", xml = "application/xml",
  yaml = "application/yaml", yml = "application/yaml", tsv = "text/tab-separated-values",
}

-- mime_of(path, data) -> a MIME type from the name's extension, else text/plain for valid UTF-8 without
-- NUL bytes, else application/octet-stream.
function M.mime_of(path, data)
  local ext = path:match("%.([%w]+)$")
  local m = ext and MIME_OF_EXT[ext:lower()]
  if m then return m end
  if data and utf8.len(data) and not data:find("%z") then return "text/plain" end
  return "application/octet-stream"
end

-- Images a client can put before the model as they are (an `image` block): not SVG, which is text the
-- model APIs do not take as an image.
M.INLINE_IMAGE = { ["image/png"] = true, ["image/jpeg"] = true, ["image/gif"] = true, ["image/webp"] = true }

function M.image(data, mime)
  return { type = "image", data = codec.b64encode(data), mimeType = mime }
end

return M
