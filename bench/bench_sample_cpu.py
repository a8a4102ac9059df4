#!/usr/bin/env python3
"""The CPU one record sample costs, by how long the sampler slept before it.

  python3 bench/bench_sample_cpu.py [--samples N] [--modes deep,busy-interp,coroutines]
                                    [--gaps 0,0.001,0.01] [--stages] [--parts N]
                                    [--no-gc] [VARIANT]
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
100.

--parts N adds, per program, the CPU of a sample's parts at record's pace
(a 10 ms sleep between samples), measured one after the other in the same
process: the sleep alone, the C stop alone (pts_sample), the C stop with
its Python (LiveProcess.stop_and_copy), the whole sample, and the whole
sample with the decode put off and done N samples at a time (the copies
kept meanwhile; what decoding in batches would save: the decode runs on a
warm CPU, but reads prototypes and traces later than now).

--no-gc turns Python's cyclic collector off in this process first.

--stages adds a table of where a sample's CPU goes (this thread's CPU
time, time.thread_time, around each step of Recorder.sample): the C
stop (ptstop.c's pts_sample), the Python around it, the check of the
copy (copy_moment), the C frames (machine_frames), the Lua frames
(thread_stack), the prototypes' check, the counting, and the rest."""
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


# (label, module, owner's name in it, function's name): the steps --stages times.
STEPS = [("Python around the C stop", "gdb_ext.backends.live", "LiveProcess", "stop_and_copy"),
         ("check of the copy", "gdb_ext.stack.recorder", None, "copy_moment"),
         ("C frames", "gdb_ext.backends.coretarget", "CoreTarget", "machine_frames"),
         ("Lua frames", "gdb_ext.stack.recorder", None, "thread_stack"),
         ("prototypes' check", "gdb_ext.stack.recorder", "ProtoNames", "check"),
         ("counting", "gdb_ext.stack.samples", "SampledStacks", "add")]


class Stages(object):
    """This thread's CPU time in each of STEPS and in the C stop, by
    wrapping them (the bench's own process only)."""

    def __init__(self):
        import importlib
        self.spent = {}
        for label, mod, owner, name in STEPS:
            obj = importlib.import_module(mod)
            obj = getattr(obj, owner) if owner else obj
            setattr(obj, name, self._timed(label, getattr(obj, name)))

    def _timed(self, label, f):
        def timed(*a, **k):
            t0 = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + time.thread_time() - t0
        return timed

    def watch_c(self, proc):
        """Time ptstop.c's pts_sample of proc's C stopper (once it has one)."""
        st = proc._stopper
        if st and not isinstance(st.lib, _Lib):
            st.lib = _Lib(st.lib, self._timed("the C stop", st.lib.pts_sample))

    def rows(self, n, total):
        """[(label, us a sample)]; the C stop is inside "Python around"."""
        out = []
        c = self.spent.get("the C stop", 0.0)
        for label, _, _, _ in STEPS:
            v = self.spent.get(label, 0.0)
            if label == STEPS[0][0]:
                out.append(("the C stop (pts_sample)", c))
                v -= c
            out.append((label, v))
        out.append(("the rest (sample(), the sleep)", total - sum(v for _, v in out)))
        return [(label, 1e6 * v / n) for label, v in out]


class _Lib(object):
    def __init__(self, raw, timed):
        self.raw, self.pts_sample = raw, timed

    def __getattr__(self, name):
        return getattr(self.raw, name)


def measure(host, mode, n, gaps, tmp, stages=None, batch=0):
    log = os.path.join(tmp, mode + ".log")
    p = subprocess.Popen([host, PROG, log, mode], stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not os.path.exists(log) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        proc = open_process(p.pid)
        rec = Recorder(proc, *sampling_target(proc))
        with proc.sigchld_blocked():        # (as record holds it)
            return _measure(proc, rec, mode, n, gaps, stages, batch)
    finally:
        p.kill()
        p.wait()


def _measure(proc, rec, mode, n, gaps, stages, batch):
    for _ in range(20):
        rec.sample()
    rows = []
    for gap in gaps:
        pauses = []
        if stages is not None:
            stages.watch_c(proc)
            stages.spent.clear()
            c0 = time.thread_time()
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
                     rec.prof.samples,
                     stages.rows(n, time.thread_time() - c0) if stages else None))
    if batch:
        rows.append((mode, "parts", parts(proc, rec, n, 0.01, batch)))
    return rows


