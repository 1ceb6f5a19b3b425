"""glsb local provider: starts the agent (agent.py) inside a sandbox.

Compiling agent.py costs about 6 ms, on every sandbox start (its directory is read-only and python
runs with -B: no bytecode is written). The host compiles it once with the same interpreter into its
cache and binds the bytecode read-only at /.glsb/agent.pyc (providers/local/init.lua,
M.agent_bytecode): run it when its magic number is this interpreter's, else compile the source as
before. The agent runs as __main__, as if started by name.
"""
import marshal
import sys
from _frozen_importlib_external import MAGIC_NUMBER

SOURCE = "/.glsb/agent/agent.py"
BYTECODE = "/.glsb/agent.pyc"


def agent_code():
    try:
        with open(BYTECODE, "rb") as f:
            data = f.read()
        if data[:4] == MAGIC_NUMBER:
            return marshal.loads(memoryview(data)[16:])
    except (OSError, ValueError, EOFError, TypeError):
        pass
    with open(SOURCE, "rb") as f:
        return compile(f.read(), SOURCE, "exec")


code = agent_code()
del agent_code, marshal, MAGIC_NUMBER, SOURCE, BYTECODE
exec(code, sys.modules["__main__"].__dict__)
