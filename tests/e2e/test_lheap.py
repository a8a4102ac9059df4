"""lheap on LuaJIT's own allocator after a fragmenting workload
(testprogs/lua/frag.lua drops every other one of 2000 empty tables): every
segment's accounting closes on the allocator's invariants, the free chunks
the walk finds are exactly those in the bins, each segment lies in one of
the process's mappings (gdb's `info proc mappings`), and the dropped
tables' chunks are free, of the size gdb gives a GCtab; every variant, live
and from the core.  With an allocator of the host's (LJGDB_SYSALLOC, GC64
builds), lheap says so in one line."""
import json
import re

import pytest

from support.stop import BOTH_ARCHES, Stop

MODES = ("live", "core")
CMDS = ["lheap --json", "lheap", "print sizeof(GCtab)", "info proc mappings", "lheap bogus",
        "info files"]


@pytest.fixture(scope="module", params=BOTH_ARCHES)
def stop(request, tmp_path_factory):
    return Stop(request.param, "frag.lua", CMDS, str(tmp_path_factory.mktemp(request.param)))


def mappings(text):
    return [(int(a, 16), int(b, 16)) for a, b in
            re.findall(r"^\s*(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s", text, re.M)]


@pytest.mark.parametrize("mode", MODES)
def test_lheap_accounting_closes_and_bins_agree(stop, mode):
    doc = json.loads(stop.out(mode, "lheap --json"))
    assert doc["own"] is True
    assert doc["segments"] and all(s["closes"] for s in doc["segments"]), doc["segments"]
    for s in doc["segments"]:
        assert s["size"] == s["align"] + s["used"] + s["free"] + s["top"] + s["tail"], s
    assert [s["ends_at"] for s in doc["segments"]].count("top") == 1
    assert doc["bins_agree"], doc
    text = stop.out(mode, "lheap")
    assert all(line.endswith(": closes") for line in text.splitlines()
               if line.startswith("segment ")), text
    # The 1000 dropped tables: free chunks of a GCtab's chunk size (its
    # size as gdb reads it, plus the header word, rounded up to 8); a few
    # may have merged with a free neighbour.
    (dropped,), = [(int(r[1]),) for r in stop.expected if r[0] == "dropped"]
    gctab = int(stop.out(mode, "print sizeof(GCtab)").split("= ")[1])
    chunk = (gctab + 8 + 7) & ~7
    assert dropped - 20 <= doc["free_sizes"].get(str(chunk), 0) <= dropped + 20, doc["free_sizes"]
    assert stop.out(mode, "lheap bogus").strip().startswith(
        "lheap: unexpected argument 'bogus'. Usage: lheap")


def core_loads(text):
    """The core's memory segments as gdb's `info files` lists them
    (adjacent ones merged: one mapping may be cut where flags change)."""
    spans = []
    for a, b in sorted((int(a, 16), int(b, 16)) for a, b in re.findall(
            r"^\s*(0x[0-9a-f]+) - (0x[0-9a-f]+) is load\d+", text, re.M)):
        if spans and spans[-1][1] == a:
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((a, b))
    return spans


def test_lheap_segments_are_mapped(stop):
    doc = json.loads(stop.out("live", "lheap --json"))
    maps = {"core": core_loads(stop.out("core", "info files"))}
    # (qemu-user's gdb stub gives no memory map: arm64 has the core's only.)
    if stop.build.get("arch") != "arm64":
        maps["live"] = mappings(stop.out("live", "info proc mappings"))
    for mode, spans in maps.items():
        assert spans, mode
        for s in doc["segments"]:
            base = int(s["base"], 16)
            assert any(a <= base and base + s["size"] <= b for a, b in spans), (mode, s, spans)


@pytest.mark.parametrize("variant", [v for v in BOTH_ARCHES if v.endswith("gc64") or "arm64" in v])
def test_lheap_says_when_the_host_brings_its_allocator(variant, tmp_path):
    s = Stop(variant, "frag.lua", ["lheap"], str(tmp_path), env={"LJGDB_SYSALLOC": "1"})
    for mode in MODES:
        out = s.out(mode, "lheap").strip()
        assert re.match(r"g->allocf is 0x[0-9a-f]+ <ljgdb_alloc>, not LuaJIT's lj_alloc_f: the "
                        r"host brings its own allocator", out), out
        assert "\n" not in out
