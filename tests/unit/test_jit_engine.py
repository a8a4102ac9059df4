"""The engine (gdb_ext/jit/jit.py, gdb_ext/jit/mcode.py) on synthetic memory, no gdb: both layouts, and
both placement models (upstream 2.1's J->mcmin/mcmax window, 2.0's target).
The same commands under gdb on real builds: tests/e2e/test_jit.py."""
import struct

import pytest

import ljgdb  # noqa: F401  (the checkout as the package ljgdb)

# MCLink {MCode *next; size_t size;} (lj_jit.h) and the JIT_P_* indices, as
# DWARF gives them for these builds (the stored layouts predate MCLink).
MCLINK = {"size": 16, "fields": {"next": [0, 8, None, "MCode *"], "size": [8, 8, None, "size_t"]}}
JIT_P = {"r21-gc64": (13, 14), "r21-x64": (13, 14), "r20-x64": (12, 13)}
AREA = 4096


def _synthetic_jit(variant, exit_handler=None, window=None):
    from ljgdb.gdb_ext.layouts.layout import Layout
    from ljgdb.gdb_ext.vm.state import make_vm
    from support.synth import Heap
    h = Heap(variant, base=0x40000000)
    h.js["types"]["MCLink"] = MCLINK
    size_i, max_i = JIT_P[variant]
    h.js["constants"].update({"JIT_P_sizemcode": size_i, "JIT_P_maxmcode": max_i})
    G, L = h.new_state()
    gg = G - h.types["GG_State"].fields["g"].offset
    J = gg + h.types["GG_State"].fields["J"].offset
    # Three 4 KB areas, oldest first; each MCLink points at the previous one.
    h.alloc(AREA, align=AREA)
    areas = [h.alloc(AREA, align=AREA) for _ in range(3)]
    for prev, a in zip([0] + areas, areas):
        h.write(a, prev.to_bytes(8, "little") + AREA.to_bytes(8, "little"))
    cur = areas[-1]
    jt = "jit_State"
    jf = h.types[jt].fields
    h.put(jt, J, "mcarea", cur)
    h.put(jt, J, "mctop", cur + AREA - 300)
    h.put(jt, J, "mcbot", cur + 56)
    h.put(jt, J, "szmcarea", AREA)
    h.put(jt, J, "szallmcarea", 3 * AREA)
    psize = jf["param"].size // jf["param"].count
    h.write(J + jf["param"].offset + size_i * psize, (4).to_bytes(4, "little"))
    h.write(J + jf["param"].offset + max_i * psize, (12).to_bytes(4, "little"))
    if window and "mcmin" in jf:
        h.put(jt, J, "mcmin", window[0])
        h.put(jt, J, "mcmax", window[1])
    # One trace (number 1) with 96 bytes of code at the top of the middle area.
    ts = "GCtrace"
    T = h.alloc(h.size(ts))
    h.header(ts, T, 9)
    h.put(ts, T, "traceno", 1)
    h.put(ts, T, "mcode", areas[1] + AREA - 96)
    h.put(ts, T, "szmcode", 96)
    h.put(ts, T, "nins", 0x8000 + 11)
    h.put(ts, T, "nk", 0x8000 - 3)
    h.put(ts, T, "nsnap", 2)
    h.put(ts, T, "linktype", 2)
    h.put(ts, T, "link", 1)
    arr = h.alloc(4 * h.ref)
    h.write(arr + h.ref, T.to_bytes(h.ref, "little"))
    h.put(jt, J, "trace", arr)
    h.put(jt, J, "sizetrace", 4)
    eh = exit_handler if exit_handler is not None else areas[0] - 0x123456
    t = h.target(symbols={"lj_vm_exit_handler": eh})
    vm = make_vm(t, Layout(t), L)
    return h, vm, areas, T


@pytest.mark.parametrize("variant", ("r21-gc64", "r21-x64", "r20-x64"))
def test_engine_areas_traces_and_placement(variant):
    from ljgdb.gdb_ext.jit import jit, mcode
    h, vm, areas, T = _synthetic_jit(variant)
    js = jit.jit_state(vm)
    assert js.params == {"sizemcode": 4, "maxmcode": 12}
    tr = jit.traces(vm, js)
    assert [n for n, _ in tr] == [1]
    t = tr[0][1]
    assert (t.ir_count, t.k_count, t.link_name, t.szmcode) == (10, 3, "loop", 96)
    got = mcode.mcode_areas(vm, js)
    assert [a.start for a in got] == areas[::-1]
    assert [a.current for a in got] == [True, False, False]
    assert got[0].used == 300 + 56 and got[0].code_bytes == 300
    assert mcode.assign_traces(got, tr) == []
    assert [x.traceno for x in got[1].traces] == [1] and got[1].code_bytes == 96
    area, tt, what = mcode.locate(vm, js, got, tr, t.mcode + 10)
    assert (area.start, tt.traceno, what) == (areas[1], 1, None)
    assert "below J->mcbot" in mcode.locate(vm, js, got, tr, areas[2] + 20)[2]
    assert "free space" in mcode.locate(vm, js, got, tr, areas[2] + 1000)[2]
    assert mcode.locate(vm, js, got, tr, 0x1000) == (None, None, None)
    pl = mcode.Placement(vm, js)
    assert pl.model == ("window" if variant.startswith("r21") else "target")
    assert all(pl.accepts(a) for a in got)
    assert all(pl.reachable(a) for a in got)


