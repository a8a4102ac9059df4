#!/usr/bin/env python3
"""Where a heap-graph command's time and page faults go, phase by phase,
in the core reader.

  python3 bench/bench_graph_phases.py [--size N] [--runs R] [--shuffle] [VARIANT]
      default: --size 10000000 --runs 3 r21-gc64

testprogs/lua/heap.lua builds a heap of about N objects (as in
bench_heapgraph.py; with --shuffle the table that holds them lists them
in a random order, so that the references from it point all over the
heap) and gdb saves its core.  Then `lgcstat`, `lgcpath PROBE`
and `lgcstat --retained PROBE` each run R times in turns, each in a new
process of the core reader (python3 -m ljgdb CORE BINARY ...) with a timer
around each phase of the engine: the walk of the object lists and of the
string table (walkc.c), the objects sorted by address (walkc_sort_into),
the graph's index of them, the references decoded (graphc.c's
read_memory), the references only Python reads, and the search (the
dominator tree, or lgcpath's breadth-first search).  Each phase's fewest
seconds over the runs is printed, with its minor page faults (the kernel
giving the process a fresh page: on a virtual machine they cost as much as
the work on the page) and the peak resident memory at its end.  "whole
command" runs from the call of the core reader's main (the interpreter's
start and the engine's imports not counted); "rest" is that less its
phases: the core's mapping, the layout, the roots, the output.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

# The phases timed: (label, module, class, method).
PHASES = (("walk: object lists", "walkc", "CWalk", "walk"),
          ("walk: string table", "walkc", "CWalk", "strings"),
          ("objects sorted", "gcstat", "HeapWalker", "objects"),
          ("graph's index", "graphc", "_Graph", "__init__"),
          ("references decoded", "graphc", "_Graph", "read_memory"),
          ("references in Python", "graphc", "_Graph", "others"),
          ("dominator tree", "graphc", "_Graph", "dominators"),
          ("breadth-first search", "graphc", "_Graph", "parents"))


def child(argv):
    """In the core reader's process: run one command with the phases
    timed, and print them as JSON on the last line of stderr."""
    import functools
    import importlib
    import resource
    import time
    sys.path.insert(0, ROOT)
    got = {}

    def timed(label, f):
        @functools.wraps(f)
        def run(*a, **k):
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                g = got.setdefault(label, [0.0, 0, 0])
                g[0] += time.perf_counter() - t0
                g[1] += r1.ru_minflt - r0.ru_minflt
                g[2] = r1.ru_maxrss
        return run

    for label, mod, cls, meth in PHASES:
        c = getattr(importlib.import_module("ljgdb.gdb_ext.heap." + mod), cls)
        setattr(c, meth, timed(label, getattr(c, meth)))
    from ljgdb.commands.cli import main
    t0 = time.perf_counter()
    sys.argv = ["ljgdb"] + argv
    try:
        main()
    except SystemExit:
        pass
    got["whole command"] = [time.perf_counter() - t0,
                            resource.getrusage(resource.RUSAGE_SELF).ru_minflt,
                            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]
    sys.stdout.flush()
    print(json.dumps(got), file=sys.stderr)


def make_core(variant, n, work, shuffle):
    from support.stop import LOADER, LUA_DIR, manifest, read_expected
    host = manifest()[variant]["host"]
    exp, core = os.path.join(work, "heap.exp"), os.path.join(work, "heap.core")
    subprocess.run(["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "source " + LOADER,
                    "-ex", "break ljgdb_break", "-ex", "run", "-ex", "gcore " + core, "-ex", "kill",
                    "--args", host, os.path.join(LUA_DIR, "heap.lua"), exp, str(n)]
                   + (["16", "1"] if shuffle else []),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                   cwd=work, check=True)
    rec = {r[0]: r[1] for r in read_expected(exp)}
    return host, core, rec["probe"].split()[1], int(rec["made"])


def main(argv):
    n, runs, variant, shuffle = 10000000, 3, "r21-gc64", False
    i = 0
    while i < len(argv):
        if argv[i] == "--size":
            n = int(float(argv[i + 1]))
            i += 1
        elif argv[i] == "--runs":
            runs = int(argv[i + 1])
            i += 1
        elif argv[i] == "--shuffle":
            shuffle = True
        else:
            variant = argv[i]
        i += 1
    with tempfile.TemporaryDirectory(prefix="ljgdb-phases-") as work:
        host, core, probe, made = make_core(variant, n, work, shuffle)
        cmds = ("lgcstat", "lgcpath " + probe, "lgcstat --retained " + probe)
        best = {}
        for _ in range(runs):
            for cmd in cmds:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", core, host]
                                   + cmd.split(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, cwd=ROOT)
                last = p.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
                got = json.loads(last[0]) if last and last[0].startswith("{") else None
                if got is None:
                    raise SystemExit("%s gave no phases:\n%s" % (cmd, p.stderr.decode()[-2000:]))
                b = best.setdefault(cmd.split(" 0x")[0], {})
                for label, (secs, faults, rss) in got.items():
                    if label not in b or secs < b[label][0]:
                        b[label] = (secs, faults, rss)
    print("%s, %d objects (heap.lua%s), the core reader, fewest seconds of %d runs:"
          % (variant, made, ", shuffled" if shuffle else "", runs))
    print()
    print("| command | phase | seconds | minor page faults | peak RSS after (MB) |")
    print("| --- | --- | --- | --- | --- |")
    for cmd, b in best.items():
        labels = [p[0] for p in PHASES if p[0] in b]
        rest = b["whole command"][0] - sum(b[lb][0] for lb in labels)
        for lb in labels:
            secs, faults, rss = b[lb]
            print("| %s | %s | %.2f | %d | %d |" % (cmd, lb, secs, faults, rss // 1024))
        print("| %s | rest | %.2f | | |" % (cmd, rest))
        secs, faults, rss = b["whole command"]
        print("| %s | **whole command** | %.2f | %d | %d |" % (cmd, secs, faults, rss // 1024))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        main(sys.argv[1:])
