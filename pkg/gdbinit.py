"""The file to `source` in gdb for an installed ljgdb (pip install .).

gdb's embedded Python does not see a virtualenv or a user site-packages:
sourced by gdb, this puts the site-packages directory it was installed in
on gdb's sys.path, then loads ljgdb's commands (sourcing it again reloads
them).  `ljgdb-gdbinit` prints the line that sources it.
"""
import os
import sys

if __name__ != "ljgdb.gdbinit":
    _site = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if _site not in sys.path:
        sys.path.insert(0, _site)
    for _name in [m for m in sys.modules if m == "ljgdb" or m.startswith("ljgdb.")]:
        del sys.modules[_name]
    import ljgdb.commands   # noqa: E402
    ljgdb.commands.register()
