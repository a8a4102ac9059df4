"""Sampling a running process's Lua stacks without a debugger: the engine of
`python3 -m ljgdb record` and `top` (commands/record.py).

A sample holds the process only while it copies what changes as the
program runs (copy_moment):

  registers     of every thread (the live backend's stop)
  C stacks      each thread's, from its stack pointer up CSTACK bytes
  VM state      each VM's GG_State: global_State, jit_State, the main thread
  lua_States    the running one (g->cur_L; 2.0: the interpreter's C frame),
                the main thread, each one a C frame of the thread's chain
                names (a resumer of a coroutine, a caller of lua_pcall),
                and the ones the last samples of that thread ran; each
                with its whole stack (slots stack .. stack + stacksize)

then lets the process run and decodes the copy with the engine's own
stack walker (samples.thread_stack, as lprofile does in gdb).  What the
decoder reads beyond the copy is read then: prototypes (their bytecode and
line tables), closures' prototypes, strings, traces; none of those change
while they live, and a prototype named by an earlier sample is checked
against its header before its name is reused (ProtoNames).  The traces
are looked up in the process as it is at the decode: a sample whose VM's
machine code may have been flushed since its stop (jit.traces_kept) is
dropped and counted (TRACES_MOVED).

record makes its stops in batches (sample_batch): the C sampler makes a
batch's stops (0.1 s of them) in one call, each at its time, and the
copies are decoded together after the last, on a CPU that did not idle in
between; what the decoder reads beyond a copy is then read up to 0.1 s
after its stop, not about 1 ms after.  A closure freed since and its
memory taken by another one of the same size would be named by the other
one's prototype (the frame's pc then lies outside that prototype's
bytecode, and its line is usually given as not known).

The copy is made of target blocks (the Target's own read cache): a
block the decoder reads is either wholly from the moment of the stop or
wholly from the moment it is read, never a mix.

The stop is made in C where it can be (the live backend's stop_and_copy,
backends/ptstop.c): it copies what the last moment needed (Moment.ranges,
the plan), each thread's C stack, and each VM's running lua_State with its
stack, found at the stop (running_states); then copy_moment runs over that
copy, reading nothing from the process (_copy_only), to check that it
holds all the list above.  A range it lacks joins the plan and the stop is
made again, once; after that, and for the first sample, the stop is
Python's (LiveProcess.stopped, copy_moment reading as it goes).

The BPF sampler (backends/bpfsample) makes the copy in the kernel, at a
CPU-clock event of one thread, and never stops the process: decode_copy
checks and decodes it as a batch's copy, strictly (a walk through a
lua_State the copy does not hold is dropped, not read as the process is
later), and the lua_States a thread's walks went through are handed back
to the program as the ptrace sampler's plan copies them (recent).

Without registers (nonblocking: the process is never stopped) only the
VM's own records of where it is can be read, and those are current only
while it is in C code called from Lua (L->base is saved before a call to
C).  g->vmstate alone does not tell that: upstream 2.1 leaves it at C
while JIT-compiled code runs after some returns from C (docs/luajit-
facts.md).  So a thread is read only while the kernel has it waiting in
a system call, and twice, kept when both reads agree; a running thread
cannot be placed: its sample is dropped and counted, never guessed."""
import bisect
import contextlib
import time
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple,
                    TYPE_CHECKING)

from .. import consts as C
from ..errors import CorruptError, FaultError, LjError
from ..jit.jit import mcode_stamp, traces_kept
from ..target import BLOCK
from ..vm.cframe import CFRAME_OFS, CFRAME_RAWMASK
from ..vm.state import VM
from .backtrace import Backtracer
from .copymemo import CopyMemo, Watch
from .samples import (NO_LUA, NO_STATE, OFF_CPU, UNREADABLE, SampledStacks, in_syscall,
                      taken_out_of_a_wait, thread_stack)
from .sampletimer import thread_state

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..backends.live import LiveProcess
    from ..layouts.layout import Layout
    from ..target import Target

# How much of each thread's C stack is copied, from its stack pointer up:
# the innermost C frames, the ones that change from one moment to the next
# (frames further out belong to callers that wait; they are read later).
CSTACK = 16 * 1024
# Below the stack pointer: x86-64's red zone (leaf functions keep data there).
RED_ZONE = 128
# lua_States remembered per OS thread from earlier samples.
RECENT_STATES = 8

# Functions whose frames lie under or among a Lua program's in most
# samples: the C API's compile unit (lua_pcall, lua_resume, lua_gc), the
# collector's (a finalizer's call), the base library's (collectgarbage,
# the coroutine functions), the host's main and the C library's start of
# the process and of a thread: their debug info read before the first
# sample (Target.prepare_frames).
FIRST_FRAMES = ("lua_pcall", "lj_gc_step", "lj_cf_collectgarbage", "main", "__libc_start_main",
                "start_thread")
