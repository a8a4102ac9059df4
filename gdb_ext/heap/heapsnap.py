"""What grew between two moments: a heap snapshot saved to a file, and its
difference with the heap as it is now.

A snapshot is lgcstat's walk kept whole (heapgraph.Heap.index): every
object's address, type and size, the per-type counts and bytes, the memory
g->gc.total counts that is no object, and who the heap belongs to (the
process id, the global_State, the main thread).  The file is a line of
text, a JSON header, then the three arrays as raw little-endian bytes.

Between two moments of one process an object is matched by its address
and type: the objects of the second moment not in the first are new, those
of the first not in the second were freed, those in both may have changed
size (a table's parts, a thread's stack).  An object freed and another of
the same type made at its address in between look like one object: when
anything was freed, the difference says so.  The new objects are then
charged to the object that owns them: the nearest of their dominators
(heapdom) that already existed, so growth is shown where it hangs (a cache
table that existed before and gained entries).  The snapshot also keeps
the retained sizes of the objects that retain the most, by their paths
from the roots: those compare between two processes too (two runs of one
program), where nothing else but the per-type figures does.
"""
from typing import Any, Dict, Iterable, List, Optional, Tuple, TYPE_CHECKING
import json
import os
from array import array

from .. import consts as C
from . import graphc
from ..cbuild import zeros
from ..errors import LjError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .heapdom import Dominators
    from .heapgraph import Heap
    from ..vm.state import VM

MAGIC = b"ljgdb heap snapshot 1\n"


class SnapshotError(LjError):
    """A snapshot file that cannot be read."""


def identity(vm: 'VM') -> Dict[str, Any]:
    """Who the heap belongs to: compared to decide whether objects can be
    matched by address."""
    return {"process": vm.t.process_id(), "G": vm.G, "main_L": vm.main_L}


def save(heap: 'Heap', path: str, holders: Iterable[Dict[str, Any]] = ()) -> Dict[str, Any]:
    """Write the heap's snapshot to path; returns its header.  holders:
    [{"path", "retained", "objects"}] of the objects that retain the most,
    compared by path when objects cannot be matched by address."""
    vm = heap.vm
    addrs, gcts = heap.index()
    st = heap.stat
    head = {"identity": identity(vm), "layout": vm.lay.mode_name(), "gc_total": st.total,
            "objects": len(addrs),
            "types": {C.GCT_TEXT[g]: [ts.count, ts.bytes] for g, ts in st.types.items()},
            "other": [[name, size] for name, size, _ in st.other],
            "holders": list(holders)}
    data = json.dumps(head, sort_keys=True).encode()
    try:
        with open(path, "wb") as f:
            f.write(MAGIC)
            f.write(len(data).to_bytes(8, "little"))
            f.write(data)
            f.write(addrs)              # (the arrays' own bytes, not a copy)
            f.write(gcts)
            f.write(heap.sizes)
    except OSError as e:
        raise SnapshotError("cannot write %s: %s" % (path, e.strerror or e))
    return head


class Snapshot(object):
    """A snapshot's header, and its three arrays: given, or read from its
    file at `at` when first asked for (the difference needs them only after
    the heap graph is built, whose peak of memory they would add to)."""

    def __init__(self, head: Dict[str, Any], addrs: Optional[array] = None,
                 gcts: Optional[bytes] = None, sizes: Optional[array] = None,
                 path: str = "", at: int = 0) -> None:
        self.head = head
        self._arrays = None if addrs is None else (addrs, gcts, sizes)
        self._path, self._at = path, at

    def _read(self) -> Tuple[array, bytes, array]:
        if self._arrays is None:
            count = self.head["objects"]
            addrs, sizes = zeros("Q", count), zeros("Q", count)
            try:
                with open(self._path, "rb") as f:
                    f.seek(self._at)
                    got = f.readinto(addrs)
                    gcts = f.read(count)
                    got += len(gcts) + f.readinto(sizes)
            except OSError as e:
                raise SnapshotError("cannot read %s: %s" % (self._path, e.strerror or e))
            if got != 17 * count:
                raise SnapshotError("%s changed while it was read (%d bytes of objects, %d "
                                    "expected)" % (self._path, got, 17 * count))
            self._arrays = (addrs, gcts, sizes)
        return self._arrays

    def forget(self) -> None:
        """Let go of the arrays read from the file (read again if asked)."""
        if self._path:
            self._arrays = None

    @property
    def addrs(self) -> array:
        return self._read()[0]

    @property
    def gcts(self) -> bytes:
        return self._read()[1]

    @property
    def sizes(self) -> array:
        return self._read()[2]


