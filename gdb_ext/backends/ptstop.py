"""A sample's stop in C (ptstop.c): the same ptrace requests and reads as
LiveProcess.stopped() and the recorder's copy, made in one call.

The library is built once from ptstop.c with the system's C compiler ($CC,
cc, gcc or clang) into ljgdb's cache ($XDG_CACHE_HOME/ljgdb, else
~/.cache/ljgdb), named by the source's hash and the machine, and loaded
with ctypes; an installed package carries it built beside ptstop.c where
pip had a compiler (setup.py).  Without either, load() says why and the
recorder stops the process in Python.  LJGDB_SAMPLER=python chooses the
Python sampler (benchmarks, tests)."""
import ctypes
import errno
import os
from typing import List, Optional, Sequence, Tuple

from ..errors import LjError
from ..cbuild import build_shared, cache_dir, load_shared

NREGS = 64
MAX_THREADS = 1024
FOLLOWED = 2 << 20          # room for the followed objects (a lua_State's stack: 512 KB at most)
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ptstop.c")


class _Thread(ctypes.Structure):
    _fields_ = [("tid", ctypes.c_int32), ("state", ctypes.c_int32), ("sig", ctypes.c_int32),
                ("nregs", ctypes.c_int32), ("sched", ctypes.c_char), ("running", ctypes.c_char),
                ("pad", ctypes.c_char * 6), ("regs", ctypes.c_uint64 * NREGS),
                ("stack_lo", ctypes.c_uint64), ("stack_hi", ctypes.c_uint64),
                ("stack_got", ctypes.c_int64)]


