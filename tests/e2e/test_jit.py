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
messages.  The engine (gdb_ext/jit/jit.py, gdb_ext/jit/mcode.py) on synthetic memory:
tests/unit/test_jit_engine.py.
"""
import json
import re

import pytest

from support.stop import BOTH_ARCHES, Stop, chunk_display

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
