"""The sampler's choice of signal and its reading of thread states, on
/proc text (no gdb), and the timer process on a real child process."""
import os
import signal
import subprocess
import sys
import time

import pytest

from gdb_ext.stack import sampling  # noqa: E402
from gdb_ext.errors import LjError  # noqa: E402
from gdb_ext.stack.sampling import Timer, choose_signal, on_cpu, parse_states, process_signal  # noqa: E402


def status(caught=0, ignored=0):
    return "Name:\tx\nSigPnd:\t0000000000000000\nSigIgn:\t%016x\nSigCgt:\t%016x\n" % (ignored, caught)


def thread(blocked=0):
    return "Name:\tx\nSigBlk:\t%016x\n" % blocked


def bit(s):
    return 1 << (s - 1)


def test_choice_prefers_default_ignored():
    assert choose_signal(status(), [thread()]) == signal.SIGURG
    # A program that catches SIGURG (Go-style preemption): SIGWINCH.
    assert choose_signal(status(caught=bit(signal.SIGURG)), [thread()]) == signal.SIGWINCH


def test_choice_blocked_in_every_thread():
    # Blocked in one thread of two: still delivered, to the other.
    assert choose_signal(status(), [thread(bit(signal.SIGURG)), thread()]) == signal.SIGURG
    both = bit(signal.SIGURG) | bit(signal.SIGWINCH)
    assert choose_signal(status(), [thread(both), thread(both)]) == signal.SIGCHLD


def test_choice_of_an_ignored_signal():
    # nginx's workers catch WINCH and CHLD and ignore PIPE (ngx_signals).
    caught = bit(signal.SIGURG) | bit(signal.SIGWINCH) | bit(signal.SIGCHLD)
    assert choose_signal(status(caught=caught, ignored=bit(signal.SIGPIPE)),
                         [thread()]) == signal.SIGPIPE
    # An ignored SIGINT or SIGCONT is never used (gdb's and job control's own).
    with pytest.raises(LjError) as e:
        choose_signal(status(caught=caught, ignored=bit(signal.SIGINT) | bit(signal.SIGCONT)),
                      [thread()])
    assert "nothing was sampled" in str(e.value)


def test_choice_unreadable():
    with pytest.raises(LjError):
        choose_signal("Name:\tx\n", [thread()])


def test_choice_for_this_process():
    """A real process: one that catches SIGURG gets SIGWINCH."""
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGURG, lambda *a: 0); "
                              "print('ok', flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ok\n"
        assert process_signal(child.pid) == signal.SIGWINCH
    finally:
        child.kill()
        child.wait()


def test_states():
    assert parse_states("s 12:R 13:S 14:t\n") == {12: "R", 13: "S", 14: "t"}
    assert on_cpu("R") is True
    assert on_cpu("S") is False and on_cpu("D") is False
    assert on_cpu("t") is None and on_cpu(None) is None


def test_timer_reads_states_and_signals(tmp_path):
    """The timer, on a child that sleeps in a read and has SIGURG ignored by
    default (it is not traced: the signal does nothing): its answer holds
    the child's state (S) read before the signal; a cancel before the
    deadline sends nothing."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    timer = Timer(child.pid, signal.SIGURG)
    try:
        time.sleep(0.3)
        timer.arm(0.01)
        states = timer.fired()
        assert states == {child.pid: "S"}, states
        timer.arm(30)
        t0 = time.monotonic()
        assert timer.cancel() is False
        assert time.monotonic() - t0 < 5
        assert child.poll() is None
    finally:
        timer.close()
        child.kill()
        child.wait()
    assert timer.p.returncode == 0


def test_timer_quiet_when_its_parent_dies(tmp_path):
    """A timer whose debugger dies while it waits sends nothing: here the
    signal would be SIGTERM to a child that would die of it."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               "p = subprocess.Popen([sys.executable, %r, '%d', '%d'], "
                               "stdin=subprocess.PIPE)\n"
                               "p.stdin.write(b'a 1.0\\n'); p.stdin.flush()\n"
                               "print(p.pid, flush=True); time.sleep(0.2)\n"
                               % (sampling.TIMER_SCRIPT, victim.pid, signal.SIGTERM)],
                              stdout=subprocess.PIPE)
    try:
        timer_pid = int(parent.stdout.readline())
        parent.wait(10)
        time.sleep(1.5)
        assert victim.poll() is None
        assert not os.path.exists("/proc/%d/status" % timer_pid) or \
            "zombie" in open("/proc/%d/status" % timer_pid).read()
    finally:
        victim.kill()
        victim.wait()


