"""Unit tests of the heap walker and its page cache on synthetic memory.

Each test runs on the walk in C (walkc.c) and in Python.  The synthetic VM
has objects on every list the walker follows (the root list, string chains
with the secondary-hash flag on an anchor, a thread's open upvalues, the
circular mmudata list); g->gc.total is set to the sum of
their sizes computed here from LuaJIT's free functions (R lj_tab.c
lj_tab_free, lj_func.c lj_func_free, lj_str.h lj_str_size, ...).
"""

import pytest

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext import consts as C  # noqa: E402
from ljgdb.gdb_ext.errors import CorruptError, FaultError  # noqa: E402
from ljgdb.gdb_ext.heap import walkc  # noqa: E402
from ljgdb.gdb_ext.heap.gcstat import HeapWalker, walk_heap  # noqa: E402
from ljgdb.gdb_ext.layouts.layout import Layout  # noqa: E402
from ljgdb.gdb_ext.vm.pages import PageCache  # noqa: E402
from ljgdb.gdb_ext.vm.state import make_vm  # noqa: E402
from ljgdb.gdb_ext.target import SyntheticTarget  # noqa: E402

from support.synth import LAYOUTS, Heap, load_layout  # noqa: E402

VARIANTS = LAYOUTS


@pytest.fixture(autouse=True, params=["C", "Python"])
def walk_in(request, monkeypatch):
    """Every test on the walk in C (walkc.c) and on the Python walk."""
    if request.param == "Python":
        monkeypatch.setenv("LJGDB_HEAPWALK", "python")
    else:
        monkeypatch.delenv("LJGDB_HEAPWALK", raising=False)
        assert walkc.load()[0] is not None, walkc.load()[1]
    return request.param


# --------------------------------------------------------------------------
# PageCache

def seg_target(segments):
    return SyntheticTarget(load_layout("r21-gc64"), segments)


def test_pages_read_across_pieces_and_mappings():
    a = bytes(range(256)) * 4096                     # 1 MB
    b = bytes(reversed(range(256))) * 256            # 64 KB, right after a
    base = 0x7f0000000000
    t = seg_target([(base, a), (base + len(a), b)])
    pc = PageCache(t)
    for addr in (base, base + 5, base + len(a) - 3, base + len(a) + 100):
        off = addr - base
        assert pc.read(addr, 7) == (a + b)[off:off + 7]
        wb, buf = pc.window(addr, 7)
        assert buf[addr - wb:addr - wb + 7] == (a + b)[off:off + 7]


def test_pages_fault_names_the_first_unreadable_address():
    base = 0x10000000
    t = seg_target([(base, b"\1" * 6000)])           # ends inside a 4 KB piece
    pc = PageCache(t)
    assert pc.read(base + 4090, 10) == b"\1" * 10
    with pytest.raises(FaultError) as e:
        pc.read(base + 5990, 40)
    assert e.value.address == base + 6000
    with pytest.raises(FaultError):                   # and again, from the cache
        pc.window(base + 8200, 8)


def test_pages_hold_at_most_their_budget():
    base = 0x20000000
    t = seg_target([(base, b"\0" * (12 << 20))])
    pc = PageCache(t, max_bytes=4 << 20)
    for i in range(12):
        for _ in range(3):                            # come back: 1 MB pages
            pc.window(base + (i << 20) + 64, 16)
    assert pc.held <= 4 << 20
    assert len(pc.full) <= 4


# --------------------------------------------------------------------------
# The walker on a synthetic VM

def link(h, objs):
    """Chain objects by nextgc (GCHeader's first member), last one NULL."""
    for a, b in zip(objs, objs[1:] + [0]):
        h.write(a, b.to_bytes(h.ref, "little"))


