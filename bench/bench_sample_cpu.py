#!/usr/bin/env python3
"""The CPU one record sample costs, by how long the sampler slept before it.

  python3 bench/bench_sample_cpu.py [--samples N] [--modes deep,busy-interp,coroutines]
                                    [--gaps 0,0.001,0.01] [VARIANT]
      (defaults: 800 samples, the three modes, gaps of 0, 1 and 10 ms, r21-gc64)

Runs testprogs/lua/profile.lua MODE (deep: 200 Lua frames under a
JIT-compiled loop; busy-interp: a few frames in interpreted loops;
coroutines: 16 coroutines spinning in turns) and
takes N samples of it with the engine's Recorder in this process (the
work of `python3 -m ljgdb record`, without its start), sleeping GAP
seconds between samples: 0.01 is record's pace at 100 Hz.  Prints the CPU
of this process per sample (getrusage: user and system time over the
samples, the sleeps' own cost included), the pause record reports (median
and 99th percentile), and how many stops the C sampler made again (its
copy lacked a range), as a Markdown table; the sample counts add up over
a program's rows.  What it shows: on a machine whose CPUs idle
between samples, a sample after a 10 ms sleep costs much more than one
taken right after another (caches and the idle CPU's state), so the
profiler's CPU at 100 Hz is not the per-sample cost of a busy loop times
100."""
import argparse
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from gdb_ext.backends.live import open_process, sampling_target  # noqa: E402
from gdb_ext.stack.recorder import Recorder  # noqa: E402
from support.stop import manifest  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "profile.lua")


def measure(host, mode, n, gaps, tmp):
    log = os.path.join(tmp, mode + ".log")
    p = subprocess.Popen([host, PROG, log, mode], stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not os.path.exists(log) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc = open_process(p.pid)
        rec = Recorder(proc, *sampling_target(proc))
        for _ in range(20):
            rec.sample()
        rows = []
        for gap in gaps:
            pauses = []
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            for _ in range(n):
                pauses.append(rec.sample().pause)
                if gap:
                    time.sleep(gap)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            pauses.sort()
            rows.append((mode, gap, 1e6 * (r1.ru_utime - r0.ru_utime) / n,
                         1e6 * (r1.ru_stime - r0.ru_stime) / n, 1e6 * pauses[n // 2],
                         1e6 * pauses[int(n * 0.99)], rec.fast, rec.retakes,
                         rec.prof.samples))
        return rows
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=800)
    ap.add_argument("--modes", default="deep,busy-interp,coroutines")
    ap.add_argument("--gaps", default="0,0.001,0.01")
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    import tempfile
    host = manifest()[a.variant]["host"]
    gaps = [float(g) for g in a.gaps.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in a.modes.split(","):
            rows.extend(measure(host, mode, a.samples, gaps, tmp))
    print("%s, %d samples a row" % (a.variant, a.samples))
    print()
    print("| program | sleep between samples | CPU a sample: user + system (us) | pause "
          "(median / p99, us) | samples stopped in C (of all so far) | stops made again |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, gap, user, sys_, pause, p99, fast, again, total in rows:
        print("| profile.lua %s | %g ms | %.0f + %.0f = %.0f | %.0f / %.0f | %d of %d | %d |"
              % (mode, 1000 * gap, user, sys_, user + sys_, pause, p99, fast, total, again))


if __name__ == "__main__":
    main()
