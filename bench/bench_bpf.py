#!/usr/bin/env python3
"""record's BPF sampler next to its ptrace sampler (and py-spy on the same
shape in Python, where py-spy is on PATH), in one run.

  python3 bench/bench_bpf.py [--seconds S] [--pairs P] [--depth N] [--rates 100,1000] [VARIANT]
      (defaults: 5 s windows, 3 pairs, depth 200, 100 and 1000 Hz, r21-gc64)

The program is testprogs/lua/profile.lua `deep`: DEPTH Lua frames, then a
JIT-compiled loop of fixed work that logs its rounds every quarter second.
Each configuration runs a fresh program and P pairs of windows of S
seconds, one alone, then one sampled by a profiler started for it, and
measures, from the program and /proc:
  - its work rate (rounds a second from its own log, over each window but
    its first second, which holds the profiler's start), sampled over
    alone, summed over the pairs (the machine's drift falls on both sides
    alike; this kernel charges an interrupt's time to the task it
    interrupts, so the CPU share would hide the handler's cost);
  - the samples made, as a share of rate x S x the program's CPU share
    (record's own count);
  - the program's voluntary context switches (/proc/PID/task/*/status: a
    ptrace stop is one, a perf event none);
  - the profiler's CPU (getrusage of the child) in % of a core, its start
    left out (a record of --duration 0.01 of each sampler, measured
    apart; py-spy's start is left in).
"bpf, kernel side only" is the BPF sampler with its records read from the
ring buffer and thrown away (this script's --drain, on the engine's
BpfSampler): what the program pays for the kernel's copies alone, without
record's decoding running beside it on the other CPU.
Prints a Markdown table (docs/benchmarks.md)."""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support.stop import manifest  # noqa: E402
from bench_record import PY_PROG, Program, child_cpu, cpu_seconds  # noqa: E402
from bench_profile import rate as rounds_a_second  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "profile.lua")
SKIP = 1.0          # seconds at a window's start left out of its work rate


def switches(pid):
    """Voluntary context switches of every thread of pid."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                n += int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", f.read(), re.M).group(1))
        except OSError:
            continue
    return n


def drain(pid, hz, seconds):
    """--drain: the BPF sampler on pid for seconds, its records read every
    50 ms and dropped; prints the records read."""
    from ljgdb.gdb_ext.backends import bpfsample
    from ljgdb.gdb_ext.backends.live import open_process, sampling_target
    from ljgdb.gdb_ext.stack.recorder import CSTACK, MAX_LUA_STACK, RED_ZONE
    proc = open_process(pid)
    _, lay, Gs = sampling_target(proc, stop=False)
    s = bpfsample.BpfSampler(hz)
    s.add(pid, bpfsample.vm_conf(lay, Gs, proc.arch.name, RED_ZONE, CSTACK, MAX_LUA_STACK))
    s.start()
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
        n += len(s.read())
    s.close()
    print("%d samples in %.1f s" % (n, seconds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    host = manifest()[a.variant]["host"]
    rates = [float(x) for x in a.rates.split(",")]
    configs = [(s, r) for r in rates for s in ("bpf", "bpf, kernel side only", "ptrace")]
    if shutil.which("py-spy"):
        configs += [("py-spy", r) for r in rates]
    else:
        sys.stderr.write("bench_bpf: no py-spy on PATH, its rows left out (pip install py-spy)\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "busy.py")
        with open(script, "w") as f:
            f.write(PY_PROG)

        def lua(log):
            return Program([host, PROG, log, "deep", str(a.depth)], log, tmp)
        start = {}
        for sampler in ("bpf", "ptrace"):
            prog = lua(os.path.join(tmp, "start.log"))
            try:
                _, start[sampler], _ = child_cpu(
                    [sys.executable, "-m", "ljgdb", "record", "--pid", str(prog.p.pid),
                     "--sampler", sampler, "--duration", "0.01", "--format", "folded", "-o",
                     os.path.join(tmp, "s.folded")], cwd=ROOT)
            finally:
                prog.close()
        for sampler, r in configs:
            log = os.path.join(tmp, "%s-%g.log" % (sampler.split(",")[0], r))
            if sampler == "py-spy":
                prog = Program([sys.executable, script, log, str(a.depth)], log, tmp)
                argv = ["py-spy", "record", "--pid", str(prog.p.pid), "--rate", "%g" % r,
                        "--duration", str(int(round(a.seconds))), "--format", "raw",
                        "-o", os.path.join(tmp, "p.txt")]
            elif sampler.startswith("bpf, kernel"):
                prog = lua(log)
                argv = [sys.executable, os.path.abspath(__file__), "--drain", str(prog.p.pid),
                        "%g" % r, "%g" % a.seconds]
            else:
                prog = lua(log)
                argv = [sys.executable, "-m", "ljgdb", "record", "--pid", str(prog.p.pid),
                        "--sampler", sampler, "--rate", "%g" % r, "--duration",
                        "%g" % a.seconds, "--format", "folded", "-o",
                        os.path.join(tmp, "r.folded")]
            work = [0.0, 0.0]
            made = asked = 0.0
            sw = [0, 0]
            cpu = wall = 0.0
            try:
                for _ in range(a.pairs):
                    for sampled in (False, True):
                        s0, c0 = switches(prog.p.pid), cpu_seconds(prog.p.pid)
                        m0 = time.monotonic()
                        if sampled:
                            out, c, w = child_cpu(argv, cwd=ROOT)
                            cpu += c - start.get(sampler, 0.0)
                            wall += w
                        else:
                            time.sleep(a.seconds)
                        m1 = time.monotonic()
                        work[sampled] += rounds_a_second(log, m0 + SKIP, m1)
                        sw[sampled] += switches(prog.p.pid) - s0
                        if sampled:
                            m = re.search(r"(\d+) samples in", out)
                            made += int(m.group(1)) if m else 0
                            asked += r * a.seconds * (cpu_seconds(prog.p.pid) - c0) / (m1 - m0)
            finally:
                prog.close()
            rows.append((sampler, r, 100.0 * work[True] / work[False],
                         100.0 * made / asked if made else None, sw, 100.0 * cpu / wall))
    print("Program: %s, %d Lua frames (py-spy: the same shape in Python); %d pairs of %g s "
          "windows, alone then sampled, each configuration on a fresh program"
          % (a.variant, a.depth, a.pairs, a.seconds))
    print()
    print("record's start (a profile of --duration 0.01), CPU seconds: bpf %.2f, ptrace %.2f"
          % (start["bpf"], start["ptrace"]))
    print()
    print("| sampler | rate | work rate kept | samples made / asked | voluntary switches, "
          "alone / sampled | profiler's CPU (% of a core), its start left out |")
    print("| --- | --- | --- | --- | --- | --- |")
    for sampler, r, kept, made, sw, cpu in rows:
        print("| %s | %g Hz | %.1f%% | %s | %d / %d | %.1f%% |" % (
            sampler, r, kept, "%.0f%%" % made if made is not None else "-", sw[0], sw[1], cpu))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drain"]:
        drain(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
