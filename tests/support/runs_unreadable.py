"""python3 tests/support/runs_unreadable.py CORE BINARY COMMAND ...: the
core reader with every long read of the C paths refused (each run of
requests graphc.py or threadc.py reads at once raises FaultError), so that
they fall back to reading one request at a time.  For test_heapgraph_c.py
and test_threads_scale.py."""
import atexit
import linecache
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext.errors import FaultError  # noqa: E402
from ljgdb.gdb_ext.vm import pages  # noqa: E402

_read = pages.PageCache.read
refused = [0]


def read(self, addr, n):
    f = sys._getframe(1)
    if f.f_code.co_name == "feed_runs" and \
            "(base, length)" in linecache.getline(f.f_code.co_filename, f.f_lineno):
        refused[0] += 1
        raise FaultError("a run refused by the test", addr)
    return _read(self, addr, n)


pages.PageCache.read = read
atexit.register(lambda: sys.stderr.write("runs refused: %d\n" % refused[0]))

if __name__ == "__main__":
    from ljgdb.commands.cli import main
    sys.exit(main())
