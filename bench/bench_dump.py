#!/usr/bin/env python3
"""Time `python3 -m ljgdb dump --pid PID` against gdb attached (`gdb -p PID
-batch -ex 'source ljgdb.py' -ex lbt`) on a 200-frame Lua stack, in one run.

  python3 bench/bench_dump.py [--runs N] [--depth D] [VARIANT]
                                               (default: 7 runs, 200, r21-gc64)

testprogs/lua/wait.lua stands still in the variant's test host, DEPTH
levels of Lua recursion under a blocking read.  Each command's wall time is
measured from its start to its exit (Python's own start included), the
commands taking turns, N runs each: a Markdown table of min / median / max.
ljgdb runs from a copy of the checkout, twice: with its bytecode cached
(.pyc written by a first run, as `pip install` has it) and without
(PYTHONDONTWRITEBYTECODE=1 and no __pycache__: every module of ljgdb
compiled at each start).  `python3 -c pass` is timed too: the part of
the figures that is Python's own start on this machine.  The outputs are checked (dump's backtrace is
gdb's lbt) and the process is checked to be left running, not traced.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.stop import manifest  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "wait.lua")


def copy_checkout(dest):
    for name in ("ljgdb.py", "gdb_ext", "commands", "pkg"):
        src = os.path.join(ROOT, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(dest, name),
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest)


def timed(argv, cwd, env):
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return time.perf_counter() - t, p


def left_alone(pid):
    with open("/proc/%d/status" % pid) as f:
        status = f.read()
    assert "\nTracerPid:\t0\n" in status, status
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    assert stat[stat.rindex(")") + 2] == "S", stat


def main(argv):
    runs, depth, variant = 7, 200, "r21-gc64"
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--runs":
            runs = int(args.pop(0))
        elif a == "--depth":
            depth = int(args.pop(0))
        else:
            variant = a
    host = manifest()[variant]["host"]
    with tempfile.TemporaryDirectory() as d:
        fifo, expected = os.path.join(d, "fifo"), os.path.join(d, "expected.txt")
        os.mkfifo(fifo)
        prog = subprocess.Popen([host, PROG, expected, fifo, str(depth)], cwd=d,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        try:
            deadline = time.time() + 30
            while time.time() < deadline:
                if os.path.exists(expected) and "\nframes\t" in open(expected).read():
                    break
                time.sleep(0.05)
            time.sleep(0.2)
            pid = str(prog.pid)
            base = dict(os.environ)
            for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"):
                base.pop(k, None)
            cached, fresh = os.path.join(d, "cached"), os.path.join(d, "fresh")
            for c in (cached, fresh):
                os.mkdir(c)
                copy_checkout(c)
            nopyc = dict(base, PYTHONDONTWRITEBYTECODE="1")
            py = sys.executable
            cases = [
                ("`python3 -m ljgdb dump --pid PID` (.pyc cached)",
                 [py, "-m", "ljgdb", "dump", "--pid", pid], cached, base),
                ("`python3 -m ljgdb dump --pid PID` (PYTHONDONTWRITEBYTECODE=1, no .pyc)",
                 [py, "-m", "ljgdb", "dump", "--pid", pid], fresh, nopyc),
                ("`python3 -m ljgdb --pid PID lbt` (.pyc cached)",
                 [py, "-m", "ljgdb", "--pid", pid, "lbt"], cached, base),
                ("`gdb -p PID -batch -ex 'source ljgdb.py' -ex lbt`",
                 ["gdb", "-p", pid, "-batch", "-ex", "source " + os.path.join(ROOT, "ljgdb.py"),
                  "-ex", "lbt"], ROOT, base),
                ("`python3 -c pass` (Python's own start, for reference)", [py, "-c", "pass"],
                 ROOT, base),
            ]
            timed(cases[0][1], cached, base)            # (writes the copy's .pyc)
            times = {c[0]: [] for c in cases}
            outs = {}
            for _ in range(runs):
                for label, cmd, cwd, env in cases:
                    t, p = timed(cmd, cwd, env)
                    assert p.returncode == 0, (label, p.stderr.decode())
                    times[label].append(t)
                    outs[label] = p.stdout.decode()
                    left_alone(prog.pid)
            lbt = outs[cases[2][0]]
            assert lbt.count("\n#") == depth + 4, lbt
            assert lbt in outs[cases[0][0]] and lbt in outs[cases[3][0]], "outputs differ"
            gdb_median = statistics.median(times[cases[3][0]])
            print("%d-frame Lua stack (%s), %d runs each, %s\n" % (depth + 4, variant, runs, py))
            print("| command | min (s) | median (s) | max (s) | gdb's median / this median |")
            print("| --- | --- | --- | --- | --- |")
            for label, _, _, _ in cases:
                ts = times[label]
                med = statistics.median(ts)
                print("| %s | %.3f | %.3f | %.3f | %.1fx |"
                      % (label, min(ts), med, max(ts), gdb_median / med))
        finally:
            prog.kill()
            prog.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
