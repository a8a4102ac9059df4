"""LuaJIT's string interning table: its slots, the chains hanging from them,
and how the strings are hashed.

Mirrors (R = upstream 2.1 rolling, 20 = upstream 2.0; Debian's and
OpenResty's 2.1 have R's table; file:line into each tree's src/):
  g->str {tab, mask, num, id, idreseed,   R lj_obj.h StrInternState; 20: g->strhash,
          second, seed}                   strmask, strnum (lj_obj.h global_State)
  a slot's chain                          R lj_str.c lj_str_new: anchors are GCRefs,
                                          strings chained through nextgc (never tagged)
  bit 0 of an anchor                      R lj_str.c:126-252: the chain had more than
                                          LJ_STR_MAXCOLL (32) collisions, so new strings
                                          that land there are hashed again with the dense
                                          secondary hash (GCstr.hashalg = 1)
  the primary hash                        R lj_str.c:76 hash_sparse: reads only 4 bytes
                                          at the start, the end, the middle and a quarter
                                          in: equal-length strings that differ elsewhere
                                          collide (20 lj_str.c:100 the same, unseeded)
  OpenResty's hash function               OR lj_str.c:84-98: with LJ_HAS_OPTIMISED_HASH
                                          the pointer hash_sparse, set at start to a CRC32
                                          version (lj_str_hash.c) where the CPU has SSE 4.2
The engine never prints: string_table() returns data.
"""
from typing import Optional, TYPE_CHECKING
import struct

from ..errors import CorruptError
from .objects import Str

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .state import VM

LJ_STR_MAXCOLL = 32                  # R lj_str.c:126
MAX_MASK = 1 << 30
# Chain-length classes of the histogram: 0, 1, 2, 3, then powers of two.
BUCKETS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 7), (8, 15), (16, 31), (32, 63), (64, 127),
           (128, 255), (256, 1 << 62))


def bucket_name(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    return "%d+" % lo if hi >= 1 << 62 else "%d-%d" % (lo, hi)


class StringTable(object):
    """What string_table() found: slots, count (the table's own num),
    walked (strings found in the chains), histogram [(label, slots,
    strings)], longest [(slot, length, secondary, [Str])], secondary_slots
    (marked: the first 8 of them), dense (strings with hashalg 1), state
    {field: value} of StrInternState fields this build has, hash_function
    (OpenResty's pointer's target)."""


def string_table(vm: 'VM', top: int = 5, keep_strings: int = 8,
                 limit: Optional[int] = None) -> StringTable:
    """Walk every chain of the string table.  top: how many of the longest
    chains to keep; keep_strings: strings kept of each (the rest counted);
    limit: bytes of each string's text to read."""
    lay, t = vm.lay, vm.t
    st = StringTable()
    tab = t.ptr(vm.G + lay.o_strtab, "string table pointer")
    mask = t.u32(vm.G + lay.o_strmask, "string table mask")
    num = t.u32(vm.G + lay.o_strnum, "string count")
    if mask & (mask + 1) or mask >= MAX_MASK:
        raise CorruptError("string table mask 0x%x is not 2^n-1" % mask, vm.G + lay.o_strmask)
    st.address, st.slots, st.count = tab, mask + 1, num
    st.state = {}
    if lay.strtab_kind == "str":
        for name in ("id", "idreseed", "second", "seed"):
            if lay.G.has("str." + name):
                f = lay.G.field("str." + name)
                st.state[name] = t.uint(vm.G + f.offset, f.size, "g->str." + name)
    st.hash_function = None
    hp = t.symbol("hash_sparse")
    if hp is not None:
        try:
            st.hash_function = t.symbolize(t.ptr(hp, "hash_sparse"))
        except Exception:                # a code label the backend cannot name
            st.hash_function = None
    has_hashalg = lay.str.has("hashalg")
    rs = lay.ref_size
    counts = {}
    longest = []                          # (length, slot, secondary, anchor)
    walked = dense = secondary = 0
    marked = []                           # the first slots with bit 0 set
    step = 1 << 16
    for first in range(0, mask + 1, step):
        n = min(step, mask + 1 - first)
        data = t.read(tab + first * rs, n * rs,
                      "string table slots %d..%d" % (first, first + n - 1))
        anchors = struct.unpack("<%d%s" % (n, "Q" if rs == 8 else "I"), data)
        for i, a in enumerate(anchors):
            flag = a & 1
            s = a & ~1
            if flag:
                secondary += 1
                if len(marked) < 8:
                    marked.append(first + i)
            length = 0
            while s:
                length += 1
                walked += 1
                if walked > num + 1:
                    raise CorruptError("the string chains hold more strings than the %d "
                                       "g->str.num counts: a cycle?" % num, s)
                if has_hashalg:
                    hdr = t.read(s, lay.str.size, "string 0x%x" % s)
                    dense += hdr[lay.str.hashalg]
                    s = int.from_bytes(hdr[:rs], "little")
                else:
                    s = t.uint(s, rs, "string 0x%x" % s)
            counts[length] = counts.get(length, 0) + 1
            if length and (len(longest) < top or length > longest[-1][0]):
                longest.append((length, first + i, flag, a & ~1))
                longest.sort(key=lambda x: (-x[0], x[1]))
                del longest[top:]
    st.walked, st.dense, st.secondary_slots = walked, dense if has_hashalg else None, secondary
    st.marked = marked
    st.histogram = []
    for lo, hi in BUCKETS:
        slots = sum(c for ln, c in counts.items() if lo <= ln <= hi)
        strings = sum(c * ln for ln, c in counts.items() if lo <= ln <= hi)
        if slots:
            st.histogram.append((bucket_name(lo, hi), slots, strings))
    st.longest = []
    for length, slot, flag, s in longest:
        strs = []
        while s and len(strs) < keep_strings:
            strs.append(Str(vm, s, limit))
            s = t.uint(s, rs, "string 0x%x" % s)
        st.longest.append((slot, length, bool(flag), strs))
    return st
