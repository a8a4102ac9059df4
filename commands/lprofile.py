"""lprofile: a sampling profiler of a live process's Lua and C stacks."""
import os
import random
import subprocess
import sys
import time

import gdb

from ..gdb_ext.gdbtarget import is_core, remote_connection, syscall_names
from ..gdb_ext.profile import Profile, in_syscall, thread_stack
from ..gdb_ext.state import VM
from .base import LjCommand, UsageError, get_vm, split_args
from .lbt import BtFormat

# The signal that stops the process for a sample: a real-time one, which
# programs rarely use; gdb keeps it from the program (handle ... nopass)
# while lprofile runs and restores the user's settings after.
SAMPLE_SIGNAL = 63
SAMPLE_SIGNAL_NAME = "SIG63"
MAX_MACHINE_FRAMES = 512

# Sleeps, then signals the process, once per line it reads (the delay);
# writes a line back after each signal.  A process apart from gdb, whose
# Python holds its lock while the program runs; real-time scheduled where
# the system lets it (as root), so that it is not late.
_TIMER = r"""
import os, sys, time
pid, sig = int(sys.argv[1]), int(sys.argv[2])
try:
    # Wake on time even while the program keeps every CPU busy: a timer
    # that waits for a CPU would sample busy code late, after it.
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
except (AttributeError, OSError):
    pass
for line in sys.stdin:
    time.sleep(max(0.0, float(line)))
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        break
    sys.stdout.write("s\n")
    sys.stdout.flush()
"""


class _Timer(object):
    def __init__(self, pid):
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        self.p = subprocess.Popen([python, "-c", _TIMER, str(pid), str(SAMPLE_SIGNAL)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)

    def arm(self, delay):
        self.p.stdin.write(("%.6f\n" % delay).encode())
        self.p.stdin.flush()

    def fired(self):
        """Wait for the timer's word that it signalled."""
        return self.p.stdout.readline() == b"s\n"

    def cancel(self):
        """Stop the timer; True when it had already sent a signal that no
        stop has reported (the signal is pending in the process)."""
        self.p.kill()
        self.p.wait()
        rest = self.p.stdout.read()
        return b"s" in rest


def _signal_settings():
    text = gdb.execute("info signals " + SAMPLE_SIGNAL_NAME, to_string=True)
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == SAMPLE_SIGNAL_NAME and len(f) >= 4:
            return [("stop" if f[1] == "Yes" else "nostop"),
                    ("print" if f[2] == "Yes" else "noprint"),
                    ("pass" if f[3] == "Yes" else "nopass")]
    return ["stop", "print", "pass"]


class _Quiet(object):
    """While lprofile samples, gdb's standard output goes to /dev/null: gdb
    prints each sample's stop ("Program received signal SIG63" and the
    frame) straight to its terminal, past any capture or logging
    redirection.  gdb's buffered output is flushed at each switch."""

    def __enter__(self):
        self.saved = None
        try:
            gdb.flush()
            sys.stdout.flush()
            self.saved = os.dup(1)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)
        except OSError:
            self.saved = None
        return self

    def __exit__(self, *a):
        if self.saved is None:
            return
        gdb.flush()
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)


def _handle(settings):
    gdb.execute("handle %s %s" % (SAMPLE_SIGNAL_NAME, " ".join(settings)), to_string=True)


class _Stops(object):
    """The last stop event while lprofile resumes the process."""

    def __init__(self):
        self.event = None
        self.exited = None

    def on_stop(self, ev):
        self.event = ev

    def on_exit(self, ev):
        self.exited = ev

    def __enter__(self):
        gdb.events.stop.connect(self.on_stop)
        gdb.events.exited.connect(self.on_exit)
        return self

    def __exit__(self, *a):
        gdb.events.stop.disconnect(self.on_stop)
        gdb.events.exited.disconnect(self.on_exit)

    def ours(self):
        ev = self.event
        return isinstance(ev, gdb.SignalEvent) and ev.stop_signal == SAMPLE_SIGNAL_NAME

    def why(self):
        if self.exited is not None:
            code = getattr(self.exited, "exit_code", None)
            return "the process exited%s" % ("" if code is None else " (code %d)" % code)
        ev = self.event
        if isinstance(ev, gdb.BreakpointEvent):
            return "it stopped at breakpoint %d" % ev.breakpoints[0].number
        if isinstance(ev, gdb.SignalEvent):
            return "it received %s" % ev.stop_signal
        return "it stopped"


