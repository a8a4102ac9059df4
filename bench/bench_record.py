#!/usr/bin/env python3
"""The cost of `python3 -m ljgdb record` on a running program, next to
lprofile (gdb) and py-spy on an equivalent Python program, in one run.

  python3 bench/bench_record.py [--seconds S] [--depth N] [--rates 100,1000]
                                [--baseline DIR] [VARIANT]
      (defaults: 10 s, depth 200, 100 and 1000 Hz, r21-gc64)

--baseline DIR: another checkout of ljgdb (git archive COMMIT | tar -x -C
DIR) whose record is measured too, at the first rate, plain and with its
phases timed, in the same run (a change's effect, under the same load).

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
record (--sampler ptrace) stops the process with its C sampler
(gdb_ext/backends/ptstop.c) where it can build it; one more run at the first rate uses the Python
sampler (LJGDB_SAMPLER=python), and one more has the Python sampler's
pause split into phases (PHASES below), timed by wrappers this script puts
around the live backend's calls (the product is not changed; the wrappers
cost a few microseconds a call, so that run's pause is a little longer).
Prints Markdown tables (docs/benchmarks.md has the figures).  py-spy is
the one on PATH (pip install py-spy)."""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, manifest  # noqa: E402
from bench_profile import rate  # noqa: E402

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


# The phases of a sample's pause, in the order they happen.
PHASES = (("list", "/proc/PID/task listed"),
          ("seize", "PTRACE_SEIZE"),
          ("interrupt", "PTRACE_INTERRUPT"),
          ("wait", "waitpid until the thread stops"),
          ("regs", "PTRACE_GETREGSET"),
          ("copy", "copy_moment (the memory copied)"),
          ("detach", "PTRACE_DETACH"),
          ("other", "the rest (Python between the calls)"))


def record_with_phases(root, argv):
    """`python3 -m ljgdb record ARGV` with the pause of each sample split
    into PHASES by wrappers around the live backend's calls (counted only
    inside LiveProcess.stopped()); prints a line 'phases: NAME=MEDIAN/P99
    ...' (microseconds) on stderr at the end."""
    import contextlib
    sys.path.insert(0, root)
    from ljgdb.commands import record
    from ljgdb.gdb_ext.backends import live
    from ljgdb.gdb_ext.stack import recorder
    clock = time.monotonic
    cur = {}
    inside = [False]
    per = []

    def add(name, t0):
        if inside[0]:
            cur[name] = cur.get(name, 0.0) + clock() - t0

    def timed(name, fn):
        def wrapper(*args, **kw):
            t0 = clock()
            try:
                return fn(*args, **kw)
            finally:
                add(name, t0)
        return wrapper

    names = {live.PTRACE_SEIZE: "seize", live.PTRACE_INTERRUPT: "interrupt",
             live.PTRACE_DETACH: "detach", live.PTRACE_GETREGSET: "regs"}
    ptrace = live.ptrace

    def traced(request, *args):
        t0 = clock()
        try:
            return ptrace(request, *args)
        finally:
            add(names.get(request, "other"), t0)
    live.ptrace = traced
    for attr, name in (("task_ids", "list"), ("_wait", "wait")):
        setattr(live.LiveProcess, attr, timed(name, getattr(live.LiveProcess, attr)))
    recorder.copy_moment = timed("copy", recorder.copy_moment)
    stopped = live.LiveProcess.stopped

    @contextlib.contextmanager
    def stopped_inside(self, *args):
        inside[0] = True
        try:
            with stopped(self, *args) as p:
                yield p
        finally:
            inside[0] = False
    live.LiveProcess.stopped = stopped_inside
    sample = recorder.Recorder.sample

    def sample_phases(self):
        cur.clear()
        s = sample(self)
        per.append((s.pause, dict(cur)))
        return s
    recorder.Recorder.sample = sample_phases
    rc = record.record_main(argv)
    out = {k: [] for k, _ in PHASES}
    for pause, ph in per:
        for k, _ in PHASES[:-1]:
            out[k].append(ph.get(k, 0.0))
        out["other"].append(pause - sum(ph.get(k, 0.0) for k, _ in PHASES[:-1]))

    def q(v, f):
        v = sorted(v)
        return 1e6 * v[min(len(v) - 1, int(len(v) * f))] if v else 0.0

    def mean(v):
        return 1e6 * sum(v) / len(v) if v else 0.0
    out["pause"] = [p for p, _ in per]
    sys.stderr.write("phases: %s\n" % " ".join(
        "%s=%.0f/%.0f/%.0f" % (k, q(out[k], 0.5), q(out[k], 0.99), mean(out[k]))
        for k in ["pause"] + [k for k, _ in PHASES]))
    return rc


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))