def build(variant, pad=0, udata_len=24):
    """A synthetic heap of every kind of object; pad: bytes left between
    the first objects and the strings (a wider span of addresses sorts in
    more passes); udata_len: the second userdata's length."""
    h = Heap(variant)
    G, L = h.new_state(stack_slots=40)
    rs = h.ref
    gc21 = "str.tab" in h.types["global_State"].fields
    expect = {}

    def add(kind, size):
        c = expect.setdefault(kind, [0, 0])
        c[0] += 1
        c[1] += size

    # Tables: an empty one, one with array and hash parts, one colocated.
    t1 = h.new_tab()
    h.put("GCtab", t1, "hmask", 0)
    add("table", h.size("GCtab"))
    t2 = h.new_tab(array=[h.tv_num(1.0)] * 3, pairs=[(h.tv_num(2.0), h.tv_num(3.0))] * 2)
    add("table", h.size("GCtab") + 3 * 8 + 2 * h.size("Node"))
    t3 = h.new_tab()
    h.put("GCtab", t3, "hmask", 0)
    h.put("GCtab", t3, "asize", 4)
    h.put("GCtab", t3, "colo", 4)                    # colocated array of 4
    add("table", h.size("GCtab") + 4 * 8)
    # Functions: Lua with 2 upvalues, C with 1.
    fn, pt = h.new_lua_func(b"@x.lua", 1)
    h.put("GCfuncL", fn, "nupvalues", 2)
    add("func", h.size("GCfuncL") + 1 * rs)
    h.put("GCproto", pt, "sizept", 200)
    add("proto", 200)
    cf = h.new_c_func(1, 0x401000)
    h.put("GCfuncC", cf, "nupvalues", 1)
    add("func", h.size("GCfuncC"))
    uv = h.alloc(h.size("GCupval"))
    h.header("GCupval", uv, C.GCT_UPVAL)
    add("upval", h.size("GCupval"))
    add("thread", h.size("lua_State") + 40 * 8)      # the main thread
    link(h, [t1, t2, t3, fn, pt, cf, uv, L])
    h.put("global_State", G, "gc.root", t1)
    # Strings: 4 slots, two strings in slot 1 (anchor flagged), one in slot 3.
    # (The chunk name string made by new_lua_func is not on any list: drop
    # it from the count by not chaining it.)
    if pad:
        h.alloc(pad)
    strs = []
    for data in (b"alpha", b"be", b"gamma-delta"):
        s = h.new_str(data)
        strs.append(s)
        n = len(data)
        add("str", h.size("GCstr") + (((n + 4) & ~3) if gc21 else n + 1))
    link(h, strs[:2])
    link(h, strs[2:])
    tab = h.alloc(4 * rs)
    h.write(tab + 1 * rs, (strs[0] | 1).to_bytes(rs, "little"))
    h.write(tab + 3 * rs, strs[2].to_bytes(rs, "little"))
    if gc21:
        h.put("global_State", G, "str.tab", tab)
        h.put("global_State", G, "str.mask", 3)
    else:
        h.put("global_State", G, "strhash", tab)
        h.put("global_State", G, "strmask", 3)
    # An open upvalue on the main thread.
    ouv = h.alloc(h.size("GCupval"))
    h.header("GCupval", ouv, C.GCT_UPVAL)
    link(h, [ouv])
    h.put("lua_State", L, "openupval", ouv)
    add("upval", h.size("GCupval"))
    # mmudata: two userdata in a circle, anchored at the last.
    u1, u2 = h.alloc(h.size("GCudata") + 8), h.alloc(h.size("GCudata") + min(udata_len, 24))
    for u, n in ((u1, 8), (u2, udata_len)):
        h.header("GCudata", u, C.GCT_UDATA)
        h.put("GCudata", u, "len", n)
        add("udata", h.size("GCudata") + n)
    h.write(u1, u2.to_bytes(rs, "little"))
    h.write(u2, u1.to_bytes(rs, "little"))
    h.put("global_State", G, "gc.mmudata", u2)
    other = h.size("GG_State") - h.size("lua_State") + 4 * rs
    total = sum(b for _, b in expect.values()) + other
    h.put("global_State", G, "gc.total", total)
    return h, G, L, expect, total


def vm_of(h, L):
    t = h.target()
    return make_vm(t, Layout(t), L)


@pytest.mark.parametrize("variant", VARIANTS)
def test_walk_counts_every_list_exactly(variant):
    h, G, L, expect, total = build(variant)
    st = walk_heap(vm_of(h, L), top=3)
    got = {C.GCT_NAMES[g]: [ts.count, ts.bytes] for g, ts in st.types.items() if ts.count}
    assert got == expect
    assert st.pending == 2
    assert st.total == total
    assert st.accounted == total
    assert [s for s, _, _ in st.top] == sorted((s for s, _, _ in st.top), reverse=True)
    assert len(st.top) == 3