class _Range(ctypes.Structure):
    _fields_ = [("lo", ctypes.c_uint64), ("hi", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("got", ctypes.c_int64)]


class _Follow(ctypes.Structure):
    _fields_ = [("at", ctypes.c_uint64), ("mask", ctypes.c_uint64),
                ("at_size", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("array_at", ctypes.c_uint32), ("array_at_size", ctypes.c_uint32),
                ("count_at", ctypes.c_uint32), ("item", ctypes.c_uint32),
                ("obj", _Range), ("array", _Range)]


class _Result(ctypes.Structure):
    _fields_ = [("nthreads", ctypes.c_int32), ("err", ctypes.c_int32),
                ("err_tid", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("held_ns", ctypes.c_uint64), ("wait_ns", ctypes.c_uint64)]


def _cache_dir() -> str:
    return cache_dir()


def build(dest_dir: str) -> str:
    """Compile ptstop.c into dest_dir (the library's path); OSError or
    CalledProcessError when it cannot be."""
    return build_shared(SOURCE, "ptstop", dest_dir)


_loaded = None      # (the library or None, why not)


def load() -> Tuple[Optional[ctypes.CDLL], str]:
    """(the library, "") or (None, why record samples in Python)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    if os.environ.get("LJGDB_SAMPLER") == "python":
        _loaded = (None, "LJGDB_SAMPLER=python")
        return _loaded
    lib, why = load_shared(SOURCE, "ptstop", "the C sampler", _cache_dir())
    if lib is None:
        _loaded = (None, why)
        return _loaded
    lib.pts_sample.restype = ctypes.c_int
    lib.pts_sample.argtypes = (
        ctypes.c_int, ctypes.POINTER(_Thread),
        ctypes.c_int, ctypes.POINTER(_Range), ctypes.c_int, ctypes.c_char_p,
        ctypes.POINTER(_Follow), ctypes.c_int, ctypes.c_char_p, ctypes.c_uint64,
        ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_uint64,
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Result))
    lib.pts_batch.restype = ctypes.c_int
    lib.pts_batch.argtypes = (
        ctypes.c_int, ctypes.POINTER(_Call), ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
        ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int))
    _loaded = (lib, "")
    return _loaded


class Stopped(object):
    """What one stop read: threads [(tid, {reg: value})] in the order
    listed (main thread first); states {tid: (state letter or None, on a
    CPU)} of every thread held, from before the stop; the ranges [(lo,
    bytes)] (each as much as could be read from lo), the followed objects'
    among them; followed [(lo, hi)] of those tried; stacks {tid: (lo, hi
    tried, bytes)}; held and wait in seconds."""

    def __init__(self) -> None:
        self.threads = []
        self.states = {}
        self.ranges = []
        self.followed = []
        self.stacks = {}
        self.held = 0.0
        self.wait = 0.0


class _Call(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_void_p), ("ranges", ctypes.c_void_p),
                ("buf", ctypes.c_void_p), ("follows", ctypes.c_void_p),
                ("fbuf", ctypes.c_void_p), ("stacks", ctypes.c_void_p),
                ("res", ctypes.c_void_p), ("max_threads", ctypes.c_int64),
                ("fbuf_size", ctypes.c_uint64)]


class _Slot(object):
    """The buffers one stop writes: the threads, each thread's stack, the
    ranges of the plan, the followed objects (ptstop.c's pts_sample
    arguments; a batch has one slot per stop)."""

    def __init__(self, nthreads: int, stack_slot: int) -> None:
        self.nthreads = nthreads
        self.threads = (_Thread * nthreads)()
        self.stacks = ctypes.create_string_buffer(nthreads * stack_slot)
        self.ranges = (_Range * 1)()
        self.plan = None            # the ranges the buffers are laid out for
        self.buf = ctypes.create_string_buffer(1)
        self.follows = (_Follow * 1)()
        self.followed = None        # what follows holds
        self.fbuf = ctypes.create_string_buffer(FOLLOWED)
        self.result = _Result()

    def lay_out(self, ranges: List[Tuple[int, int]],
                follows: List[Tuple[int, int, int, int, int, int, int, int]]) -> None:
        if ranges != self.plan:
            rs = (_Range * max(len(ranges), 1))()
            off = 0
            for i, (lo, hi) in enumerate(ranges):
                rs[i].lo, rs[i].hi, rs[i].offset = lo, hi, off
                off += hi - lo
            self.ranges, self.plan = rs, list(ranges)
            if len(self.buf) < off:
                self.buf = ctypes.create_string_buffer(off)
        if follows != self.followed:
            self.follows = (_Follow * max(len(follows), 1))()
            for f, v in zip(self.follows, follows):
                (f.at, f.mask, f.at_size, f.size, f.array_at, f.array_at_size, f.count_at,
                 f.item) = v
            self.followed = list(follows)


class Stopper(object):
    """pts_sample over one process; below/above: the stack copied around
    each thread's stack pointer; sp_index: its word in NT_PRSTATUS."""

    def __init__(self, lib: ctypes.CDLL, pid: int, reg_names: Sequence[str], sp_name: str,
                 below: int, above: int, timeout: float) -> None:
        self.lib, self.pid, self.names = lib, pid, list(reg_names)
        self.sp_index = self.names.index(sp_name)
        self.below, self.above = below, above
        self.slot = below + above + 2 * 4096
        self.timeout_ms = int(timeout * 1000)
        # Room for 16 threads at first (a stop that needs more grows it).
        self.slots = [_Slot(16, self.slot)]
        self.follows = []

    def follow(self, follows: Sequence[Tuple[int, int, int, int, int, int, int, int]]) -> None:
        """The objects each stop copies at an address it reads then (ptstop.c's
        pts_follow): [(at, mask, at_size, size, array_at, array_at_size,
        count_at, item)]."""
        self.follows = list(follows)

    def raw_stop(self, ranges: List[Tuple[int, int]], sigwait: bool) -> int:
        """pts_sample into the first slot, its return code (the result in
        the slot)."""
        s = self.slots[0]
        s.lay_out(ranges, self.follows)
        return self.lib.pts_sample(self.pid, s.threads, s.nthreads, s.ranges, len(ranges), s.buf,
                                   s.follows, len(self.follows), s.fbuf, len(s.fbuf),
                                   self.below, self.above, s.stacks, self.slot, self.sp_index,
                                   int(sigwait), self.timeout_ms, ctypes.byref(s.result))

    def stop(self, ranges: List[Tuple[int, int]], sigwait: bool) -> Stopped:
        """One stop: the threads' states, then registers of every thread,
        the ranges [(lo, hi)] and each thread's stack.  StopFailed when the
        C side failed (every thread let go)."""
        while True:
            rc = self.raw_stop(ranges, sigwait)
            r, n = self.slots[0].result, self.slots[0].nthreads
            if rc == 0 or r.err != errno.E2BIG or n >= MAX_THREADS:
                break
            self.slots = [_Slot(min(MAX_THREADS, 4 * n), self.slot)]     # (and again)
        if rc != 0:
            raise StopFailed(r.err, r.err_tid)
        return self._read(self.slots[0], len(ranges))

    def batch(self, ranges: List[Tuple[int, int]], sigwait: bool, due: Sequence[float]
              ) -> Tuple[List[Stopped], Optional["StopFailed"]]:
        """A stop at each of the CLOCK_MONOTONIC times due (seconds, as
        time.monotonic gives them), made by pts_batch in one call, each
        into a slot of its own: ([what each stop made read], the StopFailed
        of the stop that failed, or None).  A signal in a sleep ends the
        batch early, with the stops made so far."""
        n = len(due)
        want = self.slots[0].nthreads
        while len(self.slots) < n:
            self.slots.append(_Slot(want, self.slot))
        calls = (_Call * n)()
        for c, s in zip(calls, self.slots):
            if s.nthreads != want:
                s.__init__(want, self.slot)
            s.lay_out(ranges, self.follows)
            (c.threads, c.ranges, c.buf, c.follows, c.fbuf, c.stacks, c.res) = (
                ctypes.addressof(b) for b in (s.threads, s.ranges, s.buf, s.follows, s.fbuf,
                                              s.stacks, s.result))
            c.max_threads, c.fbuf_size = s.nthreads, len(s.fbuf)
        times = (ctypes.c_uint64 * n)(*(int(d * 1e9) for d in due))
        done = ctypes.c_int()
        rc = self.lib.pts_batch(self.pid, calls, n, times, len(ranges), len(self.follows),
                                self.below, self.above, self.slot, self.sp_index, int(sigwait),
                                self.timeout_ms, ctypes.byref(done))
        got = [self._read(self.slots[i], len(ranges)) for i in range(done.value)]
        failed = None
        if rc == -1:
            r = self.slots[done.value].result
            failed = StopFailed(r.err, r.err_tid)
        return got, failed

    def _read(self, s: _Slot, nranges: int) -> Stopped:
        """What the stop in slot s read."""
        out = Stopped()
        r, rs = s.result, s.ranges
        out.held, out.wait = r.held_ns / 1e9, r.wait_ns / 1e9
        buf = s.buf
        for i in range(nranges):
            got = rs[i].got
            if got > 0:
                off = rs[i].offset
                out.ranges.append((rs[i].lo, buf[off:off + got]))
        fbuf = s.fbuf
        for i in range(len(self.follows)):
            for got in (s.follows[i].obj, s.follows[i].array):
                if got.hi > got.lo:
                    out.followed.append((got.lo, got.hi))
                    if got.got > 0:
                        out.ranges.append((got.lo, fbuf[got.offset:got.offset + got.got]))
        stacks, slot, names = s.stacks, self.slot, self.names
        k = len(names)
        for i in range(r.nthreads):
            th = s.threads[i]
            state = th.sched.decode() if th.sched != b"\0" else None
            out.states[th.tid] = (state, bool(th.running[0]) if state == "R" else False)
            if th.state != 0:
                continue
            regs = th.regs[:min(th.nregs, k)]
            out.threads.append((th.tid, dict(zip(names, regs))))
            if th.stack_got > 0:
                start = i * slot
                out.stacks[th.tid] = (th.stack_lo, th.stack_hi,
                                      stacks[start:start + th.stack_got])
        out.threads.sort(key=lambda t: (t[0] != self.pid, t[0]))
        return out


class StopFailed(LjError):
    def __init__(self, err: int, tid: int) -> None:
        LjError.__init__(self, "%s (thread %d)" % (os.strerror(err), tid))
        self.errno, self.tid = err, tid
