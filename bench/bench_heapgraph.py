#!/usr/bin/env python3
"""Seconds and peak memory of `lgcpath`, `lgcref`, `lgcstat --retained`,
`--save` and `--diff` on big heaps, inside gdb (live) and in the core
reader.

  python3 bench/bench_heapgraph.py [--sizes N,N,...] [--runs R] [VARIANT ...]
      default: --sizes 1000000,5000000 --runs 1 r21-gc64

testprogs/lua/heap.lua builds a heap of about N GC objects (tables,
strings, closures with upvalues, coroutines) and one probe table, the last
entry of a table that a local of the main chunk holds, and stops.  Inside
gdb, after one `linfo` (the DWARF layout, once per session), `lgcstat`
(the walk alone: each command's seconds are also given as a multiple of
its, and its peak memory above lgcstat's in bytes an object), `lgcpath` and
`lgcref` of the probe are timed with time.perf_counter, then
`lgcstat --retained`, `--save`, `--diff` and `--save --format
heapsnapshot` (the V8 heap snapshot: its file's size is printed too); each reads the
whole heap (every object found, sorted; lgcpath then searches breadth
first from the roots, lgcref searches every object's memory for the
probe's bytes, lgcstat --retained builds the dominator tree of every
reached object and reports the probe's retained size).  A core is saved with gcore and the core reader runs each
as a program (python3 -m ljgdb CORE BINARY ...): its wall time and peak
resident memory are measured from outside (/usr/bin/time's figures, read
from os.wait4).  (Inside gdb the peak is the session's so far, the
commands run one after another: an upper bound for each.)  Each answer
is checked against the program's own count and the probe: lgcpath must
end at it, lgcref must find the one slot that holds it, lgcstat --retained
must give the probe's path (its retained size is checked by the tests),
--save must save, and --diff, of the heap against its own snapshot, must
find no new object.  With --runs R the commands run R rounds, one after
another within a round (lgcstat too), and each command's fewest seconds
and largest peak (in gdb, the first round's) are given: the multiples of
lgcstat's time then compare runs made in the same minutes, so a busy
moment of the machine counts against neither.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, LUA_DIR, manifest, read_expected  # noqa: E402

# The commands timed: (command, whether the probe is its argument).  The
# --save and --diff pair compares the heap with itself (nothing new).
# lgcstat first: the walk alone, what the others are measured against.
COMMANDS = (("lgcstat", False), ("lgcpath", True), ("lgcref", True), ("lgcstat --retained", True),
            ("lgcstat --save SNAP", False), ("lgcstat --diff SNAP", False),
            ("lgcstat --save SNAP.heapsnapshot --format heapsnapshot", False))


def answer(cmd, out):
    """The line of a command's output that answers it."""
    lines = out.splitlines() or [""]
    if cmd.startswith("lgcstat --diff"):
        return next((ln for ln in lines if ln.startswith("New objects")), lines[-1])
    if cmd.startswith("lgcstat --retained"):
        return lines[2] if len(lines) > 2 else lines[-1]
    if cmd == "lgcstat":
        return next((ln for ln in lines if ln.startswith("objects")), lines[0])
    return lines[0]


TIMER = """python
import resource, time
gdb.execute("linfo", to_string=True)
probe = [l.split("\\t")[1].split()[1] for l in open(%r) if l.startswith("probe")][0]
snap = %r
COMMANDS = %r
RUNS = %d
%s
for cmd, with_probe in [c for _ in range(RUNS) for c in COMMANDS]:
    line = cmd.replace("SNAP", snap) + (" " + probe if with_probe else "")
    t = time.perf_counter()
    out = gdb.execute(line, to_string=True)
    dt = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("BENCH %%s %%.2f %%d %%s" %% (cmd.replace(" ", "~"), dt, rss,
                                   answer(cmd, out).replace(" ", "~")))
end
"""