# At most this many C frames followed in one thread's chain of VM entries.
MAX_CHAIN = 64
MAX_MACHINE_FRAMES = 512
# Why a sample was not kept, beyond samples.DROP_REASONS.
CHANGED = "changed while read"
NOT_PLACED = "running (no registers without a stop)"
MISSED = "batched copy lacked a range"
TRACES_MOVED = "traces changed before the decode"
NOT_COPIED = "the kernel's copy lacked a range"
# A Lua stack is copied by the BPF sampler up to this many bytes (a longer
# one, rare: LJ_STACK_MAX is about 512 KB, lacks a range: NOT_COPIED).
MAX_LUA_STACK = 256 * 1024


class Moment(object):
    """Ranges of memory copied into a target's block cache at one stop.
    reread: a function giving the process's mappings as they are now, for
    an address in none of `maps` (mapped since they were read: the
    allocator grows, a Lua stack is moved); called once at most."""

    def __init__(self, t: 'Target', maps: List[Tuple[int, int, str]],
                 reread: Optional[Callable[[], List[Tuple[int, int, str]]]] = None,
                 tried: Optional[List[Tuple[int, int]]] = None) -> None:
        self.t = t
        self._set(maps)
        self.reread = reread
        self.bytes = 0
        # The ranges copied, the threads' stacks apart: what the next stop
        # copies before anything is decoded (the plan of Recorder._fast).
        self.ranges = []
        # Checking a copy made already (Recorder._fast): the ranges it
        # tried to read; a range in none of them is a Miss.
        self.tried = tried

    def _set(self, maps: List[Tuple[int, int, str]]) -> None:
        self.maps = sorted((s, e) for s, e, _ in maps)
        self.starts = [s for s, _ in self.maps]

    def mapping(self, addr: int) -> Optional[Tuple[int, int]]:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0 and addr < self.maps[i][1]:
            return self.maps[i]
        if self.reread is not None:
            reread, self.reread = self.reread, None
            try:
                self._set(reread())
            except (OSError, LjError):
                return None
            return self.mapping(addr)
        return None

    def holds(self, lo: int, hi: int) -> bool:
        """Whether [lo, hi) can be read from the block cache without a
        read: always while the process is held (a read then is of the
        moment), only what the copy holds when checking one."""
        return self.tried is None or self._cached(lo & ~(BLOCK - 1), hi)

    def _cached(self, lo: int, hi: int) -> bool:
        """Whether the block cache holds every block of [lo, hi) (lo a
        block's start)."""
        blocks = self.t._blocks
        return all((b in blocks) for b in range(lo, hi, BLOCK))

    def copy(self, lo: int, hi: int, stack: bool = False) -> bool:
        """Copy [lo, hi) (widened to whole blocks, clipped to its mapping)
        into the block cache in one read; False when it cannot be read.
        stack: a thread's stack around its stack pointer (not in ranges)."""
        m = self.mapping(lo)
        if m is None:
            return False
        lo = max(lo & ~(BLOCK - 1), m[0])
        hi = min((hi + BLOCK - 1) & ~(BLOCK - 1), m[1])
        if hi <= lo:
            return False
        if not stack:
            self.ranges.append((lo, hi))
        if self._cached(lo, hi):
            return True
        if self.tried is not None:
            if any(a <= lo and hi <= b for a, b in self.tried):
                return False            # (tried at the stop: not readable then)
            raise Miss(lo, hi)
        try:
            data = self.t.read_raw(lo, hi - lo)
        except FaultError:
            return False
        self.bytes += hi - lo
        blocks = self.t._blocks
        for b in range(lo, hi, BLOCK):
            blocks[b] = data[b - lo:b - lo + BLOCK]
        return True


class Miss(Exception):
    """A range the copy being checked does not hold."""

    def __init__(self, lo: int, hi: int) -> None:
        Exception.__init__(self, "0x%x-0x%x not copied" % (lo, hi))
        self.lo, self.hi = lo & ~(BLOCK - 1), (hi + BLOCK - 1) & ~(BLOCK - 1)


