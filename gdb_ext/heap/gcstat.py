"""Every GC object and every byte the collector counts.

walk_heap(vm) visits every object LuaJIT's collector owns and sizes each as
the collector frees it, then lists the memory that g->gc.total counts but
that is no object.  The two add up to g->gc.total exactly on every build we
test (see ../shared/LUAJIT-NOTES.md section 4 and docs/luajit-facts.md).

Where objects live (R = upstream 2.1 lj_gc.c, lj_state.c):
  g->gc.root       every object but strings, open upvalues and userdata
                   waiting for finalization; the main thread (inside
                   GG_State) is last, userdata are linked right after it
  g->str.tab[]     strings, one chain per hash slot (2.0: g->strhash[]);
                   bit 0 of an anchor is the secondary-hash flag
  L->openupval     each thread's open upvalues, linked by nextgc
  g->gc.mmudata    circular list (the anchor is its last element) of userdata
                   and cdata whose finalizer has yet to run

Object sizes are what gc_freefunc[] passes to lj_mem_free (R lj_str.c
lj_str_free, lj_func.c, lj_state.c lj_state_free, lj_tab.c lj_tab_free,
lj_trace.c lj_trace_free, lj_cdata.c lj_cdata_free, lj_udata.c), and
buffer userdata (string.buffer) also own their buffer, freed by their __gc.

Speed: the walk reads memory in 1 MB pages (gdb_ext.vm.pages); nothing here
makes a gdb call per object.  The lists are followed in C (walkc.c, through
walkc.CWalk) where it can be built: tens of nanoseconds an object.  The
Python loops below (one struct.unpack_from per object, about a microsecond)
do the same where it cannot, or with LJGDB_HEAPWALK=python.
"""
from typing import Any, Callable, Optional, TYPE_CHECKING, Tuple
import heapq
import struct
from array import array

from .. import consts as C
from ..bulk import gc_paused
from ..cbuild import zeros
from ..errors import CorruptError, FaultError, LjError, NotLuaJITError
from ..vm.pages import P64, P64_MASK, PAGE, PAGE_MASK, PageCache, raw_reader, struct_reader
from ..vm.objects import ctype_size
from . import graphc, walkc

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..vm.state import VM

TYPE_ORDER = (C.GCT_STR, C.GCT_UPVAL, C.GCT_THREAD, C.GCT_PROTO, C.GCT_FUNC, C.GCT_TRACE,
              C.GCT_CDATA, C.GCT_TAB, C.GCT_UDATA)
# Struct that holds the fixed header of each type (what one object costs at least).
HEADER_STRUCT = C.HEADER_STRUCT

# lj_obj.h: cdataisv(cd) = marked & 0x80 (a VLA/VLS with a GCcdataVar below).
CDATA_VAR = 0x80
# lj_buf.h SBUF_FLAG_COW | SBUF_FLAG_BORROW: the buffer does not own its memory.
SBUF_NOT_OWNED = 6
# Object sizes kept in 35 bits by HeapWalker(keep=True); larger ones aside.
_BIG = 1 << 35
# lj_gc.h: LJ_GC_WHITES = 3; isdead(g, o) = marked & otherwhite & 3.
GC_WHITES = 3


class TypeStat(object):
    __slots__ = ("gct", "count", "bytes", "min", "max", "dead", "dead_bytes")

    def __init__(self, gct: int) -> None:
        self.gct = gct
        self.count = 0
        self.bytes = 0
        self.min = None
        self.max = 0
        self.dead = 0
        self.dead_bytes = 0

    @property
    def name(self) -> str:
        return C.GCT_NAMES[self.gct]

    def add(self, count: int, nbytes: int, smallest: int, largest: int, dead: int,
            dead_bytes: int) -> None:
        """Fold in what one walk counted of this type (count > 0)."""
        self.count += count
        self.bytes += nbytes
        self.min = smallest if self.min is None else min(self.min, smallest)
        self.max = max(self.max, largest)
        self.dead += dead
        self.dead_bytes += dead_bytes


