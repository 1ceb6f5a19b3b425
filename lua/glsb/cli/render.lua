-- glsb.cli.render: what goes wrong, as a person reads it: one line with the reason first (the message,
-- then each cause once: errors.causes), the error's class and stage last; the exit status it stands for
-- (glsb.cli.status.EXIT). A stack trace is for GLSB_LOG=debug only (glsb.cli prints it).

local args = require "glsb.cli.args"
local errors = require "glsb.errors"
local CODE = require("glsb.cli.status").CODE

local M = {}

-- is_interrupt(err): Ctrl-C (glsb-lua makes the running call raise "interrupted!").
function M.is_interrupt(err)
  return type(err) == "string" and err:match("interrupted!$") ~= nil
end

-- A Lua error's text without the position glsb's own code added (file:line: of a module of the CLI or
-- the library, which says nothing to a person at a prompt).
local function strip_position(s)
  return (s:gsub("^[^%s:]+:%d+: ", ""))
end

local function first_line(s)
  local head, rest = s:match("^([^\n]*)\n(.*)$")
  if not head then return s, nil end
  return head, rest
end

-- line(err) -> the one line, and the rest of a message that had more lines (a build log's tail), or nil.
function M.line(err)
  if args.is_usage(err) then return err.message end
  if type(err) == "table" and type(rawget(err, "cli_failure")) == "string" then return err.cli_failure end
  if errors.is_error(err) then
    local head, rest = first_line(tostring(err.message))
    local parts = { (head:gsub("[:%s]+$", "")) }
    for _, c in ipairs(errors.causes(err)) do parts[#parts + 1] = (first_line(c)) end
    return table.concat(parts, " <- ") .. string.format(" (%s, stage %s)", err.class, err.stage), rest
  end
  if type(err) == "string" then
    local head, rest = first_line(strip_position(err))
    return head, rest
  end
  return errors.describe(err)
end

-- exit_status(err) -> the status glsb exits with for it.
function M.exit_status(err)
  if args.is_usage(err) then return CODE.USAGE end
  if M.is_interrupt(err) then return CODE.INTERRUPTED end
  -- no sandbox to work with: a create or a connect failed (a failed listing is SandboxStartError[list])
  if errors.is(err, errors.SandboxStartError) and err.stage ~= "list" then return CODE.START end
  if errors.is_error(err) or (type(err) == "table" and rawget(err, "cli_failure")) then return CODE.FAILED end
  -- a plain Lua error: the library refused an argument (an unknown option key, a bad value) or, were
  -- there a bug, the CLI itself; either way nothing ran
  return CODE.USAGE
end

return M
