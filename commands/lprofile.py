"""lprofile: a sampling profiler of a live process's Lua and C stacks."""
import math
import os
import random
import sys
import time

import gdb

from ..gdb_ext.backends.gdbtarget import is_core, remote_connection, syscall_names
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.stack.samples import (DROP_REASONS, NO_LUA, NO_STATE, OFF_CPU, UNREADABLE, SampledStacks,
                                     in_syscall, thread_stack)
from ..gdb_ext.stack.sampling import Timer, on_cpu, process_signal, signal_name
from ..gdb_ext.vm.state import VM
from .base import CommandError, LjCommand, UsageError, get_vm, split_args
from .profnames import FrameNames, frames_of
from .profout import OutputError, Profile, write

MAX_MACHINE_FRAMES = 512


def _signal_settings(name):
    text = gdb.execute("info signals " + name, to_string=True)
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == name and len(f) >= 4:
            return [("stop" if f[1] == "Yes" else "nostop"),
                    ("print" if f[2] == "Yes" else "noprint"),
                    ("pass" if f[3] == "Yes" else "nopass")]
    return ["stop", "print", "pass"]


class _Quiet(object):
    """While lprofile samples, gdb's standard output goes to /dev/null: gdb
    prints each sample's stop ("Program received signal SIGURG" and the
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


def _handle(name, settings):
    gdb.execute("handle %s %s" % (name, " ".join(settings)), to_string=True)


def _forget_stop_signal():
    """The selected thread, stopped by our signal, resumes without it: gdb
    keeps a thread's stop signal and hands it to the program when the
    thread next runs or is detached, if `handle ... pass` holds then (the
    user's setting, restored after the profile)."""
    gdb.execute("queue-signal 0", to_string=True)


class _Stops(object):
    """The last stop event while lprofile resumes the process."""

    def __init__(self, signame):
        self.signame = signame
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
        return isinstance(ev, gdb.SignalEvent) and ev.stop_signal == self.signame

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
running Lua on a CPU: its C frames, and in place of each frame of LuaJIT's
VM the Lua frames that VM entry runs (as lbt names them), then lets it run
on.  At the end the process is stopped where the last sample left it.

A thread is on a CPU when the kernel has it running or runnable at the
sample, also inside a system call (a loop of clock_gettime or writev is
busy); a sleeping thread (blocked in a read, epoll_wait, a lock) is
off-CPU.

Prints a table of functions with their share of the stacks: self (the
innermost frame) and total (anywhere in the stack).  A Lua function is
named by the name its caller called it by (debug.getinfo's) with its chunk
and the line it is defined on, "busy (app.lua:10)", or "function
app.lua:10" without a name; a frame of the folded stacks the same way at
its current line, "busy (app.lua:12)" or "app.lua:12".  The first line says how
many thread samples were kept and why the others were not.

  --seconds N    how long to sample (default 5)
  --hz H         samples a second (default 50, at most 1000)
  --pprof FILE   write the profile as pprof's gzipped profile.proto (Lua
                 functions with their chunk and lines): go tool pprof
                 reads it
  --folded FILE  write the stacks folded, outermost frame first, one line
                 per distinct stack with its count: what FlameGraph,
                 inferno and speedscope read
  --off-cpu      count sleeping threads too, with the system call they
                 wait in as the innermost frame
                 ("...;[builtin#io.method.read];read")
  --top K        rows of the table (default 25)
  L=<expr>, G=<expr>  the VM to sample (default: the one the stack frames
                 name, else the one a search of memory finds)

The process is stopped by a signal that would do nothing if it reached
it (SIGURG or SIGWINCH, ignored by default, where the program does not
catch them; else one the program ignores); gdb keeps it from the program
and forgets it after each sample, so nothing of lprofile's is left when it
returns, is interrupted, or gdb detaches or dies.  Needs a live process on
this machine; a core has no time to sample.

Usage: lprofile [--seconds N] [--hz H] [--folded FILE] [--pprof FILE] [--off-cpu] [--top K] [L=<lua_State *>]
Example:
  (gdb) lprofile --seconds 10 --folded /tmp/app.folded"""

    NAME = "lprofile"
    SUMMARY = "sample the live process's Lua and C stacks: a top table and folded stacks"
    WORDS = ("--seconds", "--hz", "--folded", "--pprof", "--off-cpu", "--top")
    USAGE = ("lprofile [--seconds N] [--hz H] [--folded FILE] [--pprof FILE] [--off-cpu] [--top K] "
             "[L=<lua_State *>]")

    def run(self, arg, from_tty):
        return self.lines(self.data(arg))

    def run_json(self, arg, from_tty):
        """The profile: its figures, "dropped" (thread samples not kept, by
        reason), "top" (every function, most self first), "stacks"
        (outermost frame first, with counts), "note"."""
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg, flags=("off-cpu",),
                                              options=("seconds", "hz", "folded", "pprof", "top"))
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        seconds = _number(opts, "seconds", 5.0, 0.01, 86400)
        hz = _number(opts, "hz", 50.0, 0.1, 1000)
        top = int(_number(opts, "top", 25, 1, 100000))
        files = {}
        for what in ("folded", "pprof"):
            path = opts.get(what)
            if path is not None:
                path = os.path.expanduser(path)
                d = os.path.dirname(os.path.abspath(path))
                if not os.path.isdir(d):
                    raise UsageError("--%s %s: no directory %s" % (what, path, d))
                files[what] = path
        folded = files.get("folded")
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
        signo = process_signal(inf.pid)
        names = FrameNames({vm.G: vm}, syscall_names())
        prof, stats, note = self.sample(vm, inf, signo, seconds, hz, "off-cpu" in flags, names)
        doc = self.report(names, prof, stats, note, folded, top, hz)
        if "pprof" in files:
            try:
                write(Profile(frames_of(prof.stacks, names), rate_hz=hz, duration_s=doc["seconds"],
                              name="lprofile"), files["pprof"], "pprof")
            except OutputError as e:
                raise CommandError("lprofile: --pprof: %s" % e)
            doc["pprof_file"] = files["pprof"]
        return doc

    def sample(self, vm, inf, signo, seconds, hz, off_cpu, names):
        prof = SampledStacks()
        t, lay, G = vm.t, vm.lay, vm.G
        arch = getattr(t, "arch", "x86_64")
        signame = signal_name(signo)
        saved = _signal_settings(signame)
        selected = gdb.selected_thread()
        note = None
        costs = []
        _handle(signame, ["stop", "print", "nopass"])   # (noprint would imply nostop)
        timer = Timer(inf.pid, signo)
        period = 1.0 / hz
        # What the VM's machine code says (gdb_ext.stack.vmstack) holds for the
        # whole run: kept from sample to sample.
        code = {}               # caches every sample's VM shares (VM code facts)
        start = time.monotonic()
        deadline = start
        ours = False            # the selected thread holds our signal as its stop signal
        try:
            with _Stops(signame) as stops, _Quiet():
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
                            note += ("; the %s it had been sent is still on its way to it, and "
                                     "does nothing there (the program neither catches nor "
                                     "blocks it everywhere)" % signame)
                        break
                    ours = True
                    _forget_stop_signal()
                    ours = False
                    states = timer.fired()
                    t0 = time.monotonic()
                    self.one_sample(prof, t, lay, G, inf, arch, off_cpu, code, states or {},
                                    names)
                    costs.append(time.monotonic() - t0)
        finally:
            if ours and inf.is_valid() and inf.pid:
                _forget_stop_signal()
            timer.cancel()
            timer.close()
            if inf.is_valid() and inf.pid:
                _handle(signame, saved)
            if selected is not None and selected.is_valid():
                selected.switch()
        wall = time.monotonic() - start
        return prof, (costs, wall, signame), note

    def one_sample(self, prof, t, lay, G, inf, arch, off_cpu, code, states, names):
        prof.samples += 1
        t.clear_cache()

        for th in inf.threads():
            if not th.is_valid():
                continue
            cpu = on_cpu(states.get(th.ptid[1]))
            if cpu is None:
                prof.drop(NO_STATE)
                continue
            if not cpu and not off_cpu:
                prof.drop(OFF_CPU)
                continue
            th.switch()
            try:
                mframes = t.machine_frames(MAX_MACHINE_FRAMES)
                if not mframes:
                    prof.drop(UNREADABLE)
                    continue
                vm = VM(t, lay, G, mframes=mframes, caches=code)
                keys = thread_stack(vm, mframes)
                if keys is None:
                    prof.drop(NO_LUA)
                    continue
                if not cpu:
                    sc = in_syscall(mframes[0], arch)
                    if sc is not None:
                        keys.insert(0, ("S", sc))
                names.learn(keys)
            except (FaultError, CorruptError, gdb.error):
                prof.drop(UNREADABLE)
                continue
            prof.add(keys)

    def report(self, fmt, prof, stats, note, folded, top, hz):
        """The profile's document; writes the folded stacks to `folded`."""
        costs, wall, signame = stats
        n = prof.threads
        doc = {"samples": prof.samples, "seconds": wall, "hz": hz, "thread_stacks": n,
               "dropped": dict(prof.dropped), "signal": signame,
               "sample_ms": {"mean": 1000.0 * sum(costs) / len(costs) if costs else 0.0,
                             "max": 1000.0 * max(costs) if costs else 0.0},
               "top": [{"function": fmt.function(fk), "self": s, "total": tot,
                        "self_percent": 100.0 * s / n, "total_percent": 100.0 * tot / n}
                       for fk, s, tot in prof.top()],
               "rows": top,
               "stacks": [{"frames": list(frames), "count": c}
                          for frames, c in sorted(_by_text(prof, fmt).items(),
                                                  key=lambda e: (-e[1], e[0]))],
               "folded_file": folded, "note": note}
        if folded is not None:
            profile = Profile([(tuple(st["frames"]), st["count"]) for st in doc["stacks"]],
                              rate_hz=hz, duration_s=wall, name="lprofile")
            try:
                write(profile, folded, "folded")
            except OutputError as e:
                raise CommandError("lprofile: --folded: %s" % e)
        return doc

    @staticmethod
    def lines(doc):
        n = doc["thread_stacks"]
        dropped = doc["dropped"]
        out = ["lprofile: %d samples in %.1f s (%.4g a second asked), %d thread stacks with "
               "Lua kept; a sample took %.2f ms on average, %.2f ms at most"
               % (doc["samples"], doc["seconds"], doc["hz"], n,
                  doc["sample_ms"]["mean"], doc["sample_ms"]["max"])]
        out.append("lprofile: not kept: %s" % _drop_text(dropped))
        if n:
            # One standard error of a share p from n stacks, at its widest (p = 1/2).
            out.append("lprofile: a share from %d stacks is good to about %.1f points "
                       "(one standard error at most)" % (n, 50.0 / math.sqrt(n)))
        if n < doc["samples"] / 2.0:
            out.append("lprofile: warning: fewer Lua stacks than half the samples (%d of %d): "
                       "the shares below rest on few stacks; see what was not kept above"
                       % (n, doc["samples"]))
        top = doc["rows"]
        if n:
            out.append("%7s %7s  %s" % ("self", "total", "function"))
            for r in doc["top"][:top]:
                out.append("%6.1f%% %6.1f%%  %s" % (r["self_percent"], r["total_percent"],
                                                    r["function"]))
            if len(doc["top"]) > top:
                out.append("... %d more functions (--top)" % (len(doc["top"]) - top))
        else:
            out.append("no thread ran Lua on a CPU in any sample")
        if doc["folded_file"] is not None:
            out.append("folded stacks: %s (%d distinct stacks)" % (doc["folded_file"],
                                                                   len(doc["stacks"])))
        if doc.get("pprof_file"):
            out.append("pprof profile: %s (go tool pprof -top %s)"
                       % (doc["pprof_file"], doc["pprof_file"]))
        if doc["note"]:
            out.append("lprofile: " + doc["note"])
        return out


_DROP_WORDS = {NO_LUA: "%d thread samples ran no Lua",
               OFF_CPU: "%d thread samples were off-CPU (sleeping; --off-cpu keeps them)",
               UNREADABLE: "%d thread samples had a stack that could not be read",
               NO_STATE: "%d thread samples had no scheduling state of their own (born "
                         "after the timer looked, or still held by the debugger)"}


def _drop_text(dropped):
    parts = [_DROP_WORDS[r] % dropped[r] for r in DROP_REASONS if dropped.get(r)]
    return "; ".join(parts) if parts else "none (every thread sample was kept)"


def _by_text(prof, fmt):
    """The profile's stacks by their frames' text, counts summed: two
    stacks differ by a frame's pc (a C function at two call sites) and
    read the same, and a folded file has one line a stack."""
    out = {}
    for stack, c in prof.stacks.items():
        frames = tuple(fmt.frame(k) for k in stack)
        out[frames] = out.get(frames, 0) + c
    return out


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
