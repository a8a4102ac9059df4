"""The heap snapshot's string texts written by graphc.c (SnapGraph.
write_strings) on synthetic strings: each is what Python's json module
writes of the string's first max_string bytes decoded as UTF-8 with every
bad sequence replaced (bytes.decode("utf-8", "replace")), "..." after a cut
text; random bytes, valid UTF-8 of every plane, cut sequences, control
bytes, quotes; and an unreadable string is "string"."""
import json
import random
from array import array

import pytest

from ljgdb.gdb_ext.heap import graphc
from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.vm.pages import PageCache
from support.synth import LAYOUTS, Heap


class StringHeap(object):
    """What SnapGraph asks of a heapgraph.Heap: the strings made, in order."""

    def __init__(self, variant, texts):
        h = Heap(variant)
        addrs = [h.new_str(t) for t in texts]
        self.t = h.target()
        self.lay = Layout(self.t)
        self.mem = PageCache(self.t)
        self.addrs = array("Q", addrs)
        self.gcts = bytes([4]) * len(addrs)
        self.sizes = array("Q", [self.lay.str.size + len(t) + 1 for t in texts])
        self.nil_shift = 0 if self.lay.gc64 else 32
        self.nil_top = 0xFFFFFFFFFFFFFFFF >> self.nil_shift

    def check_budget(self, done):
        pass


def random_text(rnd):
    parts = []
    for _ in range(rnd.randrange(0, 40)):
        kind = rnd.randrange(5)
        if kind == 0:
            parts.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 6))))
        elif kind == 1:
            cp = rnd.choice((rnd.randrange(0x80), rnd.randrange(0x80, 0x800),
                             rnd.randrange(0x800, 0xD800), rnd.randrange(0xE000, 0x10000),
                             rnd.randrange(0x10000, 0x110000)))
            enc = chr(cp).encode("utf-8")
            parts.append(enc[:rnd.randrange(1, len(enc) + 1)] if rnd.random() < 0.2 else enc)
        elif kind == 2:
            parts.append(rnd.choice((b'"', b"\\", b"\x7f", b"\x00", b"\n", b"\t", b"\x1f")))
        else:
            parts.append(b"plain text " * rnd.randrange(1, 4))
    return b"".join(parts)


def written(heap, max_string, tmp_path):
    lib, why = graphc.load()
    assert lib is not None, why
    n = len(heap.addrs)
    g = graphc.snap_graph(heap, graphc._zeros("I", n), [0] * 16, [0] * 5)
    path = str(tmp_path / "strings")
    try:
        g.read_memory()
        with open(path, "w") as f:
            g.write_strings(f, max_string)
    finally:
        g.close()
    with open(path, encoding="ascii") as f:
        return f.read()


def expected(texts, max_string):
    return "".join(",\n" + json.dumps(t[:max_string].decode("utf-8", "replace") +
                                      ("..." if len(t) > max_string else "")) for t in texts)


@pytest.mark.parametrize("variant", LAYOUTS)
@pytest.mark.parametrize("max_string", (7, 200))
def test_texts_as_python_writes_them(variant, max_string, tmp_path):
    rnd = random.Random(max_string * 31 + LAYOUTS.index(variant))
    texts = [random_text(rnd) for _ in range(400)] + [b"", b"\xe2\x82", b"x" * 199 + b"\xe2\x82\xac"]
    heap = StringHeap(variant, texts)
    assert written(heap, max_string, tmp_path) == expected(texts, max_string)


def test_an_unreadable_string_is_string(tmp_path):
    texts = [b"first", b"second", b"third"]
    heap = StringHeap("r21-gc64", texts)
    # (the first and last strings' objects moved to where no memory is,
    # below and above the rest: the order stays the addresses')
    heap.addrs[0], heap.addrs[2] = 0x1000, 0x7000_0000_0000
    assert written(heap, 200, tmp_path) == ',\n"string",\n"second",\n"string"'
