"""The heap graph's references and dominator tree in C (graphc.c), for
heapdom.Dominators: the same numbers, orders and sizes as its Python
search, at a few hundred nanoseconds an object instead of several
microseconds; and the V8 heap snapshot's named graph and text
(SnapGraph, for heapsnapshot.CSnapshotWriter).

graphc.c is compiled at first use into ljgdb's cache, as the live
backend's C sampler is (or found beside this file when pip built it).
Without a C compiler, or with LJGDB_HEAPGRAPH=python, load() says why and
Dominators searches in Python.

The C code reads no memory itself.  It lists the bytes it needs (each
table's, function's and upvalue's own, then the tables' array and hash
parts and open upvalues' slots) sorted by address and grouped into runs;
each run is one read through the Heap's page cache, so gdb, lldb, the core
reader and --pid all serve it.  A run that cannot be read whole is read a
request at a time, and a request that cannot be read is passed over, as
the Python search passes over what it cannot read.  The memory at hand
(the core reader's mapped segments; in gdb, lldb and --pid the pages the
walk's page cache holds) is handed to the C code at the start: a request
inside it is decoded as it is made, and only the rest is planned and read."""
import ctypes
import os
from array import array
from typing import Any, Callable, Dict, List, Optional, Tuple, TYPE_CHECKING

from .. import consts as C
from ..cbuild import (CHelper, address_of as _at, buffer_address, feed_runs, words as _words,
                      zeros as _zeros)
from ..errors import LjError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .heapgraph import Heap

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graphc.c")
GAP = 64 << 10          # requests closer than this share one read
PAGE_GAP = 4095         # (when the target cannot list its regions: never across a page)
MAX_RUN = 16 << 20      # and one read is at most this long (a longer request alone)
# Objects whose references the C code decodes from memory; the others'
# (prototypes, userdata, traces) come from Heap.graph_targets, and so do
# the threads' where a frame's function is no slot of its own (not LJ_FR2:
# Heap._thread walks their frames) and in the heap snapshot (its edges
# name each slot).
IN_C = (C.GCT_TAB, C.GCT_FUNC, C.GCT_UPVAL)
THREADS_IN_C = IN_C + (C.GCT_THREAD,)
NO_REFS = (C.GCT_STR, C.GCT_CDATA)


class GraphMemoryError(LjError):
    """The C code could not allocate what the graph needs."""


def _no_memory(n: int) -> GraphMemoryError:
    return GraphMemoryError(
        "the heap graph of %d objects needs more memory than this process could allocate; "
        "lgcstat alone and lgcstat --top count the heap without the graph" % n)


class _Layout(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint32) for n in ("rs", "ms", "gc64", "nil_shift")] + \
        [("nil_top", ctypes.c_uint64)] + \
        [(n, ctypes.c_uint32) for n in (
            "tab_size", "tab_mt", "tab_asize", "tab_hmask", "tab_array", "tab_node",
            "node_size", "node_key", "node_val",
            "fn_ffid", "fn_nup", "fn_env", "fnl_pc", "fnl_uvptr", "fnc_upvalue", "pt_size",
            "uv_size", "uv_v", "str_len", "str_size",
            "th_size", "th_env", "th_stack", "th_top", "ps")]


