"""Unit tests of the engine on synthetic memory, for both layouts.

Layouts are the DWARF of real builds (tests/data); values are encoded as
lj_obj.h encodes them.  No gdb needed.
"""
import math

import pytest

import ljgdb  # noqa: E402,F401  (the checkout as the package ljgdb)
from ljgdb.gdb_ext.errors import CorruptError, FaultError, NotLuaJITError  # noqa: E402
from ljgdb.gdb_ext.layouts.layout import Layout  # noqa: E402
from ljgdb.gdb_ext.vm.objects import Func, Proto, Str, Tab, decode_tv, split_tv  # noqa: E402
from ljgdb.gdb_ext.vm.runtime import tab_get_str  # noqa: E402
from ljgdb.gdb_ext.vm.state import make_vm  # noqa: E402
from ljgdb.gdb_ext.target import SyntheticTarget  # noqa: E402
from ljgdb.commands.format import table_data, table_lines, value_text, chunk_display, quote  # noqa: E402

from support.synth import LAYOUTS, Heap, load_layout  # noqa: E402

VARIANTS = LAYOUTS


@pytest.fixture(params=VARIANTS)
def heap(request):
    return Heap(request.param)


def vm_of(h, **kw):
    G, L = h.state
    t = h.target(**kw)
    return make_vm(t, Layout(t), L)


def with_state(h):
    h.state = h.new_state()
    return h


def test_layout_modes():
    lay = {v: Layout(SyntheticTarget(load_layout(v))) for v in VARIANTS}
    assert (lay["r21-gc64"].gc64, lay["r21-gc64"].fr2) == (True, True)
    assert (lay["r21-x64"].gc64, lay["r21-x64"].fr2) == (False, False)
    assert (lay["r20-x64"].gc64, lay["r20-x64"].branch) == (False, "2.0")
    assert lay["r20-x64"].strtab_kind == "strhash"
    assert lay["r21-x64"].strtab_kind == "str"
    # (dual-number: LUAJIT_NUMMODE=2 on x86-64, and arm64's default; the
    # fork's arm64 build is OpenResty's)
    assert {v for v, l in lay.items() if l.dualnum} == {"r21-dualnum", "r21-arm64", "or-arm64"}
    assert {v for v, l in lay.items() if l.openresty} == {"or-arm64"}
    assert all(lay[v].gc64 and lay[v].fr2 for v in ("r21-dualnum", "r21-arm64", "or-arm64"))
    assert all(lo.jit for lo in lay.values())
    assert lay["r21-gc64"].vmstate_names[1] == "LJ_VMST_C"


def test_layout_rejects_a_program_without_luajit():
    js = {"types": {}, "ptr_size": 8}
    with pytest.raises(NotLuaJITError, match="no LuaJIT debug info"):
        Layout(SyntheticTarget(js))
    js = load_layout("r21-gc64")
    del js["types"]["GCtab"]
    with pytest.raises(NotLuaJITError, match="missing GCtab"):
        Layout(SyntheticTarget(js))


def test_decode_primitives_and_numbers(heap):
    h = with_state(heap)
    vm = vm_of(h)
    assert decode_tv(vm, h.tv_prim("nil")).kind == "nil"
    assert decode_tv(vm, h.tv_prim("false")).kind == "false"
    assert decode_tv(vm, h.tv_prim("true")).kind == "true"
    for x in (0.0, 1.5, -2.25, 1e300, -1e-300, float("inf"), -float("inf")):
        v = decode_tv(vm, h.tv_num(x))
        assert v.kind == "number" and v.num == x
    v = decode_tv(vm, h.tv_num(float("nan")))
    assert v.kind == "number" and math.isnan(v.num)
    for i in (0, 7, -1, -2147483648, 2147483647):
        v = decode_tv(vm, h.tv_int(i))
        assert (v.kind, v.num) == ("int", i)


def test_decode_gc_values(heap):
    h = with_state(heap)
    s = h.new_str(b"hello")
    t = h.new_tab()
    vm = vm_of(h)
    for kind, addr in (("str", s), ("table", t), ("func", 0x1230), ("thread", 0x4560),
                       ("udata", 0x7890), ("cdata", 0xabc0), ("proto", 0x10), ("upval", 0x20)):
        v = decode_tv(vm, h.tv_gc(kind, addr))
        assert (v.kind, v.addr) == (kind, addr)
    assert Str(vm, s).data == b"hello"
    assert value_text(vm, decode_tv(vm, h.tv_gc("str", s))) == '"hello"'


