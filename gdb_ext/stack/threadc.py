"""The thread scan's common case in C (threadc.c), for ThreadScanner.scan:
the same summaries as its Python fast path, at about one microsecond a
thread (most of it making the summaries in Python) instead of about two.

threadc.c is compiled at first use into ljgdb's cache, as the heap graph's
graphc.c is (or found beside this file when pip built it).  Without a C
compiler, or with LJGDB_THREADSCAN=python, load() says why and the scan
stays in Python.

The C code reads no memory.  It lists each thread's lua_State, then the
live part of each stack ([L->stack, L->base)), sorted by address and
grouped into runs; each run is one read through the scanner's page
cache, so gdb, lldb, the core reader and --pid all serve it.  A run that
cannot be read whole is read a request at a time; a thread whose bytes do
not read, or whose stack matches no shape the Python scan has walked, is
left to the Python scan (which adds the shapes it finds for the next
threads)."""
import ctypes
import os
from array import array
from typing import Any, Dict, List, Optional, Sequence, Tuple, TYPE_CHECKING

from .. import consts as C
from ..cbuild import CHelper, address_of, feed_runs, words, zeros
from .frames import LJ_CONT_FFI_CALLBACK

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .threadscan import ThreadScanner

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "threadc.c")
GAP = 4096              # requests closer than this share one read
MAX_RUN = 1 << 20       # and one read is at most this long
MAX_REL = 1 << 20       # a stack deeper than this is the Python scan's
STATUS = (None, "suspended", "dead", "idle")       # threadc.c's states
_FIELDS = ("gct", "status", "base", "top", "stack", "stacksize")


class _Layout(ctypes.Structure):
    _fields_ = [("lsize", ctypes.c_uint32), ("fr2", ctypes.c_uint32),
                ("off", ctypes.c_uint32 * 7), ("size", ctypes.c_uint32 * 7),
                ("gct_thread", ctypes.c_uint32), ("st_yield", ctypes.c_uint32),
                ("st_ok", ctypes.c_uint32)] + \
        [(n, ctypes.c_uint64) for n in ("main", "skip1", "skip2", "cont_ffi_cb", "maxrel")]


def _signatures() -> Dict[str, Tuple[Any, List[Any]]]:
    P, U64, U32, VP = ctypes.POINTER, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p
    return {"threadc_new": (VP, [P(_Layout), U64, VP, VP, VP, VP, VP]),
            "threadc_free": (None, [VP]),
            "threadc_add_shape": (ctypes.c_int, [VP, U64, U32, VP, ctypes.c_char_p, U32, U32,
                                                 VP]),
            "threadc_plan": (ctypes.c_int64, [VP, ctypes.c_int, U64, U64, P(VP)]),
            "threadc_feed": (ctypes.c_int64, [VP, U64, ctypes.c_char_p, U64]),
            "threadc_peek": (ctypes.c_int, [VP, P(U64)]),
            "threadc_skip": (None, [VP])}


_HELPER = CHelper(SOURCE, "threadc", "the thread scan's C code", "LJGDB_THREADSCAN", _signatures)
build = _HELPER.build       # (dest_dir): the library's path, as pip's build runs it
load = _HELPER.load         # (): (the library, "") or (None, why the scan stays in Python)


def layout(sc: 'ThreadScanner') -> _Layout:
    lay = sc.vm.lay
    fields = [lay.L.field(n) for n in _FIELDS]
    fields.append(lay.L.field("exdata") if sc.exdata_off is not None else None)
    y = _Layout(lsize=lay.L.size, fr2=lay.fr2, gct_thread=C.GCT_THREAD, st_yield=C.LUA_YIELD,
                st_ok=C.LUA_OK, main=sc.main or 0, skip1=sc.running or 0,
                skip2=sc.vmthread or 0, cont_ffi_cb=LJ_CONT_FFI_CALLBACK, maxrel=MAX_REL)
    for i, f in enumerate(fields):
        y.off[i], y.size[i] = (f.offset, f.size) if f is not None else (0, 0)
    return y


class Shapes(object):
    """The shapes the Python scan walked, in the order made, as the C code
    takes them: each one's depth, the stack's regions its walk read and
    their bytes, the words that must not be an FFI callback's; with its
    frame keys."""

    def __init__(self) -> None:
        self.keys = []
        self.parts = []

    def add(self, rel: int, regions: Sequence[Tuple[int, int]], want: bytes,
            cbs: Sequence[int], keys: Tuple[Any, ...]) -> None:
        self.parts.append((rel, regions, want, cbs))
        self.keys.append(keys)


class _Scan(object):
    """One threadc_t over a list of threads."""

    def __init__(self, lib: ctypes.CDLL, sc: 'ThreadScanner', Ls: List[int]) -> None:
        n = len(Ls)
        self.lib, self.sc, self.n = lib, sc, n
        self.Ls = array("Q", Ls)
        self.state = bytearray(n)
        self.shape = zeros("i", n)
        self.stacksize = zeros("I", n)
        self.exdata = zeros("Q", n)
        self._buf = (ctypes.c_char * n).from_buffer(self.state) if n else None
        self.lay = layout(sc)
        self.h = lib.threadc_new(ctypes.byref(self.lay), n, address_of(self.Ls),
                                 ctypes.addressof(self._buf) if n else None,
                                 address_of(self.shape), address_of(self.stacksize),
                                 address_of(self.exdata))
        if not self.h:
            raise MemoryError("threadc_new")

    def close(self) -> None:
        if self.h:
            self.lib.threadc_free(self.h)
            self.h = None
        self._buf = None

    def shapes(self, shapes: Shapes) -> None:
        """Pass the shapes on to the C code (numbered as in shapes)."""
        U32 = ctypes.c_uint32
        for rel, regions, want, cbs in shapes.parts:
            reg = (U32 * (2 * len(regions)))(*[x for r in regions for x in r])
            cb = (U32 * max(1, len(cbs)))(*cbs)
            if self.lib.threadc_add_shape(self.h, rel, len(regions), reg, want, len(want),
                                          len(cbs), cb) < 0:
                raise MemoryError("threadc_add_shape")

    def phase(self, k: int) -> None:
        """Plan phase k's requests, read them, feed them."""
        lib, h, mem = self.lib, self.h, self.sc.mem
        out = ctypes.c_void_p()
        nruns = lib.threadc_plan(h, k, GAP, MAX_RUN, ctypes.byref(out))
        if nruns < 0:
            raise MemoryError("threadc_plan")
        runs = words(out.value, 3 * nruns)
        feed_runs(mem.read, runs, lambda base, data, length: lib.threadc_feed(h, base, data, length),
                  lambda al: lib.threadc_peek(h, al), lambda: lib.threadc_skip(h))


def scan(lib: ctypes.CDLL, sc: 'ThreadScanner', Ls: List[int]
         ) -> Tuple[bytearray, List[int], List[int], Optional[array]]:
    """(states, stack sizes, shapes, exdata) of each of Ls: its state (0:
    left to the Python scan; else an index into STATUS), its stack's size
    in slots, its shape (an index into sc.cshapes, -1: no frames) and its
    L->exdata (None: the build has none)."""
    s = _Scan(lib, sc, Ls)
    try:
        s.shapes(sc.cshapes)
        s.phase(0)
        s.phase(1)
    finally:
        s.close()
    return (s.state, s.stacksize.tolist(), s.shape.tolist(),
            s.exdata if sc.exdata_off is not None else None)
