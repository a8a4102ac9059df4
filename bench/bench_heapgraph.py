#!/usr/bin/env python3
"""Seconds and peak memory of `lgcpath`, `lgcref` and `lgcstat --retained`
on big heaps, inside gdb (live) and in the core reader.

  python3 bench/bench_heapgraph.py [--sizes N,N,...] [VARIANT ...]
      default: --sizes 1000000,5000000 r21-gc64

testprogs/lua/heap.lua builds a heap of about N GC objects (tables,
strings, closures with upvalues, coroutines) and one probe table, the last
entry of a table that a local of the main chunk holds, and stops.  Inside
gdb, after one `linfo` (the DWARF layout, once per session), `lgcpath` and
`lgcref` of the probe are timed with time.perf_counter; each reads the
whole heap (every object found, sorted; lgcpath then searches breadth
first from the roots, lgcref searches every object's memory for the
probe's bytes, lgcstat --retained builds the dominator tree of every
reached object and reports the probe's retained size).  A core is saved with gcore and the core reader runs each
as a program (python3 -m ljgdb CORE BINARY ...): its wall time and peak
resident memory are measured from outside (/usr/bin/time's figures, read
from os.wait4).  Each answer is checked against the probe: lgcpath must
end at it, lgcref must find the one slot that holds it, lgcstat --retained
must give the probe's path (its retained size is checked by the tests).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from harness import LOADER, LUA_DIR, manifest, read_expected  # noqa: E402

TIMER = """python
import resource, time
gdb.execute("linfo", to_string=True)
probe = [l.split("\\t")[1].split()[1] for l in open(%r) if l.startswith("probe")][0]
for cmd in ("lgcpath", "lgcref", "lgcstat --retained"):
    t = time.perf_counter()
    out = gdb.execute("%%s %%s" %% (cmd, probe), to_string=True)
    dt = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = out.splitlines()[2 if cmd.startswith("lgcstat") else 0]
    print("BENCH %%s %%.2f %%d %%s" %% (cmd.replace(" ", "~"), dt, rss, line.replace(" ", "~")))
end
"""


def gdb(args, cwd):
    cmd = ["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "set pagination off"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                       stdin=subprocess.DEVNULL)
    return p.stdout.decode("utf-8", "replace")


def reader(core, binary, cmd, probe):
    """(seconds, peak RSS in KB, the line that answers) of the core reader
    as a program."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "ljgdb", core, binary] + cmd.split() + [probe],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode().splitlines()
    _, _, usage = os.wait4(p.pid, 0)
    k = 2 if cmd.startswith("lgcstat") else 0
    return time.perf_counter() - t, usage.ru_maxrss, out[k] if len(out) > k else "\n".join(out)


def run(variant, n, work):
    m = manifest()[variant]
    exp = os.path.join(work, "heap.exp")
    timer = os.path.join(work, "timer.gdb")
    with open(timer, "w") as f:
        f.write(TIMER % exp)
    core = os.path.join(work, "heap.core")
    live = gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                "-ex", "source " + timer, "-ex", "gcore " + core, "-ex", "kill",
                "--args", m["host"], os.path.join(LUA_DIR, "heap.lua"), exp, str(n)], work)
    rows = {}
    for cmd, secs, rss, first in re.findall(r"^BENCH (\S+) ([\d.]+) (\d+) (.*)$", live, re.M):
        rows[("gdb (live)", cmd.replace("~", " "))] = (float(secs), int(rss),
                                                       first.replace("~", " "))
    if len(rows) != 3:
        raise SystemExit("no benchmark result:\n" + live[-3000:])
    rec = {r[0]: r[1] for r in read_expected(exp)}
    probe = rec["probe"].split()[1]
    for cmd in ("lgcpath", "lgcref", "lgcstat --retained"):
        rows[("core reader", cmd)] = reader(core, m["host"], cmd, probe)
    os.unlink(core)
    return rows, int(rec["made"]), probe


def check(cmd, first, probe):
    if cmd == "lgcpath":
        return first.startswith("(local keep of thread (the main thread))[")
    if cmd == "lgcstat --retained":
        return "(local keep of thread (the main thread))[" in first
    return first == "references to table (GCtab *)%s: 1" % probe


def main(argv):
    sizes, variants = [1000000, 5000000], []
    i = 0
    while i < len(argv):
        if argv[i] == "--sizes":
            sizes = [int(float(x)) for x in argv[i + 1].split(",")]
            i += 1
        else:
            variants.append(argv[i])
        i += 1
    print("| variant | objects | where | command | seconds | peak RSS (MB) | answer right |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for v in variants or ["r21-gc64"]:
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="ljgdb-bench-") as work:
                rows, made, probe = run(v, n, work)
            for (where, cmd), (secs, rss, first) in sorted(rows.items()):
                print("| %s | %d | %s | %s | %.1f | %.0f | %s |" % (
                    v, made, where, cmd, secs, rss / 1024.0,
                    "yes" if check(cmd, first, probe) else "NO: " + first))
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
