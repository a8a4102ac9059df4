"""The engine's bounds on corrupt memory, on synthetic memory (no gdb):
cycles with a corrupt gc.total, a cycle in a string chain, sizes past
g->gc.total, reads that are too large, a frame link that goes up.  The same
commands on real processes and cores: tests/e2e/test_hardening.py."""
import pytest

import ljgdb  # noqa: F401
from ljgdb.gdb_ext import consts as C
from ljgdb.gdb_ext.errors import CorruptError, FaultError
from ljgdb.gdb_ext.heap.gcstat import walk_heap
from ljgdb.gdb_ext.vm.objects import Tab
from ljgdb.gdb_ext.target import MAX_READ
from ljgdb.gdb_ext.vm.walkers import root_objects

from test_gcstat_unit import build, vm_of


def _first_two(h, G):
    root = h.types["global_State"].fields["gc.root"]
    first = int.from_bytes(h.mem[G - h.base + root.offset:][:h.ref], "little")
    second = int.from_bytes(h.mem[first - h.base:][:h.ref], "little")
    return first, second


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_cycle_found_even_with_a_corrupt_gc_total(variant):
    h, G, L, expect, total = build(variant)
    first, second = _first_two(h, G)
    h.write(second, first.to_bytes(h.ref, "little"))     # first -> second -> first
    h.put("global_State", G, "gc.total", (1 << (8 * h.types["global_State"].fields[
        "gc.total"].size)) - 1)                            # no bound from gc.total
    vm = vm_of(h, L)
    with pytest.raises(CorruptError) as e:
        list(root_objects(vm))
    assert "cycle" in str(e.value) and e.value.address in (first, second)
    with pytest.raises(CorruptError) as e:
        walk_heap(vm_of(h, L))
    assert "cycle" in str(e.value)


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_string_chain_cycle(variant):
    h, G, L, expect, total = build(variant)
    tabf = "str.tab" if "str.tab" in h.types["global_State"].fields else "strhash"
    f = h.types["global_State"].fields[tabf]
    tab = int.from_bytes(h.mem[G - h.base + f.offset:][:f.size], "little")
    s = int.from_bytes(h.mem[tab + h.ref - h.base:][:h.ref], "little") & ~1
    h.write(s, s.to_bytes(h.ref, "little"))              # a string that is its own next
    with pytest.raises(CorruptError) as e:
        walk_heap(vm_of(h, L))
    assert "0x%x" % s in str(e.value) and "cycle" in str(e.value)


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_sizes_past_gc_total_are_corrupt(variant):
    h, G, L, expect, total = build(variant)
    t = h.new_tab(array=[h.tv_num(1.0)] * 4)
    h.put("GCtab", t, "asize", 1 << 20)                   # 8 MB of array, gc.total is small
    vm = vm_of(h, L)
    with pytest.raises(CorruptError) as e:
        Tab(vm, t)
    assert "0x%x" % t in str(e.value) and "g->gc.total" in str(e.value)


def test_reads_are_bounded():
    h, G, L, expect, total = build("r21-gc64")
    t = h.target()
    with pytest.raises(FaultError) as e:
        t.read(h.base, MAX_READ + 1)
    assert "refusing" in str(e.value)
    with pytest.raises(FaultError) as e:
        t.read(-4, 4)
    assert "-0x4" in str(e.value)
    assert C.GCT_TAB == 11


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_frame_link_that_goes_up_ends_the_walk(variant):
    """A frame whose link points up the stack (a cycle in the frame chain):
    the walk keeps the frames before it and names the bad link."""
    from ljgdb.gdb_ext.stack.frames import FrameWalker
    from ljgdb.gdb_ext.vm.objects import Thread
    from support.synth import Heap
    from ljgdb.gdb_ext.layouts.layout import Layout
    from ljgdb.gdb_ext.vm.state import make_vm
    h = Heap(variant)
    G, L = h.new_state(stack_slots=40)
    h.put("global_State", G, "gc.total", 1 << 20)
    fr2 = "ftsz" in h.types["TValue"].fields
    f = h.types["lua_State"].fields["stack"]
    stack = int.from_bytes(h.mem[L - h.base + f.offset:][:f.size], "little")
    cf = h.new_c_func(1, 0x401000)                        # ffid 1 = FF_C: a C function
    base = stack + 8 * 20
    link = base - 8
    up = (-64) | 1                                        # FRAME_C, 64 bytes *up*
    if fr2:
        h.write_tv(link - 8, h.tv_gc("func", cf))
        h.write(link, (up & ((1 << 64) - 1)).to_bytes(8, "little"))
    else:
        h.write(link, (cf | ((up & 0xFFFFFFFF) << 32)).to_bytes(8, "little"))
    h.put("lua_State", L, "base", base)
    h.put("lua_State", L, "top", base)
    t = h.target()
    vm = make_vm(t, Layout(t), L)
    frames, err = FrameWalker(vm, Thread(vm, L)).walk()
    assert len(frames) == 1 and frames[0].kind == "c"
    assert isinstance(err, CorruptError) and "does not go down" in str(err)
    assert err.address == link
