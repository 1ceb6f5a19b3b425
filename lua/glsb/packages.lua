-- glsb.packages: validation of additional_packages and generation of the code
-- that installs them. Names are checked against a strict subset of PEP 508
-- (name, optional [extras], optional version clauses; no URLs, markers, spaces
-- or leading '-') so nothing a user passes can become a pip option or shell
-- syntax; the generated code quotes each one anyway.

local shell = require "glsb.shell"

local M = {}

local MAX_SPEC = 200
local OPS = { ["=="] = true, ["!="] = true, ["<="] = true, [">="] = true, ["~="] = true,
  ["==="] = true, ["<"] = true, [">"] = true }

local function valid_name(name)
  return #name == 1 and name:match("^[%w]$") ~= nil
      or name:match("^[%w][%w._-]*[%w]$") ~= nil
end

local function valid_version(v)
  return v ~= "" and v:match("^[%w.*+!_-]+$") ~= nil
end

-- packages.check(spec) -> true, or nil, reason.
function M.check(spec)
  if type(spec) ~= "string" then return nil, "package must be a string" end
  if spec == "" then return nil, "empty package name" end
  if #spec > MAX_SPEC then return nil, "package spec too long" end
  local name, rest = spec:match("^([%w._-]+)(.*)$")
  if not name or not valid_name(name) then return nil, "bad package name in '" .. spec .. "'" end
  local extras, after = rest:match("^%[([^%]]*)%](.*)$")
  if extras then
    for extra in (extras .. ","):gmatch("([^,]*),") do
      if not valid_name(extra) then return nil, "bad extra in '" .. spec .. "'" end
    end
    rest = after
  end
  if rest == "" then return true end
  for clause in (rest .. ","):gmatch("([^,]*),") do
    local op, version = clause:match("^([=!<>~]+)(.*)$")
    if not op or not OPS[op] or not valid_version(version) then
      return nil, "bad version clause in '" .. spec .. "'"
    end
  end
  return true
end

-- packages.validate(list) -> list (a copy), or raises an argument error that
-- names the offending entry.
function M.validate(list, level)
  level = (level or 1) + 1
  if list == nil then return {} end
  if type(list) ~= "table" then error("additional_packages must be an array of strings", level) end
  local out, count = {}, 0
  for _ in pairs(list) do count = count + 1 end
  for i, spec in ipairs(list) do
    local ok, why = M.check(spec)
    if not ok then error(string.format("additional_packages[%d]: %s", i, why), level) end
    out[i] = spec
  end
  if #out ~= count then
    error("additional_packages must be an array (no holes, no string keys)", level)
  end
  return out
end

-- A Python string literal for s (always double-quoted, every byte outside
-- printable ASCII escaped), so the code is valid whatever s holds.
function M.python_string(s)
  return '"' .. s:gsub('[%c\\"\128-\255]', function(c)
    return string.format("\\x%02x", c:byte())
  end) .. '"'
end

-- packages.python_install_code(list) -> Python source that pip-installs the
-- packages into the running interpreter (sys.executable, so the code kernel
-- itself sees them) through subprocess with an argv list (no shell), prints
-- pip's output on failure and raises, so the execution's status is ERROR.
function M.python_install_code(list)
  local pkgs = M.validate(list, 2)
  local argv = {}
  for i, p in ipairs(pkgs) do argv[i] = M.python_string(p) end
  return table.concat({
    "import importlib as _glsb_il, subprocess as _glsb_sp, sys as _glsb_sys",
    "_glsb_r = _glsb_sp.run([_glsb_sys.executable, \"-m\", \"pip\", \"install\", \"--quiet\", "
      .. "\"--disable-pip-version-check\", \"--no-input\", " .. table.concat(argv, ", ") .. "],",
    "    stdout=_glsb_sp.PIPE, stderr=_glsb_sp.STDOUT, text=True)",
    "_glsb_il.invalidate_caches()",
    "if _glsb_r.returncode != 0:",
    "    _glsb_sys.stderr.write(_glsb_r.stdout)",
    "    raise RuntimeError(\"pip install failed with exit code %d\" % _glsb_r.returncode)",
    "",
  }, "\n")
end

-- packages.shell_install_command(list[, python]) -> a shell command line doing
-- the same for providers that install through their command channel.
function M.shell_install_command(list, python)
  local pkgs = M.validate(list, 2)
  local words = { shell.quote(python or "python3"), "-m", "pip", "install", "--quiet",
    "--disable-pip-version-check", "--no-input" }
  for _, p in ipairs(pkgs) do words[#words + 1] = shell.quote(p) end
  return table.concat(words, " ")
end

return M
