"""lmcode and ltrace against LuaJIT's own view of its traces.

testprogs/lua/jit_traces.lua forces small mcode areas (sizemcode=4 KB) so
that several are needed, compiles root traces, side traces, loops and
recursion after an earlier jit.flush(), and records for every live trace
what jit.util.traceinfo/tracemc/funcinfo and the trace events of jit.attach
say (number, nins, nk, link, nexit, linktype, machine-code address, size and
loop offset, start chunk:line, parent/exit).  It stops with an address inside
one side trace's code and that trace's number as the arguments of
ljgdb_stop (so L->base holds them).  The same assertions run live and on the
core; the flush scenario and a build without the JIT check the one-line
messages.  At the end, the engine (gdb_ext/jit/jit.py, gdb_ext/jit/mcode.py) on synthetic memory.
"""
import json
import re
import struct

import pytest

from harness import BOTH_ARCHES, Stop, chunk_display

MODES = ("live", "core")
ADDR = "lmcode ((double *)L->base)[0]"
PICK = "ltrace (int)((double *)L->base)[1]"
COMMANDS = {
    "main": ["lmcode", ADDR, "ltrace", PICK, "ltrace 99999", "ltrace foo", "lmcode --bogus",
             "ltrace --json", "lmcode --json", ADDR + " --json", PICK + " --json"],
    "flush": ["lmcode", "ltrace", "ltrace --json"],
}

_stops = {}


@pytest.fixture(scope="module")
def stops(tmp_path_factory):
    def get(variant, scenario):
        key = (variant, scenario)
        if key not in _stops:
            _stops[key] = Stop(variant, "jit_traces.lua", COMMANDS[scenario],
                               str(tmp_path_factory.mktemp("%s-%s" % key)), args=[scenario])
        return _stops[key]
    return get


def expected_traces(stop):
    """{n: dict} from the program's 'trace' records."""
    out = {}
    for r in stop.expected:
        if r[0] != "trace":
            continue
        (n, nins, nk, link, nexit, linktype, addr, size, loop, source, line, otr, oex) = r[1:14]
        if otr == "0":
            parent = "-"
        else:
            parent = "%s/%s" % (otr, oex)
        out[int(n)] = {"nins": int(nins), "nk": int(nk), "link": int(link), "nexit": int(nexit),
                       "linktype": linktype, "mcode": int(addr), "size": int(size),
                       "loop": int(loop), "start": "%s:%s" % (chunk_display(source), line),
                       "parent": parent}
    return out


def one(stop, kind):
    rs = [r[1:] for r in stop.expected if r[0] == kind]
    assert len(rs) == 1, (kind, rs)
    return rs[0]


_ROW = re.compile(r"^\s*(\d+) (\S+)\s+(\S+)\s+(\S+)  0x([0-9a-f]+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s+"
                  r"(-?\d+)\s+(\d+)  (.*)$")


def parse_ltrace(text):
    lines = text.splitlines()
    assert lines[0].split() == ["trace", "parent", "link", "to", "mcode", "size", "loop", "IR",
                                "K", "exits", "start"], lines[0]
    rows = {}
    for line in lines[1:-1]:
        m = _ROW.match(line)
        assert m, line
        g = m.groups()
        rows[int(g[0])] = {"parent": g[1], "linktype": g[2], "link": 0 if g[3] == "-" else int(g[3]),
                           "mcode": int(g[4], 16), "size": int(g[5]), "loop": int(g[6]),
                           "nins": int(g[7]), "nk": int(g[8]), "nexit": int(g[9]), "start": g[10]}
    return rows, lines[-1]


