-- glsb.workspace.stage_stdin / stdin_argv: the one way a provider whose channel has no stdin gives a
-- program its stdin (opensandbox, e2b, bedrock): a staged file, opened and unlinked before the program.
local workspace = require "glsb.workspace"
local errors = require "glsb.errors"
local shell = require "glsb.shell"

describe("glsb.workspace stdin staging #unit", function()
  it("uploads the bytes through _upload under a fresh name in the staging dir", function()
    local got = {}
    local sb = { _upload = function(_, files, o) got[#got + 1] = { files = files, opts = o } end }
    local a = workspace.stage_stdin(sb, "hello", { timeout = 7 })
    local b = workspace.stage_stdin(sb, "", { dir = "/opt/x" })
    assert.matches("^/tmp/%.glsb/stdin%-%x+$", a)
    assert.matches("^/opt/x/stdin%-%x+$", b)
    assert.are_not.equal(a:match("[^/]*$"), b:match("[^/]*$"))
    assert.are.same({ filename = a:match("[^/]*$"), data = "hello", path = a }, got[1].files[1])
    assert.are.same({ upload_dir = "/tmp/.glsb", timeout = 7 }, got[1].opts)
    assert.is_nil(got[2].opts.timeout, "the call's own budget: none")
  end)

  it("a failed upload is a WorkspaceError[workspace] that keeps its cause", function()
    local cause = { phase = "connect", code = "COULDNT_CONNECT", retry_safe = true, message = "refused" }
    local sb = { _upload = function() error(cause, 0) end }
    local ok, err = pcall(workspace.stage_stdin, sb, "x")
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.WorkspaceError))
    assert.are.equal("workspace", err.stage)
    assert.are.equal(cause, err.cause)
    assert.matches("staging stdin failed %(nothing ran%)", err.message)
  end)

  it("stdin_argv runs the argv exactly with the file as stdin, unlinked before it starts", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write("line one\nit's $(id)\n")
    f:close()
    local argv = workspace.stdin_argv(path, { "/bin/sh", "-c", 'cat; test -e "$1" && echo still there', "x", path })
    local p = io.popen(shell.join(argv))
    local out = p:read("a")
    p:close()
    assert.are.equal("line one\nit's $(id)\n", out)
    assert.is_nil(io.open(path, "rb"), "the staged file is gone")
    p = io.popen(shell.join(workspace.stdin_argv("/nonexistent/stdin", { "/bin/cat" })) .. " 2>/dev/null; echo $?")
    assert.are.equal("127\n", p:read("a"))
    p:close()
  end)
end)