def test_split_shows_the_tag(heap):
    h = with_state(heap)
    vm = vm_of(h)
    it, payload = split_tv(vm.lay, h.tv_gc("str", 0x1234))
    assert (it, payload) == (0xFFFFFFFB, 0x1234)


def test_bad_tag_is_corrupt(heap):
    h = with_state(heap)
    vm = vm_of(h)
    if h.gc64:
        # In GC64 every itype below LJ_TISNUM (0xfffffff2) is a double and
        # 0xfffffff2..0xffffffff are all tags: no 64-bit pattern is invalid.
        assert decode_tv(vm, (0x1FFF0 << 47) | 5).kind == "number"
        return
    with pytest.raises(CorruptError, match="not a LuaJIT type"):
        decode_tv(vm, 0xFFFFFFF0 << 32)


def test_table_array_hash_and_lookup(heap):
    h = with_state(heap)
    k_name = h.new_str(b"name")
    v_alpha = h.new_str(b"alpha")
    k_sp = h.new_str(b"with space")
    t = h.new_tab(array=[h.tv_prim("nil"), h.tv_num(10), h.tv_num(20.5)],
                  pairs=[(h.tv_gc("str", k_name), h.tv_gc("str", v_alpha)),
                         (h.tv_gc("str", k_sp), h.tv_num(7)),
                         (h.tv_prim("true"), h.tv_prim("false"))])
    vm = vm_of(h)
    tab = Tab(vm, t)
    assert tab.asize == 3 and tab.hmask == 3
    nodes, seen = tab.hash_nodes(vm, 100)
    assert seen == 3
    assert tab_get_str(vm, t, b"name").addr == v_alpha
    assert tab_get_str(vm, t, b"nope") is None
    lines = table_lines(table_data(vm, t, 1, 100, 200))
    assert lines[0] == "{" and lines[-1] == "}"
    assert set(lines[1:-1]) == {'  [1] = 10,', '  [2] = 20.5,', '  name = "alpha",',
                                '  ["with space"] = 7,', '  [true] = false,'}
    lines = table_lines(table_data(vm, t, 1, 2, 200))
    assert lines[-2] == "  ... (3 more entries; see --limit)"


def test_table_counts_and_pages(heap):
    """Tab.counts and Tab.entries (an editor's paged view) agree with the
    decoded slots: nil slots and false values, pages across both parts."""
    h = with_state(heap)
    keys = [h.new_str(b"k%d" % i) for i in range(5)]
    array = [h.tv_prim("nil"), h.tv_num(1), h.tv_prim("nil"), h.tv_prim("false"), h.tv_num(4)]
    pairs = [(h.tv_gc("str", k), h.tv_num(i)) for i, k in enumerate(keys)]
    t = h.new_tab(array=array, pairs=pairs)
    vm = vm_of(h)
    tab = Tab(vm, t)
    decoded = [(i, v) for i, v in tab.array_values(vm, tab.asize) if v.kind != "nil"]
    nodes, seen = tab.hash_nodes(vm, 100)
    assert tab.counts(vm) == (len(decoded), seen) == (3, 5)
    assert [(i, v.kind) for i, v in tab.entries(vm, "array", 0, 10)] == \
        [(i, v.kind) for i, v in decoded] == [(1, "number"), (3, "false"), (4, "number")]
    assert [i for i, _ in tab.entries(vm, "array", 1, 1)] == [3]
    assert tab.entries(vm, "array", 3, 10) == []
    got = tab.entries(vm, "hash", 2, 2)
    assert [(k.addr, v.num) for k, v in got] == [(k.addr, v.num) for k, v in nodes[2:4]]


def test_nested_tables_and_cycles(heap):
    h = with_state(heap)
    k = h.new_str(b"self")
    t = h.new_tab(pairs=[(h.tv_gc("str", k), h.tv_prim("nil"))])
    # make t.self = t
    node = Tab(vm_of(h), t).node
    h.write_tv(node + h.types["Node"].fields["val"].offset, h.tv_gc("table", t))
    vm = vm_of(h)
    lines = table_lines(table_data(vm, t, 3, 100, 200))
    assert lines[1] == "  self = <cycle: table: (GCtab *)0x%x>," % t


