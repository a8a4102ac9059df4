"""python3 -m ljgdb record --pid PID ... and python3 -m ljgdb top --pid PID:
a sampling profiler of a running process's Lua stacks without gdb (py-spy
record's and top's shape), on the engine's recorder
(gdb_ext.stack.recorder: each sample holds the process only while it
copies registers, C stacks and the VM's state; the decoding happens while
it runs)."""
import os
import random
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..gdb_ext.errors import LjError
from ..gdb_ext.stack.samples import DROP_REASONS
from .profnames import FrameNames, frames_of

RECORD_USAGE = ("python3 -m ljgdb record --pid PID [--rate HZ] [--duration S] "
                "[--format flamegraph|folded|speedscope|pprof] -o FILE [--sampler bpf|ptrace] "
                "[--children] [--idle] [--native] [--nonblocking]")
TOP_USAGE = ("python3 -m ljgdb top --pid PID [--rate HZ] [--duration S] [--sampler bpf|ptrace] "
             "[--children] [--idle] [--native] [--nonblocking]")
SAMPLERS = ("bpf", "ptrace")
# How often the BPF sampler's ring buffer is read (seconds): first after
# BPF_FIRST (a sample of a thread not yet decoded lacks the lua_States only
# its walk finds: the sooner one is decoded, the fewer), then at least
# BPF_POLL, then as seldom as its fill allows, up to BPF_POLL_MAX
# (BpfSampler.next_wait); with --idle every BPF_POLL (the sleepers are read
# then).
BPF_FIRST = 0.01
BPF_POLL = 0.05
BPF_POLL_MAX = 0.25
FORMATS = ("flamegraph", "folded", "speedscope", "pprof")
FLAGS = ("--idle", "--native", "--nonblocking", "--children")
# A median wait for the stop above this (seconds), or a share of the stacks
# kept from threads that waited for a CPU above this, gets a warning.
LATE_STOP = 0.001
# Stops made in one call of the C sampler, decoded together after the last
# (Recorder.sample_batch): as many as BATCH_SECONDS hold, at most MAX_BATCH.
BATCH_SECONDS = 0.1
MAX_BATCH = 10
WAITING_SHARE = 0.2
SYSCALL_TABLES = {"x86_64": "amd64-linux.xml", "aarch64": "aarch64-linux.xml"}


def parse(argv: Sequence[str], record: bool) -> Dict[str, Any]:
    """The options of record (record true) or top; ValueError with the line
    that says what is wrong."""
    opts = {"pid": None, "pids": [], "children": False, "rate": 100.0, "duration": None,
            "format": "flamegraph", "output": None,
            "idle": False, "native": False, "nonblocking": False, "sampler": None}
    args = list(argv)
    valued = {"--pid": "pid", "--rate": "rate", "-r": "rate", "--duration": "duration",
              "-d": "duration", "--sampler": "sampler"}
    if record:
        valued.update({"--format": "format", "-f": "format", "--output": "output", "-o": "output"})
    while args:
        a = args.pop(0)
        name, eq, val = a.partition("=")
        if name in valued and name.startswith("--") or a in valued:
            key = valued[name if eq else a]
            if not eq:
                if not args:
                    raise ValueError("%s needs a value" % a)
                val = args.pop(0)
            opts[key] = val
            if key == "pid":
                opts["pids"].append(val)
        elif a in FLAGS:
            opts[a[2:]] = True
        else:
            raise ValueError("'%s' is not an option of %s" % (a, "record" if record else "top"))
    if not opts["pids"]:
        raise ValueError("give --pid PID")
    for pid in opts["pids"]:
        if not str(pid).isdigit() or int(pid) < 1:
            raise ValueError("--pid takes a process id, not '%s'" % pid)
    opts["pids"] = list(dict.fromkeys(int(p) for p in opts["pids"]))
    opts["pid"] = opts["pids"][0]
    opts["rate"] = _number("--rate", opts["rate"], 0.1, 10000)
    if opts["sampler"] is not None and opts["sampler"] not in SAMPLERS:
        raise ValueError("--sampler is bpf or ptrace, not '%s'" % opts["sampler"])
    if opts["sampler"] == "bpf" and opts["nonblocking"]:
        raise ValueError("--nonblocking is a sampler of its own: leave --sampler out")
    if opts["duration"] is not None:
        opts["duration"] = _number("--duration", opts["duration"], 0.01, 1e7)
    if record:
        if opts["format"] not in FORMATS:
            raise ValueError("--format is one of %s, not '%s'" % (", ".join(FORMATS), opts["format"]))
        if not opts["output"]:
            raise ValueError("give -o FILE, the file to write")
        d = os.path.dirname(os.path.abspath(opts["output"]))
        if not os.path.isdir(d):
            raise ValueError("-o %s: no directory %s" % (opts["output"], d))
    return opts


