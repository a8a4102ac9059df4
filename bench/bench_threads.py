#!/usr/bin/env python3
"""Time lthreads, lthreads --group, lbt --all and lbt --all --group over
10^5 and 10^6 coroutines (testprogs/lua/many.lua), live and from a core,
and next to them lgcstat's walk of the same heap.

  python3 bench/bench_threads.py [--sizes N,...] [--runs R] [--no-gdb] [--no-pid] [VARIANT ...]
      (default r21-gc64 r21-x64)

The test host runs many.lua N and stops in ljgdb_break; inside gdb each
command is timed with time.perf_counter, `lthreads --group` first (the
first walk: every page of the heap read from the process), then the
others, R rounds of them in turns (--runs), each command's best kept;
then a core is saved with gcore and the same is done on it.  Prints a
Markdown table: seconds, the ratio to lgcstat's of the same stop, threads
per second and lines printed.

Then without gdb (--no-pid: not): many.lua N wait (the same heap, the
program then blocked in pause(2)), and each of PID_COMMANDS run as a
program, `python3 -m ljgdb dump --all --pid PID` and `python3 -m ljgdb
--pid PID CMD`, timed from start to exit (its output read through a pipe
and counted), best of R runs (default 2), in turns; with the ratio of each
to lgcstat's time (the issue asks dump --all, lthreads and lbt --all to
stay within 3x of lgcstat's walk of the same heap).
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

COMMANDS = ("lthreads --group", "lthreads", "lbt --all --group", "lbt --all", "lgcstat")
PID_COMMANDS = (("lgcstat", ["--pid", "{pid}", "lgcstat"]),
                ("dump --all", ["dump", "--all", "--pid", "{pid}"]),
                ("lbt --all", ["--pid", "{pid}", "lbt", "--all"]),
                ("lbt --all --group", ["--pid", "{pid}", "lbt", "--all", "--group"]),
                ("lthreads", ["--pid", "{pid}", "lthreads"]),
                ("lthreads --group", ["--pid", "{pid}", "lthreads", "--group"]))
TIMER = ("python import time\n"
         "python\n"
         "best = {}\n"
         "for _ in range(%d):\n"
         "  for cmd in %r:\n"
         "    t = time.perf_counter(); out = gdb.execute(cmd, to_string=True)\n"
         "    d = time.perf_counter() - t\n"
         "    n = [int(x) for x in __import__('re').findall(r'^(\\d+) threads', out, 8)]\n"
         "    best[cmd] = (min(d, best[cmd][0]) if cmd in best else d, out.count('\\n'),\n"
         "                 n[-1] if n else 0)\n"
         "for cmd, (d, lines, n) in best.items():\n"
         "    print('BENCH|%%s|%%.3f|%%d|%%d' %% (cmd, d, lines, n))\n"
         "end\n")


def run(args, cwd):
    p = subprocess.run(["gdb", "-nx", "--batch", "-ex", "set confirm off"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    text = p.stdout.decode("utf-8", "replace")
    got = {m[0]: (float(m[1]), int(m[2]), int(m[3]))
           for m in re.findall(r"BENCH\|([^|]+)\|([\d.]+)\|(\d+)\|(\d+)", text)}
    if len(got) != len(COMMANDS):
        sys.stderr.write(text[-3000:])
    return got


def pid_times(host, n, runs):
    """{name: (best seconds, lines)} of PID_COMMANDS on many.lua N wait."""
    d = tempfile.mkdtemp(prefix="ljgdb-bench-threads-")
    expected = os.path.join(d, "expected.txt")
    p = subprocess.Popen([host, os.path.join(ROOT, "testprogs", "lua", "many.lua"), expected,
                          str(n), "wait"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         cwd=d)
    got = {}
    try:
        deadline = time.time() + 300
        while True:
            if os.path.exists(expected):
                with open(expected) as f:
                    if "ready\n" in f.read():
                        break
            if p.poll() is not None or time.time() > deadline:
                raise RuntimeError("many.lua %d wait did not get ready" % n)
            time.sleep(0.1)
        for _ in range(runs):
            for name, args in PID_COMMANDS:
                argv = [sys.executable, "-m", "ljgdb"] + [a.format(pid=p.pid) for a in args]
                t0 = time.perf_counter()
                r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
                t = time.perf_counter() - t0
                if r.returncode != 0:
                    raise RuntimeError("%s: exit %d: %s" % (argv, r.returncode, r.stdout[-2000:]))
                lines = r.stdout.count(b"\n")
                old = got.get(name)
                got[name] = (min(t, old[0]) if old else t, lines)
                print("%d pid %-18s %.2f s" % (n, name, t), flush=True)
    finally:
        p.kill()
        p.wait()
        subprocess.run(["rm", "-rf", d])
    return got


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--no-gdb", action="store_true")
    ap.add_argument("--no-pid", action="store_true")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args(argv)
    m = manifest()
    variants = a.variants or ["r21-gc64", "r21-x64"]
    rows = []
    pid_rows = []
    for v in variants:
        for n in [int(x) for x in a.sizes.split(",")]:
            if not a.no_pid:
                got = pid_times(m[v]["host"], n, a.runs)
                base = got["lgcstat"][0]
                for name, _ in PID_COMMANDS:
                    t, lines = got[name]
                    pid_rows.append((v, n, name, t, t / base, lines))
            if a.no_gdb:
                continue
            d = tempfile.mkdtemp(prefix="ljgdb-bench-threads-")
            timer = os.path.join(d, "timer.gdb")
            with open(timer, "w") as f:
                f.write(TIMER % (a.runs, COMMANDS))
            core = os.path.join(d, "core")
            live = run(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                        "-ex", "source " + timer, "-ex", "gcore " + core, "-ex", "kill",
                        "--args", m[v]["host"], os.path.join(ROOT, "testprogs", "lua", "many.lua"),
                        os.path.join(d, "expected.txt"), str(n)], d)
            from_core = run(["-ex", "source " + LOADER, "-ex", "core-file " + core,
                             "-ex", "source " + timer, m[v]["host"]], d)
            for mode, got in (("live", live), ("core", from_core)):
                base = got.get("lgcstat", (0,))[0]
                for cmd in COMMANDS:
                    if cmd in got:
                        t, lines, threads = got[cmd]
                        rows.append((v, n, mode, cmd, t, t / base if base else 0, threads, lines))
                        print("%s %d %s %-18s %.2f s" % (v, n, mode, cmd, t), flush=True)
            subprocess.run(["rm", "-rf", d])
    if pid_rows:
        print()
        print("| variant | coroutines | command (python3 -m ljgdb, --pid) | seconds (best of %d) "
              "| / lgcstat | lines |" % a.runs)
        print("| --- | --- | --- | --- | --- | --- |")
        for v, n, name, t, ratio, lines in pid_rows:
            print("| %s | %d | `%s` | %.2f | %.1fx | %d |" % (v, n, name, t, ratio, lines))
    if not rows:
        return 0
    print()
    print("| variant | coroutines | mode | command | seconds (best of %d) | / lgcstat | threads/s "
          "| lines |" % a.runs)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for v, n, mode, cmd, t, ratio, threads, lines in rows:
        print("| %s | %d | %s | `%s` | %.2f | %.1fx | %.0f | %d |" % (
            v, n, mode, cmd, t, ratio, threads / t if t else 0, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
