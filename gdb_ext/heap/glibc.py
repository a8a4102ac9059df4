"""glibc's malloc, read from memory: its arenas (main_arena and the
threads' arenas, the list main_arena.next links), each one's free chunks
in fastbins and in the unsorted, small and large bins, its top chunk and
heaps, and the chunks mmapped on their own (mp_) - the host's allocator,
where the Lua heap is often a small part of a process's memory.

The figures are malloc_info()'s (glibc's own XML report, malloc/malloc.c
__malloc_info): per arena, "fast" counts the fastbins' chunks, "rest" the
top chunk and every chunk of the bins, each bin's from/to/total/count as
it prints them; a chunk in a thread's tcache is in use for glibc's report
and here too.  The structs' layout comes from libc's own debug info
(Debian's libc6-dbg: the compile unit malloc.c), found through the
target (Target.types_of): LuaJIT's lj_alloc.c has a struct malloc_state
of its own.  Without it, a layout profile of the same libc build
(shipped_layout: its structs, and main_arena's and mp_'s places as
offsets from malloc) serves.

Every walk is bounded (MAX_CHUNKS chunks, each aligned and readable, no
chain longer than its bound); a damaged chain ends that bin's walk with
one line naming the chunk, and the rest is still read."""
from typing import Any, Dict, List, Optional, Tuple, TYPE_CHECKING
import json
import os

from ..errors import CorruptError, FaultError, LjError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..target import Target, TypeSource

NFASTBINS = 10                  # (64-bit: fastbin_index(request2size(80 * 8 / 4)) + 1)
NBINS = 128
MALLOC_ALIGNMENT = 16
SIZE_BITS = 0x7                 # PREV_INUSE | IS_MMAPPED | NON_MAIN_ARENA
HEAP_MAX_SIZE = 64 << 20        # 2 * DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
MAX_CHUNKS = 1 << 22            # chunks followed in one arena's lists, at most
MAX_ARENAS = 1024
LARGEST = 10                    # the largest free chunks kept per arena


class Layout(object):
    """Offsets of the fields read, from libc's types."""

    NEEDED = {"malloc_state": ("fastbinsY", "top", "bins", "next", "system_mem",
                               "max_system_mem"),
              "malloc_chunk": ("fd",),
              "heap_info": ("ar_ptr", "prev", "size", "mprotect_size"),
              "malloc_par": ("n_mmaps", "mmapped_mem")}

    def __init__(self, types: 'TypeSource') -> None:
        self.f = {}
        for struct, names in self.NEEDED.items():
            info = types.type_info(struct)
            if info is None:
                raise LjError("libc's debug info has no struct %s" % struct)
            for n in names:
                if not info.has(n):
                    raise LjError("libc's struct %s has no field %s: a glibc this reader does "
                                  "not know" % (struct, n))
                self.f[(struct, n)] = info.fields[n].offset
        chunk = types.type_info("malloc_chunk")
        self.size_off = chunk.fields["mchunk_size"].offset if chunk.has("mchunk_size") \
            else chunk.fields["size"].offset
        self.fd = self.f[("malloc_chunk", "fd")]

    def off(self, struct: str, name: str) -> int:
        return self.f[(struct, name)]


def libc_version(t: 'Target', addr: Optional[int]) -> Optional[Tuple[int, int]]:
    """glibc's version from its __libc_version string at addr, or None."""
    if addr is None:
        return None
    try:
        text = t.read(addr, 16).split(b"\0", 1)[0].decode("ascii")
        major, minor = text.split(".")[:2]
        return int(major), int(minor)
    except (FaultError, ValueError, UnicodeDecodeError):
        return None


class Bin(object):
    """One bin's chunks as malloc_info prints them: count, total bytes,
    smallest (frm) and largest (to) size."""

    def __init__(self, index: int, kind: str) -> None:
        self.index = index
        self.kind = kind            # 'fast', 'unsorted', 'small', 'large'
        self.count = 0
        self.total = 0
        self.frm = 0
        self.to = 0


class Arena(object):
    """One arena: its figures as malloc_info reports them, and more."""

    def __init__(self, addr: int, number: int, main: bool) -> None:
        self.addr = addr
        self.number = number
        self.main = main
        self.system = 0
        self.max_system = 0
        self.top = 0                # the top chunk's address
        self.top_size = 0
        self.fast = []              # [Bin] with chunks
        self.bins = []              # [Bin] with chunks (unsorted, small, large)
        self.free_sizes = []        # every free chunk's size (not top)
        self.binned = 0             # bytes of the bins' chunks, by their sizes
        self.largest = []           # [(size, address)] of the largest free chunks
        self.heaps = []             # [(heap_info address, size, mprotect_size)] (thread arenas)
        self.errors = []            # lines: a chain that could not be followed

    @property
    def fast_count(self) -> int:
        return sum(b.count for b in self.fast)

    @property
    def fast_bytes(self) -> int:
        return sum(b.total for b in self.fast)

    @property
    def rest_count(self) -> int:
        return 1 + sum(b.count for b in self.bins)          # (the top chunk, always)

    @property
    def rest_bytes(self) -> int:
        return self.top_size + sum(b.total for b in self.bins)

    @property
    def free_bytes(self) -> int:
        """Free bytes by the chunks' sizes (malloc_info's "rest" counts each
        binned chunk's size with its flag bits: a byte more for most)."""
        return self.fast_bytes + self.top_size + self.binned

    @property
    def aspace(self) -> Tuple[int, int]:
        """(address space, of it mprotect'ed for use): malloc_info's aspace."""
        if self.main:
            return self.system, self.system
        return sum(h[1] for h in self.heaps), sum(h[2] for h in self.heaps)


