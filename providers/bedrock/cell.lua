-- glsb.providers.bedrock.cell: Python code as AgentCore's executeCode runs it for glsb, with the value
-- of the last expression and what the code displayed (docs/contract.md §4, §4.1: r.text and r.results on
-- every provider).
--
-- AgentCore's CodeInterpreterResult has no field for that value: its structuredContent is taskId,
-- taskStatus, stdout, stderr, exitCode, executionTime (service model, @aws-sdk/client-bedrock-agentcore
-- 3.1141.0 ToolResultStructuredContent). So the code runs inside glsb's cell runner (RUNNER below), in
-- the session's persistent interpreter:
--   * the user's code travels as an exact bytes literal and is compiled by Python itself (PEP 263
--     decoding, "<string>" as its file name, line numbers those of the user's text: the AST keeps them);
--   * every statement but a trailing expression statement runs with exec in the session's globals()
--     (state persists, clearContext still resets it), the trailing expression with eval;
--   * an exception is printed to stderr as Python prints it, minus glsb's own frames, and the code is
--     reported as failed;
--   * glsb's display protocol (providers/local/display.py) runs around it: display() in the session's
--     globals (unless the code bound its own: glsb's is marked .glsb and replaced by the current one),
--     and the last value's bundle (its _repr_*_ forms, a figure's PNG) go into the verdict's `results`
--     ({forms, extra, main}, binary forms base64), at most RESULTS_CAP bytes of them (the rest counted
--     in `dropped`); `figures` counts the matplotlib figures open at the end that no earlier call
--     reported, which the service is expected to return as image blocks (the adapter notes the ones it
--     did not);
--   * the verdict ({text?, error?, results, dropped, figures?}) is written once, at the end, to the
--     stdout object the code started with, between two copies of a per-call random mark, as ASCII
--     JSON: the user's output cannot contain the mark by accident, and decode() removes exactly what
--     was added.
-- display.py and the runner are installed once per interpreter (sys.modules["_glsb_display"], with the
-- id of their source): a session's first call carries them; later calls send only a small stub that
-- calls the runner. A stub that finds them missing (an interpreter that started again) runs nothing and
-- says so (`{"display": "missing"}`): the adapter then sends the call again with them.
-- The stub binds no name in the session's namespace but `display` (it runs in a private dict), and its
-- last statement evaluates to None, so an interpreter that shows a bare expression's value shows
-- nothing. If the verdict never arrives (the interpreter exited, the code closed its stdout), the
-- caller falls back to what the service said (isError, exitCode) and r.text stays nil.
local packages = require "glsb.packages"
local http = require "glsb.http"

local M = {}

M.RESULTS_CAP = require("glsb.results").CAP

