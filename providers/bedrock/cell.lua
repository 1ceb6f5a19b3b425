-- glsb.providers.bedrock.cell: Python code as AgentCore's executeCode runs it for glsb, with the value
-- of the last expression (docs/contract.md §4: r.text on every provider).
--
-- AgentCore's CodeInterpreterResult has no field for that value: its structuredContent is taskId,
-- taskStatus, stdout, stderr, exitCode, executionTime (service model, @aws-sdk/client-bedrock-agentcore
-- 3.1141.0 ToolResultStructuredContent). So the code is sent inside a small wrapper that runs in the
-- session's persistent interpreter:
--   * the user's code travels as an exact bytes literal and is compiled by Python itself (PEP 263
--     decoding, "<string>" as its file name, line numbers those of the user's text: the AST keeps them);
--   * every statement but a trailing expression statement runs with exec in the session's globals()
--     (state persists, clearContext still resets it), the trailing expression with eval;
--   * an exception is printed to stderr as Python prints it, minus the wrapper's own frame, and the
--     code is reported as failed;
--   * the verdict ({text?, error?}) is written once, at the end, to the stdout object the code started
--     with, between two copies of a per-call random mark, as ASCII JSON: the user's output cannot
--     contain the mark by accident, and decode() removes exactly what was added.
-- The wrapper binds no name in the session's namespace (it runs in a private dict) and its last
-- statement evaluates to None, so an interpreter that shows a bare expression's value shows nothing.
-- If the verdict never arrives (the interpreter exited, the code closed its stdout), the caller falls
-- back to what the service said (isError, exitCode) and r.text stays nil.
local packages = require "glsb.packages"
local http = require "glsb.http"

local M = {}

-- Runs in a private namespace holding `_glsb_args` = (session globals, source bytes, mark, env).
M.WRAPPER = table.concat({
  "import ast, json, os, sys, traceback",
  "g, src, mark, env = _glsb_args",
  "out, err = sys.stdout, sys.stderr",
  "report = {}",
  "saved = {k: os.environ.get(k) for k in env}",
  "os.environ.update(env)",
  "try:",
  "    tree = compile(src, '<string>', 'exec', ast.PyCF_ONLY_AST)",
  "    last = None",
  "    if tree.body and isinstance(tree.body[-1], ast.Expr):",
  "        last = ast.Expression(tree.body.pop().value)",
  "    exec(compile(tree, '<string>', 'exec'), g)",
  "    if last is not None:",
  "        value = eval(compile(last, '<string>', 'eval'), g)",
  "        if value is not None:",
  "            text = repr(value)",
  "            if isinstance(value, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in '\\'\"':",
  "                text = text[1:-1]",
  "            report['text'] = text",
  "except BaseException as e:",
  "    tb = e.__traceback__",
  "    while tb is not None and tb.tb_frame.f_code.co_filename == '<glsb>':",
  "        tb = tb.tb_next",
  "    try:",
  "        shown = ''.join(traceback.format_exception(type(e), e, tb))",
  "    except BaseException:",
  "        shown = type(e).__name__ + '\\n'",
  "    report['error'] = {'name': type(e).__name__, 'traceback': shown}",
  "    try:",
  "        err.write(shown)",
  "        err.flush()",
  "    except BaseException:",
  "        pass",
  "finally:",
  "    for k, v in saved.items():",
  "        if v is None:",
  "            os.environ.pop(k, None)",
  "        else:",
  "            os.environ[k] = v",
  "for f in {id(sys.stdout): sys.stdout, id(out): out}.values():",
  "    try:",
  "        f.flush()",
  "    except BaseException:",
  "        pass",
  "verdict = mark + json.dumps(report, ensure_ascii=True) + mark",
  "for f in (out, sys.__stdout__):",
  "    try:",
  "        f.write(verdict)",
  "        f.flush()",
  "        break",
  "    except BaseException:",
  "        pass",
  "",
}, "\n")

-- A bytes literal holding exactly s.
local function bytes_literal(s) return "b" .. packages.python_string(s) end

-- A str literal of s's bytes as the file system would decode them (os.environ's own rule), so UTF-8
-- and other bytes reach the environment unchanged.
local function text_literal(s) return bytes_literal(s) .. ".decode('utf-8', 'surrogateescape')" end

-- cell.encode(code, env, mark) -> the code to send: one statement that runs the wrapper.
function M.encode(code, env, mark)
  local items, keys = {}, {}
  for k in pairs(env or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    items[#items + 1] = text_literal(k) .. ": " .. text_literal(tostring(env[k]))
  end
  return ("exec(compile(%s, '<glsb>', 'exec'), {'_glsb_args': (globals(), %s, %s, {%s})})"):format(
    packages.python_string(M.WRAPPER), bytes_literal(code), packages.python_string(mark), table.concat(items, ", "))
end

-- cell.decode(stdout, mark) -> stdout without the verdict, the verdict table (nil when absent).
-- Output written after the verdict (a background child of the code) is kept, in place.
function M.decode(stdout, mark)
  local s, e = stdout:find(mark, 1, true)
  if not s then return stdout, nil end
  local s2, e2 = stdout:find(mark, e + 1, true)
  if not s2 then return stdout, nil end
  local ok, verdict = pcall(http.decode_json, stdout:sub(e + 1, s2 - 1))
  if not ok or type(verdict) ~= "table" then return stdout, nil end
  return stdout:sub(1, s - 1) .. stdout:sub(e2 + 1), verdict
end

return M
