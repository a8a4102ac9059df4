"""lgcstat against what the Lua program created and against g->gc.total.

testprogs/lua/gc.lua stops once per phase (empty state, tables, strings,
coroutines, closures with closed and open upvalues, FFI cdata with VLAs and
finalizers, userdata and string buffers, finalizers pending, JIT traces)
and records how many objects of each type every phase creates.  At each stop
gdb runs lgcstat and prints g->gc.total itself (a plain gdb expression, not
ljgdb); the same assertions run on the live process and on the core of each
stop.
"""
import json
import re

import pytest

from support.stop import ALL_VARIANTS
from support.multistop import MultiStop, built_variants

MODES = ("live", "core")
# Every variant the build script makes (the 7 of the matrix, and a build
# without the JIT where the manifest has it).
VARIANTS = list(ALL_VARIANTS) + [v for v in built_variants() if v not in ALL_VARIANTS]
NSTOPS = 9
TYPES = ("string", "upvalue", "thread", "prototype", "function", "trace", "cdata", "table",
         "userdata")


# The host's global_State through gdb's own expression evaluator (L->glref
# is an MRef of 8 bytes in GC64 builds, 4 otherwise).
MAIN_G = ("(sizeof(ljgdb_main_L->glref) == 8 ? *(unsigned long *)&ljgdb_main_L->glref"
          " : *(unsigned int *)&ljgdb_main_L->glref)")


def gc_total_expr():
    """g->gc.total, printed by gdb itself, not by ljgdb."""
    return "print/d ((global_State *)%s)->gc.total" % MAIN_G


def commands(variant):
    return ["lgcstat --top 6 --by-chunk", gc_total_expr(), "lgcstat bogus",
            "lgcstat --top", "lgcstat --json --by-chunk"]


_runs = {}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    def get(variant):
        if variant not in _runs:
            _runs[variant] = MultiStop(variant, "gc.lua", commands(variant), NSTOPS,
                                       str(tmp_path_factory.mktemp("gc-" + variant)))
        return _runs[variant]
    return get