-- The cell runner, executed into the display module's namespace (bundle, display, set_publisher are
-- display.py's).
M.RUNNER = [==[
import ast, base64, json, os, sys, traceback

OWN_FILES = ("<glsb>", "<glsb-cell>")


def run_cell(g, src, mark, env, cap):
    out, err = sys.stdout, sys.stderr
    report, shown = {}, []
    set_publisher(lambda forms, extra, main: shown.append((forms, extra, main)))
    if getattr(g.get("display", display), "glsb", True):
        display.glsb = True
        g["display"] = display
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        tree = compile(src, "<string>", "exec", ast.PyCF_ONLY_AST)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<string>", "exec"), g)
        if last is not None:
            value = eval(compile(last, "<string>", "eval"), g)
            if value is not None:
                forms, extra = bundle(value)
                report["text"] = forms.get("text")
                shown.append((forms, extra, True))
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in OWN_FILES:
            tb = tb.tb_next
        try:
            text = "".join(traceback.format_exception(type(e), e, tb))
        except BaseException:
            text = type(e).__name__ + "\n"
        try:
            value = str(e)
        except BaseException:
            value = ""
        report["error"] = {"name": type(e).__name__, "value": value, "traceback": text}
        try:
            err.write(text)
            err.flush()
        except BaseException:
            pass
    finally:
        set_publisher(None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    kept, room, dropped = [], cap, [0, 0]
    for forms, extra, main in shown:
        try:
            f = {k: base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v for k, v in forms.items()}
            item = json.dumps({"forms": f, "extra": extra, "main": main}, ensure_ascii=True, default=str)
        except BaseException:
            continue
        if len(item) > room:
            dropped[0] += 1
            dropped[1] += len(item)
            continue
        room -= len(item)
        kept.append(item)
    report["dropped"] = dropped
    try:
        if "matplotlib.pyplot" in sys.modules:
            import weakref
            from matplotlib._pylab_helpers import Gcf
            seen = globals().setdefault("GLSB_SEEN", weakref.WeakSet())
            figs = [m.canvas.figure for m in Gcf.get_all_fig_managers()]
            report["figures"] = sum(1 for fig in figs if fig not in seen)
            seen.update(figs)
    except BaseException:
        pass
    for f in {id(sys.stdout): sys.stdout, id(out): out}.values():
        try:
            f.flush()
        except BaseException:
            pass
    head = json.dumps(report, ensure_ascii=True)[:-1] + ", \"results\": ["
    verdict = mark + head + ", ".join(kept) + "]}" + mark
    for f in (out, sys.__stdout__):
        try:
            f.write(verdict)
            f.flush()
            break
        except BaseException:
            pass
]==]

-- Sent with every call; runs in a private namespace holding `_glsb_args` = (session globals, source
-- bytes, mark, env, the results cap, the runner's id, and (display.py's source, RUNNER) or None).
M.STUB = [==[
import sys
g, src, mark, env, cap, rid, install = _glsb_args
m = sys.modules.get("_glsb_display")
if install is not None and getattr(m, "GLSB_ID", None) != rid:
    m = type(sys)("_glsb_display")
    exec(compile(install[0], "<glsb-display>", "exec"), m.__dict__)
    exec(compile(install[1], "<glsb-cell>", "exec"), m.__dict__)
    m.GLSB_ID = rid
    sys.modules["_glsb_display"] = m
if getattr(m, "GLSB_ID", None) == rid:
    m.run_cell(g, src, mark, env, cap)
else:
    sys.stdout.write(mark + '{"display": "missing"}' + mark)
    sys.stdout.flush()
]==]

-- display.py's source and the id of it and the runner together.
local display_source, runner_id
local function display_py()
  if not display_source then
    local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
    local f = assert(io.open(here .. "/../local/display.py", "rb"))
    display_source = f:read("a")
    f:close()
    runner_id = require("glsb.codec").sha256(display_source .. "\0" .. M.RUNNER):sub(1, 16)
  end
  return display_source, runner_id
end

-- A bytes literal holding exactly s.
local function bytes_literal(s) return "b" .. packages.python_string(s) end

-- A str literal of s's bytes as the file system would decode them (os.environ's own rule), so UTF-8
-- and other bytes reach the environment unchanged.
local function text_literal(s) return bytes_literal(s) .. ".decode('utf-8', 'surrogateescape')" end

-- cell.encode(code, env, mark[, installed]) -> the code to send (one statement: the stub), and the
-- runner's id. The stub carries display.py and the runner unless installed is that id (an earlier
-- verdict of this session came from them).
function M.encode(code, env, mark, installed)
  local items, keys = {}, {}
  for k in pairs(env or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    items[#items + 1] = text_literal(k) .. ": " .. text_literal(tostring(env[k]))
  end
  local dsrc, id = display_py()
  local install = installed == id and "None"
    or ("(%s, %s)"):format(packages.python_string(dsrc), packages.python_string(M.RUNNER))
  return ("exec(compile(%s, '<glsb>', 'exec'), {'_glsb_args': (globals(), %s, %s, {%s}, %d, %s, %s)})"):format(
    packages.python_string(M.STUB), bytes_literal(code), packages.python_string(mark), table.concat(items, ", "),
    M.RESULTS_CAP, packages.python_string(id), install), id
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
