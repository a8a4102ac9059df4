#!/usr/bin/env python3
"""What `python3 -m ljgdb triage` costs on many cores: cores a minute and
its memory.

  python3 bench/bench_triage.py [--cores N] [--compressed SHARE] [VARIANT]
      (defaults: 1000 cores, half of them compressed, r21-gc64)

Makes real kernel cores of testprogs/lua/crash.lua (the test host, its
three crash sites, two crashes each), then a store of N cores: copies of
those, SHARE of them compressed with zstd under systemd-coredump's names
(the others plain), in one directory.  Then runs triage on the directory
once and prints its wall time, its CPU (user + system), cores a minute,
the largest resident set it reached (wait4's rusage of the child) and the
groups it found (3 are expected).  Needs kernel cores written into the
working directory (core_pattern 'core') and the zstd program."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from support import moments  # noqa: E402
from support.stop import manifest  # noqa: E402

PROG = os.path.join(ROOT, "testprogs", "lua", "crash.lua")
SITES = ("read_a", "read_b", "abort")


def real_cores(build, work):
    """Two kernel cores of each site: [path]."""
    out = []
    for site in SITES:
        for i in range(2):
            d = os.path.join(work, "%s-%d" % (site, i))
            os.makedirs(d)
            subprocess.run(["bash", "-c", 'ulimit -c unlimited; exec "$@"', "sh", build["host"],
                            PROG, os.path.join(d, "expected.txt"), site], cwd=d,
                           env=dict(os.environ, **moments._env(build)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            core = os.path.join(d, "core")
            if not os.path.exists(core):
                sys.exit("no kernel core in %s: %s" % (d, moments.kernel_cores_possible()))
            out.append(core)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=1000)
    ap.add_argument("--compressed", type=float, default=0.5)
    ap.add_argument("variant", nargs="?", default="r21-gc64")
    a = ap.parse_args()
    if shutil.which("zstd") is None:
        sys.exit("no zstd program (testprogs/install-deps.sh installs it)")
    build = manifest()[a.variant]
    with tempfile.TemporaryDirectory() as tmp:
        cores = real_cores(build, os.path.join(tmp, "runs"))
        packed = []
        for c in cores:
            subprocess.run(["zstd", "-q", c, "-o", c + ".zst"], check=True)
            packed.append(c + ".zst")
        store = os.path.join(tmp, "store")
        os.makedirs(store)
        t0 = 1764143201 * 10 ** 6
        n_packed = int(a.cores * a.compressed)
        size = 0
        for i in range(a.cores):
            k = i % len(cores)
            if i < n_packed:
                dst = os.path.join(store, "core.host.0.%s.%d.%d.zst" % (
                    "8f2c6a1e4b7d4c0f9a3e5b2d1c0e7f6a", 1000 + i, t0 + i * 10 ** 6))
                shutil.copy(packed[k], dst)
            else:
                dst = os.path.join(store, "core.%d" % i)
                shutil.copy(cores[k], dst)
            size += os.path.getsize(dst)
        err = open(os.path.join(tmp, "stderr"), "w+")
        start = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "ljgdb", "triage", "--json", "--tmpdir",
                              tmp, store], cwd=ROOT, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)         # (this child's own rusage)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit(err.read()[-2000:])
        doc = json.loads(out)
    cpu = ru.ru_utime + ru.ru_stime
    print("%s: %d cores (%d zstd-compressed), %.1f MB on disk" % (
        a.variant, a.cores, n_packed, size / 1e6))
    print()
    print("| cores | wall (s) | CPU (s) | cores a minute | max RSS (MB) | groups | unreadable |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("| %d | %.1f | %.1f | %.0f | %.1f | %d (counts %s) | %d |" % (
        a.cores, wall, cpu, 60 * a.cores / wall, ru.ru_maxrss / 1024.0, len(doc["groups"]),
        ", ".join(str(g["count"]) for g in doc["groups"]), len(doc["unreadable"])))


if __name__ == "__main__":
    main()
