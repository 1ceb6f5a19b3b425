-- helper.lua: shared helpers for the glsb-confine `write`/`run` specs: run the
-- built binary through the shell, temporary roots (always removed), JSON
-- results, base64, filesystem snapshots. GLSB_CONFINE overrides the binary.
local cjson = require "cjson"

local M = require("support.shell").extend({})

M.bin = os.getenv("GLSB_CONFINE") or (M.repo .. "/build/glsb-confine")

function M.require_binary()
  local f = io.open(M.bin, "rb")
  assert(f, "glsb-confine is not built: run `make build/glsb-confine` first (" .. M.bin .. ")")
  f:close()
end

M.write_file = require("support.shell").write -- M.write below is the helper `write` command

-- A fresh base directory holding root/ (the workspace) and outside/ (must stay
-- untouched). Returns a table with base, root, outside, and cleanup().
function M.workspace()
  local out, code = M.sh("mktemp -d /tmp/glsb-ws-spec.XXXXXX")
  assert(code == 0, "mktemp failed")
  local base = out:gsub("%s+$", "")
  assert(os.execute("mkdir " .. M.q(base .. "/root") .. " " .. M.q(base .. "/outside")))
  local ws = { base = base, root = base .. "/root", outside = base .. "/outside" }
  function ws.cleanup()
    if base:match("^/tmp/glsb%-ws%-spec%.") then
      os.execute("chmod -R u+rwx " .. M.q(base) .. " 2>/dev/null; rm -rf " .. M.q(base))
    end
  end
  return ws
end

-- Everything under dir: type, name, link target, mode, size and content hash,
-- one line each, sorted. Two equal snapshots mean nothing was written.
function M.snapshot(dir)
  local listing = M.sh("cd " .. M.q(dir) .. " && find . -printf '%y %p -> %l %m %s\\n' | LC_ALL=C sort")
  local sums = M.sh("cd " .. M.q(dir) .. " && find . -type f -exec md5sum {} + | LC_ALL=C sort")
  return listing .. sums
end

-- Decode the helper's one JSON line; fails the test on anything else.
function M.decode(out)
  assert(out:sub(-1) == "\n" and not out:sub(1, -2):find("\n"), "expected one JSON line, got: " .. out)
  local ok, v = pcall(cjson.decode, out)
  assert(ok and type(v) == "table", "expected a JSON object, got: " .. out)
  return v
end

-- glsb-confine write; data goes through a temp file on stdin. opts: max_bytes,
-- no_overwrite, path_hex (exact bytes), extra (more argv words), cwd.
function M.write(ws, path, data, opts)
  opts = opts or {}
  local datafile = ws.base .. "/.stdin"
  M.write_file(datafile, data or "")
  local words = { M.bin, "write", "--root", opts.root or ws.root }
  if opts.path_hex then
    words[#words + 1] = "--path-hex"
    words[#words + 1] = (path:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  elseif path then
    words[#words + 1] = "--path"
    words[#words + 1] = path
  end
  if opts.max_bytes ~= false then
    words[#words + 1] = "--max-bytes"
    words[#words + 1] = tostring(opts.max_bytes or 1024 * 1024)
  end
  if opts.no_overwrite then words[#words + 1] = "--no-overwrite" end
  for _, w in ipairs(opts.extra or {}) do words[#words + 1] = w end
  local cmd = M.join(words) .. " < " .. M.q(datafile)
  if opts.cwd then cmd = "cd " .. M.q(opts.cwd) .. " && " .. cmd end
  local out, code = M.sh(cmd)
  os.remove(datafile)
  return M.decode(out), code
end

-- glsb-confine run. opts: cwd (list), env (list of "K=V"), timeout, max_output,
-- prefix (shell text before the command, e.g. redirections).
function M.run(ws, argv, opts)
  opts = opts or {}
  local words = { M.bin, "run", "--root", opts.root or ws.root }
  for _, c in ipairs(opts.cwd or {}) do
    words[#words + 1] = "--cwd"
    words[#words + 1] = c
  end
  for _, kv in ipairs(opts.env or {}) do
    words[#words + 1] = "--env"
    words[#words + 1] = kv
  end
  if opts.timeout then
    words[#words + 1] = "--timeout"
    words[#words + 1] = tostring(opts.timeout)
  end
  if opts.max_output then
    words[#words + 1] = "--max-output"
    words[#words + 1] = tostring(opts.max_output)
  end
  words[#words + 1] = "--"
  for _, a in ipairs(argv) do words[#words + 1] = a end
  local out, code = M.sh(M.join(words) .. (opts.suffix or ""))
  return M.decode(out), code
end

local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local b64val = {}
for i = 1, 64 do b64val[b64:byte(i)] = i - 1 end

-- Strict base64 decoding (padded, standard alphabet).
function M.b64decode(s)
  assert(#s % 4 == 0, "base64 length not a multiple of 4")
  local out = {}
  for i = 1, #s, 4 do
    local a, b, c, d = s:byte(i, i + 3)
    local pad = (c == 61 and 1 or 0) + (d == 61 and 1 or 0)
    assert(pad == 0 or i + 3 == #s, "padding inside base64")
    local va, vb = assert(b64val[a]), assert(b64val[b])
    local vc = c == 61 and 0 or assert(b64val[c])
    local vd = d == 61 and 0 or assert(b64val[d])
    local n = va << 18 | vb << 12 | vc << 6 | vd
    local bytes = string.char(n >> 16 & 255, n >> 8 & 255, n & 255)
    out[#out + 1] = bytes:sub(1, 3 - pad)
  end
  return table.concat(out)
end

-- Monotonic-enough wall clock with sub-second resolution (for timing bounds).
function M.now()
  local out = M.sh("date +%s.%N")
  return tonumber(out)
end

return M
