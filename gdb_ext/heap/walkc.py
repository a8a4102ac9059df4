"""lgcstat's heap walk in C (walkc.c), for gcstat.HeapWalker: the same
objects, sizes, counts, checks and errors as its Python loops, some twenty
times faster.

walkc.c is compiled at first use into ljgdb's cache, as the heap graph's
graphc.c is (or found beside this file when pip built it).  Without a C
compiler, or with LJGDB_HEAPWALK=python, load() says why and HeapWalker
walks in Python.

The C code reads no memory itself: it asks for the pieces the walker's
page cache holds (HeapWalker._locate), remembers each piece it was given,
and asks again only for one it never had, so gdb, lldb, the core reader
and --pid all serve it.  The pieces it was given stay alive here until
they add up to the page cache's bound; then they are all let go of at
once and the C code forgets them."""
import ctypes
import os
from typing import Any, Dict, List, Optional, Tuple, TYPE_CHECKING

from .. import consts as C
from ..cbuild import CHelper, address_of as _at, buffer_address, words as _words, zeros
from ..errors import CorruptError, FaultError, LjError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .gcstat import HeapWalker

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "walkc.c")
NT = 16
# walkc.c's errors
E_NONE, E_PY, E_CYCLE, E_BOUND, E_TYPE, E_NOTGC, E_SHORT, E_OOM = range(8)
# The members read, as (offset, size) pairs, in walkc.c's order.
FIELDS = ("nextgc", "marked", "gct", "b1", "b2", "tab_asize", "tab_hmask", "fnl_pc", "str_len",
          "th_openupval", "th_stacksize", "pt_sizept", "ud_udtype", "ud_len", "cd_ctypeid",
          "tr_nsnap", "tr_nins", "tr_nk", "tr_nsnapmap", "tr_startpt")
SCALARS = ("need", "str_need", "str_rounded", "has_trace", "cd_var_flag", "sz_tab", "sz_node",
           "sz_fnL0", "sz_fnC0", "sz_str", "sz_L", "sz_uv", "sz_ud", "sz_tr", "snap_size",
           "pt_size", "ref_size", "udtype_buffer", "sbufext_size")


def _no_memory(n: int) -> LjError:
    return LjError("the heap walk needs more memory than this process could allocate (%d "
                   "objects walked); a bigger machine, or a core read elsewhere" % n)


class _Fld(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint32), ("size", ctypes.c_uint32)]


class _Layout(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in SCALARS] + \
        [("type_need", ctypes.c_uint32 * NT)] + [(n, _Fld) for n in FIELDS]


LOCATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                          ctypes.POINTER(ctypes.c_uint64))
SIZE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_uint64)
READ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p)
PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64)


def _signatures() -> Dict[str, Tuple[Any, List[Any]]]:
    P, U64, VP, I64 = ctypes.POINTER, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int64
    INT = ctypes.c_int
    return {"walkc_new": (VP, [P(_Layout), U64, U64, ctypes.c_uint8, INT, U64, INT,
                               LOCATE, SIZE, SIZE, READ, PROGRESS]),
            "walkc_free": (None, [VP]),
            "walkc_walk": (I64, [VP, VP, U64, INT, U64]),
            "walkc_strings": (I64, [VP, ctypes.c_char_p, U64, ctypes.c_uint32, INT]),
            "walkc_wave": (I64, [VP]),
            "walkc_pending": (U64, [VP, P(VP)]),
            "walkc_take": (None, [VP, VP]),
            "walkc_error": (None, [VP, VP]),
            "walkc_threads": (U64, [VP, P(VP)]),
            "walkc_top": (U64, [VP, P(VP)]),
            "walkc_chunks": (U64, [VP, P(VP)]),
            "walkc_kept": (U64, [VP]),
            "walkc_sort_into": (None, [VP, VP, VP, VP, VP])}


_HELPER = CHelper(SOURCE, "walkc", "the heap walk's C code", "LJGDB_HEAPWALK", _signatures)
build = _HELPER.build       # (dest_dir): the library's path, as pip's build runs it
load = _HELPER.load         # (): (the library, "") or (None, why the walk is in Python)


