#!/usr/bin/env python3
"""Time `lbt` and `lbt full` on a 5000-frame Lua stack, live and from a core.

  python3 bench/bench_lbt.py [VARIANT ...]      (default: r21-gc64 r21-x64)

Runs testprogs/lua/bt.lua's 'deep' scenario (5000 nested Lua calls) in the
test host under gdb, stops in ljgdb_break, times the commands with
time.perf_counter inside gdb (best of 3), saves a core and does the same on
it.  Prints one table row per variant and mode.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import manifest  # noqa: E402

TIMER = ("python import time\n"
         "python\n"
         "for cmd in ('lbt', 'lbt full'):\n"
         "    best = None\n"
         "    for _ in range(3):\n"
         "        t = time.perf_counter(); out = gdb.execute(cmd, to_string=True)\n"
         "        d = time.perf_counter() - t; best = d if best is None else min(best, d)\n"
         "    print('BENCH %s %.3f %d' % (cmd.replace(' ', '_'), best, out.count('\\n')))\n"
         "end\n")


def run(args, cwd):
    p = subprocess.run(["gdb", "-nx", "--batch", "-ex", "set confirm off"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd)
    return dict((m[0], (float(m[1]), int(m[2])))
                for m in re.findall(r"BENCH (\S+) ([\d.]+) (\d+)", p.stdout.decode()))


def main(variants):
    m = manifest()
    print("| variant | mode | lbt (s) | lbt full (s) | lines of lbt full |")
    print("| --- | --- | --- | --- | --- |")
    for v in variants:
        b = m[v]
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "timer.gdb")
            with open(script, "w") as f:
                f.write(TIMER)
            core = os.path.join(d, "core")
            prog = [b["host"], os.path.join(ROOT, "testprogs", "lua", "bt.lua"),
                    os.path.join(d, "exp.txt"), "deep"]
            live = run(["-ex", "source " + os.path.join(ROOT, "ljgdb.py"), "-ex", "break ljgdb_break",
                        "-ex", "run", "-x", script, "-ex", "gcore " + core, "-ex", "kill",
                        "--args"] + prog, d)
            dead = run(["-ex", "source " + os.path.join(ROOT, "ljgdb.py"), "-ex", "core-file " + core,
                        "-x", script, b["host"]], d)
            for mode, r in (("live", live), ("core", dead)):
                print("| %s | %s | %.3f | %.3f | %d |" % (v, mode, r["lbt"][0], r["lbt_full"][0],
                                                          r["lbt_full"][1]))


if __name__ == "__main__":
    main(sys.argv[1:] or ["r21-gc64", "r21-x64"])
