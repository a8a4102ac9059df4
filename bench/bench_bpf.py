#!/usr/bin/env python3
"""record's BPF sampler next to its ptrace sampler (and py-spy on the same
shape in Python, where py-spy is on PATH), in one run.

  python3 bench/bench_bpf.py [--seconds S] [--depth N] [--rates 100,1000]
                             [--rounds K] [VARIANT]
      (defaults: 8 s, depth 200, 100 and 1000 Hz, 2 rounds, r21-gc64)

The program is testprogs/lua/profile.lua `deep`: DEPTH Lua frames, then a
JIT-compiled loop of fixed work that logs its rounds every quarter second.
Each configuration runs a fresh program: a window alone, then a window
sampled for S seconds, and measures from the program and /proc:
  - its work rate sampled as a share of its work rate alone (rounds a
    second from its own log; this kernel charges an interrupt's time to
    the task it interrupts, so the CPU share would hide the handler);
  - the samples the profiler made, as a share of rate x S x the program's
    CPU share (record's own count);
  - the program's voluntary context switches in each window
    (/proc/PID/status: a ptrace stop is one, a perf event is none);
  - the profiler's CPU (getrusage of the child), in % of one core, less
    its start (measured apart: a record of --duration 0.01, each sampler;
    py-spy's start is left in).
The configurations run in turn, K rounds of them (the machine's drift
falls on each alike).  Prints a Markdown table (docs/benchmarks.md)."""
import argparse
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support.stop import manifest  # noqa: E402
from bench_record import PY_PROG, Program, child_cpu  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "profile.lua")


def switches(pid):
    """(voluntary, involuntary) context switches of every thread of pid."""
    v = n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                text = f.read()
        except OSError:
            continue
        v += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", text, re.M).group(1))
        n += int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", text, re.M).group(1))
    return v, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    host = manifest()[a.variant]["host"]
    rates = [float(x) for x in a.rates.split(",")]
    configs = [(s, r) for r in rates for s in ("bpf", "ptrace")]
    if shutil.which("py-spy"):
        configs += [("py-spy", r) for r in rates]
    else:
        sys.stderr.write("bench_bpf: no py-spy on PATH, its rows left out (pip install py-spy)\n")
    rows = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "busy.py")
        with open(script, "w") as f:
            f.write(PY_PROG)
        start = {}
        for sampler in ("bpf", "ptrace"):
            log = os.path.join(tmp, "start.log")
            prog = Program([host, PROG, log, "deep", str(a.depth)], log, tmp)
            try:
                _, start[sampler], _ = child_cpu(
                    [sys.executable, "-m", "ljgdb", "record", "--pid", str(prog.p.pid),
                     "--sampler", sampler, "--duration", "0.01", "--format", "folded", "-o",
                     os.path.join(tmp, "s.folded")], cwd=ROOT)
            finally:
                prog.close()
        for k in range(a.rounds):
            for sampler, r in configs:
                log = os.path.join(tmp, "%s-%g-%d.log" % (sampler, r, k))
                if sampler == "py-spy":
                    prog = Program([sys.executable, script, log, str(a.depth)], log, tmp)
                    argv = ["py-spy", "record", "--pid", str(prog.p.pid), "--rate", "%g" % r,
                            "--duration", str(int(round(a.seconds))), "--format", "raw",
                            "-o", os.path.join(tmp, "p.txt")]
                else:
                    prog = Program([host, PROG, log, "deep", str(a.depth)], log, tmp)
                    argv = [sys.executable, "-m", "ljgdb", "record", "--pid", str(prog.p.pid),
                            "--sampler", sampler, "--rate", "%g" % r, "--duration",
                            "%g" % a.seconds, "--format", "folded", "-o",
                            os.path.join(tmp, "r.folded")]
                try:
                    s0 = switches(prog.p.pid)
                    share0, rate0, _ = prog.window(None, a.seconds)
                    s1 = switches(prog.p.pid)
                    share1, rate1, (out, cpu, wall) = prog.window(
                        lambda: child_cpu(argv, cwd=ROOT), a.seconds)
                    s2 = switches(prog.p.pid)
                finally:
                    prog.close()
                m = re.search(r"(\d+) samples in ([\d.]+) s", out)
                made = int(m.group(1)) if m else None
                asked = r * a.seconds * share1
                rows[(sampler, r)].append((
                    100.0 * rate1 / rate0, 100.0 * made / asked if made else None,
                    s1[0] - s0[0], s2[0] - s1[0],
                    100.0 * (cpu - start.get(sampler, 0.0)) / wall))
    print("Program: %s, %d Lua frames (py-spy: the same shape in Python), %g s windows, "
          "%d rounds" % (a.variant, a.depth, a.seconds, a.rounds))
    print()
    print("record's start (a profile of --duration 0.01), CPU seconds: bpf %.2f, ptrace %.2f"
          % (start["bpf"], start["ptrace"]))
    print()
    print("| sampler | rate | work rate kept | samples made / asked | voluntary switches, "
          "alone / sampled | profiler's CPU (% of a core), its start left out |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (sampler, r), got in rows.items():
        def each(i, fmt):
            return ", ".join(fmt % g[i] if g[i] is not None else "?" for g in got)
        print("| %s | %g Hz | %s | %s | %s | %s |" % (
            sampler, r, each(0, "%.1f%%"), each(1, "%.0f%%"),
            ", ".join("%d / %d" % (g[2], g[3]) for g in got), each(4, "%.1f%%")))


if __name__ == "__main__":
    main()
