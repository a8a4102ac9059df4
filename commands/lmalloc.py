"""lmalloc: glibc's malloc arenas, their free chunks and fragmentation
(the engine: gdb_ext.heap.glibc)."""
from .base import LjCommand, UsageError, check_memory, split_args
from ..gdb_ext.heap.glibc import heap_data, read_heap


def _kb(n):
    return "%d bytes" % n if n < 10240 else "%.1f KB" % (n / 1024.0) if n < 10 << 20 \
        else "%.1f MB" % (n / 1048576.0)


class LMalloc(LjCommand):
    """Show glibc's malloc: each arena (main_arena, then the threads'), the
memory it holds from the system, its free chunks as malloc_info() counts
them (fastbins; the top chunk and the unsorted, small and large bins), the
bytes in use, the free chunks by size class (powers of two), the largest
free chunks, and a fragmentation figure: free bytes outside the top chunk
over the arena's memory.  Chunks in a thread's tcache are in use, as
malloc_info counts them.  Any process will do, with LuaJIT or without (an
nginx master, a C program before luaL_newstate).  Without libc's debug info, a layout profile of the
same libc build (pkg/profiles/glibc/) serves, and a line says so.  --json gives malloc_info's own figures too
("fast", "rest", each bin's from/to/total/count: sizes with their flag
bits, as it prints them).  The layout comes from libc's debug info
(Debian's libc6-dbg).  --bins lists every bin with chunks, as malloc_info's
<size> lines.

Usage: lmalloc [--bins]
Example:
  (gdb) lmalloc
  glibc 2.36 malloc: 2 arenas; 1 chunk mmapped on its own (303104 bytes)
  arena 0 (main_arena, 0x7ffff7ea8c60): 4488.0 KB from the system (max 4488.0 KB)
    free 3802.3 KB: 93 in fastbins (3056 bytes), 298 in bins (3797.6 KB), top 1712 bytes
    in use 685.7 KB; fragmentation 84.7% (free outside top / arena)"""

    NAME = "lmalloc"
    NEEDS_LUAJIT = False        # glibc's heap: any process, with LuaJIT or without
    SUMMARY = "glibc's malloc: arenas, free chunks by bin and size, fragmentation"
    WORDS = ("--bins",)
    USAGE = "lmalloc [--bins]"

    def run_json(self, arg, from_tty):
        flags, _, state, rest = split_args(arg, flags=("bins",))
        if rest or state is not None:
            raise UsageError("unexpected argument '%s'" % (rest[0] if rest else "L=/G="))
        t = check_memory()
        doc = heap_data(read_heap(t))
        doc["with_bins"] = "bins" in flags
        return doc

    def run(self, arg, from_tty):
        doc = self.run_json(arg, from_tty)
        n = len(doc["arenas"])
        mm = doc["mmap"]
        out = ["glibc %s malloc: %d arena%s; %d chunk%s mmapped on %s own (%d bytes)" % (
            doc["glibc"] or "(version unknown)", n, "" if n == 1 else "s", mm["count"],
            "" if mm["count"] == 1 else "s", "its" if mm["count"] == 1 else "their",
            mm["size"])]
        if doc["layout_from"] != "libc's debug info":
            out.append("(glibc's layout from %s)" % doc["layout_from"])
        for a in doc["arenas"]:
            where = "main_arena, %s" % a["address"] if a["main"] else \
                "%s, %d heap%s, %s of address space" % (
                    a["address"], len(a["heaps"]), "" if len(a["heaps"]) == 1 else "s",
                    _kb(a["aspace"]))
            out.append("arena %d (%s): %s from the system (max %s)" % (
                a["number"], where, _kb(a["system"]), _kb(a["max_system"])))
            nbins = a["rest"]["count"] - 1
            out.append("  free %s: %d in fastbins (%s), %d in bins (%s), top %s" % (
                _kb(a["free"]), a["fast"]["count"], _kb(a["fast"]["size"]), nbins,
                _kb(a["free"] - a["fast"]["size"] - a["top"]["size"]), _kb(a["top"]["size"])))
            frag = a["fragmentation"]
            out.append("  in use %s; fragmentation %s (free outside top / arena)" % (
                _kb(a["in_use"]), "-" if frag is None else "%.1f%%" % (100 * frag)))
            if a["free_size_classes"]:
                out.append("  free chunks by size:  " + ", ".join(
                    "[%d, %d): %d" % (c["from"], 2 * c["from"], c["count"])
                    for c in a["free_size_classes"]))
            if a["largest_free"]:
                out.append("  largest free chunks: " + ", ".join(
                    "%d at %s" % (c["size"], c["address"]) for c in a["largest_free"][:5]))
            if doc["with_bins"]:
                for b in a["bins"]:
                    out.append("    %-8s bin %3d: %d chunk%s, %d bytes, sizes %d to %d" % (
                        b["kind"], b["index"], b["count"], "" if b["count"] == 1 else "s",
                        b["total"], b["from"], b["to"]))
            for e in a["errors"]:
                out.append("  lmalloc: %s" % e)
        return out
