"""heapsnap.Diff's merge of the objects now with a snapshot's, in C
(graphc.c) and in Python, against the sets themselves: random heaps where
objects are freed, made, retyped at the same address and resized."""
import random
from array import array

import pytest

import ljgdb  # noqa: E402,F401
from ljgdb.gdb_ext import consts as C  # noqa: E402
from ljgdb.gdb_ext.heap import graphc  # noqa: E402
from ljgdb.gdb_ext.heap.heapsnap import Diff, Snapshot  # noqa: E402

TYPES = sorted(C.GCT_TEXT)


class ArrayHeap(object):
    def __init__(self, objs):
        self.addrs = array("Q", sorted(objs))
        self.gcts = bytes(objs[a][0] for a in self.addrs)
        self.sizes = array("Q", [objs[a][1] for a in self.addrs])

    def index(self):
        return self.addrs, self.gcts


@pytest.mark.parametrize("merged_in", ["C", "Python"])
@pytest.mark.parametrize("seed", range(20))
def test_diff_counts_every_change(seed, merged_in, monkeypatch):
    if merged_in == "Python":
        monkeypatch.setenv("LJGDB_HEAPGRAPH", "python")
    else:
        assert graphc.load()[0] is not None, graphc.load()[1]
    rnd = random.Random(seed)
    then = {0x1000 + 16 * rnd.randrange(4000): (rnd.choice(TYPES), rnd.randint(16, 400))
            for _ in range(rnd.randint(0, 1500))}
    now = {}
    for a, (g, size) in then.items():
        r = rnd.random()
        if r < 0.2:
            continue                                    # freed
        if r < 0.3:
            now[a] = (rnd.choice([t for t in TYPES if t != g]), size)   # another object
        elif r < 0.4:
            now[a] = (g, size + rnd.randint(-15, 300))  # resized (maybe smaller)
        else:
            now[a] = (g, size)
    for _ in range(rnd.randint(0, 500)):
        a = 0x1000 + 16 * rnd.randrange(8000)
        if a not in then:
            now[a] = (rnd.choice(TYPES), rnd.randint(16, 400))
    old = ArrayHeap(then)
    d = Diff(ArrayHeap(now), Snapshot({}, old.addrs, old.gcts, old.sizes))
    addrs = sorted(now)
    new = [a for a in addrs if a not in then or then[a][0] != now[a][0]]
    resized = [a for a in addrs if a in then and then[a][0] == now[a][0] and then[a][1] != now[a][1]]
    assert [addrs[i] for i in d.new_index] == new
    assert [addrs[i] for i in d.resized_index] == resized
    freed = [a for a in then if a not in now or then[a][0] != now[a][0]]
    for g in TYPES:
        assert d.new[g] == [sum(1 for a in new if now[a][0] == g),
                            sum(now[a][1] for a in new if now[a][0] == g)]
        assert d.freed[g] == [sum(1 for a in freed if then[a][0] == g),
                              sum(then[a][1] for a in freed if then[a][0] == g)]
        assert d.resized[g] == [sum(1 for a in resized if now[a][0] == g),
                                sum(now[a][1] - then[a][1] for a in resized if now[a][0] == g)]
    assert d.old_sizes == {addrs.index(a): then[a][1] for a in resized}


def _snapshot_file(path, addrs, gcts, sizes, extra=b""):
    import json
    from ljgdb.gdb_ext.heap.heapsnap import MAGIC
    head = json.dumps({"objects": len(addrs)}).encode()
    with open(path, "wb") as f:
        f.write(MAGIC + len(head).to_bytes(8, "little") + head)
        f.write(array("Q", addrs).tobytes() + bytes(gcts) + array("Q", sizes).tobytes() + extra)


def test_snapshot_arrays_are_read_when_asked(tmp_path):
    """load() reads the header and checks the length; the arrays come from
    the file when first asked for, again after forget(), and a file cut
    short in between is one clear error."""
    from ljgdb.gdb_ext.heap.heapsnap import SnapshotError, load
    path = str(tmp_path / "s.snap")
    addrs, gcts, sizes = [0x1000, 0x1040, 0x2000], [C.GCT_TAB, C.GCT_STR, C.GCT_FUNC], [64, 30, 48]
    _snapshot_file(path, addrs, gcts, sizes)
    snap = load(path)
    assert snap.head == {"objects": 3}
    assert (list(snap.addrs), list(snap.gcts), list(snap.sizes)) == (addrs, gcts, sizes)
    snap.forget()
    with open(path, "r+b") as f:
        f.truncate(f.seek(0, 2) - 8)
    with pytest.raises(SnapshotError, match="changed while it was read"):
        snap.sizes
    with pytest.raises(SnapshotError, match="is a damaged heap snapshot"):
        load(path)
    _snapshot_file(path, addrs, gcts, sizes, extra=b"\0")
    with pytest.raises(SnapshotError, match="is a damaged heap snapshot"):
        load(path)
    with open(path, "wb") as f:
        f.write(b"not a snapshot")
    with pytest.raises(SnapshotError, match="is no heap snapshot of lgcstat --save"):
        load(path)