def _number(name: str, text: Any, lo: float, hi: float) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError("%s wants a number, not '%s'" % (name, text))
    if not lo <= v <= hi:
        raise ValueError("%s must be between %g and %g" % (name, lo, hi))
    return v


def syscall_names(arch: str) -> Dict[int, str]:
    """System call number -> name from gdb's tables where gdb is installed
    (its data directory's syscalls/*.xml), else {}."""
    import re
    fname = SYSCALL_TABLES.get(arch)
    for d in ("/usr/share/gdb/syscalls", "/usr/local/share/gdb/syscalls"):
        try:
            with open(os.path.join(d, fname or "")) as f:
                return {int(m.group(2)): m.group(1)
                        for m in re.finditer(r'<syscall name="([^"]+)" number="(\d+)"', f.read())}
        except OSError:
            continue
    return {}


class Part(object):
    """One process of a Session: its LiveProcess, Recorder and frame names;
    added to the BPF sampler (bpf) when there is one.  LjError: not a
    process with a Lua VM."""

    def __init__(self, pid: int, opts: Dict[str, Any], bpf: Any) -> None:
        from ..gdb_ext.backends.live import open_process, sampling_target
        from ..gdb_ext.stack.recorder import CSTACK, MAX_LUA_STACK, RED_ZONE, Recorder
        from ..gdb_ext.vm.state import VM
        from ..gdb_ext.backends import bpfsample
        self.pid = pid
        self.proc = proc = open_process(pid)
        # (the BPF sampler never stops the process, not even to find its VMs)
        t, lay, Gs = sampling_target(proc, stop=bpf is None)
        if not Gs:
            proc.close()
            raise LjError("process %d has LuaJIT loaded but no Lua VM (lua_State) was found in "
                          "its memory: nothing to sample" % pid)
        self.rec = Recorder(proc, t, lay, Gs, idle=opts["idle"], native=opts["native"],
                            nonblocking=opts["nonblocking"])
        self.names = FrameNames({G: VM(t, lay, G, caches=self.rec.caches[G]) for G in Gs},
                                syscall_names(proc.arch.name))
        self.ended = False
        self.idle_at = None
        if bpf is not None:
            self.rec.prepare()
            bpf.add(pid, bpfsample.vm_conf(lay, Gs, proc.arch.name, RED_ZONE, CSTACK,
                                           MAX_LUA_STACK))

    def root(self) -> Any:
        """The root frame of this process's stacks in a profile of several."""
        from ..gdb_ext.backends.live import comm
        from .profout import Frame
        name = "process %d (%s)" % (self.pid, comm(self.pid))
        return Frame(name, None, None, name)


