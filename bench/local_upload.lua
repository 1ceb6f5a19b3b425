-- bench/local_upload.lua: moving 100 MB into and out of a local sandbox, beside `cp` of the same file.
--
--   make build/glsb-lua build/glsb-confine
--   build/glsb-lua bench/local_upload.lua [N] [MB]     # default N = 5 runs of 100 MB
--
-- Interleaved run by run:
--   upload    glsb: execute_code("pass", {files = {from_bytes(data, "big.bin")}}) on a live sandbox
--             (the bytes already in memory, as a user has them; the call's round trip included)
--   download  glsb: download_file("/files/big.bin")
--   cp        cp SRC DST of a file with the same bytes (warm page cache), both below $TMPDIR or /tmp,
--             DST removed between runs
--   cp to a tmpfs  the same cp with DST in /dev/shm (when it is a tmpfs): the sandbox's /files is a
--             private tmpfs (disk_mb), and filling fresh tmpfs pages costs more than a disk filesystem's
--             page cache here (100 MB: ~30 ms to /tmp, 60-130 ms to /dev/shm), so this is the copy an
--             upload does the same work as
-- The sandbox's copy is removed between uploads as cp's DST is (an upload over the last one paid for
-- freeing its 100 MB, which cp never did), and downloaded first; the downloaded string is freed between
-- runs too (collectgarbage, untimed: else whether the last one was collected yet decided whether the
-- next was made in memory already ours or in fresh pages, 40 or 120 ms here).
-- Writes bench/results/local_upload.json and .md and prints the table. Not a test.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/lib/?.so;" .. package.cpath
local measure = require "lib.measure"

local glsb = require "glsb"
local core = require "glsb.core"
local process = require "glsb.process"
local cjson = require "cjson"

local N = tonumber(arg and arg[1]) or 5
local MB = tonumber(arg and arg[2]) or 100

local stats = measure.stats

local timed = measure.timed

local tmp = os.getenv("TMPDIR")
if not tmp or tmp == "" then tmp = "/tmp" end
local dir = assert(core.mkdtemp(tmp .. "/glsb-bench-upload-"))
local data = string.rep("0123456789abcdef", MB * 1024 * 1024 // 16)
local src, dst = dir .. "/src.bin", dir .. "/dst.bin"
assert(core.write_file_atomic(src, data, 420))
local shm_dir -- a folder of ours on a tmpfs, or nil
do
  local out = process.run({ "stat", "-f", "-c", "%T", "/dev/shm" }, { timeout = 10 })
  if out and out:match("^tmpfs") then shm_dir = core.mkdtemp("/dev/shm/glsb-bench-upload-") end
end

local results = {}
glsb.run(function()
  local sb = glsb.create("local", { host_workspace_dir = dir })
  local files = { glsb.SandboxFile.from_bytes(data, "big.bin") }
  local function upload()
    local r = sb:execute_code("pass", { files = files })
    assert(r.status == "success", tostring(r))
  end
  local function download()
    local got = sb:download_file("/files/big.bin")
    assert(got and #got == #data, "download failed")
  end
  local function cp()
    local out, err, st = process.run({ "cp", src, dst }, { timeout = 120 })
    assert(out and st.code == 0, "cp failed: " .. tostring(err))
    os.remove(dst)
  end
  local function cp_tmpfs()
    local to = shm_dir .. "/dst.bin"
    local out, err, st = process.run({ "cp", src, to }, { timeout = 120 })
    assert(out and st.code == 0, "cp failed: " .. tostring(err))
    os.remove(to)
  end
  local function remove()
    local r = sb:execute_command("rm -f /files/big.bin")
    assert(r.status == "success", tostring(r))
  end
  upload() download() remove() cp() -- warm-up
  if shm_dir then cp_tmpfs() end
  local up, down, copy, copy_tmpfs = {}, {}, {}, {}
  for _ = 1, N do
    up[#up + 1] = timed(upload)
    collectgarbage()
    down[#down + 1] = timed(download)
    collectgarbage()
    remove()
    copy[#copy + 1] = timed(cp)
    if shm_dir then copy_tmpfs[#copy_tmpfs + 1] = timed(cp_tmpfs) end
  end
  sb:terminate()
  results = { upload = stats(up), download = stats(down), cp = stats(copy), mb = MB, n = N,
    cp_tmpfs = shm_dir and stats(copy_tmpfs) or nil }
end)
core.rmtree(dir)
if shm_dir then core.rmtree(shm_dir) end

local lines = {
  string.format("local upload/download benchmark, %s, %d MB, N = %d (ms)", os.date("!%Y-%m-%d %H:%M UTC"), MB, N),
  "",
  "| what | median | p90 | median / cp | median / cp to a tmpfs |",
  "|---|---:|---:|---:|---:|",
}
local names = { cp = "cp (reference)", cp_tmpfs = "cp to a tmpfs (reference)" }
for _, k in ipairs({ "upload", "download", "cp", "cp_tmpfs" }) do
  local s = results[k]
  if s then
    lines[#lines + 1] = string.format("| %s | %.1f | %.1f | %.2f | %s |", names[k] or ("glsb " .. k),
      s.median, s.p90, s.median / results.cp.median,
      results.cp_tmpfs and string.format("%.2f", s.median / results.cp_tmpfs.median) or "-")
  end
end
if not results.cp_tmpfs then
  lines[#lines + 1] = ""
  lines[#lines + 1] = "(/dev/shm is no tmpfs here: no tmpfs reference)"
end
local text = table.concat(lines, "\n") .. "\n"
io.write(text)
local here = debug.getinfo(1, "S").source:sub(2):match("^(.*)/[^/]*$") or "bench"
os.execute("mkdir -p " .. here .. "/results")
local f = assert(io.open(here .. "/results/local_upload.md", "w"))
f:write(text)
f:close()
f = assert(io.open(here .. "/results/local_upload.json", "w"))
f:write(cjson.encode(results))
f:close()