def gdb(args, cwd):
    cmd = ["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "set pagination off"] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                       stdin=subprocess.DEVNULL)
    return p.stdout.decode("utf-8", "replace")


def reader(core, binary, cmd, args):
    """(seconds, peak RSS in KB, the line that answers) of the core reader
    as a program."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "ljgdb", core, binary] + cmd.split() + args,
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.read().decode()
    _, _, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_maxrss, answer(cmd, out)


def keep(rows, key, got):
    """Of a command's runs: the fewest seconds, the largest peak (but in
    gdb the first round's: its peak is the session's so far, which the
    first round has reached), the first run's answer (each run's must be
    right: check() sees the worst)."""
    secs, rss, first = got
    if key in rows:
        s0, r0, f0 = rows[key]
        rows[key] = (min(s0, secs), r0 if key[0] == "gdb (live)" else max(r0, rss),
                     f0 if f0 == first else first + " (runs differ)")
    else:
        rows[key] = got


def run(variant, n, work, runs):
    m = manifest()[variant]
    exp = os.path.join(work, "heap.exp")
    timer = os.path.join(work, "timer.gdb")
    import inspect
    with open(timer, "w") as f:
        f.write(TIMER % (exp, os.path.join(work, "snap-gdb"), COMMANDS, runs,
                         inspect.getsource(answer)))
    core = os.path.join(work, "heap.core")
    live = gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                "-ex", "source " + timer, "-ex", "gcore " + core, "-ex", "kill",
                "--args", m["host"], os.path.join(LUA_DIR, "heap.lua"), exp, str(n)], work)
    rows = {}
    found = re.findall(r"^BENCH (\S+) ([\d.]+) (\d+) (.*)$", live, re.M)
    for cmd, secs, rss, first in found:
        keep(rows, ("gdb (live)", cmd.replace("~", " ")), (float(secs), int(rss),
                                                           first.replace("~", " ")))
    if len(found) != runs * len(COMMANDS):
        raise SystemExit("no benchmark result:\n" + live[-3000:])
    rec = {r[0]: r[1] for r in read_expected(exp)}
    probe = rec["probe"].split()[1]
    for cmd, with_probe in [c for _ in range(runs) for c in COMMANDS]:
        keep(rows, ("core reader", cmd),
             reader(core, m["host"], cmd.replace("SNAP", os.path.join(work, "snap-core")),
                    [probe] if with_probe else []))
    os.unlink(core)
    files = {w: os.path.getsize(os.path.join(work, "snap-%s.heapsnapshot" % tag))
             for w, tag in (("gdb (live)", "gdb"), ("core reader", "core"))
             if os.path.exists(os.path.join(work, "snap-%s.heapsnapshot" % tag))}
    return rows, int(rec["made"]), probe, files


def check(cmd, first, probe, made):
    if cmd == "lgcstat":
        # (heap.lua's own objects and the VM's few hundred)
        return first.split()[0] == "objects" and made <= int(first.split()[1]) < made + 2000
    if cmd == "lgcpath":
        return first.startswith("(local keep of thread (the main thread))[")
    if cmd == "lgcstat --retained":
        return "(local keep of thread (the main thread))[" in first
    if cmd == "lgcstat --save SNAP":
        return first.startswith("Saved ")
    if cmd == "lgcstat --diff SNAP":
        return first == "New objects: none"
    if cmd.endswith("--format heapsnapshot"):
        # (every object a node, and their bytes lgcstat's count)
        return first.startswith("Wrote a V8 heap snapshot") and " but lgcstat counts " not in first
    return first == "references to table (GCtab *)%s: 1" % probe


def main(argv):
    sizes, variants, runs = [1000000, 5000000], [], 1
    i = 0
    while i < len(argv):
        if argv[i] == "--sizes":
            sizes = [int(float(x)) for x in argv[i + 1].split(",")]
            i += 1
        elif argv[i] == "--runs":
            runs = int(argv[i + 1])
            i += 1
        else:
            variants.append(argv[i])
        i += 1
    print("| variant | objects | where | command | seconds | x lgcstat | peak RSS (MB) | "
          "bytes an object over lgcstat | answer right |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for v in variants or ["r21-gc64"]:
        for n in sizes:
            with tempfile.TemporaryDirectory(prefix="ljgdb-bench-") as work:
                rows, made, probe, files = run(v, n, work, runs)
            for (where, cmd), (secs, rss, first) in sorted(rows.items()):
                right = "yes" if check(cmd, first, probe, made) else "NO: " + first
                if cmd.endswith("heapsnapshot") and where in files:
                    right += " (a file of %.0f MB)" % (files[where] / 1048576.0)
                base_secs, base_rss, _ = rows[(where, "lgcstat")]
                print("| %s | %d | %s | %s | %.1f | %.1f | %.0f | %.0f | %s |" % (
                    v, made, where, cmd, secs, secs / base_secs, rss / 1024.0,
                    max(0, rss - base_rss) * 1024.0 / made, right))
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