def load(path: str) -> Snapshot:
    """The Snapshot in the file at path (SnapshotError when it is none):
    its header read and its length checked; its arrays are read later."""
    try:
        with open(path, "rb") as f:
            start = f.read(len(MAGIC) + 8)
            if not start.startswith(MAGIC) or len(start) < len(MAGIC) + 8:
                raise SnapshotError("%s is no heap snapshot of lgcstat --save" % path)
            n = int.from_bytes(start[len(MAGIC):], "little")
            data = f.read(min(n, 1 << 30))
            total = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    k = len(start) + n
    try:
        if len(data) != n:
            raise ValueError("its header is cut short")
        head = json.loads(data.decode())
        count = head["objects"]
        if total != k + 17 * count:
            raise ValueError("%d bytes of objects, %d expected" % (total - k, 17 * count))
    except (ValueError, KeyError, TypeError) as e:
        raise SnapshotError("%s is a damaged heap snapshot (%s)" % (path, e))
    return Snapshot(head, path=path, at=k)


def same_heap(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """Whether two identities are one process's heap (then objects match by
    address); a process id unknown on one side counts as different."""
    return a["process"] is not None and a == b


class Diff(object):
    """The objects of the heap now against a snapshot of the same process.
    new / freed: per gct [count, bytes]; resized: [count, bytes now - then]
    per gct; new_index: the heap indexes of the new objects (address
    order)."""

    def __init__(self, heap: 'Heap', snap: Snapshot) -> None:
        addrs, gcts = heap.index()
        sizes = heap.sizes
        oa, og, osz = snap.addrs, snap.gcts, snap.sizes
        self.new = {g: [0, 0] for g in C.GCT_TEXT}
        self.freed = {g: [0, 0] for g in C.GCT_TEXT}
        self.resized = {g: [0, 0] for g in C.GCT_TEXT}
        self.new_index = array("I")
        self.resized_index = array("I")
        fast = graphc.diff(addrs, gcts, sizes, oa, og, osz)
        if fast is not None:
            self.new_index, self.resized_index, tables = fast
            for mine, table in zip((self.new, self.freed, self.resized), tables):
                for g in mine:
                    mine[g] = list(table[g])
        i = j = 0
        n, m = len(addrs), len(oa)
        while fast is None and (i < n or j < m):
            if j >= m or (i < n and addrs[i] < oa[j]):
                self._add_new(i, gcts[i], sizes[i])
                i += 1
            elif i >= n or oa[j] < addrs[i]:
                f = self.freed[og[j]]
                f[0] += 1
                f[1] += osz[j]
                j += 1
            else:
                if gcts[i] != og[j]:
                    f = self.freed[og[j]]
                    f[0] += 1
                    f[1] += osz[j]
                    self._add_new(i, gcts[i], sizes[i])
                elif sizes[i] != osz[j]:
                    r = self.resized[gcts[i]]
                    r[0] += 1
                    r[1] += sizes[i] - osz[j]
                    self.resized_index.append(i)
                i += 1
                j += 1
        self.old_sizes = {}
        # The sizes then of the resized objects (few), for their owners.
        for i in self.resized_index:
            k = _find(oa, addrs[i])
            self.old_sizes[i] = osz[k]

    def _add_new(self, i, gct, size):
        self.new_index.append(i)
        e = self.new[gct]
        e[0] += 1
        e[1] += size

    @property
    def freed_count(self) -> int:
        return sum(c for c, _ in self.freed.values())

    def owners(self, dom: 'Dominators') -> Dict[int, List[int]]:
        """{number of an object that existed before (or -1: more than one
        root, or -2: no root reaches it): [new objects, their bytes, bytes
        its own size grew]}: each new object charged to the nearest of its
        dominators that is not new (heapdom.Dominators of the heap now)."""
        heap = dom.heap
        sizes = heap.sizes
        is_new = bytearray(dom.n)
        for i in self.new_index:
            is_new[i] = 1
        order, idom, num = dom.order, dom.idom, dom.num
        out = {}
        owner = graphc.owners(order, idom, is_new)
        if owner is not None:
            # (In C: each object's owner; then only the new ones here.)
            for i in self.new_index:
                k = num[i]
                if k >= 0:
                    e = out.get(owner[k])
                    if e is None:
                        e = out[owner[k]] = [0, 0, 0]
                    e[0] += 1
                    e[1] += sizes[i]
            in_python = 0
        else:
            owner = array("i", [-1]) * len(order)
            in_python = len(order)
        for k in range(in_python):
            d = idom[k]
            if d < 0:
                owner[k] = -1
            elif is_new[order[d]]:
                owner[k] = owner[d]
            else:
                owner[k] = d
            if is_new[order[k]]:
                e = out.get(owner[k])
                if e is None:
                    e = out[owner[k]] = [0, 0, 0]
                e[0] += 1
                e[1] += sizes[order[k]]
        for i in self.new_index:
            if num[i] < 0:
                e = out.setdefault(-2, [0, 0, 0])
                e[0] += 1
                e[1] += sizes[i]
        for i, then in self.old_sizes.items():
            k = num[i]
            e = out.setdefault(k if k >= 0 else -2, [0, 0, 0])
            e[2] += sizes[i] - then
        return out


def _find(arr, v):
    import bisect
    k = bisect.bisect_left(arr, v)
    return k if k < len(arr) and arr[k] == v else -1
