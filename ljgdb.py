"""ljgdb loader: put `source /path/to/ljgdb.py` in ~/.gdbinit (in lldb:
`command script import /path/to/ljgdb.py`, in ~/.lldbinit).

Sourced by gdb, it makes the checkout importable as the package `ljgdb`
(ljgdb.gdb_ext = engine, ljgdb.commands = gdb commands), from any working
directory, and registers the commands; sourcing it again reloads them.
Imported as a module named `ljgdb` (Python started in the checkout), it is
that package's root and registers nothing; lldb imports it so too, and then
calls its __lldb_init_module, which registers the commands in lldb.  Run as `python3 -m ljgdb CORE
...` (or `python3 ljgdb.py CORE ...`), it is the core reader, which needs no
gdb (commands/hosts/corehost.py); with --pid PID, the same on a running process
(commands/hosts/livehost.py).
"""
import os
import sys
import types

_HERE = os.path.dirname(os.path.realpath(__file__))

# pkg/ holds what the installed package has at its root (ljgdb.profile ...).
_PATH = [_HERE, os.path.join(_HERE, "pkg")]

if __name__ == "ljgdb":
    __path__ = _PATH

    def __lldb_init_module(debugger, internal_dict):
        """lldb's `command script import /path/to/ljgdb.py`: the commands
        (commands/hosts/lldbhost.py); imported again, the new code replaces the
        old."""
        import importlib
        for name in [m for m in sys.modules if m.startswith("ljgdb.")]:
            del sys.modules[name]
        importlib.import_module("ljgdb.commands.hosts.lldbhost").register(debugger)
elif __name__ == "__main__" and "gdb" not in sys.modules:
    # python3 -m ljgdb CORE ... from the checkout: the core reader (--pid PID:
    # a running process).
    _pkg = types.ModuleType("ljgdb")
    _pkg.__path__ = _PATH
    _pkg.__file__ = os.path.abspath(__file__)
    sys.modules["ljgdb"] = _pkg
    from ljgdb.commands.cli import main as _main
    sys.exit(_main())
else:
    def _load():
        import importlib
        for name in [m for m in sys.modules if m == "ljgdb" or m.startswith("ljgdb.")]:
            del sys.modules[name]
        pkg = types.ModuleType("ljgdb")
        pkg.__path__ = _PATH
        pkg.__file__ = os.path.join(_HERE, "ljgdb.py")
        sys.modules["ljgdb"] = pkg
        return importlib.import_module("ljgdb.commands").register()

    _load()
    del _load
