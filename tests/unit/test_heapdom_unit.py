"""The dominator tree of gdb_ext.heap.heapdom against the definition, on random
graphs: d dominates v when no root reaches v once d is taken out; each
object's retained bytes are the sizes of the objects it dominates."""
import random
from array import array

import pytest

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext import consts as C  # noqa: E402
from ljgdb.gdb_ext.heap import graphc  # noqa: E402
from ljgdb.gdb_ext.heap.heapdom import Dominators  # noqa: E402


@pytest.fixture(params=["C", "Python"], autouse=True)
def searched_in(request, monkeypatch):
    """Every test twice: the search in C (graphc.c, built here) and in
    Python; each run checks which one it had."""
    if request.param == "Python":
        monkeypatch.setenv("LJGDB_HEAPGRAPH", "python")
    else:
        assert graphc.load()[0] is not None, graphc.load()[1]
    return request.param


class GraphHeap(object):
    """What Dominators asks of a heapgraph.Heap, for a given graph: objects
    at 0x1000 + 16 * i, all tables, with edges[i] their references."""

    def __init__(self, n, edges, roots, sizes):
        self.addrs = array("Q", [0x1000 + 16 * i for i in range(n)])
        self.gcts = bytes([C.GCT_TAB]) * n
        self.sizes = array("Q", sizes)
        self.edges = edges
        self._roots = roots

    def check_budget(self, done):
        pass                    # (no memory bound here: heap/budget.py's tests)

    def index(self):
        return self.addrs, self.gcts

    def roots(self):
        return [(("root", r), 0x1000 + 16 * r) for r in self._roots]

    def graph_targets(self, o, gct):
        yield [0x1000 + 16 * j for j in self.edges[(o - 0x1000) // 16]]


def reachable(n, edges, roots, without=None):
    seen = set(r for r in roots if r != without)
    todo = list(seen)
    while todo:
        u = todo.pop()
        for v in edges[u]:
            if v != without and v not in seen:
                seen.add(v)
                todo.append(v)
    return seen


def brute(n, edges, roots, sizes):
    """{v: set of dominators of v (itself included)}, and retained bytes."""
    reach = reachable(n, edges, roots)
    doms = {v: {v} for v in reach}
    for d in reach:
        without = reachable(n, edges, roots, d)
        for v in reach - without:
            doms[v].add(d)
    retained = {d: sum(sizes[v] for v in reach if d in doms[v]) for d in reach}
    return doms, retained


@pytest.mark.parametrize("seed", range(60))
def test_dominators_match_the_definition(seed, searched_in):
    rnd = random.Random(seed)
    n = rnd.randint(2, 40)
    density = rnd.choice((1, 2, 3))
    edges = [[rnd.randrange(n) for _ in range(rnd.randint(0, density))] for _ in range(n)]
    if seed % 3 == 0:                    # a long chain with a back edge, as lists make
        edges = [[i + 1] if i + 1 < n else [0] for i in range(n)]
        edges[rnd.randrange(n)].append(rnd.randrange(n))
    roots = sorted(set(rnd.randrange(n) for _ in range(rnd.randint(1, 3))))
    sizes = [rnd.randint(1, 1000) for _ in range(n)]
    heap = GraphHeap(n, edges, roots, sizes)
    dom = Dominators(heap)
    assert dom.searched_in == searched_in
    want_doms, want_ret = brute(n, edges, roots, sizes)
    assert dom.reached == len(want_doms)
    for k in range(dom.reached):
        v = dom.order[k]
        # The dominator chain (numbers) is the set of v's dominators.
        chain = {dom.order[d] for d in dom.dominator_chain(k)} | {v}
        assert chain == want_doms[v], (seed, v)
        assert dom.retained[k] == want_ret[v], (seed, v)
        assert dom.count[k] == sum(1 for w in want_doms if v in want_doms[w]), (seed, v)
    # The most retaining first, ties by number; a type skipped is left out.
    for count in (1, 5, n + 3):
        want = sorted(range(dom.reached), key=lambda k: (-want_ret[dom.order[k]], k))[:count]
        assert dom.top(count, skip=()) == want, (seed, count)
    assert dom.top(5, skip=(C.GCT_TAB,)) == []
    objs, nbytes = dom.unreached()
    assert (objs, nbytes) == (n - len(want_doms),
                              sum(sizes[v] for v in range(n) if v not in want_doms))


# Graphs where a guess made during the search is wrong until a later pass
# (found among random graphs: about 1 in 1500 of that size needs one).
LATE = (
    [[3, 9], [8, 6], [], [7, 4], [2, 7], [6], [4, 8], [], [4], [5]],
    [[6, 1], [3, 8], [5, 10], [], [7], [3, 9], [5, 2], [1, 2], [9, 7], [], []],
)


@pytest.mark.parametrize("edges", LATE)
def test_guesses_that_move_after_the_search(edges, searched_in):
    n = len(edges)
    sizes = [10 + i for i in range(n)]
    dom = Dominators(GraphHeap(n, edges, [0], sizes))
    assert dom.searched_in == searched_in
    assert dom.passes == 2            # one pass moved a guess, one saw none move
    want_doms, want_ret = brute(n, edges, [0], sizes)
    for k in range(dom.reached):
        v = dom.order[k]
        assert {dom.order[d] for d in dom.dominator_chain(k)} | {v} == want_doms[v], v
        assert dom.retained[k] == want_ret[v], v
