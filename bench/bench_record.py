#!/usr/bin/env python3
"""The cost of `python3 -m ljgdb record` on a running program, next to
lprofile (gdb) and py-spy on an equivalent Python program, in one run.

  python3 bench/bench_record.py [--seconds S] [--depth N] [--rates 100,1000] [VARIANT]
      (defaults: 10 s, depth 200, 100 and 1000 Hz, r21-gc64)

The Lua program is testprogs/lua/profile.lua `deep`: DEPTH Lua frames, then
a JIT-compiled busy loop that logs the rounds it has done every quarter
second.  The Python program does the same (DEPTH frames, then a loop
logging its rounds).  Each configuration runs a fresh program for S
seconds and measures, from the program itself and /proc/PID/stat:
  - its CPU share: (utime + stime) / wall time over the sampled window;
  - its speed: rounds a second (from its log), as a share of its speed alone;
  - the profiler's own CPU: its utime + stime / wall (getrusage of the
    child), in % of one core;
  - for record: the time the process was held in a sample, median and
    99th percentile (record's own count, from before the first ptrace
    request to after the last).
Prints a Markdown table (docs/benchmarks.md has the figures)."""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, manifest  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "profile.lua")
PY_PROG = r'''
import sys, time
out = open(sys.argv[1], "w")
def spin(n):
    x = 0
    for i in range(n):
        x = (x + i * 7) % 1000003
    return x
def down(n):
    if n > 0:
        return down(n - 1)
    rounds, last = 0, time.monotonic()
    while True:
        spin(2000)
        rounds += 1
        t = time.monotonic()
        if t - last >= 0.25:
            out.write("%.6f\t%d\n" % (t, rounds)); out.flush()
            last = t
sys.setrecursionlimit(10000)
down(int(sys.argv[2]))
'''


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def speed(path, t_from, t_to):
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 2:
                rows.append((float(p[0]), int(p[1])))
    rows = [r for r in rows if t_from <= r[0] <= t_to]
    if len(rows) < 3:
        raise RuntimeError("too few lines in %s" % path)
    (t0, r0), (t1, r1) = rows[0], rows[-1]
    return (r1 - r0) / (t1 - t0)


class Program(object):
    """A fresh program (Lua or Python), warmed up for a second."""

    def __init__(self, argv, log, tmp):
        self.log = log
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  cwd=tmp)
        time.sleep(1.5)

    def window(self, run, seconds):
        """Runs run() (or sleeps for `seconds` when None) and measures the
        program meanwhile: (cpu share, rounds a second, run's result)."""
        c0, w0, m0 = cpu_seconds(self.p.pid), time.time(), time.monotonic()
        got = run() if run is not None else time.sleep(seconds)
        c1, w1, m1 = cpu_seconds(self.p.pid), time.time(), time.monotonic()
        return (c1 - c0) / (w1 - w0), speed(self.log, m0, m1), got

    def close(self):
        self.p.kill()
        self.p.wait()


def child_cpu(argv, **kw):
    """Runs argv; (its output, its CPU seconds, its wall seconds)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.monotonic()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw).stdout
    w = time.monotonic() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (out.decode("utf-8", "replace"), (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    host = manifest()[a.variant]["host"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def lua(tag):
            log = os.path.join(tmp, tag + ".log")
            return Program([host, PROG, log, "deep", str(a.depth)], log, tmp)

        def py(tag):
            log = os.path.join(tmp, tag + ".log")
            script = os.path.join(tmp, "busy.py")
            with open(script, "w") as f:
                f.write(PY_PROG)
            return Program([sys.executable, script, log, str(a.depth)], log, tmp)

        def measure(name, make, argv_of, parse=None):
            prog = make(name.replace(" ", "-"))
            try:
                alone = prog.window(None, a.seconds)
                if argv_of is None:
                    rows.append((name, alone, None, None))
                    return
                share, rate, (out, cpu, wall) = prog.window(
                    lambda: child_cpu(argv_of(prog.p.pid), cwd=tmp), a.seconds)
                extra = parse(out) if parse else ""
                rows.append((name, alone, (share, rate), (100.0 * cpu / wall, extra)))
            finally:
                prog.close()

        def record_argv(rate):
            return lambda pid: [sys.executable, "-m", "ljgdb", "record", "--pid", str(pid),
                                "--rate", str(rate), "--duration", str(a.seconds), "--format",
                                "folded", "-o", os.path.join(tmp, "r.folded")]

        def record_pause(out):
            m = re.search(r"held (\d+) us a sample \(median\), (\d+) us \(99th", out)
            n = re.search(r"(\d+) samples in", out)
            if not m:
                raise RuntimeError(out[-2000:])
            return "%s samples; held %s us median, %s us p99" % (
                n.group(1), m.group(1), m.group(2))

        def lprofile_argv(pid):
            return ["gdb", "-nx", "--batch", "-p", str(pid), "-ex", "source " + LOADER,
                    "-ex", "lprofile --seconds %g --hz 100" % a.seconds]

        def lprofile_stats(out):
            m = re.search(r"^lprofile: (\d+) samples .* a sample took ([\d.]+) ms on average",
                          out, re.M)
            if not m:
                raise RuntimeError(out[-2000:])
            return "%s samples; %.0f us a sample (mean)" % (m.group(1), 1000 * float(m.group(2)))

        def pyspy_argv(pid):
            return ["py-spy", "record", "--pid", str(pid), "--rate", "100", "--duration",
                    str(int(round(a.seconds))), "--format", "raw", "-o", os.path.join(tmp, "p.txt")]

        for r in [float(x) for x in a.rates.split(",")]:
            measure("ljgdb record %g Hz" % r, lua, record_argv(r), record_pause)
        measure("lprofile 100 Hz (gdb)", lua, lprofile_argv, lprofile_stats)
        measure("py-spy record 100 Hz (Python)", py, pyspy_argv)
    print("Program: %s, %d Lua frames (py-spy: the same shape in Python), %g s a window"
          % (a.variant, a.depth, a.seconds))
    print()
    print("| profiler | program's CPU share alone | sampled | its speed sampled vs alone | "
          "profiler's CPU (% of a core) | samples, pause |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, alone, sampled, prof in rows:
        print("| %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s |"
              % (name, 100 * alone[0], 100 * sampled[0], 100.0 * sampled[1] / alone[1],
                 prof[0], prof[1]))


if __name__ == "__main__":
    main()