def _signatures() -> Dict[str, Tuple[Any, List[Any]]]:
    P, U64, VP = ctypes.POINTER, ctypes.c_uint64, ctypes.c_void_p
    INT = ctypes.c_int
    return {"graphc_new": (VP, [P(_Layout), U64, VP, ctypes.c_char_p, VP, INT, VP, U64]),
            "graphc_objects": (INT, [VP, INT]),
            "graphc_free": (None, [VP]),
            "graphc_oom": (ctypes.c_int, [VP]),
            "graphc_plan": (U64, [VP, U64, U64, VP, U64, P(VP)]),
            "graphc_peek": (ctypes.c_int, [VP, P(U64)]),
            "graphc_feed": (ctypes.c_int64, [VP, U64, VP, U64]),
            "graphc_skip": (None, [VP]),
            "graphc_read_all": (None, [VP]),
            "graphc_metatables": (U64, [VP, P(VP)]),
            "graphc_set_weak": (ctypes.c_int, [VP, ctypes.c_char_p]),
            "graphc_add": (ctypes.c_int, [VP, ctypes.c_uint32, VP, U64]),
            "graphc_csr": (ctypes.c_int, [VP]),
            "graphc_dominators": (ctypes.c_int, [VP, VP, U64] + [VP] * 6),
            "graphc_bfs": (ctypes.c_int, [VP, VP, U64, ctypes.c_uint32, VP]),
            "graphc_result": (None, [VP, P(U64)]),
            "graphc_top": (U64, [VP, VP, ctypes.c_char_p, U64, ctypes.c_uint32, U64, VP]),
            "graphc_unreached": (None, [VP, VP, U64, P(U64)]),
            "graphc_shared": (None, [VP, VP, VP, U64, U64, P(U64)]),
            "graphc_split": (None, [VP, U64, U64, VP, VP, VP, VP]),
            "graphc_find": (None, [VP, ctypes.c_uint32, VP]),
            "graphc_diff": (None, [VP, ctypes.c_char_p, VP, U64, VP, ctypes.c_char_p, VP, U64,
                                   VP, VP, P(U64), P(U64)]),
            "graphc_owners": (None, [VP, VP, U64, ctypes.c_char_p, VP]),
            "graphc_snap_begin": (INT, [VP, VP, VP, VP]),
            "graphc_snap_weak_tables": (U64, [VP, P(VP)]),
            "graphc_snap_pending": (U64, [VP, P(VP)]),
            "graphc_snap_resolve": (None, [VP, ctypes.c_char_p, VP]),
            "graphc_snap_add": (INT, [VP, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_char_p,
                                      VP, VP, U64]),
            "graphc_snap_sort": (ctypes.c_int64, [VP]),
            "graphc_snap_open": (INT, [VP, INT]),
            "graphc_snap_flush": (INT, [VP]),
            "graphc_snap_nodes": (None, [VP, ctypes.c_char_p, ctypes.c_uint32]),
            "graphc_snap_edges": (None, [VP, INT, ctypes.c_uint32]),
            "graphc_snap_strings": (ctypes.c_int64, [VP, ctypes.c_uint32, U64])}


_HELPER = CHelper(SOURCE, "graphc", "the heap graph's C code", "LJGDB_HEAPGRAPH", _signatures)
build = _HELPER.build       # (dest_dir): the library's path, as pip's build runs it
load = _HELPER.load         # (): (the library, "") or (None, why the graph is searched in Python)


def _layout(heap: 'Heap') -> _Layout:
    lay = heap.lay
    fn, fl = lay.fnC, lay.fnL
    return _Layout(
        rs=lay.ref_size, ms=lay.mref_size, gc64=1 if lay.gc64 else 0,
        nil_shift=heap.nil_shift, nil_top=heap.nil_top,
        tab_size=lay.tab.size, tab_mt=lay.tab.metatable, tab_asize=lay.tab.asize,
        tab_hmask=lay.tab.hmask, tab_array=lay.tab.array, tab_node=lay.tab.node,
        node_size=lay.node.size, node_key=lay.node.key, node_val=lay.node.val,
        fn_ffid=fn.ffid, fn_nup=fn.nupvalues, fn_env=fn.env, fnl_pc=fl.pc, fnl_uvptr=fl.uvptr,
        fnc_upvalue=fn.upvalue, pt_size=lay.pt.size, uv_size=lay.uv.size, uv_v=lay.uv.v,
        str_len=lay.str.len, str_size=lay.str.size, th_size=lay.L.size, th_env=lay.L.env,
        th_stack=lay.L.stack, th_top=lay.L.top, ps=lay.ptr_size)


