#!/usr/bin/env python3
"""The cost of lprofile: milliseconds a sample takes with a deep stack, and
how much the sampled program slows down.

  python3 bench/bench_profile.py [--depth N] [--seconds S] [--hz H,...] [VARIANT ...]
      (defaults: depth 200, 10 s, 50 and 200 Hz, r21-gc64 r21-x64)

The test host runs testprogs/lua/profile.lua in its `deep` mode: DEPTH Lua
frames, then a busy loop (JIT-compiled) that writes the rounds it has done
every quarter second.  Its speed alone is measured first (4 s, no gdb);
then under gdb with `lprofile --seconds S --hz H`.  Prints a Markdown
table: the mean and largest time of a sample (lprofile's own count, from
the stop to the resume), the frames in a stack, and the program's speed
under sampling as a share of its speed alone.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, manifest  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "profile.lua")


def rate(path, t_from=None, t_to=None):
    """Rounds a second over the log's lines (profile.lua deep's: time,
    rounds), those from t_from to t_to when given, else all but the first."""
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 2:
                rows.append((float(p[0]), int(p[1])))
    if t_from is not None:
        rows = [r for r in rows if t_from <= r[0] <= t_to]
    else:
        rows = rows[1:]
    if len(rows) < 2:
        raise RuntimeError("too few lines in %s" % path)
    (t0, r0), (t1, r1) = rows[0], rows[-1]
    return (r1 - r0) / (t1 - t0)


def alone(host, depth, tmp):
    log = os.path.join(tmp, "alone.log")
    p = subprocess.Popen([host, PROG, log, "deep", str(depth)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    time.sleep(4)
    p.kill()
    p.wait()
    return rate(log)


def profiled(host, depth, seconds, hz, tmp):
    log = os.path.join(tmp, "prof-%g.log" % hz)
    fold = os.path.join(tmp, "prof-%g.folded" % hz)
    cmd = ["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "source " + LOADER,
           "-ex", "break ljgdb_break", "-ex", "run",
           "-ex", "lprofile --seconds %g --hz %g --folded %s" % (seconds, hz, fold),
           "-ex", "kill", "--args", host, PROG, log, "deep", str(depth)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         cwd=tmp).stdout.decode("utf-8", "replace")
    m = re.search(r"^lprofile: (\d+) samples .* a sample took ([\d.]+) ms on average, "
                  r"([\d.]+) ms at most", out, re.M)
    if not m:
        raise RuntimeError(out[-2000:])
    with open(fold) as f:
        depths = [line.rsplit(" ", 1)[0].count(";") + 1 for line in f]
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), max(depths), rate(log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--hz", default="50,200")
    ap.add_argument("variants", nargs="*", default=["r21-gc64", "r21-x64"])
    a = ap.parse_args()
    m = manifest()
    print("| variant | Hz | samples | frames in a stack | ms a sample (mean / max) | "
          "program's speed vs alone |")
    print("| --- | --- | --- | --- | --- | --- |")
    for v in a.variants:
        host = m[v]["host"]
        with tempfile.TemporaryDirectory() as tmp:
            base = alone(host, a.depth, tmp)
            for hz in [float(h) for h in a.hz.split(",")]:
                n, mean, mx, frames, r = profiled(host, a.depth, a.seconds, hz, tmp)
                print("| %s | %g | %d | %d | %.2f / %.2f | %.0f%% |"
                      % (v, hz, n, frames, mean, mx, 100.0 * r / base))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
