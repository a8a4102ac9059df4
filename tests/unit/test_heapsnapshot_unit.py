"""The V8 heap snapshot document of gdb_ext.heap.heapsnapshot on a made-up
graph (no debugger, no VM): the flat arrays agree with the meta, each node's
edges follow the previous node's, every edge points at the first number of a
node, names are indexes into the strings, the self sizes are the heap's."""
import io
import json
import random
from array import array

import pytest

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext import consts as C  # noqa: E402
from ljgdb.gdb_ext.heap import heapsnapshot as HS  # noqa: E402


class _VM(object):
    cur_L = None


class _Stat(object):
    def __init__(self, sizes):
        self.object_bytes = sum(sizes)
        self.total = self.object_bytes + 100


class FakeHeap(object):
    """Objects at 0x1000 + 32 * i of the given types; edges[i]: [(kind,
    target)] where kind is "element", "weak" or a property name."""

    def __init__(self, gcts, sizes, edges, roots):
        self.addrs = array("Q", [0x1000 + 32 * i for i in range(len(gcts))])
        self.gcts = bytes(gcts)
        self.sizes = array("Q", sizes)
        self.edges = edges
        self._roots = roots
        self.vm = _VM()
        self.stat = _Stat(sizes)

    def check_budget(self, done):
        pass                    # (no memory bound here: heap/budget.py's tests)

    def index(self):
        return self.addrs, self.gcts

    def position(self, addr):
        i = (addr - 0x1000) // 32
        return i if 0 <= i < len(self.addrs) and self.addrs[i] == addr else -1

    def roots(self):
        return [(("_G",) if k == 0 else ("gcroot", k), 0x1000 + 32 * r)
                for k, r in enumerate(self._roots)]


class FakeWriter(HS.SnapshotWriter):
    def node_name(self, o, gct):
        return "n%d" % ((o - 0x1000) // 32) if gct != C.GCT_STR else "text"

    def edges_of(self, o, gct, add):
        for i, (kind, t) in enumerate(self.heap.edges[(o - 0x1000) // 32]):
            target = 0x1000 + 32 * t
            if kind == "element":
                add(HS.EDGE_TYPES.index("element"), i, target)
            elif kind == "weak":
                add(HS.EDGE_TYPES.index("weak"), self.name("[%d]" % i), target)
            else:
                add(HS.EDGE_TYPES.index("property"), self.name(kind), target)
        # A reference to no object of the heap is left out.
        add(HS.EDGE_TYPES.index("internal"), self.name("nowhere"), 0x10)


@pytest.mark.parametrize("seed", range(20))
def test_document_is_consistent(seed, monkeypatch):
    # Odd seeds: the edges go to the temporary file after every object.
    monkeypatch.setattr(HS, "_SPILL", 3 if seed % 2 else 3 << 16)
    rnd = random.Random(seed)
    n = rnd.randint(1, 60)
    kinds = [C.GCT_TAB, C.GCT_FUNC, C.GCT_STR, C.GCT_THREAD, C.GCT_UPVAL, C.GCT_PROTO]
    gcts = [rnd.choice(kinds) for _ in range(n)]
    sizes = [rnd.randint(16, 4000) for _ in range(n)]
    edges = [[] if gcts[i] == C.GCT_STR else
             [(rnd.choice(("element", "weak", "k1", "k2")), rnd.randrange(n))
              for _ in range(rnd.randint(0, 4))] for i in range(n)]
    roots = sorted(set(rnd.randrange(n) for _ in range(rnd.randint(1, 3))))
    heap = FakeHeap(gcts, sizes, edges, roots)
    w = FakeWriter(heap)
    w.build()
    f = io.StringIO()
    out = w.write(f)
    doc = json.loads(f.getvalue())
    meta = doc["snapshot"]["meta"]
    nf, ef = len(meta["node_fields"]), len(meta["edge_fields"])
    nodes, es, strings = doc["nodes"], doc["edges"], doc["strings"]
    assert doc["snapshot"]["node_count"] == n + 1 == len(nodes) // nf == out["nodes"]
    assert doc["snapshot"]["edge_count"] == len(es) // ef == out["edges"]
    assert len(nodes) % nf == 0 and len(es) % ef == 0
    types = meta["node_types"][0]
    etypes = meta["edge_types"][0]
    # The root: synthetic, id 1, its edges the roots.
    assert types[nodes[0]] == "synthetic" and nodes[2] == 1 and strings[nodes[1]] == HS.ROOT_NAME
    assert sum(nodes[k * nf + 4] for k in range(n + 1)) == len(es) // ef
    ids = [nodes[k * nf + 2] for k in range(n + 1)]
    assert len(set(ids)) == n + 1 and all(i % 2 == 1 for i in ids)
    assert sum(nodes[k * nf + 3] for k in range(n + 1)) == sum(sizes) == out["self_size"]
    # Each node's edges, in order, are what edges_of added (the edge to no
    # object left out).
    e = 0
    for k in range(n + 1):
        got = []
        for _ in range(nodes[k * nf + 4]):
            et, ni, to = es[e * ef:(e + 1) * ef]
            assert to % nf == 0 and 0 < to // nf <= n
            name = ni if etypes[et] == "element" else strings[ni]
            got.append((etypes[et], name, to // nf - 1))
            e += 1
        if k == 0:
            assert [t for _, _, t in got] == roots
            assert got[0][:2] == ("property", "_G")
            continue
        i = k - 1
        assert types[nodes[k * nf]] == HS.NODE_TYPES[HS.NODE_TYPE_OF[gcts[i]]]
        assert strings[nodes[k * nf + 1]] == ("text" if gcts[i] == C.GCT_STR else "n%d" % i)
        want = []
        for j, (kind, t) in enumerate(edges[i]):
            if kind == "element":
                want.append(("element", j, t))
            elif kind == "weak":
                want.append(("weak", "[%d]" % j, t))
            else:
                want.append(("property", kind, t))
        assert got == want, (seed, i)
