"""python3 -m ljgdb --pid PID (gdb_ext.backends.live, commands.hosts.livehost)
against gdb attached to the same process at the same moment: the same text.

testprogs/lua/wait.lua stands still: its Lua frames (a coroutine over the
main chunk, five levels of recursion) wait in the C library's read of a
FIFO until the test writes a line into it; it records those frames, as
debug.getinfo sees them, before each read.  After every --pid run the
process must be as it was: sleeping in its read, not traced (TracerPid 0),
no signal pending (SigPnd, ShdPnd of every thread), and it goes on working
(a line written into the FIFO is read and recorded, then the same stack
again).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from support.host import HostProcess, proc_state
from support.stop import LUA_DIR, ROOT, frame_place, manifest, without_frame_names

PROG = os.path.join(LUA_DIR, "wait.lua")
VARIANTS = ["r21-gc64", "deb-x64", "r20-x64"]
COMMANDS = ["lbt", "linfo", "lthreads", "lgcstat", "lbt full", "lstates", "lbt --all", "lstr", "lheap",
            "lmcode", "ltrace", "lgcstat --by-chunk", "lbt --all --group", "lthreads --group"]
TRACEBACK = "Traceback (most recent call last)"


class Waiting(HostProcess):
    """wait.lua in the variant's test host (an arm64 one under qemu-user),
    blocked in its read."""

    def __init__(self, variant, tmp_path, args=(), runner=None, env=None, host=None):
        """args: wait.lua's after the FIFO (DEPTH, idle-thread); runner: the
        command line before the host's (default: the build's own); env: more
        environment variables; host: the binary to run in place of the
        build's host (a stripped copy)."""
        self.fifo = os.path.join(str(tmp_path), "fifo")
        os.mkfifo(self.fifo)
        expected = os.path.join(str(tmp_path), "expected.txt")
        m = manifest()[variant]
        runner = m.get("runner", []) if runner is None else runner
        super().__init__(runner + [host or m["host"], PROG, expected, self.fifo] + list(args),
                         str(tmp_path), expected, env=env)
        self.wait_blocked()

    def frames(self):
        """[(level, source, line)] of the frames the program recorded before
        its last read (level 1: wait_line, lbt's #1)."""
        recs = self.reread()
        last = max(i for i, r in enumerate(recs) if r[0] == "frames")
        first = last - int(recs[last][1])
        return [(int(r[1]), r[2].lstrip("@"), int(r[3])) for r in recs[first:last]]

    def wait_blocked(self, timeout=10):
        """Until the main thread sleeps in read(2) (/proc/PID/syscall)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with open("/proc/%d/syscall" % self.pid) as f:
                    if f.read().split()[0] == "0" and proc_state(self.pid) == "S":
                        return
            except (OSError, IndexError):
                pass
            time.sleep(0.02)
        raise AssertionError("the program did not come to its read:\n" + self.log())

    def send(self, line, timeout=10):
        """Write a line into the FIFO; wait until the program recorded it."""
        fd = os.open(self.fifo, os.O_WRONLY)
        os.write(fd, line.encode() + b"\n")
        os.close(fd)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if ["line", line] in [r[:2] for r in self.reread()]:
                return
            time.sleep(0.02)
        raise AssertionError("the program did not read '%s':\n%s" % (line, self.log()))

    def quit(self):
        """The line "quit": the program ends by itself, with status 0, after
        recording "done" with its 3 suspended coroutines: it went on working
        after it was read."""
        self.send("quit")
        assert self.proc.wait(10) == 0
        assert ["done", "3"] in self.reread()


def assert_left_alone(pid, state="S"):
    """Not traced, no signal pending in any thread, in the given state."""
    assert proc_state(pid) == state, proc_state(pid)
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            status = f.read()
        assert re.search(r"^TracerPid:\s+0$", status, re.M), status
        for field in ("SigPnd", "ShdPnd"):
            assert re.search(r"^%s:\s+0+$" % field, status, re.M), status


def assert_frames(text, frames):
    """lbt's text has the frames the program recorded, at their levels."""
    assert len(frames) >= 6, frames
    for level, source, line in frames:
        assert re.search(r"^#%-3d %s:%d$" % (level, re.escape(source), line), frame_place(text),
                         re.M), \
            (level, source, line, text)