class Heap(object):
    """glibc's allocator of a process: arenas, mmapped chunks, version,
    and where the layout came from."""

    def __init__(self) -> None:
        self.layout_from = None
        self.arenas = []
        self.mmaps = 0
        self.mmapped = 0
        self.version = None


def read_heap(t: 'Target') -> Heap:
    """glibc's allocator as the process's memory holds it; LjError when the
    process has no glibc malloc, or its debug info is not at hand."""
    syms = {n: t.symbol(n) for n in ("main_arena", "mp_", "__libc_version")}
    types = t.types_of("main_arena", "malloc.c") if syms["main_arena"] is not None else None
    source = "libc's debug info"
    if syms["main_arena"] is None or syms["mp_"] is None or types is None:
        shipped = shipped_layout(t)
        if shipped is None:
            raise LjError("no layout of glibc's malloc here: libc's debug info is not at hand "
                          "(main_arena, mp_ and struct malloc_state are in it: Debian's "
                          "libc6-dbg) and no shipped profile is for this libc's build-id")
        types, syms, source = shipped
    main, mp = syms["main_arena"], syms["mp_"]
    lay = Layout(types)
    h = Heap()
    h.layout_from = source
    h.version = libc_version(t, syms.get("__libc_version"))
    safe = h.version is None or h.version >= (2, 32)
    try:
        h.mmaps = t.i32(mp + lay.off("malloc_par", "n_mmaps"))
        h.mmapped = t.u64(mp + lay.off("malloc_par", "mmapped_mem"))
    except FaultError as e:
        raise LjError("glibc's mp_ at 0x%x cannot be read: %s" % (mp, e))
    budget = [MAX_CHUNKS]
    a = main
    seen = set()
    while a and a not in seen and len(h.arenas) < MAX_ARENAS:
        seen.add(a)
        arena = Arena(a, len(h.arenas), a == main)
        try:
            _read_arena(t, lay, arena, safe, budget)
            nxt = t.u64(a + lay.off("malloc_state", "next"))
        except (FaultError, CorruptError) as e:
            arena.errors.append("arena 0x%x cannot be read: %s" % (a, e))
            h.arenas.append(arena)
            break
        h.arenas.append(arena)
        if nxt == main:
            break
        a = nxt
    return h


def profile_dirs() -> List[str]:
    """Where glibc's layout profiles are: glibc/ in each directory of layout
    profiles (LuaJIT's: gdb_ext.layouts.profiles)."""
    from ..layouts.profiles import profile_dirs as dirs
    return [os.path.join(d, "glibc") for d in dirs()]


def shipped_layout(t: 'Target') -> Optional[Tuple[Any, Dict[str, int], str]]:
    """(types, {symbol: address}, what it is) from a glibc layout profile
    (testprogs/make_profiles.py writes them from libc6-dbg) whose build-id
    is the one of the libc that holds malloc; None when there is none.  Its
    symbols are offsets from malloc, which every libc exports."""
    from ..layouts.buildid import file_build_id
    from ..target import DictTypes
    malloc = t.symbol("malloc")
    path = t.objfile_of(malloc) if malloc is not None else None
    bid = file_build_id(path) if path else None
    if not bid:
        return None
    for d in profile_dirs():
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".json"))
        except OSError:
            continue
        for n in names:
            try:
                with open(os.path.join(d, n)) as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                continue
            if doc.get("build_id") != bid:
                continue
            base = malloc - doc["symbols"]["malloc"]
            return (DictTypes(doc), {k: base + v for k, v in doc["symbols"].items()},
                    "the layout profile %s (libc build-id %s)" % (n, bid))
    return None


def _chunk_size(t: 'Target', lay: Layout, p: int) -> int:
    return t.u64(p + lay.size_off) & ~SIZE_BITS