class HeapStat(object):
    """Result of walk_heap.  types: gct -> TypeStat; other: [(name, bytes,
    note)] memory counted by gc.total that is no object; top: [(bytes, addr,
    gct)] largest first; chunks: {proto address: [bytes, objects]} (with
    by_chunk); total: g->gc.total; objects: number of objects walked."""

    def __init__(self) -> None:
        self.types = {g: TypeStat(g) for g in TYPE_ORDER}
        self.other = []
        self.top = []
        self.chunks = {}
        self.total = 0
        self.objects = 0
        self.pending = 0               # objects on g->gc.mmudata
        self.header_sizes = {}

    @property
    def object_bytes(self) -> int:
        return sum(t.bytes for t in self.types.values())

    @property
    def other_bytes(self) -> int:
        return sum(b for _, b, _ in self.other)

    @property
    def accounted(self) -> int:
        return self.object_bytes + self.other_bytes


class HeapWalker(object):
    """Walks and sizes every GC object of one VM.  progress(n) is called
    every `every` objects (for a progress line; it may raise to stop)."""

    def __init__(self, vm: 'VM', top: int = 0, by_chunk: bool = False,
                 progress: Optional[Callable[[int], Any]] = None, every: int = 200000,
                 cache_bytes: int = 1 << 30, keep: bool = False,
                 mem: Optional[PageCache] = None) -> None:
        """keep: also keep every object's address, type, size and whether
        it is dead, for objects() (the heap graph's index).  mem: the
        pages.PageCache to read through (else one of cache_bytes)."""
        self.vm = vm
        self.lay = lay = vm.lay
        self.t = vm.t
        self.mem = mem if mem is not None else PageCache(vm.t, cache_bytes)
        # keep: 16 MB region of the address space -> array of one 64-bit
        # word per object: its offset in the region << 40 | dead << 39 |
        # gct << 35 | size (sizes of 2^35 and more in self.big): sorted
        # a region at a time by objects().
        self.kept = {} if keep else None
        self.big = {}
        self._full_get, self._p64_get = self.mem.full.get, self.mem.p64.get
        self.top_n = top
        self.by_chunk = by_chunk
        self.progress = progress
        self.every = every
        self.st = HeapStat()
        self.main_L = vm.main_L
        self.threads = []                  # (address, openupval) of every thread
        self.ctsizes = {}                  # ctype id -> size of a cdata of it
        self.c = None                      # the walk in C (walkc.CWalk), while it runs
        self.why_python = ""               # why not in C
        rs = lay.ref_size
        hdr = lay.str
        self.o_marked, self.o_gct = hdr.marked, hdr.gct
        # Every GC object starts with GCHeader (nextgc, marked, gct) and then
        # two bytes of its own: ffid and nupvalues of a function, nomm and
        # colo of a table (R lj_obj.h GCHeader and the structs using it).
        # One read of the header gets them, so functions and upvalues need
        # no second read.
        g1, g2 = hdr.gct + 1, hdr.gct + 2
        if (lay.fnL.ffid, lay.fnL.nupvalues, lay.tab.colo) != (g1, g2, g2):
            raise NotLuaJITError("unexpected GC header layout: GCfuncL.ffid at %d, nupvalues "
                                 "at %d, GCtab.colo at %d (expected %d, %d, %d)"
                                 % (lay.fnL.ffid, lay.fnL.nupvalues, lay.tab.colo, g1, g2, g2))
        nf = hdr.field("nextgc")
        self.rd_hdr = raw_reader([(nf.offset, nf.size), (hdr.marked, 1), (hdr.gct, 1),
                                  (g1, 1), (g2, 1)], "GCHeader")
        self.rd_strhdr = raw_reader([(nf.offset, nf.size), (hdr.marked, 1), (hdr.gct, 1),
                                     (lay.str.len, 4)], "GCstr")
        self.rd_tab = struct_reader(lay.tab, ("asize", "hmask"))
        self.rd_fnpc = struct_reader(lay.fnL, ("pc",))
        self.rd_str = struct_reader(lay.str, ("len",))
        self.rd_th = struct_reader(lay.L, ("openupval", "stacksize"))
        self.rd_pt = struct_reader(lay.pt, ("sizept",))
        self.rd_ud = struct_reader(lay.ud, ("udtype", "len"))
        self.rd_cd = struct_reader(lay.cd, ("ctypeid",))
        self.rd_tr = None
        if lay.trace is not None:
            self.rd_tr = struct_reader(lay.trace, ("nsnap", "nins", "nk", "nsnapmap"))
            snap = lay.s.get("SnapShot")
            self.snap_size = snap.size if snap is not None else 12
        self.ref_size = rs
        # Sizes as the free functions compute them.
        self.sz_tab = lay.tab.size
        self.sz_node = lay.node.size
        self.sz_fnL0 = lay.fnL.size - rs           # sizeLfunc(0)
        self.sz_fnC0 = lay.fnC.size - 8            # sizeCfunc(0): TValue upvalues
        self.sz_str = lay.str.size
        self.sz_L = lay.L.size
        self.sz_uv = lay.uv.size
        self.sz_ud = lay.ud.size
        self.sz_cd = lay.cd.size
        self.sz_tr = (lay.trace.size + 7) & ~7 if lay.trace is not None else 0
        self.str_rounded = lay.str_rounded
        self.udtype_buffer = vm.t.constant("UDTYPE_BUFFER")
        sbx = lay.s.get("SBufExt") if "SBufExt" in lay.s else None
        if sbx is None:
            info = vm.t.type_info("SBufExt")
            if info is not None:
                from ..layouts.layout import Struct
                sbx = Struct(info)
        self.sbufext = sbx
        self.need = max(lay.tab.size, lay.fnL.size, lay.L.size, lay.pt.size, lay.ud.size,
                        lay.str.size, lay.uv.size, self.sz_tr) + 8
        self.hdr_need = hdr.gct + 3           # GCHeader and its two type bytes
        for g, name in HEADER_STRUCT.items():
            s = lay.s.get(name)
            self.st.header_sizes[g] = s.size if s is not None else None

    # ------------------------------------------------------------------
    def run(self) -> HeapStat:
        with gc_paused():
            return self._run()

    def _run(self):
        st = self.st
        vm, lay = self.vm, self.lay
        st.total = vm.gc_total
        # Bound every list by what gc.total allows: no object is under 8 bytes.
        self.bound = st.total // 8 + 64
        self.deadmask = (vm.t.u8(vm.G + lay.G.gc_currentwhite, "g->gc.currentwhite")
                         ^ GC_WHITES) & GC_WHITES
        lib, self.why_python = walkc.load()
        if lib is not None:
            try:
                self.c = walkc.CWalk(lib, self, self.bound, self.deadmask)
            except LjError as e:            # (a member of a size it does not read)
                self.why_python = str(e)
        done = False
        try:
            root = vm.gref(vm.G + lay.G.gc_root, "g->gc.root")
            self._walk([root], "g->gc.root", None)
            self._walk_strings()
            if self.c is not None:
                self.threads = self.c.threads()
            for L, uv in list(self.threads):
                if uv:
                    self._walk([uv], "openupval list of lua_State 0x%x" % L, C.GCT_UPVAL)
            self._walk_mmudata()
            done = True
        finally:
            if self.c is not None:
                # (also after an error: the partial report shows them)
                if self.top_n:
                    st.top = self.c.top()
                if self.by_chunk:
                    st.chunks = self.c.chunks()
                if self.kept is None or not done:     # (else objects() takes them)
                    self.c.close()
                    self.c = None
        self._other()
        if self.top_n:
            st.top = sorted(st.top, reverse=True)
        return st

    # ------------------------------------------------------------------
    def _walk(self, starts, what, only, stop_after=0):
        """Walk the nextgc chain from each address in `starts` until NULL (or
        until the object stop_after, included), sizing each object.  `only`:
        the gct every object must have (None: any)."""
        if self.c is not None:
            return self.c.walk(starts, what, only, stop_after)
        st = self.st
        types = st.types
        locate = self._locate
        need = self.need
        rd_hdr, rd_tab, rd_str = self.rd_hdr, self.rd_tab, self.rd_str
        sz_tab, sz_node, sz_str, sz_uv = self.sz_tab, self.sz_node, self.sz_str, self.sz_uv
        sz_fnL0, sz_fnC0, ref_size = self.sz_fnL0, self.sz_fnC0, self.ref_size
        str_rounded = self.str_rounded
        size_other = self._size_other
        deadmask = self.deadmask
        top_n = self.top_n
        top = st.top
        top_min = top[0][0] if top_n and len(top) >= top_n else 0
        by_chunk = self.by_chunk
        progress, every = self.progress, self.every
        bound = self.bound
        n = start_n = st.objects
        next_check = next_progress = n + every
        wbase, wend, buf = 1, 0, b""
        # Per-type accumulators kept local for speed, folded in at the end.
        cnt = [0] * 13
        tot = [0] * 13
        mn = [1 << 62] * 13
        mx = [0] * 13
        dcnt = [0] * 13
        dtot = [0] * 13
        T_TAB, T_STR, T_FUNC, T_UPVAL = C.GCT_TAB, C.GCT_STR, C.GCT_FUNC, C.GCT_UPVAL
        kept = self.kept
        kreg, kkey = -1, None
        BIG = _BIG
        try:
            for o in starts:
                # Brent's cycle check: the chain must not come back to the
                # object it was at after 2^k steps (set in the check below,
                # so it costs one comparison per object).  It starts after
                # 64 objects: most chains (string chains) are shorter, and
                # would otherwise pay for its set-up on every chain.
                mark, seg = 0, 64
                mark_at = n + 64
                if next_check > mark_at:
                    next_check = mark_at
                while o:
                    if o == mark:
                        raise CorruptError("%s comes back to the object at 0x%x: a cycle"
                                           % (what, o), o)
                    if o < wbase or o + need > wend:
                        wbase, buf = locate(o, need, what)
                        wend = wbase + len(buf)
                    off = o - wbase
                    nxt, marked, gct, b1, b2 = rd_hdr(buf, off)
                    if gct == T_TAB:
                        colo = b2
                        asize, hmask = rd_tab(buf, off)
                        sz = sz_tab
                        if colo:
                            sz += (colo & 0x7f) << 3
                            if asize and colo & 0x80:
                                sz += asize << 3
                        elif asize:
                            sz += asize << 3
                        if hmask:
                            sz += (hmask + 1) * sz_node
                    elif gct == T_STR:
                        ln = rd_str(buf, off)[0]
                        sz = sz_str + (((ln + 4) & ~3) if str_rounded else ln + 1)
                    elif gct == T_FUNC:
                        if b1 == 0:             # ffid: a Lua function
                            sz = sz_fnL0 + b2 * ref_size
                            if by_chunk:
                                self._chunk_add(self.rd_fnpc(buf, off)[0] - self.lay.pt.size, sz)
                        else:
                            sz = sz_fnC0 + b2 * 8
                    elif gct == T_UPVAL:
                        sz = sz_uv
                    else:
                        sz = size_other(o, gct, buf, off, what)
                    if only is not None and gct != only:
                        raise CorruptError("%s: object at 0x%x has type %s, expected %s"
                                           % (what, o, C.GCT_NAMES.get(gct, gct),
                                              C.GCT_NAMES[only]), o)
                    cnt[gct] += 1
                    tot[gct] += sz
                    if sz < mn[gct]:
                        mn[gct] = sz
                    if sz > mx[gct]:
                        mx[gct] = sz
                    if marked & deadmask:
                        dcnt[gct] += 1
                        dtot[gct] += sz
                    if kept is not None:
                        if o >> 24 != kreg:
                            kreg, kkey = self._region(o)
                        kkey((o & 0xFFFFFF) << 40 | (1 << 39 if marked & deadmask else 0) |
                             gct << 35 | (sz if sz < BIG else self._big(o, sz)))
                    if top_n and sz > top_min:
                        if len(top) < top_n:
                            heapq.heappush(top, (sz, o, gct))
                        else:
                            heapq.heapreplace(top, (sz, o, gct))
                        if len(top) >= top_n:
                            top_min = top[0][0]
                    n += 1
                    if n >= next_check:
                        if n >= mark_at:
                            seg *= 2
                            mark, mark_at = o, n + seg
                        if n >= next_progress:
                            if n - start_n > bound:
                                raise CorruptError("%s is longer than g->gc.total allows (%d "
                                                   "objects): a cycle?" % (what, bound), o)
                            next_progress = n + every
                            if progress is not None:
                                progress(n)
                        next_check = min(next_progress, mark_at)
                    if o == stop_after:
                        break
                    o = nxt
        finally:
            st.objects = n
            for g in TYPE_ORDER:
                if cnt[g]:
                    types[g].add(cnt[g], tot[g], mn[g], mx[g], dcnt[g], dtot[g])
        return n - start_n

    def _walk_str(self, starts, what, nexts=None):
        """_walk for string chains only: one read per string, no dispatch.
        With a list `nexts`, take one step per chain only and append each
        string's successor there (see _walk_strings)."""
        st = self.st
        locate = self._locate
        need = self.sz_str + 8
        rd = self.rd_strhdr
        # lj_str_size (2.1 since 2020): sizeof(GCstr) + ((len + 4) & ~3);
        # sizestring (2.0, older 2.1): sizeof(GCstr) + len + 1.
        base_sz = self.sz_str
        add, andmask = (4, ~3) if self.str_rounded else (1, -1)
        deadmask = self.deadmask
        top_n = self.top_n
        top = st.top
        top_min = top[0][0] if top_n and len(top) >= top_n else 0
        progress, every, bound = self.progress, self.every, self.bound
        n = start_n = st.objects
        next_check = next_progress = n + every
        wbase, wend, buf = 1, 0, b""
        cnt = tot = dcnt = dtot = mx = 0
        mn = 1 << 62
        T_STR = C.GCT_STR
        kept = self.kept
        kreg, kkey = -1, None
        BIG = _BIG
        try:
            for o in starts:
                mark, seg = 0, 64           # Brent's cycle check, as in _walk
                mark_at = n + 64
                if next_check > mark_at:
                    next_check = mark_at
                while o:
                    if o == mark:
                        raise CorruptError("%s: the string chain comes back to 0x%x: a cycle"
                                           % (what, o), o)
                    if o < wbase or o + need > wend:
                        wbase, buf = locate(o, need, what)
                        wend = wbase + len(buf)
                    nxt, marked, gct, ln = rd(buf, o - wbase)
                    if gct != T_STR:
                        raise CorruptError("%s: object at 0x%x has type %s, expected a string"
                                           % (what, o, C.GCT_NAMES.get(gct, gct)), o)
                    sz = base_sz + ((ln + add) & andmask)
                    cnt += 1
                    tot += sz
                    if sz < mn:
                        mn = sz
                    if sz > mx:
                        mx = sz
                    if marked & deadmask:
                        dcnt += 1
                        dtot += sz
                    if kept is not None:
                        if o >> 24 != kreg:
                            kreg, kkey = self._region(o)
                        kkey((o & 0xFFFFFF) << 40 | (1 << 39 if marked & deadmask else 0) |
                             T_STR << 35 | (sz if sz < BIG else self._big(o, sz)))
                    if top_n and sz > top_min:
                        if len(top) < top_n:
                            heapq.heappush(top, (sz, o, T_STR))
                        else:
                            heapq.heapreplace(top, (sz, o, T_STR))
                        if len(top) >= top_n:
                            top_min = top[0][0]
                    n += 1
                    if n >= next_check:
                        if n >= mark_at:
                            seg *= 2
                            mark, mark_at = o, n + seg
                        if n >= next_progress:
                            if n - start_n > bound:
                                raise CorruptError("%s is longer than g->gc.total allows (%d "
                                                   "objects): a cycle?" % (what, bound), o)
                            next_progress = n + every
                            if progress is not None:
                                progress(n)
                        next_check = min(next_progress, mark_at)
                    if nexts is not None:
                        if nxt:
                            nexts.append(nxt)
                        break
                    o = nxt
        finally:
            st.objects = n
            if cnt:
                st.types[T_STR].add(cnt, tot, mn, mx, dcnt, dtot)
        return n - start_n

    def _region(self, o):
        """(region, append) of the kept objects' region that holds o."""
        r = self.kept.get(o >> 24)
        if r is None:
            r = self.kept[o >> 24] = array("Q")
        return o >> 24, r.append

    def _big(self, o, sz):
        self.big[o] = sz
        return _BIG - 1

    def objects(self) -> Tuple[array, bytes, array, bytes]:
        """After run() with keep: (addresses, types, sizes, dead) of every
        object in address order: arrays of 8-byte integers for addresses
        and sizes, bytes of gct and of 1 (dead: the collector's mark says
        garbage not yet swept) per object."""
        if self.c is not None:
            try:
                return self.c.objects()
            finally:
                self.c.close()
                self.c = None
        n = sum(len(r) for r in self.kept.values())
        addrs, sizes = zeros("Q", n), zeros("Q", n)
        gcts, dead = bytearray(n), bytearray(n)
        first = 0
        for key in sorted(self.kept):
            words = self.kept.pop(key)
            base = key << 24
            # Sorted and split in C when it can be built (graphc.py).
            if not graphc.split(words, base, first, addrs, sizes, gcts, dead):
                words = sorted(words)
                end = first + len(words)
                addrs[first:end] = array("Q", [base | w >> 40 for w in words])
                gcts[first:end] = bytes([w >> 35 & 15 for w in words])
                dead[first:end] = bytes([w >> 39 & 1 for w in words])
                sizes[first:end] = array("Q", [w & (_BIG - 1) for w in words])
            start, first = first, first + len(words)
            if self.big:
                for k in range(start, first):
                    if sizes[k] == _BIG - 1 and addrs[k] in self.big:
                        sizes[k] = self.big[addrs[k]]
        return addrs, bytes(gcts), sizes, bytes(dead)

    def _locate(self, o, need, what):
        """(base, buf) holding the `need` bytes at o, for the walks when o
        leaves their current window.  The page cache's dicts are consulted
        here first: most misses are a jump to another cached page, and going
        through PageCache.window for those would cost several calls."""
        base = o & PAGE_MASK
        buf = self._full_get(base)
        if buf is not None and o + need <= base + PAGE:
            return base, buf
        base = o & P64_MASK
        buf = self._p64_get(base)
        if buf is not None and o + need <= base + P64:
            return base, buf
        try:
            return self.mem.window(o, need)
        except FaultError:
            return self._small_window(o, what)

    def _small_window(self, o, what):
        """The object at o ends a readable mapping: read just its header,
        then as much as its type needs."""
        try:
            hdr = self.mem.read(o, self.hdr_need)
        except FaultError as e:
            raise FaultError("cannot access memory at 0x%x" % e.address, e.address,
                             "GC object header at 0x%x on %s" % (o, what))
        name = HEADER_STRUCT.get(hdr[self.o_gct])
        s = self.lay.s.get(name) if name else None
        n = s.size if s is not None else self.hdr_need
        try:
            return o, self.mem.read(o, n)
        except FaultError as e:
            raise FaultError("cannot access memory at 0x%x" % e.address, e.address,
                             "%s at 0x%x on %s" % (name, o, what))

    def _size_other(self, o, gct, buf, off, what):
        """Size of the less frequent types (and checks of the gct byte)."""
        if gct == C.GCT_THREAD:
            uv, ssize = self.rd_th(buf, off)
            self.threads.append((o, uv))
            return self.sz_L + ssize * 8
        if gct == C.GCT_PROTO:
            sz = self.rd_pt(buf, off)[0]
            if self.by_chunk:
                self._chunk_add(o, sz)
            return sz
        if gct == C.GCT_CDATA:
            ctypeid = self.rd_cd(buf, off)[0]
            marked = buf[off + self.o_marked]
            if marked & CDATA_VAR:
                # GCcdataVar {uint16 offset, uint16 extra, MSize len} just
                # below the object: the block starts offset bytes below.
                var = self.mem.read(o - 8, 8)
                _, extra, ln = struct.unpack("<HHI", var)
                return ln + extra
            return self.cdata_size(ctypeid)
        if gct == C.GCT_UDATA:
            udtype, ln = self.rd_ud(buf, off)
            sz = self.sz_ud + ln
            if udtype == self.udtype_buffer and self.sbufext is not None and \
                    ln >= self.sbufext.size:
                sz += self._buffer_bytes(o + self.sz_ud)
            return sz
        if gct == C.GCT_TRACE and self.rd_tr is not None:
            nsnap, nins, nk, nsnapmap = self.rd_tr(buf, off)
            sz = self.sz_tr + ((nins - nk) & 0xFFFFFFFF) * 8 + nsnap * self.snap_size + \
                nsnapmap * 4
            if self.by_chunk:
                s = self.lay.trace
                pt = int.from_bytes(buf[off + s.startpt:off + s.startpt + self.ref_size],
                                    "little")
                self._chunk_add(pt, sz)
            return sz
        raise CorruptError("%s: no GC object at 0x%x (type byte %d is not a GC type)"
                           % (what, o, gct), o)

    def cdata_size(self, ctypeid: int) -> int:
        """The size of a cdata of a ctype (not a VLA or VLS)."""
        size = self.ctsizes.get(ctypeid)
        if size is None:
            size = self.ctsizes[ctypeid] = self.sz_cd + ctype_size(self.vm, ctypeid)
        return size

    def _buffer_bytes(self, sbx_addr):
        """Bytes a string.buffer owns (R lj_buf.h: sbufsz = e - b, not owned
        when copy-on-write or borrowed)."""
        s = self.sbufext
        ps = self.lay.ptr_size
        data = self.mem.read(sbx_addr, s.size)
        e = int.from_bytes(data[s.e:s.e + ps], "little")
        b = int.from_bytes(data[s.b:s.b + ps], "little")
        L = int.from_bytes(data[s.L:s.L + self.lay.mref_size], "little")
        if L & SBUF_NOT_OWNED or e < b:
            return 0
        return e - b

    def _chunk_add(self, pt, sz):
        c = self.st.chunks.get(pt)
        if c is None:
            self.st.chunks[pt] = [sz, 1]
        else:
            c[0] += sz
            c[1] += 1

    # ------------------------------------------------------------------
    def _walk_strings(self):
        """Every chain of the string table.  A chain's strings lie anywhere
        in the heap: when the heap is larger than the page cache, the walk
        goes in waves instead (the first string of every chain in address
        order, then the second ones, ...), so that pages are read in order
        and not again and again."""
        vm, lay = self.vm, self.lay
        tab = vm.t.ptr(vm.G + lay.o_strtab, "string table pointer")
        mask = vm.t.u32(vm.G + lay.o_strmask, "string table mask")
        if mask & (mask + 1) or mask > (1 << 30):
            raise CorruptError("string table mask 0x%x is not 2^n-1" % mask, vm.G + lay.o_strmask)
        waves = self.st.total > self.mem.max_bytes
        rs = self.ref_size
        step = 1 << 16
        i = 0
        pending = []
        c = self.c
        while i <= mask:
            cnt = min(step, mask + 1 - i)
            data = self.mem.read(tab + i * rs, cnt * rs)
            what = "string table slots %d..%d" % (i, i + cnt - 1)
            i += cnt
            if c is not None:
                c.strings(bytes(data), cnt, rs, waves, what)
                continue
            anchors = struct.unpack("<%d%s" % (cnt, "Q" if rs == 8 else "I"), data)
            # Bit 0 of an anchor is the secondary-hash flag (R lj_str.c).
            anchors = [a & ~1 for a in anchors if a & ~1]
            if waves:
                pending.extend(anchors)
            else:
                self._walk_str(anchors, what)
        wave = 0
        strnum = vm.t.u32(vm.G + lay.o_strnum, "string count")
        while True:
            waiting, first = c.pending() if c is not None else (len(pending), pending and pending[0])
            if not waiting:
                break
            wave += 1
            # No chain is longer than the number of strings (g->str.num).
            if self.st.objects > self.bound or wave > strnum + 1:
                raise CorruptError("a string chain is longer than the %d strings g->str.num "
                                   "counts: a cycle?" % strnum, first)
            what = "string chains (step %d)" % wave
            if c is not None:
                c.wave(what)
                continue
            pending.sort()
            nexts = []
            self._walk_str(pending, what, nexts)
            pending = nexts

    def _walk_mmudata(self):
        vm, lay = self.vm, self.lay
        last = vm.gref(vm.G + lay.G.gc_mmudata, "g->gc.mmudata")
        if not last:
            return
        first = self.t.uint(last, self.ref_size, "nextgc of g->gc.mmudata 0x%x" % last)
        # Circular, anchored at its last element: from the first to the last.
        self.st.pending = self._walk([first], "g->gc.mmudata", None, stop_after=last)

    # ------------------------------------------------------------------
    def _other(self):
        """Memory counted in gc.total that is no GC object (R lj_state.c
        close_state lists it: what is freed after the last object)."""
        vm, lay, t = self.vm, self.lay, self.t
        out = self.st.other
        ps = lay.ptr_size
        out.append(("GG_State", lay.GG.size - lay.L.size,
                    "global_State, jit_State, dispatch table (without the main lua_State)"))
        mask = t.u32(vm.G + lay.o_strmask, "string table mask")
        out.append(("string table", (mask + 1) * self.ref_size,
                    "%d slots of %d bytes" % (mask + 1, self.ref_size)))
        sb = lay.sbuf
        tb = vm.G + lay.G.tmpbuf
        if lay.sbuf_sized:                     # 2.0: SBuf {buf, n, sz}
            size = t.u32(tb + sb.sz, "g->tmpbuf.sz")
        else:
            # MRefs: 4 bytes in an X64 build of Tarantool's fork, pointers
            # elsewhere (the field's own size, from DWARF).
            e = t.uint(tb + sb.e, sb.field("e").size or ps, "g->tmpbuf.e")
            b = t.uint(tb + sb.b, sb.field("b").size or ps, "g->tmpbuf.b")
            size = e - b if e >= b else 0
        out.append(("tmpbuf", size, "g->tmpbuf, the VM's string buffer"))
        if lay.has_lightudseg:
            seg = vm.mref(vm.G + lay.G.gc_lightudseg, "g->gc.lightudseg")
            if seg:
                n = t.u8(vm.G + lay.G.gc_lightudnum, "g->gc.lightudnum")
                segnum = (2 << (n.bit_length() - 1)) if n else 2
                out.append(("lightud segments", segnum * 4,
                            "%d light userdata segments in use" % (n + 1)))
        if lay.jit and lay.J is not None:
            J = vm.GG + lay.GG.J
            Js = lay.J
            sizetrace = t.u32(J + Js.sizetrace, "J->sizetrace")
            out.append(("J->trace", sizetrace * self.ref_size,
                        "trace number table, %d slots" % sizetrace))
            lo = t.i32(J + Js.irbotlim, "J->irbotlim")
            hi = t.i32(J + Js.irtoplim, "J->irtoplim")
            out.append(("J->irbuf", max(hi - lo, 0) * 8, "IR buffer of the trace recorder"))
            snap = lay.s.get("SnapShot")
            out.append(("J->snapbuf", t.u32(J + Js.sizesnap, "J->sizesnap") *
                        (snap.size if snap is not None else 12), "snapshot buffer"))
            out.append(("J->snapmapbuf", t.u32(J + Js.sizesnapmap, "J->sizesnapmap") * 4,
                        "snapshot map buffer"))
            if lay.has_k64:
                k64 = self._k64_bytes(J + Js.k64)
                if k64 is not None:
                    out.append(("J->k64", k64[0], "%d chained arrays of 64-bit IR constants"
                                % k64[1]))
        cts_s, ct_s = lay.s.get("CTState"), lay.s.get("CType")
        if lay.has_ctype_state and cts_s is not None and ct_s is not None:
            cts = vm.mref(vm.G + lay.G.ctype_state, "g->ctype_state")
            if cts:
                sizetab = t.u32(cts + cts_s.sizetab, "CTState.sizetab")
                sizeid = t.u32(cts + cts_s.cb_sizeid, "CTState.cb.sizeid")
                out.append(("CTState", cts_s.size + sizetab * ct_s.size + sizeid * 2,
                            "FFI state: %d ctype slots, %d callback slots" % (sizetab, sizeid)))

    def _k64_bytes(self, anchor):
        """2.0 keeps 64-bit IR constants in a chain of K64Array blocks
        (20 lj_ir.c lj_ir_k64_find, freed by lj_ir_k64_freeall); 2.1 keeps
        them in the IR itself and has no J->k64 list (its J->k64 is an
        array inside jit_State).  (bytes, blocks) or None."""
        info = self.t.type_info("K64Array")
        if info is None or "next" not in info.fields:
            return None
        nxt = info.fields["next"]
        k = self.t.uint(anchor, self.lay.mref_size, "J->k64")
        n = 0
        seen = set()
        while k:
            n += 1
            if n > self.bound or k in seen:
                raise CorruptError("J->k64 chain does not end: a cycle?", k)
            seen.add(k)
            k = self.t.uint(k + nxt.offset, nxt.size, "K64Array.next at 0x%x" % k)
        return n * info.size, n


def walk_heap(vm: 'VM', **kw: Any) -> HeapStat:
    """HeapStat of the VM (see HeapWalker for the options)."""
    return HeapWalker(vm, **kw).run()
