"""lheap: LuaJIT's own allocator (gdb_ext.heap.allocator)."""
from ..gdb_ext.heap.allocator import heap_report
from .base import LjCommand, UsageError, get_vm, split_args
from .format import hexa


class LHeap(LjCommand):
    """LuaJIT's own allocator (lj_alloc.c, derived from dlmalloc): each
segment with its accounting (alignment + chunks in use + free chunks + the
top chunk + the foot = the segment's size, checked against the allocator's
invariants), the free chunks by size (the designated victim included; the
walk's free chunks must be exactly the bins'), and fragmentation (free bytes
in chunks too small for the smallest table).  Requests of 128 KB and more
have mappings of their own, in no segment.  When the host gave lua_newstate
an allocator of its own (or the build uses the system's malloc), one line
says so.

Usage: lheap [L=<lua_State *>]
Example:
  (gdb) lheap
  LuaJIT's allocator (struct malloc_state *)0x7ffff7cba010: 1 segment, top chunk ...
  ..."""

    NAME = "lheap"
    SUMMARY = "LuaJIT's allocator: segments, chunks, bins, fragmentation"
    USAGE = "lheap [L=<lua_State *>]"

    def run(self, arg, from_tty):
        d = self.data(arg)
        if not d["own"]:
            return ["g->allocf is %s, not LuaJIT's lj_alloc_f: the host brings its own allocator "
                    "(lua_newstate with one, or a LUAJIT_USE_SYSMALLOC build), which lheap "
                    "does not read" % d["allocf_text"]]
        out = ["LuaJIT's allocator (struct malloc_state *)%s: %d segment%s, top chunk %s "
               "(%d bytes), designated victim %s (%d bytes)"
               % (d["state"], len(d["segments"]), "" if len(d["segments"]) == 1 else "s",
                  d["top"], d["topsize"], d["dv"], d["dvsize"])]
        for s in d["segments"]:
            out.append("segment %s, %d bytes = %d align + %d in use (%d chunks) + %d free (%d "
                       "chunks) + %d top + %d %s: %s"
                       % (s["base"], s["size"], s["align"], s["used"], s["used_chunks"],
                          s["free"], s["free_chunks"], s["top"], s["tail"],
                          "foot" if s["ends_at"] == "top" else "segment record and fenceposts",
                          "closes" if s["closes"] else "DOES NOT CLOSE (a corrupt heap, or a "
                          "layout this version of ljgdb misreads)"))
        out.append("free chunks: %d (%d bytes) by the walk, %d in the bins and the designated "
                   "victim: %s" % (d["walked_free"], d["free_bytes"], d["binned"] +
                                   (1 if d["dvsize"] else 0),
                                   "the same" if d["bins_agree"] else "THEY DIFFER"))
        if d["free_classes"]:
            out.append("%10s %10s %8s %12s" % ("from", "to", "chunks", "bytes"))
            for c in d["free_classes"]:
                out.append("%10d %10d %8d %12d" % (c["from"], c["to"], c["chunks"], c["bytes"]))
        out.append("fragmentation: %d of %d free bytes (the top chunk left out) are in chunks "
                   "smaller than %d bytes, too small for the smallest table"
                   % (d["free_in_small"], d["free_bytes"], d["small_limit"]))
        out.append("in use: %d bytes in %d chunks (g->gc.total: %d; a chunk adds a header word "
                   "and rounds up to 8 bytes; requests of 128 KB and more are mapped on their "
                   "own, outside the segments)" % (d["used_bytes"], d["used_chunks"],
                                                   d["gc_total"]))
        return out

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg)
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        vm = get_vm(state)
        d = heap_report(vm)
        d["gc_total"] = vm.gc_total
        sym = vm.t.symbolize(d["allocf"]) if d["allocf"] else None
        d["allocf_text"] = "%s <%s>" % (hexa(d["allocf"]), sym) if sym else \
            hexa(d["allocf"] or 0)
        for k in ("allocf", "allocd", "state", "top", "dv"):
            if d.get(k) is not None:
                d[k] = hexa(d[k])
        for s in d.get("segments", ()):
            s["base"] = hexa(s["base"])
        return d