def busy_seconds():
    """CPU seconds the whole machine has spent busy (every CPU, /proc/stat:
    all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / float(os.sysconf("SC_CLK_TCK"))


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
        c0, w0, m0, b0 = cpu_seconds(self.p.pid), time.time(), time.monotonic(), busy_seconds()
        got = run() if run is not None else time.sleep(seconds)
        c1, w1, m1, b1 = cpu_seconds(self.p.pid), time.time(), time.monotonic(), busy_seconds()
        # The machine's busy CPU besides the program's (and, sampled, the
        # profiler's: taken off by the caller), in cores.
        self.others = ((b1 - b0) - (c1 - c0)) / (w1 - w0)
        return (c1 - c0) / (w1 - w0), rate(self.log, m0, m1), got

    def close(self):
        self.p.kill()
        self.p.wait()


def child_cpu(argv, **kw):
    """Runs argv; (its output, its CPU seconds, its wall seconds)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.monotonic()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    out = p.stdout
    if p.returncode != 0:
        raise RuntimeError("%s exited with %d:\n%s" % (argv[:4], p.returncode, out.decode()[-2000:]))
    w = time.monotonic() - w0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (out.decode("utf-8", "replace"), (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--baseline")
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

        def measure(name, make, argv_of, parse=None, cwd=ROOT, env=None):
            prog = make(name.replace(" ", "-"))
            try:
                alone = prog.window(None, a.seconds)
                others = [prog.others]
                # (From the checkout: `python3 -m ljgdb` finds the package there.)
                share, rate, (out, cpu, wall) = prog.window(
                    lambda: child_cpu(argv_of(prog.p.pid), cwd=cwd, env=env), a.seconds)
                others.append(prog.others - cpu / wall)
                extra = parse(out) if parse else ""
                rows.append((name, alone, (share, rate), (100.0 * cpu / wall, extra), others))
            finally:
                prog.close()

        def record_argv(rate, phases=False, root=ROOT):
            run = ([sys.executable, os.path.abspath(__file__), "--record-phases", root] if phases
                   else [sys.executable, "-m", "ljgdb", "record"])
            # (the ptrace sampler: this script measures its stops' pauses;
            # bench_bpf.py measures the BPF sampler beside it)
            return lambda pid: run + ["--pid", str(pid), "--sampler", "ptrace", "--rate",
                                      str(rate), "--duration", str(a.seconds), "--format",
                                      "folded", "-o", os.path.join(tmp, "r.folded")]

        phases = {}

        def record_phases(which):
            def parse(out):
                m = re.search(r"^phases: (.*)$", out, re.M)
                if not m:
                    raise RuntimeError(out[-2000:])
                got = phases[which] = {}
                for part in m.group(1).split():
                    k, _, v = part.partition("=")
                    got[k] = [float(x) for x in v.split("/")]
                return record_pause(out)
            return parse

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
        if shutil.which("py-spy"):
            measure("py-spy record 100 Hz (Python)", py, pyspy_argv)
        else:
            sys.stderr.write("bench_record: no py-spy on PATH, its row left out "
                             "(pip install py-spy)\n")
        first = float(a.rates.split(",")[0])
        in_python = dict(os.environ, LJGDB_SAMPLER="python")
        measure("ljgdb record %g Hz, Python sampler" % first, lua, record_argv(first),
                record_pause, env=in_python)
        measure("ljgdb record %g Hz, Python sampler, phases timed" % first, lua,
                record_argv(first, True), record_phases("this"), env=in_python)
        # What starting costs, in the figures above: a profile of about one
        # sample (the imports, the process's files and layout, the VMs found).
        start_prog = lua("start")
        try:
            _, start_cpu, start_wall = child_cpu(
                [sys.executable, "-m", "ljgdb", "record", "--sampler", "ptrace", "--pid",
                 str(start_prog.p.pid), "--duration", "0.01", "--format", "folded", "-o",
                 os.path.join(tmp, "s.folded")],
                cwd=ROOT)
        finally:
            start_prog.close()
        if a.baseline:
            base = os.path.abspath(a.baseline)
            measure("baseline record %g Hz" % first, lua, record_argv(first), record_pause,
                    cwd=base)
            measure("baseline record %g Hz, phases timed" % first, lua,
                    record_argv(first, True, base), record_phases("baseline"), cwd=base)
    print("Program: %s, %d Lua frames (py-spy: the same shape in Python), %g s a window"
          % (a.variant, a.depth, a.seconds))
    print()
    print("record's start (a profile of --duration 0.01): %.2f s of CPU in %.2f s; the profiler's "
          "CPU below includes it once" % (start_cpu, start_wall))
    print()
    print("| profiler | program's CPU share alone | sampled | its speed sampled vs alone | "
          "profiler's CPU (% of a core) | samples, pause | other processes' CPU (cores), "
          "alone / sampled |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, alone, sampled, prof, others in rows:
        print("| %s | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %s | %.2f / %.2f |"
              % (name, 100 * alone[0], 100 * sampled[0], 100.0 * sampled[1] / alone[1],
                 prof[0], prof[1], others[0], others[1]))
    print()
    print("The pause of the phases-timed run%s, by phase (us: median, 99th percentile and "
          "mean of each phase on its own; the means add up to the pause's):"
          % ("s" if len(phases) > 1 else ""))
    print()
    cols = sorted(phases, key=lambda k: k != "this")
    print("| phase | %s |" % " | ".join("%s median | p99 | mean" % c for c in cols))
    print("| --- |%s" % (" --- | --- | --- |" * len(cols)))
    for k, what in (("pause", "whole pause"),) + PHASES:
        print("| %s | %s |" % (what, " | ".join("%.0f | %.0f | %.0f" % tuple(phases[c][k])
                                                for c in cols)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record-phases"]:
        sys.exit(record_with_phases(sys.argv[2], sys.argv[3:]))
    main()