def test_moment_copies_memory_mapped_since_the_maps_were_read():
    """The recorder's copy at a stop (recorder.Moment): an address in none
    of the mappings it was given is looked up again in the mappings as
    they are now (read once a moment), and copied; one in none of those
    either is not."""
    from gdb_ext.stack.recorder import Moment
    from gdb_ext.target import BLOCK, SyntheticTarget
    old, new = 0x10000, 0x40000
    t = SyntheticTarget({"types": {}}, [(old, b"a" * 2 * BLOCK), (new, b"b" * BLOCK)])
    calls = []

    def reread():
        calls.append(1)
        return [(old, old + 2 * BLOCK, "rw-p"), (new, new + BLOCK, "rw-p")]
    mom = Moment(t, [(old, old + 2 * BLOCK, "rw-p")], reread)
    assert mom.copy(old + 8, old + 16) and mom.bytes == BLOCK
    assert calls == []
    assert mom.copy(new, new + 64) and new in t._blocks
    assert calls == [1]
    assert not mom.copy(0x90000, 0x90010)
    assert calls == [1]             # (once a moment)
    assert mom.mapping(old + 2 * BLOCK) is None
    assert mom.mapping(old + 2 * BLOCK - 1) == (old, old + 2 * BLOCK)


def test_moment_checks_a_copy_without_reading():
    """Checking a copy the C sampler made (Moment with `tried`): what the
    copy holds passes, a range tried at the stop but not read then is
    unreadable (False, as a failed read at the stop is), a range it never
    tried is a Miss naming the whole blocks to copy next time; no read
    reaches the target's memory meanwhile (recorder._copy_only), and the
    ranges asked for are the next stop's plan (merged, the threads' stacks
    apart)."""
    from gdb_ext.stack.recorder import Miss, Moment, _copy_only, merged
    from gdb_ext.target import BLOCK, SyntheticTarget
    a, b = 0x10000, 0x20000
    t = SyntheticTarget({"types": {}}, [(a, b"a" * 4 * BLOCK), (b, b"b" * 2 * BLOCK)])
    maps = [(a, a + 4 * BLOCK, "rw-p"), (b, b + 2 * BLOCK, "rw-p")]
    t._blocks[a] = b"x" * BLOCK                 # (the copy: block a, not a + BLOCK)
    mom = Moment(t, maps, tried=[(a, a + 2 * BLOCK)])
    with _copy_only(t):
        assert mom.copy(a + 8, a + 64)
        assert t.u8(a + 8) == ord("x")          # (the copy's bytes, not memory's)
        assert not mom.copy(a + BLOCK, a + BLOCK + 8)
        assert mom.copy(a + 10, a + 20, stack=True)
        with pytest.raises(Miss) as e:
            mom.copy(b + 100, b + BLOCK + 1)
        assert (e.value.lo, e.value.hi) == (b, b + 2 * BLOCK)
        with pytest.raises(Miss) as e:
            t.u8(a + 3 * BLOCK + 5)
        assert (e.value.lo, e.value.hi) == (a + 3 * BLOCK, a + 4 * BLOCK)
        assert not mom.holds(a + 3 * BLOCK, a + 3 * BLOCK + 8) and mom.holds(a, a + 8)
    assert a + 3 * BLOCK not in t._blocks and t.u8(a + 3 * BLOCK) == ord("a")
    assert mom.ranges == [(a, a + BLOCK), (a + BLOCK, a + 2 * BLOCK), (b, b + 2 * BLOCK)]
    assert merged(mom.ranges) == [(a, a + 2 * BLOCK), (b, b + 2 * BLOCK)]
    assert merged([(5, 9), (1, 3), (3, 4), (8, 12)]) == [(1, 4), (5, 12)]


