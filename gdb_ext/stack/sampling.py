"""How the sampling profiler stops a live process without harming it, and
what the kernel says of each thread at a sample.

The stop: a signal sent by a timer process (sampletimer.py) that the
debugger intercepts and does not pass on.  The signal is chosen so that it
would do nothing if it ever reached the program (a debugger killed while a
signal is in flight, or a program that changed its handlers): one the
program neither catches nor blocks in every thread, whose default action
is to ignore it (SIGURG, SIGWINCH) or that the program ignores itself.

On or off a CPU: the thread's scheduling state (/proc/PID/task/TID/stat)
read just before the signal is sent.  A thread running, or runnable, is
on-CPU even inside a system call (a loop of clock_gettime calls); one
sleeping (S) or in uninterruptible wait (D) is off-CPU.
"""
from typing import Dict, Iterable, Optional
import os
import subprocess
import sys

from ..errors import LjError
from .signature import signal_text

SIGCHLD, SIGURG, SIGWINCH = 17, 23, 28
# Default action "ignore" (signal(7)); SIGCONT is left out: it resumes a
# stopped process and flushes stop signals the debugger's own stops use.
DEFAULT_IGNORED = (SIGURG, SIGWINCH, SIGCHLD)
# Never used, even where ignored: the debugger's and the job control's own.
# INT TRAP KILL CONT STOP TSTP TTIN TTOU, glibc's:
NEVER = frozenset((2, 5, 9, 18, 19, 20, 21, 22, 32, 33))
# Scheduling states that are on a CPU (running or waiting for one).
ON_CPU = frozenset("R")
TIMER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sampletimer.py")


class SamplingError(LjError):
    """The process cannot be sampled safely; the message says why."""


def signal_name(signo: int) -> str:
    """gdb's and the kernel's name of a signal number (SIG34 ... SIG64 for
    the real-time ones, as gdb names them)."""
    return signal_text(signo) or "SIG%d" % signo


def _mask(status_text, field):
    for line in status_text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1].strip(), 16)
    return None


def choose_signal(status_text: str, thread_status_texts: Iterable[str]) -> int:
    """The signal to stop the process with, from the text of
    /proc/PID/status and of each /proc/PID/task/TID/status: a signal it
    neither catches nor blocks in every thread, harmless if delivered
    (ignored by default and not caught, or ignored by the program).
    Raises SamplingError when there is none."""
    caught = _mask(status_text, "SigCgt")
    ignored = _mask(status_text, "SigIgn")
    if caught is None or ignored is None:
        raise SamplingError("the process's signal dispositions are unreadable (no SigCgt/SigIgn "
                            "in /proc/PID/status): lprofile cannot pick a signal that is safe "
                            "for it")
    blocked_everywhere = ~0
    for text in thread_status_texts:
        b = _mask(text, "SigBlk")
        if b is not None:
            blocked_everywhere &= b
    if not thread_status_texts:
        blocked_everywhere = 0

    def bit(s):
        return 1 << (s - 1)

    def usable(s):
        return s not in NEVER and not caught & bit(s) and not blocked_everywhere & bit(s)

    for s in DEFAULT_IGNORED[:2]:
        if usable(s):
            return s
    for s in range(1, 65):
        if ignored & bit(s) and usable(s):
            return s
    if usable(SIGCHLD):
        return SIGCHLD
    raise SamplingError(
        "the process catches or blocks every signal lprofile could stop it with harmlessly "
        "(SIGURG, SIGWINCH, SIGCHLD and those it ignores): sampling with another could run its "
        "handler or kill it; nothing was sampled")


def process_signal(pid: int) -> int:
    """choose_signal for a live process, read from /proc."""
    try:
        with open("/proc/%d/status" % pid) as f:
            status = f.read()
    except OSError as e:
        raise SamplingError("cannot read /proc/%d/status (%s): lprofile needs the process on "
                            "this machine" % (pid, e.strerror))
    threads = []
    base = "/proc/%d/task" % pid
    try:
        tids = os.listdir(base)
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(os.path.join(base, tid, "status")) as f:
                threads.append(f.read())
        except OSError:
            pass
    return choose_signal(status, threads)


def parse_states(answer: str) -> Dict[int, str]:
    """The timer's "s TID:STATE ..." line -> {tid: state letter}."""
    out = {}
    for word in answer.split()[1:]:
        tid, _, st = word.partition(":")
        if tid.isdigit() and st:
            out[int(tid)] = st
    return out


def on_cpu(state: Optional[str]) -> Optional[bool]:
    """True when a thread in this scheduling state was on a CPU (or
    runnable), False when it slept or was stopped, None when its state is
    unknown or is the debugger's (tracing stop 't': held from the last
    sample)."""
    if not state or state == "t":
        return None
    return state in ON_CPU


class Timer(object):
    """The timer process (sampletimer.py) for one profile of pid: arm()
    it, and after the stop its signal caused, fired() gives the threads'
    states; cancel() says whether a signal went out after all."""

    def __init__(self, pid: int, signo: int) -> None:
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        # Its own session: a Ctrl-C at the debugger's terminal does not
        # reach it, and the debugger's death does not take it unawares.
        self.p = subprocess.Popen([python, TIMER_SCRIPT, str(pid), str(signo)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        self.armed = False

    def arm(self, delay: float) -> None:
        self.p.stdin.write(("a %.6f\n" % delay).encode())
        self.p.stdin.flush()
        self.armed = True

    def _answer(self):
        self.armed = False
        return self.p.stdout.readline().decode("ascii", "replace")

    def fired(self) -> Optional[Dict[int, str]]:
        """After the stop of our signal: {tid: state} read just before it
        was sent (None when the timer did not send it)."""
        if not self.armed:
            return None
        a = self._answer()
        return parse_states(a) if a.startswith("s") else None

    def cancel(self) -> bool:
        """Call off an armed wait: True when the signal had gone out before
        the cancel (the caller has a signal of ours to account for)."""
        if not self.armed:
            return False
        try:
            self.p.stdin.write(b"c\n")
            self.p.stdin.flush()
        except OSError:
            self.armed = False
            return False
        return self._answer().startswith("s")

    def close(self) -> None:
        try:
            self.p.stdin.write(b"q\n")
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
