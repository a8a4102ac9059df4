#!/usr/bin/env python3
"""Objects per second of `lgcstat`, live and from a core, inside gdb and in
the core reader (python3 -m ljgdb CORE ..., no gdb).

  python3 bench/bench_lgcstat.py [--sizes N,N,...] [--big] [VARIANT ...]
      default: --sizes 100000,1000000,5000000 r21-gc64 r21-x64

For each variant and size, testprogs/lua/heap.lua builds a heap of about N
GC objects (tables, strings, closures with upvalues, coroutines) in the test
host and stops in ljgdb_break.  Inside gdb, after one `linfo` (which reads
the struct layout from DWARF, once per gdb session), lgcstat is timed with
time.perf_counter: the first run (which reads every page of the heap from
the process or the core) and the best of 3; then a core is saved
with gcore and the same is done on the core in a new gdb, and in the core
reader (one Python process: the first lgcstat, which reads LuaJIT's layout
and the heap's pages, then the best of 3).  gdb's or the reader's peak
resident memory (ru_maxrss) is printed too.

--big adds a GC64 heap larger than 4 GB (100,000 objects, about 25,000 of
them strings of 200,000 bytes), the point of GC64; its core takes about as
much disk as the heap.  Needs ~12 GB of free memory and disk.  `--sizes 0`
runs no other heap.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, LUA_DIR, manifest  # noqa: E402

TIMER = """python
import resource, time
def _bench():
    gdb.execute("linfo", to_string=True)   # reads the DWARF layout once per session
    t = time.perf_counter(); out = gdb.execute("lgcstat", to_string=True)
    first = time.perf_counter() - t
    best = first
    for _ in range(2):
        t = time.perf_counter(); gdb.execute("lgcstat", to_string=True)
        best = min(best, time.perf_counter() - t)
    m = re.search(r"^objects\\s+(\\d+)", out, re.M)
    s = re.search(r"^sum: (\\d+) bytes; g->gc.total: (\\d+) bytes \\((.*)\\)$", out, re.M)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("BENCH %s %s %s %s %.3f %.3f %d" % (m.group(1), s.group(1), s.group(2),
          s.group(3).replace(" ", "_"), first, best, rss))
import re
_bench()
end
"""


READER = """
import re, resource, sys, time
sys.path.insert(0, sys.argv[1])
import ljgdb
from ljgdb.commands.hosts.corehost import CoreHost
from ljgdb.commands.host import install
from ljgdb.commands.lgcstat import LGcStat
install(CoreHost(sys.argv[2], sys.argv[3]))
t = time.perf_counter(); out = LGcStat().execute("")
first = time.perf_counter() - t
best = first
import gc
for _ in range(2):
    install(CoreHost(sys.argv[2], sys.argv[3]))
    # (The last round's core, its mmap and the pages it touched, is held
    # by a reference cycle until a full collection: one now, so that the
    # peak is one round's and not three rounds' cores.)
    gc.collect()
    t = time.perf_counter(); LGcStat().execute("")
    best = min(best, time.perf_counter() - t)
m = re.search(r"^objects\\s+(\\d+)", out, re.M)
s = re.search(r"^sum: (\\d+) bytes; g->gc.total: (\\d+) bytes \\((.*)\\)$", out, re.M)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("BENCH %s %s %s %s %.3f %.3f %d" % (m.group(1), s.group(1), s.group(2),
      s.group(3).replace(" ", "_"), first, best, rss))
# The floor: a loop that only follows g->gc.root's nextgc links through the
# core's mapped bytes (one struct unpack per object, no sizing, no counts).
import bisect, mmap, struct
from ljgdb.commands.base import get_vm
from ljgdb.gdb_ext.backends.corefile import segments
host = install(CoreHost(sys.argv[2], sys.argv[3]))
vm = get_vm()
segs = sorted((sg.vaddr, sg.vaddr + sg.filesz, sg.offset) for sg in segments(sys.argv[2]))
starts = [sg[0] for sg in segs]
with open(sys.argv[2], "rb") as f:
    mv = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
