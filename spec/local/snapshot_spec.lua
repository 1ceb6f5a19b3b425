-- sb:snapshot{name} on the local provider (issue 24): what the sandbox can write (/home/user, /files,
-- /tmp) archived inside it by `glsb-confine pack` on the control channel, kept as a content-addressed
-- layer of the template cache, unpacked by each sandbox created from it (providers/local/snapshot.lua,
-- template.lua, agent.py). Filesystem only: processes and the interpreter's memory are not kept. #local
local glsb = require "glsb"
local helper = require "local.helper"

local Status = glsb.ExecutionStatus
local errors = glsb.errors

describe("local snapshots #local", function()
  local tmp, cache, root, wheels

  local function opts(extra)
    local o = { cache_dir = cache, host_workspace_dir = root, timeout = 120 }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end

  local function sh(sb, cmd)
    local r = sb:execute_command(cmd)
    assert.are.equal(0, r.code, tostring(r))
    return r.stdout
  end

  local function scratch() return helper.list_dir(cache .. "/local/tmp") end

  setup(function()
    tmp = helper.private_tmp()
    os.execute("chmod 755 " .. helper.q(tmp))
    cache, root, wheels = tmp .. "/cache", tmp .. "/ws", tmp .. "/wheels"
    os.execute("mkdir -m 755 " .. helper.q(root) .. " " .. helper.q(wheels))
    helper.make_wheel(wheels, "glsbtiny", "0.1", "VALUE = 42\n")
  end)

  teardown(function()
    local left, tmp_left = helper.list_dir(helper.workspace_root(root)), scratch()
    helper.rm_rf(tmp)
    assert.are.same({}, left)
    assert.are.same({}, tmp_left)
  end)

  it("keeps the files of /home/user, /files and /tmp as they were (modes, times, links, holes); not processes", function()
    local sb <close> = glsb.create("local", opts())
    assert.are.equal(Status.SUCCESS, sb:execute_code("in_memory = 1").status)
    sh(sb, "mkdir -p notes private /files/up /tmp/scratch && echo hello > notes/a.txt && echo secret > private/key"
      .. " && chmod 600 private/key && chmod 700 private && echo up > /files/up/x && echo t > /tmp/scratch/t"
      .. " && ln -s /etc/passwd link && ln notes/a.txt hard && truncate -s 300M sparse && mkfifo fifo"
      .. " && touch -d @981158706 notes/a.txt")
    sb:start_command("sleep 300")
    local ref = sb:snapshot { name = "snap-files" }
    assert.are.equal("local", ref.provider)
    assert.are.equal("snapshot", ref.kind)
    assert.are.equal("snap-files", ref.name)
    assert.matches("^%x+$", ref.template_id)
    assert.are.equal(64, #ref.template_id)
    sh(sb, "echo changed > notes/a.txt && rm /files/up/x")

    -- the layer: an archive of the sandbox's bytes, never unpacked on the host; the link is a link in it
    local layer = cache .. "/local/templates/" .. ref.template_id
    assert.are.same({ "meta.json", "workspace.tar" }, helper.list_dir(layer))
    local size = tonumber((helper.sh("stat -c %s " .. helper.q(layer .. "/workspace.tar"))))
    assert.is_true(size < 1024 * 1024, "300 MB of hole archived as a hole: " .. size)
    assert.matches("home/user/link %-> /etc/passwd", (helper.sh("tar -tvf " .. helper.q(layer .. "/workspace.tar"))))

    local from <close> = glsb.create("local", opts { template = ref })
    assert.are.equal(ref.template_id, from:info().template_id)
    assert.are.equal("hello\nup\nt\nsecret\n",
      sh(from, "cat notes/a.txt /files/up/x /tmp/scratch/t private/key"))
    assert.are.equal("600 700 2 /etc/passwd 981158706\n",
      sh(from, "stat -c %a private/key; stat -c %a private; stat -c %h hard; readlink link; stat -c %Y notes/a.txt")
        :gsub("\n(%S)", " %1"))
    assert.is_true(tonumber(sh(from, "stat -c %b sparse")) < 64, "the hole stays a hole")
    assert.are.equal(314572800, tonumber(sh(from, "stat -c %s sparse")))
    assert.are.equal(1, from:execute_command("test -e fifo").code, "a fifo is not restored")
    -- processes and memory are not kept
    local r = from:execute_code("in_memory")
    assert.are.equal(Status.ERROR, r.status)
    assert.are.equal("NameError", r.error_name)
    assert.are.equal(1, from:execute_command("pgrep -x sleep").code)
    -- by its name too
    local named <close> = glsb.create("local", opts { template = "snap-files" })
    assert.are.equal("hello\n", sh(named, "cat notes/a.txt"))
  end)

  it("the same files snapshotted twice are one layer; other files another; the builder lists and deletes them", function()
    local sb <close> = glsb.create("local", opts())
    sh(sb, "echo one > f")
    local a, b = sb:snapshot(), sb:snapshot()
    assert.are.equal(a.template_id, b.template_id)
    sh(sb, "echo two > f")
    local c = sb:snapshot { name = "snap-two" }
    assert.are_not.equal(a.template_id, c.template_id)
    local builder = glsb.template("local", { cache_dir = cache })
    local by_id = {}
    for _, t in ipairs(builder:list()) do by_id[t.template_id] = t end
    assert.is_table(by_id[a.template_id])
    assert.are.same({ "snap-two" }, by_id[c.template_id].names)
    assert.is_true(builder:delete("snap-two"))
    local ok, err = pcall(glsb.create, "local", opts { template = c })
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxStartError), tostring(err))
    assert.matches("not found", tostring(err))
  end)

  it("a sandbox of a template: its snapshot keeps the template's packages, env and workdir", function()
    local res = glsb.template("local", { cache_dir = cache }):ensure {
      name = "snap-base", packages = { "glsbtiny" }, env = { MODE = "fast" }, workdir = "/home/user/data",
      files = { { path = "data/seed.txt", data = "seed" } }, provider = { pip_find_links = wheels },
    }
    local sb <close> = glsb.create("local", opts { template = res.ref.template_id })
    sh(sb, "echo added > added.txt")
    local ref = sb:snapshot()
    local from <close> = glsb.create("local", opts { template = ref })
    local r = from:execute_code("import glsbtiny, os; print(glsbtiny.VALUE, os.environ['MODE'], os.getcwd(), "
      .. "open('seed.txt').read(), open('added.txt').read().strip())")
    assert.are.equal("42 fast /home/user/data seed added\n", r.stdout, tostring(r))
    -- a build does not start from a snapshot (its files are an archive only a sandbox unpacks): said so
    local ok, err = pcall(function()
      return glsb.template("local", { cache_dir = cache }):ensure { name = "from-snap", base_template = ref.template_id,
        files = { { path = "x", data = "x" } } }
    end)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.TemplateBuildError), tostring(err))
    assert.matches("is a snapshot", tostring(err))
  end)

  it("what the sandbox sets does not change how it is archived (TAR_OPTIONS, a tar on its PATH)", function()
    local sb <close> = glsb.create("local", opts { env = { TAR_OPTIONS = "--dereference",
      PATH = "/home/user/bin:/usr/bin:/bin" } })
    sh(sb, "mkdir bin && printf '#!/bin/sh\\necho fake > /tmp/fake-tar-ran\\n' > bin/tar && chmod +x bin/tar"
      .. " && ln -s /etc/hostname link")
    local from <close> = glsb.create("local", opts { template = sb:snapshot() })
    assert.are.equal("/etc/hostname\n", sh(from, "readlink link"))
    assert.are.equal(1, sb:execute_command("test -e /tmp/fake-tar-ran").code)
  end)

  it("fails as SandboxExecutionError[snapshot] saying why, leaves nothing, and the sandbox goes on", function()
    local sb <close> = glsb.create("local", opts())
    sh(sb, "echo x > unreadable && chmod 000 unreadable")
    local ok, err = pcall(sb.snapshot, sb)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.SandboxExecutionError), tostring(err))
    assert.are.equal("snapshot", err.stage)
    assert.matches("home/user/unreadable: Cannot open: Permission denied", tostring(err), 1, true)
    assert.are.same({}, scratch())
    sh(sb, "rm -f unreadable")

    -- an archive past its cap is refused (the cap comes from disk_mb: here made small)
    local snapshot = require "glsb.providers.local.snapshot"
    local max_bytes = snapshot.max_bytes
    snapshot.max_bytes = function() return 64 * 1024 end
    sh(sb, "head -c 1000000 /dev/urandom > big")
    ok, err = pcall(sb.snapshot, sb)
    snapshot.max_bytes = max_bytes
    assert.is_false(ok)
    assert.matches("the archive of the files is larger than 65536 bytes", tostring(err), 1, true)
    assert.are.same({}, scratch())

    ok, err = pcall(sb.snapshot, sb, { timeout = 0.001 })
    assert.is_false(ok)
    assert.matches("snapshot: timed out", tostring(err), 1, true)
    assert.are.same({}, scratch())

    -- the control channel is fine after each: files, and a snapshot that works
    sb.files:write("after.txt", "still here")
    assert.are.equal("still here", sb.files:read("after.txt"))
    assert.is_string(sb:snapshot().template_id)

    -- misuse: an argument error at the caller's line
    ok, err = pcall(sb.snapshot, sb, { name = "../escape" })
    assert.is_false(ok)
    assert.is_string(err)
    assert.matches("snapshot_spec.lua:%d+: snapshot: name \"../escape\" must be", err)
    ok, err = pcall(sb.snapshot, sb, { nmae = "x" })
    assert.is_false(ok)
    assert.matches("unknown option 'nmae' %(did you mean 'name'%?%)", err)
  end)
end)
