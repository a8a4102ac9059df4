"""How much memory a command that builds the heap graph may take.

lgcstat's own walk keeps a few bytes an object; the heap graph (lgcpath,
lgcref, lgcstat --retained, --save, --diff and the V8 heap snapshot) keeps
some 140 to 180 bytes an object (GRAPH_BYTES below; 360 for the heap
snapshot's Python writer), and a heap of tens
of millions of objects would take more memory than the machine has: the debugger, killed by the
kernel, would take the user's session with it.  A Budget stops such a
command with one line instead, twice:
  - before the graph is built, from the heap's object count (the walk that
    finds every object comes first) and what the command keeps an object
    (GRAPH_BYTES, measured: docs/benchmarks.md, the heap-graph tables);
  - while it is built, from the process's resident memory
    (/proc/self/statm), every 65,536 objects in the Python loops and after
    each round of the C code (graphc.py): a heap whose objects cost more
    than the estimate is stopped too.
The limit counts the memory the command adds to the process, not what the
process (gdb, lldb) held before it.
"""
import os
from typing import Callable, Optional

from ..errors import LjError

# Bytes of resident memory a command adds an object of the heap, the walk
# that finds them included (and the heap's own pages, which the core
# reader maps and gdb copies): the growth of peak RSS from 10^6 to 10^7
# objects (bench/bench_heapgraph.py on r21-gc64, the graph in C), the
# larger of gdb's and the core reader's, rounded up; not less than the
# Python search's growth from 10^6 to 5*10^6 (120 to 170), but for the
# heap snapshot, whose Python writer takes more (PYTHON_GRAPH_BYTES).
GRAPH_BYTES = {
    "lgcpath": 160,
    "lgcref": 160,
    "lgcstat --retained": 160,
    "lgcstat --save": 160,
    "lgcstat --diff": 180,
    "lgcstat --save --format heapsnapshot": 180,
}
# ... without the C code (no compiler, LJGDB_HEAPGRAPH=python).
PYTHON_GRAPH_BYTES = dict(GRAPH_BYTES)
PYTHON_GRAPH_BYTES["lgcstat --save --format heapsnapshot"] = 360
MB = 1 << 20


class HeapTooLarge(LjError):
    """The heap graph would take more memory than the command may use."""


def resident_bytes() -> Optional[int]:
    """This process's resident memory (/proc/self/statm), or None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> Optional[int]:
    """The machine's memory available to a new allocation (MemAvailable in
    /proc/meminfo), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class Budget(object):
    """The memory `command` may add to this process: limit_mb megabytes,
    or with 0 half of what the machine has available now.  hint(mb): how
    the user sets heap-memory to mb megabytes (the host's words)."""

    def __init__(self, command: str, limit_mb: int, hint: Callable[[int], str]) -> None:
        self.command = command
        self.hint = hint
        if limit_mb:
            self.limit = limit_mb * MB
            self.source = "the heap-memory setting"
        else:
            avail = available_bytes()
            self.limit = avail // 2 if avail else None
            self.source = "half the memory the machine has available, as heap-memory 0 asks"
        self.base = resident_bytes()
        self.objects = None

    def _advice(self, need: int) -> str:
        """What the user can do, need: the bytes to allow."""
        mb = -(-need * 5 // 4 // MB // 100) * 100
        return ("lgcstat alone and lgcstat --top count the heap without the graph; "
                "to allow more: %s" % self.hint(mb))

    def expect(self, objects: int, in_c: bool = True) -> None:
        """Before the graph: refuse a heap of `objects` objects whose graph
        would need more than the limit (in_c: the graph's C code is at
        hand)."""
        self.objects = objects
        per = (GRAPH_BYTES if in_c else PYTHON_GRAPH_BYTES).get(self.command)
        if self.limit is None or per is None:
            return
        need = objects * per
        if need > self.limit:
            raise HeapTooLarge(
                "the heap has %d objects: the graph %s builds would take about %d MB, more "
                "than the %d MB it may use (%s); %s"
                % (objects, self.command, -(-need // MB), self.limit // MB, self.source,
                   self._advice(need)))

    def check(self, done: int) -> None:
        """While the graph is built (`done` objects so far): stop when the
        process has grown past the limit since the command began."""
        if self.limit is None or self.base is None:
            return
        now = resident_bytes()
        if now is not None and now - self.base > self.limit:
            raise HeapTooLarge(
                "stopped after %d of the heap's %d objects: the graph %s builds had taken %d "
                "MB, past the %d MB it may use (%s); %s"
                % (done, self.objects or 0, self.command, (now - self.base) // MB,
                   self.limit // MB, self.source, self._advice(2 * self.limit)))
