-- glsb.trace.context: the current span, per task, in the loop's task-local context: a task spawned
-- while a span is current sees that span as its current span too (until it sets its own), so a span
-- started in a child task is a child of the span its parent was in.
local loop = require "glsb.loop"

local M = {}

local KEY = "glsb.trace.span"

-- current() -> the current span (or SpanContext), or nil.
function M.current() return loop.context_get(KEY) or nil end

-- with(span, fn, ...) -> fn's results; span is current while fn runs, the previous one after, also
-- when fn raises.
function M.with(span, fn, ...)
  return loop.with_context({ [KEY] = span == nil and false or span }, fn, ...)
end

-- swap(span) -> the previous current span: for a caller that restores it itself (cheaper than with).
function M.swap(span) return loop.context_set(KEY, span == nil and false or span) or nil end

-- clear(): no current span for the running task (the exporter's worker task).
function M.clear() loop.context_set(KEY, nil) end

return M
