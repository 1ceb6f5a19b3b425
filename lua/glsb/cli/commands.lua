-- glsb.cli.commands: every command of `glsb`, declared once: its flags, arguments, help and examples
-- (the source of `glsb CMD --help`, docs/cli.md and the bash and zsh completion: glsb.cli.docs) and
-- the function that runs it, each a few calls of the public API (require "glsb"): no logic the library
-- lacks. A command's run(ctx, flags, args) returns the exit status (glsb.cli.status); what goes wrong is
-- raised (a usage error through glsb.cli.args.usage, a glsb error object, or a Lua error).

local args = require "glsb.cli.args"
local render = require "glsb.cli.render"

local M = {}

local status = require "glsb.cli.status"
local CODE = status.CODE

---------------------------------------------------------------------------
-- Shared flags
---------------------------------------------------------------------------

local F = {
  provider = { name = "provider", short = "p", arg = "P", complete = "provider",
    help = "the provider: local, e2b, opensandbox, bedrock (default: $GLSB_PROVIDER, else local)" },
  option = { name = "option", short = "o", arg = "K=V", multi = true,
    help = "a provider option, as in the library (`-o memory_mb=512`, `-o network=true`, `-o api_url=...`); "
      .. "true/false, numbers and JSON ({...}, [...]) are read as such" },
  quiet = { name = "quiet", short = "q", help = "no progress lines and no notes on stderr" },
  json = { name = "json", help = "JSON: one object per line (a listing), or one object" },
  help = { name = "help", short = "h", help = "this help" },
  metadata = { name = "metadata", short = "m", arg = "K=V", multi = true,
    help = "only sandboxes with this label (repeatable: all must match)" },
  timeout = { name = "timeout", arg = "S", type = "number",
    help = "seconds the code may run (default 300; <= 0: none)" },
  env = { name = "env", short = "e", arg = "K=V", multi = true,
    help = "an environment variable of the run (repeatable)" },
}

local function flags(...)
  local out = {}
  for _, f in ipairs({ ... }) do out[#out + 1] = type(f) == "string" and F[f] or f end
  return out
end

---------------------------------------------------------------------------
-- Helpers every command uses
---------------------------------------------------------------------------

local function glsb() return require "glsb" end

-- The provider's options from -o K=V (credentials and endpoints come from where the library reads them:
-- the environment, as E2B_API_KEY, OPEN_SANDBOX_DOMAIN, the AWS chain).
local function provider_opts(fl)
  local o = {}
  for k, v in pairs(args.pairs_of(fl.option, "--option")) do o[k] = args.value_of(v) end
  return o
end

local function read_local(path)
  if path == "-" then return io.stdin:read("a") end
  local f, err = io.open(path, "rb")
  if not f then args.usage("cannot read %s: %s", path, tostring(err):gsub("^[^:]*: ", "")) end
  local data = f:read("a")
  f:close()
  if data == nil then args.usage("cannot read %s (a directory?)", path) end
  return data
end

-- A failed write (a full disk, a closed pipe) is a failure of the copy, not "copied" and exit 0: the
-- buffered bytes meet the disk at flush or close, so both are checked.
local function write_local(path, data)
  local f, err
  if path == "-" then f = io.stdout else f, err = io.open(path, "wb") end
  local ok = f ~= nil
  if f then
    ok, err = f:write(data)
    if ok then ok, err = f:flush() end
    if path ~= "-" then
      local closed, cerr = f:close()
      if ok and not closed then ok, err = nil, cerr end
    end
  end
  if not ok then
    error({ cli_failure = "cannot write " .. (path == "-" and "standard output" or path) .. ": "
      .. tostring(err):gsub("^[^:]*: ", "") }, 0)
  end
end

-- One JSON object per line. lua-cjson writes "/" as "\/" (valid, and noise in paths and URLs): outside
-- strings there is no "/", inside one an escaped backslash is "\\", so each "\/" left is that escape.
local function json_line(t)
  io.stdout:write((require("glsb.http").encode_json(t):gsub("\\/", "/")), "\n")
end

-- A handle on an existing sandbox, never terminated when glsb ends (keep_alive).
local function connect(ctx, fl, id)
  local o = provider_opts(fl)
  o.keep_alive = true
  return glsb().connect(ctx.provider, id, o)
end

