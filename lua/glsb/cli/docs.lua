-- glsb.cli.docs: what the command declarations (glsb.cli.commands) say, written for each reader: the
-- `--help` text, docs/cli.md (spec/cli/glsb_spec checks the file is what markdown() writes), and the
-- bash and zsh completion scripts `make install` installs. One source: a flag documented here is the
-- flag the parser takes.

local commands = require "glsb.cli.commands"
local status = require "glsb.cli.status"

local M = {}

M.PROVIDERS = { "local", "e2b", "opensandbox", "bedrock" }

local INTRO = "glsb runs code in sandboxes, ships files in and out and builds templates, on the local provider "
  .. "(this machine, confined: no account, no daemon) and on E2B, OpenSandbox and AWS Bedrock AgentCore. Each "
  .. "command is a few calls of the Lua library (require \"glsb\"), with the same options and errors."

local PROVIDER_NOTE = "The provider is -p/--provider, else $GLSB_PROVIDER, else local. Its credentials and "
  .. "endpoints come from where the library reads them: E2B_API_KEY (E2B_API_URL, E2B_DOMAIN), "
  .. "OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY, the AWS chain and AWS_REGION for bedrock; any provider "
  .. "option with -o K=V."

M.ENVIRONMENT = {
  { "GLSB_PROVIDER", "the provider when -p is not given (default local)" },
  { "GLSB_LOG", "debug (or info) shows what the library does on stderr; with debug an error also prints its "
    .. "stack trace" },
  { "GLSB_PATH", "folders of extra provider modules (as for glsb-lua)" },
  { "E2B_API_KEY, OPEN_SANDBOX_DOMAIN, AWS_*", "the providers' credentials and endpoints (each provider's "
    .. "README)" },
}

M.TOP_EXAMPLES = {
  { "glsb run hello.py", "run a file in a fresh local sandbox" },
  { "glsb run -p e2b --keep job.py", "on E2B, keeping the sandbox" },
  { "glsb ls -p e2b", "your E2B sandboxes" },
  { "glsb exec -p e2b ID -- ls /files", "a command in one of them" },
  { "glsb kill -p e2b --all --metadata job=nightly --yes", "the leaked ones" },
  { "glsb template build analysis.lua", "a template from a spec file" },
}

