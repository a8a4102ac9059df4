"""Large-page reads for heap walks.

A heap walk touches millions of small objects spread over hundreds of MB.
Reading them one by one through the target (one gdb call each) costs tens
of microseconds per object; reading the heap in 1 MB pages and decoding
with struct from those buffers costs well under one.

Memory a target holds in place (Target.mapped: a core read through mmap)
goes into the same dicts as views, with nothing copied.

PageCache keeps pages in plain dicts that a hot loop may consult itself
(`full` for wholly readable 1 MB pages, `p64` for 64 KB pieces), so that
most lookups cost one dict access and no call.  At most `max_bytes` are kept: the oldest pages are
dropped first, so a walk over a heap larger than the gdb process could hold
stays bounded.  A region is read in 4 KB, then 64 KB, then 1 MB pieces as
a walk keeps coming back to it (see _piece); what cannot be read is
remembered, so a walk that keeps touching it fails fast with FaultError.
"""
from typing import Any, Callable, Iterator, Sequence, TYPE_CHECKING, Tuple
import struct
from operator import itemgetter

from ..errors import CorruptError, FaultError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Struct
    from ..target import Target

PAGE = 1 << 20
PAGE_MASK = ~(PAGE - 1)
P64 = 1 << 16
P64_MASK = ~(P64 - 1)
P4 = 1 << 12


class PageCache(object):
    def __init__(self, target: 'Target', max_bytes: int = 256 << 20) -> None:
        self.t = target
        self.max_bytes = max(max_bytes, 4 * PAGE)
        self.full = {}                 # 1 MB base -> bytes (whole page readable)
        self.split = set()             # 1 MB bases not wholly readable
        self.p64 = {}                  # 64 KB base -> bytes (in split pages)
        self.p4 = {}                   # 4 KB base -> bytes (in cut 64 KB pieces)
        self.bad64 = set()
        self.bad4 = set()
        self.visits = {}               # 1 MB base -> times a piece of it was asked for
        # (piece size, its cache, what cannot be read, visits before reading it)
        self._levels = ((PAGE, self.full, self.split, 3), (P64, self.p64, self.bad64, 2),
                        (P4, self.p4, self.bad4, 1))
        self.held = 0                  # bytes held in the dicts
        # Pieces held in place (a core's mmap), and their bytes: every
        # target.RELEASE_EVERY bytes they are dropped and the target lets
        # go of its pages (Target.release_pages), so that this cache keeps
        # at most that much of the core resident.
        self.placed = []
        self.placed_bytes = 0

    # ------------------------------------------------------------------
    def _place(self, kept, base, data):
        """Keep a piece held in place (a view of the target's memory) in
        `kept` at base.  With RELEASE_EVERY set, it is counted, and when
        the pieces before it reach that many bytes they are dropped and the
        target lets go of its pages first."""
        if self.t.RELEASE_EVERY:
            self.placed_bytes += len(data)
            if self.placed_bytes > self.t.RELEASE_EVERY:
                for d, b in self.placed:
                    d.pop(b, None)
                self.placed = []
                self.placed_bytes = len(data)
                self.t.release_pages()
            self.placed.append((kept, base))
        kept[base] = data

    def _keep(self, d, base, data):
        d[base] = data
        self.held += len(data)
        while self.held > self.max_bytes:
            victim = self.full if self.full else (self.p64 if self.p64 else self.p4)
            if not victim:
                break
            old = next(iter(victim))
            self.held -= len(victim.pop(old))

    def _piece(self, addr):
        """(base, bytes) of a readable piece holding addr.  A region is read
        small first (4 KB) and in bigger pieces when the walk comes back to
        it: dense heaps end up read in 1 MB pages, while objects that each
        sit alone in their own mapping (big strings and tables are direct
        mmaps) cost one 4 KB read, not a megabyte."""
        page = addr & PAGE_MASK
        data = self.full.get(page)
        if data is not None:
            return page, data
        base = addr & P64_MASK
        data = self.p64.get(base)
        if data is not None:
            return base, data
        base = addr & ~(P4 - 1)
        data = self.p4.get(base)
        if data is not None:
            return base, data
        m = self.t.mapped(addr)
        if m is not None:
            # Memory the target holds in place (a core's mmap): the biggest
            # piece inside it, uncopied (and not counted against max_bytes).
            start, end, buf = m
            for size, kept, _, _ in self._levels:
                base = addr & ~(size - 1)
                if start <= base and base + size <= end:
                    data = buf[base - start:base - start + size]
                    self._place(kept, base, data)
                    return base, data
        visits = self.visits[page] = self.visits.get(page, 0) + 1
        for size, kept, bad, min_visits in self._levels:
            base = addr & ~(size - 1)
            data = kept.get(base)
            if data is not None:
                return base, data
            if visits >= min_visits and base not in bad:
                try:
                    data = self.t.read_raw(base, size)
                except FaultError:
                    bad.add(base)
                    continue
                self._keep(kept, base, data)
                return base, data
        raise FaultError("cannot access memory at 0x%x" % addr, addr)

    def pieces(self) -> Iterator[Tuple[int, Any]]:
        """(base, bytes) of every piece held now, of every size."""
        for _, kept, _, _ in self._levels:
            yield from kept.items()

    def window(self, addr: int, n: int) -> Tuple[int, Any]:
        """(base, buf) with buf holding at least [addr, addr+n) at buf[addr-base:].
        Raises FaultError naming the first unreadable address."""
        base, data = self._piece(addr)
        if addr + n <= base + len(data):
            return base, data
        # Straddles a page or piece end: read the exact range.
        return addr, self.read(addr, n)

    def read(self, addr: int, n: int) -> bytes:
        """n bytes at addr (stitched across pages).  Where no aligned piece
        can be read (a mapping that ends inside a 4 KB page, as synthetic
        memory may), the exact range is read, and its FaultError names the
        first address that cannot be read."""
        out = []
        a, end = addr, addr + n
        try:
            while a < end:
                base, data = self._piece(a)
                take = min(end, base + len(data)) - a
                out.append(data[a - base:a - base + take])
                a += take
        except FaultError:
            return self.t.read_raw(addr, n)
        return b"".join(out)


# Readers of members from the buffers pages hold (for the heap walk and the
# thread scan).
CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def struct_reader(s: 'Struct', names: Sequence[str]) -> Callable[[Any, int], Tuple[int, ...]]:
    """A function (buf, off) -> tuple of the members `names` of struct s."""
    return raw_reader([(s.field(n).offset, s.field(n).size) for n in names], s.name)


def raw_reader(fields: Sequence[Tuple[int, int]],
               what: str) -> Callable[[Any, int], Tuple[int, ...]]:
    """A function (buf, off) -> tuple of the little-endian unsigned integers
    at the given (offset, size) pairs, in the order given."""
    ordered = sorted(range(len(fields)), key=lambda i: fields[i][0])
    fmt, pos = "<", 0
    for i in ordered:
        off, size = fields[i]
        if off < pos:
            raise CorruptError("overlapping members in %s" % what)
        fmt += "%dx%s" % (off - pos, CODES[size]) if off > pos else CODES[size]
        pos = off + size
    st = struct.Struct(fmt)
    if ordered == list(range(len(fields))):
        return st.unpack_from
    get = itemgetter(*[ordered.index(i) for i in range(len(fields))])
    unpack = st.unpack_from
    return lambda buf, off: get(unpack(buf, off))