class LProfile(LjCommand):
    """Sample a live process's Lua and C stacks: a profile.

Stops the process HZ times a second (at jittered moments, so that no loop
keeps step with the samples) for SECONDS, takes the stack of each thread
running Lua: its C frames, and in place of each frame of LuaJIT's VM the Lua
frames that VM entry runs (as lbt names them), then lets it run on.  At the
end the process is stopped where the last sample left it.

Prints a table of functions with their share of the stacks: self (the
innermost frame) and total (anywhere in the stack).  A Lua function is
named by its chunk and the line it is defined on.

  --seconds N    how long to sample (default 5)
  --hz H         samples a second (default 50, at most 1000)
  --folded FILE  write the stacks folded, outermost frame first, one line
                 per distinct stack with its count: what FlameGraph,
                 inferno and speedscope read
  --off-cpu      count threads stopped in a system call too, with the call
                 as the innermost frame ("...;[builtin#io.method.read];read");
                 without it only threads in user code count
  --top K        rows of the table (default 25)

The process runs between samples; gdb keeps the sampling signal (SIG63)
from it.  Needs a live process; a core has no time to sample.

Usage: lprofile [--seconds N] [--hz H] [--folded FILE] [--off-cpu] [--top K]
Example:
  (gdb) lprofile --seconds 10 --folded /tmp/app.folded"""

    NAME = "lprofile"
    SUMMARY = "sample the live process's Lua and C stacks: a top table and folded stacks"
    WORDS = ("--seconds", "--hz", "--folded", "--off-cpu", "--top")
    USAGE = "lprofile [--seconds N] [--hz H] [--folded FILE] [--off-cpu] [--top K] [G=<expr>]"

    def run(self, arg, from_tty):
        return self.lines(self.data(arg))

    def run_json(self, arg, from_tty):
        """The profile: its figures, "top" (every function, most self
        first), "stacks" (outermost frame first, with counts), "note"."""
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg, flags=("off-cpu",),
                                              options=("seconds", "hz", "folded", "top"))
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        seconds = _number(opts, "seconds", 5.0, 0.01, 86400)
        hz = _number(opts, "hz", 50.0, 0.1, 1000)
        top = int(_number(opts, "top", 25, 1, 100000))
        folded = opts.get("folded")
        if folded is not None:
            folded = os.path.expanduser(folded)
            d = os.path.dirname(os.path.abspath(folded))
            if not os.path.isdir(d):
                raise UsageError("--folded %s: no directory %s" % (folded, d))
        if is_core():
            raise UsageError("a core file is one moment: lprofile samples a running process "
                             "(gdb -p PID); lbt --all --folded gives the core's stacks")
        remote = remote_connection()
        if remote:
            # (qemu-user's stub reports process id 1: a signal sent there
            # would go to this machine's init)
            raise UsageError("over a %s stub (qemu-user, gdbserver) the process id gdb has "
                             "is none of this machine's, and sampling signals it: nothing was "
                             "sampled; run lprofile where the process runs, or take "
                             "lbt --folded at stops" % remote)
        vm = get_vm(state)
        inf = gdb.selected_inferior()
        if not inf.pid:
            raise UsageError("no live process: start or attach to one first")
        prof, stats, note = self.sample(vm, inf, seconds, hz, "off-cpu" in flags)
        return self.report(vm, prof, stats, note, folded, top, hz)

    def sample(self, vm, inf, seconds, hz, off_cpu):
        prof = Profile()
        t, lay, G = vm.t, vm.lay, vm.G
        arch = getattr(t, "arch", "x86_64")
        saved = _signal_settings()
        selected = gdb.selected_thread()
        note = None
        costs = []
        _handle(["stop", "print", "nopass"])   # (noprint would imply nostop)
        timer = _Timer(inf.pid)
        period = 1.0 / hz
        # What the VM's machine code says (gdb_ext.vmstack) holds for the
        # whole run: kept from sample to sample.
        code = {}               # caches every sample's VM shares (VM code facts)
        start = time.monotonic()
        deadline = start
        try:
            with _Stops() as stops, _Quiet():
                while True:
                    deadline += period * random.uniform(0.5, 1.5)
                    if deadline - start > seconds:
                        break
                    timer.arm(deadline - time.monotonic())
                    stops.event = None
                    gdb.execute("continue", to_string=True)
                    if not stops.ours():
                        note = "sampling ended early: %s" % stops.why()
                        if timer.cancel() and stops.exited is None:
                            note += ("; the sampling signal it had sent is pending in the "
                                     "process, and gdb will discard it (handle %s nopass) "
                                     "when it arrives" % SAMPLE_SIGNAL_NAME)
                            saved[2] = "nopass"
                        timer = None
                        break
                    timer.fired()
                    t0 = time.monotonic()
                    self.one_sample(prof, t, lay, G, inf, arch, off_cpu, code)
                    costs.append(time.monotonic() - t0)
        finally:
            if timer is not None:
                timer.cancel()
            if inf.is_valid() and inf.pid:
                _handle(saved)
            if selected is not None and selected.is_valid():
                selected.switch()
        wall = time.monotonic() - start
        return prof, (costs, wall), note

    def one_sample(self, prof, t, lay, G, inf, arch, off_cpu, code):
        prof.samples += 1
        t.clear_cache()

        for th in inf.threads():
            if not th.is_valid():
                continue
            th.switch()
            mframes = t.machine_frames(MAX_MACHINE_FRAMES)
            if not mframes:
                continue
            vm = VM(t, lay, G, mframes=mframes, caches=code)
            keys = thread_stack(vm, mframes)
            if keys is None:
                continue
            sc = in_syscall(mframes[0], arch)
            if sc is not None:
                if not off_cpu:
                    continue
                keys.insert(0, ("S", sc))
            prof.add(keys)

    def report(self, vm, prof, stats, note, folded, top, hz):
        """The profile's document; writes the folded stacks to `folded`."""
        costs, wall = stats
        fmt = _Texts(vm)
        n = prof.threads
        doc = {"samples": prof.samples, "seconds": wall, "hz": hz, "thread_stacks": n,
               "sample_ms": {"mean": 1000.0 * sum(costs) / len(costs) if costs else 0.0,
                             "max": 1000.0 * max(costs) if costs else 0.0},
               "top": [{"function": fmt.function(fk), "self": s, "total": tot,
                        "self_percent": 100.0 * s / n, "total_percent": 100.0 * tot / n}
                       for fk, s, tot in prof.top()],
               "rows": top,
               "stacks": [{"frames": list(frames), "count": c}
                          for frames, c in sorted(_by_text(prof, fmt).items(),
                                                  key=lambda e: -e[1])],
               "folded_file": folded, "note": note}
        if folded is not None:
            with open(folded, "w") as f:
                f.write("".join("%s %d\n" % (";".join(t.replace(";", ",") for t in st["frames"]),
                                              st["count"]) for st in doc["stacks"]))
        return doc

    @staticmethod
    def lines(doc):
        out = ["lprofile: %d samples in %.1f s (%.4g a second asked), %d thread stacks with "
               "Lua; a sample took %.2f ms on average, %.2f ms at most"
               % (doc["samples"], doc["seconds"], doc["hz"], doc["thread_stacks"],
                  doc["sample_ms"]["mean"], doc["sample_ms"]["max"])]
        top = doc["rows"]
        if doc["thread_stacks"]:
            out.append("%7s %7s  %s" % ("self", "total", "function"))
            for r in doc["top"][:top]:
                out.append("%6.1f%% %6.1f%%  %s" % (r["self_percent"], r["total_percent"],
                                                    r["function"]))
            if len(doc["top"]) > top:
                out.append("... %d more functions (--top)" % (len(doc["top"]) - top))
        else:
            out.append("no thread ran Lua in any sample")
        if doc["folded_file"] is not None:
            out.append("folded stacks: %s (%d distinct stacks)" % (doc["folded_file"],
                                                                   len(doc["stacks"])))
        if doc["note"]:
            out.append("lprofile: " + doc["note"])
        return out


