"""lgcstat's heap walk in C (gdb_ext/heap/walkc.c) finds what the Python
walk finds (LJGDB_HEAPWALK=python): every type's count, bytes, smallest,
largest and dead, the largest objects, the bytes of each chunk, the threads,
and every object's address, type, size and mark in address order.  On the
core of testprogs/lua/gc.lua's stop with finalizers pending (tables,
strings, coroutines, closures, cdata with VLAs, userdata and string
buffers) and of testprogs/lua/heap.lua (200,000 objects, and the JIT's
traces), read three ways:
in place through the core's mmap, copied a piece at a time (as gdb and
--pid hand pieces over), and through a page cache smaller than the heap
(the strings then walked in waves, the pieces given to the C code let go
of as the cache's bound is reached).  What the program made is there too:
its objects of each type, its pending finalizers (test_lgcstat.py checks
lgcstat's counts against gc.lua and g->gc.total on every build, live and
from cores, through the same C walk)."""
import pytest

from support.stop import Stop

import ljgdb  # noqa: F401
from ljgdb.gdb_ext import consts as C
from ljgdb.gdb_ext.backends.coredump import Core
from ljgdb.gdb_ext.backends.coretarget import open_target
from ljgdb.gdb_ext.heap.gcstat import HeapWalker
from ljgdb.gdb_ext.layouts.layout import Layout
from ljgdb.gdb_ext.vm.state import make_vm

FINALIZERS = 8          # gc.lua's stop with every kind of object and finalizers pending
HEAP_N = 200000

_stops = {}


def stop_of(variant, program, tmp_path_factory):
    key = (variant, program)
    if key not in _stops:
        work = str(tmp_path_factory.mktemp("walkc-%s-%s" % (variant, program[:-4])))
        if program == "gc.lua":
            _stops[key] = Stop(variant, program, ["linfo"], work,
                               live_prelude=["continue"] * (FINALIZERS - 1))
        else:
            _stops[key] = Stop(variant, program, ["linfo"], work, args=(str(HEAP_N),))
    return _stops[key]


def walk(stop, how, monkeypatch, cache_bytes=1 << 30):
    """Everything one walk of the stop's core finds, read `how`."""
    if how == "python":
        monkeypatch.setenv("LJGDB_HEAPWALK", "python")
    else:
        monkeypatch.delenv("LJGDB_HEAPWALK", raising=False)
    target = open_target(Core(stop.core, stop.build["host"]), 0)
    if how == "copied":
        target.mapped = lambda addr: None
    vm = make_vm(target, Layout(target))
    w = HeapWalker(vm, top=40, by_chunk=True, keep=True, cache_bytes=cache_bytes)
    st = w.run()
    assert (w.why_python == "") == (how != "python"), w.why_python
    addrs, gcts, sizes, dead = w.objects()
    return {"types": {C.GCT_NAMES[g]: (t.count, t.bytes, t.min, t.max, t.dead, t.dead_bytes)
                      for g, t in st.types.items()},
            "objects": st.objects, "pending": st.pending, "total": st.total,
            "accounted": st.accounted, "top": st.top, "chunks": st.chunks,
            "threads": sorted(w.threads),
            "kept": (list(addrs), gcts, list(sizes), dead)}


@pytest.mark.parametrize("variant", ["r21-gc64", "r20-x64", "or-x64"])
def test_every_kind_of_object(variant, tmp_path_factory, monkeypatch):
    stop = stop_of(variant, "gc.lua", tmp_path_factory)
    py = walk(stop, "python", monkeypatch)
    for how in ("in place", "copied"):
        got = walk(stop, how, monkeypatch)
        for k in py:
            assert got[k] == py[k], (how, k)
    # What both found is the program's heap: every byte of g->gc.total, the
    # finalizers it left pending, each type it made.
    assert py["accounted"] == py["total"]
    rec = stop.expected
    assert py["pending"] == sum(int(r[2]) for r in rec if r[0] == "pending")
    made = {r[2] for r in rec if r[0] == "delta" and int(r[3]) > 0}
    kind = {C.GCT_TEXT[g]: C.GCT_NAMES[g] for g in C.GCT_TEXT}   # ("string": "str")
    assert made and all(py["types"][kind[text]][0] > 0 for text in made), made
    assert len(py["top"]) == 40 and py["chunks"] and py["threads"]


def test_a_heap_bigger_than_the_page_cache(tmp_path_factory, monkeypatch):
    """4 MB of cache for a heap of about 15 MB: the strings in waves, and
    the pieces handed to the C code let go of several times."""
    stop = stop_of("r21-gc64", "heap.lua", tmp_path_factory)
    small = 4 << 20
    py = walk(stop, "python", monkeypatch, small)
    assert py["total"] > 3 * small
    for how in ("in place", "copied"):
        got = walk(stop, how, monkeypatch, small)
        for k in py:
            assert got[k] == py[k], (how, k)
    made = int([r for r in stop.expected if r[0] == "made"][0][1])
    assert py["objects"] >= made and py["accounted"] == py["total"]
    assert py["types"]["trace"][0] > 0          # (the C code sized traces too)
