"""Who holds a GC object: the references between LuaJIT's objects as the
collector follows them (R lj_gc.c gc_traverse_*, gc_mark_start), every
reference to one object, and the shortest path to it from the roots.

An object's references, by type (each with a `how`, a small tuple that
says where the reference is):
  table     its metatable ("mt",), array slots ("arr", i), hash values
            ("val", node), hash keys ("key", node); a weak table (__mode
            'k' or 'v' in its metatable, R lj_gc.c gc_traverse_tab) does not
            retain its weak side (the reference is marked weak)
  function  its environment ("env",), a Lua function's prototype
            ("proto",) and each upvalue's value ("uv", i: the GCupval is
            the closure's, closed or open, and is passed over as LuaJIT's
            debug.getupvalue passes over it), a C function's upvalues
            ("cuv", i)
  thread    its environment ("env",) and every stack slot below its top
            ("slot", index from L->stack)
  prototype its GC constants ("kgc", i: strings, child prototypes, template
            tables, cdata) and its chunk name ("chunkname",)
  userdata  its metatable ("mt",) and environment ("env",)
  upvalue   its value ("uvval",) (reached only through the closures above)
  trace     its IR's GC constants ("irk", jit.util.tracek's index), the
            traces it links to ("link", "nextroot", "nextside") and its
            starting prototype ("startpt"); a prototype holds its root
            trace ("trace",)
Strings and cdata hold no references.

The roots (R lj_gc.c gc_mark_start, gc_mark_gcroot, gc_mark_mmudata): the
main thread, its environment (_G), the registry, g->gcroot (the
metamethod names, the basic types' metatables, io's default files) and
the userdata waiting for their finalizers (g->gc.mmudata).

Every object is found as lgcstat finds them (gc.root, the string table,
open upvalues, g->gc.mmudata) and kept in arrays: sorted addresses and a
type byte each, no Python object per heap object.
"""
from typing import Any, Iterable, Iterator, List, Optional, TYPE_CHECKING, Tuple
import bisect
import struct
from array import array

from .. import consts as C
from ..errors import CorruptError, FaultError
from ..vm.objects import Str, decode_tv
from ..vm.pages import PageCache
from . import graphc

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..stack.frames import Frame
    from ..vm.objects import Value
    from ..vm.state import VM

# lj_obj.h: enum { GCROOT_MMNAME, ... } and MMDEF's ORDER MM (index, newindex,
# gc, mode, ...): the same in 2.0 and 2.1; read from DWARF when it has them.
GCROOT_MMNAME_DEFAULT = 0
MM_MODE_DEFAULT = 3
_TYPE_ORDER = ("nil", "false", "true", "lightud", "str", "upval", "thread", "proto", "func",
               "trace", "cdata", "table", "udata", "number")


_CHUNK = 1 << 16
# lj_gc.h: a userdata whose finalizer has run (the same bit is a table's
# LJ_GC_WEAKKEY).
LJ_GC_FINALIZED = 0x08


def root_indices(heap: Any) -> List[Tuple[int, Tuple[Any, ...]]]:
    """[(index in heap.addrs, name)] of heap.roots() that are objects of
    its index, each object once (its first name), in roots()'s order: the
    order the searches start from (heapdom.Dominators, Heap.path_to)."""
    addrs = heap.addrs
    n = len(addrs)
    out, seen = [], set()
    for name, v in heap.roots():
        i = bisect.bisect_left(addrs, v)
        if i < n and addrs[i] == v and i not in seen:
            seen.add(i)
            out.append((i, name))
    return out


def _aligned(data, pat, align):
    """Offsets of pat in data at multiples of align."""
    k = data.find(pat)
    while k >= 0:
        if k % align == 0:
            yield k
        k = data.find(pat, k + 1)


class Ref(object):
    """One reference: `holder` (address) of type `gct` holds `target`;
    `how` says where (see the module's text); weak: a weak table's side."""

    __slots__ = ("holder", "gct", "target", "how", "weak")

    def __init__(self, holder: int, gct: int, target: int, how: Tuple[Any, ...],
                 weak: bool = False) -> None:
        self.holder, self.gct, self.target, self.how, self.weak = holder, gct, target, how, weak

    def __repr__(self) -> str:
        return "Ref(0x%x %s -> 0x%x %r%s)" % (self.holder, C.GCT_NAMES.get(self.gct),
                                              self.target, self.how,
                                              " weak" if self.weak else "")