def _read_arena(t: 'Target', lay: Layout, arena: Arena, safe: bool, budget: List[int]) -> None:
    a = arena.addr
    arena.system = t.u64(a + lay.off("malloc_state", "system_mem"))
    arena.max_system = t.u64(a + lay.off("malloc_state", "max_system_mem"))
    arena.top = t.u64(a + lay.off("malloc_state", "top"))
    arena.top_size = _chunk_size(t, lay, arena.top) if arena.top else 0
    free = []
    fast0 = a + lay.off("malloc_state", "fastbinsY")
    for i in range(NFASTBINS):
        p = t.u64(fast0 + 8 * i)
        if not p:
            continue
        b = Bin(i, "fast")
        size = _chunk_size(t, lay, p)
        seen = set()
        try:
            while p:
                if p % MALLOC_ALIGNMENT:
                    raise CorruptError("fastbin %d holds a misaligned chunk 0x%x" % (i, p), p)
                _once(seen, p)
                _spend(budget, p)
                b.count += 1
                free.append((size, p))
                fd_addr = p + lay.fd
                raw = t.u64(fd_addr)
                p = ((fd_addr >> 12) ^ raw) if safe else raw          # (REVEAL_PTR)
        except (FaultError, CorruptError) as e:
            arena.errors.append("fastbin %d of arena 0x%x: %s" % (i, a, e))
        b.frm, b.to, b.total = size - (MALLOC_ALIGNMENT - 1), size, b.count * size
        arena.fast.append(b)
    bins0 = a + lay.off("malloc_state", "bins")
    for i in range(1, NBINS):
        head = bins0 + 16 * (i - 1) - lay.fd          # (bin_at: a chunk whose fd is the slot)
        r = t.u64(head + lay.fd)
        if not r or r == head:
            continue
        b = Bin(i, "unsorted" if i == 1 else ("small" if i < 64 else "large"))
        b.frm = None
        seen = set()
        try:
            while r != head:
                if r % MALLOC_ALIGNMENT:
                    raise CorruptError("a misaligned chunk 0x%x" % r, r)
                _once(seen, r)
                _spend(budget, r)
                size = t.u64(r + lay.size_off)            # (chunksize_nomask, as malloc_info)
                b.count += 1
                b.total += size
                b.frm = size if b.frm is None else min(b.frm, size)
                b.to = max(b.to, size)
                free.append((size & ~SIZE_BITS, r))
                arena.binned += size & ~SIZE_BITS
                r = t.u64(r + lay.fd)
        except (FaultError, CorruptError) as e:
            arena.errors.append("bin %d of arena 0x%x: %s" % (i, a, e))
        b.frm = b.frm or 0
        arena.bins.append(b)
    arena.free_sizes = [s for s, _ in free]
    arena.largest = sorted(free, reverse=True)[:LARGEST]
    if not arena.main and arena.top:
        hp = arena.top & ~(HEAP_MAX_SIZE - 1)
        for _ in range(MAX_ARENAS):
            if not hp:
                break
            size = t.u64(hp + lay.off("heap_info", "size"))
            mprot = t.u64(hp + lay.off("heap_info", "mprotect_size"))
            arena.heaps.append((hp, size, mprot))
            hp = t.u64(hp + lay.off("heap_info", "prev"))


def _once(seen: set, p: int) -> None:
    if p in seen:
        raise CorruptError("chunk 0x%x comes twice: the chain loops" % p, p)
    seen.add(p)


def _spend(budget: List[int], p: int) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise CorruptError("more than %d free chunks: a chain that loops?" % MAX_CHUNKS, p)


def size_classes(sizes: List[int]) -> List[Tuple[int, int, int]]:
    """[(lower bound, chunks, bytes)] of free-chunk sizes by power-of-two
    class [2^k, 2^(k+1)), smallest first."""
    out = {}
    for s in sizes:
        if s <= 0:
            continue
        k = 1 << (s.bit_length() - 1)
        c = out.setdefault(k, [0, 0])
        c[0] += 1
        c[1] += s
    return [(k, n, b) for k, (n, b) in sorted(out.items())]


def fragmentation(arena: Arena) -> Optional[float]:
    """Free bytes outside the top chunk as a share of the arena's memory
    (malloc_info's system current), or None for an empty arena."""
    if not arena.system:
        return None
    return (arena.free_bytes - arena.top_size) / float(arena.system)


def heap_data(h: Heap) -> Dict[str, Any]:
    """The document of lmalloc --json."""
    arenas = []
    for a in h.arenas:
        frag = fragmentation(a)
        arenas.append({
            "address": "0x%x" % a.addr, "number": a.number, "main": a.main,
            "system": a.system, "max_system": a.max_system,
            "aspace": a.aspace[0], "aspace_mprotect": a.aspace[1],
            "heaps": [{"address": "0x%x" % hp, "size": s, "mprotect_size": m}
                      for hp, s, m in a.heaps],
            "top": {"address": "0x%x" % a.top, "size": a.top_size},
            "fast": {"count": a.fast_count, "size": a.fast_bytes},
            "rest": {"count": a.rest_count, "size": a.rest_bytes},
            "free": a.free_bytes, "in_use": a.system - a.free_bytes,
            "fragmentation": None if frag is None else round(frag, 6),
            "bins": [{"index": b.index, "kind": b.kind, "from": b.frm, "to": b.to,
                      "total": b.total, "count": b.count} for b in a.fast + a.bins],
            "free_size_classes": [{"from": k, "count": n, "bytes": by}
                                  for k, n, by in size_classes(a.free_sizes)],
            "largest_free": [{"size": s, "address": "0x%x" % p} for s, p in a.largest],
            "errors": a.errors})
    return {"glibc": "%d.%d" % h.version if h.version else None, "layout_from": h.layout_from,
            "arenas": arenas, "mmap": {"count": h.mmaps, "size": h.mmapped}}