def parse(text):
    """(types {name: (count, bytes)}, other {name: bytes}, sum, total, lines)."""
    types, other = {}, {}
    lines = text.splitlines()
    section = "types"
    summ = total = None
    for line in lines:
        if line.startswith("Memory in g->gc.total"):
            section = "other"
            continue
        m = re.match(r"^sum: (\d+) bytes; g->gc.total: (\d+) bytes \((.*)\)$", line)
        if m:
            summ, total = int(m.group(1)), int(m.group(2))
            assert m.group(3) == "exact", line
            section = "done"
            continue
        if section == "types":
            m = re.match(r"^(\w+)\s+(\d+)\s+(\d+)\s", line)
            if m and m.group(1) in TYPES:
                types[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        elif section == "other":
            m = re.match(r"^  (\S.*?)\s+(\d+)(  .*)?$", line)
            if m and m.group(1) != "total":
                other[m.group(1)] = int(m.group(2))
    assert set(types) == set(TYPES), text
    assert summ is not None, text
    return types, other, summ, total, lines


def phases(stop_run):
    names = {int(r[1]) - 1: r[2] for r in stop_run.expected if r[0] == "phase"}
    deltas = {}
    for r in stop_run.expected:
        if r[0] == "delta":
            deltas.setdefault(r[1], {})[r[2]] = int(r[3])
    return names, deltas


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_sum_equals_gc_total(run, variant, mode):
    r = run(variant)
    for s in range(NSTOPS):
        types, other, summ, total, _ = parse(r.out(mode, s, 0))
        printed = r.out(mode, s, 1)
        m = re.search(r"= (\d+)$", printed.strip())
        assert m, printed
        assert total == int(m.group(1)), (s, printed)
        assert summ == total, s
        assert sum(b for _, b in types.values()) + sum(other.values()) == summ, s


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_counts_per_phase(run, variant, mode):
    r = run(variant)
    names, deltas = phases(r)
    counts = [parse(r.out(mode, s, 0))[0] for s in range(NSTOPS)]
    checked = 0
    for s in range(1, NSTOPS):
        name = names[s]
        if name == "jit":
            continue
        want = deltas.get(name, {})
        got = {t: counts[s][t][0] - counts[s - 1][t][0] for t in TYPES}
        assert got == {t: want.get(t, 0) for t in TYPES}, (name, got, want)
        checked += 1
    assert checked == NSTOPS - 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_finalizers_pending_and_traces(run, variant, mode):
    r = run(variant)
    names, _ = phases(r)
    stop_of = {v: k for k, v in names.items()}
    pending = [int(x[2]) for x in r.expected if x[0] == "pending"][0]
    text = r.out(mode, stop_of["finalizers"], 0)
    assert "of which %d wait for their finalizer (g->gc.mmudata)" % pending in text, text
    traces = [x[2] for x in r.expected if x[0] == "traces"][0]
    types = parse(r.out(mode, stop_of["jit"], 0))[0]
    assert types["trace"][0] == (0 if traces == "none" else int(traces))
    if traces != "none":
        assert int(traces) > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64", "r20-x64", "or-gc64"])
def test_top_objects(run, variant, mode):
    """At the strings stop the 6 largest objects are the 100000-element
    table and the 5 strings of 1048576+i bytes the program made."""
    r = run(variant)
    names, _ = phases(r)
    stop_of = {v: k for k, v in names.items()}
    lines = parse(r.out(mode, stop_of["strings"], 0))[4]
    i = lines.index("The 6 largest objects:")
    top = lines[i + 1:i + 7]
    strings = sorted(int(re.search(r", (\d+) bytes$", t).group(1)) for t in top if " string " in t)
    assert strings == [1048576 + k for k in range(1, 6)], top
    tables = [t for t in top if " table " in t]
    assert len(tables) == 1 and int(re.search(r"asize=(\d+)", tables[0]).group(1)) >= 100000
    sizes = [int(t.split()[0]) for t in top]
    assert sizes == sorted(sizes, reverse=True)


def chunk_objects(text, chunk_suffix):
    lines = text.splitlines()
    i = lines.index("Functions, prototypes and traces by chunk:")
    for line in lines[i + 2:]:
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[2].endswith(chunk_suffix):
            return int(parts[0]), int(parts[1])
    raise AssertionError("no chunk %s in:\n%s" % (chunk_suffix, text))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64", "r20-x64", "deb-x64"])
def test_by_chunk(run, variant, mode):
    """The closures phase makes 301 functions in gc.lua and nothing else."""
    r = run(variant)
    names, deltas = phases(r)
    stop_of = {v: k for k, v in names.items()}
    before = chunk_objects(r.out(mode, stop_of["coroutines"], 0), "/testprogs/lua/gc.lua")
    after = chunk_objects(r.out(mode, stop_of["closures"], 0), "/testprogs/lua/gc.lua")
    assert after[1] - before[1] == deltas["closures"]["function"]


@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64"])
def test_bad_arguments(run, variant):
    r = run(variant)
    usage = ("Usage: lgcstat [--top N] [--by-chunk|--retained [OBJ]|--save FILE [--format F]|"
             "--diff FILE [--list]] [L=<lua_State *>]")
    for mode in MODES:
        assert r.out(mode, 0, 2).strip() == "lgcstat: unexpected argument 'bogus'. " + usage
        assert r.out(mode, 0, 3).strip() == "lgcstat: option --top needs a value. " + usage


CORRUPT = """python
inf = gdb.selected_inferior()
G = int(gdb.parse_and_eval("%s"))
rs = int(gdb.parse_and_eval("sizeof(((global_State *)0)->gc.root)"))
o = int.from_bytes(inf.read_memory(G + int(gdb.parse_and_eval(
    "(long)&((global_State *)0)->gc.root")), rs).tobytes(), "little")
for i in range(%d):
    o = int.from_bytes(inf.read_memory(o, rs).tobytes(), "little")
inf.write_memory(o, (%d).to_bytes(rs, "little"))
end
"""


@pytest.mark.parametrize("variant", ["r21-gc64", "r21-x64"])
def test_corrupt_root_list_shows_what_was_counted(variant, tmp_path):
    """The test (not ljgdb) breaks the live process's root list after 300
    objects; lgcstat prints the 301 objects it counted, then one line with
    the bad address, and gdb goes on."""
    from support.stop import LOADER, LUA_DIR, run_gdb
    from support.multistop import build_of
    bad = 0x123456780 if "gc64" in variant else 0x7ead0000
    script = tmp_path / "corrupt.gdb"
    script.write_text(CORRUPT % ("(long)" + MAIN_G, 300, bad))
    out = run_gdb(["-ex", "source " + LOADER, "-ex", "break ljgdb_break", "-ex", "run",
                   "-ex", "source %s" % script, "-ex", "lgcstat", "-ex", "print 1+1",
                   "-ex", "kill", "--args", build_of(variant)["host"],
                   LUA_DIR + "/demo.lua"], cwd=str(tmp_path))
    lines = out.splitlines()
    i = lines.index("Walk stopped after 301 objects; counted so far (incomplete):")
    counts = [int(ln.split()[1]) for ln in lines[i + 2:]
              if re.match(r"^[a-z]+\s+\d+\s+\d+$", ln)]
    assert sum(counts) == 301, out
    err = [ln for ln in lines if ln.startswith("lgcstat: ")]
    assert err == ["lgcstat: cannot access memory at 0x%x while reading GC object header at "
                   "0x%x on g->gc.root" % (bad, bad)], out
    assert "$1 = 2" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_json(run, variant, mode):
    """lgcstat --json: the sum is g->gc.total as gdb prints it, and the
    objects of each phase are the ones the program made."""
    r = run(variant)
    names, deltas = phases(r)
    counts = []
    for s in range(NSTOPS):
        doc = json.loads(r.out(mode, s, 4))
        printed = int(re.search(r"= (\d+)$", r.out(mode, s, 1).strip()).group(1))
        assert doc["gc_total"] == printed and doc["sum"] == printed, s
        assert sum(t["bytes"] for t in doc["types"]) + doc["other_bytes"] == doc["sum"]
        assert sum(c["bytes"] for c in doc["chunks"]) > 0
        counts.append({t["type"]: t["count"] for t in doc["types"]})
    for s in range(1, NSTOPS):
        if names[s] == "jit":
            continue
        want = deltas.get(names[s], {})
        got = {t: counts[s][t] - counts[s - 1][t] for t in TYPES}
        assert got == {t: want.get(t, 0) for t in TYPES}, (names[s], got, want)
