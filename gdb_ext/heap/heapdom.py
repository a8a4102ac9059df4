"""Retained sizes: the dominator tree of the heap's strong references.

An object d dominates an object o when every chain of strong references
from the roots to o passes through d.  The bytes the collector frees when
the last reference to d goes are d's own and those of every object d
dominates: d's retained size.  An object held from several places (a
string interned once and used as a key by many tables) is dominated by
what all its holders share, and so is charged once, to that.

The graph is the collector's (heapgraph.Heap.graph_targets): weak
references are no edges, a closure keeps its upvalue objects and they keep
their values, a prototype keeps its trace, a trace its IR constants.

The algorithm is the iterative one of Cooper, Harvey and Kennedy ("A
Simple, Fast Dominance Algorithm", 2001), on objects numbered in
breadth-first order from the roots: an object's dominators lie on its
shortest path from the roots, so each has a smaller number than the
objects it dominates, and the tree of current guesses can be climbed
towards smaller numbers.  The first guess of an object's immediate
dominator is the object it was found from; each further reference to it
moves the guess up to the nearest common ancestor of the two (in the
search itself, then in passes over those references until no guess
moves).  Guesses only move up and never pass a true dominator, so what
they stop at is the dominator tree.

Everything is kept in arrays indexed by the objects' numbers; the only
lists are the references into objects that have more than one.
"""
from typing import Any, Callable, List, Optional, TYPE_CHECKING, Tuple
import bisect
from array import array

from .. import consts as C
from ..bulk import gc_paused
from . import graphc
from .heapgraph import root_indices

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .heapgraph import Heap, Ref