def tally(gcts, sizes):
    """{type name: [count, bytes]} of kept objects."""
    got = {}
    for g, size in zip(gcts, sizes):
        e = got.setdefault(C.GCT_NAMES[g], [0, 0])
        e[0] += 1
        e[1] += size
    return got


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("sorted_in", ["C", "Python"])
def test_kept_objects_come_in_address_order(variant, sorted_in, monkeypatch):
    """keep=True (the heap graph's index): every object once, in address
    order, with its type and size; sorted by graphc.c or in Python."""
    if sorted_in == "Python":
        monkeypatch.setenv("LJGDB_HEAPGRAPH", "python")
    h, G, L, expect, total = build(variant)
    w = HeapWalker(vm_of(h, L), keep=True)
    w.run()
    addrs, gcts, sizes, dead = w.objects()
    assert list(addrs) == sorted(set(addrs)) and len(gcts) == len(sizes) == len(addrs)
    assert tally(gcts, sizes) == expect
    assert set(dead) <= {0, 1}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("pad", [0, 1 << 20])
def test_kept_objects_sorted_in_both_parities(variant, pad):
    """walkc_sort_into's passes end in the caller's arrays whether there
    are two (pad 0: a span of kilobytes) or three (a span of a megabyte);
    a size too large for the kept word (2^28 bytes of userdata, only its
    header in memory) comes back whole."""
    big = 1 << 28
    h, G, L, expect, total = build(variant, pad=pad, udata_len=big)
    w = HeapWalker(vm_of(h, L), keep=True)
    w.run()
    addrs, gcts, sizes, dead = w.objects()
    assert list(addrs) == sorted(set(addrs))
    assert tally(gcts, sizes) == expect
    assert expect["udata"][1] > big and max(sizes) == h.size("GCudata") + big


@pytest.mark.parametrize("variant", VARIANTS)
def test_cycle_in_root_list_ends_with_an_error(variant):
    h, G, L, expect, total = build(variant)
    root = h.types["global_State"].fields["gc.root"]
    first = int.from_bytes(h.mem[G - h.base + root.offset:][:h.ref], "little")
    second = int.from_bytes(h.mem[first - h.base:][:h.ref], "little")
    h.write(second, first.to_bytes(h.ref, "little"))     # first -> second -> first
    h.put("global_State", G, "gc.total", 4096)            # bound: 512 objects
    with pytest.raises(CorruptError) as e:
        walk_heap(vm_of(h, L), every=100)
    assert "cycle" in str(e.value)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("bad", ["unmapped", "all ones"])
def test_unmapped_pointer_names_the_address(variant, bad):
    """(All ones: the address plus an object's length passes 2^64, which
    once let the C walk read outside its window.)"""
    h, G, L, expect, total = build(variant)
    root = h.types["global_State"].fields["gc.root"]
    first = int.from_bytes(h.mem[G - h.base + root.offset:][:h.ref], "little")
    to = 0x7ead0000 if bad == "unmapped" else (1 << 8 * h.ref) - 1
    h.write(first, to.to_bytes(h.ref, "little"))
    with pytest.raises(FaultError) as e:
        walk_heap(vm_of(h, L))
    assert e.value.address == to


@pytest.mark.parametrize("variant", VARIANTS)
def test_bad_type_byte_is_corrupt(variant):
    h, G, L, expect, total = build(variant)
    root = h.types["global_State"].fields["gc.root"]
    first = int.from_bytes(h.mem[G - h.base + root.offset:][:h.ref], "little")
    h.put("GCtab", first, "gct", 77)
    with pytest.raises(CorruptError) as e:
        walk_heap(vm_of(h, L))
    assert "0x%x" % first in str(e.value)


@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_finished_walk_holds_no_memory(variant, keep):
    """Once the walk is done (and its objects taken), nothing it made holds
    its page cache: in a gdb session the pages of one command's walk were
    held until Python's next full collection, through the C walk's
    callbacks, a reference cycle."""
    import gc
    import weakref
    h, G, L, expect, total = build(variant)
    gc.disable()
    try:
        w = HeapWalker(vm_of(h, L), keep=keep)
        w.run()
        if keep:
            w.objects()
        pages = weakref.ref(w.mem)
        del w
        assert pages() is None
    finally:
        gc.enable()
