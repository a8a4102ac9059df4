#!/usr/bin/env python3
"""Time lthreads, lthreads --group, lbt --all and lbt --all --group over
10^5 and 10^6 coroutines (testprogs/lua/many.lua), live and from a core.

  python3 bench/bench_threads.py [--sizes N,...] [VARIANT ...]   (default r21-gc64 r21-x64)

The test host runs many.lua N and stops in ljgdb_break; inside gdb each
command is timed with time.perf_counter, `lthreads --group` first (the
first walk: every page of the heap read from the process), then the
others; then a core is saved with gcore and the same is done on it.
Prints a Markdown table: seconds, threads per second and lines printed.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import LOADER, manifest  # noqa: E402

COMMANDS = ("lthreads --group", "lthreads", "lbt --all --group", "lbt --all")
TIMER = ("python import time\n"
         "python\n"
         "for cmd in %r:\n"
         "    t = time.perf_counter(); out = gdb.execute(cmd, to_string=True)\n"
         "    d = time.perf_counter() - t\n"
         "    n = [int(x) for x in __import__('re').findall(r'^(\\d+) threads', out, 8)]\n"
         "    print('BENCH|%%s|%%.3f|%%d|%%d' %% (cmd, d, out.count('\\n'), n[-1] if n else 0))\n"
         "end\n" % (COMMANDS,))


def run(args, cwd):
    p = subprocess.run(["gdb", "-nx", "--batch", "-ex", "set confirm off"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    text = p.stdout.decode("utf-8", "replace")
    got = {m[0]: (float(m[1]), int(m[2]), int(m[3]))
           for m in re.findall(r"BENCH\|([^|]+)\|([\d.]+)\|(\d+)\|(\d+)", text)}
    if len(got) != len(COMMANDS):
        sys.stderr.write(text[-3000:])
    return got


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("variants", nargs="*")
    a = ap.parse_args(argv)
    m = manifest()
    variants = a.variants or ["r21-gc64", "r21-x64"]
    rows = []
    for v in variants:
        for n in [int(x) for x in a.sizes.split(",")]:
            d = tempfile.mkdtemp(prefix="ljgdb-bench-threads-")
            timer = os.path.join(d, "timer.gdb")
            with open(timer, "w") as f:
                f.write(TIMER)
            core = os.path.join(d, "core")
            live = run(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                        "-ex", "source " + timer, "-ex", "gcore " + core, "-ex", "kill",
                        "--args", m[v]["host"], os.path.join(ROOT, "testprogs", "lua", "many.lua"),
                        os.path.join(d, "expected.txt"), str(n)], d)
            from_core = run(["-ex", "source " + LOADER, "-ex", "core-file " + core,
                             "-ex", "source " + timer, m[v]["host"]], d)
            for mode, got in (("live", live), ("core", from_core)):
                for cmd in COMMANDS:
                    if cmd in got:
                        t, lines, threads = got[cmd]
                        rows.append((v, n, mode, cmd, t, threads, lines))
                        print("%s %d %s %-18s %.2f s" % (v, n, mode, cmd, t), flush=True)
            subprocess.run(["rm", "-rf", d])
    print()
    print("| variant | coroutines | mode | command | seconds | threads/s | lines |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for v, n, mode, cmd, t, threads, lines in rows:
        print("| %s | %d | %s | `%s` | %.2f | %.0f | %d |" % (v, n, mode, cmd, t,
                                                              threads / t if t else 0, lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
