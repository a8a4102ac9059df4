"""python3 tests/support/runs_unreadable.py CORE BINARY COMMAND ...: the
core reader with every long read of the C paths refused (the first read
of each run of requests graphc.py or threadc.py plans raises FaultError),
so that they fall back to reading one request at a time; and no memory
is handed to graphc.c in place (the core's mapped segments), so that the
heap graph's requests are planned and read at all.  For
test_heapgraph_c.py and test_threads_scale.py."""
import atexit
import os
import sys
from array import array

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext import cbuild  # noqa: E402
from ljgdb.gdb_ext.errors import FaultError  # noqa: E402
from ljgdb.gdb_ext.heap import graphc  # noqa: E402
from ljgdb.gdb_ext.stack import threadc  # noqa: E402

refused = [0]


def feed_runs(read, runs, feed, peek, skip):
    whole = {(runs[3 * r], runs[3 * r + 1]) for r in range(len(runs) // 3)}

    def refusing(addr, n):
        if (addr, n) in whole:
            whole.discard((addr, n))        # (read again a request at a time)
            refused[0] += 1
            raise FaultError("a run refused by the test", addr)
        return read(addr, n)
    return cbuild.feed_runs(refusing, runs, feed, peek, skip)


graphc.feed_runs = threadc.feed_runs = feed_runs
graphc._Graph._held = lambda self, spans: (array("Q"), [])
atexit.register(lambda: sys.stderr.write("runs refused: %d\n" % refused[0]))

if __name__ == "__main__":
    from ljgdb.commands.cli import main
    sys.exit(main())
