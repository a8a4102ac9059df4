"""Target.touched/release_pages: with RELEASE_EVERY set (the DAP server
sets it; 0, never, by default), a walk over all of a core's memory lets go
of the pages it holds every RELEASE_EVERY bytes, read through the core
target's read_raw or taken in place by the page cache (which then drops
its pieces in place); and a core's release_pages leaves every byte
readable, the same."""
import mmap

from ljgdb.gdb_ext.backends.coredump import Core
from ljgdb.gdb_ext.backends.coretarget import CoreTarget
from ljgdb.gdb_ext.target import SyntheticTarget
from ljgdb.gdb_ext.vm.pages import PAGE, PageCache

BASE = 0x100000
SIZE = 16 << 20


class Counting(SyntheticTarget):
    """Synthetic memory held "in place" (as a core's mmap), counting the
    releases."""

    RELEASE_EVERY = 4 << 20

    def __init__(self):
        super().__init__({"types": {}}, [(BASE, bytes(range(256)) * (SIZE // 256))])
        self.released = 0

    def mapped(self, addr):
        base, data = self.segments[0]
        return (base, base + len(data), memoryview(data)) if base <= addr < base + len(data) \
            else None

    def release_pages(self):
        self.released += 1


def test_a_cores_reads_release_every_so_many_bytes():
    released = []

    class _Core(object):
        def read(self, addr, n):
            return bytes(n)

        def release_pages(self):
            released.append(1)
    t = CoreTarget.__new__(CoreTarget)
    t.core = _Core()
    t.RELEASE_EVERY = 1 << 20
    for _ in range(10):
        assert t.read_raw(0x1000, 300 << 10) == bytes(300 << 10)
    assert len(released) == (10 * 300 << 10) // (1 << 20)


def test_the_page_cache_lets_go_of_its_pieces_in_place():
    t = Counting()
    pc = PageCache(t)
    for a in range(BASE, BASE + SIZE, PAGE):
        assert pc.read(a + 1, 2) == b"\x01\x02"
        assert pc.placed_bytes <= t.RELEASE_EVERY
    # (16 pieces of 1 MB, at most 4 MB held: dropped at the 5th, 9th and 13th)
    assert t.released == 3
    assert len(pc.full) == 4 and BASE not in pc.full
    assert pc.read(BASE + 7, 1) == b"\x07" and BASE in pc.full        # (taken again)


def test_a_core_reads_the_same_after_its_pages_are_let_go(tmp_path):
    path = tmp_path / "core"
    path.write_bytes(bytes(range(256)) * 4096)
    core = Core.__new__(Core)           # (its mapping alone: what release_pages drops)
    with open(str(path), "rb") as f:
        core._m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(core._m)[4096:8192]           # (as the page cache holds it)
    before = bytes(view)
    core.release_pages()
    assert bytes(view) == before == bytes(range(256)) * 16
    view.release()
    core._m.close()


def test_by_default_nothing_is_let_go():
    t = Counting()
    t.RELEASE_EVERY = 0
    pc = PageCache(t)
    for a in range(BASE, BASE + SIZE, PAGE):
        assert pc.read(a + 1, 2) == b"\x01\x02"
    assert t.released == 0 and len(pc.full) == SIZE // PAGE and pc.placed == []
    assert CoreTarget.RELEASE_EVERY == 0
