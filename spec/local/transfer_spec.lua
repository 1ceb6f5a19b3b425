-- Uploads and downloads on the local provider at the sizes where the transfer path changes shape:
-- the supervisor splices stdin from the control socket into the helper's pipe (up to 1 MiB per
-- splice, 1 MiB pipes), the helper splices it into the file, `read` splices the file into its stdout,
-- and stdout reaches the host in frames of at most 64 KiB (src/confine/CONTROL.md). Every size at and
-- around those boundaries must arrive byte for byte, and a cap exceeded in the middle of a transfer
-- must leave nothing behind and the channel usable.
local glsb = require "glsb"
local helper = require "local.helper"

-- n bytes that differ at every position of a 64 KiB block, with NULs and newlines in them
local function bytes(n, seed)
  local block = {}
  for i = 1, 4096 do block[i] = string.char((i * 7 + seed) % 256) end
  local b = table.concat(block)
  return (string.rep(b, n // #b + 1)):sub(1, n)
end

local sha256 = require("glsb.core").sha256

describe("local uploads and downloads at chunk boundaries #local", function()
  local root, sb

  setup(function()
    root = helper.private_tmp()
    sb = glsb.create("local", { host_workspace_dir = root })
  end)
  teardown(function()
    if sb then sb:terminate() end
    helper.remove_root(root)
    -- the tens of MB of strings made here go now, not in a later spec's timed loop (all specs share
    -- one busted process)
    collectgarbage()
  end)

  local KiB, MiB = 1024, 1024 * 1024
  for _, n in ipairs({ 0, 1, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, MiB - 1, MiB, MiB + 1, 3 * MiB + 7 }) do
    it(("moves %d bytes both ways, exactly"):format(n), function()
      local data = bytes(n, n % 251)
      sb.files:write("/home/user/b" .. n .. ".bin", data)
      -- what landed in the file, seen from inside the sandbox
      local r = sb:execute_command("wc -c < b" .. n .. ".bin; sha256sum < b" .. n .. ".bin")
      assert.are.equal(0, r.code, tostring(r))
      assert.are.equal(("%d\n%s  -\n"):format(n, sha256(data)), r.stdout)
      local got = sb:download_file("/home/user/b" .. n .. ".bin")
      assert.are.equal(n, #got)
      assert.is_true(got == data, "the download differs")
      assert.is_true(sb.files:read("/home/user/b" .. n .. ".bin") == data, "files:read differs")
      sb.files:remove("/home/user/b" .. n .. ".bin")
    end)
  end

  it("refuses data over max_bytes found in the middle of the stream: nothing named, no directory made", function()
    local data = bytes(3 * MiB, 3)
    local ok, err = pcall(glsb.write_workspace_file, sb,
      { relative_path = "deep/er/big.bin", data = data, max_bytes = 2 * MiB + 1 })
    assert.is_false(ok)
    assert.are.equal("too_large", err.reason)
    local r = sb:execute_command("ls -A /home/user; find /home/user -name '.glsb-write-*'")
    assert.are.equal(0, r.code, tostring(r))
    assert.is_nil(r.stdout:find("deep", 1, true), r.stdout)
    -- the rest of the refused stdin was read and dropped: the channel goes on in step
    sb.files:write("after.txt", "still in step")
    assert.are.equal("still in step", sb.files:read("after.txt"))
    -- exactly at the cap is fine, into new directories
    local ok2, res = pcall(glsb.write_workspace_file, sb,
      { relative_path = "deep/er/fits.bin", data = data, max_bytes = #data })
    assert.is_true(ok2, tostring(res))
    assert.is_true(sb.files:read("deep/er/fits.bin") == data)
    sb.files:remove("deep")
    sb.files:remove("after.txt")
  end)

  it("keeps a command's output whole and in order through the helper's spliced stdout frames", function()
    -- the helper's answer (both streams of the command) leaves the supervisor spliced from its pipe,
    -- in frames of whatever the pipe holds at the time: numbered lines show any piece lost, repeated
    -- or out of order
    local script = "i=0; while [ $i -lt 40 ]; do i=$((i+1)); printf 'line %06d ' $i; "
      .. "head -c 70000 /dev/zero | tr '\\0' x; echo; echo err$i >&2; done"
    local w = glsb.run_workspace_command(sb, { "sh", "-c", script }, { max_output_bytes = 8 * MiB, timeout = 60 })
    assert.are.equal(0, w.exit_code, tostring(w.stderr))
    local want, errs = {}, {}
    for i = 1, 40 do
      want[i] = ("line %06d "):format(i) .. string.rep("x", 70000) .. "\n"
      errs[i] = "err" .. i .. "\n"
    end
    assert.are.equal(#table.concat(want), #w.stdout)
    assert.is_true(w.stdout == table.concat(want), "stdout differs")
    assert.are.equal(table.concat(errs), w.stderr)
  end)

  it("an upload refused before its data is read (the target is a directory) drops the data and goes on", function()
    assert.is_true(sb.files:make_dir("/files/adir"))
    local ok, err = pcall(function() sb.files:write("/files/adir", bytes(2 * MiB + 3, 5)) end)
    assert.is_false(ok)
    assert.matches("director", tostring(err))
    sb.files:write("/files/small.txt", "ok")
    assert.are.equal("ok", sb:download_file("/files/small.txt"))
    sb.files:remove("/files/adir")
    sb.files:remove("/files/small.txt")
  end)
end)
