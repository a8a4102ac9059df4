#!/usr/bin/env python3
"""Writes the figures of docs/internals.md: runs testprogs/lua/tour.lua in
the GC64 and X64 builds of upstream 2.1 under gdb with ljgdb, saves the
output of each command, and prints the Markdown of the tour's figures
(every figure is real output of this run).

  python3 docs/tour.py > /tmp/figures.md
"""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from harness import LOADER, LUA_DIR, _cut, _wrap, manifest, read_expected, run_gdb  # noqa: E402

VARIANTS = ("r21-gc64", "r21-x64")
STOP1 = ["lgcstat"] + ["lval --raw L %d" % i for i in range(1, 9)] + ["lgcstat --save SNAP"]
STOP2 = ["lgcstat --diff SNAP --top 3"]


def run(variant, work):
    m = manifest()[variant]
    snap = os.path.join(work, "snap")
    one = [c.replace("SNAP", snap) for c in STOP1]
    two = [c.replace("SNAP", snap) for c in STOP2]
    exp = os.path.join(work, "expected.txt")
    args = ["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run"] + \
        _wrap(one) + ["-ex", "continue"] + _wrap2(two, len(one)) + ["-ex", "continue", "-ex", "kill",
                                 "--args", m["host"], os.path.join(LUA_DIR, "tour.lua"), exp]
    text = run_gdb(args, cwd=work, env={"LUA_PATH": os.path.join(m["src"], "?.lua") + ";;"})
    outs = dict(_cut(text, one + two))
    return {c: outs.get(c.replace("SNAP", snap)) for c in STOP1 + STOP2}, \
        {r[0]: r[1:] for r in read_expected(exp)}, snap


def _wrap2(commands, first):
    """_wrap with the markers numbered from `first` on."""
    args = _wrap([None] * first + commands)
    return args[6 * first:]


def main():
    res = {}
    for v in VARIANTS:
        with tempfile.TemporaryDirectory(prefix="ljgdb-tour-") as work:
            outs, exp, snap = run(v, work)
            res[v] = (outs, exp, snap)
    for v in VARIANTS:
        outs, exp, snap = res[v]
        print("### %s\n" % v)
        for c in STOP1 + STOP2:
            text = (outs[c] or "(no output)").replace(snap, "snap")
            print("```\n(gdb) %s\n%s\n```\n" % (c.replace("SNAP", "snap"), text.rstrip("\n")))
        c1, c2 = exp["count"]
        print("collectgarbage(\"count\") * 1024: %s before, %s after the 1000 coroutines: "
              "%d bytes each\n" % (c1, c2, (int(c2) - int(c1)) // 1000))


if __name__ == "__main__":
    main()