unpack = struct.Struct("<Q" if vm.lay.gc64 else "<I").unpack_from
o = vm.gref(vm.G + vm.lay.G.gc_root)
n, lo, hi, off = 0, 0, 0, 0
t = time.perf_counter()
while o:
    if not lo <= o < hi:
        lo, hi, fo = segs[bisect.bisect_right(starts, o) - 1]
        off = fo - lo
    o = unpack(mv, o + off)[0]
    n += 1
print("FLOOR %d %.3f" % (n, time.perf_counter() - t))
"""


def reader(core, binary):
    p = subprocess.run([sys.executable, "-c", READER, ROOT, core, binary], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return p.stdout.decode("utf-8", "replace")


def gdb(args, cwd):
    cmd = ["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "set pagination off"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                       stdin=subprocess.DEVNULL)
    return p.stdout.decode("utf-8", "replace")


def parse(text):
    m = re.search(r"^BENCH (\d+) (\d+) (\d+) (\S+) ([\d.]+) ([\d.]+) (\d+)$", text, re.M)
    if not m:
        raise SystemExit("no benchmark result:\n" + text[-3000:])
    objs, summ, total, verdict, first, best, rss = m.groups()
    return int(objs), int(summ), int(total), verdict, float(first), float(best), int(rss)


def run(variant, n, slen, work):
    m = manifest()[variant]
    timer = os.path.join(work, "timer.gdb")
    with open(timer, "w") as f:
        f.write(TIMER)
    core = os.path.join(work, "heap.core")
    rows = []
    live = gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                "-ex", "source " + timer, "-ex", "gcore " + core, "-ex", "kill",
                "--args", m["host"], os.path.join(LUA_DIR, "heap.lua"),
                os.path.join(work, "heap.exp"), str(n), str(slen)], work)
    rows.append(("live",) + parse(live))
    size = os.path.getsize(core) if os.path.exists(core) else 0
    text = gdb(["-ex", "source " + LOADER, "-ex", "core-file " + core, "-ex", "source " + timer,
                m["host"]], work)
    rows.append(("core",) + parse(text))
    text = reader(core, m["host"])
    rows.append(("core reader",) + parse(text))
    fl = re.search(r"^FLOOR (\d+) ([\d.]+)$", text, re.M)
    if fl:
        print("(the bare chain walk over g->gc.root in the reader: %s objects in %s s, %.0f "
              "objects/s)" % (fl.group(1), fl.group(2), int(fl.group(1)) / float(fl.group(2))),
              file=sys.stderr)
    if os.path.exists(core):
        os.unlink(core)
    return rows, size


def main(argv):
    sizes = [100000, 1000000, 5000000]
    big = False
    variants = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--sizes":
            sizes = [int(float(x)) for x in argv[i + 1].split(",") if int(float(x))]
            i += 1
        elif a == "--big":
            big = True
        else:
            variants.append(a)
        i += 1
    variants = variants or ["r21-gc64", "r21-x64"]
    runs = [(v, n, 16) for v in variants for n in sizes]
    if big:
        runs.append(("r21-gc64", 100000, 200000))
    print("| variant | mode | objects | gc.total (MB) | first run (s) | best of 3 (s) | "
          "objects/s (first) | objects/s (best) | peak RSS (MB) | exact |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for v, n, slen in runs:
        with tempfile.TemporaryDirectory(prefix="ljgdb-bench-") as work:
            rows, core_size = run(v, n, slen, work)
        for mode, objs, summ, total, verdict, first, best, rss in rows:
            print("| %s | %s | %d | %.1f | %.2f | %.2f | %.0f | %.0f | %.0f | %s |" % (
                v, mode, objs, total / 1048576.0, first, best, objs / first, objs / best,
                rss / 1024.0, "yes" if summ == total else verdict))
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