class _Graph(object):
    """One graphc_t: fed from the heap's memory, then searched."""
    THREADS = True          # the threads' references decoded in C where they can be

    def __init__(self, lib: ctypes.CDLL, heap: Any, memory: bool, strong: bool = False,
                 weak_too: bool = False) -> None:
        self.lib, self.heap = lib, heap
        addrs, gcts = heap.addrs, bytes(heap.gcts)
        # (kept referenced: the C code points into them until freed)
        self._arrays = (addrs, gcts, heap.sizes)
        n = len(addrs)
        lay = _layout(heap) if memory else _Layout()
        spans = sorted((r[0], r[1]) for r in heap.t.regions() or ()) if memory else []
        # The memory at hand (a core's mapped segments, or the page
        # cache's pages): its requests are decoded in C as they are made.
        self._inplace, self._views = self._held(spans) if memory else (array("Q"), [])
        self.h = lib.graphc_new(ctypes.byref(lay), n, _at(addrs), gcts if n else None,
                                _at(heap.sizes), 1 if strong else 0, _at(self._inplace),
                                len(self._inplace) // 3)
        if not self.h:
            raise _no_memory(n)
        self.memory, self.strong, self.weak_too = memory, strong, weak_too
        # (lgcref's search takes the threads in Python, as SnapGraph does)
        self.in_c = (THREADS_IN_C if self.THREADS and memory and heap.lay.fr2 and not weak_too
                     else IN_C)
        # The readable regions (start, end, sorted and merged): no read
        # crosses from one to the next.
        self.regions = array("Q")
        for lo, hi in spans:
            if len(self.regions) and lo <= self.regions[-1]:
                self.regions[-1] = max(self.regions[-1], hi)
            else:
                self.regions.extend((lo, hi))

    def _held(self, spans: List[Tuple[int, int]]) -> Tuple[array, List[Any]]:
        """(start, end, address) of each piece of memory held in place,
        sorted, and the buffers that keep them: the regions the target
        holds in place (a core's mapped segments), else the pages the
        walk read that the Heap's page cache still holds (gdb, lldb,
        --pid).  The buffers are kept here, so a page the cache drops
        while the graph is read stays where the C code was told it is."""
        pieces = []
        for lo, _ in spans:
            m = self.heap.t.mapped(lo)
            if m is not None and m[0] == lo and m[1] > lo:
                pieces.append(m)
        mem = getattr(self.heap, "mem", None)
        if not pieces and mem is not None:
            pieces = [(base, base + len(data), data) for base, data in mem.pieces()]
        pieces.sort(key=lambda p: p[0])
        out, views = array("Q"), []
        for lo, hi, buf in pieces:
            if len(out) and lo < out[-2]:
                continue                # (overlapping pieces: the first is enough)
            views.append(buf)
            out.extend((lo, hi, buffer_address(buf)))
        return out, views

    def close(self) -> None:
        if self.h:
            self.lib.graphc_free(self.h)
            self.h = None
        self._views = []

    def _check(self, rc: int) -> None:
        if rc < 0 or self.lib.graphc_oom(self.h):
            raise _no_memory(len(self.heap.addrs))

    def feed(self) -> int:
        """Read every waiting request's bytes and decode them; the number
        of runs read (0: nothing was waiting)."""
        lib, h, mem = self.lib, self.h, self.heap.mem
        out = ctypes.c_void_p()
        reg = self.regions
        nruns = lib.graphc_plan(h, GAP if len(reg) else PAGE_GAP, MAX_RUN, _at(reg),
                                len(reg) // 2, ctypes.byref(out))
        self._check(0)
        runs = _words(out.value, 3 * nruns)

        mapped = self.heap.t.mapped

        def read(base, length):
            # A run inside memory the target holds in place (a core's
            # mmap) is handed over where it is, not copied.
            m = mapped(base)
            if m is not None and base + length <= m[1]:
                return m[2][base - m[0]:base - m[0] + length]
            return mem.read(base, length)

        def decode(base, data, length):
            done = lib.graphc_feed(h, base, buffer_address(data), length)
            self._check(done)
            return done
        feed_runs(read, runs, decode, lambda al: lib.graphc_peek(h, al),
                  lambda: lib.graphc_skip(h))
        return nruns

    def weak(self) -> None:
        """Each metatable's __mode, then the parts of the tables that have
        a metatable become requests (the others' are asked for already)."""
        out = ctypes.c_void_p()
        m = self.lib.graphc_metatables(self.h, ctypes.byref(out))
        self._check(0)
        mts = _words(out.value, m)
        modes = bytes(len(mts)) if self.weak_too else bytes(
            (1 if wk else 0) | (2 if wv else 0)
            for wk, wv in (self.heap.weak_mode(mt) for mt in mts))
        self._check(self.lib.graphc_set_weak(self.h, modes))

    def others(self, kinds: Tuple[int, ...]) -> None:
        """The references of the objects the C code does not decode."""
        heap, add, h = self.heap, self.lib.graphc_add, self.h
        addrs, gcts = heap.addrs, heap.gcts
        targets = heap.strong_targets if self.strong else heap.graph_targets
        skip = NO_REFS + kinds
        # (Holder by holder, a type at a time: each holder's references
        # stay in order, and the loop visits no object it skips.)
        for i in (i for g in range(16) if g not in skip for i in positions(gcts, g)):
            gct = gcts[i]
            got = array("Q")
            for piece in targets(addrs[i], gct):
                got.extend(piece)
            if got:
                self._check(add(h, i, _at(got), len(got)))

    def read_memory(self) -> None:
        """Every request read and decoded: the objects themselves, then the
        tables' parts and the upvalues' values (the memory bound checked
        after each round)."""
        check, n = self.heap.check_budget, len(self.heap.addrs)
        self._check(self.lib.graphc_objects(self.h, 1 if self.in_c == THREADS_IN_C else 0))
        self.feed()
        check(n)
        self.weak()
        while self.feed():
            check(n)
        self.lib.graphc_read_all(self.h)

    def fill(self) -> None:
        """Every object's references, from memory or from the heap."""
        if self.memory:
            self.read_memory()
            self.others(self.in_c)
        else:
            self.others(())
        self.heap.check_budget(len(self.heap.addrs))

    def parents(self, roots: List[int], target: int) -> array:
        r = array("I", roots)
        self._check(self.lib.graphc_csr(self.h))      # (before the array it fills)
        parent = _zeros("i", len(self.heap.addrs))
        self._check(self.lib.graphc_bfs(self.h, _at(r), len(r), target, _at(parent)))
        return parent

    def dominators(self, roots: List[int]) -> Dict[str, Any]:
        r = array("I", roots)
        n = len(self.heap.addrs)
        self._check(self.lib.graphc_csr(self.h))      # (before the arrays it fills)
        # Written in place by the C code (no copies): n entries each, the
        # ones by number cut to the objects reached.
        out = {"num": _zeros("i", n), "order": _zeros("I", n), "idom": _zeros("i", n),
               "parent": _zeros("i", n), "retained": _zeros("Q", n), "count": _zeros("I", n)}
        self._check(self.lib.graphc_dominators(
            self.h, _at(r), len(r), *(_at(out[k]) for k in (
                "num", "order", "idom", "parent", "retained", "count"))))
        res = (ctypes.c_uint64 * 3)()
        self.lib.graphc_result(self.h, res)
        m = res[0]
        for k in ("order", "idom", "parent", "retained", "count"):
            del out[k][m:]
        out["references"], out["passes"] = res[1], res[2]
        return out


class SnapGraph(_Graph):
    """The V8 heap snapshot's graph (heapsnapshot.CSnapshotWriter): every
    reference with its edge type and name, none merged; the document's
    nodes, edges and strings' texts written by the C code to a file.

    names (an array of n, the caller's) receives each object's name: its
    type's (bytype[gct]) until a better one is known; fixed: the names of
    a metatable, environment, prototype, key and value reference."""

    # What pending() asks for: (class, key, sub).
    METATABLE, SITE, BUILTIN, UPVALUE, C_UPVALUE, KEY = range(1, 7)
    THREADS = False         # (a thread's edges name each slot: heapsnapshot.py makes them)

    def __init__(self, lib: ctypes.CDLL, heap: Any, names: array, bytype: List[int],
                 fixed: List[int]) -> None:
        super().__init__(lib, heap, True)
        self.names = names
        by, fx = array("I", bytype), array("I", fixed)      # (alive through the call)
        self._check(lib.graphc_snap_begin(self.h, _at(names), _at(by), _at(fx)))

    def weak_tables(self) -> array:
        """The weak tables' indices: their parts are named in Python."""
        out = ctypes.c_void_p()
        m = self.lib.graphc_snap_weak_tables(self.h, ctypes.byref(out))
        return _words(out.value, m, "I")

    def pending(self) -> List[Tuple[int, int, int]]:
        """The names asked of Python, each once: (class, key, sub)."""
        out = ctypes.c_void_p()
        m = self.lib.graphc_snap_pending(self.h, ctypes.byref(out))
        w = _words(out.value, 2 * m)
        return [(w[2 * d + 1] >> 32, w[2 * d], w[2 * d + 1] & 0xFFFFFFFF) for d in range(m)]

    def resolve(self, types: bytes, names: array) -> None:
        """pending()'s answers: names[d], and an edge's type types[d]
        (0xFF: as it is)."""
        self.lib.graphc_snap_resolve(self.h, types, _at(names))

    def add(self, owner: int, part: int, types: bytes, names: array, targets: array) -> None:
        """References of object owner named in Python (targets: addresses)."""
        self._check(self.lib.graphc_snap_add(self.h, owner, part, types, _at(names),
                                             _at(targets), len(targets)))

    def sort(self) -> int:
        """The references in node order: their count."""
        count = self.lib.graphc_snap_sort(self.h)
        self._check(count)
        return count

    def _writing(self, f: Any, write: Callable[[], Any]) -> None:
        f.flush()
        self._check(self.lib.graphc_snap_open(self.h, f.fileno()))
        write()
        err = self.lib.graphc_snap_flush(self.h)
        if err:
            raise OSError(err, os.strerror(err))

    def write_nodes(self, f: Any, bytype: bytes, base: int) -> None:
        """The objects' nodes to f (a file, flushed first), each after
        ",\n"; base: the index of the first string's text."""
        self._writing(f, lambda: self.lib.graphc_snap_nodes(self.h, bytype, base))

    def write_edges(self, f: Any, comma: bool, base: int) -> None:
        """Their edges, each after "," (none before the first unless comma)."""
        self._writing(f, lambda: self.lib.graphc_snap_edges(self.h, 1 if comma else 0, base))

    def write_strings(self, f: Any, max_string: int) -> None:
        """The strings' texts in node order, each after ",\n", read now."""
        def strings():
            # (the C code stops at each string not held in place: it is
            # read, then the rest go on from the next)
            at, n = 0, len(self.heap.addrs)
            while at < n:
                at = self.lib.graphc_snap_strings(self.h, max_string, at)
                self._check(at)
                while self.feed():
                    pass
        self._writing(f, strings)


def dominators(heap: Any, roots: List[int]) -> Optional[Dict[str, Any]]:
    """heapdom.Dominators's arrays (num, order, idom, parent, retained,
    count) and counts (references, passes) for the heap's indexed objects
    and the roots' indices (each once, in order), or None when the C code
    is not at hand (load() says why).  A Heap with memory (heap.mem) has
    its tables, functions and upvalues decoded in C; any other (a graph
    given by graph_targets alone) has every object's references from
    graph_targets."""
    lib, _ = load()
    if lib is None or not _fits(heap):
        return None
    g = _Graph(lib, heap, _has_memory(heap))
    try:
        g.fill()
        return g.dominators(roots)
    finally:
        g.close()


def parents(heap: Any, roots: List[int], target: int) -> Optional[array]:
    """Heap.path_to's search: each object's parent index on a shortest
    path from the roots (indices, in order; -2: a root, -1: not reached),
    the search stopped once target (an index) is reached, over
    Heap.strong_targets's references; or None when the C code is not at
    hand."""
    lib, _ = load()
    if lib is None or not _fits(heap):
        return None
    g = _Graph(lib, heap, _has_memory(heap), strong=True)
    try:
        g.fill()
        return g.parents(roots, target)
    finally:
        g.close()


def holders(heap: Any, target: int) -> Optional[array]:
    """Heap.referrers's candidates: the indices, in order, of the tables,
    functions and upvalues with a reference to the object at index target,
    weak ones included (a function's upvalue counted by its value); or
    None when the C code is not at hand or the heap has no memory to read.
    Other objects are not looked at."""
    lib, _ = load()
    if lib is None or not _has_memory(heap) or not _fits(heap):
        return None
    mask = bytearray(len(heap.addrs))
    if not mask:
        return array("I")
    g = _Graph(lib, heap, True, strong=True, weak_too=True)
    cm = (ctypes.c_char * len(mask)).from_buffer(mask)
    try:
        lib.graphc_find(g.h, target, ctypes.addressof(cm))
        g.read_memory()
    finally:
        g.close()
        del cm
    return positions(mask, 1)


def snap_ready(heap: Any) -> bool:
    """Whether snap_graph can take the heap: the C code at hand, memory to
    read, and the heap fits it."""
    return load()[0] is not None and _has_memory(heap) and _fits(heap)


def snap_graph(heap: Any, names: array, bytype: List[int], fixed: List[int]) -> SnapGraph:
    """The heap's SnapGraph (snap_ready(heap) must be true)."""
    return SnapGraph(load()[0], heap, names, bytype, fixed)


def positions(data: Any, value: int) -> array:
    """The indices of the bytes of data equal to value, in order."""
    out = array("I")
    b = bytes([value])
    k = data.find(b)
    while k >= 0:
        out.append(k)
        k = data.find(b, k + 1)
    return out


def _has_memory(heap: Any) -> bool:
    return getattr(heap, "mem", None) is not None and getattr(heap, "lay", None) is not None


def _fits(heap: Any) -> bool:
    """Whether the C code can take this heap: fewer than 2^30 objects, all
    below 2^48 (its requests keep 48 bits of an address; a machine with a
    larger user address space is searched in Python)."""
    addrs = heap.addrs
    return len(addrs) < (1 << 30) and (not len(addrs) or addrs[-1] >> 48 == 0)


def top(retained: array, order: array, gcts: bytes, count: int,
        skip: Tuple[int, ...]) -> Optional[List[int]]:
    """Dominators.top in C: the numbers of the `count` objects that retain
    the most bytes, most first (ties: the smaller number first), those of
    the types in skip left out; None when the C code is not at hand."""
    lib, _ = load()
    if lib is None:
        return None
    m = len(order)
    out = _zeros("I", max(0, min(count, m)))
    got = lib.graphc_top(_at(retained), _at(order), bytes(gcts), m,
                         sum(1 << g for g in skip), len(out), _at(out))
    return out[:got].tolist()


def unreached(num: array, sizes: array) -> Optional[Tuple[int, int]]:
    """Dominators.unreached in C: (objects, bytes) whose number is -1."""
    lib, _ = load()
    if lib is None:
        return None
    res = (ctypes.c_uint64 * 2)()
    lib.graphc_unreached(_at(num), _at(sizes), len(num), res)
    return res[0], res[1]


def shared(idom: array, retained: array, count: array,
           nroots: int) -> Optional[Tuple[int, int, int]]:
    """Dominators.shared_by_roots in C (the roots numbered 0 to nroots - 1);
    None when the C code is not at hand."""
    lib, _ = load()
    if lib is None:
        return None
    res = (ctypes.c_uint64 * 3)()
    lib.graphc_shared(_at(idom), _at(retained), _at(count), len(idom), nroots, res)
    return res[0], res[1], res[2]


def split(words: array, base: int, first: int, addrs: array, sizes: array,
          gcts: bytearray, dead: bytearray) -> bool:
    """gcstat.HeapWalker.objects's sort of one region in C: words (offset
    << 40 | dead << 39 | gct << 35 | size) sorted, and written from index
    first on as addresses (base | offset), sizes, types and dead marks;
    False when the C code is not at hand (nothing done)."""
    lib, _ = load()
    if lib is None:
        return False
    count = len(words)
    if count:
        cg = (ctypes.c_char * len(gcts)).from_buffer(gcts)
        cd = (ctypes.c_char * len(dead)).from_buffer(dead)
        lib.graphc_split(_at(words), count, base, _at(addrs) + 8 * first,
                         _at(sizes) + 8 * first, ctypes.addressof(cg) + first,
                         ctypes.addressof(cd) + first)
        del cg, cd
    return True


def diff(addrs: array, gcts: bytes, sizes: array, oa: array, og: bytes,
         osz: array) -> Optional[Tuple[array, array, List[List[List[int]]]]]:
    """heapsnap.Diff's merge in C: (new_index, resized_index, [new, freed,
    resized]) where each of the three is [[count, bytes] by gct]; None
    when the C code is not at hand."""
    lib, _ = load()
    if lib is None:
        return None
    n, m = len(addrs), len(oa)
    gcts, og = bytes(gcts), bytes(og)
    # Counted first, so each array is made as long as it must be.
    counts, stats = (ctypes.c_uint64 * 2)(), (ctypes.c_uint64 * 96)()
    lib.graphc_diff(_at(addrs), gcts, _at(sizes), n, _at(oa), og, _at(osz), m, None, None,
                    counts, stats)
    new_index, resized_index = _zeros("I", counts[0]), _zeros("I", counts[1])
    stats = (ctypes.c_uint64 * 96)()
    lib.graphc_diff(_at(addrs), gcts, _at(sizes), n, _at(oa), og, _at(osz), m,
                    _at(new_index), _at(resized_index), counts, stats)

    def signed(v):
        return v - (1 << 64) if v >> 63 else v
    tables = [[[stats[32 * w + 2 * g], signed(stats[32 * w + 2 * g + 1])] for g in range(16)]
              for w in range(3)]
    return new_index, resized_index, tables


def owners(order: array, idom: array, is_new: bytes) -> Optional[array]:
    """heapsnap.Diff.owners's first loop in C: each numbered object's
    nearest dominator that is not new (-1: the roots); None when the C code
    is not at hand."""
    lib, _ = load()
    if lib is None:
        return None
    out = _zeros("i", len(order))
    lib.graphc_owners(_at(order), _at(idom), len(order), bytes(is_new), _at(out))
    return out
