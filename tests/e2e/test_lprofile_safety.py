"""lprofile leaves the process it profiles as it found it.

testprogs/lua/counter.lua counts in a Lua loop and keeps its count in a
file.  After a profile ends (by its own deadline, Ctrl-C at gdb, the
program's exit, gdb's death, a detach or a quit right after, or 50
profiles in a row), the process must still run 2 seconds later and go on
counting: the kernel's state for it is running, and the count it writes
grows.  A sampling signal of lprofile's that reached it after gdb let go
would have killed it (SIG63, the signal lprofile used before: exit status
191) or at least run a handler of its.
"""
import os
import re
import signal
import subprocess
import time

import pytest

from support.stop import LOADER, LUA_DIR, manifest, read_expected, run_gdb
from support.host import HostProcess, proc_state

# About 80 s: fifty profiles in a row, gdb killed mid-profile (16 s each).
pytestmark = pytest.mark.slow

PROG = os.path.join(LUA_DIR, "counter.lua")
VARIANTS = ["r21-gc64", "deb-x64"]
SUMMARY = re.compile(r"^lprofile: (\d+) samples in [\d.]+ s .*, (\d+) thread stacks with Lua kept;",
                     re.M)


def count(path):
    return int([r[1] for r in read_expected(path) if r[0] == "count"][0])


def assert_counting(pid, path, alive=lambda: True):
    """2 s after the debugger is gone: neither stopped nor traced, and
    counting on."""
    time.sleep(2)
    assert alive(), "the process is gone"
    # (R, or S/D for a moment while it writes its count)
    assert proc_state(pid) in "RSD", proc_state(pid)
    with open("/proc/%d/status" % pid) as f:
        assert re.search(r"^TracerPid:\s+0$", f.read(), re.M)
    before = count(path)
    time.sleep(1)
    assert alive() and count(path) > before, (before, count(path))
    timers = subprocess.run(["pgrep", "-f", "sampletimer.py %d " % pid], stdout=subprocess.PIPE)
    assert timers.returncode == 1, "a sampling timer outlived lprofile: %s" % timers.stdout


class Counter(HostProcess):
    def __init__(self, variant, tmp_path, mode="busy", seconds=0):
        m = manifest()[variant]
        self.file = os.path.join(str(tmp_path), "count.txt")
        super().__init__([m["host"], PROG, self.file, mode, str(seconds)], str(tmp_path), self.file)

    def alive(self):
        return self.proc.poll() is None

    def gdb_args(self, commands):
        args = ["-p", str(self.pid), "-ex", "source " + LOADER]
        for c in commands:
            args += ["-ex", c]
        return args

    def gdb(self, commands, **kw):
        return run_gdb(self.gdb_args(commands), cwd=self.workdir, **kw)

    def gdb_in_background(self, commands):
        cmd = ["gdb", "-nx", "-nh", "--batch", "-ex", "set confirm off"] + self.gdb_args(commands)
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, cwd=self.workdir)


@pytest.mark.parametrize("end", ["", "detach", "quit"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_attached_then_gone(variant, end, tmp_path):
    """gdb -p, a profile at 200 Hz, then the batch's end, a detach or a
    quit: the process runs on."""
    c = Counter(variant, tmp_path)
    try:
        out = c.gdb(["lprofile --seconds 2 --hz 200"] + ([end] if end else []))
        m = SUMMARY.search(out)
        assert m and int(m.group(1)) >= 200, out
        assert_counting(c.pid, c.file, c.alive)
    finally:
        c.stop()


def test_fifty_profiles(tmp_path):
    """50 profiles in a row on one process, then a detach."""
    c = Counter("r21-gc64", tmp_path)
    try:
        out = c.gdb(["lprofile --seconds 0.2 --hz 100"] * 50 + ["detach"])
        assert len(SUMMARY.findall(out)) == 50, out[-3000:]
        assert "Traceback" not in out
        assert_counting(c.pid, c.file, c.alive)
    finally:
        c.stop()


def test_started_under_gdb_then_detached(tmp_path):
    """A program gdb started (run), profiled, then detached: it runs on
    after gdb has exited."""
    m = manifest()["r21-gc64"]
    path = os.path.join(str(tmp_path), "count.txt")
    # (Its output away from gdb's: it outlives gdb, which the test waits for.)
    out = run_gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break",
                   "-ex", "run %s %s busy >/dev/null 2>&1 </dev/null" % (PROG, path),
                   "-ex", "lprofile --seconds 2 --hz 200", "-ex", "detach", m["host"]],
                  cwd=str(tmp_path))
    assert SUMMARY.search(out), out
    pid = int([r[1] for r in read_expected(path) if r[0] == "pid"][0])
    try:
        assert_counting(pid, path, lambda: os.path.exists("/proc/%d" % pid))
    finally:
        os.kill(pid, signal.SIGKILL)


def test_program_exits_during_profile(tmp_path):
    """The program exits by itself while it is sampled: lprofile says so
    in its note, and the program's exit status is its own (0), not a
    signal's."""
    c = Counter("r21-gc64", tmp_path, mode="exit", seconds=3)
    try:
        out = c.gdb(["lprofile --seconds 20 --hz 100"])
        assert "lprofile: sampling ended early: the process exited (code 0)" in out, out
        assert "Traceback" not in out
        assert c.proc.wait(30) == 0
    finally:
        c.stop()


@pytest.mark.parametrize("variant", VARIANTS)
def test_gdb_killed_during_profile(variant, tmp_path):
    """gdb dies (SIGKILL) in the middle of a profile, three times on one
    process at different moments: the process runs on, and the timer that
    signalled it is gone too."""
    c = Counter(variant, tmp_path)
    try:
        for delay in (1.5, 2.2, 3.1):
            g = c.gdb_in_background(["lprofile --seconds 60 --hz 200"])
            time.sleep(delay)
            assert g.poll() is None, g.stdout.read().decode()
            g.kill()
            g.wait()
            assert_counting(c.pid, c.file, c.alive)
    finally:
        c.stop()


def test_ctrl_c_during_profile(tmp_path):
    """Ctrl-C at gdb (SIGINT to gdb) ends the profile with one line (gdb
    takes it while the process runs, as a stop of the program, or while
    lprofile reads a sample, as an interrupt of the command); after the
    detach the process runs on."""
    c = Counter("r21-gc64", tmp_path)
    try:
        g = c.gdb_in_background(["lprofile --seconds 60 --hz 200", "detach"])
        time.sleep(2.5)
        g.send_signal(signal.SIGINT)
        out = g.communicate(timeout=60)[0].decode()
        assert "Traceback" not in out, out
        assert re.search(r"^lprofile: (sampling ended early: it received SIGINT|"
                         r"interrupted \(Ctrl-C\))", out, re.M), out
        assert_counting(c.pid, c.file, c.alive)
    finally:
        c.stop()
