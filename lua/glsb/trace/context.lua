-- glsb.trace.context: the current span, per task. It follows the task: a task spawned while a span is
-- current sees that span as its current span too (until it sets its own), so a span started in a child
-- task is a child of the span its parent was in.
--
-- Storage is the loop's task-local context slot when the loop has one; until then, a value per task
-- with the main chunk's value as the fallback for tasks that never set one (which is what the
-- sandbox methods need: each runs its body in a task spawned from the caller).
local loop = require "glsb.loop"

local M = {}

local KEY = "glsb.trace.span"

local get, set

if type(loop.context_get) == "function" and type(loop.context_set) == "function" then
  get = function() return loop.context_get(KEY) end
  set = function(v) loop.context_set(KEY, v) end
else
  local per_task = setmetatable({}, { __mode = "k" })
  local NONE = {}
  local root
  get = function()
    local task = loop.current()
    if task then
      local v = per_task[task]
      if v ~= nil then
        if v == NONE then return nil end
        return v
      end
    end
    return root
  end
  set = function(v)
    local task = loop.current()
    if task then per_task[task] = v == nil and NONE or v else root = v end
  end
end

-- current() -> the current span (or SpanContext), or nil.
M.current = get

-- swap(v) -> the previous value; sets v as current for the running task (or the main chunk).
function M.swap(v)
  local prev = get()
  set(v)
  return prev
end

-- with(span, fn, ...) -> fn's results; span is current while fn runs, the previous one after, also
-- when fn raises.
function M.with(span, fn, ...)
  local prev = M.swap(span)
  local res = table.pack(pcall(fn, ...))
  set(prev)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- clear(): no current span for the running task (the exporter's worker task).
function M.clear() set(nil) end

return M