-- Streams a call's output as it comes: each line to our stdout / stderr, flushed (a pipe sees it live).
-- A line's newline is written when the next line of either stream comes, or by finish(r) when the
-- stream's output ended with one: the bytes are the program's, a last line without a newline too
-- (only the last line of a stream reaches a callback without its newline having been there).
local function streamer()
  local pending = {}
  local streams = { stdout = io.stdout, stderr = io.stderr }
  local function settle()
    for which, p in pairs(pending) do
      if p then
        streams[which]:write("\n")
        pending[which] = false
      end
    end
  end
  local s = {}
  local function on(which)
    return function(line)
      settle()
      streams[which]:write(line)
      streams[which]:flush()
      pending[which] = true
    end
  end
  s.on_stdout, s.on_stderr = on("stdout"), on("stderr")
  function s.finish(r)
    for which, p in pairs(pending) do
      local text = type(r[which]) == "string" and r[which] or ""
      if p and (text:sub(-1) == "\n" or r[which .. "_truncated"]) then streams[which]:write("\n") end
      pending[which] = false
      streams[which]:flush()
    end
  end
  return s
end

local function stream_opts(o, s)
  o.on_stdout, o.on_stderr = s.on_stdout, s.on_stderr
  return o
end

local LANGUAGE_OF_EXTENSION = { py = "python", js = "javascript", mjs = "javascript", cjs = "javascript",
  ts = "typescript", sh = "bash", bash = "bash", r = "r", R = "r", java = "java" }

-- on_progress for a transfer: a bar on the progress line (big transfers only: glsb.progress)
local function bar(line, what)
  if not line.enabled then return nil end
  return function(done, total) line:transfer(done, total, what) end
end

