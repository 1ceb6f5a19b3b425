-- glsb.cli: the `glsb` command (docs/cli.md). build/glsb and PREFIX/bin/glsb are links to glsb-lua,
-- which runs M.main(arg) when it is called by that name and exits with what it returns.
--
-- main finds the command (glsb.cli.commands declares each, with its flags and help), parses its flags
-- (glsb.cli.args), runs it and turns what went wrong into one line on stderr and an exit status
-- (glsb.cli.render, glsb.cli.status). Nothing here loads the library or a provider: `glsb --help`
-- costs the Lua state and these modules; a command loads what it calls.

local args = require "glsb.cli.args"
local commands = require "glsb.cli.commands"
local status = require "glsb.cli.status"

local M = {}

local CODE = status.CODE

local function out(text)
  io.stdout:write(text)
  io.stdout:flush()
end

local function debugging()
  local v = os.getenv("GLSB_LOG")
  return v ~= nil and v:lower() == "debug"
end

local function names(list)
  local known = {}
  for _, c in ipairs(list) do known[c.name] = true end
  return known
end

local function unknown_command(word, list, where)
  local near = require("glsb.options").closest(word, names(list))
  args.usage("unknown command '%s'%s%s", word, where and (" of " .. where) or "",
    near and (" (did you mean '" .. near .. "'?)") or "")
end

-- Flags that may come before the command (`glsb -p e2b ls`): moved after it.
local LEADING = { ["-p"] = true, ["--provider"] = true, ["-q"] = false, ["--quiet"] = false }

-- resolve(words) -> cmd, parent, the command's own words; or a text to print (help, version).
local function resolve(words)
  local lead, i = {}, 1
  while words[i] do
    local w = words[i]
    local key = w:match("^(%-%-provider)=") or w
    if LEADING[key] ~= nil then
      lead[#lead + 1] = w
      if LEADING[key] and not w:find("=", 1, true) then
        i = i + 1
        if words[i] == nil then args.usage("flag '%s' needs a value (P)", w) end
        lead[#lead + 1] = words[i]
      end
      i = i + 1
    else
      break
    end
  end
  local name = words[i]
  if name == nil or name == "-h" or name == "--help" then return nil, nil, nil, require("glsb.cli.docs").top() end
  if name == "-v" or name == "--version" then
    return nil, nil, nil, "glsb " .. require("glsb.constants").VERSION .. " (" .. _VERSION .. ")\n"
  end
  if name:sub(1, 1) == "-" then
    args.usage("'%s' before the command: write glsb COMMAND [flags] (glsb --help lists the commands)", name)
  end
  local rest = {}
  for j = i + 1, #words do rest[#rest + 1] = words[j] end
  local docs = function() return require "glsb.cli.docs" end
  if name == "help" then
    local what = rest[1]
    if what == nil then return nil, nil, nil, docs().top() end
    if what == "exit" then return nil, nil, nil, docs().exit_help() end
    if what == "env" then return nil, nil, nil, docs().env_help() end
    if what == "--markdown" then return nil, nil, nil, docs().markdown() end
    local c = commands.find(what)
    if not c then unknown_command(what, commands.LIST) end
    if c.group and rest[2] then
      local s = commands.find(rest[2], c.subcommands)
      if not s then unknown_command(rest[2], c.subcommands, "glsb " .. c.name) end
      return nil, nil, nil, docs().help(s, c)
    end
    return nil, nil, nil, docs().help(c)
  end
  if name == "completion" then
    local shell = rest[1]
    if shell == "bash" then return nil, nil, nil, docs().bash() end
    if shell == "zsh" then return nil, nil, nil, docs().zsh() end
    args.usage("completion wants bash or zsh, got '%s'", tostring(shell))
  end
  local c = commands.find(name)
  if not c then
    local known = names(commands.LIST)
    known.help, known.completion = true, true
    local near = require("glsb.options").closest(name, known)
    args.usage("unknown command '%s'%s", name, near and (" (did you mean '" .. near .. "'?)") or "")
  end
  local parent
  if c.group then
    local sub = rest[1]
    if sub == nil or sub == "-h" or sub == "--help" then return nil, nil, nil, docs().help(c) end
    local s = commands.find(sub, c.subcommands)
    if not s then unknown_command(sub, c.subcommands, "glsb " .. c.name) end
    parent, c = c, s
    table.remove(rest, 1)
  end
  for j = #lead, 1, -1 do table.insert(rest, 1, lead[j]) end
  return c, parent, rest
end

local function run(words, box)
  local cmd, parent, rest, text = resolve(words)
  if text then
    out(text)
    return CODE.OK
  end
  local docs = require "glsb.cli.docs"
  if cmd.pass_through then
    if rest[1] == "--help" or rest[1] == "-h" then
      out(docs.help(cmd, parent))
      return CODE.OK
    end
    return cmd.run({ name = docs.full_name(cmd, parent), quiet = false, line = require("glsb.progress").OFF },
      {}, rest, rest)
  end
  local fl, pos = args.parse(rest, cmd)
  if fl.help then
    out(docs.help(cmd, parent))
    return CODE.OK
  end
  local provider = fl.provider or os.getenv("GLSB_PROVIDER")
  if provider == nil or provider == "" then provider = require("glsb.constants").DEFAULT_PROVIDER end
  local quiet = fl.quiet == true
  local ctx = {
    name = docs.full_name(cmd, parent),
    provider = provider,
    quiet = quiet,
    line = quiet and require("glsb.progress").OFF or require("glsb.progress").line {},
  }
  box.ctx = ctx
  return cmd.run(ctx, fl, pos)
end

-- The command's name for its messages ("glsb run"), from the words as given.
local function command_name(words)
  local parts = { "glsb" }
  for _, w in ipairs(words) do
    if w:sub(1, 1) ~= "-" then
      parts[#parts + 1] = w
      local c = commands.find(w)
      if not (c and c.group) or #parts > 2 then break end
    end
  end
  -- a flag's value (glsb -p e2b ls) is not a command: keep only declared names
  local keep = { "glsb" }
  local c = commands.find(parts[2] or "")
  if c then
    keep[2] = c.name
    if c.group and parts[3] and commands.find(parts[3], c.subcommands) then keep[3] = parts[3] end
  end
  return table.concat(keep, " ")
end

-- main(argv) -> exit status. argv: the arguments after the program's name (argv[1], ...).
function M.main(argv)
  local words = {}
  for i = 1, #(argv or {}) do words[i] = tostring(argv[i]) end
  local trace
  local box = {}
  local ok, result = xpcall(run, function(err)
    if debugging() then trace = debug.traceback(nil, 2) end
    return err
  end, words, box)
  if ok then return math.tointeger(result) or CODE.OK end
  local render = require "glsb.cli.render"
  local err = result
  local line, rest = render.line(err)
  local name = command_name(words)
  io.stderr:write(name, ": ", render.is_interrupt(err) and "interrupted" or line, "\n")
  -- (not when the command showed it already: a build's log streams as it runs)
  if rest and rest ~= "" and not (box.ctx and box.ctx.log_shown) then
    -- the rest of a message that had several lines (a failed build's log tail), indented below it
    for l in (rest:gsub("%s+$", "") .. "\n"):gmatch("([^\n]*)\n") do io.stderr:write("  ", l, "\n") end
  end
  if args.is_usage(err) then io.stderr:write("(", name, " --help says how)\n") end
  if trace then io.stderr:write(trace, "\n") end
  io.stderr:flush()
  return render.exit_status(err)
end

return M
