"""LuaJIT's own allocator (R lj_alloc.c, derived from Doug Lea's malloc):
its segments, top chunk, designated victim, bins, and every chunk of every
segment, with an accounting that must close.

g->allocd is the allocator's state (struct malloc_state) when g->allocf is
lj_alloc_f.  Memory comes in segments (m->seg, then seg.next ...), each cut
into chunks: a chunk's head word is its size with PINUSE (bit 0: the
previous chunk is in use) and CINUSE (bit 1: this one is); the walk of a
segment goes from its first aligned chunk by sizes to the top chunk (the
free space at the end of the newest segment, m->topsize bytes) or to the
fencepost (a head of FENCEPOST_HEAD) that ends an older one.  Free chunks
also sit in bins: small bins (exact sizes below 256 bytes, doubly linked
lists), tree bins (larger sizes, tries of lists) and the designated victim
(m->dv, the chunk last split); a bin is empty when its bit in
m->smallmap / m->treemap is clear, whatever its pointers still say.
Requests of 128 KB and more get a mapping of their own (direct_alloc),
which no segment or list holds.

The accounting of a segment: its size = the alignment before its first
chunk + the chunks walked (in use and free) + the top chunk (in the top
segment) + what follows (TOP_FOOT_SIZE after the top: room for a segment
record and fenceposts; after an older segment's fencepost, the rest).
The free chunks found by the walk must be exactly those in the bins and
the designated victim.
"""
from typing import Any, Dict, List, TYPE_CHECKING
from ..errors import CorruptError, NotLuaJITError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..vm.state import VM

PINUSE, CINUSE = 1, 2
FLAG_BITS = 7
NSMALLBINS = NTREEBINS = 32
SMALLBIN_SHIFT = 3


class Chunks(object):
    """The allocator of one VM, walked."""

    def __init__(self, vm: 'VM') -> None:
        self.vm = vm
        t = vm.t
        lay = vm.lay
        self.ps = ps = lay.ptr_size
        allocf = t.uint(vm.G + lay.G.allocf, ps, "g->allocf") if lay.G.has("allocf") else None
        self.allocd = t.uint(vm.G + lay.G.allocd, ps, "g->allocd") if lay.G.has("allocd") \
            else None
        own = t.symbol("lj_alloc_f")
        self.own = allocf is not None and own is not None and allocf == own
        self.allocf = allocf
        if not self.own:
            return
        ms = t.type_info("malloc_state")
        if ms is None:
            raise NotLuaJITError("the debug info has no struct malloc_state (lj_alloc.c): "
                                 "cannot read LuaJIT's allocator")
        self.ms = ms
        m = self.allocd
        data = t.read(m, ms.size, "malloc_state at 0x%x" % m)

        def f(name):
            fl = ms.field(name)
            return int.from_bytes(data[fl.offset:fl.offset + fl.size], "little")
        self.topsize, self.top = f("topsize"), f("top")
        self.dvsize, self.dv = f("dvsize"), f("dv")
        self.smallbins_at = m + ms.field("smallbins").offset
        self.treebins_at = m + ms.field("treebins").offset
        self.segments = []
        seg = m + ms.field("seg").offset
        seen = set()
        while seg and seg not in seen and len(seen) < 4096:
            seen.add(seg)
            base, size, nxt = (t.uint(seg + i * ps, ps, "malloc_segment") for i in range(3))
            self.segments.append((base, size))
            seg = nxt
        # lj_alloc.c: TOP_FOOT_SIZE = align_offset(chunk2mem(0)) +
        # pad_request(sizeof(struct malloc_segment)) + MIN_CHUNK_SIZE.
        segsz = t.type_info("malloc_segment")
        self.min_chunk = 4 * ps
        self.top_foot = self._align_offset(2 * ps) + \
            self.pad_request(segsz.size if segsz else 3 * ps) + self.min_chunk

    @staticmethod
    def _align_offset(a):
        """align_offset (MALLOC_ALIGNMENT 8 in lj_alloc.c)."""
        return 0 if a & 7 == 0 else (8 - (a & 7)) & 7

    def pad_request(self, req: int) -> int:
        """The size of the chunk that holds a request of req bytes
        (request2size: a header word, 8-byte multiples, MIN_CHUNK_SIZE at
        least)."""
        return max(self.min_chunk, (req + self.ps + 7) & ~7)

    def walk(self) -> List[Dict[str, Any]]:
        """[segment dict] with its chunks counted: in use, free (with a
        size histogram), the top chunk, and the accounting."""
        t = self.vm.t
        ps = self.ps
        fencepost = CINUSE | PINUSE | ps      # INUSE_BITS | SIZE_T_SIZE
        out = []
        for base, size in self.segments:
            end = base + size
            first = base + self._align_offset(base + 2 * ps)
            q = first
            used = used_n = free = free_n = 0
            frees = []
            stop = None
            n = 0
            while base <= q < end:
                if q == self.top:
                    stop = "top"
                    break
                head = t.uint(q + ps, ps, "chunk head at 0x%x" % q)
                if head == fencepost:
                    stop = "fencepost"
                    break
                csize = head & ~FLAG_BITS
                if csize < 2 * ps or q + csize > end:
                    raise CorruptError("chunk at 0x%x of segment 0x%x has size %d"
                                       % (q, base, csize), q)
                if head & CINUSE:
                    used += csize
                    used_n += 1
                else:
                    free += csize
                    free_n += 1
                    frees.append((q, csize))
                q += csize
                n += 1
                if n > (1 << 26):
                    raise CorruptError("segment 0x%x: more chunks than can fit" % base, base)
            if stop is None:
                raise CorruptError("segment 0x%x: its chunks run past its end" % base, base)
            top = self.topsize if stop == "top" else 0
            tail = end - q - top
            out.append({"base": base, "size": size, "align": first - base, "used": used,
                        "used_chunks": used_n, "free": free, "free_chunks": free_n,
                        "top": top, "tail": tail, "ends_at": stop, "frees": frees})
        return out

    # --- the bins ---------------------------------------------------------------
    def binned(self) -> Dict[int, int]:
        """{chunk address: size} of every chunk in the small and tree bins."""
        t = self.vm.t
        ps = self.ps
        out = {}
        # A bin whose bit in smallmap/treemap is clear is empty, whatever
        # its pointers say (unlinking the last chunk clears only the bit).
        smallmap = t.u32(self.allocd + self.ms.field("smallmap").offset, "smallmap")
        treemap = t.u32(self.allocd + self.ms.field("treemap").offset, "treemap")
        for i in range(NSMALLBINS):
            if not smallmap >> i & 1:
                continue
            b = self.smallbins_at + 2 * i * ps        # smallbin_at: a fake chunk
            p = t.uint(b + 2 * ps, ps, "smallbin %d fd" % i)
            n = 0
            while p and p != b and n < (1 << 24):
                out[p] = t.uint(p + ps, ps, "chunk head") & ~FLAG_BITS
                p = t.uint(p + 2 * ps, ps, "chunk fd")
                n += 1
        for i in range(NTREEBINS):
            if not treemap >> i & 1:
                continue
            root = t.uint(self.treebins_at + i * ps, ps, "treebin %d" % i)
            todo = [root] if root else []
            n = 0
            while todo and n < (1 << 24):
                node = todo.pop()
                # The ring of chunks of this node's size (fd links).
                p = node
                while True:
                    out[p] = t.uint(p + ps, ps, "chunk head") & ~FLAG_BITS
                    p = t.uint(p + 2 * ps, ps, "chunk fd")
                    n += 1
                    if p == node or not p or n >= (1 << 24):
                        break
                for c in (t.uint(node + 4 * ps, ps, "child 0"),
                          t.uint(node + 5 * ps, ps, "child 1")):
                    if c:
                        todo.append(c)
        return out