def _by_text(prof, fmt):
    """The profile's stacks by their frames' text, counts summed: two
    stacks differ by a frame's pc (a C function at two call sites) and
    read the same, and a folded file has one line a stack."""
    out = {}
    for stack, c in prof.stacks.items():
        frames = tuple(fmt.frame(k) for k in stack)
        out[frames] = out.get(frames, 0) + c
    return out


class _Texts(object):
    """Names of frame keys and function keys."""

    def __init__(self, vm):
        self.bt = BtFormat(vm)
        self.vm = vm
        self.syscalls = syscall_names()

    def frame(self, k):
        if k[0] == "M":
            return k[1] or "??"
        if k[0] == "S":
            return self.syscalls.get(k[1], "syscall %d" % k[1])
        return self.bt.key_text(k)

    def function(self, fk):
        if fk[0] == "LF":
            from ..gdb_ext.protoinfo import cached_proto
            from .format import chunk_display
            pt = cached_proto(self.vm, fk[1])
            return "function %s:%d" % (chunk_display(pt.chunk(self.vm)), pt.firstline)
        if fk[0] == "M":
            return fk[1] or "?? (0x%x)" % fk[2]
        return self.frame(fk)


def _number(opts, name, default, lo, hi):
    if name not in opts:
        return default
    try:
        v = float(opts[name])
    except ValueError:
        raise UsageError("--%s wants a number, not '%s'" % (name, opts[name]))
    if not lo <= v <= hi:
        raise UsageError("--%s must be between %g and %g" % (name, lo, hi))
    return v
