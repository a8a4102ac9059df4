"""gdb_ext.vm.vmfind on synthetic memory: the search for global_States in a
process's memory.  The end-to-end tests are in tests/e2e/test_lstates.py."""
import random

import pytest

from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.vm.state import make_vm
from ljgdb.gdb_ext.vm.vmfind import _hits, list_states, search_states
from ljgdb.gdb_ext.target import SyntheticTarget
from support.synth import LAYOUTS, Heap

VARIANTS = LAYOUTS


def heap_with_states(variant, n):
    h = Heap(variant)
    h.alloc(5000)                       # something before them
    states = []
    for _ in range(n):
        G, L = h.new_state()
        h.put("global_State", G, "gc.total", 1 << 20)
        states.append((G, L))
        h.alloc(3000)
    return h, states


@pytest.mark.parametrize("variant", VARIANTS)
def test_search_finds_every_state_and_nothing_else(variant):
    h, states = heap_with_states(variant, 3)
    t = h.target()
    found = search_states(t, Layout(t))
    assert [(f.G, f.L) for f in found] == states


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_chance_match_is_not_a_state(variant):
    """A word that holds its own address plus the G-L distance, in memory
    that is no VM (a copy of the knot's first half only), is rejected."""
    h, states = heap_with_states(variant, 1)
    lay = Layout(h.target())
    GG = lay.s["GG_State"]
    d = GG.field("g").offset - GG.field("L").offset
    fake = h.alloc(4096)
    glo = lay.L.glref
    h.write(fake + glo, (fake + d).to_bytes(lay.L.field("glref").size, "little"))
    t = h.target()
    assert [(f.G, f.L) for f in search_states(t, Layout(t))] == states


@pytest.mark.parametrize("variant", VARIANTS)
def test_make_vm_uses_the_one_state_in_memory(variant):
    h, states = heap_with_states(variant, 1)
    t = h.target()
    vm = make_vm(t, Layout(t))
    assert vm.G == states[0][0] and "memory search" in vm.L_source


@pytest.mark.parametrize("variant", VARIANTS)
def test_make_vm_with_several_states_names_them(variant):
    h, states = heap_with_states(variant, 2)
    t = h.target()
    with pytest.raises(Exception) as e:
        make_vm(t, Layout(t))
    msg = str(e.value)
    assert "2 LuaJIT states" in msg and "G=" in msg
    assert all("0x%x" % G in msg for G, _ in states)
    vm = make_vm(t, Layout(t), explicit_G=states[1][0])
    assert vm.G == states[1][0] and vm.L == states[1][1]


@pytest.mark.parametrize("variant", VARIANTS)
def test_list_states_merges_frames_and_search(variant):
    h, states = heap_with_states(variant, 2)
    t = h.target()
    got, problem = list_states(t, Layout(t), [("L", states[1][1], "frame #3 main: L")])
    assert problem is None
    assert [(s.G, s.L) for s in got] == [states[1], states[0]]
    assert got[0].ways == ["frame #3 main: L", "memory search (segment)"]


class _Running(SyntheticTarget):
    """A process read as it runs: the VM's store of a field lands after the
    first read of it, when the cache is cleared for the next."""

    def __init__(self, js, segs, fix):
        self.fix = None
        super().__init__(js, segs)
        self.fix = fix
        self.cleared = 0

    def clear_cache(self):
        super().clear_cache()
        if self.fix is not None:
            self.cleared += 1
            addr, data = self.fix
            base, mem = self.segments[0]
            mem[addr - base:addr - base + len(data)] = data


def _field(h, L, name):
    f = h.types["lua_State"].fields[name]
    return L + f.offset, bytes(h.mem[L + f.offset - h.base:L + f.offset - h.base + f.size])


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_torn_read_of_the_stack_is_read_again(variant):
    """Caught between lj_state_growstack's store of L->stack and its moves
    of L->base and L->top (the new stack 1 MB away), a VM found without a
    stop is not lost: its changing fields are read again (tries), never
    taken as they were; one try alone rejects it."""
    h, states = heap_with_states(variant, 1)
    G, L = states[0]
    addr, good = _field(h, L, "stack")
    h.put("lua_State", L, "stack", int.from_bytes(good, "little") + (1 << 20))
    t = _Running(h.js, [(h.base, bytes(h.mem))], (addr, good))
    assert search_states(t, Layout(t)) == []
    t = _Running(h.js, [(h.base, bytes(h.mem))], (addr, good))
    assert [(s.G, s.L) for s in list_states(t, Layout(t), [], tries=3)[0]] == states
    assert t.cleared == 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_base_above_a_stale_top_is_a_vm(variant):
    """L->base stored alone (before lj_meta_*, lj_tab_new...) above the top
    an earlier C call left: a state the interpreter stays in, taken at the
    first read."""
    h, states = heap_with_states(variant, 1)
    G, L = states[0]
    _, top = _field(h, L, "top")
    _, base = _field(h, L, "base")
    h.put("lua_State", L, "base", int.from_bytes(top, "little") + 16)
    assert int.from_bytes(base, "little") <= int.from_bytes(top, "little")
    t = h.target()
    assert [(s.G, s.L) for s in search_states(t, Layout(t))] == states


def test_hits_across_windows_and_chunks():
    rnd = random.Random(7)
    for rs in (4, 8):
        base = 0x3fff0000 if rs == 4 else 0x7ffff7fe8000
        data = bytearray(rnd.getrandbits(8) for _ in range(200000))
        K = 0x1234
        want = sorted({base + 8 * rnd.randrange(0, 24990) for _ in range(40)})
        want += [base + 0xfff8 - (base & 0xffff)]    # at the end of a 64 KB window
        want = sorted(set(want))
        for p in want:
            data[p - base:p - base + rs] = (p + K).to_bytes(rs, "little")
        assert [p for p in _hits(bytes(data), base, K, rs, 8) if p in want] == want
        assert all(int.from_bytes(data[p - base:p - base + rs], "little") == p + K
                   for p in _hits(bytes(data), base, K, rs, 8))
