-- glsb.providers.local.snapshot: sb:snapshot{name} on the local provider. The sandbox's files (what it
-- can write: /home/user, /files, /tmp, one private tmpfs) are archived inside the sandbox by
-- `glsb-confine pack` on the control channel (src/confine/CONTROL.md): the supervisor runs it in a
-- confined child the code cannot reach, as the sandbox user, in the sandbox's view (no host path is
-- shown to it, and GNU tar, with arguments and an environment of glsb's own, follows no symlink and
-- enters no other mount). The archive streams to a file in the template cache's scratch, never whole
-- in memory, and becomes a layer (template.lua M.snapshot). The host stores the bytes and never
-- unpacks them: a sandbox started from the layer does, inside (agent.py). Processes, memory and
-- kernel state are not kept.
local codec = require "glsb.codec"
local loop = require "glsb.loop"
local agent = require "glsb.providers.local.agent"
local transfer = require "glsb.providers.local.transfer"

local M = {}

M.ROOTS = { "/home/user", "/files", "/tmp" }
M.DEFAULT_TIMEOUT = 300

-- The largest archive taken (bytes) for a sandbox of disk_mb MiB: its files, plus the headers of as
-- many entries as its inodes allow (64 per MiB, each a header and, for a long name or link target,
-- two more), plus room for the parts of sparse files.
function M.max_bytes(disk_mb)
  return (disk_mb or 1024) * 1024 * 1024 * 2 + 64 * 1024 * 1024
end

local function fail(message) error("snapshot: " .. message, 0) end

-- capture(self, path, deadline) -> the archive's sha256 (hex), hashed as it came; it is in the host file
-- path. Raises on any failure.
local function capture(self, path, deadline)
  local f, oerr = io.open(path, "wb")
  if not f then fail("cannot write " .. path .. ": " .. tostring(oerr)) end
  local werr
  local hash = codec.sha256_stream()
  local args = { "pack" }
  for _, r in ipairs(M.ROOTS) do args[#args + 1] = "--root" args[#args + 1] = r end
  local max = M.max_bytes(self._opts and self._opts.disk_mb)
  local r, why = self._control:call(args, nil, { deadline = deadline, max_stdout = max,
    on_stdout = function(piece)
      if werr then return end
      hash:update(piece)
      local ok, err = f:write(piece)
      if not ok then werr = tostring(err) end
    end })
  local cok, cerr = f:close()
  if not r then fail(transfer.control_failure(self, why, nil)) end
  if r.cancelled then fail("timed out while the files were archived") end
  if r.error then
    fail("glsb-confine could not archive the files: " .. tostring(r.error) .. ": " .. tostring(r.message))
  end
  if r.stdout_over then fail(string.format("the archive of the files is larger than %d bytes", max)) end
  -- tar's exit 1: a file changed while it was read (the sandbox runs on): its archive is what was read
  if not (r.code == 0 or r.code == 1) then
    local text = (r.stderr or ""):gsub("%s+$", "")
    fail(string.format("archiving the files failed (%s): %s", r.code and ("exit " .. r.code)
      or ("signal " .. tostring(r.signal)), text ~= "" and text or "no message"))
  end
  if werr or not cok then fail("cannot write " .. path .. ": " .. tostring(werr or cerr)) end
  return hash:digest()
end

-- M.snapshot(self, opts) -> {template_id, name}: the _snapshot hook.
function M.snapshot(self, opts)
  local why = agent.unusable(self)
  if why then fail(why) end
  local deadline = loop.deadline(require("glsb.options").timeout(opts.timeout, M.DEFAULT_TIMEOUT))
  local template = require "glsb.providers.local.template"
  return template.snapshot(self._opts or {}, {
    sandbox_id = self.sandbox_id, template_dir = self._template_dir, name = opts.name,
  }, function(path) return capture(self, path, deadline) end)
end

return M