def parse_lmcode(text):
    """([area dict], {line kind: text}) of lmcode's area listing."""
    lines = text.splitlines()
    assert lines[0].startswith("mcode areas of (jit_State *)0x"), lines[0]
    areas = []
    info = {}
    for line in lines[2:]:
        m = re.match(r"^\s*(\d+)(\*?)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+(\d+)\s+(>=)?(\d+)\s+(\S+)\s+"
                     r"([-+][\d.]+ [KMG]?B|\?)\s+(yes|NO|\?)$", line)
        if m:
            g = m.groups()
            areas.append({"n": int(g[0]), "current": g[1] == "*", "start": int(g[2], 16),
                          "end": int(g[3], 16), "size": int(g[4]), "lower_bound": g[5] == ">=",
                          "used": int(g[6]), "prot": g[7], "in_window": g[9], "traces": None})
            continue
        m = re.match(r"^\s+traces \((\d+)\): (.*)$", line)
        if m:
            nums = [] if m.group(2) == "-" else [int(x) for x in m.group(2).split()]
            assert len(nums) == int(m.group(1))
            areas[-1]["traces"] = nums
            continue
        kind, _, rest = line.partition(":")
        assert kind in ("target", "window", "limits", "verdict"), line
        info[kind] = rest.strip()
    return areas, info


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_ltrace_matches_jit_util(stops, variant, mode):
    stop = stops(variant, "main")
    want = expected_traces(stop)
    assert len(want) == int(one(stop, "ntraces")[0]) and len(want) > 20
    # The program made every kind it claims to: side traces, loops, recursion.
    kinds = {t["linktype"] for t in want.values()}
    assert {"loop", "root", "tail-recursion", "up-recursion"} <= kinds, kinds
    assert any(t["parent"] != "-" and not t["parent"].endswith("stitch") for t in want.values())
    rows, summary = parse_ltrace(stop.out(mode, "ltrace"))
    assert sorted(rows) == sorted(want)
    for n, w in want.items():
        assert rows[n] == w, (n, rows[n], w)
    nside = sum(1 for t in want.values() if t["parent"] != "-" and "stitch" not in t["parent"])
    assert summary == "%d traces (%d root, %d side), %d bytes of machine code" % (
        len(want), len(want) - nside, nside, sum(t["size"] for t in want.values()))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_ltrace_one_trace(stops, variant, mode):
    stop = stops(variant, "main")
    want = expected_traces(stop)
    inside, pick = one(stop, "addr")
    w = want[int(pick)]
    lines = stop.out(mode, PICK).splitlines()
    assert w["parent"] != "-"
    root = re.match(r"^trace %s \(GCtrace \*\)0x[0-9a-f]+: side trace of root (\d+), parent (\S+) "
                    r"\(trace/exit\)$" % pick, lines[0])
    assert root, lines[0]
    assert root.group(2) == w["parent"]
    assert lines[1].startswith("  start:    %s (bytecode " % w["start"]), lines[1]
    assert lines[2] == "  link:     %s -> trace %d" % (w["linktype"], w["link"])
    assert lines[3].startswith("  mcode:    0x%x-0x%x, %d bytes, loop at +0x%x, in mcode area "
                               % (w["mcode"], w["mcode"] + w["size"], w["size"], w["loop"]))
    assert lines[4].startswith("  IR:       %d instructions, %d constants" % (w["nins"], w["nk"]))
    assert lines[5].startswith("  exits:    %d snapshots" % w["nexit"])
    assert lines[-1] == "disassemble 0x%x,0x%x" % (w["mcode"], w["mcode"] + w["size"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_json_ltrace_and_lmcode(stops, variant, mode):
    """ltrace --json and lmcode --json: every trace as jit.util describes
    it; the picked trace in detail; every trace in one mcode area."""
    stop = stops(variant, "main")
    want = expected_traces(stop)
    doc = json.loads(stop.out(mode, "ltrace --json"))
    got = {t["number"]: {"parent": t["parent"], "linktype": t["link"], "link": t["to"] or 0,
                         "mcode": int(t["mcode"], 16), "size": t["size"], "loop": t["loop"],
                         "nins": t["ir"], "nk": t["k"], "nexit": t["exits"], "start": t["start"]}
           for t in doc["traces"]}
    assert got == want
    inside, pick = one(stop, "addr")
    d = json.loads(stop.out(mode, PICK + " --json"))["trace"]
    w = want[int(pick)]
    assert d["number"] == int(pick) and d["parent"] == w["parent"]
    assert (d["link"]["kind"], d["link"]["to"]) == (w["linktype"], w["link"])
    assert int(d["mcode"]["start"], 16) == w["mcode"] and d["mcode"]["size"] == w["size"]
    assert (d["ir"], d["k"], d["snapshots"]) == (w["nins"], w["nk"], w["nexit"])
    areas = json.loads(stop.out(mode, "lmcode --json"))["areas"]
    owner = {}
    for a in areas:
        for n in a["traces"]:
            owner[n] = a["number"]
    assert sorted(owner) == sorted(want)
    at = json.loads(stop.out(mode, ADDR + " --json"))
    assert at["trace"]["number"] == int(pick)
    assert int(at["address"], 16) == int(inside)
    assert at["area"]["number"] == owner[int(pick)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lmcode_areas(stops, variant, mode):
    stop = stops(variant, "main")
    want = expected_traces(stop)
    sizemcode, maxmcode = [int(x) for x in one(stop, "param")]
    areas, info = parse_lmcode(stop.out(mode, "lmcode"))
    arm64 = stop.build.get("arch") == "arm64"
    assert len(areas) >= 2, areas
    assert [a["n"] for a in areas] == list(range(1, len(areas) + 1))
    assert [a["current"] for a in areas] == [True] + [False] * (len(areas) - 1)
    spans = sorted((a["start"], a["end"]) for a in areas)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:])), spans
    listed = {}
    for a in areas:
        assert a["size"] == sizemcode * 1024 == a["end"] - a["start"]
        for n in a["traces"]:
            assert n not in listed
            listed[n] = a
        # Machine code grows down from the area's end: the lowest trace is
        # J->mctop in the current area (its in-use count adds the link header
        # and exit stubs at the bottom), a lower bound in older ones.
        low = a["end"] - min(want[n]["mcode"] for n in a["traces"]) if a["traces"] else 0
        if a["current"]:
            assert not a["lower_bound"] and low < a["used"] <= a["size"], (a, low)
        else:
            assert a["lower_bound"] and a["used"] == low, (a, low)
        # (qemu's gdb stub gives no memory map: unknown on arm64 live too.)
        assert a["prot"] == ("r-xp" if mode == "live" and not arm64 else "unknown"), a
        assert a["in_window"] == "yes", a
    assert sorted(listed) == sorted(want)
    for n, a in listed.items():
        t = want[n]
        assert a["start"] <= t["mcode"] and t["mcode"] + t["size"] <= a["end"], (n, a, t)
    total = sizemcode * 1024 * len(areas)
    assert info["limits"].startswith("J->szallmcarea %d bytes in %d areas (sum of their sizes %d); "
                                     "sizemcode %d KB, maxmcode %d KB"
                                     % (total, len(areas), total, sizemcode, maxmcode)), info
    assert info["verdict"].startswith("%d areas, %d KB of %d KB max, all within "
                                      % (len(areas), total // 1024, maxmcode)), info
    assert "lj_vm_exit_handler 0x" in info["target"]
    assert ("jump range of aarch64 +-128 MB (LJ_TARGET_JUMPRANGE 27)" if arm64 else
            "jump range of x86_64 +-2 GB (LJ_TARGET_JUMPRANGE 31)") in info["window"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_lmcode_address(stops, variant, mode):
    stop = stops(variant, "main")
    want = expected_traces(stop)
    inside, pick = one(stop, "addr")
    inside, w = int(inside), want[int(pick)]
    lines = stop.out(mode, ADDR).splitlines()
    assert lines[0] == "0x%x is in trace %s at +0x%x of its machine code 0x%x-0x%x (%d bytes)" % (
        inside, pick, inside - w["mcode"], w["mcode"], w["mcode"] + w["size"], w["size"])
    assert lines[1].startswith("  trace %s: side trace of root " % pick), lines[1]
    assert lines[1].endswith(", parent %s, link %s, started at %s"
                             % (w["parent"], w["linktype"], w["start"])), lines[1]
    size = int(one(stop, "param")[0]) * 1024
    assert re.match(r"^  mcode area \d+\*? 0x[0-9a-f]+-0x[0-9a-f]+ \(%d bytes" % size, lines[2]), lines


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", BOTH_ARCHES)
def test_after_flush(stops, variant, mode):
    stop = stops(variant, "flush")
    assert int(one(stop, "ntraces")[0]) == 0
    assert stop.out(mode, "lmcode").strip() == (
        "lmcode: no mcode area: the JIT has not compiled any trace yet, or all were flushed "
        "(J->mcarea is NULL)")
    out = stop.out(mode, "ltrace").strip()
    assert re.match(r"^ltrace: no traces: the JIT has not compiled any, or all were flushed "
                    r"\(J->trace has \d+ slots, all empty\)$", out), out


@pytest.mark.parametrize("mode", MODES)
def test_no_jit(tmp_path_factory, mode):
    key = ("r21-nojit", "nojit")
    if key not in _stops:
        _stops[key] = Stop("r21-nojit", "jit_traces.lua", ["lmcode", "ltrace", "linfo"],
                           str(tmp_path_factory.mktemp("r21-nojit")), args=["main"])
    stop = _stops[key]
    assert stop.expected[0][0] == "nojit"
    why = "no JIT: this LuaJIT was built without the JIT compiler (LUAJIT_DISABLE_JIT: GG_State " \
          "has no jit_State)"
    assert stop.out(mode, "lmcode").strip() == "lmcode: " + why
    assert stop.out(mode, "ltrace").strip() == "ltrace: " + why
    assert re.search(r"^JIT:\s+no\b", stop.out(mode, "linfo"), re.M)


@pytest.mark.parametrize("mode", MODES)
def test_bad_input(stops, mode):
    stop = stops("r21-gc64", "main")
    nums = sorted(expected_traces(stop))
    assert stop.out(mode, "ltrace 99999").strip() == \
        "ltrace: no trace 99999: live traces are %d..%d" % (nums[0], nums[-1])
    assert stop.out(mode, "ltrace foo").strip() == \
        "ltrace: 'foo' is not a trace number. Usage: ltrace [N] [L=<lua_State *>]"
    assert stop.out(mode, "lmcode --bogus").strip() == \
        "lmcode: unknown option '--bogus'. Usage: lmcode [<address>] [L=<lua_State *>]"


# --------------------------------------------------------------------------
# The engine (gdb_ext/jit/jit.py, gdb_ext/jit/mcode.py) on synthetic memory, no gdb: both layouts, and
# both placement models (upstream 2.1's J->mcmin/mcmax window, 2.0's target).

# MCLink {MCode *next; size_t size;} (lj_jit.h) and the JIT_P_* indices, as
# DWARF gives them for these builds (the stored layouts predate MCLink).
MCLINK = {"size": 16, "fields": {"next": [0, 8, None, "MCode *"], "size": [8, 8, None, "size_t"]}}
JIT_P = {"r21-gc64": (13, 14), "r21-x64": (13, 14), "r20-x64": (12, 13)}
AREA = 4096


def _synthetic_jit(variant, exit_handler=None, window=None):
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import ljgdb  # noqa: F401  (the checkout as the package ljgdb)
    from ljgdb.gdb_ext.layouts.layout import Layout
    from ljgdb.gdb_ext.vm.state import make_vm
    from synth import Heap
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
    from ljgdb.gdb_ext.jit.jit import jit, mcode
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
    from ljgdb.gdb_ext.jit.jit import jit, mcode
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
    from ljgdb.gdb_ext.jit.jit import jit, mcode
    from ljgdb.gdb_ext.errors import CorruptError
    h, vm, areas, _ = _synthetic_jit("r21-gc64")
    h.write(areas[0], areas[2].to_bytes(8, "little"))      # oldest links to the newest
    vm.t.segments = [(h.base, bytearray(h.mem))]
    vm.t.clear_cache()
    with pytest.raises(CorruptError, match="loops back"):
        mcode.mcode_areas(vm, jit.jit_state(vm))


def test_engine_exit_stubs_and_branches():
    from ljgdb.gdb_ext.jit.jit import jit

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