def merged(ranges: Iterable[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """ranges sorted, with those that overlap or touch made one."""
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _ref(t: 'Target', lay: 'Layout', addr: int) -> int:
    return t.uint(addr, lay.ref_size)


def _is_thread(t: 'Target', lay: 'Layout', L: int, G: int) -> bool:
    """Whether L (not 0, 8-byte aligned: copy_moment checks that before it
    copies L) is a lua_State of the VM whose global_State is G."""
    try:
        s = lay.L
        if t.u8(L + s.gct) != C.GCT_THREAD:
            return False
        return t.uint(L + s.glref, lay.mref_size) == G
    except (FaultError, CorruptError):
        return False


def copy_moment(t: 'Target', lay: 'Layout', Gs: Iterable[int], threads: List[Any],
                recent: Dict[int, List[int]], arch: str, sp_reg: str,
                maps: List[Tuple[int, int, str]],
                reread: Optional[Callable[[], List[Tuple[int, int, str]]]] = None,
                tried: Optional[List[Tuple[int, int]]] = None, optional_recent: bool = False
                ) -> Tuple[Moment, Dict[int, Set[int]]]:
    """Copy the moment's mutable state (the module's list) into t's block
    cache, while the process is held; ({tid: lua_States copied for it}).
    recent: lua_States each thread ran in earlier samples; maps, reread,
    tried: as Moment takes them (tried: check a copy already in the cache,
    Miss when it lacks a range; nothing is read then); optional_recent: a
    batch's check, where a lua_State of `recent` the copy lacks is passed
    over."""
    mom = Moment(t, maps, reread, tried)
    cfo = CFRAME_OFS.get((arch, lay.gc64))
    states = {}
    Gs = list(Gs)
    for G in Gs:
        gg = G - lay.GG.g
        mom.copy(gg, gg + lay.GG.size)
    base = set()
    for G in Gs:
        try:
            base.add(_ref(t, lay, G + lay.G.mainthref))
            if lay.has_cur_L:
                base.add(_ref(t, lay, G + lay.G.cur_L))
            elif lay.has_jit_L:
                base.add(_ref(t, lay, G + lay.G.jit_L))
        except FaultError:
            pass
    Lsize = lay.L.size
    for th in threads:
        sp = th.regs.get(sp_reg) or 0
        mom.copy(sp - RED_ZONE, sp + CSTACK, stack=True)
        todo = list(base) + list(recent.get(th.tid, ()))
        guess = None
        if cfo is not None:
            try:
                # The L of the interpreter's C frame, if the thread is in
                # the interpreter (else whatever is there).  Where the VM
                # keeps g->cur_L that L is in base already, so a check
                # does not stop again for an address the copy lacks.
                guess = _ref(t, lay, sp + cfo["L"])
                todo.append(guess)
            except FaultError:
                pass
        # Checking a batch's copy (tried, lay.has_cur_L): the lua_States of
        # earlier samples are a hint, not a need (the running one is
        # followed, its resumers are found through its C frames); one
        # the copy lacks is passed over, not a Miss (the stops of a batch
        # were all planned before the samples that ran them were decoded).
        hints = set(recent.get(th.tid, ())) - base if optional_recent else set()
        seen = set()
        while todo and len(seen) < MAX_CHAIN:
            L = todo.pop()
            if L == guess and lay.has_cur_L and not mom.holds(L, L + Lsize):
                continue
            try:
                # (copied before it is looked at: a check reads only the copy)
                if L in seen or not L or L & 7 or not mom.copy(L, L + Lsize) or \
                        not any(_is_thread(t, lay, L, G) for G in Gs):
                    continue
                seen.add(L)
                stack = t.uint(L + lay.L.stack, lay.mref_size)
                size = t.u32(L + lay.L.stacksize)
                mom.copy(stack, stack + 8 * size)
                cf = t.uint(L + lay.L.cframe, lay.ptr_size) & CFRAME_RAWMASK
                for _ in range(MAX_CHAIN):
                    if not cf or cfo is None:
                        break
                    mom.copy(cf, cf + 64)
                    todo.append(_ref(t, lay, cf + cfo["L"]))
                    if L in hints and todo[-1] not in base:
                        hints.add(todo[-1])     # (a hint's resumers are hints too)
                    cf = t.uint(cf + cfo["prev"], lay.ptr_size) & CFRAME_RAWMASK
            except FaultError:
                continue
            except Miss:
                if L not in hints:
                    raise
                seen.discard(L)
        states[th.tid] = seen
    return mom, states


class ProtoNames(object):
    """Per prototype address, its header bytes as first read; a cached
    prototype (in the VM caches) whose header no longer reads the same was
    freed and its memory reused: it is forgotten and read again."""

    HEADER = 48

    def __init__(self) -> None:
        self.headers = {}
        self.changed = 0            # prototypes found changed and forgotten

    def check(self, t: 'Target', caches: Dict[str, Any], addrs: Iterable[int]) -> None:
        protos = caches.get("protos") or {}
        for a in addrs:
            try:
                h = t.read(a, self.HEADER)
            except FaultError:
                h = None
            old = self.headers.get(a)
            if old is not None and old != h:
                self.changed += 1
                protos.pop(a, None)
                caches.get("key_text", {}).clear()
            self.headers[a] = h


class Sample(object):
    """One sample's outcome: pause (seconds the process was held; of which
    stop_wait, from the interrupt to the threads' stop), stacks
    [(tid, keys innermost first)], and dropped [(tid, reason)]."""

    def __init__(self) -> None:
        self.pause = 0.0
        self.stop_wait = 0.0
        self.copied = 0
        self.stacks = []
        self.dropped = []
        self.again = False          # the stack of a copy decoded before (decode_copy)


class Recorder(object):
    """Samples of a LiveProcess's Lua stacks, decoded after the process
    runs again.  target: a LiveTarget of proc; Gs: the global_States of
    the VMs to sample; idle: keep sleeping threads too (named by their
    system call); native: keep the C frames around the Lua frames."""

    def __init__(self, proc: 'LiveProcess', target: 'Target', lay: 'Layout', Gs: List[int],
                 idle: bool = False, native: bool = False, nonblocking: bool = False) -> None:
        self.proc = proc
        self.t = target
        self.lay = lay
        self.Gs = list(Gs)
        self.idle = idle
        self.native = native
        self.nonblocking = nonblocking
        self.arch = proc.arch.name
        self.sp_reg = "rsp" if self.arch == "x86_64" else "sp"
        self.caches = {G: {} for G in self.Gs}
        self.recent = {}
        self.protos = ProtoNames()
        self.memo = CopyMemo(proc.arch.pr_regs)
        self.prof = SampledStacks()
        self.multi = len(self.Gs) > 1
        self.waiting = set()        # threads runnable, not on a CPU, at this sample
        self.resumers = {}          # G -> threads seen resuming a coroutine (nonblocking)
        self.runnable = 0           # stacks kept of such threads
        self.plan = None            # what the C sampler copies (the last moment's ranges)
        self.follows = running_states(lay, self.Gs)
        self.fast = 0               # samples stopped by the C sampler
        self.retakes = 0            # its stops made again (the copy lacked a range)
        self.missed = False         # a copy of the last batch lacked a range

    def prepare(self) -> None:
        """Before the BPF sampler's first sample: the unwinder's debug info
        read (Target.prepare_frames).  The first copy's decode would wait
        for it, and the lua_States the kernel copies beyond those it finds
        itself are learnt from that decode: the samples taken before it
        lack them (docs/internals.md, "What the BPF sampler copies")."""
        t = self.t
        t.prepare_frames([a for a in map(t.symbol, FIRST_FRAMES) if a is not None],
                         t.symbol("lua_pcall"))

    def finish(self) -> None:
        """At the end of the samples: what the unwinder learnt kept."""
        self.t.save_frames()

    # --- one sample ---------------------------------------------------------
    def sample(self) -> Sample:
        """Take one sample: every thread's state, a stop, the copy, the
        decode.  LjError when the process is gone."""
        out = Sample()
        t = self.t
        got = None
        if self.plan is not None and not self.nonblocking:
            got = self._fast(out)           # (it clears the cache for its copy)
        if got is None:
            t.clear_cache()         # (the last sample's, or a copy _fast did not take)
            # The scheduling state before the stop (the stop makes every
            # thread 't'), and, of the runnable ones, which were on a CPU
            # at that moment (the others waited for one: they show where
            # they were preempted).  (The C sampler reads them itself.)
            pid = self.proc.pid
            tids = self.proc.task_ids()
            states = {tid: thread_state(pid, tid) for tid in tids}
            self.waiting = set(tid for tid, st in states.items()
                               if st == "R" and not on_a_cpu(pid, tid))
            if self.nonblocking:
                return self._sample_nonblocking(out, states)
            start = time.monotonic()
            with self.proc.stopped(tids):
                threads = list(self.proc.threads)
                mom, seen = copy_moment(t, self.lay, self.Gs, threads, self.recent, self.arch,
                                        self.sp_reg, self.proc.mappings(), self.proc.reread_maps)
            out.pause += time.monotonic() - start
            out.stop_wait += self.proc.stop_wait or 0.0
        else:
            threads, mom, seen, states = got
            self.fast += 1
        self.plan = merged(mom.ranges)
        self.missed = False
        out.copied = mom.bytes
        self.decode(out, threads, seen, states)
        return out

    def can_batch(self) -> bool:
        """Whether sample_batch can stop in C: a stop was made already, the
        sampler stops the process (not nonblocking), the C sampler is
        there, the VM keeps its running lua_State (g->cur_L: 2.0 does not,
        and the thread it runs is a need there, found in the interpreter's
        C frame), and the last batch's copies lacked nothing (else the next
        is one sample(), which makes its stop again when the copy lacks a
        range, so the plan is whole again)."""
        return self.plan is not None and not self.nonblocking and self.lay.has_cur_L and \
            self.proc._stopper is not False and not self.missed

    def sample_batch(self, due: List[float]) -> Tuple[List[Sample], Optional[LjError]]:
        """Samples at the times due (time.monotonic's): the C sampler makes
        every stop in one call, with no Python between them, and the copies
        are decoded after the last, on a CPU that did not idle in between
        (a sample decoded right after a 10 ms sleep costs twice the CPU
        here: docs/benchmarks.md).  The decode reads prototypes and traces
        up to the batch's length after their stop (the prototypes checked
        as sample() checks them).  A copy that lacks a range (a Lua stack
        moved, a coroutine not followed) cannot be made again: its threads
        are dropped (MISSED), the range joins the plan, and the next sample
        is sample()'s (can_batch).  ([samples made], the LjError that ended
        the batch or None); where a stop is beyond the C sampler, one
        sample() is made in its place."""
        got = self.proc.stops_and_copies(self.plan, RED_ZONE, CSTACK, self.follows, due)
        if got is None:
            return [], None
        stops, err, stops_short = got
        out = []
        for threads, cpu, copied, tried, held, wait in stops:
            s = Sample()
            s.pause, s.stop_wait = held, wait
            try:
                mom, seen = self.checked_copy(threads, copied, tried, batch=True)
            except Miss as m:
                self.plan = merged(self.plan + [(m.lo, m.hi)])
                self.retakes += 1
                self.missed = True
                self.prof.samples += 1
                for th in threads:
                    self._drop(s, th.tid, MISSED)
                out.append(s)
                continue
            self.fast += 1
            s.copied = mom.bytes
            self.plan = merged(mom.ranges)
            self.decode(s, threads, seen, self._states(cpu))
            out.append(s)
        if err is None and stops_short:
            try:
                out.append(self.sample())
            except LjError as e:
                err = e
        return out, err

    def decode_copy(self, c: Any) -> Sample:
        """One sample of one thread copied without a stop (the BPF sampler:
        the kernel copied it at a CPU-clock event of that thread, so it was
        on a CPU).  c, as bpfsample.Copy gives it: tid, regs (in the order
        of the arch's pr_regs), data (the bytes copied), parts [(lo, size)]
        (the ranges data holds, in order), tried [(lo, hi)] (the ranges the
        kernel tried to copy) and key (equal for copies of the same
        ranges).  What the copy lacks cannot be copied again: the thread is
        dropped (NOT_COPIED), and so is it when its walk went through a
        lua_State the copy does not hold (on 2.0, the running coroutine
        before its thread's hints reach the program: decode's strict).  A
        copy that reads as one decoded before is given that one's stack
        (copymemo; Sample.again)."""
        from ..target import Thread
        s = Sample()
        memo, tid = self.memo, c.tid
        maps = getattr(self.proc, "maps", None)
        if maps is not memo.maps:
            memo.clear()
            memo.maps = maps
        use = memo.in_use()
        if use:
            # (bytes: slicing them is twice as fast as slicing the ring's memory)
            data = bytes(c.data)
            shape = (tid, c.key, tuple(self.recent.get(tid, ())))
            got = memo.find(shape, c.regs, data, self.t.gatherer)
        else:
            got = None
        if got is not None:
            keys, G, stack, recent = got
            self.prof.samples += 1
            self.prof.add_stack(stack)
            self.recent[tid] = list(recent)
            s.copied = len(data)
            s.stacks.append((tid, keys, G))
            s.again = True
            return s
        copied = c.copied
        regs = dict(zip(self.proc.arch.pr_regs, c.regs))
        w = Watch(self.t, copied, regs) if use else None
        with w or contextlib.nullcontext():
            th = Thread(tid, w.regs if w else regs, 0, regs.get(self.proc.arch.pc, 0))
            try:
                mom, seen = self.checked_copy([th], copied, c.tried, batch=True)
            except Miss:
                self.prof.samples += 1
                self._drop(s, tid, NOT_COPIED)
                return s
            s.copied = mom.bytes
            self.waiting = set()
            if w:
                w.live = True
            changed = self.protos.changed
            self.decode(s, [th], seen, {tid: "R"}, strict=True)
        if w and len(s.stacks) == 1 and not s.dropped and self.protos.changed == changed:
            _, keys, G = s.stacks[0]
            e = w.entry((keys, G, self.prof.last, tuple(self.recent.get(tid, ()))), data)
            if e is not None:
                memo.keep(shape, e)
        return s

    def sample_sleepers(self, times: int) -> Sample:
        """--idle beside the BPF sampler, whose CPU-clock events see threads
        on a CPU only: each thread the kernel has asleep now (state S or D)
        read without a stop, as --nonblocking reads it (its system call,
        its VM in C code called from Lua, read twice), and counted `times`
        times (the samples of 1/rate seconds each it owes since the last
        call)."""
        from .sampling import on_cpu
        out = Sample()
        pid = self.proc.pid
        self.prof.samples += times
        for tid in self.proc.task_ids():
            if on_cpu(thread_state(pid, tid)) is not False:
                continue
            kept, dropped = len(out.stacks), len(out.dropped)
            self._nonblocking_thread(out, tid, False)
            for _ in range(times - 1):
                if len(out.stacks) > kept:
                    self.prof.add(out.stacks[-1][1])
                elif len(out.dropped) > dropped:
                    self.prof.drop(out.dropped[-1][1])
        return out

    def drop_unreadable(self, tid: int) -> Sample:
        """A sample of thread tid whose registers could not be read."""
        s = Sample()
        self.prof.samples += 1
        self._drop(s, tid, UNREADABLE)
        return s

    def decode(self, out: Sample, threads: List[Any], seen: Dict[int, Set[int]],
               states: Dict[int, Optional[str]], strict: bool = False) -> None:
        """Each thread's stack from the moment in the target's block cache
        (threads, {tid: lua_States copied}, {tid: state letter}), into out.
        strict: a thread whose walk went through a lua_State the copy does
        not hold is dropped (NOT_COPIED): that lua_State was read from the
        process as it is now, not as it was at the copy's moment."""
        self.proc.threads = threads
        self.prof.samples += 1
        if not self._traces_kept():
            for th in threads:
                self._drop(out, th.tid, TRACES_MOVED)
        else:
            for i, th in enumerate(threads):
                self._one_thread(out, i, th, states.get(th.tid), seen.get(th.tid, ()),
                                 strict)
        self.proc.threads = []

    def _traces_kept(self) -> bool:
        """Whether each VM's traces are still those of the moment in the
        block cache (jit.traces_kept): the decode looks a trace up in the
        process as it is now, and a flush since the stop could give a new
        trace at an old one's address."""
        t, lay = self.t, self.lay
        for G in self.Gs:
            gg = G - lay.GG.g
            try:
                then = mcode_stamp(lay, gg, t.read)
            except FaultError:
                continue            # (no jit_State in the copy: no trace is looked up)
            try:
                now = mcode_stamp(lay, gg, t.read_raw)
            except FaultError:
                now = None
            if not traces_kept(then, now):
                return False
        return True

    def _fast(self, out: Sample) -> Optional[Tuple[List[Any], Moment, Dict[int, Set[int]],
                                                   Dict[int, Optional[str]]]]:
        """The moment by the C sampler: the threads' scheduling states, then
        the ranges of the last moment (self.plan) and each thread's stack
        copied in one stop; copy_moment checks that copy, reading nothing;
        a range it lacks (another coroutine runs, a stack was moved) joins
        the plan and the stop is made again, once.  (threads, moment,
        {tid: lua_States copied}, {tid: state letter}), or None (stop in
        Python)."""
        for _ in range(2):
            got = self.proc.stop_and_copy(self.plan, RED_ZONE, CSTACK, self.follows)
            if got is None:
                return None
            out.pause += self.proc.held_seconds
            out.stop_wait += self.proc.stop_wait
            cpu, copied, tried = got
            threads = list(self.proc.threads)
            try:
                mom, seen = self.checked_copy(threads, copied, tried)
            except Miss as m:
                self.plan = merged(self.plan + [(m.lo, m.hi)])
                self.retakes += 1
                continue
            return threads, mom, seen, self._states(cpu)
        return None

    def _states(self, cpu: Dict[int, Tuple[Optional[str], bool]]) -> Dict[int, Optional[str]]:
        """{tid: state letter} of a C stop's {tid: (state letter, on a
        CPU)}; self.waiting: the threads runnable but not on a CPU."""
        self.waiting = set(tid for tid, (st, on) in cpu.items() if st == "R" and not on)
        return {tid: st for tid, (st, _) in cpu.items()}

    def checked_copy(self, threads: List[Any], copied: List[Tuple[int, bytes]],
                     tried: List[Tuple[int, int]], batch: bool = False
                     ) -> Tuple[Moment, Dict[int, Set[int]]]:
        """The C sampler's copy ([(lo, bytes)], the ranges it tried) made
        the target's block cache, and checked by copy_moment reading the
        copy alone: (moment, its bytes the copy's, {tid: lua_States
        copied}); Miss when it lacks a range.  batch: a batch's check
        (copy_moment's optional_recent)."""
        t = self.t
        t.clear_cache()
        blocks = t._blocks
        for lo, data in copied:
            for k in range(0, len(data) - BLOCK + 1, BLOCK):
                blocks[lo + k] = data[k:k + BLOCK]
        with _copy_only(t):
            mom, seen = copy_moment(t, self.lay, self.Gs, threads, self.recent, self.arch,
                                    self.sp_reg, self.proc.mappings(), self.proc.reread_maps,
                                    tried, batch and self.lay.has_cur_L)
        mom.bytes = sum(len(data) for _, data in copied)
        return mom, seen

    def _one_thread(self, out: Sample, index: int, th: Any, state: Optional[str],
                    seen: Iterable[int], strict: bool = False) -> None:
        from .sampling import on_cpu
        cpu = on_cpu(state)
        if cpu is None:
            return self._drop(out, th.tid, NO_STATE)
        if cpu and taken_out_of_a_wait(th.regs, self.arch):
            cpu = False         # (runnable only because the last stop woke it)
        if not cpu and not self.idle:
            return self._drop(out, th.tid, OFF_CPU)
        t = self.t
        t.select_thread(index)
        try:
            mframes = t.machine_frames(MAX_MACHINE_FRAMES)
        except (FaultError, CorruptError):
            mframes = []
        if not mframes:
            return self._drop(out, th.tid, UNREADABLE)
        for G in self.Gs:
            try:
                vm = VM(t, self.lay, G, mframes=mframes, caches=self.caches[G])
                if strict and not self.lay.has_cur_L:
                    vm.copied_threads = set(seen)
                walked = set()
                keys = thread_stack(vm, mframes, walked)
            except (FaultError, CorruptError):
                return self._drop(out, th.tid, UNREADABLE)
            if keys is None:
                continue
            self.protos.check(t, self.caches[G], set(k[1] for k in set(keys) if k[0] == "L"))
            old = [L for L in self.recent.get(th.tid, []) if L not in walked]
            self.recent[th.tid] = (sorted(walked) + old)[:RECENT_STATES]
            if strict and not walked <= set(seen):
                return self._drop(out, th.tid, NOT_COPIED)
            if not self.native:
                keys = [k for k in keys if k[0] != "M"]
            if not cpu:
                sc = in_syscall(mframes[0], self.arch)
                if sc is not None:
                    keys.insert(0, ("S", sc))
            if self.multi:
                keys.append(("VM", G))
            self.prof.add(keys)
            if th.tid in self.waiting:
                self.runnable += 1
            out.stacks.append((th.tid, keys, G))
            return None
        return self._drop(out, th.tid, NO_LUA)

    def _drop(self, out: Sample, tid: int, reason: str) -> None:
        self.prof.drop(reason)
        out.dropped.append((tid, reason))

    # --- never stopping -------------------------------------------------------
    def _sample_nonblocking(self, out: Sample, states: Dict[int, Optional[str]]) -> Sample:
        """A sample from memory alone (module docstring): a thread is read
        only while the kernel says it waits in a system call (its
        /proc/PID/task/TID/syscall line); then the VM whose running
        lua_State's C frame is on that thread's stack is in C code called
        from Lua (g->vmstate C), L->base is current, and nothing moves
        while the thread waits.  Each such thread is read twice; the sample
        is kept when both reads agree."""
        from .sampling import on_cpu
        self.prof.samples += 1
        for tid, state in states.items():
            cpu = on_cpu(state)
            if cpu is None:
                self._drop(out, tid, NO_STATE)
            elif not cpu and not self.idle:
                self._drop(out, tid, OFF_CPU)
            else:
                self._nonblocking_thread(out, tid, cpu)
        return out

    def _nonblocking_thread(self, out: Sample, tid: int, cpu: bool) -> None:
        first = waiting_in(self.proc.pid, tid)
        if first is None:
            return self._drop(out, tid, NOT_PLACED)
        nr, sp, _ = first
        for G in self.Gs:
            vm = VM(self.t, self.lay, G, caches=self.caches[G])
            words = self._state_words(vm)
            if words is None:
                continue
            vmstate, L, cframe, _ = words
            if vm.vmstate_name(vmstate)[0] != "C" or not _same_stack(self.proc, sp, cframe):
                continue
            try:
                keys = chain_keys(vm, L, self.resumers.setdefault(G, set()))
            except (FaultError, CorruptError):
                keys = None
            if keys is None:
                return self._drop(out, tid, UNREADABLE)
            if self._state_words(vm) != words or waiting_in(self.proc.pid, tid) != first:
                return self._drop(out, tid, CHANGED)
            self.protos.check(self.t, self.caches[G], set(k[1] for k in keys if k[0] == "L"))
            if not cpu:
                keys.insert(0, ("S", nr))
            if self.multi:
                keys.append(("VM", G))
            self.prof.add(keys)
            out.stacks.append((tid, keys, G))
            return None
        return self._drop(out, tid, NO_LUA)

    def _state_words(self, vm: VM) -> Optional[Tuple[int, int, int, int]]:
        """(g->vmstate, the running lua_State, its cframe, its base) read now."""
        try:
            vm.t.clear_cache()
            L = vm.cur_L if vm.lay.has_cur_L else vm.main_L
            lay = vm.lay
            return (vm.vmstate, L, vm.t.uint(L + lay.L.cframe, lay.ptr_size) & CFRAME_RAWMASK,
                    vm.t.uint(L + lay.L.base, lay.ptr_size))
        except (FaultError, CorruptError):
            return None


def running_states(lay: 'Layout', Gs: Iterable[int]) -> List[Tuple[int, ...]]:
    """What the C sampler copies at an address it reads at the stop
    (ptstop.Stopper.follow): each VM's running lua_State (g->cur_L) and its
    stack, which change at every coroutine switch (a server runs each
    request in a coroutine of its own).  Nothing on a VM without cur_L
    (2.0): its running thread is found from the interpreter's C frame."""
    if not lay.has_cur_L:
        return []
    mask = (1 << (8 * lay.ref_size)) - 1
    return [(G + lay.G.cur_L, mask, lay.ref_size, lay.L.size, lay.L.stack, lay.mref_size,
             lay.L.stacksize, 8) for G in Gs]


@contextlib.contextmanager
def _copy_only(t: 'Target') -> Iterator[None]:
    """t reads only its block cache while inside: a read beyond it is a
    Miss, never a read of the process (which has run on)."""
    def refuse(addr: int, n: int) -> bytes:
        raise Miss(addr, addr + n)
    old = t.__dict__.get("read_raw")     # (a copymemo.Watch's, or none)
    t.read_raw = refuse
    try:
        yield
    finally:
        if old is None:
            del t.read_raw
        else:
            t.read_raw = old


def chain_keys(vm: VM, L: int, resumers: Set[int]) -> Optional[List[Tuple[Any, ...]]]:
    """The frame keys (innermost first) of the Lua frames of an OS thread
    that runs thread L, without its registers: L's frames, then, while L is
    a coroutine, those of the thread whose coroutine.resume frame on top
    resumed it (the main thread, or one of `resumers`, the threads seen
    resuming before; a resumer found is added to them), as the machine
    frames give them in a stop.  A coroutine whose resumer is none of those
    ends with a ("?", text) key that says so.  None when a walk stops
    short."""
    bt = Backtracer(vm)
    keys = []
    seen = set()
    cur = L
    main = vm.main_L
    while cur:
        seen.add(cur)
        b = bt.backtrace(cur)
        if b.error is not None:
            return None
        keys.extend(bt.frame_key(f) for f in b.frames)
        if cur == main or len(seen) >= MAX_CHAIN:
            break
        nxt = None
        for r in [main] + sorted(resumers):
            if r in seen:
                continue
            rb = bt.backtrace(r)
            if rb.frames and rb.frames[0].kind in ("builtin", "c") and \
                    bt.resumed_thread(rb.walker, rb.frames[0]) == cur:
                nxt = r
                break
        if nxt is None:
            keys.append(("?", "resumed by a thread not found without a stop"))
            break
        resumers.add(nxt)
        cur = nxt
    return keys


def on_a_cpu(pid: int, tid: int) -> bool:
    """Whether thread tid of pid is running on a CPU at this moment: the
    kernel answers "running" for its /proc/PID/task/TID/syscall then (it
    cannot read the registers of a thread that runs); a runnable thread
    that waits for a CPU gets its registers shown."""
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            return f.read(7) == "running"
    except OSError:
        return True


def waiting_in(pid: int, tid: int) -> Optional[Tuple[int, int, int]]:
    """(system call number, stack pointer, pc) of a thread the kernel has
    waiting in a system call (/proc/PID/task/TID/syscall), else None
    (running, or blocked outside a system call, or gone)."""
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
            parts = f.read().split()
    except OSError:
        return None
    if len(parts) < 9 or parts[0] in ("running", "-1"):
        return None
    try:
        return int(parts[0]), int(parts[-2], 16), int(parts[-1], 16)
    except ValueError:
        return None


def _same_stack(proc: 'LiveProcess', sp: int, cframe: int) -> bool:
    """Whether the C frame cframe is on the stack whose pointer is sp: in
    the same mapping, above sp."""
    if not cframe or cframe < sp:
        return False
    for s, e, _ in proc.mappings():
        if s <= sp < e:
            return cframe < e
    return False