class Dominators(object):
    """The dominator tree of a heapgraph.Heap: for the objects the roots
    reach, in breadth-first order (numbers), their index in the heap's
    arrays (order), immediate dominator (idom, -1: the roots) and the
    object they were first reached from (parent, -1: a root); retained
    bytes and the number of objects each dominates (itself included)."""

    def __init__(self, heap: 'Heap', progress: Optional[Callable[[int], Any]] = None) -> None:
        self.heap = heap
        addrs, gcts = heap.index()
        self.n = len(addrs)
        roots = self._roots()
        # The same search in C when it can be built (graphc.py), else here.
        fast = graphc.dominators(heap, roots)
        self.searched_in = "C" if fast is not None else "Python"
        if fast is not None:
            self.num, self.order, self.idom, self.parent = (
                fast["num"], fast["order"], fast["idom"], fast["parent"])
            self.retained, self.count = fast["retained"], fast["count"]
            self.references, self.passes = fast["references"], fast["passes"]
            return
        with gc_paused():
            self._search(addrs, gcts, roots, progress)
            self.passes = self._settle()
            self._retain()

    def _roots(self):
        """The heap indices of the roots, each once, in the order they are
        numbered; self.root_names: number -> the root's name."""
        found = root_indices(self.heap)
        self.root_names = {k: name for k, (_, name) in enumerate(found)}
        return [i for i, _ in found]

    def _search(self, addrs, gcts, roots, progress):
        heap = self.heap
        n = self.n
        num = array("i", [-1]) * n          # heap index -> number
        order = array("I")                  # number -> heap index
        idom = array("i")                   # number -> number of its guess
        parent = array("i")
        many = bytearray(n)                 # heap index: referenced more than once
        into_u, into_v = array("I"), array("I")   # references into those
        for i in roots:
            num[i] = len(order)
            order.append(i)
            idom.append(-1)
            parent.append(-1)
        bisect_left = bisect.bisect_left
        targets = heap.graph_targets
        T_STR, T_CDATA = C.GCT_STR, C.GCT_CDATA
        head = 0
        every = 200000
        while head < len(order):
            u = head
            i = order[head]
            head += 1
            if progress is not None and head % every == 0:
                progress(head)
            if not head & 0xFFFF:
                heap.check_budget(head)
            gct = gcts[i]
            if gct == T_STR or gct == T_CDATA:
                continue
            for piece in targets(addrs[i], gct):
                for t in dict.fromkeys(piece):
                    j = bisect_left(addrs, t)
                    if j >= n or addrs[j] != t:
                        continue
                    v = num[j]
                    if v == -1:
                        num[j] = v = len(order)
                        order.append(j)
                        idom.append(u)
                        parent.append(u)
                        continue
                    if v == u or idom[v] == -1:
                        continue
                    if not many[j]:
                        many[j] = 1
                        into_u.append(parent[v])
                        into_v.append(v)
                    into_u.append(u)
                    into_v.append(v)
                    a, b = u, idom[v]
                    while a != b:
                        while a > b:
                            a = idom[a]
                        while b > a:
                            b = idom[b]
                    idom[v] = a
        self.num, self.order, self.idom, self.parent = num, order, idom, parent
        self.into = (into_u, into_v)
        self.references = len(into_u)

    def _settle(self):
        """Passes over the references into objects held more than once
        until no guess moves; the number of passes."""
        idom = self.idom
        into_u, into_v = self.into
        passes = 0
        changed = True
        while changed:
            changed = False
            passes += 1
            for k in range(len(into_v)):
                v = into_v[k]
                a, b = into_u[k], idom[v]
                old = b
                while a != b:
                    while a > b:
                        a = idom[a]
                    while b > a:
                        b = idom[b]
                if a != old:
                    idom[v] = a
                    changed = True
        self.into = None
        return passes

    def _retain(self):
        """Retained bytes and objects: each object's added to its immediate
        dominator's, the last numbers first (an object's dominators have
        smaller numbers)."""
        sizes = self.heap.sizes
        order, idom = self.order, self.idom
        m = len(order)
        ret = array("Q", [sizes[i] for i in order])
        cnt = array("I", [1]) * m
        for k in range(m - 1, -1, -1):
            d = idom[k]
            if d >= 0:
                ret[d] += ret[k]
                cnt[d] += cnt[k]
        self.retained, self.count = ret, cnt

    # --- questions ------------------------------------------------------
    @property
    def reached(self) -> int:
        return len(self.order)

    def shared_by_roots(self) -> Tuple[int, int, int]:
        """(objects, bytes) that no single root dominates (reached from more
        than one root, and what only they keep), and the bytes of every
        object the roots reach."""
        idom, ret, cnt = self.idom, self.retained, self.count
        names = self.root_names
        # (the roots are numbered first: 0 to len(names) - 1)
        fast = graphc.shared(idom, ret, cnt, len(names))
        if fast is not None:
            return fast
        objs = nbytes = total = 0
        for k in range(len(idom)):
            if idom[k] == -1:
                total += ret[k]
                if k not in names:
                    objs += cnt[k]
                    nbytes += ret[k]
        return objs, nbytes, total

    def unreached(self) -> Tuple[int, int]:
        """(objects, bytes) no root reaches through strong references: garbage
        the next cycle frees (or only weak tables hold)."""
        sizes = self.heap.sizes
        num = self.num
        fast = graphc.unreached(num, sizes)
        if fast is not None:
            return fast
        objs = nbytes = 0
        for i in range(self.n):
            if num[i] == -1:
                objs += 1
                nbytes += sizes[i]
        return objs, nbytes

    def number(self, addr: int) -> int:
        """The number of the object at addr, or -1 (no object, or no root
        reaches it)."""
        i = self.heap.position(addr)
        return self.num[i] if i >= 0 else -1

    def address(self, k: int) -> int:
        return self.heap.addrs[self.order[k]]

    def gct(self, k: int) -> int:
        return self.heap.gcts[self.order[k]]

    def top(self, count: int, skip: Tuple[int, ...] = (C.GCT_UPVAL,)) -> List[int]:
        """The numbers of the `count` objects that retain the most bytes,
        most first (upvalue objects left out: each retains what its value
        does, and its closure is listed above it)."""
        gcts, order, ret = self.heap.gcts, self.order, self.retained
        fast = graphc.top(ret, order, gcts, count, skip)
        if fast is not None:
            return fast
        import heapq
        return heapq.nlargest(count, (k for k in range(len(order)) if gcts[order[k]] not in skip),
                              key=lambda k: (ret[k], -k))

    def chain(self, k: int) -> Tuple[Tuple[Any, ...], List[Optional['Ref']]]:
        """(root name, [heapgraph.Ref]) of the path by which object k was
        first reached (a shortest one), upvalue objects passed over as
        lgcpath passes over them."""
        heap = self.heap
        addrs, gcts = heap.addrs, heap.gcts
        order, parent = self.order, self.parent
        steps = []
        while parent[k] >= 0:
            steps.append((order[parent[k]], order[k]))
            k = parent[k]
        steps.reverse()
        out = []
        skip = False
        for a, b in steps:
            if skip:
                skip = False
                continue
            if gcts[b] == C.GCT_UPVAL:
                # closure -> its upvalue object -> value: one step, as
                # the closure's upvalue (the value is the next object).
                nxt = [s for s in steps if s[0] == b]
                if nxt:
                    out.append(heap.find_ref(addrs[a], gcts[a], addrs[nxt[0][1]],
                                             gcts[nxt[0][1]]))
                    skip = True
                    continue
            out.append(heap.find_ref(addrs[a], gcts[a], addrs[b], gcts[b]))
        return self.root_names[k], out

    def dominator_chain(self, k: int) -> List[int]:
        """The numbers of k's dominators, nearest first (the roots' own
        are left out)."""
        out = []
        d = self.idom[k]
        while d >= 0:
            out.append(d)
            d = self.idom[d]
        return out
