-- glsb.fs: the host's files, for providers and the kit: temporary directories, trees removed or moved
-- without following a symlink, atomic writes, directory listings, deterministic tar archives (glsb.core's
-- fs and archive parts behind plain Lua functions: a provider requires this, never glsb.core; the details
-- are in src/core/README.md, "Archive, codecs, files"). Failures come back as nil, message, code (an errno
-- name, or a code of the archive part), never raised.
local core = require "glsb.core"

local M = {}

-- mkdtemp([prefix]) -> the path of a new directory (mode 0700). prefix: a template ending in XXXXXX, a
-- directory to make glsb-XXXXXX in, or a name prefix; default $TMPDIR or /tmp.
function M.mkdtemp(prefix) return core.mkdtemp(prefix) end

-- rmtree(path) -> true (a missing path too), or nil, message, code. Never follows a symlink nor crosses
-- into another mount; refuses /, . and ..; TREE_CHANGED when a directory is swapped underneath.
function M.rmtree(path) return core.rmtree(path) end

-- move_dir_beneath(root, rel, dest) -> true, or nil, message, code: moves the directory root/rel to dest
-- (which must not exist), walking rel beneath root without following a symlink, "." or ".." (for a tree a
-- sandbox wrote); undone if what arrived is not the directory that was checked.
function M.move_dir_beneath(root, rel, dest) return core.move_dir_beneath(root, rel, dest) end

-- write_file_atomic(path, data[, mode = 0644[, sync = true]]) -> true: a temporary file, fsync, rename, fsync
-- of the directory; or nil, message, errno name. sync = false: no fsync (readers still see the old content
-- or the new; a crash may leave neither).
function M.write_file_atomic(path, data, mode, sync) return core.write_file_atomic(path, data, mode, sync) end

-- listdir(path) -> array of the names in the directory (not . and ..; unsorted), or nil, message, code.
function M.listdir(path) return core.listdir(path) end

-- lstat(path) -> {type = "dir" | "file" | "link" | "fifo" | "socket" | "device" | "other", uid, mode (the
-- permission bits), size}, or nil, message, code. A symlink is described, never followed.
function M.lstat(path) return core.lstat(path) end

-- mkdir(path[, mode = 0700]) -> true, or nil, message, code (EEXIST when something is there already); the
-- parent must exist.
function M.mkdir(path, mode) return core.mkdir(path, mode) end

-- read_own_file(path, cap) -> the content, or nil, message, code: only a regular file owned by our
-- effective uid, of at most cap bytes, read without following a symlink or waiting on a FIFO (records in
-- a directory someone else could have planted something in).
function M.read_own_file(path, cap) return core.read_own_file(path, cap) end

-- exists(path) -> true when path names something this process can open for reading.
function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- dirname(path) -> path without its last component ("." when it has no slash).
function M.dirname(path) return path:match("^(.*)/[^/]*$") or "." end

-- source_dir([level = 1]) -> the directory of the Lua file of the function `level` calls up (1: the
-- caller's), or nil when that code was not loaded from a file. For files shipped beside a module.
function M.source_dir(level)
  local src = debug.getinfo((level or 1) + 1, "S").source
  if src:sub(1, 1) ~= "@" then return nil end
  return M.dirname(src:sub(2))
end

-- realpath(path) -> the canonical absolute path, or nil, message, errno name.
function M.realpath(path) return core.realpath(path) end

-- read_into(fd, buffer, max) -> the count of bytes appended to buffer (a glsb.process.buffer; at most max
-- and its room), 0 at end of file, or nil, message, errno name. One read(2) of a descriptor this process
-- owns (one glsb-confine passed: a download's file), never waiting on the loop: for regular files.
function M.read_into(fd, buffer, max) return core.fd_read(fd, max, buffer) end

-- close(fd) -> true, or nil, message, errno name: a descriptor this process owns (read_into's).
function M.close(fd) return core.close_fd(fd) end

-- tar_pack(entries[, {gzip = bool}]) -> the archive's bytes; entries: {name, data, mode, type = "file" |
-- "dir" | "symlink" | "hardlink", target}. Deterministic: the same entries give the same bytes.
function M.tar_pack(entries, opts) return core.tar_pack(entries, opts) end

-- tar_unpack(data[, {max_bytes = 1 GiB, max_entries = 100000}]) -> entries, or nil, message, code
-- (TAR_CORRUPT, TAR_UNSAFE_ENTRY, TAR_TOO_LARGE). Refuses names and links that leave the root.
function M.tar_unpack(data, opts) return core.tar_unpack(data, opts) end

return M
