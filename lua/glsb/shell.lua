-- glsb.shell: POSIX sh words, for the command lines glsb builds (a provider whose only channel is one
-- shell string, template steps, pip, io.popen on this machine). A word is left bare only when every
-- byte of it is one the shell never treats specially; anything else goes in single quotes, inside
-- which sh interprets nothing, with each ' written as '\'' (close, escaped quote, reopen).
local M = {}

-- quote(s) -> one sh word that stands for exactly s (any bytes; "" is '').
function M.quote(s)
  s = tostring(s)
  if s:match("^[%w%%+,./:=@_-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- join(words) -> the words quoted, separated by one space: a command line that runs exactly this argv.
function M.join(words)
  local out = {}
  for i, w in ipairs(words) do out[i] = M.quote(w) end
  return table.concat(out, " ")
end

return M
