"""ljgdb loader: put `source /path/to/ljgdb.py` in ~/.gdbinit.

Makes the checkout importable as the package `ljgdb` (gdb_ext = engine,
commands = gdb commands) without touching the current directory, then
registers the commands.  Sourcing it again reloads everything.
"""
import os
import sys
import types


def _load():
    here = os.path.dirname(os.path.realpath(__file__))
    for name in [m for m in sys.modules if m == "ljgdb" or m.startswith("ljgdb.")]:
        del sys.modules[name]
    pkg = types.ModuleType("ljgdb")
    pkg.__path__ = [here]
    pkg.__file__ = os.path.join(here, "ljgdb.py")
    sys.modules["ljgdb"] = pkg
    import importlib
    commands = importlib.import_module("ljgdb.commands")
    return commands.register()


try:
    __file__
except NameError:  # run with `python exec(...)`: nothing to anchor on
    raise RuntimeError("ljgdb.py must be loaded with gdb's `source` command")

_names = _load()
del _load
