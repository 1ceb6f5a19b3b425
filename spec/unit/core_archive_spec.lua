-- core_archive_spec.lua: the Lua-level behaviour of glsb.core's archive, codec and file
-- primitives (tar_pack/tar_unpack, sha256/b64/crc32, mkdtemp/rmtree/write_file_atomic),
-- including interplay with GNU tar and hostile archives written byte by byte.
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local root = here .. "/../.."
package.cpath = root .. "/build/lib/?.so;" .. package.cpath

local ok, core = pcall(require, "glsb.core")
assert(ok, "glsb.core is not built: run `make build/lib/glsb/core.so` first (" .. tostring(core) .. ")")

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function sh(cmd)
  local f = assert(io.popen(cmd, "r"))
  local out = f:read("a")
  local _, _, code = f:close()
  return out, code
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

-- One 512-byte ustar header, written by hand: what no well-behaved writer would produce.
local function ustar(name, typeflag, size, linkname)
  local function field(s, n) return s .. string.rep("\0", n - #s) end
  local h = field(name, 100) .. "0000644\0" .. "0000000\0" .. "0000000\0"
    .. string.format("%011o\0", size) .. "00000000000\0" .. "        " .. typeflag
    .. field(linkname or "", 100) .. "ustar\0" .. "00" .. string.rep("\0", 247)
  assert(#h == 512)
  local sum = 0
  for i = 1, 512 do sum = sum + h:byte(i) end
  return h:sub(1, 148) .. string.format("%06o\0 ", sum) .. h:sub(157)
end

local function tar_of(members)
  local parts = {}
  for _, m in ipairs(members) do
    local data = m.data or ""
    parts[#parts + 1] = ustar(m.name, m.type or "0", #data, m.link)
    parts[#parts + 1] = data .. string.rep("\0", (512 - #data % 512) % 512)
  end
  parts[#parts + 1] = string.rep("\0", 1024)
  return table.concat(parts)
end

local ENTRIES = {
  { name = "app", type = "dir", mode = tonumber("755", 8) },
  { name = "app/main.py", data = "print('hi')\n", mode = tonumber("644", 8) },
  { name = "app/run.sh", data = "#!/bin/sh\necho hi\n", mode = tonumber("755", 8) },
  { name = "app/blob", data = ("\0\1\2\255"):rep(5000) },
  { name = "app/current", type = "symlink", target = "main.py" },
  { name = "app/again", type = "hardlink", target = "app/main.py" },
}

describe("glsb.core archive #unit", function()
  it("round-trips entries, plain and gzipped", function()
    for _, gzip in ipairs({ false, true }) do
      local out = assert(core.tar_unpack(core.tar_pack(ENTRIES, { gzip = gzip })))
      assert.are.equal(#ENTRIES, #out)
      for i, e in ipairs(ENTRIES) do
        assert.are.equal(e.name, out[i].name)
        assert.are.equal(e.type or "file", out[i].type)
        assert.are.equal(e.target, out[i].target)
        if out[i].type == "file" then assert.are.equal(e.data, out[i].data) end
        if e.mode then assert.are.equal(e.mode, out[i].mode) end
      end
    end
  end)

  it("gives the same bytes for the same entries", function()
    assert.are.equal(core.tar_pack(ENTRIES), core.tar_pack(ENTRIES))
    local a, b = core.tar_pack(ENTRIES, { gzip = true }), core.tar_pack(ENTRIES, { gzip = true })
    assert.are.equal(core.sha256(a), core.sha256(b))
    assert.are_not.equal(core.tar_pack(ENTRIES), core.tar_pack({ ENTRIES[1], ENTRIES[2] }))
  end)

  it("writes archives GNU tar reads, and reads archives GNU tar writes", function()
    local dir = assert(core.mkdtemp("/tmp/glsb-spec-XXXXXX"))
    finally(function() assert(core.rmtree(dir)) end)
    write(dir .. "/ours.tgz", core.tar_pack(ENTRIES, { gzip = true }))
    local listing, code = sh("tar -tzvf " .. q(dir .. "/ours.tgz") .. " 2>&1")
    assert.are.equal(0, code, listing)
    assert.truthy(listing:find("app/current -> main.py", 1, true))
    assert.truthy(listing:find("0/0", 1, true))
    assert.truthy(listing:find("1970-01-01", 1, true))
    local x = dir .. "/x"
    assert(sh("mkdir " .. q(x) .. " && tar -xzf " .. q(dir .. "/ours.tgz") .. " -C " .. q(x)))
    assert.are.equal("#!/bin/sh\necho hi\n", read(x .. "/app/run.sh"))

    -- the other way: `tar -C dir .` puts "./" in front of every name and a "./" entry first
    local src = dir .. "/src"
    assert(sh("mkdir -p " .. q(src .. "/d") .. " && printf hello > " .. q(src .. "/d/f.txt")
      .. " && ln -s d/f.txt " .. q(src .. "/l")))
    local _, c2 = sh("tar -C " .. q(src) .. " -czf " .. q(dir .. "/theirs.tgz") .. " .")
    assert.are.equal(0, c2)
    local out = assert(core.tar_unpack(read(dir .. "/theirs.tgz")))
    local by = {}
    for _, e in ipairs(out) do by[e.name] = e end
    assert.are.equal("dir", by["d"].type)
    assert.are.equal("hello", by["d/f.txt"].data)
    assert.are.equal("d/f.txt", by["l"].target)
    assert.is_nil(by["."])
    assert.is_nil(by[""])
  end)

  it("refuses hostile archives with a message naming the entry and the reason", function()
    local cases = {
      { { { name = "/etc/cron.d/x", data = "x" } }, "/etc/cron.d/x", "absolute name" },
      { { { name = "../../x", data = "x" } }, "../../x", "'..' component" },
      { { { name = "", data = "" } }, "entry", "empty name" },
      { { { name = "l", type = "2", link = "/etc" } }, "'l'", "absolute" },
      { { { name = "a/l", type = "2", link = "../../etc" } }, "a/l", "escapes the archive root" },
      { { { name = "t", type = "2", link = "s/s/.." }, { name = "s", type = "2", link = "." } },
        "'t'", "escapes the archive root" },
      { { { name = "h", type = "1", link = "nothing-before" } }, "'h'", "not an earlier entry" },
      { { { name = "h", type = "1", link = "../passwd" } }, "'h'", "'..' component" },
      { { { name = "null", type = "3" } }, "null", "character device" },
      { { { name = "sda", type = "4" } }, "sda", "block device" },
      { { { name = "p", type = "6" } }, "'p'", "fifo" },
    }
    for _, c in ipairs(cases) do
      local out, err = core.tar_unpack(tar_of(c[1]))
      assert.is_nil(out)
      assert.is_string(err)
      assert.truthy(err:find(c[2], 1, true), err)
      assert.truthy(err:find(c[3], 1, true), err)
    end
  end)

  it("keeps links that stay inside", function()
    local out = assert(core.tar_unpack(tar_of({
      { name = "a/b", type = "2", link = "../c" },
      { name = "s", type = "2", link = "." },
      { name = "t", type = "2", link = "s/s/a" },
      { name = "f", data = "x" },
      { name = "h", type = "1", link = "./f" },
    })))
    assert.are.equal(5, #out)
    assert.are.equal("hardlink", out[5].type)
    assert.are.equal("f", out[5].target)
  end)

  it("enforces max_bytes and max_entries", function()
    local t = core.tar_pack({ { name = "a", data = ("x"):rep(600) }, { name = "b", data = ("y"):rep(600) } })
    assert.truthy(core.tar_unpack(t, { max_bytes = 1200, max_entries = 2 }))
    local out, err = core.tar_unpack(t, { max_bytes = 1199 })
    assert.is_nil(out)
    assert.truthy(err:find("'b'", 1, true) and err:find("max_bytes", 1, true), err)
    out, err = core.tar_unpack(t, { max_entries = 1 })
    assert.is_nil(out)
    assert.truthy(err:find("max_entries", 1, true), err)
  end)

  it("returns nil, message for input that is not an archive", function()
    for _, junk in ipairs({ "", "hello", ("\0"):rep(100), "\31\139garbage" }) do
      local out, err = core.tar_unpack(junk)
      assert.is_nil(out)
      assert.truthy(err:find("tar_unpack", 1, true))
    end
  end)

  it("raises on misuse", function()
    assert.has_error(function() core.tar_pack("x") end)
    assert.has_error(function() core.tar_pack({ { name = "/abs" } }) end)
    assert.has_error(function() core.tar_pack({ { name = "l", type = "symlink" } }) end)
    assert.has_error(function() core.tar_pack({ { name = "x", type = "socket" } }) end)
    assert.has_error(function() core.tar_unpack({}) end)
    assert.has_error(function() core.tar_unpack("", { max_bytes = -1 }) end)
  end)
end)

describe("glsb.core codecs #unit", function()
  it("hashes with SHA-256", function()
    assert.are.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", core.sha256("abc"))
    assert.are.equal(32, #core.sha256("abc", true))
    local out = sh("printf %s 'glsb test' | sha256sum")
    assert.are.equal(out:match("^%x+"), core.sha256("glsb test"))
  end)

  it("encodes and decodes base64", function()
    assert.are.equal("Zm9vYmE=", core.b64encode("fooba"))
    assert.are.equal("-_-_", core.b64encode("\251\255\191", "url"))
    assert.are.equal("Zm9vYmE", core.b64encode("fooba", "url"))
    assert.are.equal("fooba", core.b64decode("Zm9vYmE="))
    assert.are.equal("fooba", core.b64decode("Zm9vYmE"))
    assert.is_nil(core.b64decode("Zm9v YmE="))
    assert.is_nil(core.b64decode("Zm9vY"))
    for n = 0, 40 do
      local s = ("\0\255xyz"):rep(9):sub(1, n)
      assert.are.equal(s, core.b64decode(core.b64encode(s)))
      assert.are.equal(s, core.b64decode(core.b64encode(s, "url"), "url"))
    end
  end)

  it("computes CRC-32 as zlib does, and continues from an earlier value", function()
    assert.are.equal(0xCBF43926, core.crc32("123456789"))
    assert.are.equal(core.crc32("123456789"), core.crc32("6789", core.crc32("12345")))
  end)
end)

describe("glsb.core files #unit", function()
  local dir
  before_each(function() dir = assert(core.mkdtemp("/tmp/glsb-spec-")) end)
  after_each(function() assert(core.rmtree(dir)) end)

  it("makes private temp directories", function()
    assert.truthy(dir:match("^/tmp/glsb%-spec%-......$"))
    assert.are.equal("drwx------", (sh("stat -c %A " .. q(dir)):gsub("%s+$", "")))
    local nested = assert(core.mkdtemp(dir))
    assert.truthy(nested:find(dir .. "/glsb-", 1, true))
    local none, err = core.mkdtemp("/nonexistent-glsb/x-XXXXXX")
    assert.is_nil(none)
    assert.is_string(err)
  end)

  it("removes a tree without following a symlink out of it", function()
    local outside = assert(core.mkdtemp("/tmp/glsb-spec-out-"))
    finally(function() core.rmtree(outside) end)
    write(outside .. "/precious", "keep")
    assert(sh("mkdir -p " .. q(dir .. "/t/a") .. " && ln -s " .. q(outside) .. " " .. q(dir .. "/t/a/out")
      .. " && ln -s " .. q(outside .. "/precious") .. " " .. q(dir .. "/t/p")))
    assert.is_true(core.rmtree(dir .. "/t"))
    assert.are.equal("keep", read(outside .. "/precious"))
    assert.is_nil(io.open(dir .. "/t", "r"))
    assert.is_true(core.rmtree(dir .. "/t")) -- already gone: still success
  end)

  it("writes files atomically with a mode", function()
    local p = dir .. "/state.json"
    assert.is_true(core.write_file_atomic(p, "{}", tonumber("600", 8)))
    assert.is_true(core.write_file_atomic(p, "{\"v\":2}", tonumber("600", 8)))
    assert.are.equal("{\"v\":2}", read(p))
    assert.are.equal("600", (sh("stat -c %a " .. q(p)):gsub("%s+$", "")))
    assert.are.equal("state.json\n", sh("ls -A " .. q(dir)))
    local okw, err = core.write_file_atomic(dir .. "/missing/x", "")
    assert.is_nil(okw)
    assert.truthy(err:find("missing/x", 1, true))
  end)

  it("knows where the core lives, and the process id", function()
    local path = assert(core.module_path())
    assert.truthy(path:match("^/"))
    -- glsb-lua links the core in (preloaded); plain lua5.4 loads build/lib/glsb/core.so
    local want = package.preload["glsb.core"] and core.realpath("/proc/self/exe")
      or core.realpath(root .. "/build/lib/glsb/core.so")
    assert.are.equal(want, path)
    assert.are.equal(tonumber((sh("echo $PPID"):gsub("%s+$", ""))), core.getpid())
  end)
end)
