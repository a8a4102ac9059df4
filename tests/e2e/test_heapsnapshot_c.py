"""The V8 heap snapshot with its graph built in C (graphc.SnapGraph) holds
what the Python writer's holds (LJGDB_HEAPGRAPH=python), and so it does when
no run of its reads can be read at once, and when it is handed the walk's
copied pages (as in gdb, lldb and --pid): every node (type, name, id, self
size, edges) and every edge (type, name or index, target) the same, on a
core of testprogs/lua/snapshot.lua (keys, strings, weak tables, metatables'
__name, upvalues, C functions, coroutines, big arrays and hashes, traces),
in the core reader.  A string node's name is the string's text, as Python's
json module writes it: the bytes that are UTF-8 and escapes as LuaJIT's own
bytes give them (the program's texts, compared here)."""
import json
import os

import pytest

from support import cpaths
from support.stop import Stop

# GC64 and X64 (r21-gc64's C path is read by memlab in test_heapsnapshot.py
# too); r21-dualnum: whole numbers as keys are integers there, not doubles.
VARIANTS = ("r21-dualnum", "r20-x64")


@pytest.fixture(scope="module", params=VARIANTS)
def stop(request, tmp_path_factory):
    work = str(tmp_path_factory.mktemp(request.param))
    st = Stop(request.param, "snapshot.lua", ["linfo"], work)
    st.work = work
    return st


def document(stop, how):
    path = os.path.join(stop.work, how.replace(" ", "-") + ".heapsnapshot")
    cpaths.reader(stop, how, "LJGDB_HEAPGRAPH", "lgcstat", "--save", path, "--format",
                  "heapsnapshot")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    meta = doc["snapshot"]["meta"]
    ntypes, etypes = meta["node_types"][0], meta["edge_types"][0]
    strings, nodes, edges = doc["strings"], doc["nodes"], doc["edges"]
    nf, ef = len(meta["node_fields"]), len(meta["edge_fields"])
    assert len(nodes) == nf * doc["snapshot"]["node_count"]
    assert len(edges) == ef * doc["snapshot"]["edge_count"]
    out, e = [], 0
    for k in range(0, len(nodes), nf):
        t, name, nid, size, count = nodes[k:k + 5]
        mine = []
        for _ in range(count):
            et, ni, to = edges[e:e + 3]
            e += 3
            mine.append((etypes[et], ni if etypes[et] == "element" else strings[ni], to))
        out.append((ntypes[t], strings[name], nid, size, mine))
    assert e == len(edges)
    return out


def test_the_same_snapshot_four_ways(stop):
    docs = {how: document(stop, how) for how in ("C", "python", "runs unreadable", "pages copied")}
    assert docs["C"] == docs["python"], first_difference(docs["C"], docs["python"])
    assert docs["runs unreadable"] == docs["python"]
    assert docs["pages copied"] == docs["python"]
    # The C writer's file, byte for byte, whichever memory it had in place
    # (the order in which names are met is not the order they are made).
    files = set()
    for how in ("C", "runs unreadable", "pages copied"):
        with open(os.path.join(stop.work, how.replace(" ", "-") + ".heapsnapshot"), "rb") as f:
            files.add(f.read())
    assert len(files) == 1
    # (and what they agree on is the program's: its strings by their text,
    # cut at 200 bytes)
    names = {n[1] for n in docs["C"] if n[0] == "string"}
    assert 'quote " and backslash \\' in names
    assert "UTF-8: h\u00e9llo \u20ac \U0001f600" in names
    assert "bad: \ufffd\ufffd \ufffd\ufffd \ufffd\ufffd\ufffd \ufffd\ufffd\ufffd\ufffd \ufffd" in names
    assert "x" * 199 + "\ufffd..." in names
    assert "tab\tnewline\nreturn\rbell\afeed\fback\bdel\x7fnul\x00end" in names


def first_difference(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k, x, y
    return len(a), len(b)