def live(pid, args, options=()):
    """(exit status, stdout, stderr) of python3 -m ljgdb --pid PID ARGS."""
    p = subprocess.run([sys.executable, "-m", "ljgdb"] + list(options) + ["--pid", str(pid)] +
                       args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                       timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def comparable(cmd, text):
    """gdb's output and --pid's as they must agree: gdb's frames made from
    DWARF call-site records are not the core reader's (support.stop)."""
    text = (text or "").rstrip("\n")
    return without_frame_names(text) if cmd in ("linfo", "lstates") else text


def assert_same_by_pid(prog, want):
    """Each of COMMANDS by --pid gives gdb's text (want: {command:
    output}), the process left alone after each; the first one's output."""
    first = None
    for cmd in COMMANDS:
        code, out, err = live(prog.pid, cmd.split())
        assert (code, err) == (0, ""), (cmd, err)
        assert comparable(cmd, out) == comparable(cmd, want[cmd]), \
            "%s:\n--- gdb:\n%s\n--- --pid:\n%s" % (cmd, want[cmd], out)
        assert_left_alone(prog.pid)
        first = first or out
    return first


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_as_gdb_attached(variant, tmp_path):
    prog = Waiting(variant, tmp_path)
    try:
        want = dict(prog.attach(COMMANDS))
        assert_left_alone(prog.pid)
        first = assert_same_by_pid(prog, want)
        assert_frames(first, prog.frames())
        # It goes on working, and the same stack is there again.
        prog.send("ping")
        prog.wait_blocked()
        code, out, err = live(prog.pid, ["lbt"])
        assert (code, out, err) == (0, first, "")
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        prog.stop()


def test_stopped_process_stays_stopped(tmp_path):
    """A process stopped by SIGSTOP is read, and left stopped (a group
    stop is not ours to end); SIGCONT then lets it go on."""
    prog = Waiting("r21-gc64", tmp_path)
    try:
        os.kill(prog.pid, 19)           # SIGSTOP
        deadline = time.time() + 5
        while proc_state(prog.pid) != "T" and time.time() < deadline:
            time.sleep(0.02)
        code, out, err = live(prog.pid, ["lbt"])
        assert code == 0 and "wait.lua:%d\n" % prog.frames()[0][2] in frame_place(out), err
        assert_left_alone(prog.pid, "T")
        os.kill(prog.pid, 18)           # SIGCONT
        prog.send("ping")
    finally:
        prog.stop()


@pytest.fixture
def no_lua():
    """(the pid of a process that is gone, a running process without LuaJIT)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        yield gone.pid, sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


def assert_one_line_each(cases, first=()):
    """Each (arguments, pattern) of `python3 -m ljgdb FIRST... ARGS`: status
    1, nothing on stdout, one line on stderr that matches, no traceback."""
    for args, pattern in cases:
        p = subprocess.run([sys.executable, "-m", "ljgdb"] + list(first) + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, timeout=60)
        err = p.stderr.decode()
        assert p.returncode == 1 and p.stdout == b"", (args, err)
        assert len(err.splitlines()) == 1 and TRACEBACK not in err, (args, err)
        assert re.search(pattern, err), (args, err)


def test_bad_pid_is_one_line(no_lua):
    gone, sleeper = no_lua
    assert_one_line_each([
        (["--pid", str(gone), "lbt"], r"^ljgdb: no process %d " % gone),
        (["--pid", "abc", "lbt"], r"^ljgdb: --pid takes a process id, not 'abc'"),
        (["--pid", str(sleeper), "lbt"],
         r"^ljgdb: no LuaJIT in process %d's files: .*/sleep" % sleeper),
        (["--pid", str(sleeper), "nosuch"], r"^ljgdb: 'nosuch' is not a command"),
    ])
    assert_left_alone(sleeper)


TRACER = """
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
assert libc.ptrace(0x4206, int(sys.argv[1]), None, None) == 0, ctypes.get_errno()
print("seized", flush=True)
time.sleep(60)
"""


def test_another_tracer_is_named(tmp_path):
    """Another tracer holds the process (seized, not stopped): one line
    naming it by TracerPid; once it is gone, --pid reads the process."""
    prog = Waiting("r21-gc64", tmp_path)
    tracer = subprocess.Popen([sys.executable, "-c", TRACER, str(prog.pid)],
                              stdout=subprocess.PIPE)
    try:
        assert tracer.stdout.readline() == b"seized\n"
        code, out, err = live(prog.pid, ["lbt"])
        assert code == 1 and out == "" and len(err.splitlines()) == 1, err
        assert re.search(r"^ljgdb: process %d is already traced by process %d \(python3?.*"
                         r"TracerPid" % (prog.pid, tracer.pid), err), err
        code, out, err = dump(prog.pid, [])
        assert code == 1 and out == "" and len(err.splitlines()) == 1, err
        assert re.search(r"^ljgdb: process %d is already traced by process %d " % (
            prog.pid, tracer.pid), err), err
        tracer.kill()
        tracer.wait()
        code, out, err = live(prog.pid, ["lbt"])
        assert code == 0 and "wait.lua:%d\n" % prog.frames()[0][2] in frame_place(out), err
        assert_left_alone(prog.pid)
    finally:
        if tracer.poll() is None:
            tracer.kill()
        prog.stop()


def test_yama_refusal_names_the_setting(tmp_path, monkeypatch):
    """The line for a refusal under Yama (this machine may have no Yama:
    the file is given)."""
    from ljgdb.gdb_ext.backends import live as backend
    scope = tmp_path / "ptrace_scope"
    scope.write_text("1\n")
    monkeypatch.setattr(backend, "YAMA_SCOPE", str(scope))
    line = backend.refusal(os.getpid(), OSError(1, os.strerror(1)))
    assert "/proc/sys/kernel/yama/ptrace_scope is 1" in line and "CAP_SYS_PTRACE" in line, line
    assert "\n" not in line


# --- python3 -m ljgdb dump --pid PID (commands.dump) -------------------------

def dump(pid, args):
    """(exit status, stdout, stderr) of python3 -m ljgdb dump --pid PID ARGS."""
    return live(pid, args, options=["dump"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_dump_same_as_gdb_lbt(variant, tmp_path):
    """dump, --all, --locals, --json: for the one OS thread that runs Lua,
    its header and what gdb attached prints for lbt, lbt --all, lbt full,
    lbt --json at the same moment; the thread that runs no Lua counted on
    the last line; the process left running as it was."""
    prog = Waiting(variant, tmp_path, ["5", "idle-thread"])
    try:
        tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % prog.pid))
        idle = [t for t in tids if t != prog.pid]
        assert len(idle) == 1, tids
        deadline = time.time() + 5
        while proc_state(prog.pid, idle[0]) != "S" and time.time() < deadline:
            time.sleep(0.02)
        with open("/proc/%d/task/%d/comm" % (prog.pid, idle[0])) as f:
            assert f.read() == "ljgdb-idle\n"
        with open("/proc/%d/comm" % prog.pid) as f:
            name = f.read().rstrip("\n")
        want = dict(prog.attach(["lbt", "lbt --all", "lbt full", "lbt --json"]))
        assert_left_alone(prog.pid)
        head = 'Thread %d "%s" (S: sleeping)' % (prog.pid, name)
        tail = "1 other thread runs no Lua: %d" % idle[0]
        for args, cmd in (([], "lbt"), (["--all"], "lbt --all"), (["--locals"], "lbt full")):
            code, out, err = dump(prog.pid, args)
            assert (code, err) == (0, ""), (args, err)
            assert out == "%s\n%s\n\n%s\n" % (head, want[cmd].rstrip("\n"), tail), \
                "dump %s:\n--- gdb %s:\n%s\n--- dump:\n%s" % (args, cmd, want[cmd], out)
            assert_frames(out, prog.frames())
            assert_left_alone(prog.pid)
            assert proc_state(prog.pid, idle[0]) == "S"
        code, out, err = dump(prog.pid, ["--json"])
        assert (code, err) == (0, ""), err
        doc = json.loads(out)
        assert (doc["command"], doc["pid"], doc["other_threads"]) == ("dump", prog.pid, idle)
        assert [(t["tid"], t["name"], t["state"]) for t in doc["threads"]] == \
            [(prog.pid, name, "S")]
        gdb_doc = json.loads(want["lbt --json"])
        assert doc["threads"][0]["lbt"]["threads"] == gdb_doc["threads"]
        frames = doc["threads"][0]["lbt"]["threads"][0]["frames"]
        assert [(f["level"], f["source"], f["line"]) for f in frames[1:]] == prog.frames()
        assert_left_alone(prog.pid)
        # It goes on working.
        prog.quit()
    finally:
        prog.stop()


def test_dump_bad_input_is_one_line(no_lua):
    gone, sleeper = no_lua
    usage = r"; usage: python3 -m ljgdb dump --pid PID \[--all\] \[--locals\] \[--json\]$"
    assert_one_line_each([
        ([], r"^ljgdb: dump: give --pid PID" + usage),
        (["--pid", "abc"], r"^ljgdb: dump: --pid takes a process id, not 'abc'" + usage),
        (["--pid", str(sleeper), "--full"],
         r"^ljgdb: dump: '--full' is not an option of dump \(--pid PID, --all, --locals, "
         r"--json\)" + usage),
        (["--pid", str(gone)], r"^ljgdb: no process %d " % gone),
        (["--pid", str(sleeper)], r"^ljgdb: no LuaJIT in process %d's files: .*/sleep" % sleeper),
    ], first=["dump"])
    assert_left_alone(sleeper)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="unshare and root are needed for a mount namespace")
def test_process_in_another_mount_namespace(tmp_path):
    """The host run from a tmpfs mounted in a mount namespace of its own (a
    container's view of its files): the file it runs is not at that path
    here, so --pid reads it through /proc/PID/root; dump's frames are the
    ones the program recorded, and it is left as it was."""
    hidden = str(tmp_path / "hidden")
    os.makedirs(hidden)
    script = ('mount -t tmpfs none "$0" && cp "$1" "$0/host" && shift && exec "$0/host" "$@"')
    prog = Waiting("r21-gc64", tmp_path, runner=["unshare", "-m", "--propagation", "private",
                                                 "sh", "-c", script, hidden])
    try:
        assert os.readlink("/proc/%d/exe" % prog.pid) == os.path.join(hidden, "host")
        assert os.listdir(hidden) == []         # (not here: in its namespace only)
        code, out, err = dump(prog.pid, [])
        assert (code, err) == (0, ""), err
        assert_frames(out.split("\n", 1)[1], prog.frames())
        assert_left_alone(prog.pid)
        prog.quit()
    finally:
        prog.stop()
