"""Decoders for LuaJIT values and objects.  They read bytes through a Target
(one read per object header) and return plain data objects; they never
print.  `vm` below is a gdb_ext.vm.state.VM: target `t`, layout `lay`, and
the global_State address `G` (needed for light userdata segments)."""
from typing import Any, Callable, Iterator, List, Optional, TYPE_CHECKING, Tuple, Union
import struct

from .. import consts as C
from ..errors import CorruptError, FaultError
from .gcobj import GCObj, Str, field, number_text, str_text  # noqa: F401 (Str, str_text: here too)

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout
    from .check import Bare
    from .state import VM

_Q = struct.Struct("<Q")
_I = struct.Struct("<I")
_d = struct.Struct("<d")


def _u(buf, off, size):
    return int.from_bytes(buf[off:off + size], "little")


# --------------------------------------------------------------------------
# TValue

class Value(object):
    """One decoded TValue.  kind is one of: nil false true lightud number int
    str upval thread proto func trace cdata table udata.  For GC kinds `addr`
    is the object's address; for numbers `num`; for light userdata `addr`."""

    __slots__ = ("kind", "raw", "itype", "addr", "num")

    def __init__(self, kind: str, raw: int, itype: int, addr: Optional[int] = None,
                 num: Union[int, float, None] = None) -> None:
        self.kind = kind
        self.raw = raw
        self.itype = itype
        self.addr = addr
        self.num = num

    @property
    def is_gc(self) -> bool:
        return self.kind in _GC_KINDS

    @property
    def type_name(self) -> str:
        """What Lua's type() would say."""
        return _LUA_TYPE.get(self.kind, self.kind)

    def __repr__(self) -> str:
        return "Value(%s, raw=0x%016x)" % (self.kind, self.raw)


_TAG_KIND = {
    C.LJ_TNIL: "nil", C.LJ_TFALSE: "false", C.LJ_TTRUE: "true", C.LJ_TLIGHTUD: "lightud",
    C.LJ_TSTR: "str", C.LJ_TUPVAL: "upval", C.LJ_TTHREAD: "thread", C.LJ_TPROTO: "proto",
    C.LJ_TFUNC: "func", C.LJ_TTRACE: "trace", C.LJ_TCDATA: "cdata", C.LJ_TTAB: "table",
    C.LJ_TUDATA: "udata",
}
_GC_KINDS = frozenset(C.KIND_GCT)
_LUA_TYPE = {"false": "boolean", "true": "boolean", "lightud": "userdata", "int": "number",
             "str": "string", "func": "function", "udata": "userdata"}
KIND_GCT = C.KIND_GCT
GCT_KIND = C.GCT_NAMES


def split_tv(lay: 'Layout', raw: int) -> Tuple[int, int]:
    """(itype, payload) as this layout splits the 64 raw bits (for teaching)."""
    if lay.gc64:
        v = raw >> C.GC64_TAG_SHIFT
        it = (v | 0xFFFE0000) if v & 0x10000 else v
        return it, raw & C.GCVMASK
    return raw >> 32, raw & 0xFFFFFFFF