class Session(object):
    """A LiveProcess being sampled: opened, its VMs found at one stop, then
    one Recorder.sample() a period (jittered) until the duration, a
    Ctrl-C (SIGINT or SIGTERM) or the process's end."""

    def __init__(self, opts: Dict[str, Any]) -> None:
        from ..gdb_ext.backends import bpfsample
        from ..gdb_ext.backends.live import children
        self.opts = opts
        loader, self.note = bpfsample.choose(opts["sampler"], opts["nonblocking"])
        # (made now: it holds the loaded object, closed on any error below)
        self.bpf = bpfsample.BpfSampler(opts["rate"], loader) if loader else None
        pids = list(opts["pids"])
        kids = children(pids) if opts["children"] else []
        if len(pids) + len(kids) > 1 and self.bpf is None:
            raise LjError("several processes are sampled by the BPF sampler only (%s)"
                          % (self.note or "--sampler ptrace stops one process at a time"))
        self.parts = []
        self.skipped = []
        try:
            for pid in pids + kids:
                try:
                    self.parts.append(Part(pid, opts, self.bpf))
                except LjError as e:
                    if pid in pids:
                        raise
                    self.skipped.append("process %d (a child): %s" % (pid, e))
        except LjError:
            if self.bpf is not None:
                self.bpf.close()
            raise
        self.proc, self.rec, self.names = self.parts[0].proc, self.parts[0].rec, \
            self.parts[0].names
        self.pauses = []
        self.waits = []
        self.errors = 0
        self.last_error = None
        self.ended = None
        self.gone = []
        self.stop_asked = False

    def run(self, on_sample=None) -> None:
        """Sample until the end; on_sample(session) after each sample."""
        rate = self.opts["rate"]
        duration = self.opts["duration"]
        period = 1.0 / rate
        start = self.start = time.monotonic()
        old = {s: signal.signal(s, self._ask_stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            if self.bpf is not None:
                self._loop_bpf(start, duration, on_sample)
            else:
                with self.proc.sigchld_blocked():
                    self._loop(start, period, duration, on_sample)
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self.wall = time.monotonic() - start
            if self.bpf is not None:
                self.bpf.close()
            for part in self.parts:
                part.rec.finish()
                part.proc.close()

    def _loop(self, start, period, duration, on_sample):
        batch = max(1, min(MAX_BATCH, int(BATCH_SECONDS / period)))
        due = start
        while not self.stop_asked:
            dues = []
            while len(dues) < (batch if self.rec.can_batch() else 1):
                due += period * random.uniform(0.5, 1.5)
                if duration is not None and due - start > duration:
                    break
                dues.append(due)
            if not dues:
                break
            now = time.monotonic()
            if dues[0] < now - period * 10:
                # (far behind: do not burst to catch up)
                due = now
                continue
            if len(dues) > 1:
                samples, err = self.rec.sample_batch(dues)
            else:
                if dues[0] > now:
                    time.sleep(dues[0] - now)
                if self.stop_asked:
                    break
                samples, err = [], None
                try:
                    samples.append(self.rec.sample())
                except LjError as e:
                    err = e
            for s in samples:
                self.pauses.append(s.pause)
                self.waits.append(s.stop_wait)
                for tid, keys, G in s.stacks:
                    self.names.learn(keys, G)
                if on_sample is not None:
                    on_sample(self)
            if err is not None:
                if _gone(self.proc.pid):
                    self.ended = "process %d exited" % self.proc.pid
                    break
                self.errors += 1
                self.last_error = str(err)
            if duration is not None and due - start > duration:
                break

    def _loop_bpf(self, start, duration, on_sample):
        """The BPF sampler's samples, read from its ring buffer every
        BPF_POLL seconds and decoded, until the end.  The events stop at
        the duration's end even while a read is being decoded; a record
        made after it (its time is CLOCK_MONOTONIC's, as time.monotonic())
        is not counted."""
        bpf = self.bpf
        end = None if duration is None else start + duration
        parts = {p.pid: p for p in self.parts}
        bpf.start()
        done = False
        for part in self.parts:
            part.idle_at = time.monotonic()

        def due():
            if self.stop_asked or (end is not None and time.monotonic() >= end):
                bpf.stop()
                return True
            return False
        poll, last = BPF_FIRST, time.monotonic()
        while not done:
            wait = poll if end is None else min(poll, end - time.monotonic())
            if wait > 0 and not self.stop_asked:
                time.sleep(wait)
            done = due()
            for part in self.parts:
                if not part.ended and _gone(part.pid):
                    part.ended = True
                    self.gone.append(part.pid)
            if all(part.ended for part in self.parts):
                self.ended = "process %s exited" % ", ".join(map(str, self.gone))
                done = True
            if not done:
                bpf.watch()
            if not done and self.opts["idle"]:
                for part in self.parts:
                    self._sleepers(part)
            got = bpf.read()
            now = time.monotonic()
            if not self.opts["idle"]:
                poll = bpf.next_wait(now - last, BPF_POLL, BPF_POLL_MAX)
            last = now
            for i, c in enumerate(got):
                if i % 16 == 15 and not done:
                    done = due()
                part = parts.get(c.tgid)
                if part is None or (end is not None and c.time_ns > end * 1e9):
                    continue
                if c.regs is None:
                    part.rec.drop_unreadable(c.tid)
                    continue
                try:
                    s = part.rec.decode_copy(c)
                except LjError as e:
                    self.errors += 1
                    self.last_error = str(e)
                    continue
                # (the lua_States a thread's walks went through are copied at
                # its next samples, as the ptrace sampler's plan copies them:
                # 2.0's running coroutine, a lua_State only the machine
                # frames name, such as a finalizer's caller)
                bpf.hint(c.tid, part.rec.recent.get(c.tid, ()))
                for tid, keys, G in () if s.again else s.stacks:     # (again: learnt)
                    part.names.learn(keys, G)
                if on_sample is not None:
                    on_sample(self)

    def _sleepers(self, part: Part) -> None:
        """--idle beside the BPF sampler: part's sleeping threads, read
        once for each 1/rate seconds since the last read."""
        rate = self.opts["rate"]
        owed = int((time.monotonic() - part.idle_at) * rate)
        if owed and not part.ended:
            part.idle_at += owed / rate
            for tid, keys, G in part.rec.sample_sleepers(owed).stacks:
                part.names.learn(keys, G)

    def _ask_stop(self, signo, frame):
        self.stop_asked = True

    # --- the results ----------------------------------------------------------
    def stacks(self) -> List[Tuple[Tuple[Any, ...], int]]:
        """[(frames outermost first as profout.Frame, count)]; with several
        processes, each one's under a root frame that names it."""
        if len(self.parts) == 1:
            return frames_of(self.rec.prof.stacks, self.names)
        out = []
        for part in self.parts:
            root = part.root()
            out.extend(((root,) + frames, n)
                       for frames, n in frames_of(part.rec.prof.stacks, part.names))
        return sorted(out, key=lambda e: -e[1])

    def totals(self) -> Tuple[int, int, Dict[str, int]]:
        """(samples, thread stacks kept, {reason: not kept}) of every process."""
        samples = threads = 0
        dropped = {}
        for part in self.parts:
            prof = part.rec.prof
            samples += prof.samples
            threads += prof.threads
            for r, n in prof.dropped.items():
                dropped[r] = dropped.get(r, 0) + n
        return samples, threads, dropped

    def summary(self) -> str:
        samples, threads, dropped_by = self.totals()
        dropped = sum(dropped_by.values())
        p = sorted(self.pauses)
        pause = ("; the process was held %.0f us a sample (median), %.0f us (99th percentile)"
                 % (1e6 * p[len(p) // 2], 1e6 * p[min(len(p) - 1, int(len(p) * 0.99))])
                 if p and not self.opts["nonblocking"] else "")
        why = ", ".join("%d %s" % (dropped_by[r], r) for r in self.rec_reasons()
                        if dropped_by.get(r))
        last = " (the last: %s)" % self.last_error if self.errors else ""
        if pause and self.proc.c_sampler_why:
            pause += "; stopped in Python: %s" % self.proc.c_sampler_why
        if self.bpf is not None:
            st = self.bpf.stats()
            pause = ("; sampled by the kernel (BPF), the process%s never stopped: %d events, "
                     "%d lost in the ring buffer, %d copies too large"
                     % ("es" if len(self.parts) > 1 else "", st["fired"], st["lost"], st["full"]))
        procs = (" of %d processes (%s)" % (len(self.parts), ", ".join(str(p.pid)
                                                                       for p in self.parts))
                 if len(self.parts) > 1 else "")
        return ("%d samples%s in %.1f s, %d thread stacks kept, %d not kept%s, %d errors%s%s"
                % (samples, procs, self.wall, threads, dropped, " (%s)" % why if why else "",
                   self.errors, last, pause))

    def warning(self) -> Optional[str]:
        """A line when the stops came late: a thread stops at its next
        entry into the kernel after the interrupt, and where the interrupt
        itself is late (a loaded machine, a virtual CPU that receives it at
        its next timer tick) that entry is often a system call the program
        makes, so the samples lean toward those."""
        kept = self.rec.prof.threads
        if kept >= 10 and self.rec.runnable > kept * WAITING_SHARE:
            return ("warning: in %d of the %d stacks kept the thread was runnable but waiting for "
                    "a CPU (this machine is loaded): those show where it was preempted, often at "
                    "a system call, not where it spends CPU time" % (self.rec.runnable, kept))
        w = sorted(self.waits)
        if len(w) < 10 or w[len(w) // 2] < LATE_STOP:
            return None
        return ("warning: the threads took %.1f ms (median) to stop after the interrupt, so the "
                "samples lean toward the system calls the program makes (a thread stops at its "
                "next entry into the kernel; here the interrupt itself came late: a loaded "
                "machine or a virtual CPU); the shares of code between system calls are less "
                "exact" % (1000.0 * w[len(w) // 2]))

    def rec_reasons(self) -> List[str]:
        _, _, dropped = self.totals()
        return list(DROP_REASONS) + [r for r in dropped if r not in DROP_REASONS]


def _gone(pid: int) -> bool:
    """Whether process pid has ended (no /proc entry, or a zombie no one
    has reaped yet)."""
    from ..gdb_ext.stack.sampletimer import thread_state
    return thread_state(pid, pid) in (None, "Z", "X")


def _open(opts: Dict[str, Any], name: str) -> Optional[Session]:
    try:
        session = Session(opts)
    except LjError as e:
        sys.stderr.write("ljgdb: %s: %s\n" % (name, e))
        return None
    if session.note:
        sys.stderr.write("ljgdb %s: %s\n" % (name, session.note))
    for line in session.skipped:
        sys.stderr.write("ljgdb %s: not sampled: %s\n" % (name, line))
    return session


def _progress(session: Session) -> None:
    now = time.monotonic()
    if now - getattr(session, "_shown", 0) < 0.5:
        return
    session._shown = now
    samples, threads, dropped = session.totals()
    sys.stderr.write("\rljgdb record: %d samples, %d thread stacks, %d not kept, %d errors "
                     % (samples, threads, sum(dropped.values()), session.errors))
    sys.stderr.flush()


def _start(argv: Sequence[str], name: str, usage: str, text: str) -> Any:
    """The Session of record's or top's arguments; or the exit status after
    --help, or after the one line that says what is wrong."""
    if list(argv[:1]) in (["-h"], ["--help"]):
        sys.stdout.write("usage: %s\n\n%s\n" % (usage, text))
        return 0
    try:
        opts = parse(argv, name == "record")
    except ValueError as e:
        sys.stderr.write("ljgdb: %s: %s; usage: %s\n" % (name, e, usage))
        return 1
    return _open(opts, name) or 1


def record_main(argv: Sequence[str]) -> int:
    """python3 -m ljgdb record ...; the exit status."""
    session = _start(argv, "record", RECORD_USAGE, RECORD_HELP)
    if isinstance(session, int):
        return session
    from .profout import OutputError, Profile, write
    opts = session.opts
    tty = sys.stderr.isatty()
    session.run(_progress if tty else None)
    if tty:
        sys.stderr.write("\n")
    prof = Profile(session.stacks(), rate_hz=opts["rate"], duration_s=session.wall,
                   name="ljgdb record pid %s" % ", ".join(str(p.pid) for p in session.parts))
    try:
        write(prof, opts["output"], opts["format"])
    except OutputError as e:
        sys.stderr.write("ljgdb: record: %s\n" % e)
        return 1
    sys.stderr.write("ljgdb record: %s\n" % session.summary())
    if session.warning():
        sys.stderr.write("ljgdb record: %s\n" % session.warning())
    if session.ended:
        sys.stderr.write("ljgdb record: %s\n" % session.ended)
    sys.stderr.write("ljgdb record: wrote %s (%s, %d distinct stacks)\n"
                     % (opts["output"], opts["format"], len(prof.stacks)))
    return 0


RECORD_HELP = """Samples the process's Lua stacks HZ times a second (default 100, at
jittered moments) until --duration S, Ctrl-C or the process's end, then
writes them to FILE: --format flamegraph (an SVG flame graph, with zoom
and search, the default), folded (FlameGraph's text), speedscope (its JSON file format) or
pprof (gzipped profile.proto, for go tool pprof).

A Lua frame is named as py-spy names a frame: "busy (app.lua:12)", the
name its caller called the function by (debug.getinfo's) and its current
line, or "app.lua:12" where Lua has none.

Each sample is a copy of a thread's registers, C stack and the VM's state
(lua_States and their stacks), decoded while the process runs on.  The BPF
sampler's come at HZ per CPU second of each thread, made by the kernel on
the thread's own CPU; the ptrace sampler's at HZ per second of the wall
clock, each holding the process while it copies, and a thread counts when
the kernel has it running or runnable, also inside a system call.

  --sampler S    bpf (the default where the machine allows it): the kernel
                 copies each sample at a CPU-clock event of the thread, and
                 the process never stops; ptrace: a stop per sample
  --pid PID      more than once: several processes in one profile, each
                 under a root frame that names it (BPF sampler)
  --children     the child processes of each PID too, and theirs (an nginx
                 master's workers; those without a Lua VM are left out,
                 saying so)
  --idle         also count sleeping threads, with the system call they
                 wait in as their innermost frame
  --native       keep the C frames around the Lua frames
  --nonblocking  never stop the process: read the VM's own records only;
                 a sample taken while the VM runs bytecode or a trace (whose
                 frames need the registers) or whose reads changed while it
                 was read is dropped and counted, never written

On a terminal a progress line counts samples, stacks kept, samples not
kept and errors."""


def top_main(argv: Sequence[str]) -> int:
    """python3 -m ljgdb top ...: every second, the functions of the last
    second by self and total share, most self first."""
    session = _start(argv, "top", TOP_USAGE, TOP_HELP)
    if isinstance(session, int):
        return session
    view = TopView(session, sys.stdout.isatty())
    session.run(view.tick)
    view.show(final=True)
    sys.stdout.write("ljgdb top: %s\n" % session.summary())
    if session.warning():
        sys.stdout.write("ljgdb top: %s\n" % session.warning())
    if session.ended:
        sys.stdout.write("ljgdb top: %s\n" % session.ended)
    return 0


TOP_HELP = """A live view of where the process's Lua code spends its time: every
second, the functions sampled in that second (HZ samples a second, default
100) by self share (the innermost frame) and total share (anywhere in the
stack), most self first, with the totals since the start.  Ctrl-C ends it.
--sampler, --pid more than once, --children, --idle, --native and
--nonblocking as for record.  Not on a terminal, each
second's table is printed after the last, separated by a blank line."""


class TopView(object):
    """top's screen: the window of the last second, and the whole run."""

    ROWS = 20

    def __init__(self, session: Session, tty: bool) -> None:
        self.s = session
        self.tty = tty
        self.last = time.monotonic()
        self.base = {}
        self.base_threads = 0

    def tick(self, session: Session) -> None:
        if time.monotonic() - self.last >= 1.0:
            self.show()

    def show(self, final: bool = False) -> None:
        """The table of the window since the last show: every process's
        stacks (with several, its functions named with its pid first)."""
        parts = self.s.parts
        now = {(part.pid,) + k: v for part in parts for k, v in part.rec.prof.stacks.items()}
        window = {k: v - self.base.get(k, 0) for k, v in now.items() if v - self.base.get(k, 0)}
        samples, threads, _ = self.s.totals()
        n = threads - self.base_threads
        rows = []
        for part in parts:
            mine = {k[1:]: v for k, v in window.items() if k[0] == part.pid}
            for fk, selfc, tot in _top_rows(mine):
                name = part.names.functions.get(fk, "??")
                rows.append((selfc, tot, name if len(parts) == 1 else
                             "[%d] %s" % (part.pid, name)))
        rows.sort(key=lambda r: (-r[0], -r[1], r[2]))
        out = []
        if self.tty:
            out.append("\x1b[H\x1b[2J")
        out.append("ljgdb top: process %s, %.0f s, %d samples, %d thread stacks in the last "
                   "%s (%d in all)\n" % (", ".join(str(p.pid) for p in parts),
                                         time.monotonic() - self.s.start, samples, n,
                                         "second" if not final else "window", threads))
        out.append("%7s %7s  %s\n" % ("self", "total", "function"))
        for selfc, tot, name in rows[:self.ROWS]:
            out.append("%6.1f%% %6.1f%%  %s\n" % (100.0 * selfc / n, 100.0 * tot / n, name))
        if not rows:
            out.append("(no thread ran Lua on a CPU in the samples of this second)\n")
        if not self.tty:
            out.append("\n")
        sys.stdout.write("".join(out))
        sys.stdout.flush()
        self.base = now
        self.base_threads = threads
        self.last = time.monotonic()


def _top_rows(stacks: Dict[Tuple[Any, ...], int]) -> List[Tuple[Any, int, int]]:
    from ..gdb_ext.stack.samples import SampledStacks
    s = SampledStacks()
    s.stacks = stacks
    return s.top()