class Heap(object):
    """The objects of one VM and how to read their references."""

    def __init__(self, vm: 'VM', cache_bytes: int = 256 << 20) -> None:
        self.vm = vm
        lay = self.lay = vm.lay
        self.t = vm.t
        self.mem = PageCache(vm.t, cache_bytes)
        self._last = (1, 0, b"")
        self.rs = lay.ref_size
        self.gc64 = lay.gc64
        self._Q = struct.Struct("<Q")
        # tvisnil: GC64 sets all 64 bits (setnilV: it64 = -1); the others
        # only the tag word, the low word keeps what was there.
        self.nil_shift = 0 if lay.gc64 else 32
        self.nil_top = 0xFFFFFFFFFFFFFFFF >> self.nil_shift
        self._weak = {}             # metatable -> (weak keys, weak values)
        t = vm.t
        mmname = t.constant("GCROOT_MMNAME")
        mode = t.constant("MM_mode")
        self.mm_mode_slot = (GCROOT_MMNAME_DEFAULT if mmname is None else mmname) + \
            (MM_MODE_DEFAULT if mode is None else mode)
        self.basemt = t.constant("GCROOT_BASEMT")
        self.addrs = self.gcts = self.sizes = self.dead = self.stat = None
        # (a budget.Budget: the memory the graph may take, checked by the
        # loops that build it)
        self.budget = None
        self._jtrace = self._irk = self._pending = None
        # find_ref's last array part: ((address, slots), its bytes).  The
        # chains to the most retaining objects go through the same big
        # tables again and again (one of 8 million slots: 64 MB each time).
        self._last_array = (None, b"")

    # --- reading ----------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        """n bytes at addr, as bytes (through the page cache's pieces; the
        last piece read is kept at hand)."""
        base, end, buf = self._last
        if not (base <= addr and addr + n <= end):
            base, buf = self.mem.window(addr, n)
            end = base + len(buf)
            self._last = (base, end, buf)
        off = addr - base
        return bytes(buf[off:off + n])

    def ref(self, addr: int) -> int:
        return int.from_bytes(self.mem.read(addr, self.rs), "little")

    def gc_of(self, raw: int) -> int:
        """The GC object a TValue's raw bits hold, or 0."""
        if self.gc64:
            it = raw >> 47
            if 0x1FFF3 <= it <= 0x1FFFB:
                return raw & C.GCVMASK
            return 0
        it = raw >> 32
        if 0xFFFFFFF3 <= it <= 0xFFFFFFFB:
            return raw & 0xFFFFFFFF
        return 0

    # --- every object -------------------------------------------------------
    def index(self) -> Tuple[array, bytes]:
        """Find every object: (sorted addresses, their gct), as arrays
        (lgcstat's walk, gcstat.HeapWalker, which also sizes each one:
        self.sizes, self.dead, and its HeapStat self.stat)."""
        if self.addrs is not None:
            return self.addrs, self.gcts
        from .gcstat import HeapWalker
        walker = HeapWalker(self.vm, keep=True, mem=self.mem)
        self.stat = walker.run()
        self.addrs, self.gcts, self.sizes, self.dead = walker.objects()
        if self.budget is not None:
            self.budget.expect(len(self.addrs), in_c=graphc.load()[0] is not None)
        return self.addrs, self.gcts

    def check_budget(self, done: int) -> None:
        """The budget's check while the graph is built (done: objects so
        far; the loops call it every 65,536 objects)."""
        if self.budget is not None:
            self.budget.check(done)

    def finalizer_list(self) -> List[int]:
        """The userdata on g->gc.mmudata (a ring anchored at its last one)."""
        vm = self.vm
        last = vm.gref(vm.G + self.lay.G.gc_mmudata, "g->gc.mmudata")
        out = []
        if not last:
            return out
        o = self.ref(last)
        while o and len(out) < (1 << 24):
            out.append(o)
            if o == last:
                break
            o = self.ref(o)
        return out

    def finalizer_state(self, o: int) -> Optional[str]:
        """For a userdata: "pending" when it waits on g->gc.mmudata for its
        __gc, "finalized" when its __gc has run (LJ_GC_FINALIZED in its
        mark, R lj_gc.c gc_finalize: it was resurrected when anything
        still references it, as the __gc's own argument does while it
        runs), else None."""
        if self._pending is None:
            self._pending = frozenset(self.finalizer_list())
        if o in self._pending:
            return "pending"
        marked = self.read(o + self.lay.str.marked, 1)[0]
        return "finalized" if marked & LJ_GC_FINALIZED else None

    def is_dead(self, addr: int) -> bool:
        """Whether the collector's mark says the object at addr is garbage
        not yet swept (R lj_gc.h isdead: marked with the other white)."""
        i = self.position(addr)
        return i >= 0 and bool(self.dead[i])

    def position(self, addr: int) -> int:
        """The index of the object at addr, or -1."""
        addrs = self.index()[0]
        i = bisect.bisect_left(addrs, addr)
        return i if i < len(addrs) and addrs[i] == addr else -1

    # --- references ---------------------------------------------------------
    def refs(self, o: int, gct: int) -> List[Ref]:
        """[Ref] of the object at o of type gct."""
        try:
            if gct == C.GCT_TAB:
                return self._tab(o)
            if gct == C.GCT_FUNC:
                return self._func(o)
            if gct == C.GCT_THREAD:
                return self._thread(o)
            if gct == C.GCT_PROTO:
                return self._proto(o)
            if gct == C.GCT_UDATA:
                return self._udata(o)
            if gct == C.GCT_UPVAL:
                v = self.gc_of(self._Q.unpack(self.read(self._uv_value_addr(o), 8))[0])
                return [Ref(o, gct, v, ("uvval",))] if v else []
            if gct == C.GCT_TRACE and self.lay.trace is not None:
                return self._trace(o)
        except FaultError:
            return []
        return []

    def _tab_header(self, o):
        """(metatable, asize, hmask, array, node) of the table at o."""
        lay = self.lay
        s = lay.tab
        hdr = self.read(o, s.size)
        u = int.from_bytes
        return (u(hdr[s.metatable:s.metatable + self.rs], "little"),
                u(hdr[s.asize:s.asize + 4], "little"), u(hdr[s.hmask:s.hmask + 4], "little"),
                u(hdr[s.array:s.array + lay.mref_size], "little"),
                u(hdr[s.node:s.node + lay.mref_size], "little"))

    def _tab(self, o):
        lay = self.lay
        mt, asize, hmask, arr, node = self._tab_header(o)
        out = []
        wk = wv = False
        if mt:
            out.append(Ref(o, C.GCT_TAB, mt, ("mt",)))
            wk, wv = self.weak_mode(mt)
        gc_of = self.gc_of
        if asize and arr and asize < (1 << 28):
            data = self.read(arr, 8 * asize)
            for i, raw in enumerate(struct.unpack("<%dQ" % asize, data)):
                v = gc_of(raw)
                if v:
                    out.append(Ref(o, C.GCT_TAB, v, ("arr", i), wv))
        if node and hmask < (1 << 27):
            ns = lay.node.size
            ko, vo = lay.node.key, lay.node.val
            data = self.read(node, (hmask + 1) * ns)
            unpack = self._Q.unpack_from
            for j in range(hmask + 1):
                vraw = unpack(data, j * ns + vo)[0]
                if vraw >> self.nil_shift == self.nil_top:
                    continue                # a nil value: the slot is empty (a dead key)
                k = gc_of(unpack(data, j * ns + ko)[0])
                if k:
                    out.append(Ref(o, C.GCT_TAB, k, ("key", j), wk))
                v = gc_of(vraw)
                if v:
                    out.append(Ref(o, C.GCT_TAB, v, ("val", j), wv))
        return out

    def find_ref(self, holder: int, gct: int, target: int, target_gct: int) -> Optional[Ref]:
        """The strong Ref from holder to target (a table's slot found by the
        TValue's bytes, not by decoding every slot), or None."""
        if gct == C.GCT_TAB:
            pat = self._Q.pack(self.tv_bits(target, target_gct))
            mt, asize, hmask, arr, node = self._tab_header(holder)
            wk, wv = self.weak_mode(mt) if mt else (False, False)
            if mt == target:
                return Ref(holder, gct, target, ("mt",))
            if asize and arr and not wv and asize < (1 << 28):
                if self._last_array[0] != (arr, asize):
                    self._last_array = ((arr, asize), self.read(arr, 8 * asize))
                data = self._last_array[1]
                k = data.find(pat)
                while k >= 0 and k % 8:
                    k = data.find(pat, k + 1)
                if k >= 0:
                    return Ref(holder, gct, target, ("arr", k // 8))
            # The hash part searched the same way; of its slots, the first
            # in refs()'s order (node by node, a key before its value).
            try:
                found = [r for r in self._tab_refs_to(holder, target, pat)
                         if not r.weak and r.how[0] in ("key", "val")]
            except FaultError:
                found = None
            if found is not None:
                return min(found, key=lambda r: (r.how[1], r.how[0] != "key")) if found else None
        return next((r for r in self.refs(holder, gct) if r.target == target and not r.weak),
                    None)

    def strong_targets(self, o: int, gct: int) -> Iterator[List[int]]:
        """The addresses the object at o keeps alive (its references, weak
        ones left out), for the breadth-first search, as lists: no Ref
        objects, and a table's slots filtered a piece at a time."""
        if gct != C.GCT_TAB:
            yield [r.target for r in self.refs(o, gct) if not r.weak]
            return
        lay = self.lay
        try:
            mt, asize, hmask, arr, node = self._tab_header(o)
            out = []
            wk = wv = False
            if mt:
                out.append(mt)
                wk, wv = self.weak_mode(mt)
            if self.gc64:
                lo, hi, shift, mask = 0x1FFF3, 0x1FFFB, 47, C.GCVMASK
            else:
                lo, hi, shift, mask = 0xFFFFFFF3, 0xFFFFFFFB, 32, 0xFFFFFFFF
            if asize and arr and asize < (1 << 28) and not wv:
                # In pieces of 64K slots: a huge array costs no huge list.
                for first in range(0, asize, _CHUNK):
                    cnt = min(_CHUNK, asize - first)
                    raws = struct.unpack("<%dQ" % cnt, self.read(arr + 8 * first, 8 * cnt))
                    out.extend([r & mask for r in raws if lo <= r >> shift <= hi])
                    if len(out) > _CHUNK:
                        yield out
                        out = []
            if node and hmask < (1 << 27) and not (wk and wv):
                ns = lay.node.size // 8
                words = struct.unpack("<%dQ" % ((hmask + 1) * ns),
                                      self.read(node, (hmask + 1) * ns * 8))
                vals = words[lay.node.val // 8::ns]
                if not wv:
                    out.extend([r & mask for r in vals if lo <= r >> shift <= hi])
                if not wk:
                    keys = words[lay.node.key // 8::ns]
                    nsh, ntop = self.nil_shift, self.nil_top
                    out.extend([k & mask for k, v in zip(keys, vals)
                                if lo <= k >> shift <= hi and v >> nsh != ntop])
        except FaultError:
            pass
        yield out

    def graph_targets(self, o: int, gct: int) -> Iterable[List[int]]:
        """As strong_targets, but a Lua function's upvalues are its GCupval
        objects (the collector's view: the upvalue object is what the
        closure keeps, and it keeps the value), for the dominator tree."""
        if gct != C.GCT_FUNC:
            return self.strong_targets(o, gct)
        lay = self.lay
        try:
            hdr = self.read(o, lay.fnC.size)
            if hdr[lay.fnC.ffid] != C.FF_LUA:
                return self.strong_targets(o, gct)
            rs = self.rs
            out = []
            env = int.from_bytes(hdr[lay.fnC.env:lay.fnC.env + rs], "little")
            if env:
                out.append(env)
            pc = int.from_bytes(hdr[lay.fnL.pc:lay.fnL.pc + lay.mref_size], "little")
            out.append(pc - lay.pt.size)
            nup = hdr[lay.fnC.nupvalues]
            if nup:
                data = self.read(o + lay.fnL.uvptr, nup * rs)
                out.extend(int.from_bytes(data[i * rs:(i + 1) * rs], "little")
                           for i in range(nup))
            return [out]
        except FaultError:
            return [[]]

    def weak_mode(self, mt: int) -> Tuple[bool, bool]:
        """(weak keys, weak values) of the tables with metatable mt: its
        __mode string (R lj_gc.c gc_traverse_tab)."""
        if mt in self._weak:
            return self._weak[mt]
        ans = (False, False)
        try:
            name = self.ref(self.vm.G + self.lay.G.gcroot + self.mm_mode_slot * self.rs)
            v = self.lookup_str(mt, name)
            if v and self.type_at(v) == C.GCT_STR:
                text = Str(self.vm, v, 64).data
                ans = (b"k" in text, b"v" in text)
        except (FaultError, CorruptError):
            pass
        self._weak[mt] = ans
        return ans

    def lookup_str(self, tab: int, key: int) -> int:
        """The GC object t[key] holds for the interned string at key (its
        hash part, scanned), or 0."""
        lay = self.lay
        s = lay.tab
        hdr = self.read(tab, s.size)
        hmask = int.from_bytes(hdr[s.hmask:s.hmask + 4], "little")
        node = int.from_bytes(hdr[s.node:s.node + lay.mref_size], "little")
        if not node or hmask >= (1 << 27):
            return 0
        ns, ko, vo = lay.node.size, lay.node.key, lay.node.val
        data = self.read(node, (hmask + 1) * ns)
        unpack = self._Q.unpack_from
        for j in range(hmask + 1):
            if self.gc_of(unpack(data, j * ns + ko)[0]) == key:
                return self.gc_of(unpack(data, j * ns + vo)[0])
        return 0

    def type_at(self, o: int) -> int:
        """The gct of the object at o (its header's type byte)."""
        return self.read(o + self.lay.str.gct, 1)[0]

    # --- decoded values -------------------------------------------------------
    def tv_bits(self, o: int, gct: int) -> int:
        """The 64 bits of a TValue holding the object at o of type gct (R
        lj_obj.h setgcV: the itype is ~gct)."""
        it = ~gct & 0xFFFFFFFF
        return ((it & 0x1FFFF) << 47 | o) if self.gc64 else (it << 32 | o)

    def object_value(self, o: int, gct: int) -> 'Value':
        """The object at o of type gct as a Value (objects.decode_tv)."""
        return decode_tv(self.vm, self.tv_bits(o, gct))

    def reference_key(self, r: Ref) -> 'Value':
        """The key, as a Value, of the hash node a table's ("val", node) or
        ("key", node) Ref r is in."""
        return self._node_value(r, self.lay.node.key)

    def reference_value(self, r: Ref) -> 'Value':
        """The value, as a Value, of the hash node a table's ("val", node)
        or ("key", node) Ref r is in."""
        return self._node_value(r, self.lay.node.val)

    def _node_value(self, r, off):
        node = self._tab_header(r.holder)[4] + r.how[1] * self.lay.node.size
        return decode_tv(self.vm, self._Q.unpack(self.read(node + off, 8))[0])

    def _func(self, o):
        lay = self.lay
        out = []
        env = self.ref(o + lay.fnC.env)
        if env:
            out.append(Ref(o, C.GCT_FUNC, env, ("env",)))
        hdr = self.read(o, lay.fnC.size)
        ffid = hdr[lay.fnC.ffid]
        nup = hdr[lay.fnC.nupvalues]
        if ffid == C.FF_LUA:
            pc = int.from_bytes(hdr[lay.fnL.pc:lay.fnL.pc + lay.mref_size], "little")
            out.append(Ref(o, C.GCT_FUNC, pc - lay.pt.size, ("proto",)))
            if nup:
                data = self.read(o + lay.fnL.uvptr, nup * self.rs)
                for i in range(nup):
                    uv = int.from_bytes(data[i * self.rs:(i + 1) * self.rs], "little")
                    if not uv:
                        continue
                    raw = self._Q.unpack(self.read(self._uv_value_addr(uv), 8))[0]
                    v = self.gc_of(raw)
                    if v:
                        out.append(Ref(o, C.GCT_FUNC, v, ("uv", i)))
        elif nup:
            data = self.read(o + lay.fnC.upvalue, 8 * nup)
            for i in range(nup):
                v = self.gc_of(self._Q.unpack_from(data, 8 * i)[0])
                if v:
                    out.append(Ref(o, C.GCT_FUNC, v, ("cuv", i)))
        return out

    def _uv_value_addr(self, uv):
        """Where an upvalue's value is: uv->v (its own tv when closed, a
        stack slot while open)."""
        return int.from_bytes(self.read(uv + self.lay.uv.v, self.lay.mref_size), "little")

    def _thread(self, o):
        lay = self.lay
        s = lay.L
        hdr = self.read(o, s.size)
        ps = lay.ptr_size
        out = []
        env = int.from_bytes(hdr[s.env:s.env + self.rs], "little")
        if env:
            out.append(Ref(o, C.GCT_THREAD, env, ("env",)))
        stack = int.from_bytes(hdr[s.stack:s.stack + lay.mref_size], "little")
        top = int.from_bytes(hdr[s.top:s.top + ps], "little")
        n = (top - stack) // 8
        if stack and 0 < n < (1 << 24):
            data = self.read(stack, 8 * n)
            for i, raw in enumerate(struct.unpack("<%dQ" % n, data)):
                v = self.gc_of(raw)
                if v and v != o:
                    out.append(Ref(o, C.GCT_THREAD, v, ("slot", i)))
            if not lay.fr2:
                # A one-slot frame keeps its function in the low word of the
                # link slot, which is no TValue (R lj_gc.c
                # gc_traverse_frames marks them).
                for fr in self.frames(o):
                    if fr.func and fr.func != o:
                        out.append(Ref(o, C.GCT_THREAD, fr.func, ("frame", (fr.slot - stack) // 8)))
        return out

    def frames(self, L: int) -> List['Frame']:
        """The Lua frames of thread L (frames.FrameWalker), [] when its
        stack does not read."""
        from ..stack.frames import FrameWalker
        from ..vm.objects import Thread
        try:
            return FrameWalker(self.vm, Thread(self.vm, L)).walk()[0]
        except (FaultError, CorruptError):
            return []

    def slot_owner(self, L: int, index: int) -> Tuple[Optional['Frame'], Optional[str]]:
        """(Frame, local name or None) of stack slot `index` (from
        L->stack) of thread L: the frame whose slots hold it (its base at
        or below the slot), or (None, None)."""
        from ..stack.frames import FrameWalker, frame_locals
        from ..vm.objects import Thread
        try:
            th = Thread(self.vm, L)
            walker = FrameWalker(self.vm, th)
            frames = walker.walk()[0]
        except (FaultError, CorruptError):
            return None, None
        addr = th.stack + 8 * index
        top = th.top
        for fr in frames:               # innermost first
            if fr.slot <= addr:
                name = None
                if fr.kind == "lua":
                    try:
                        for nm, _, a in frame_locals(walker, fr, top, with_addr=True):
                            if a == addr:
                                name = nm
                                break
                    except (FaultError, CorruptError):
                        pass
                return fr, name
            top = fr.slot - 8 * self.lay.fr2
        return None, None

    def _proto(self, o):
        lay = self.lay
        s = lay.pt
        hdr = self.read(o, s.size)
        out = []
        name = int.from_bytes(hdr[s.chunkname:s.chunkname + self.rs], "little")
        if name:
            out.append(Ref(o, C.GCT_PROTO, name, ("chunkname",)))
        nk = int.from_bytes(hdr[s.sizekgc:s.sizekgc + 4], "little")
        k = int.from_bytes(hdr[s.k:s.k + lay.mref_size], "little")
        if nk and k and nk < (1 << 20):
            rs = self.rs
            data = self.read(k - nk * rs, nk * rs)
            for i in range(nk):
                # proto_kgc(pt, -1 - i): the constants lie below pt->k.
                v = int.from_bytes(data[(nk - 1 - i) * rs:(nk - i) * rs], "little")
                if v:
                    out.append(Ref(o, C.GCT_PROTO, v, ("kgc", i)))
        if self.lay.jit and s.has("trace"):
            n = int.from_bytes(hdr[s.trace:s.trace + s.field("trace").size], "little")
            tr = self._trace_addr(n) if n else 0
            if tr:
                out.append(Ref(o, C.GCT_PROTO, tr, ("trace",)))
        return out

    def _jit(self):
        """(J->trace, J->sizetrace, REF_BIAS), read once."""
        if self._jtrace is None:
            from ..jit.jit import jit_state
            js = jit_state(self.vm)
            self._jtrace = (js.trace, js.sizetrace, js.ref_bias)
        return self._jtrace

    def _trace_addr(self, traceno):
        """The GCtrace of a trace number (J->trace[traceno]), or 0."""
        base, size, _ = self._jit()
        if not base or not 0 < traceno < size:
            return 0
        return self.ref(base + traceno * self.rs)

    def _ir_kinds(self):
        """(IR_KGC, IR_KNULL, mask of the IR types whose constants take two
        slots) of this build (R lj_ir.h IRT_IS64; 2.0 keeps 64-bit
        constants out of the IR: no mask)."""
        if self._irk is None:
            t = self.vm.t
            kgc, knull = t.constant("IR_KGC"), t.constant("IR_KNULL")
            names = ["NUM", "I64", "U64", "P64", "LIGHTUD"]
            if self.gc64:
                names += ["STR", "THREAD", "PROTO", "FUNC", "CDATA", "TAB", "UDATA", "NIL"]
            mask = 0
            if self.lay.branch != "2.0":
                for nm in names:
                    v = t.constant("IRT_" + nm)
                    if v is not None:
                        mask |= 1 << v
            self._irk = (kgc, knull, mask)
        return self._irk

    def _trace(self, o):
        """A trace's references as the collector marks them (R lj_gc.c
        gc_traverse_trace): its IR's GC constants ("kgc", ref), the traces
        it links to ("link"/"nextroot"/"nextside",) and its starting
        prototype ("startpt",); the prototype's ("trace",) is its root
        trace (pt->trace)."""
        s = self.lay.trace
        hdr = self.read(o, s.size)

        def get(name):
            f = s.field(name)
            return int.from_bytes(hdr[f.offset:f.offset + f.size], "little")
        out = []
        if not get("traceno"):
            return out
        kgc, knull, mask = self._ir_kinds()
        ref_true = self._jit()[2] - 3               # lj_ir.h REF_TRUE = REF_BIAS - 3
        nk, ir = get("nk"), get("ir")
        if kgc is not None and ir and ref_true - (1 << 16) < nk < ref_true:
            data = self.read(ir + 8 * nk, 8 * (ref_true - nk) + 8)
            ref = nk
            while ref < ref_true:
                k = (ref - nk) * 8
                typ, op = data[k + 4], data[k + 5]
                if op == kgc:
                    if self.gc64:
                        v = self._Q.unpack_from(data, k + 8)[0]
                    else:
                        v = int.from_bytes(data[k:k + 4], "little")
                    if v:
                        # jit.util.tracek's index: ref - REF_BIAS.
                        out.append(Ref(o, C.GCT_TRACE, v, ("irk", ref - ref_true - 3)))
                if mask >> (typ & 31) & 1 and op != knull:
                    ref += 1
                ref += 1
        for name in ("link", "nextroot", "nextside"):
            n = get(name)
            tr = self._trace_addr(n) if n else 0
            if tr and tr != o:
                out.append(Ref(o, C.GCT_TRACE, tr, (name,)))
        pt = get("startpt")
        if pt:
            out.append(Ref(o, C.GCT_TRACE, pt, ("startpt",)))
        return out

    def traceno(self, o: int) -> int:
        """The number of the trace at o."""
        f = self.lay.trace.field("traceno")
        return int.from_bytes(self.read(o + f.offset, f.size), "little")

    def _udata(self, o):
        lay = self.lay
        out = []
        mt = self.ref(o + lay.ud.metatable)
        if mt:
            out.append(Ref(o, C.GCT_UDATA, mt, ("mt",)))
        env = self.ref(o + lay.ud.env)
        if env:
            out.append(Ref(o, C.GCT_UDATA, env, ("env",)))
        return out

    # --- roots --------------------------------------------------------------
    def roots(self) -> List[Tuple[Tuple[Any, ...], int]]:
        """[(name, address)]: what the collector marks first, in the order
        a path is preferred from: _G, the registry, the main thread,
        g->gcroot, the finalizer list."""
        vm, lay = self.vm, self.lay
        main = vm.main_L
        out = []
        env = self.ref(main + lay.L.env)
        if env:
            out.append((("_G",), env))
        reg = self.gc_of(vm.registry_raw) if hasattr(vm, "registry_raw") else \
            self.gc_of(self._Q.unpack(self.read(vm.G + lay.G.registrytv, 8))[0])
        if reg:
            out.append((("registry",), reg))
        out.append((("main thread",), main))
        f = lay.G.field("gcroot")
        for i in range(f.count or 0):
            v = self.ref(vm.G + f.offset + i * self.rs)
            if v:
                out.append((("gcroot", i), v))
        for u in self.finalizer_list():
            out.append((("finalizer",), u))
        return out

    def basemt_type(self, i: int) -> Optional[str]:
        """The type name whose base metatable g->gcroot[i] is, or None."""
        if self.basemt is None or i < self.basemt:
            return None
        k = i - self.basemt
        return _TYPE_ORDER[k] if k < len(_TYPE_ORDER) else None

    # --- questions ----------------------------------------------------------
    def referrers(self, target: int) -> Tuple[List[Ref], List[Tuple[Any, ...]]]:
        """([Ref] of every object that references target, [root name] of
        the roots that are target), in address order.  Each object's
        memory is searched for the target's bytes (as a TValue, as a
        GCRef) before any of it is decoded."""
        addrs, gcts = self.index()
        lay = self.lay
        i = self.position(target)
        if i < 0:
            return [], []
        tv = self._Q.pack(self.tv_bits(target, gcts[i]))
        gref = target.to_bytes(self.rs, "little")
        T = C
        # In C when it can be built (graphc.py): the tables, functions and
        # upvalues that hold target, the others searched below as they are.
        held = graphc.holders(self, i)
        if held is not None:
            uvs = set(addrs[k] for k in held if gcts[k] == T.GCT_UPVAL)
            look = array("I", sorted(
                [k for k in held if gcts[k] in (T.GCT_TAB, T.GCT_FUNC)] +
                [k for g in (T.GCT_THREAD, T.GCT_PROTO, T.GCT_UDATA, T.GCT_TRACE)
                 for k in graphc.positions(gcts, g)]))
        else:
            # The upvalues whose value is target (closed or open).
            uvs = set()
            for k in range(len(addrs)):
                if gcts[k] == T.GCT_UPVAL:
                    try:
                        if self.read(self._uv_value_addr(addrs[k]), 8) == tv:
                            uvs.add(addrs[k])
                    except FaultError:
                        continue
            look = range(len(addrs))
        out = []
        for k in look:
            gct = gcts[k]
            o = addrs[k]
            if not k & 0xFFFF:
                self.check_budget(k)
            try:
                if gct == T.GCT_TAB:
                    out.extend(self._tab_refs_to(o, target, tv))
                elif gct == T.GCT_FUNC:
                    out.extend(self._func_refs_to(o, target, tv, uvs))
                elif gct == T.GCT_THREAD:
                    if self._holds(o, lay.L.size, gref) or self._stack_holds(o, tv, gref):
                        out.extend(r for r in self.refs(o, gct) if r.target == target)
                elif gct in (T.GCT_PROTO, T.GCT_UDATA, T.GCT_TRACE):
                    out.extend(r for r in self.refs(o, gct) if r.target == target)
            except FaultError:
                continue
        return out, [name for name, v in self.roots() if v == target]

    def _holds(self, o, size, pat):
        return pat in self.read(o, size)

    def _stack_holds(self, o, tv, gref):
        s = self.lay.L
        hdr = self.read(o, s.size)
        stack = int.from_bytes(hdr[s.stack:s.stack + self.lay.mref_size], "little")
        top = int.from_bytes(hdr[s.top:s.top + self.lay.ptr_size], "little")
        n = top - stack
        if not stack or not 0 < n < (8 << 24):
            return False
        data = self.read(stack, n)
        return tv in data or (not self.lay.fr2 and gref in data)

    def _tab_refs_to(self, o, target, tv):
        """The Refs from table o to target, found by searching its array
        and hash part for target's TValue bytes."""
        lay = self.lay
        mt, asize, hmask, arr, node = self._tab_header(o)
        out = []
        wk, wv = self.weak_mode(mt) if mt else (False, False)
        if mt == target:
            out.append(Ref(o, C.GCT_TAB, target, ("mt",)))
        if asize and arr and asize < (1 << 28):
            for k in _aligned(self.read(arr, 8 * asize), tv, 8):
                out.append(Ref(o, C.GCT_TAB, target, ("arr", k // 8), wv))
        if node and hmask < (1 << 27):
            ns = lay.node.size
            data = self.read(node, (hmask + 1) * ns)
            for k in _aligned(data, tv, 8):
                j, part = divmod(k, ns)
                if part == lay.node.val:
                    out.append(Ref(o, C.GCT_TAB, target, ("val", j), wv))
                elif part == lay.node.key:
                    vraw = self._Q.unpack_from(data, j * ns + lay.node.val)[0]
                    if vraw >> self.nil_shift != self.nil_top:
                        out.append(Ref(o, C.GCT_TAB, target, ("key", j), wk))
        return out

    def _func_refs_to(self, o, target, tv, uvs):
        lay = self.lay
        hdr = self.read(o, lay.fnC.size)
        nup = hdr[lay.fnC.nupvalues]
        out = []
        if int.from_bytes(hdr[lay.fnC.env:lay.fnC.env + self.rs], "little") == target:
            out.append(Ref(o, C.GCT_FUNC, target, ("env",)))
        if hdr[lay.fnC.ffid] == C.FF_LUA:
            pc = int.from_bytes(hdr[lay.fnL.pc:lay.fnL.pc + lay.mref_size], "little")
            if pc - lay.pt.size == target:
                out.append(Ref(o, C.GCT_FUNC, target, ("proto",)))
            if nup and uvs:
                rs = self.rs
                data = self.read(o + lay.fnL.uvptr, nup * rs)
                for i in range(nup):
                    if int.from_bytes(data[i * rs:(i + 1) * rs], "little") in uvs:
                        out.append(Ref(o, C.GCT_FUNC, target, ("uv", i)))
        elif nup:
            for k in _aligned(self.read(o + lay.fnC.upvalue, 8 * nup), tv, 8):
                out.append(Ref(o, C.GCT_FUNC, target, ("cuv", k // 8)))
        return out

    def path_to(self, target: int) -> Optional[Tuple[Tuple[Any, ...], List[Optional[Ref]]]]:
        """The shortest chain of strong references from a root to target:
        (root name, [Ref, ...]) (an empty list when target is a root), or
        None when no root reaches it.  Breadth first over all the roots at
        once, in the order of roots(); upvalue objects are passed over."""
        addrs, gcts = self.index()
        pos = self.position
        if pos(target) < 0:
            return None
        found = root_indices(self)
        root_of = dict(found)
        roots = [i for i, _ in found]
        ti = pos(target)
        # The same search in C when it can be built (graphc.py), else here.
        parent = graphc.parents(self, roots, ti)
        if parent is None:
            parent = self._parents(roots, ti)
        if parent[ti] == -1:
            return None
        chain = []
        j = ti
        while parent[j] >= 0:
            i = parent[j]
            how = self.find_ref(addrs[i], gcts[i], addrs[j], gcts[j])
            chain.append(how)
            j = i
        chain.reverse()
        return root_of[j], chain

    def _parents(self, roots, ti):
        """graphc.parents in Python."""
        addrs, gcts = self.addrs, self.gcts
        n = len(addrs)
        parent = array("i", [-1]) * n       # -2: a root
        queue = array("I", roots)           # indexes, read from `head` on
        for i in roots:
            parent[i] = -2
        targets = self.strong_targets
        bisect_left = bisect.bisect_left
        T_STR, T_CDATA = C.GCT_STR, C.GCT_CDATA
        head = 0
        while head < len(queue) and parent[ti] == -1:
            i = queue[head]
            head += 1
            if not head & 0xFFFF:
                self.check_budget(head)
            gct = gcts[i]
            if gct == T_STR or gct == T_CDATA:
                continue
            for piece in targets(addrs[i], gct):
                for t in piece:
                    j = bisect_left(addrs, t)
                    if j < n and addrs[j] == t and parent[j] == -1:
                        parent[j] = i
                        queue.append(j)
        return parent
