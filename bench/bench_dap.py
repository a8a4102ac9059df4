#!/usr/bin/env python3
"""The DAP server's answers at the sizes an editor meets in production.

  python3 bench/bench_dap.py [--runs R] [--coroutines N] [VARIANT]

1. testprogs/lua/dapbench.lua (a 200-frame Lua stack whose innermost frame
   holds a table of 10^5 entries, half array, half hash) is stopped in
   ljgdb_break under gdb and saved with gcore.  A client (tests/support/
   dapclient.py) runs `python3 -m ljgdb dap`, launches the core and times,
   from launch's response: the first stackTrace (20 frames, as VS Code asks
   first), then the innermost frame's scopes and locals, then the first
   page (100 entries) of the big table's array part and of its hash part.
2. testprogs/lua/many.lua N (10^6 coroutines by default) saved the same
   way: launch, threads and the running thread's stackTrace timed.
For both, the server's memory: its peak (VmHWM, read before disconnect),
the part of it that is the core's pages mapped from the file (RssFile),
and its own memory at its largest (RssAnon, sampled every 5 ms).
Each figure is the best (times) or the largest (memory) of R runs.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.dapclient import DapClient  # noqa: E402
from support.stop import manifest  # noqa: E402


def core_of(host, prog, args, d):
    core = os.path.join(d, "core")
    subprocess.run(["gdb", "-nx", "--batch", "-ex", "set confirm off", "-ex", "break ljgdb_break",
                    "-ex", "run", "-ex", "gcore " + core, "-ex", "kill", "--args", host,
                    os.path.join(ROOT, "testprogs", "lua", prog), os.path.join(d, "expected.txt")]
                   + [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return core


def status(pid, field):
    """A /proc/PID/status figure in bytes (0 once the process is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class AnonPeak(threading.Thread):
    """The largest RssAnon of a process, sampled every 5 ms: its own
    memory, without the pages of the core it maps from the file (which
    VmHWM counts: the kernel's page cache, shared and reclaimable)."""

    def __init__(self, pid):
        threading.Thread.__init__(self, daemon=True)
        self.pid, self.peak, self.done = pid, 0, False
        self.start()

    def run(self):
        while not self.done:
            self.peak = max(self.peak, status(self.pid, "RssAnon"))
            time.sleep(0.005)


def session(core, host, steps):
    """{step: seconds} for each (name, request, args-maker) of steps, timed
    from launch's response; and the server's peak memory."""
    c = DapClient()
    anon = AnonPeak(c.p.pid)
    try:
        c.ok("initialize", adapterID="ljgdb")
        t0 = time.perf_counter()
        c.ok("launch", core=core, program=host)
        out = {"launch": time.perf_counter() - t0}
        c.ok("configurationDone")
        t0 = time.perf_counter()
        got = {}
        for name, cmd, make in steps:
            body = c.ok(cmd, **make(got))
            got[name] = body
            out[name] = time.perf_counter() - t0
        out["peak MB (VmHWM)"] = status(c.p.pid, "VmHWM") / 1e6
        out["of it the core's pages mapped from its file, MB (RssFile)"] = status(c.p.pid, "RssFile") / 1e6
        anon.done = True
        anon.join()
        out["own memory at its peak, MB (RssAnon)"] = anon.peak / 1e6
        return out
    finally:
        anon.done = True
        c.close()


def big_table(got):
    return [v for v in got["locals"]["variables"] if v["name"] == "big"][0]


STACK_STEPS = [
    ("threads", "threads", lambda g: {}),
    ("stackTrace (20 of 200 frames)", "stackTrace",
     lambda g: {"threadId": g["threads"]["threads"][0]["id"], "startFrame": 0, "levels": 20}),
    ("scopes", "scopes",
     lambda g: {"frameId": [f for f in g["stackTrace (20 of 200 frames)"]["stackFrames"]
                            if f.get("source")][0]["id"]}),
    ("locals", "variables", lambda g: {"variablesReference": g["scopes"]["scopes"][0]["variablesReference"]}),
    ("first 100 array entries", "variables",
     lambda g: {"variablesReference": big_table(g)["variablesReference"], "filter": "indexed",
                "start": 0, "count": 100}),
    ("first 100 hash entries", "variables",
     lambda g: {"variablesReference": big_table(g)["variablesReference"], "filter": "named",
                "start": 0, "count": 100}),
]
MANY_STEPS = [
    ("threads", "threads", lambda g: {}),
    ("stackTrace", "stackTrace", lambda g: {"threadId": g["threads"]["threads"][0]["id"]}),
]


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--coroutines", type=int, default=1000000)
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args(argv)
    host = manifest()[a.variant]["host"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ljgdb-bench-dap-") as d:
        for prog, args, steps, label in (
                ("dapbench.lua", (200, 100000), STACK_STEPS, "200 frames, a 10^5-entry table"),
                ("many.lua", (a.coroutines,), MANY_STEPS, "%d coroutines" % a.coroutines)):
            w = os.path.join(d, prog)
            os.makedirs(w)
            core = core_of(host, prog, args, w)
            runs = [session(core, host, steps) for _ in range(a.runs)]
            for k in runs[0]:
                v = max(r[k] for r in runs) if "MB" in k else min(r[k] for r in runs)
                rows.append((label, k, v))
    print("| core | step (seconds from launch's response; memory) | best of %d (memory: largest) |"
          % a.runs)
    print("| --- | --- | --- |")
    for label, k, v in rows:
        print("| %s | %s | %s |" % (label, k, "%.0f" % v if "MB" in k else "%.3f" % v))


if __name__ == "__main__":
    main(sys.argv[1:])
