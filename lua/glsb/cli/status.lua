-- glsb.cli.status: the exit statuses of `glsb` (docs/cli.md's table is written from M.EXIT) and the one
-- an ExecutionResult stands for.

local M = {}

-- Exit statuses, documented in docs/cli.md (glsb.cli.docs writes the table from this list).
M.EXIT = {
  { "OK", 0, "success (a `run` or `exec` whose code succeeded)" },
  { "PROGRAM", "1-119", "`run`, `exec`: the program's own exit status (a failed command, `sys.exit(n)`)" },
  { "USAGE", 2, "the command line is wrong (an unknown flag, a missing argument); nothing ran" },
  { "ERROR", 120, "`run`, `exec`: the code failed without an exit status of its own (an exception)" },
  { "UNKNOWN", 121, "`run`, `exec`: the outcome is unknown (the connection broke after the code was sent)" },
  { "TIMEOUT", 124, "`run`, `exec`: the code overran `--timeout` (or the sandbox died during the call)" },
  { "START", 125, "the sandbox did not start, or no sandbox has that id (create or connect failed)" },
  { "FAILED", 126, "another glsb failure: a listing, a kill, a copy, a template build that failed" },
  { "INTERRUPTED", 130, "interrupted (Ctrl-C); the sandbox of a `run` is terminated unless `--keep`" },
}
local CODE = {}
for _, e in ipairs(M.EXIT) do CODE[e[1]] = e[2] end
M.CODE = CODE

-- What a program's own status becomes: 1-119 as it is, a status past that (a shell's 137 for a kill)
-- is clipped to 119 so that it never reads as one of glsb's own.
local function program_status(code)
  code = math.tointeger(code)
  if not code or code == 0 then return nil end
  if code < 0 or code > 119 then return 119 end
  return code
end

-- status_of(r) -> the exit status an ExecutionResult stands for (docs/cli.md, "Exit status").
function M.of(r)
  if r.status == "success" then return CODE.OK end
  if r.status == "timeout" then return CODE.TIMEOUT end
  if r.status == "unknown" then return CODE.UNKNOWN end
  -- Python's SystemExit(n) is the program choosing its status, as the interpreter would exit with it
  if r.error_name == "SystemExit" then
    local n = math.tointeger(tonumber(r.error_value or "")
      or tonumber(tostring(r.error or ""):match("SystemExit: (%-?%d+)%s*$") or ""))
    if n == 0 then return CODE.OK end
    return program_status(n) or CODE.ERROR
  end
  -- an exception is the code failing, whatever code a provider puts beside it (a code run has none:
  -- docs/contract.md §4); a command's or a shell cell's status is the program's own
  -- (the local interpreter itself exiting with a status, error_name SandboxExited, is the program's status)
  if r.error_name and r.error_name ~= "SandboxExited" then return CODE.ERROR end
  return program_status(r.code) or CODE.ERROR
end

return M
