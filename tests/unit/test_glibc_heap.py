"""lmalloc's engine (gdb_ext.heap.glibc) on synthetic memory (no gdb): an
arena's fastbin (safe-linked, glibc 2.32 and later) and bins counted as
malloc_info counts them; a fastbin chain that loops and a bin whose link
is misaligned each end their walk with one line, the other bins still
read; no libc debug info is one clear error.  The same figures on real
processes against malloc_info itself: tests/e2e/test_lmalloc.py."""
import pytest

import ljgdb  # noqa: F401
from ljgdb.gdb_ext.errors import LjError
from ljgdb.gdb_ext.heap.glibc import heap_data, read_heap
from ljgdb.gdb_ext.target import DictTypes, SyntheticTarget

BASE = 0x500000
ARENA = BASE + 0x1000
MP = BASE + 0x2000
VERSION = BASE + 0x2100
CHUNKS = BASE + 0x3000

# A glibc-like layout (offsets as x86-64 glibc 2.36 has them).
LAYOUT = {"types": {
    "malloc_state": [2200, {"mutex": [0, 4], "flags": [4, 4], "fastbinsY": [16, 80, 10],
                            "top": [96, 8], "last_remainder": [104, 8],
                            "bins": [112, 2032, 254], "next": [2160, 8],
                            "system_mem": [2184, 8], "max_system_mem": [2192, 8]}],
    "malloc_chunk": [48, {"mchunk_prev_size": [0, 8], "mchunk_size": [8, 8], "fd": [16, 8],
                          "bk": [24, 8]}],
    "heap_info": [48, {"ar_ptr": [0, 8], "prev": [8, 8], "size": [16, 8],
                       "mprotect_size": [24, 8]}],
    "malloc_par": [136, {"n_mmaps": [40, 4], "mmapped_mem": [64, 8]}]}}


def types():
    return DictTypes({"types": {n: {"size": v[0], "fields": {
        f: [x[0], x[1], x[2] if len(x) > 2 else None, None] for f, x in v[1].items()}}
        for n, v in LAYOUT["types"].items()}})


class Memory(object):
    def __init__(self):
        self.mem = bytearray(0x10000)

    def q(self, addr, v):
        self.mem[addr - BASE:addr - BASE + 8] = (v & (2 ** 64 - 1)).to_bytes(8, "little")

    def chunk(self, addr, size, fd=0):
        self.q(addr + 8, size)
        self.q(addr + 16, fd)

    def target(self, with_types=True):
        t = SyntheticTarget({"types": {}}, [(BASE, bytes(self.mem))],
                            symbols={"main_arena": ARENA, "mp_": MP, "__libc_version": VERSION})
        t.types_of = (lambda sym, cu: types()) if with_types else (lambda sym, cu: None)
        return t


def protect(pos, ptr):
    """glibc's PROTECT_PTR: a fastbin link as memory holds it."""
    return (pos >> 12) ^ ptr


def build():
    m = Memory()
    m.mem[VERSION - BASE:VERSION - BASE + 5] = b"2.36\0"
    m.q(ARENA + 2160, ARENA)                    # next: itself (one arena)
    m.q(ARENA + 2184, 0x21000)                  # system_mem
    m.q(ARENA + 2192, 0x22000)
    top = CHUNKS + 0x800
    m.q(ARENA + 96, top)
    m.chunk(top, 0x1f001)                       # the top chunk, PREV_INUSE
    # fastbin 1 (chunks of 48 bytes): three, safe-linked.
    f = [CHUNKS, CHUNKS + 0x40, CHUNKS + 0x80]
    m.q(ARENA + 16 + 8, f[0])
    for a, nxt in zip(f, f[1:] + [0]):
        m.chunk(a, 0x31, protect(a + 16, nxt))
    # The unsorted bin (bin 1): two chunks, 0x111 and 0x211 with their flag bits.
    head = ARENA + 112 - 16
    u = [CHUNKS + 0x200, CHUNKS + 0x400]
    m.q(ARENA + 112, u[0])
    m.chunk(u[0], 0x111, u[1])
    m.chunk(u[1], 0x211, head)
    # mp_: one mmapped chunk.
    m.mem[MP + 40 - BASE:MP + 44 - BASE] = (1).to_bytes(4, "little")
    m.q(MP + 64, 0x40000)
    return m, f, u


def test_counted_as_malloc_info_counts():
    m, f, u = build()
    doc = heap_data(read_heap(m.target()))
    assert doc["glibc"] == "2.36" and doc["mmap"] == {"count": 1, "size": 0x40000}
    a = doc["arenas"][0]
    assert a["fast"] == {"count": 3, "size": 3 * 0x30}
    # "rest": the top chunk (masked) and the bins' chunks with their flag bits.
    assert a["rest"] == {"count": 3, "size": 0x1f000 + 0x111 + 0x211}
    assert [(b["kind"], b["from"], b["to"], b["total"], b["count"]) for b in a["bins"]] == [
        ("fast", 0x30 - 15, 0x30, 0x90, 3), ("unsorted", 0x111, 0x211, 0x322, 2)]
    assert a["free"] == 0x90 + 0x1f000 + 0x110 + 0x210
    assert a["in_use"] == 0x21000 - a["free"] and a["errors"] == []
    assert a["largest_free"][0] == {"size": 0x210, "address": "0x%x" % u[1]}
    assert a["free_size_classes"] == [{"from": 32, "count": 3, "bytes": 0x90},
                                      {"from": 256, "count": 1, "bytes": 0x110},
                                      {"from": 512, "count": 1, "bytes": 0x210}]


def test_a_loop_and_a_misaligned_link_end_their_walks_only():
    m, f, u = build()
    m.chunk(f[2], 0x31, protect(f[2] + 16, f[0]))       # the fastbin loops back
    m.chunk(u[0], 0x111, u[1] + 3)                       # a misaligned link
    a = heap_data(read_heap(m.target()))["arenas"][0]
    assert len(a["errors"]) == 2, a["errors"]
    assert a["errors"][0] == "fastbin 1 of arena 0x%x: chunk 0x%x comes twice: the chain " \
        "loops" % (ARENA, f[0])
    assert "bin 1 of arena 0x%x: a misaligned chunk 0x%x" % (ARENA, u[1] + 3) == a["errors"][1]
    assert a["fast"]["count"] == 3 and a["rest"]["count"] == 2


def test_without_libc_debug_info():
    m, _, _ = build()
    with pytest.raises(LjError) as e:
        read_heap(m.target(with_types=False))
    assert "libc6-dbg" in str(e.value)
