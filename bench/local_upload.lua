-- bench/local_upload.lua: moving 100 MB into and out of a local sandbox, beside `cp` of the same file.
--
--   make build/glsb-lua build/glsb-confine
--   build/glsb-lua bench/local_upload.lua [N] [MB]     # default N = 5 runs of 100 MB
--
-- Interleaved run by run, on the same filesystem (the workspace root and the cp target share a
-- directory below $TMPDIR or /tmp):
--   upload    glsb: execute_code("pass", {files = {from_bytes(data, "big.bin")}}) on a live sandbox
--             (the bytes already in memory, as a user has them; the call's round trip included)
--   download  glsb: download_file("/files/big.bin")
--   cp        cp SRC DST of a file with the same bytes (warm page cache), DST removed between runs
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
  local function remove()
    local r = sb:execute_command("rm -f /files/big.bin")
    assert(r.status == "success", tostring(r))
  end
  upload() download() remove() cp() -- warm-up
  local up, down, copy = {}, {}, {}
  for _ = 1, N do
    up[#up + 1] = timed(upload)
    collectgarbage()
    down[#down + 1] = timed(download)
    collectgarbage()
    remove()
    copy[#copy + 1] = timed(cp)
  end
  sb:terminate()
  results = { upload = stats(up), download = stats(down), cp = stats(copy), mb = MB, n = N }
end)
core.rmtree(dir)

local lines = {
  string.format("local upload/download benchmark, %s, %d MB, N = %d (ms)", os.date("!%Y-%m-%d %H:%M UTC"), MB, N),
  "",
  "| what | median | p90 | median / cp |",
  "|---|---:|---:|---:|",
}
for _, k in ipairs({ "upload", "download", "cp" }) do
  local s = results[k]
  lines[#lines + 1] = string.format("| %s | %.1f | %.1f | %.2f |", k == "cp" and "cp (reference)" or ("glsb " .. k),
    s.median, s.p90, s.median / results.cp.median)
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