def test_functions(heap):
    h = with_state(heap)
    fn, pt = h.new_lua_func(b"@app/main.lua", 42, nparams=2)
    cf = h.new_c_func(1, 0x401000)
    ff = h.new_c_func(29, 0x402000)
    vm = vm_of(h)
    f = Func(vm, fn)
    assert f.is_lua and f.proto == pt
    assert Proto(vm, pt).firstline == 42
    assert value_text(vm, decode_tv(vm, h.tv_gc("func", fn))) == \
        "function: (GCfuncL *)0x%x app/main.lua:42" % fn
    assert value_text(vm, decode_tv(vm, h.tv_gc("func", cf))) == \
        "function: (GCfuncC *)0x%x C:0x401000" % cf
    # Named as lbt names it: no package.loaded here, so by the build's own
    # FF_* enumerator for id 29 (from the DWARF the layout was dumped from).
    ffname = vm.lay.ff_names[29]
    assert ffname.startswith("FF_")
    assert value_text(vm, decode_tv(vm, h.tv_gc("func", ff))) == \
        "function: (GCfuncC *)0x%x [builtin#%s]" % (ff, ffname[3:])


def test_state_finding(heap):
    h = with_state(heap)
    G, L = h.state
    t = h.target()
    lay = Layout(t)
    vm = make_vm(t, lay, None, [("L", 0x999000, "frame #0 f: junk"), ("G", G, "frame #1 g: G")])
    assert vm.G == G and vm.L == L
    assert vm.vmstate_name() == ("C", None)
    assert vm.gc_total == 12345
    with pytest.raises(NotLuaJITError, match="no Lua state found"):
        make_vm(t, lay, None, [("L", 0x999000, "frame #0 f: junk")], search=False)
    # Searched for, the one VM in memory is found.
    vm = make_vm(t, lay, None, [("L", 0x999000, "frame #0 f: junk")])
    assert vm.G == G and "memory search" in vm.L_source
    with pytest.raises(NotLuaJITError, match="not a lua_State"):
        make_vm(t, lay, h.new_str(b"x"))


def test_fault_names_the_address(heap):
    h = with_state(heap)
    t = h.target()
    with pytest.raises(FaultError) as e:
        t.read(h.base + len(h.mem) - 4, 16)
    assert e.value.address == h.base + len(h.mem)
    # A read straddling a block boundary inside the image still works.
    data = t.read(h.base + 4090, 12)
    assert data == bytes(h.mem[4090:4102])


def test_lightud_gc64_segments():
    h = Heap("r21-gc64")
    h.state = h.new_state()
    G, L = h.state
    segmap = h.alloc(8)
    h.write(segmap, (0x7f12).to_bytes(4, "little") + (0x55).to_bytes(4, "little"))
    h.put("global_State", G, "gc.lightudseg", segmap)
    h.put("global_State", G, "gc.lightudnum", 1)
    vm = vm_of(h)
    raw = ((~3 & 0x1FFFF) << 47) | (1 << 39) | 0xabc
    v = decode_tv(vm, raw)
    assert (v.kind, v.addr) == ("lightud", (0x55 << 32) | 0xabc)


def test_format_helpers():
    assert chunk_display("@x/y.lua") == "x/y.lua"
    assert chunk_display("=stdin") == "stdin"
    assert chunk_display("return 1\nprint(2)") == '[string "return 1..."]'
    assert quote(b'a"\\\n\x01\xff') == '"a\\"\\\\\\n\\1\\255"'
    assert quote(b"abc", True, 10) == '"abc"... (10 bytes)'


def test_bare_address_of_a_gc_object(heap):
    """looks_like_gc_object: a table's address is one; the address of a
    number in its array part is not."""
    from ljgdb.gdb_ext.vm.objects import looks_like_gc_object
    h = with_state(heap)
    t = h.new_tab(array=[h.tv_num(1.5), h.tv_num(2.5), h.tv_num(3.5)])
    vm = vm_of(h)
    assert looks_like_gc_object(vm, t) == "table"
    arr = Tab(vm, t).array
    assert looks_like_gc_object(vm, arr + 8) is None
