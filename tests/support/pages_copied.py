"""python3 tests/support/pages_copied.py CORE BINARY COMMAND ...: the core
reader with no memory held in place (CoreTarget.mapped answers None), so
that it reads a core as gdb, lldb and --pid read a process: the walk's
page cache copies the heap's pages, the heap graph's C code is handed
those pages, and whatever crosses from one page to the next is planned
and read.  For test_heapgraph_c.py, test_heapsnapshot_c.py and
test_threads_scale.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import atexit  # noqa: E402

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext.backends.coretarget import CoreTarget  # noqa: E402
from ljgdb.gdb_ext.heap import graphc  # noqa: E402

CoreTarget.mapped = lambda self, addr: None
# (what the C code was handed in place, and the runs it still had read)
counts = {"pieces": 0, "runs": 0}
held, feed = graphc._Graph._held, graphc._Graph.feed


def _held(self, spans):
    out = held(self, spans)
    counts["pieces"] += len(out[0]) // 3
    return out


def _feed(self):
    runs = feed(self)
    counts["runs"] += runs
    return runs


graphc._Graph._held, graphc._Graph.feed = _held, _feed
atexit.register(lambda: sys.stderr.write("pages in place: %(pieces)d, runs read: %(runs)d\n"
                                         % counts))

if __name__ == "__main__":
    from ljgdb.commands.cli import main
    sys.exit(main())