def decode_tv(vm: 'VM', raw: int) -> Value:
    """Decode the 64 bits of a TValue into a Value."""
    lay = vm.lay
    if lay.gc64:
        v = raw >> C.GC64_TAG_SHIFT
        it = (v | 0xFFFE0000) if v & 0x10000 else v
        if it < C.LJ_TISNUM_GC64:
            return Value("number", raw, it, num=_d.unpack(_Q.pack(raw))[0])
        if it == C.LJ_TISNUM_GC64:
            i = raw & 0xFFFFFFFF
            return Value("int", raw, it, num=i - (1 << 32) if i & 0x80000000 else i)
        kind = _TAG_KIND.get(it)
        if kind is None:
            raise CorruptError("invalid TValue 0x%016x: type tag 0x%x is not a LuaJIT type"
                               % (raw, it))
        if kind == "lightud":
            return Value(kind, raw, it, addr=lightud_pointer(vm, raw))
        if kind in _GC_KINDS:
            return Value(kind, raw, it, addr=raw & C.GCVMASK)
        return Value(kind, raw, it)
    it = raw >> 32
    tisnum = C.LJ_TISNUM_X64 if lay.ptr_size == 8 else C.LJ_TNUMX
    if it < tisnum:
        return Value("number", raw, it, num=_d.unpack(_Q.pack(raw))[0])
    if it == tisnum:
        i = raw & 0xFFFFFFFF
        return Value("int", raw, it, num=i - (1 << 32) if i & 0x80000000 else i)
    if lay.ptr_size == 8 and ((it ^ 0x80000000) - 0x80000000) >> 15 == -2:
        # R lj_obj.h tvislightud for 64-bit non-GC64: 47-bit pointer.
        return Value("lightud", raw, C.LJ_TLIGHTUD, addr=raw & C.GCVMASK)
    kind = _TAG_KIND.get(it)
    if kind is None:
        raise CorruptError("invalid TValue 0x%016x: type tag 0x%x is not a LuaJIT type" % (raw, it))
    if kind in _GC_KINDS or kind == "lightud":
        return Value(kind, raw, it, addr=raw & 0xFFFFFFFF)
    return Value(kind, raw, it)


def lightud_pointer(vm: 'VM', raw: int) -> int:
    """GC64 light userdata: a segment number and 39 low bits; the segment
    map in g->gc.lightudseg gives the upper 32 bits (R lj_obj.h lightudV)."""
    lay = vm.lay
    if not lay.has_lightudseg:
        return raw & C.GCVMASK
    seg = (raw >> lay.lightud_lo_bits) & ((1 << lay.lightud_seg_bits) - 1)
    lo = raw & ((1 << lay.lightud_lo_bits) - 1)
    segmap = vm.t.uint(vm.G + lay.G.gc_lightudseg, lay.mref_size, "g->gc.lightudseg")
    num = vm.t.u8(vm.G + lay.G.gc_lightudnum, "g->gc.lightudnum")
    if seg > num or not segmap:
        raise CorruptError("light userdata 0x%016x names segment %d of %d" % (raw, seg, num + 1))
    return (vm.t.u32(segmap + 4 * seg, "lightuserdata segment map") << 32) | lo


# --------------------------------------------------------------------------
# GC objects: one small class per type, each built from one read.

