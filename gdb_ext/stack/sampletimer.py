"""The sampling profiler's clock: a process of its own, apart from the
debugger, which stops the profiled process with a signal at the moments
it is told, and first reads from the kernel whether each thread was on a
CPU.  Run as a script (python3 sampletimer.py PID SIGNO); it imports
nothing of ljgdb, so that it starts fast.  Its readers of a thread's
state and name in /proc (thread_state, thread_facts) serve `dump` too.

Protocol, one line each way (the debugger writes, the timer answers):
  a SECONDS   arm: after SECONDS, read every thread's scheduling state and
              send the signal; answers "s TID:STATE TID:STATE ..." once it
              has been sent, "c" when a cancel came first, "x" when the
              process is gone
  c           cancel the armed wait (answered as above: "c", or "s ..."
              when the signal had already gone out; a "c" while nothing is
              armed is ignored)
  q, or EOF   exit.  Without "q" the debugger died: the timer sends nothing
              more.

It signals only while its parent (the debugger, which traces the process)
is alive: a signal sent to a process nobody traces is delivered to it.
"""
from typing import Dict, List, Optional, Tuple
import os
import select
import sys
import time

# A thread in tracing stop ('t') is still held by the debugger from the
# last sample (it resumes the threads after it arms the timer): wait this
# long at most for the state that is the program's own.
SETTLE_SECONDS = 0.05


def thread_state(pid: int, tid: int) -> Optional[str]:
    """The scheduling state letter of thread tid of pid, from its
    /proc/PID/task/TID/stat (R running or runnable, S sleeping, D
    uninterruptible, T/t stopped, Z zombie); None when it is gone."""
    try:
        with open("/proc/%d/task/%d/stat" % (pid, tid), "rb") as f:
            text = f.read()
    except OSError:
        return None
    # "tid (comm) S ...": comm may hold spaces and parentheses.
    end = text.rfind(b")")
    return chr(text[end + 2]) if 0 < end and len(text) > end + 2 else None


def thread_facts(pid: int, tid: int) -> Tuple[str, str]:
    """(name, state letter) of thread tid of pid, from /proc; ('?', '?')
    when it is gone."""
    try:
        with open("/proc/%d/task/%d/comm" % (pid, tid)) as f:
            name = f.read().rstrip("\n")
    except OSError:
        return "?", "?"
    return name, thread_state(pid, tid) or "?"


def thread_states(pid: int) -> Dict[int, str]:
    """{tid: state letter} of every thread of pid (thread_state)."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        st = thread_state(pid, int(tid))
        if st is not None:
            out[int(tid)] = st
    return out


def main(argv: List[str]) -> Optional[int]:
    pid, sig = int(argv[1]), int(argv[2])
    parent = os.getppid()
    try:
        # Wake on time even while the program keeps every CPU busy: a
        # timer that waits for a CPU would sample busy code late, after it.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (AttributeError, OSError):
        pass
    stdin = sys.stdin.buffer
    out = sys.stdout
    fd = stdin.fileno()
    pending = b""

    def line(timeout):
        """The next line from the debugger, b"" at EOF, None on timeout."""
        nonlocal pending
        while b"\n" not in pending:
            r, _, _ = select.select([fd], [], [], timeout)
            if not r:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return b""
            pending += chunk
        first, pending = pending.split(b"\n", 1)
        return first + b"\n"

    while True:
        cmd = line(None)
        if not cmd or cmd.startswith(b"q"):
            return 0
        if not cmd.startswith(b"a "):
            continue
        delay = max(0.0, float(cmd[2:]))
        got = line(delay)
        if got == b"":
            return 0        # the debugger died while we waited: send nothing
        if got is not None:
            if got.startswith(b"q"):
                return 0
            out.write("c\n")    # cancelled before the signal went out
            out.flush()
            continue
        if os.getppid() != parent:
            return 0        # the debugger is gone
        states = thread_states(pid)
        settle = time.monotonic() + SETTLE_SECONDS
        while "t" in states.values() and time.monotonic() < settle:
            time.sleep(0.0002)
            states = thread_states(pid)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            out.write("x\n")
            out.flush()
            return 0
        out.write("s %s\n" % " ".join("%d:%s" % kv for kv in sorted(states.items())))
        out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