def _layout(w: 'HeapWalker') -> _Layout:
    lay = w.lay
    hdr = lay.str
    out = _Layout()
    for name, value in (("need", w.need), ("str_need", w.sz_str + 8),
                        ("str_rounded", 1 if w.str_rounded else 0),
                        ("has_trace", 1 if w.rd_tr is not None else 0), ("cd_var_flag", 0x80),
                        ("sz_tab", w.sz_tab), ("sz_node", w.sz_node), ("sz_fnL0", w.sz_fnL0),
                        ("sz_fnC0", w.sz_fnC0), ("sz_str", w.sz_str), ("sz_L", w.sz_L),
                        ("sz_uv", w.sz_uv), ("sz_ud", w.sz_ud), ("sz_tr", w.sz_tr),
                        ("snap_size", getattr(w, "snap_size", 12)), ("pt_size", lay.pt.size),
                        ("ref_size", w.ref_size),
                        ("udtype_buffer", 0xFFFFFFFF if w.udtype_buffer is None
                         else w.udtype_buffer),
                        ("sbufext_size", w.sbufext.size if w.sbufext is not None else 0)):
        setattr(out, name, value)
    hdr_need = w.hdr_need
    for g in range(NT):
        s = lay.s.get(C.HEADER_STRUCT.get(g, ""))
        out.type_need[g] = s.size if s is not None else hdr_need
    nf = hdr.field("nextgc")
    pairs = {"nextgc": (nf.offset, nf.size), "marked": (hdr.marked, 1), "gct": (hdr.gct, 1),
             "b1": (hdr.gct + 1, 1), "b2": (hdr.gct + 2, 1)}
    for name, (s, member) in (("tab_asize", (lay.tab, "asize")), ("tab_hmask", (lay.tab, "hmask")),
                              ("fnl_pc", (lay.fnL, "pc")), ("str_len", (lay.str, "len")),
                              ("th_openupval", (lay.L, "openupval")),
                              ("th_stacksize", (lay.L, "stacksize")),
                              ("pt_sizept", (lay.pt, "sizept")), ("ud_udtype", (lay.ud, "udtype")),
                              ("ud_len", (lay.ud, "len")), ("cd_ctypeid", (lay.cd, "ctypeid"))):
        f = s.field(member)
        pairs[name] = (f.offset, f.size)
    if lay.trace is not None:
        for name in ("nsnap", "nins", "nk", "nsnapmap"):
            f = lay.trace.field(name)
            pairs["tr_" + name] = (f.offset, f.size)
        pairs["tr_startpt"] = (lay.trace.startpt, w.ref_size)
    for name in FIELDS:
        off, size = pairs.get(name, (0, 1))
        if size not in (1, 2, 4, 8):
            raise LjError("a member of %d bytes (%s) for the C heap walk" % (size, name))
        setattr(out, name, _Fld(off, size))
    return out