def test_a_big_read_of_a_copied_range_comes_from_the_copy():
    """A read of 64 KB or more goes past the block cache, except when the
    cache holds all of it: a sampler's copy of a big Lua stack is the
    moment's, and the process has run on since."""
    from gdb_ext.target import _BIG, BLOCK, SyntheticTarget
    a, n = 0x100000, _BIG + 2 * BLOCK
    t = SyntheticTarget({"types": {}}, [(a, b"m" * n)])
    for b in range(a, a + n, BLOCK):
        t._blocks[b] = b"c" * BLOCK
    assert t.read(a + 8, _BIG) == b"c" * _BIG
    del t._blocks[a + BLOCK]
    assert t.read(a + 8, _BIG) == b"m" * _BIG


def test_thread_stack_refuses_an_entry_it_cannot_place(monkeypatch):
    """A VM entry whose Lua frames are not known at all (its warning says
    why: lj_vm_exit_interp before it sets the interpreter's state, see
    docs/luajit-facts.md) is not a stack of C frames alone: thread_stack
    raises CorruptError (counted as unreadable), where it once gave the C
    frames outside the entry with no Lua frame.  An entry with frames, or
    without a warning, is kept."""
    from gdb_ext.errors import CorruptError
    from gdb_ext.stack import samples

    class Frame(object):
        def __init__(self, name, pc):
            self.name, self.pc, self.has_debug, self.level = name, pc, True, 0

    class Entry(object):
        def __init__(self, frames, warning):
            self.frames, self.warning, self.L, self.cframe, self.leaf = frames, warning, 1, 2, False

    class Lua(object):
        key = ("L", 0x1000, 7)

    vm_frame = Frame("lj_vm_exit_interp", 0x10)
    mframes = [vm_frame, Frame("lua_pcall", 0x20), Frame("main", 0x30)]
    monkeypatch.setattr(samples, "Backtracer", lambda vm: None)
    monkeypatch.setattr(samples, "is_vm_code", lambda m: m is vm_frame)
    warning = ("the line of the innermost frame is not known: no machine frame of this OS "
               "thread is in the trace's code")
    monkeypatch.setattr(samples, "vm_entry", lambda bt, m: Entry([], warning))
    with pytest.raises(CorruptError, match="no machine frame"):
        samples.thread_stack(None, mframes)
    monkeypatch.setattr(samples, "vm_entry", lambda bt, m: Entry([Lua()], warning))
    assert samples.thread_stack(None, mframes) == [("L", 0x1000, 7), ("M", "lua_pcall", 0x20),
                                                   ("M", "main", 0x30)]
    monkeypatch.setattr(samples, "vm_entry", lambda bt, m: Entry([], None))
    assert samples.thread_stack(None, mframes) == [("M", "lua_pcall", 0x20), ("M", "main", 0x30)]


def test_taken_out_of_a_wait():
    """A thread listed as runnable whose registers show a system call the
    stop interrupted while it waited (x86-64: the call's number in
    orig_rax, -ERESTART* in rax) was asleep; user code (orig_rax -1), a
    call's real result, and aarch64 (no call number in NT_PRSTATUS) are
    not."""
    from gdb_ext.stack.samples import taken_out_of_a_wait
    neg = lambda n: (1 << 64) - n     # noqa: E731
    for e in (512, 513, 514, 516):      # ERESTARTSYS .. ERESTART_RESTARTBLOCK
        assert taken_out_of_a_wait({"orig_rax": 35, "rax": neg(e)}, "x86_64")
    assert not taken_out_of_a_wait({"orig_rax": neg(1), "rax": neg(516)}, "x86_64")
    assert not taken_out_of_a_wait({"orig_rax": 35, "rax": 0}, "x86_64")
    assert not taken_out_of_a_wait({"orig_rax": 35, "rax": neg(4)}, "x86_64")     # EINTR
    assert not taken_out_of_a_wait({"rax": neg(516)}, "x86_64")
    assert not taken_out_of_a_wait({"x0": neg(516), "x8": 101}, "aarch64")