-- Wraps text to lines of at most width characters, joined by a newline and indent (the lines after the
-- first start with indent, which is not counted in width).
local function wrap(text, width, indent)
  local lines, line = {}, ""
  for word in text:gmatch("%S+") do
    if line ~= "" and #line + 1 + #word > width then
      lines[#lines + 1] = line
      line = word
    else
      line = line == "" and word or (line .. " " .. word)
    end
  end
  if line ~= "" then lines[#lines + 1] = line end
  return table.concat(lines, "\n" .. (indent or ""))
end
M.wrap = wrap

local function full_name(cmd, parent)
  return "glsb " .. (parent and (parent.name .. " ") or "") .. cmd.name
end
M.full_name = full_name

local function flag_word(f)
  return (f.short and ("-" .. f.short .. ", ") or "    ") .. "--" .. f.name .. (f.arg and (" " .. f.arg) or "")
end

-- usage(cmd[, parent]) -> "glsb run [flags] FILE|-"
function M.usage(cmd, parent)
  if cmd.group then
    local subs = {}
    for _, s in ipairs(cmd.subcommands) do subs[#subs + 1] = s.name end
    return full_name(cmd, parent) .. " " .. table.concat(subs, "|") .. " [flags] ..."
  end
  return full_name(cmd, parent) .. " [flags]" .. (cmd.args and (" " .. cmd.args) or "")
end

-- description(cmd) -> its help paragraph (the summary as a sentence where it has none).
function M.description(cmd)
  return cmd.help or (cmd.summary:gsub("^%l", string.upper) .. ".")
end

-- help(cmd[, parent]) -> the text of `glsb CMD --help`.
function M.help(cmd, parent)
  local out = { "usage: " .. M.usage(cmd, parent), "", wrap(M.description(cmd), 78) }
  if cmd.group then
    out[#out + 1] = ""
    out[#out + 1] = "commands:"
    for _, s in ipairs(cmd.subcommands) do
      out[#out + 1] = string.format("  %-8s %s", s.name, s.summary)
    end
    out[#out + 1] = ""
    out[#out + 1] = "glsb " .. cmd.name .. " COMMAND --help says more."
    return table.concat(out, "\n") .. "\n"
  end
  if #(cmd.flags or {}) > 0 then
    out[#out + 1] = ""
    out[#out + 1] = "flags:"
    for _, f in ipairs(cmd.flags) do
      local w = flag_word(f)
      local pad = #w < 24 and string.rep(" ", 24 - #w) or ("\n" .. string.rep(" ", 26))
      out[#out + 1] = "  " .. w .. pad .. "  " .. wrap(f.help:gsub("`", ""), 50, string.rep(" ", 28))
    end
  end
  if #(cmd.examples or {}) > 0 then
    out[#out + 1] = ""
    out[#out + 1] = "examples:"
    for _, e in ipairs(cmd.examples) do
      out[#out + 1] = "  " .. e[1]
      if e[2] ~= "" then out[#out + 1] = "      " .. e[2] end
    end
  end
  if cmd.name == "run" or cmd.name == "exec" then
    out[#out + 1] = ""
    out[#out + 1] = "exit status: 0 success, the program's own (1-119), 120 error, 121 unknown, 124 timeout,"
    out[#out + 1] = "125 the sandbox did not start or no such sandbox, 2 usage (glsb help exit)"
  end
  return table.concat(out, "\n") .. "\n"
end

local function available(c) return not c.available or c.available() end

-- top() -> the text of `glsb --help`.
function M.top()
  local out = { "usage: glsb COMMAND [flags] [args]", "", wrap(INTRO, 78), "", "commands:" }
  for _, c in ipairs(commands.LIST) do
    if c.group then
      for _, s in ipairs(c.subcommands) do
        out[#out + 1] = string.format("  %-16s %s", c.name .. " " .. s.name, s.summary)
      end
    else
      out[#out + 1] = string.format("  %-16s %s%s", c.name, c.summary, available(c) and "" or " (not in this build)")
    end
  end
  out[#out + 1] = string.format("  %-16s %s", "help [COMMAND]", "this help, or a command's (as COMMAND --help)")
  out[#out + 1] = ""
  out[#out + 1] = wrap(PROVIDER_NOTE, 78)
  out[#out + 1] = ""
  out[#out + 1] = "examples:"
  for _, e in ipairs(M.TOP_EXAMPLES) do out[#out + 1] = string.format("  %-52s %s", e[1], e[2]) end
  out[#out + 1] = ""
  out[#out + 1] = "glsb help exit: the exit statuses; glsb help env: the environment; docs/cli.md: all of it."
  return table.concat(out, "\n") .. "\n"
end

-- exit_help() -> the table of exit statuses as text.
function M.exit_help()
  local out = { "exit status of glsb:" }
  for _, e in ipairs(status.EXIT) do
    out[#out + 1] = string.format("  %-6s %-12s %s", tostring(e[2]), e[1], wrap(e[3]:gsub("`", ""), 56,
      string.rep(" ", 22)))
  end
  return table.concat(out, "\n") .. "\n"
end

function M.env_help()
  local out = { "environment:" }
  for _, e in ipairs(M.ENVIRONMENT) do
    out[#out + 1] = "  " .. e[1]
    out[#out + 1] = "      " .. wrap(e[2], 72, "      ")
  end
  return table.concat(out, "\n") .. "\n"
end

---------------------------------------------------------------------------
-- docs/cli.md
---------------------------------------------------------------------------

local function md_escape(s) return (s:gsub("|", "\\|")) end

local function md_command(out, cmd, parent)
  out[#out + 1] = "### `" .. full_name(cmd, parent) .. "`"
  out[#out + 1] = ""
  out[#out + 1] = "```"
  out[#out + 1] = M.usage(cmd, parent)
  out[#out + 1] = "```"
  out[#out + 1] = ""
  out[#out + 1] = M.description(cmd)
  out[#out + 1] = ""
  if #(cmd.flags or {}) > 0 then
    out[#out + 1] = "| flag | meaning |"
    out[#out + 1] = "|---|---|"
    for _, f in ipairs(cmd.flags) do
      out[#out + 1] = string.format("| `%s` | %s |", (flag_word(f):gsub("^%s+", "")), md_escape(f.help))
    end
    out[#out + 1] = ""
  end
  if #(cmd.examples or {}) > 0 then
    out[#out + 1] = "```sh"
    for _, e in ipairs(cmd.examples) do
      out[#out + 1] = e[1] .. (e[2] ~= "" and ("    # " .. e[2]) or "")
    end
    out[#out + 1] = "```"
    out[#out + 1] = ""
  end
end

-- markdown() -> docs/cli.md.
function M.markdown()
  local out = {
    "# The glsb command",
    "",
    "<!-- generated by `build/glsb help --markdown > docs/cli.md` from lua/glsb/cli/commands.lua; "
      .. "spec/cli/glsb_spec.lua checks it -->",
    "",
    INTRO,
    "",
    "```sh",
    "make demo                 # builds build/glsb (a link to glsb-lua) and runs the examples",
    "build/glsb run examples/hello.py",
    "make install              # glsb beside glsb-lua in PREFIX/bin, with bash and zsh completion",
    "```",
    "",
    PROVIDER_NOTE,
    "",
    "Every command takes `--help` (with examples); an unknown flag is refused naming the closest one; an error "
      .. "is one line on stderr, its reason first and each cause once, and a non-zero exit status (a stack "
      .. "trace only with `GLSB_LOG=debug`). Progress (a step counter for template builds and for what "
      .. "a run does before its code starts, a bar with bytes and rate for a transfer of 4 MiB or more) shows "
      .. "on stderr when it is a terminal, never in a pipe or with `--quiet`; `--json` gives listings as one "
      .. "JSON object per line.",
    "",
    "## Commands",
    "",
  }
  for _, c in ipairs(commands.LIST) do
    if c.group then
      out[#out + 1] = "### `glsb " .. c.name .. "`"
      out[#out + 1] = ""
      out[#out + 1] = c.help
      out[#out + 1] = ""
      for _, s in ipairs(c.subcommands) do md_command(out, s, c) end
    else
      md_command(out, c)
    end
  end
  out[#out + 1] = "## Exit status"
  out[#out + 1] = ""
  out[#out + 1] = "| status | name | meaning |"
  out[#out + 1] = "|---|---|---|"
  for _, e in ipairs(status.EXIT) do
    out[#out + 1] = string.format("| %s | %s | %s |", tostring(e[2]), e[1], md_escape(e[3]))
  end
  out[#out + 1] = ""
  out[#out + 1] = "A program's status above 119 (a shell's 137 after a SIGKILL) is reported as 119, so that it "
    .. "never reads as one of glsb's own."
  out[#out + 1] = ""
  out[#out + 1] = "## Environment"
  out[#out + 1] = ""
  out[#out + 1] = "| variable | meaning |"
  out[#out + 1] = "|---|---|"
  for _, e in ipairs(M.ENVIRONMENT) do out[#out + 1] = string.format("| `%s` | %s |", e[1], md_escape(e[2])) end
  out[#out + 1] = ""
  out[#out + 1] = "## Completion"
  out[#out + 1] = ""
  out[#out + 1] = "`make install` puts `glsb completion bash` in `PREFIX/share/bash-completion/completions/glsb` and "
    .. "`glsb completion zsh` in `PREFIX/share/zsh/site-functions/_glsb`: commands, flags, providers, files, and "
    .. "the sandbox ids `glsb ls --ids` gives for the provider and the `-o` options on the line (at most 3 s). "
    .. "Elsewhere: `source <(glsb completion bash)`."
  return table.concat(out, "\n") .. "\n"
end

---------------------------------------------------------------------------
-- Completion
---------------------------------------------------------------------------

-- Every runnable command as {path = "run" | "template build", cmd = declaration}.
local function leaves()
  local out = {}
  for _, c in ipairs(commands.LIST) do
    if c.group then
      for _, s in ipairs(c.subcommands) do out[#out + 1] = { path = c.name .. " " .. s.name, cmd = s } end
    else
      out[#out + 1] = { path = c.name, cmd = c }
    end
  end
  return out
end

local function flag_names(cmd, only_valued)
  local names = {}
  for _, f in ipairs(cmd.flags or {}) do
    if not only_valued or f.arg then
      names[#names + 1] = "--" .. f.name
      if f.short then names[#names + 1] = "-" .. f.short end
    end
  end
  return table.concat(names, " ")
end

-- bash() -> a bash completion script for glsb.
function M.bash()
  local top, groups = {}, {}
  for _, c in ipairs(commands.LIST) do top[#top + 1] = c.name end
  top[#top + 1] = "help"
  local out = {
    "# bash completion for glsb, generated by `glsb completion bash` from its command declarations.",
    "_glsb_ids() {",
    "  # the provider on the line (-p/--provider), else $GLSB_PROVIDER, and its -o options (endpoints, the",
    "  # local host_workspace_dir); at most 3 s, nothing on failure",
    "  local p=\"${GLSB_PROVIDER:-local}\" i",
    "  local -a o=()",
    "  for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do",
    "    case \"${COMP_WORDS[i]}\" in",
    "      -p|--provider) p=\"${COMP_WORDS[i+1]}\" ;;",
    "      --provider=*) p=\"${COMP_WORDS[i]#*=}\" ;;",
    "      -o|--option) o+=(-o \"${COMP_WORDS[i+1]}\") ;;",
    "    esac",
    "  done",
    "  timeout 3 \"${COMP_WORDS[0]}\" ls --ids --quiet --provider \"$p\" \"${o[@]}\" 2>/dev/null",
    "}",
    "_glsb() {",
    "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"",
    "  local path=\"\" valued=\"\" i w skip=0",
    "  for ((i = 1; i < COMP_CWORD; i++)); do",
    "    w=\"${COMP_WORDS[i]}\"",
    "    if ((skip)); then skip=0; continue; fi",
    "    case \"$w\" in",
    "      -*) case \" $valued \" in *\" $w \"*) skip=1 ;; esac ;;",
    "      *) case \"$path\" in",
    "           \"\") path=\"$w\" ;;",
  }
  for _, c in ipairs(commands.LIST) do
    if c.group then groups[#groups + 1] = c end
  end
  for _, g in ipairs(groups) do
    out[#out + 1] = string.format("           %s) path=\"%s $w\" ;;", g.name, g.name)
  end
  out[#out + 1] = "           *) ;;"
  out[#out + 1] = "         esac ;;"
  out[#out + 1] = "    esac"
  out[#out + 1] = "    case \"$path\" in"
  for _, l in ipairs(leaves()) do
    out[#out + 1] = string.format("      \"%s\") valued=\"%s\" ;;", l.path, flag_names(l.cmd, true))
  end
  out[#out + 1] = "    esac"
  out[#out + 1] = "  done"
  out[#out + 1] = "  case \"$prev\" in"
  out[#out + 1] = "    -p|--provider) COMPREPLY=($(compgen -W \"" .. table.concat(M.PROVIDERS, " ")
    .. "\" -- \"$cur\")); return ;;"
  out[#out + 1] = "    -f|--file) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;"
  out[#out + 1] = "    --out|--cwd) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;"
  out[#out + 1] = "  esac"
  out[#out + 1] = "  case \"$path\" in"
  out[#out + 1] = "    \"\") COMPREPLY=($(compgen -W \"" .. table.concat(top, " ") .. "\" -- \"$cur\")); return ;;"
  for _, g in ipairs(groups) do
    local subs = {}
    for _, s in ipairs(g.subcommands) do subs[#subs + 1] = s.name end
    out[#out + 1] = string.format("    %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;", g.name,
      table.concat(subs, " "))
  end
  out[#out + 1] = "  esac"
  out[#out + 1] = "  if [[ \"$cur\" == -* ]]; then"
  out[#out + 1] = "    case \"$path\" in"
  for _, l in ipairs(leaves()) do
    out[#out + 1] = string.format("      \"%s\") COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")) ;;", l.path,
      flag_names(l.cmd))
  end
  out[#out + 1] = "    esac"
  out[#out + 1] = "    return"
  out[#out + 1] = "  fi"
  out[#out + 1] = "  case \"$path\" in"
  local by_kind = { sandbox = {}, file = {}, dir = {} }
  for _, l in ipairs(leaves()) do
    if l.cmd.complete_args then table.insert(by_kind[l.cmd.complete_args], '"' .. l.path .. '"') end
  end
  if #by_kind.sandbox > 0 then
    out[#out + 1] = "    " .. table.concat(by_kind.sandbox, "|")
      .. ") COMPREPLY=($(compgen -W \"$(_glsb_ids)\" -- \"$cur\")) ;;"
  end
  if #by_kind.file > 0 then
    out[#out + 1] = "    " .. table.concat(by_kind.file, "|") .. ") COMPREPLY=($(compgen -f -- \"$cur\")) ;;"
  end
  if #by_kind.dir > 0 then
    out[#out + 1] = "    " .. table.concat(by_kind.dir, "|") .. ") COMPREPLY=($(compgen -d -- \"$cur\")) ;;"
  end
  out[#out + 1] = "  esac"
  out[#out + 1] = "}"
  out[#out + 1] = "complete -F _glsb glsb"
  return table.concat(out, "\n") .. "\n"
end

-- Text inside a zsh _arguments spec or a _describe entry: brackets would end a description, a colon a
-- field (colon = true: escape it), a quote the word.
local function zq(s, colon)
  s = s:gsub("`", ""):gsub("[%[%]]", { ["["] = "(", ["]"] = ")" })
  if colon then s = s:gsub(":", "\\:") end
  return (s:gsub("'", "'\\''"))
end

local function zsh_flag(f)
  local what = zq((f.help:match("^[^;(]*"):gsub("%s+$", "")))
  local value = ""
  if f.arg then
    local action = f.complete == "provider" and ("(" .. table.concat(M.PROVIDERS, " ") .. ")")
      or f.complete == "file" and "_files" or f.complete == "dir" and "_files -/" or " "
    value = ":" .. zq(f.arg, true) .. ":" .. action
  end
  local rep = f.multi and "*" or ""
  if f.short then
    local excl = f.multi and "" or string.format("(-%s --%s)", f.short, f.name)
    return (string.format("'%s%s{-%s,--%s}'[%s]%s'", excl, rep, f.short, f.name, what, value):gsub("^'(.-){", "'%1'{"))
  end
  return string.format("'%s--%s[%s]%s'", rep, f.name, what, value)
end

-- zsh() -> a zsh completion function for glsb (#compdef).
function M.zsh()
  local out = {
    "#compdef glsb",
    "# zsh completion for glsb, generated by `glsb completion zsh` from its command declarations.",
    "_glsb_ids() {",
    "  local p=${GLSB_PROVIDER:-local} i",
    "  local -a o ids",
    "  for ((i = 2; i < CURRENT; i++)); do",
    "    case ${words[i]} in",
    "      -p|--provider) p=${words[i+1]} ;;",
    "      --provider=*) p=${words[i]#*=} ;;",
    "      -o|--option) o+=(-o ${words[i+1]}) ;;",
    "    esac",
    "  done",
    "  ids=(${(f)\"$(timeout 3 ${words[1]} ls --ids --quiet --provider $p $o 2>/dev/null)\"})",
    "  compadd -a ids",
    "}",
    "_glsb_leaf() {",
    "  case $1 in",
  }
  for _, l in ipairs(leaves()) do
    local specs = {}
    for _, f in ipairs(l.cmd.flags or {}) do specs[#specs + 1] = zsh_flag(f) end
    local rest = ({ sandbox = "'*:sandbox id:_glsb_ids'", file = "'*:file:_files'", dir = "'*:folder:_files -/'" })
      [l.cmd.complete_args or ""] or ""
    out[#out + 1] = string.format("    '%s') _arguments -s %s %s ;;", l.path, table.concat(specs, " "), rest)
  end
  out[#out + 1] = "  esac"
  out[#out + 1] = "}"
  out[#out + 1] = "_glsb() {"
  out[#out + 1] = "  local -a cmds"
  out[#out + 1] = "  cmds=("
  for _, c in ipairs(commands.LIST) do out[#out + 1] = string.format("    '%s:%s'", c.name, zq(c.summary, true)) end
  out[#out + 1] = "    'help:a command'\"'\"'s help'"
  out[#out + 1] = "  )"
  out[#out + 1] = "  if (( CURRENT == 2 )); then _describe command cmds; return; fi"
  out[#out + 1] = "  local cmd=${words[2]}"
  for _, c in ipairs(commands.LIST) do
    if c.group then
      local subs = {}
      for _, s in ipairs(c.subcommands) do subs[#subs + 1] = string.format("'%s:%s'", s.name, zq(s.summary, true)) end
      out[#out + 1] = string.format("  if [[ $cmd == %s ]]; then", c.name)
      out[#out + 1] = "    if (( CURRENT == 3 )); then local -a subs; subs=(" .. table.concat(subs, " ")
        .. "); _describe command subs; return; fi"
      out[#out + 1] = "    cmd=\"$cmd ${words[3]}\"; shift 2 words; (( CURRENT -= 2 ))"
      out[#out + 1] = "  else"
      out[#out + 1] = "    shift words; (( CURRENT-- ))"
      out[#out + 1] = "  fi"
    end
  end
  out[#out + 1] = "  _glsb_leaf \"$cmd\""
  out[#out + 1] = "}"
  out[#out + 1] = "_glsb \"$@\""
  return table.concat(out, "\n") .. "\n"
end

return M
