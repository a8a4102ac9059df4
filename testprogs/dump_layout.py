"""Write the parts of a LuaJIT build's DWARF that the engine reads as JSON,
as gdb reads them: for unit tests on synthetic memory (tests/data/layout-*.json)
and to check the pyelftools reader of layout profiles against gdb
(tests/e2e/test_profile_layout.py).

  gdb -nx --batch -ex 'python import sys; sys.argv = ["x", "OUT.json"]' \
      -x testprogs/dump_layout.py HOST_BINARY
"""
import json
import os
import sys

import gdb

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
import ljgdb  # noqa: E402,F401  (the checkout as a package)
from ljgdb.gdb_ext.layouts import layout as L  # noqa: E402
from ljgdb.gdb_ext.backends.gdbtarget import GdbTarget  # noqa: E402

t = GdbTarget()
out = {"ptr_size": t.ptr_size, "arch": t.arch}
out.update(L.engine_tables(t))
lay = L.Layout(t)
out["flags"] = dict(lay.summary(), fork=lay.fork)
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=0, sort_keys=True)
gdb.write("wrote %s\n" % sys.argv[1])
