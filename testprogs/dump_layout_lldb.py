"""What testprogs/dump_layout.py writes from gdb, read through lldb: the
parts of a LuaJIT build's DWARF that the engine reads, as JSON, for
tests/e2e/test_lldb.py to hold lldb's types to gdb's.

  LJGDB_LAYOUT_OUT=OUT.json lldb-19 -b -o 'target create HOST_BINARY' \\
      -o 'command script import testprogs/dump_layout_lldb.py'
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
import ljgdb  # noqa: E402,F401  (the checkout as a package)
from ljgdb.gdb_ext.layouts import layout as L  # noqa: E402
from ljgdb.gdb_ext.backends.lldbtarget import LldbTarget  # noqa: E402


def __lldb_init_module(debugger, internal_dict):
    t = LldbTarget(debugger)
    out = {"ptr_size": t.ptr_size, "arch": t.arch}
    out.update(L.engine_tables(t))
    lay = L.Layout(t)
    out["flags"] = dict(lay.summary(), fork=lay.fork)
    path = os.environ["LJGDB_LAYOUT_OUT"]
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print("wrote %s" % path)