class Tab(GCObj):
    gct_expected = C.GCT_TAB
    struct_name = "GCtab"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        lay = vm.lay
        self.asize = self._f(vm, "asize")
        self.hmask = self._f(vm, "hmask")
        self.array = self._f(vm, "array")
        self.node = self._f(vm, "node")
        self.metatable = self._f(vm, "metatable")
        c = self._f(vm, "colo")
        self.colo = c - 256 if c & 0x80 else c
        self.nomm = self._f(vm, "nomm")
        self.nodesize = lay.node.size
        if self.asize > (1 << 28) or self.hmask > (1 << 27) or (self.hmask & (self.hmask + 1)):
            raise CorruptError("table at 0x%x has impossible sizes asize=%d hmask=0x%x"
                               % (addr, self.asize, self.hmask), addr)
        need = 8 * self.asize + (self.hmask + 1) * self.nodesize
        bound = getattr(vm, "size_bound", None)
        if bound is not None and need > bound:
            raise CorruptError("table at 0x%x has asize=%d hmask=0x%x: %d bytes, more than "
                               "g->gc.total (%d)" % (addr, self.asize, self.hmask, need, bound),
                               addr)

    def array_values(self, vm: 'VM', limit: int) -> List[Tuple[int, Value]]:
        """[(index, Value)] of the array part, nil slots included, at most
        limit; read in chunks of 4096 slots."""
        n = min(self.asize, limit)
        out = []
        step = 4096
        for first in range(0, n, step):
            cnt = min(step, n - first)
            data = vm.t.read(self.array + 8 * first, 8 * cnt,
                             "array part of table 0x%x" % self.addr)
            out.extend((first + i, decode_tv(vm, _Q.unpack_from(data, 8 * i)[0]))
                       for i in range(cnt))
        return out

    def hash_nodes(self, vm: 'VM', limit: int) -> Tuple[List[Tuple[Value, Value]], int]:
        """[(key Value, value Value)] of non-nil hash slots, in node order,
        at most `limit` of them; and the number of all non-nil slots."""
        if not self.node:
            return [], 0
        nn = self.hmask + 1
        out = []
        seen = 0
        lay = vm.lay
        ko, vo = lay.node.key, lay.node.val
        step = 4096
        i = 0
        while i < nn:
            cnt = min(step, nn - i)
            data = vm.t.read(self.node + i * self.nodesize, cnt * self.nodesize,
                             "hash part of table 0x%x" % self.addr)
            for j in range(cnt):
                base = j * self.nodesize
                vraw = _Q.unpack_from(data, base + vo)[0]
                if vraw == 0xFFFFFFFFFFFFFFFF:
                    continue
                v = decode_tv(vm, vraw)
                if v.kind == "nil":
                    continue
                seen += 1
                if len(out) < limit:
                    out.append((decode_tv(vm, _Q.unpack_from(data, base + ko)[0]), v))
            i += cnt
        return out, seen

    # --- counting and paging without decoding every slot (a 10^5-entry
    # table in an editor's variables view) ----------------------------------

    def _nil_test(self, vm: 'VM') -> Callable[[int], bool]:
        """A test of a TValue's upper 32 bits: is it nil?  (GC64: the 17-bit
        tag above bit 47 is all ones, R lj_obj.h LJ_TNIL = ~0u; else the
        upper word is ~0u.)"""
        if vm.lay.gc64:
            return lambda hi: hi >= 0xFFFF8000
        return lambda hi: hi == 0xFFFFFFFF

    def _slots(self, vm: 'VM', base: int, n: int, stride: int, off: int,
               what: str) -> Iterator[Tuple[int, int, bytes]]:
        """(index, offset in data, data) of n slots of `stride` bytes from
        base, each slot's TValue at `off`, read 4096 slots at a time."""
        step = 4096
        for first in range(0, n, step):
            cnt = min(step, n - first)
            data = vm.t.read(base + stride * first, stride * cnt,
                             "%s of table 0x%x" % (what, self.addr))
            for i in range(cnt):
                yield first + i, stride * i + off, data

    def counts(self, vm: 'VM') -> Tuple[int, int]:
        """(the array part's non-nil slots, the hash part's), counted from
        the values' type words alone."""
        isnil = self._nil_test(vm)
        counts = []
        for base, n, stride, off, what in self._parts(vm):
            c = 0
            for _, o, data in self._slots(vm, base, n, stride, off + 4, what):
                if not isnil(_I.unpack_from(data, o)[0]):
                    c += 1
            counts.append(c)
        return counts[0], counts[1]

    def _parts(self, vm: 'VM') -> List[Tuple[int, int, int, int, str]]:
        """(base, slots, stride, value offset, name) of the array and hash parts."""
        return [(self.array, self.asize if self.array else 0, 8, 0, "array part"),
                (self.node, self.hmask + 1 if self.node else 0, self.nodesize, vm.lay.node.val,
                 "hash part")]

    def entries(self, vm: 'VM', part: str, skip: int, limit: int) -> List[Tuple[Any, Value]]:
        """The non-nil entries of one part ('array': [(index, Value)];
        'hash': [(key Value, Value)]), from the skip-th one on (0: the
        first), at most limit, in slot order; only those are decoded."""
        base, n, stride, off, what = self._parts(vm)[0 if part == "array" else 1]
        isnil = self._nil_test(vm)
        ko = vm.lay.node.key
        out = []
        seen = 0
        for i, o, data in self._slots(vm, base, n, stride, off, what):
            if isnil(_I.unpack_from(data, o + 4)[0]):
                continue
            if seen >= skip:
                v = decode_tv(vm, _Q.unpack_from(data, o)[0])
                key = i if part == "array" else decode_tv(vm, _Q.unpack_from(data, o - off + ko)[0])
                out.append((key, v))
                if len(out) >= limit:
                    break
            seen += 1
        return out

    def hash_funcs(self, vm: 'VM', limit: int) -> List[Tuple[Value, int]]:
        """[(key Value, function address)] of the hash part's function
        values, in slot order, at most limit; told from the others by
        their type word, and only their keys decoded (builtin_names looks
        at every library's slots at each stop that shows a builtin)."""
        base, n, stride, off, what = self._parts(vm)[1]
        ko = vm.lay.node.key
        if vm.lay.gc64:
            shift, tag, mask = C.GC64_TAG_SHIFT, C.LJ_TFUNC & 0x1FFFF, C.GCVMASK
        else:
            shift, tag, mask = 32, C.LJ_TFUNC, 0xFFFFFFFF
        out = []
        for _, o, data in self._slots(vm, base, n, stride, off, what):
            raw = _Q.unpack_from(data, o)[0]
            if raw >> shift != tag:
                continue
            out.append((decode_tv(vm, _Q.unpack_from(data, o - off + ko)[0]), raw & mask))
            if len(out) >= limit:
                break
        return out