@pytest.mark.parametrize("variant", ("r21-gc64", "r20-x64"))
def test_engine_area_out_of_range(variant):
    from ljgdb.gdb_ext.jit import jit, mcode
    far = 0x7f0000000000          # the exit handler far from the areas
    _, vm, areas, _ = _synthetic_jit(variant, exit_handler=far,
                                     window=(far - (1 << 30), far + (1 << 30)))
    js = jit.jit_state(vm)
    pl = mcode.Placement(vm, js)
    got = mcode.mcode_areas(vm, js)
    assert not any(pl.accepts(a) for a in got)
    assert not any(pl.reachable(a) for a in got)
    assert pl.distance(got[0]) == got[0].start - pl.target < 0


def test_engine_area_chain_loop_is_corrupt():
    from ljgdb.gdb_ext.jit import jit, mcode
    from ljgdb.gdb_ext.errors import CorruptError
    h, vm, areas, _ = _synthetic_jit("r21-gc64")
    h.write(areas[0], areas[2].to_bytes(8, "little"))      # oldest links to the newest
    vm.t.segments = [(h.base, bytearray(h.mem))]
    vm.t.clear_cache()
    with pytest.raises(CorruptError, match="loops back"):
        mcode.mcode_areas(vm, jit.jit_state(vm))


def test_engine_exit_stubs_and_branches():
    from ljgdb.gdb_ext.jit import jit

    class JS(object):
        exitstubgroup = [0x5000, 0x6000] + [0] * 14
    assert jit._stub_exit(JS, "x86_64", 0x5000 + 4 * 5) == 5
    assert jit._stub_exit(JS, "x86_64", 0x6000 + 4 * 31) == 63
    assert jit._stub_exit(JS, "x86_64", 0x5000 + 2) is None
    assert jit._stub_exit(JS, "aarch64", 0x5000) is None       # arm64 stubs are per trace
    assert jit._stub_exit(JS, "aarch64", 0x5000 + 4 * 7, stubs=0x5000) == 7
    assert jit._stub_exit(JS, "aarch64", 0x5002, stubs=0x5000) is None
    base = 0x10000
    code = b"\x90" + b"\x0f\x84" + (0x5000 + 4 * 3 - (base + 1 + 6)).to_bytes(4, "little", signed=True)
    code += b"\xe9" + (0x20000 - (base + len(code) + 5)).to_bytes(4, "little", signed=True)
    assert jit._branches("x86_64", code, base) == [(1, 0x500c), (7, 0x20000)]
    assert jit._branches("ppc", code, base) is None
    # b.eq +8; b -4; cbz x0, +16; tbnz w1, #3, +16; add; bl (not a branch an
    # exit uses), as aarch64-linux-gnu-as encodes them.
    a64 = struct.pack("<6I", 0x54000040, 0x17fffffe, 0xb4000080, 0x37180081, 0x91000400, 0x97fffffb)
    assert jit._branches("aarch64", a64, base) == [
        (0, base + 8), (4, base + 4 - 8), (8, base + 0x18), (12, base + 0x1c)]


@pytest.mark.parametrize("variant", ("r21-gc64", "r21-x64"))
def test_engine_traces_kept_across_a_flush(variant):
    """jit.mcode_stamp reads J->mcarea and J->mctop; traces_kept holds while
    code only goes below the top of the same area (lj_mcode_commit), and
    not after anything a flush can leave (lj_mcode_free: J->mcarea NULL,
    then an area mapped afresh, maybe at the old address with its top at
    the end again), nor when the area changed."""
    from ljgdb.gdb_ext.jit import jit
    h, vm, areas, _ = _synthetic_jit(variant)
    J = vm.GG + vm.lay.GG.J
    cur = areas[-1]
    then = jit.mcode_stamp(vm.lay, vm.GG, vm.t.read)
    assert then == (cur, cur + AREA - 300)

    def now(mcarea, mctop):
        h.put("jit_State", J, "mcarea", mcarea)
        h.put("jit_State", J, "mctop", mctop)
        return jit.mcode_stamp(vm.lay, vm.GG, h.target().read)     # (the memory as it is now)

    assert jit.traces_kept(then, now(cur, cur + AREA - 300))       # nothing compiled
    assert jit.traces_kept(then, now(cur, cur + AREA - 900))       # a trace added
    assert not jit.traces_kept(then, now(0, 0))                    # flushed, no area yet
    assert not jit.traces_kept(then, now(cur, cur + AREA - 40))    # flushed, the area again
    assert not jit.traces_kept(then, now(areas[0], areas[0] + AREA - 500))  # another area
    assert not jit.traces_kept(then, None)                         # unreadable now
    assert jit.traces_kept(None, None)                             # no JIT in this build