def parts(proc, rec, n, gap, batch):
    """[(part, us of CPU a sample)] at a gap's pace (module docstring)."""
    from gdb_ext.stack import recorder as R

    def run(f):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(n):
            f()
            time.sleep(gap)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return 1e6 * (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n

    def stop():
        return rec.proc.stop_and_copy(rec.plan, R.RED_ZONE, R.CSTACK, rec.follows), \
            list(rec.proc.threads)

    st = rec.proc._stopper

    def c_stop():
        st.raw_stop(rec.plan, True)

    def decode(got, threads):
        cpu, copied, tried = got
        try:
            _, seen = rec.checked_copy(threads, copied, tried)
        except R.Miss:
            return
        rec.decode(R.Sample(), threads, seen, {tid: st for tid, (st, _) in cpu.items()})

    pending = []

    def batched():
        pending.append(stop())
        if len(pending) >= batch:
            for got, threads in pending:
                decode(got, threads)
            del pending[:]

    def c_batches():
        k = max(1, n // batch)
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(k):
            now = time.monotonic()
            rec.sample_batch([now + gap * (i + 1) for i in range(batch)])
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return 1e6 * (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / (k * batch)

    rows = [("the sleep alone", run(lambda: None)), ("the C stop alone", run(c_stop))]
    rows += [("the C stop with its Python", run(stop)), ("the whole sample", run(rec.sample)),
             ("the whole sample, decoded %d at a time" % batch, run(batched)),
             ("%d stops in one C call, then decoded (record's way)" % batch, c_batches())]
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=800)
    ap.add_argument("--modes", default="deep,busy-interp,coroutines")
    ap.add_argument("--gaps", default="0,0.001,0.01")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--parts", type=int, default=0, metavar="N")
    ap.add_argument("--no-gc", action="store_true")
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    if a.no_gc:
        import gc
        gc.disable()
    stages = Stages() if a.stages else None
    import tempfile
    host = manifest()[a.variant]["host"]
    gaps = [float(g) for g in a.gaps.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in a.modes.split(","):
            rows.extend(measure(host, mode, a.samples, gaps, tmp, stages, a.parts))
    split = [r for r in rows if r[1] == "parts"]
    rows = [r for r in rows if r[1] != "parts"]
    print("%s, %d samples a row" % (a.variant, a.samples))
    print()
    print("| program | sleep between samples | CPU a sample: user + system (us) | pause "
          "(median / p99, us) | samples stopped in C (of all so far) | stops made again |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, gap, user, sys_, pause, p99, fast, again, total, _ in rows:
        print("| profile.lua %s | %g ms | %.0f + %.0f = %.0f | %.0f / %.0f | %d of %d | %d |"
              % (mode, 1000 * gap, user, sys_, user + sys_, pause, p99, fast, total, again))
    if stages is not None:
        print()
        print("This thread's CPU a sample, by step (us):")
        print()
        print("| step | " + " | ".join("%s, %g ms" % (r[0], 1000 * r[1]) for r in rows) + " |")
        print("| --- |" + " --- |" * len(rows))
        for i, (label, _) in enumerate(rows[0][-1]):
            print("| %s | %s |" % (label, " | ".join("%.0f" % r[-1][i][1] for r in rows)))
    if split:
        print()
        print("CPU a sample by part, 10 ms between samples (us):")
        print()
        print("| part | " + " | ".join("profile.lua " + r[0] for r in split) + " |")
        print("| --- |" + " --- |" * len(split))
        for i, (label, _) in enumerate(split[0][2]):
            print("| %s | %s |" % (label, " | ".join("%.0f" % r[2][i][1] for r in split)))


if __name__ == "__main__":
    main()