class Func(GCObj):
    gct_expected = C.GCT_FUNC
    struct_name = "GCfuncC"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        self.ffid = self._f(vm, "ffid")
        self.nupvalues = self._f(vm, "nupvalues")
        self.env = self._f(vm, "env")
        self.pc = self._f(vm, "pc")
        self.is_lua = self.ffid == C.FF_LUA
        self.kind = "lua" if self.is_lua else ("c" if self.ffid == C.FF_C else "builtin")
        self.cfunc = None if self.is_lua else self._f(vm, "f")
        # R lj_obj.h funcproto(): the proto sits right before its bytecode.
        self.proto = self.pc - vm.lay.pt.size if self.is_lua else None

    def upvalue_refs(self, vm: 'VM') -> List[int]:
        """GCRef addresses of a Lua function's upvalue objects."""
        lay = vm.lay
        if not self.is_lua or not self.nupvalues:
            return []
        data = vm.t.read(self.addr + lay.fnL.uvptr, lay.ref_size * self.nupvalues, "upvalues")
        return [_u(data, i * lay.ref_size, lay.ref_size) for i in range(self.nupvalues)]


class Proto(GCObj):
    gct_expected = C.GCT_PROTO
    struct_name = "GCproto"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        for name in ("numparams", "framesize", "sizebc", "sizekgc", "sizekn", "sizept",
                     "sizeuv", "flags", "firstline", "numline", "chunkname", "lineinfo",
                     "uvinfo", "varinfo", "k", "uv"):
            setattr(self, name, self._f(vm, name))
        self.bc = addr + vm.lay.pt.size
        self.memo = {}          # what is worked out from it once (frames.py, lbt)

    def chunk(self, vm: 'VM', limit: int = 4096) -> str:
        try:
            return str_text(vm, self.chunkname, limit).decode("utf-8", "replace")
        except (FaultError, CorruptError):
            return "?"


class Udata(GCObj):
    gct_expected = C.GCT_UDATA
    struct_name = "GCudata"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        self.len = self._f(vm, "len")
        self.udtype = self._f(vm, "udtype")
        self.metatable = self._f(vm, "metatable")
        self.env = self._f(vm, "env")
        self.payload = addr + vm.lay.ud.size


class Cdata(GCObj):
    gct_expected = C.GCT_CDATA
    struct_name = "GCcdata"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        self.ctypeid = self._f(vm, "ctypeid")
        self.payload = addr + vm.lay.cd.size
        self.size = None
        # R lj_cdata.h: marked & 0x80 means a variable-length cdata whose
        # GCcdataVar header (offset, extra, len) sits just below it.
        self.is_vla = bool(self.marked & 0x80)
        try:
            self.size = ctype_size(vm, self.ctypeid)
            if self.is_vla:
                self.size = vm.t.u32(addr - 4, "GCcdataVar.len")
        except (FaultError, CorruptError):
            pass


