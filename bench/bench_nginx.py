#!/usr/bin/env python3
"""An nginx worker with lua-nginx-module under load while record samples
it: requests a second and latency against the worker unprofiled, for the
BPF and the ptrace sampler at 100 and 1000 Hz, in one run.

  python3 bench/bench_nginx.py [--requests N] [--clients K] [--work W] [--rounds R]
      (defaults: 4000 requests, 4 clients, W = 20000 counts a request, 2 rounds)

nginx runs testprogs/nginx's server (one process, the worker, on
127.0.0.1, on the rebuilt libluajit2), started as tests/e2e/test_nginx.py
starts it.  Each configuration sends the same bounded number of requests
(GET /busy?n=W: the handler counts to W in the interpreter), from K client
processes, one request after the other on each, and measures the wall
time of the whole (requests a second) and of each request (median and
99th percentile).  The profiled configurations start record first and
send the requests once it has started sampling (its first line on a
terminal is not there: it waits 2 s), and record runs until they are
answered.  Every request must be answered "busy W"; a failure is counted.
The configurations run in turn, R rounds of them.  Prints a Markdown table
(docs/benchmarks.md)."""
import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "e2e")):
    sys.path.insert(0, _p)          # (as tests/conftest.py sets it for the tests)
from test_live_hosts import get  # noqa: E402
from test_nginx import start_nginx  # noqa: E402


def client(args):
    """n requests one after the other: ([seconds of each], failures)."""
    port, n, work = args
    times, failed = [], 0
    want = "busy %d\n" % work
    for _ in range(n):
        t0 = time.monotonic()
        try:
            ok = get(port, "/busy?n=%d" % work) == want
        except (OSError, AssertionError):
            ok = False
        times.append(time.monotonic() - t0)
        failed += not ok
    return times, failed


def load(pool, port, requests, clients, work):
    t0 = time.monotonic()
    got = pool.map(client, [(port, requests // clients, work)] * clients)
    wall = time.monotonic() - t0
    times = sorted(t for ts, _ in got for t in ts)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return len(times) / wall, times[len(times) // 2], p99, sum(f for _, f in got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--work", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    configs = [(None, None)] + [(s, r) for r in (100, 1000) for s in ("bpf", "ptrace")]
    rows = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as d:
        p, port = start_nginx(d, os.path.join(d, "expected.txt"), gdb_init=())
        pool = multiprocessing.Pool(a.clients)
        try:
            load(pool, port, a.clients * 50, a.clients, a.work)       # (warm up)
            for _ in range(a.rounds):
                for sampler, rate in configs:
                    rec = None
                    if sampler:
                        rec = subprocess.Popen(
                            [sys.executable, "-m", "ljgdb", "record", "--pid", str(p.pid),
                             "--sampler", sampler, "--rate", str(rate), "--format", "folded",
                             "-o", os.path.join(d, "r.folded")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                        time.sleep(2)
                    rows[(sampler, rate)].append(load(pool, port, a.requests, a.clients, a.work))
                    if rec is not None:
                        rec.send_signal(signal.SIGINT)
                        err = rec.communicate(timeout=120)[1].decode()
                        if rec.returncode != 0:
                            raise RuntimeError(err)
        finally:
            pool.terminate()
            p.stop()
    print("nginx worker, GET /busy?n=%d, %d requests from %d clients on 127.0.0.1, %d rounds"
          % (a.work, a.requests, a.clients, a.rounds))
    print()
    print("| profiler | requests a second | vs unprofiled | latency median (ms) | p99 (ms) | "
          "failed |")
    print("| --- | --- | --- | --- | --- | --- |")
    base = sum(r[0] for r in rows[(None, None)]) / len(rows[(None, None)])
    for (sampler, rate), got in rows.items():
        name = "unprofiled" if sampler is None else "record --sampler %s, %d Hz" % (sampler, rate)
        print("| %s | %s | %s | %s | %s | %d |" % (
            name, ", ".join("%.0f" % g[0] for g in got),
            ", ".join("%.1f%%" % (100.0 * g[0] / base) for g in got),
            ", ".join("%.2f" % (1000 * g[1]) for g in got),
            ", ".join("%.2f" % (1000 * g[2]) for g in got), sum(g[3] for g in got)))


if __name__ == "__main__":
    main()