class CWalk(object):
    """One walkc_t for one HeapWalker: its walks, then its results."""

    def __init__(self, lib: ctypes.CDLL, w: 'HeapWalker', bound: int, deadmask: int) -> None:
        self.lib, self.w = lib, w
        self.held = {}              # pieces handed to the C code: (base, length) -> buffer
        self.held_bytes = 0
        self.last = None            # the piece the C code reads now (a short one is in no table)
        self.error = None           # the exception a callback caught
        self.what = ""
        # (kept referenced: the C code calls them until freed)
        self._cbs = (LOCATE(self._locate), SIZE(self._ctsize), SIZE(self._ubuf),
                     READ(self._read), PROGRESS(self._progress) if w.progress is not None
                     else PROGRESS())
        lay = _layout(w)
        self.h = lib.walkc_new(ctypes.byref(lay), bound, w.every, deadmask,
                               1 if w.kept is not None else 0, w.top_n, 1 if w.by_chunk else 0,
                               *self._cbs)
        if not self.h:
            raise _no_memory(0)
        self._stats = (ctypes.c_uint64 * (6 * NT))()

    def close(self) -> None:
        if self.h:
            self.lib.walkc_free(self.h)
            self.h = None
        self.held.clear()
        self.last = None
        # The callbacks hold this object and it holds the walker (and its
        # page cache): let go of both now, not at the next full collection
        # (a gdb session's next commands would find the pages still held).
        self._cbs = ()
        self.w = None

    # --- the callbacks (an exception is kept and re-raised by _done) -------
    def _locate(self, o: int, need: int, out: Any) -> int:
        try:
            base, buf = self.w._locate(o, need, self.what)
            addr = buffer_address(buf)
        except BaseException as e:      # (KeyboardInterrupt too: raised after)
            self.error = e
            return -1
        n = len(buf)
        rc = 0
        if (n in (1 << 20, 1 << 16, 1 << 12)) and not base & (n - 1):
            # (The C code keeps the piece by its base and length: one
            # handed over again replaces it there as here.)
            if (base, n) not in self.held and isinstance(buf, bytes):
                if self.held_bytes + n > self.w.mem.max_bytes:
                    self.held.clear()
                    self.held_bytes = 0
                    rc = 1
                self.held_bytes += n
            self.held[base, n] = buf
        self.last = buf
        out[0], out[1], out[2] = base, addr, n
        return rc

    def _ctsize(self, ctypeid: int) -> int:
        try:
            return self.w.cdata_size(ctypeid)
        except BaseException as e:
            self.error = e
            return -1

    def _ubuf(self, o: int) -> int:
        try:
            return self.w._buffer_bytes(o + self.w.sz_ud)
        except BaseException as e:
            self.error = e
            return -1

    def _read(self, addr: int, n: int, dst: int) -> int:
        try:
            data = self.w.mem.read(addr, n)
            ctypes.memmove(dst, data, n)
            return 0
        except BaseException as e:
            self.error = e
            return -1

    def _progress(self, n: int) -> int:
        try:
            self.w.progress(n)
            return 0
        except BaseException as e:
            self.error = e
            return -1

    # --- the walks -----------------------------------------------------------
    def walk(self, starts: List[int], what: str, only: Optional[int], stop_after: int) -> int:
        arr = (ctypes.c_uint64 * len(starts))(*starts)
        self.what = what
        r = self.lib.walkc_walk(self.h, arr, len(starts), -1 if only is None else only,
                                stop_after)
        return self._done(r, what, only, False)

    def strings(self, data: bytes, count: int, rs: int, waves: bool, what: str) -> int:
        self.what = what
        r = self.lib.walkc_strings(self.h, data, count, rs, 1 if waves else 0)
        return self._done(r, what, C.GCT_STR, True)

    def pending(self) -> Tuple[int, int]:
        """(strings waiting for the next wave, the first of them)."""
        p = ctypes.c_void_p()
        n = self.lib.walkc_pending(self.h, ctypes.byref(p))
        return n, (_words(p.value, 1)[0] if n else 0)

    def wave(self, what: str) -> int:
        self.what = what
        r = self.lib.walkc_wave(self.h)
        self._done(r, what, C.GCT_STR, True)
        return r

    def _done(self, r: int, what: str, only: Optional[int], strings: bool) -> int:
        """Fold this call's counts into the HeapStat, then raise the error
        the walk stopped at as the Python walk raises it."""
        st = self.w.st
        lib = self.lib
        s = self._stats
        lib.walkc_take(self.h, s)
        for g in range(NT):
            if s[g]:
                st.types[g].add(*s[g::NT])
        e = (ctypes.c_uint64 * 4)()
        lib.walkc_error(self.h, e)
        st.objects = e[3]
        if r >= 0:
            return r
        err, o, gct = e[0], e[1], e[2]
        if err == E_PY:
            exc, self.error = self.error, None
            raise exc
        if err == E_CYCLE:
            if strings:
                raise CorruptError("%s: the string chain comes back to 0x%x: a cycle" % (what, o), o)
            raise CorruptError("%s comes back to the object at 0x%x: a cycle" % (what, o), o)
        if err == E_BOUND:
            raise CorruptError("%s is longer than g->gc.total allows (%d objects): a cycle?"
                               % (what, self.w.bound), o)
        if err == E_TYPE:
            if strings:
                raise CorruptError("%s: object at 0x%x has type %s, expected a string"
                                   % (what, o, C.GCT_NAMES.get(gct, gct)), o)
            raise CorruptError("%s: object at 0x%x has type %s, expected %s"
                               % (what, o, C.GCT_NAMES.get(gct, gct), C.GCT_NAMES[only]), o)
        if err == E_NOTGC:
            raise CorruptError("%s: no GC object at 0x%x (type byte %d is not a GC type)"
                               % (what, o, gct), o)
        if err == E_SHORT:
            raise FaultError("cannot access memory after 0x%x" % o, o,
                             "GC object at 0x%x on %s" % (o, what))
        raise _no_memory(e[3])

    # --- results ---------------------------------------------------------
    def threads(self) -> List[Tuple[int, int]]:
        """(address, openupval) of every thread found."""
        p = ctypes.c_void_p()
        n = self.lib.walkc_threads(self.h, ctypes.byref(p))
        w = _words(p.value, 2 * n)
        return [(w[2 * i], w[2 * i + 1]) for i in range(n)]

    def top(self) -> List[Tuple[int, int, int]]:
        p = ctypes.c_void_p()
        n = self.lib.walkc_top(self.h, ctypes.byref(p))
        w = _words(p.value, 3 * n)
        return [(w[3 * i], w[3 * i + 1], w[3 * i + 2]) for i in range(n)]

    def chunks(self) -> Dict[int, List[int]]:
        p = ctypes.c_void_p()
        n = self.lib.walkc_chunks(self.h, ctypes.byref(p))
        w = _words(p.value, 3 * n)
        return {w[3 * i]: [w[3 * i + 1], w[3 * i + 2]] for i in range(n)}

    def objects(self) -> Tuple[Any, bytes, Any, bytes]:
        """(addresses, types, sizes, dead) in address order, as
        HeapWalker.objects gives them; the C code's copy is let go of."""
        self.held.clear()
        self.last = None
        n = self.lib.walkc_kept(self.h)
        addrs, sizes = zeros("Q", n), zeros("Q", n)
        gcts, dead = bytearray(n), bytearray(n)
        g = (ctypes.c_char * n).from_buffer(gcts) if n else None
        d = (ctypes.c_char * n).from_buffer(dead) if n else None
        self.lib.walkc_sort_into(self.h, _at(addrs), g and ctypes.addressof(g), _at(sizes),
                                 d and ctypes.addressof(d))
        del g, d
        return addrs, bytes(gcts), sizes, bytes(dead)
