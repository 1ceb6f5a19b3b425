-- write_spec.lua: `glsb-confine write` (write_workspace_file): every rejection
-- leaves the filesystem exactly as it was; accepted writes land beneath the root,
-- atomically, never through a link, never replacing without overwrite.
local h = require "workspace.helper"

describe("glsb-confine write #workspace", function()
  local ws

  setup(function() h.require_binary() end)
  before_each(function() ws = h.workspace() end)
  after_each(function() ws.cleanup() end)

  -- Run a write expected to fail with `code`; the whole base (root and
  -- outside) must be unchanged afterwards.
  local function rejects(code, path, data, opts)
    local before = h.snapshot(ws.base)
    local r, status = h.write(ws, path, data or "payload", opts)
    assert.are.equal(1, status)
    assert.is_false(r.ok)
    assert.are.equal(code, r.error)
    assert.is_string(r.message)
    assert.are.equal(before, h.snapshot(ws.base))
    return r
  end

  describe("accepts", function()
    it("writes exact bytes and creates parent directories beneath the root", function()
      local data = "bin\0ary\255\254\r\n" .. string.rep("x", 70000)
      local r, status = h.write(ws, "reports/2024/result.bin", data)
      assert.are.equal(0, status)
      assert.is_true(r.ok)
      assert.are.equal(#data, r.bytes)
      assert.are.equal("reports/2024/result.bin", r.path)
      assert.is_false(r.replaced)
      assert.are.equal(data, h.read(ws.root .. "/reports/2024/result.bin"))
      -- nothing else: no temp files left behind, nothing outside
      local listing = h.sh("cd " .. h.q(ws.base) .. " && find . | LC_ALL=C sort")
      assert.are.equal(".\n./outside\n./root\n./root/reports\n./root/reports/2024\n./root/reports/2024/result.bin\n",
        listing)
    end)

    it("writes an empty file, and exactly max-bytes", function()
      local r = h.write(ws, "empty", "", { max_bytes = 0 })
      assert.is_true(r.ok)
      assert.are.equal(0, r.bytes)
      assert.are.equal("", h.read(ws.root .. "/empty"))
      r = h.write(ws, "three", "abc", { max_bytes = 3 })
      assert.is_true(r.ok)
      assert.are.equal("abc", h.read(ws.root .. "/three"))
    end)

    it("replaces an existing file when overwrite is allowed, keeping its mode", function()
      h.write_file(ws.root .. "/f", "old")
      os.execute("chmod 640 " .. h.q(ws.root .. "/f"))
      local r = h.write(ws, "f", "new content")
      assert.is_true(r.ok)
      assert.is_true(r.replaced)
      assert.are.equal("new content", h.read(ws.root .. "/f"))
      assert.are.equal("640\n", (h.sh("stat -c %a " .. h.q(ws.root .. "/f"))))
      assert.are.equal("f\n", (h.sh("ls -A " .. h.q(ws.root))))
    end)

    it("creates a new file with --no-overwrite", function()
      local r = h.write(ws, "d/new", "x", { no_overwrite = true })
      assert.is_true(r.ok)
      assert.are.equal("x", h.read(ws.root .. "/d/new"))
    end)

    it("takes any byte string through --path-hex", function()
      local name = "caf\233 \255 $(id);"
      local r = h.write(ws, "dir/" .. name, "ok", { path_hex = true })
      assert.is_true(r.ok)
      assert.are.equal("ok", h.read(ws.root .. "/dir/" .. name))
    end)
  end)

  describe("rejects", function()
    it("absolute paths", function()
      rejects("absolute_path", "/etc/glsb-ws-spec")
      rejects("absolute_path", ws.outside .. "/x")
      assert.is_false(h.exists("/etc/glsb-ws-spec"))
    end)

    it("an empty path", function()
      rejects("empty_path", "")
    end)

    it("empty components", function()
      rejects("empty_component", "a//b")
      rejects("empty_component", "a/")
    end)

    it("'.' and '..' components", function()
      rejects("dot_component", ".")
      rejects("dot_component", "./a")
      rejects("dot_component", "a/./b")
      rejects("dotdot_component", "..")
      rejects("dotdot_component", "../outside/x")
      rejects("dotdot_component", "a/../../outside/x")
    end)

    it("NUL bytes (given as exact bytes through --path-hex)", function()
      rejects("nul_byte", "a\0b", "x", { path_hex = true })
      rejects("nul_byte", "dir/x\0", "x", { path_hex = true })
    end)

    it("malformed hex and missing options as usage errors", function()
      rejects("usage", "abc", "x", { extra = { "--path-hex", "6" } }) -- both --path and --path-hex
      local before = h.snapshot(ws.base)
      local out, status = h.sh(h.join({ h.bin, "write", "--root", ws.root, "--path-hex", "6g", "--max-bytes", "9" }))
      assert.are.equal(1, status)
      assert.are.equal("usage", h.decode(out).error)
      rejects("usage", "x", "x", { max_bytes = false })
      rejects("usage", "x", "x", { max_bytes = "-1" })
      rejects("usage", "x", "x", { extra = { "--bogus" } })
      assert.are.equal(before, h.snapshot(ws.base))
    end)

    it("overlong names and paths", function()
      rejects("name_too_long", string.rep("n", 256))
      rejects("path_too_long", string.rep("abcdefg/", 600) .. "x")
    end)

    it("a parent directory that is a symlink, even one pointing inside the root", function()
      assert(os.execute("ln -s ../outside " .. h.q(ws.root .. "/out")))
      assert(os.execute("mkdir " .. h.q(ws.root .. "/real") .. " && ln -s real " .. h.q(ws.root .. "/alias")))
      rejects("symlink", "out/x")
      rejects("symlink", "out/new/x")
      rejects("symlink", "alias/x")
      assert(os.execute("mkdir -p " .. h.q(ws.root .. "/a/b") .. " && ln -s /tmp " .. h.q(ws.root .. "/a/b/t")))
      rejects("symlink", "a/b/t/x")
    end)

    it("a magic link on the way (procfs)", function()
      -- Root /proc/self: cwd and fd/N are magic links; the cwd is our temp base.
      local r = rejects("symlink", "cwd/escaped", "x", { root = "/proc/self", cwd = ws.base })
      assert.matches("link", r.message)
      assert.is_false(h.exists(ws.base .. "/escaped"))
    end)

    it("a final target that is a symlink, dangling or not", function()
      h.write_file(ws.outside .. "/victim", "original")
      assert(os.execute("ln -s ../outside/victim " .. h.q(ws.root .. "/link")))
      assert(os.execute("ln -s ../outside/nothing " .. h.q(ws.root .. "/dangling")))
      rejects("target_symlink", "link")
      rejects("target_symlink", "dangling")
      rejects("target_symlink", "link", "x", { no_overwrite = true })
      assert.are.equal("original", h.read(ws.outside .. "/victim"))
      assert.is_false(h.exists(ws.outside .. "/nothing"))
    end)

    it("payloads over max-bytes", function()
      rejects("too_large", "big", "abcd", { max_bytes = 3 })
      rejects("too_large", "big", "x", { max_bytes = 0 })
      rejects("too_large", "deep/er/big", string.rep("z", 200000), { max_bytes = 65536 })
    end)

    it("replacing an existing file without overwrite", function()
      h.write_file(ws.root .. "/keep", "precious")
      local r = rejects("exists", "keep", "clobber", { no_overwrite = true })
      assert.matches("overwrite", r.message)
      assert.are.equal("precious", h.read(ws.root .. "/keep"))
    end)

    it("a directory or a special file as the target", function()
      assert(os.execute("mkdir " .. h.q(ws.root .. "/dir")))
      rejects("is_directory", "dir")
      assert(os.execute("mkfifo " .. h.q(ws.root .. "/fifo")))
      rejects("not_regular_file", "fifo")
    end)

    it("a regular file used as a parent directory", function()
      h.write_file(ws.root .. "/file", "x")
      rejects("not_directory", "file/child")
    end)

    it("a missing root", function()
      rejects("root_invalid", "x", "x", { root = ws.base .. "/missing" })
      assert.is_false(h.exists(ws.base .. "/missing"))
    end)
  end)

  it("never redirects a write outside the root while a parent is swapped for a symlink", function()
    -- A racer atomically exchanges root/d (the real directory) with root/s (a
    -- symlink to outside/), renameat2(RENAME_EXCHANGE) in a bounded loop, so d
    -- is always either the directory or the link. Writes into d/ must land in
    -- the real directory (under whichever name) or fail; outside/ stays empty.
    assert(os.execute("mkdir " .. h.q(ws.root .. "/d") .. " && ln -s ../outside " .. h.q(ws.root .. "/s")))
    local stop, done = ws.base .. "/stop", ws.base .. "/racer.done"
    local racer = table.concat({
      "import ctypes, os, sys",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "root, stop, done = sys.argv[1:4]",
      "fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)",
      "n = 0",
      "while n < 200000 and not os.path.exists(stop):",
      "    if libc.renameat2(fd, b'd', fd, b's', 2) != 0: sys.exit(1)",
      "    n += 1",
      "open(done, 'w').write(str(n))",
    }, "\n")
    h.write_file(ws.base .. "/racer.py", racer)
    os.execute("python3 " .. h.join({ ws.base .. "/racer.py", ws.root, stop, done }) .. " >/dev/null 2>&1 &")
    local ok, err = pcall(function()
      local written, refused = {}, {}
      for i = 1, 150 do
        local r = h.write(ws, "d/f" .. i, "data " .. i, { no_overwrite = true })
        if r.ok then written[#written + 1] = i else refused[r.error] = (refused[r.error] or 0) + 1 end
      end
      h.write_file(stop, "")
      for _ = 1, 200 do -- bounded wait for the racer to stop
        if h.exists(done) then break end
        os.execute("sleep 0.05")
      end
      assert.is_true(h.exists(done), "the racer did not run or did not stop")
      assert.is_true(tonumber(h.read(done)) > 150, "the racer barely ran: " .. h.read(done))
      assert.are.equal("", (h.sh("ls -A " .. h.q(ws.outside))))
      local real = h.sh("test -L " .. h.q(ws.root .. "/d") .. " && echo s || echo d"):gsub("%s", "")
      for _, i in ipairs(written) do
        assert.are.equal("data " .. i, h.read(ws.root .. "/" .. real .. "/f" .. i))
      end
      for code in pairs(refused) do assert.are.equal("symlink", code) end
    end)
    h.write_file(stop, "")
    assert(ok, err)
  end)

  it("documents the CLI in --help", function()
    local out, status = h.sh(h.join({ h.bin, "write", "--help" }))
    assert.are.equal(0, status)
    for _, word in ipairs({ "--root", "--path", "--path-hex", "--max-bytes", "--no-overwrite", "Landlock",
      "openat2", "RESOLVE_NO_SYMLINKS", "too_large", "exists" }) do
      assert.truthy(out:find(word, 1, true), "help lacks " .. word)
    end
  end)
end)