-- "2026-01-02T03:04:05Z" -> "3m ago" / "in 4m" (people read ages, not timestamps); "" for nil.
local function ago(iso)
  local t = iso and require("glsb.time").parse_iso(iso)
  if not t then return "" end
  local d = t - require("glsb.time").wall()
  local a = math.abs(d)
  local s
  if a < 60 then s = string.format("%ds", a // 1)
  elseif a < 3600 then s = string.format("%dm", a // 60)
  elseif a < 86400 then s = string.format("%dh%02dm", a // 3600, (a % 3600) // 60)
  else s = string.format("%dd%02dh", a // 86400, (a % 86400) // 3600) end
  return d < 0 and (s .. " ago") or ("in " .. s)
end

-- Prints rows (arrays of strings) under a header, each column as wide as its widest cell.
local function table_out(header, rows)
  local w = {}
  for i, h in ipairs(header) do w[i] = #h end
  for _, r in ipairs(rows) do
    for i, c in ipairs(r) do w[i] = math.max(w[i] or 0, #tostring(c)) end
  end
  local function line(r)
    local cells = {}
    for i = 1, #header do
      local c = tostring(r[i] or "")
      cells[i] = i < #header and (c .. string.rep(" ", w[i] - #c)) or c
    end
    io.stdout:write((table.concat(cells, "  "):gsub("%s+$", "")), "\n")
  end
  line(header)
  for _, r in ipairs(rows) do line(r) end
end

local function metadata_text(m)
  if type(m) ~= "table" then return "" end
  local keys = {}
  for k in pairs(m) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. "=" .. tostring(m[k]) end
  return table.concat(keys, ",")
end

-- A yes/no question on the terminal; false without asking when stdin is not one.
local function confirm(question)
  if not require("glsb.process").isatty(0) then return false, "not a terminal" end
  io.stderr:write(question, " [y/N] ")
  io.stderr:flush()
  local answer = io.stdin:read("l") or ""
  return answer:match("^%s*[yY]") ~= nil
end

local function note(ctx, fmt, ...)
  if ctx.quiet then return end
  ctx.line:above(string.format(fmt, ...))
  if not ctx.line.enabled then
    io.stderr:write(string.format(fmt, ...), "\n")
    io.stderr:flush()
  end
end

---------------------------------------------------------------------------
-- run
---------------------------------------------------------------------------

local function run_cmd(ctx, fl, pos)
  if #pos ~= 1 then args.usage("wants one FILE (or - for standard input), got %d", #pos) end
  local path = pos[1]
  local code = read_local(path)
  local language = fl.language or LANGUAGE_OF_EXTENSION[path:match("%.([%w]+)$") or ""]
  local uploads = {}
  for _, spec in ipairs(fl.file or {}) do
    local lp, rp = spec:match("^(.-):(/.*)$")
    lp = lp or spec
    uploads[#uploads + 1] = { data = read_local(lp), remote = rp or ("/files/" .. lp:match("[^/]+$")) }
  end
  local o = provider_opts(fl)
  o.language, o.template, o.keep_alive = language, fl.template, fl.keep == true
  local md = args.pairs_of(fl.metadata, "--metadata")
  if next(md) then o.metadata = md end
  if fl.package then o.additional_packages = fl.package end
  if fl.lease ~= nil then
    o.timeout = fl.lease
  elseif o.timeout == nil then
    -- the lease outlasts the run it was made for, --timeout's default too (<= 0: no limit either): a
    -- lease that ended with the run would take the sandbox, not just the code, at the run's limit
    local t = fl.timeout or require("glsb.constants").DEFAULT_CODE_TIMEOUT
    o.timeout = t <= 0 and 0 or math.max(300, t + 60)
  end
  local env = args.pairs_of(fl.env, "--env")
  local out_dir = fl.out
  if fl.keep then
    -- a provider whose sandboxes no other process can reach (its attach_unsupported says why: local's
    -- end with the process that made them) cannot keep one for a later command
    local cls = glsb().provider(ctx.provider).Sandbox
    if type(cls._attach) ~= "function" or cls.attach_unsupported then
      args.usage("--keep: provider '%s' cannot keep a sandbox past this command%s", ctx.provider,
        cls.attach_unsupported and (": " .. cls.attach_unsupported) or "")
    end
  end
  -- on a terminal, a step counter over what the run does before the code starts: create (its own
  -- stages from create's on_progress), the package install, each upload
  local line = ctx.line
  local steps = 1 + (o.additional_packages and 1 or 0) + #uploads
  local step_of = { create = 1, template = 1, package_install = 2 }
  o.on_progress = function(p)
    local i = step_of[p.stage]
    if i then line:step(i, steps, p.message) end
  end
  line:step(1, steps, "creating a " .. ctx.provider .. " sandbox")
  local sb = glsb().create(ctx.provider, o)
  if fl.keep then
    io.stderr:write(string.format("glsb run: sandbox %s kept (glsb exec -p %s %s -- CMD; glsb kill -p %s %s)\n",
      tostring(sb.sandbox_id), ctx.provider, tostring(sb.sandbox_id), ctx.provider, tostring(sb.sandbox_id)))
    io.stderr:flush()
  end
  for i, u in ipairs(uploads) do
    line:step(steps - #uploads + i, steps, string.format("uploading %s (%s)", u.remote,
      require("glsb.progress").bytes(#u.data)))
    sb.files:write(u.remote, u.data, { on_progress = bar(line, "upload " .. u.remote) })
  end
  line:done()
  local st = streamer()
  local r = sb:execute_code(code, stream_opts({ timeout = fl.timeout, env = next(env) and env or nil }, st))
  st.finish(r)
  if r.text ~= nil then
    io.stdout:write(tostring(r.text), "\n")
    io.stdout:flush()
  end
  local exit_status = status.of(r)
  if r.status ~= "success" then
    local msg = tostring(r.error or ""):gsub("%s+$", "")
    if r.status ~= "error" then
      io.stderr:write("glsb run: ", r.status, msg ~= "" and (": " .. msg) or "", "\n")
    elseif r.error_name ~= "SystemExit" and msg ~= "" and not (r.stderr or ""):find(msg, 1, true) then
      -- a traceback the code's stderr did not show already
      io.stderr:write(msg, "\n")
    end
  end
  if out_dir then
    local fs = require "glsb.fs"
    fs.mkdir(out_dir, 493) -- 0755; an existing folder is fine, a failure shows at the write
    for _, p in ipairs(glsb().results.save(r, out_dir)) do note(ctx, "wrote %s", p) end
  end
  if not fl.keep then sb:terminate() end
  return exit_status
end

---------------------------------------------------------------------------
-- ls, info, kill, exec, cp
---------------------------------------------------------------------------

local function ls_cmd(ctx, fl, pos)
  if #pos > 0 then args.usage("takes no arguments, got '%s'", pos[1]) end
  local o = provider_opts(fl)
  local md = args.pairs_of(fl.metadata, "--metadata")
  if next(md) then o.metadata = md end
  if fl.state then o.state = fl.state end
  local refs = glsb().list(ctx.provider, o)
  if fl.ids then
    for _, r in ipairs(refs) do io.stdout:write(tostring(r.sandbox_id), "\n") end
    return CODE.OK
  end
  if fl.json then
    for _, r in ipairs(refs) do json_line(r) end
    return CODE.OK
  end
  local rows = {}
  for _, r in ipairs(refs) do
    rows[#rows + 1] = { r.sandbox_id, r.provider, r.state or "", r.template_id or "", ago(r.started_at),
      ago(r.ends_at), metadata_text(r.metadata) }
  end
  table_out({ "ID", "PROVIDER", "STATE", "TEMPLATE", "STARTED", "ENDS", "METADATA" }, rows)
  return CODE.OK
end

-- What the provider says of sandbox id: its info() through a handle when it runs; its entry in glsb.list
-- when it is paused (a connect would resume it: E2B, OpenSandbox) or where no other process can hold a
-- handle (attach_unsupported: local).
local function info_of(ctx, fl, id)
  local cls = glsb().provider(ctx.provider).Sandbox
  local listed
  if type(cls._list) == "function" then
    for _, r in ipairs(glsb().list(ctx.provider, provider_opts(fl))) do
      if r.sandbox_id == id then listed = r end
    end
  end
  if listed and (cls.attach_unsupported or listed.state ~= "running") then return listed end
  if cls.attach_unsupported then
    require("glsb.errors").raise("SandboxStartError", "connect", string.format("no %s sandbox '%s' (glsb ls -p %s "
      .. "lists them)", ctx.provider, id, ctx.provider))
  end
  return connect(ctx, fl, id):info()
end

local function info_cmd(ctx, fl, pos)
  if #pos ~= 1 then args.usage("wants one sandbox ID, got %d", #pos) end
  local t = info_of(ctx, fl, pos[1])
  local plain = {}
  for k, v in pairs(t) do plain[k] = v end
  if fl.json then
    json_line(plain)
    return CODE.OK
  end
  local keys = {}
  for k in pairs(plain) do keys[#keys + 1] = k end
  table.sort(keys)
  local w = 0
  for _, k in ipairs(keys) do w = math.max(w, #k) end
  for _, k in ipairs(keys) do
    local v = plain[k]
    v = type(v) == "table" and (k == "metadata" and metadata_text(v) or require("glsb.http").encode_json(v))
      or tostring(v)
    io.stdout:write(k, string.rep(" ", w - #k + 2), v, "\n")
  end
  return CODE.OK
end

local function kill_cmd(ctx, fl, pos)
  local ids = {}
  for _, id in ipairs(pos) do ids[#ids + 1] = id end
  if fl.all then
    if #pos > 0 then args.usage("takes IDs or --all, not both") end
    local o = provider_opts(fl)
    local md = args.pairs_of(fl.metadata, "--metadata")
    if next(md) then o.metadata = md end
    for _, r in ipairs(glsb().list(ctx.provider, o)) do ids[#ids + 1] = r.sandbox_id end
    if #ids == 0 then
      note(ctx, "glsb kill: no %s sandbox matches", ctx.provider)
      return CODE.OK
    end
  elseif #ids == 0 then
    args.usage("wants sandbox IDs, or --all (with --metadata K=V to narrow it)")
  elseif fl.metadata then
    args.usage("--metadata narrows --all; with IDs it means nothing")
  end
  if #ids > 1 and not fl.yes then
    local ok, why = confirm(string.format("kill %d %s sandboxes (%s)?", #ids, ctx.provider, table.concat(ids, " ")))
    if not ok then
      if why then args.usage("%d sandboxes would be killed: pass --yes (stdin is not a terminal to ask on)", #ids) end
      io.stderr:write("glsb kill: nothing killed\n")
      return CODE.FAILED
    end
  end
  local result = CODE.OK
  local o = provider_opts(fl)
  for _, id in ipairs(ids) do
    local ok, err = pcall(glsb().kill, ctx.provider, id, o)
    if ok then
      io.stdout:write("killed ", id, "\n")
      io.stdout:flush()
    else
      if render.is_interrupt(err) then error(err, 0) end
      io.stderr:write("glsb kill: ", id, ": ", render.line(err), "\n")
      -- no such sandbox (connect failed) is START, as for info and exec; any other failure wins over it
      local this = render.exit_status(err)
      if result == CODE.OK or this ~= CODE.START then result = this end
    end
  end
  return result
end

local function exec_cmd(ctx, fl, pos)
  if #pos < 2 then args.usage("wants a sandbox ID and a command (glsb exec ID -- CMD ARGS...)") end
  local id = pos[1]
  local words = {}
  for i = 2, #pos do words[#words + 1] = pos[i] end
  -- one word is a shell command line as it is ('echo $HOME | wc'); several are an exact argv
  local command = #words == 1 and words[1] or require("glsb.shell").join(words)
  local sb = connect(ctx, fl, id)
  local env = args.pairs_of(fl.env, "--env")
  local st = streamer()
  local r = sb:execute_command(command, stream_opts({ timeout = fl.timeout, cwd = fl.cwd,
    env = next(env) and env or nil }, st))
  st.finish(r)
  local exit_status = status.of(r)
  if r.status ~= "success" and r.code == nil then
    io.stderr:write("glsb exec: ", r.status, ": ", tostring(r.error or ""), "\n")
  end
  return exit_status
end

-- "ID:/path" -> id, path; a local path -> nil, path. A word is remote when what comes before its first
-- ':' has no '/' (as scp and docker cp read it): "./a:b" and "/x:y" are local.
local function side(word)
  local id, path = word:match("^([^/:]+):(.*)$")
  if id and path ~= "" then return id, path end
  return nil, word
end

local function cp_cmd(ctx, fl, pos)
  if #pos ~= 2 then args.usage("wants SRC and DST, one of them ID:/path (glsb cp a.csv ID:/files/a.csv)") end
  local sid, spath = side(pos[1])
  local did, dpath = side(pos[2])
  if (sid == nil) == (did == nil) then
    args.usage("one side is a sandbox path (ID:/path) and the other a local path or -, got '%s' and '%s'",
      pos[1], pos[2])
  end
  if did then
    local data = read_local(spath)
    if dpath:sub(-1) == "/" then dpath = dpath .. (spath == "-" and "stdin" or spath:match("[^/]+$")) end
    local sb = connect(ctx, fl, did)
    sb.files:write(dpath, data, { timeout = fl.timeout, on_progress = bar(ctx.line, "upload " .. dpath) })
    ctx.line:done()
    note(ctx, "copied %s to %s:%s (%s)", spath, did, dpath, require("glsb.progress").bytes(#data))
  else
    local sb = connect(ctx, fl, sid)
    local data = sb.files:read(spath, { timeout = fl.timeout, on_progress = bar(ctx.line, "download " .. spath) })
    ctx.line:done()
    local st = dpath ~= "-" and require("glsb.fs").lstat(dpath)
    if st and st.type == "dir" then dpath = dpath:gsub("/+$", "") .. "/" .. spath:match("[^/]+$") end
    write_local(dpath, data)
    if dpath ~= "-" then
      note(ctx, "copied %s:%s to %s (%s)", sid, spath, dpath, require("glsb.progress").bytes(#data))
    end
  end
  return CODE.OK
end

---------------------------------------------------------------------------
-- template build / ls / rm
---------------------------------------------------------------------------

local function builder(ctx, fl)
  local o = provider_opts(fl)
  local line = ctx.line
  o.progress = false -- the CLI draws the line itself, on stderr, with the log above it
  o.on_log = function(e)
    if ctx.quiet then return end
    local msg = tostring(e.message or "")
    if line.enabled then
      if e.status then line:set(tostring(e.status)) end
      line:above(msg)
    else
      io.stderr:write(msg, "\n")
      io.stderr:flush()
    end
  end
  return glsb().template(ctx.provider, o)
end

local function template_build_cmd(ctx, fl, pos)
  if #pos ~= 1 then args.usage("wants one SPEC.lua (a file returning the table builder:ensure takes)") end
  local chunk, err = loadfile(pos[1])
  if not chunk then args.usage("cannot load %s: %s", pos[1], tostring(err)) end
  local spec = chunk()
  if type(spec) ~= "table" then args.usage("%s returned %s, not the table builder:ensure takes", pos[1], type(spec)) end
  if fl.name then spec.name = fl.name end
  local b = builder(ctx, fl)
  ctx.log_shown = not ctx.quiet
  local started = require("glsb.loop").now()
  ctx.line.label = ctx.provider .. " template " .. tostring(spec.name)
  ctx.line:show("building", true)
  local res = b:ensure(spec)
  ctx.line:done(string.format("%s in %.1fs", res.built and "built" or "already built",
    require("glsb.loop").now() - started))
  if fl.json then
    json_line({ name = spec.name, built = res.built, hash = res.hash, ref = res.ref })
  else
    io.stdout:write(tostring(res.ref.template_id or res.ref.name), "\n")
  end
  return CODE.OK
end

local function template_ls_cmd(ctx, fl, pos)
  if #pos > 0 then args.usage("takes no arguments, got '%s'", pos[1]) end
  local list = builder(ctx, fl):list()
  if fl.json then
    for _, t in ipairs(list) do json_line(t) end
    return CODE.OK
  end
  local rows = {}
  for _, t in ipairs(list) do
    local built = t.built_at
    if type(built) == "number" then built = require("glsb.time").iso(built) end
    rows[#rows + 1] = { t.name or "", t.template_id or "", ago(built),
      type(t.names) == "table" and table.concat(t.names, ",") or "" }
  end
  table_out({ "NAME", "TEMPLATE_ID", "BUILT", "NAMES" }, rows)
  return CODE.OK
end

local function template_rm_cmd(ctx, fl, pos)
  if #pos == 0 then args.usage("wants the NAME (or id) of a template") end
  local b = builder(ctx, fl)
  local missing = 0
  for _, name in ipairs(pos) do
    if b:delete(name) then
      io.stdout:write("deleted ", name, "\n")
    else
      missing = missing + 1
      io.stderr:write("glsb template rm: no ", ctx.provider, " template named ", name, "\n")
    end
  end
  return missing == 0 and CODE.OK or CODE.FAILED
end

---------------------------------------------------------------------------
-- doctor, gc, mcp
---------------------------------------------------------------------------

local function doctor_cmd(_ctx, fl, pos)
  if #pos > 0 then args.usage("takes no arguments, got '%s'", pos[1]) end
  local doctor = require "glsb.doctor"
  if fl.json then
    local t = doctor.check()
    json_line(t)
    return t.ready and CODE.OK or CODE.FAILED
  end
  local text, ready = doctor.report()
  io.stdout:write(text)
  return ready and CODE.OK or CODE.FAILED
end

local function gc_cmd(_ctx, fl, pos)
  local reaper = require "glsb.providers.local.reaper"
  if fl.json then
    local r = reaper.gc(pos)
    for _, d in ipairs(r.freezers) do json_line({ removed = d }) end -- a dead owner's paused sandbox's
    for _, d in ipairs(r.removed) do json_line({ removed = d }) end
    for _, f in ipairs(r.failed) do json_line({ failed = f }) end
    for _, why in ipairs(r.refused) do json_line({ refused = why }) end
    return #r.refused == 0 and CODE.OK or CODE.FAILED
  end
  local ok, err = pcall(reaper.main, pos, "glsb gc")
  if ok then return CODE.OK end
  if render.is_interrupt(err) then error(err, 0) end
  io.stderr:write(tostring(err), "\n")
  return CODE.FAILED
end

-- The MCP server (issue 23) is glsb.mcp; `glsb mcp` is there when that module is.
local function mcp_available()
  return package.searchpath("glsb.mcp", package.path) ~= nil
end

local function mcp_cmd(_ctx, _fl, pos, words)
  if not mcp_available() then
    error({ cli_failure = "this build has no MCP server (the module glsb.mcp is not installed)" }, 0)
  end
  local a = { [0] = "mcp" }
  for i, w in ipairs(words or pos) do a[i] = w end
  local code = require("glsb.mcp").main(a)
  return math.tointeger(code) or CODE.OK
end

---------------------------------------------------------------------------
-- The declarations
---------------------------------------------------------------------------

M.LIST = {
  {
    name = "run", run = run_cmd, args = "FILE|-", complete_args = "file",
    summary = "run a file of code in a fresh sandbox, streaming its output",
    help = "Creates a sandbox, uploads the --file files, runs FILE (or standard input) in it with its stdout and "
      .. "stderr streamed as they come, prints the value of the last expression if the code ends in one, writes "
      .. "rich results (charts, tables) with --out, terminates the sandbox, and exits with a status that mirrors "
      .. "the outcome (see Exit status). The language comes from FILE's extension (.py python, .js javascript, "
      .. ".ts typescript, .sh bash, .r r) or --language.",
    flags = flags("provider",
      { name = "template", short = "t", arg = "T", help = "the template (id or name) to start from" },
      "timeout", "env",
      { name = "file", short = "f", arg = "LOCAL[:REMOTE]", multi = true, complete = "file",
        help = "upload LOCAL first, to REMOTE (an absolute path; default /files/<its name>) (repeatable)" },
      { name = "language", short = "l", arg = "LANG", help = "python, javascript, typescript, bash, r, java (default: "
        .. "from the extension, else python)" },
      { name = "package", arg = "PKG", multi = true, help = "a pip package installed first (repeatable; Python)" },
      { name = "out", arg = "DIR", complete = "dir", help = "write each rich result to DIR/result-<i>.<ext>" },
      { name = "lease", arg = "S", type = "number",
        help = "the sandbox's lease in seconds (default: --timeout + 60, at least 300; -o timeout=S sets it too)" },
      { name = "keep", help = "keep the sandbox after the run and print its id (on stderr)" },
      { name = "metadata", short = "m", arg = "K=V", multi = true,
        help = "a label kept with the sandbox, for ls and kill --all (repeatable)" },
      "option", "quiet", "help"),
    examples = {
      { "glsb run hello.py", "run a Python file in a local sandbox" },
      { "echo 'print(6 * 7)' | glsb run -", "code from standard input" },
      { "glsb run -p e2b --timeout 60 -e MODE=fast job.py", "on E2B (E2B_API_KEY), with a variable and a time limit" },
      { "glsb run --file data.csv chart.py --out charts/", "upload data.csv to /files, save the charts it shows" },
      { "glsb run -p opensandbox --keep setup.sh", "keep the sandbox for glsb exec / cp later" },
    },
  },
  {
    name = "ls", run = ls_cmd,
    summary = "list the provider's sandboxes",
    help = "Lists the sandboxes the provider's account has (not only this process's): id, provider, state, "
      .. "template, when it started and when its lease ends, labels. On the local provider: this user's "
      .. "sandboxes on this machine, whichever process made them (they can be killed, not connected to).",
    flags = flags("provider", "metadata",
      { name = "state", arg = "STATE", help = "running or paused (default both)" },
      "json", { name = "ids", help = "only the ids, one per line" }, "option", "quiet", "help"),
    examples = {
      { "glsb ls -p e2b", "a table of your E2B sandboxes" },
      { "glsb ls -p e2b --metadata job=nightly --json", "those labelled job=nightly, as JSON lines" },
    },
  },
  {
    name = "info", run = info_cmd, args = "ID", complete_args = "sandbox",
    summary = "show what the provider reports about one sandbox",
    help = "Connects to sandbox ID (it is not terminated) and prints its info(): state, template, labels, "
      .. "started_at, ends_at and what only that provider reports; a paused sandbox (which a connect would "
      .. "resume) and a local one are shown as glsb ls has them.",
    flags = flags("provider", "json", "option", "quiet", "help"),
    examples = { { "glsb info -p e2b ixyz123", "one sandbox's fields" },
      { "glsb info -p e2b ixyz123 --json", "as JSON" } },
  },
  {
    name = "kill", run = kill_cmd, args = "ID...", complete_args = "sandbox",
    summary = "terminate sandboxes by id, or all that match labels",
    help = "Terminates each sandbox ID (glsb.kill), or with --all every sandbox of the provider (narrowed by "
      .. "--metadata). Asks before killing more than one unless --yes (and refuses to guess when stdin is not a "
      .. "terminal). A local sandbox of another process of yours ends as if its owner had terminated it.",
    flags = flags("provider", { name = "all", help = "every sandbox the listing gives" }, "metadata",
      { name = "yes", short = "y", help = "do not ask before killing more than one" }, "option", "quiet", "help"),
    examples = {
      { "glsb kill -p e2b ixyz123", "one sandbox" },
      { "glsb kill -p e2b --all --metadata job=nightly --yes", "every sandbox labelled job=nightly" },
    },
  },
  {
    name = "exec", run = exec_cmd, args = "ID -- CMD...", rest = 1, complete_args = "sandbox",
    summary = "run a command in a running sandbox",
    help = "Runs CMD in sandbox ID with its output streamed, and exits with the command's status. Several words "
      .. "are the exact argv (glsb exec ID -- ls -la /tmp); one word is a shell command line as it is "
      .. "(glsb exec ID 'echo $HOME | wc -c'). Flags of glsb go before ID.",
    flags = flags("provider", { name = "timeout", arg = "S", type = "number",
      help = "seconds the command may run (default 30; <= 0: none)" }, "env",
      { name = "cwd", arg = "DIR", help = "the working directory" }, "option", "quiet", "help"),
    examples = {
      { "glsb exec -p e2b ixyz123 -- python3 -c 'print(1)'", "a program and its arguments" },
      { "glsb exec -p e2b ixyz123 'ls /files | wc -l'", "a shell line" },
    },
  },
  {
    name = "cp", run = cp_cmd, args = "SRC DST", complete_args = "file",
    summary = "copy a file into or out of a sandbox (ID:/path on one side)",
    help = "Copies one file between this machine and sandbox ID: `glsb cp LOCAL ID:/path` uploads, "
      .. "`glsb cp ID:/path LOCAL` downloads. - is standard input or output; a DST ending in / (or a local "
      .. "folder) takes SRC's name. A relative sandbox path is below its workspace root (/home/user).",
    flags = flags("provider", { name = "timeout", arg = "S", type = "number",
      help = "seconds for the transfer (default 60; <= 0: none)" }, "option", "quiet", "help"),
    examples = {
      { "glsb cp -p e2b data.csv ixyz123:/files/", "upload" },
      { "glsb cp -p e2b ixyz123:/home/user/out.png .", "download into this folder" },
    },
  },
  {
    name = "template", group = true,
    summary = "build, list and delete templates (build, ls, rm)",
    help = "Templates are sandbox images built once from a spec (docs: README, Templates).",
    subcommands = {
      {
        name = "build", run = template_build_cmd, args = "SPEC.lua", complete_args = "file",
        summary = "build a template from a spec file, streaming its log",
        help = "SPEC.lua returns the table builder:ensure takes ({name = ..., packages = {...}, files = {...}, "
          .. "run = {...}}). The same spec builds once: a second build answers at once. The build log streams "
          .. "to stderr, under a progress line naming the step on a terminal; the template's id goes to stdout.",
        flags = flags("provider", { name = "name", arg = "NAME", help = "the template's name (over the spec's)" },
          "json", "option", "quiet", "help"),
        examples = {
          { "glsb template build analysis.lua", "a local template (content-addressed layers)" },
          { "glsb template build -p e2b analysis.lua --json", "on E2B; the ref as JSON" },
        },
      },
      {
        name = "ls", run = template_ls_cmd,
        summary = "list the templates the provider has",
        flags = flags("provider", "json", "option", "quiet", "help"),
        examples = { { "glsb template ls", "local layers" }, { "glsb template ls -p e2b --json", "as JSON lines" } },
      },
      {
        name = "rm", run = template_rm_cmd, args = "NAME...",
        summary = "delete templates by name or id",
        flags = flags("provider", "option", "quiet", "help"),
        examples = { { "glsb template rm analysis", "the layer and every name of it" } },
      },
    },
  },
  {
    name = "doctor", run = doctor_cmd,
    summary = "what the local provider can do on this machine",
    help = "Lists the confinement features this machine offers the local provider and what it does about each, "
      .. "then creates a sandbox, runs print(1) and terminates it. Exits 126 when local sandboxes cannot start.",
    flags = flags("json", "quiet", "help"),
    examples = { { "glsb doctor", "" }, { "glsb doctor --json", "the findings as one JSON object" } },
  },
  {
    name = "gc", run = gc_cmd, args = "[DIR...]", complete_args = "dir",
    summary = "remove what local sandboxes of killed owners left",
    help = "Removes the workspaces and cgroup leaves of local sandboxes whose owner and supervisor were both "
      .. "killed, in DIR (a host_workspace_dir) or in $TMPDIR (else /tmp) and the template cache's scratch. Only "
      .. "glsb's own folders are touched; a sandbox whose owner lives is never.",
    flags = flags({ name = "json", help = "one JSON object per line: {removed}, {failed}, {refused}" },
      "quiet", "help"),
    examples = { { "glsb gc", "the default places" }, { "glsb gc /var/tmp", "a host_workspace_dir of yours" },
      { "glsb gc --json", "what it removed, as JSON lines" } },
  },
  {
    name = "mcp", run = mcp_cmd, pass_through = true, available = mcp_available,
    summary = "serve sandboxes to an MCP client on stdin/stdout",
    help = "Runs glsb's MCP server (glsb-lua --mcp; README, MCP server) on stdin/stdout for an MCP client "
      .. "(Claude Code, Claude Desktop, Cursor): persistent sandboxes as tools. The words after `mcp` are the "
      .. "server's own options, as they are.",
    flags = flags({ name = "provider", arg = "NAME", help = "the provider the server's sandboxes are made on" },
      { name = "config", arg = "FILE", complete = "file",
        help = "a Lua file returning the server's table: several providers, options, limits" }, "help"),
    examples = { { "glsb mcp --provider e2b", "an MCP server whose sandboxes are E2B's" },
      { "claude mcp add glsb -- glsb mcp", "Claude Code, after make install" } },
  },
}

-- find(name[, list]) -> the declaration of command `name`.
function M.find(name, list)
  for _, c in ipairs(list or M.LIST) do
    if c.name == name then return c end
  end
  return nil
end

return M