def ctype_size(vm: 'VM', ctypeid: int) -> int:
    """Payload size of a fixed-size cdata of ctype `ctypeid`, from
    g->ctype_state (R lj_cdata.c lj_cdata_free: ctype_raw, then the size if
    ctype_hassize, else a pointer's).  CorruptError when it cannot be read
    (no FFI state, an id past the table)."""
    from .ffitypes import NoFFIState, ctypes_of
    try:
        ct = ctypes_of(vm) if vm.G is not None else None
    except NoFFIState:
        ct = None
    if ct is None:
        raise CorruptError("cdata of ctype %d but no FFI state (g->ctype_state)" % ctypeid)
    if ct.hassize is None or "ATTRIB" not in ct.kind.values():
        raise CorruptError("debug info lacks the CT_* enumerators (lj_ctype.h)")
    cid = ctypeid
    for _ in range(64):
        kind, info, size, _sib, _name = ct.get(cid)
        if kind != "ATTRIB":
            return size if info >> 28 <= ct.hassize else vm.lay.ptr_size
        cid = info & 0xFFFF
    raise CorruptError("ctype %d: attribute chain too long" % ctypeid)


class Thread(GCObj):
    gct_expected = C.GCT_THREAD
    struct_name = "lua_State"

    def __init__(self, vm: Union['VM', 'Bare'], addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        lay = vm.lay
        s = lay.L
        self.status = self._f(vm, "status")
        self.glref = self._f(vm, "glref")
        self.base = _u(self.buf, s.base, lay.ptr_size)
        self.top = _u(self.buf, s.top, lay.ptr_size)
        self.stack = self._f(vm, "stack")
        self.maxstack = self._f(vm, "maxstack")
        self.stacksize = self._f(vm, "stacksize")
        self.cframe = _u(self.buf, s.cframe, lay.ptr_size)
        self.openupval = self._f(vm, "openupval")
        self.env = self._f(vm, "env")


class Upval(GCObj):
    gct_expected = C.GCT_UPVAL
    struct_name = "GCupval"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        self.closed = self._f(vm, "closed")
        self.v = self._f(vm, "v")


class Trace(GCObj):
    gct_expected = C.GCT_TRACE
    struct_name = "GCtrace"

    def __init__(self, vm: 'VM', addr: int) -> None:
        GCObj.__init__(self, vm, addr)
        for name in ("traceno", "nins", "nk", "nsnap", "nsnapmap", "szmcode", "startpt",
                     "link", "root"):
            setattr(self, name, self._f(vm, name))
        self.mcode = self._f(vm, "mcode")


OBJECT_CLASSES = {"str": Str, "table": Tab, "func": Func, "proto": Proto, "udata": Udata,
                  "cdata": Cdata, "thread": Thread, "upval": Upval, "trace": Trace}


def read_object(vm: 'VM', kind: str, addr: int) -> GCObj:
    cls = OBJECT_CLASSES[kind]
    if kind == "trace" and vm.lay.trace is None:
        raise CorruptError("this build has no JIT, so no trace objects")
    return cls(vm, addr)


def gc_kind_at(vm: 'VM', addr: int) -> str:
    """The kind of the GC object at addr, from its gct byte."""
    gct = vm.t.u8(addr + vm.lay.str.gct, "GC header at 0x%x" % addr)
    kind = GCT_KIND.get(gct)
    if kind is None:
        raise CorruptError("no GC object at 0x%x: gct byte is %d, not 4..12" % (addr, gct), addr)
    return kind


def looks_like_gc_object(vm: 'VM', addr: int) -> Optional[str]:
    """The kind of GC object at addr when its header reads like one: a GC
    type byte, a next-object link that is NULL or leads to another GC type
    byte, and a body its decoder accepts; else None.  For a bare address
    that may be a TValue's as well as an object's."""
    lay = vm.lay
    try:
        kind = gc_kind_at(vm, addr)
        nxt = vm.t.uint(addr, lay.ref_size, "GC header")
        if nxt and GCT_KIND.get(vm.t.u8(nxt + lay.str.gct, "next GC object")) is None:
            return None
        read_object(vm, kind, addr)
    except (FaultError, CorruptError):
        return None
    return kind