def heap_report(vm: 'VM') -> Dict[str, Any]:
    """lheap's findings as a dict (see Chunks): own (False: the host's
    allocator, with allocf), segments with their accounting and whether it
    closes, the free chunks by size class, the designated victim, whether
    the bins hold exactly the free chunks the walk found, fragmentation."""
    ch = Chunks(vm)
    doc = {"own": ch.own, "allocf": ch.allocf, "allocd": ch.allocd}
    if not ch.own:
        return doc
    segs = ch.walk()
    frees = {}
    for s in segs:
        top_seg = s["ends_at"] == "top"
        # The top's segment ends with exactly TOP_FOOT_SIZE after the top
        # chunk (init_top); an older one with its segment record chunk and
        # fenceposts, less than that.
        s["closes"] = (s["tail"] == ch.top_foot) if top_seg else (0 <= s["tail"] < ch.top_foot)
        for q, size in s.pop("frees"):
            frees[q] = size
    binned = ch.binned()
    expect = dict(binned)
    if ch.dv and ch.dvsize:
        expect[ch.dv] = ch.dvsize
    doc.update({"state": ch.allocd, "top": ch.top, "topsize": ch.topsize, "dv": ch.dv,
                "dvsize": ch.dvsize, "top_foot": ch.top_foot, "segments": segs,
                "bins_agree": expect == frees, "binned": len(binned),
                "walked_free": len(frees)})
    # Free chunks by size class (powers of two), the top left out.
    classes = {}
    for size in frees.values():
        lo = 1 << (size.bit_length() - 1)
        c = classes.setdefault(lo, [0, 0])
        c[0] += 1
        c[1] += size
    doc["free_classes"] = [{"from": lo, "to": 2 * lo - 1, "chunks": c[0], "bytes": c[1]}
                           for lo, c in sorted(classes.items())]
    sizes = {}
    for size in frees.values():
        sizes[size] = sizes.get(size, 0) + 1
    doc["free_sizes"] = {str(k): v for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:20]}
    # Fragmentation: free bytes in chunks too small for the smallest table
    # (a GCtab with nothing else: the most common allocation of a Lua heap).
    small = ch.pad_request(vm.lay.tab.size)
    doc["small_limit"] = small
    doc["free_bytes"] = sum(frees.values())
    doc["free_in_small"] = sum(s for s in frees.values() if s < small)
    doc["used_bytes"] = sum(s["used"] for s in segs)
    doc["used_chunks"] = sum(s["used_chunks"] for s in segs)
    return doc
