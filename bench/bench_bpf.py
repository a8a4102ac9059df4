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
  - the profiler's CPU in % of a core from its first second to a quarter
    second before its end (its /proc stat): the steady cost, its start
    (printed apart: a record of --duration 0.01), the first decodes of a
    fresh process (which read its DWARF) and the profile's writing left
    out, for py-spy too.
"bpf, kernel side only" is the BPF sampler with its records read from the
ring buffer and thrown away (this script's --drain, on the engine's
BpfSampler): what the program pays for the kernel's copies alone, without
record's decoding running beside it on the other CPU.  "perf events
alone" opens the same CPU-clock events with no program attached (--events):
what the timer interrupts cost by themselves, the floor under the others.
"BPF program a sample" is the kernel's own count of the time the program
ran (BPF_ENABLE_STATS, held by this script while it runs: run_time_ns and
run_cnt of the profiler's program fd, /proc/PID/fdinfo), over the same
steady span as the profiler's CPU: what the copies cost apart from the
timer interrupt, which the work rate cannot separate on a machine whose
interrupts vary from run to run.
Prints a Markdown table (docs/benchmarks.md)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support.bpfprogs import program_fdinfos  # noqa: E402
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


def events_only(pid, hz, seconds):
    """--events: a CPU-clock perf event on each thread of pid at hz, with
    no program attached, for seconds: what the timer interrupts alone
    cost the program (the floor under any sampler of this kind)."""
    import ctypes
    from ljgdb.gdb_ext.backends import bpfsample
    attr = bpfsample._PerfAttr(type=bpfsample.PERF_TYPE_SOFTWARE,
                               size=ctypes.sizeof(bpfsample._PerfAttr),
                               config=bpfsample.PERF_COUNT_SW_CPU_CLOCK,
                               sample_period=max(1, int(1e9 / hz)))
    fds = [bpfsample._perf_event_open(attr, int(t)) for t in os.listdir("/proc/%d/task" % pid)]
    time.sleep(seconds)
    for fd in fds:
        os.close(fd)


def _proc_cpu(pid):
    """utime + stime of process pid, in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def enable_bpf_stats():
    """The kernel's run-time counts of BPF programs, on while the returned
    fd is open (libbpf's bpf_enable_stats); None where refused."""
    try:
        from ljgdb.gdb_ext.backends import bpfsample
        fd = bpfsample._libbpf().bpf_enable_stats(0)        # BPF_STATS_RUN_TIME
    except (OSError, AttributeError):
        return None
    return fd if fd >= 0 else None


def prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the BPF program fds of pid."""
    ns = cnt = 0
    for text in program_fdinfos(pid):
        m, n = re.search(r"^run_time_ns:\s+(\d+)", text, re.M), re.search(r"^run_cnt:\s+(\d+)", text, re.M)
        if m and n:
            ns, cnt = ns + int(m.group(1)), cnt + int(n.group(1))
    return ns, cnt


def steady_cpu(argv, skip, seconds):
    """Runs argv (a profiler of `seconds`); (its output, its CPU seconds
    from `skip` seconds after its start to a quarter second before its
    end, the wall seconds between): its start (the VM search, the BPF
    object's load, the first decodes of a fresh process, which read its
    DWARF) and its end (the profile written) left out, as each window's
    first second is left out of the work rate; and its BPF programs' run
    time and runs over that span (prog_stats)."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        t0 = time.monotonic()
        time.sleep(skip)
        c0, m0, b0 = _proc_cpu(p.pid), time.monotonic(), prog_stats(p.pid)
        time.sleep(max(0.0, t0 + seconds - 0.25 - m0))
        c1, m1, b1 = _proc_cpu(p.pid), time.monotonic(), prog_stats(p.pid)
        p.wait()
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError("%s exited with %d:\n%s" % (argv[:4], p.returncode, text[-2000:]))
    return text, c1 - c0, m1 - m0, (b1[0] - b0[0], b1[1] - b0[1])


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
    configs = [(s, r) for r in rates
               for s in ("bpf", "bpf, kernel side only", "perf events alone", "ptrace")]
    if shutil.which("py-spy"):
        configs += [("py-spy", r) for r in rates]
    else:
        sys.stderr.write("bench_bpf: no py-spy on PATH, its rows left out (pip install py-spy)\n")
    rows = []
    stats_fd = enable_bpf_stats()
    if stats_fd is None:
        sys.stderr.write("bench_bpf: the kernel refused BPF_ENABLE_STATS: no BPF program column\n")
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
            elif sampler.startswith("perf events"):
                prog = lua(log)
                argv = [sys.executable, os.path.abspath(__file__), "--events", str(prog.p.pid),
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
            bpf_ns = bpf_runs = 0
            try:
                for _ in range(a.pairs):
                    for sampled in (False, True):
                        s0, c0 = switches(prog.p.pid), cpu_seconds(prog.p.pid)
                        m0 = time.monotonic()
                        if sampled:
                            out, c, w, (ns, runs) = steady_cpu(argv, SKIP, a.seconds)
                            cpu += c
                            wall += w
                            bpf_ns, bpf_runs = bpf_ns + ns, bpf_runs + runs
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
                         100.0 * made / asked if made else None, sw, 100.0 * cpu / wall,
                         bpf_ns / 1e3 / bpf_runs if bpf_runs else None))
    if stats_fd is not None:
        os.close(stats_fd)
    print("Program: %s, %d Lua frames (py-spy: the same shape in Python); %d pairs of %g s "
          "windows, alone then sampled, each configuration on a fresh program"
          % (a.variant, a.depth, a.pairs, a.seconds))
    print()
    print("record's start (a profile of --duration 0.01), CPU seconds: bpf %.2f, ptrace %.2f"
          % (start["bpf"], start["ptrace"]))
    print()
    print("| sampler | rate | work rate kept | samples made / asked | voluntary switches, "
          "alone / sampled | profiler's CPU (% of a core), steady | BPF program a sample |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for sampler, r, kept, made, sw, cpu, us in rows:
        print("| %s | %g Hz | %.1f%% | %s | %d / %d | %.1f%% | %s |" % (
            sampler, r, kept, "%.0f%%" % made if made is not None else "-", sw[0], sw[1], cpu,
            "%.1f us" % us if us is not None else "-"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drain"]:
        drain(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    elif sys.argv[1:2] == ["--events"]:
        events_only(int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    else:
        main()
