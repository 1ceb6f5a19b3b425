-- glsb.log: the one place the library reports what it does not raise
-- (skipped package installs, failed set_timeout, teardown after cancel).
-- Default: one line on io.stderr for warnings and errors; glsb.log.set_handler
-- replaces it (e.g. to feed a structured logger, or to silence it).

local M = {}

local LEVELS = { debug = 1, info = 2, warn = 3, error = 4 }

local function stderr_handler(level, message, fields)
  if LEVELS[level] < LEVELS.warn then return end
  local extra = {}
  if fields then
    local keys = {}
    for k in pairs(fields) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    for _, k in ipairs(keys) do extra[#extra + 1] = k .. "=" .. tostring(fields[k]) end
  end
  io.stderr:write("glsb: ", level, ": ", message,
    #extra > 0 and (" (" .. table.concat(extra, " ") .. ")") or "", "\n")
end

local handler = stderr_handler

-- log.set_handler(fn(level, message, fields)) -> previous handler. nil restores
-- the default stderr handler.
function M.set_handler(fn)
  if fn ~= nil and type(fn) ~= "function" then error("log.set_handler: function or nil expected", 2) end
  local prev = handler
  handler = fn or stderr_handler
  return prev
end

local function emit(level, message, fields)
  -- a broken handler must never turn a warning into a failure
  pcall(handler, level, tostring(message), fields)
end

function M.debug(message, fields) emit("debug", message, fields) end
function M.info(message, fields) emit("info", message, fields) end
function M.warn(message, fields) emit("warn", message, fields) end
function M.error(message, fields) emit("error", message, fields) end

return M
