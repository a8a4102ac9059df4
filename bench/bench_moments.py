#!/usr/bin/env python3
"""lbt at thousands of random moments: exact, honest and wrong counted
apart, per variant, stack shape and way of stopping (tests/support/moments.py).

Usage: python3 bench/bench_moments.py [--per N] [--seed S] [--ways attach,sigint,abort,pid]
                                      [--shapes a,b] [--show-wrong] [--sweep N] [VARIANT ...]
  --per N    moments per (variant, shape, way); default 50
  --ways     default attach,sigint,abort; pid (no gdb: python3 -m ljgdb --pid PID lbt and
             python3 -m ljgdb dump --pid PID on the running program) is asked for by name
  --sweep N  instead, the instruction sweep: N `stepi` moments per shape
Prints a Markdown table (variant x shape: exact/honest/wrong over all
ways) and the totals per variant and way, with the time taken.  The pid
way judges two outputs per moment, counted apart as "pid lbt" and "pid dump".
"""
import argparse
import collections
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from support import moments  # noqa: E402
from support.stop import ALL_VARIANTS  # noqa: E402


def labels_of(way):
    """The columns of a way: one per output judged."""
    return ["pid " + c for c in moments.LIVE_COMMANDS] if way == "pid" else [way]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--per", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ways", default=",".join(moments.WAYS))
    ap.add_argument("--shapes", default=",".join(moments.SHAPES))
    ap.add_argument("--show-wrong", action="store_true")
    ap.add_argument("--sweep", type=int, default=0,
                    help="instead: step N machine instructions (stepi) in each shape")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args(argv)
    variants = a.variants or list(ALL_VARIANTS)
    ways = ["sweep"] if a.sweep else a.ways.split(",")
    for w in ways:
        if w not in moments.WAYS + moments.LIVE_WAYS + ("sweep",):
            ap.error("no way %r (%s)" % (w, ", ".join(moments.WAYS + moments.LIVE_WAYS)))
    shapes = a.shapes.split(",")
    if a.sweep:
        a.per = a.sweep
    if "abort" in ways and moments.kernel_cores_possible():
        print("skipping the abort way: %s" % moments.kernel_cores_possible())
        ways.remove("abort")
    columns = [label for w in ways for label in labels_of(w)]
    table = collections.defaultdict(collections.Counter)    # (variant, shape) -> counts
    by_way = collections.defaultdict(collections.Counter)   # (variant, way) -> counts
    reasons = collections.Counter()
    pcs = set()
    times = {}
    work = tempfile.mkdtemp(prefix="ljgdb-moments-")
    for v in variants:
        t0 = time.time()
        # (arm64 under qemu has no attach: moments.ways_of)
        for way in [w for w in ways if moments.can_stop(v, w)]:
            for shape in shapes:
                # Batches of at most 50 moments: a kernel core each for abort.
                done = 0
                while done < a.per:
                    n = a.per if way == "sweep" else min(50, a.per - done)
                    res = moments.sample(v, shape, way, n, a.seed * 1000003 + done,
                                         os.path.join(work, "%s-%s-%s" % (v, shape, way)))
                    for records, info, outs in res:
                        pcs.add((v, info.get("pc")))
                        for label, out in zip(labels_of(way), outs):
                            verdict, why = moments.judge(records, out)
                            table[v, shape][verdict] += 1
                            by_way[v, label][verdict] += 1
                            if verdict != "exact":
                                reasons[(verdict, info["frame0"], why.split(":")[0][:90])] += 1
                            if verdict == "wrong" and a.show_wrong:
                                print("WRONG %s %s %s at %s:\n%s" % (v, shape, label,
                                                                     info["frame0"], out))
                    done += n
        times[v] = time.time() - t0
        tot = sum((by_way[v, w] for w in columns), collections.Counter())
        print("%s: %s in %.0f s" % (v, dict(tot), times[v]), flush=True)
    print()
    print("| variant | " + " | ".join(shapes) + " | total | exact % |")
    print("| --- |" + " --- |" * (len(shapes) + 2))
    for v in variants:
        cells = []
        tot = collections.Counter()
        for s in shapes:
            c = table[v, s]
            tot.update(c)
            cells.append("%d/%d/%d" % (c["exact"], c["honest"], c["wrong"]))
        n = sum(tot.values())
        print("| %s | %s | %d/%d/%d | %.1f |" % (v, " | ".join(cells), tot["exact"], tot["honest"],
                                                 tot["wrong"], 100.0 * tot["exact"] / max(n, 1)))
    print()
    print("| variant | " + " | ".join(columns) + " | time (s) |")
    print("| --- |" + " --- |" * (len(columns) + 1))
    for v in variants:
        print("| %s | %s | %.0f |" % (v, " | ".join(
            "%d/%d/%d" % (by_way[v, w]["exact"], by_way[v, w]["honest"], by_way[v, w]["wrong"])
            if moments.can_stop(v, w.split()[0]) else "-" for w in columns), times[v]))
    print()
    if a.sweep:
        print("Distinct instructions swept: %d" % len(pcs))
    print("Moments not exact, by outcome, innermost machine frame and reason:")
    for (verdict, frame0, why), n in reasons.most_common(30):
        print("  %5d  %-6s %-22s %s" % (n, verdict, frame0, why))
    return 1 if any(table[k]["wrong"] for k in table) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
