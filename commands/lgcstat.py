"""lgcstat: every GC object and every byte the collector counts, per type."""
import os
import sys

from ..gdb_ext import consts as C
from ..gdb_ext.errors import CorruptError, FaultError, LjError
from ..gdb_ext.heap.gcstat import HEADER_STRUCT, TYPE_ORDER, HeapWalker
from ..gdb_ext.jit.jit import TraceObj, jit_state
from ..gdb_ext.vm.objects import Cdata, Proto, Str, Tab, Thread, Udata
from .base import LjCommand, UsageError, get_vm, int_option, param, split_args
from .format import chunk_display, func_text, hexa, proto_site, quote
from .heapreport import (diff_data, diff_report, heapsnapshot_data, heapsnapshot_report,
                         retained_data, retained_report, save_data, save_report)
from .lgcref import graph_heap, target_object
from .host import current

TYPE_TEXT = C.GCT_TEXT


class LGcStat(LjCommand):
    """Count every GC object of the Lua VM and every byte the collector counts.

Walks the GC root list, the string table, every thread's open upvalues and
the userdata/cdata waiting for finalization, and sizes each object as the
collector frees it (a table with its array and hash parts, a thread with its
stack, a prototype with its bytecode and debug info, a cdata with its VLA
payload...).  One line per type gives count, bytes, min/avg/max object size
and the fixed header of that type in this layout (GC64 headers are larger
than X64 ones).  Then the memory g->gc.total counts that is no object (the
GG_State, the string table, buffers, JIT and FFI state), and the sum next to
g->gc.total.
  --top N       the N largest objects, with what they are
  --by-chunk    bytes of functions, prototypes and traces by chunk name
  --retained [--top N] [OBJECT]
                retained sizes: the bytes the collector frees when the last
                reference to an object goes (the object's own and those of
                every object only reachable through it, from the dominator
                tree of the strong references); the N objects that retain
                the most (10 by default), each with its path from the
                roots, or one OBJECT with the objects that dominate it
  --save FILE   keep every object's address, type and size in FILE (a file
                of this machine; nothing is written into the process), and
                the retained sizes of the 200 objects that retain the most
                by their paths
  --save FILE --format F
                F: ljgdb (the default), the file --diff reads; or
                heapsnapshot: the heap as a V8 heap snapshot (the
                .heapsnapshot JSON of Chrome DevTools' Memory panel and
                memlab): every object a node (named by its type, a table by
                its metatable's __name, a Lua function by chunk:line; its
                size as counted here), every reference an edge named as
                lgcref names it, the roots under one synthetic root, a weak
                table's weak side as weak edges
  --diff FILE [--top N] [--list]
                the heap now against the one saved in FILE: counts and
                bytes per type then and now, the retained bytes by path of
                the objects that retained the most then and now (these
                compare between processes too); in the same process also the
                new, freed and resized objects, and where the new ones hang
                (each charged to the nearest object that dominates it and
                existed before; the N with the most bytes); --list lists
                every new object

Usage: lgcstat [--top N] [--by-chunk|--retained [OBJ]|--save FILE [--format F]|--diff FILE [--list]] [L=<lua_State *>]
Example:
  (gdb) lgcstat --top 3
  type           count        bytes      min        avg      max  header (this layout)
  string           381        10952       25       28.7      104  sizeof(GCstr) = 24
  ...
  sum: 67193 bytes; g->gc.total: 67193 bytes (exact)"""

    NAME = "lgcstat"
    SUMMARY = "every GC object and every byte the collector counts"
    WORDS = ('--top', '--by-chunk', '--retained', '--save', '--diff', '--list', '--format')
    USAGE = ("lgcstat [--top N] [--by-chunk|--retained [OBJ]|--save FILE [--format F]|--diff FILE "
             "[--list]] [L=<lua_State *>]")
    FORMATS = ("ljgdb", "heapsnapshot")
    REPORTS = {"retained": retained_report, "save": save_report, "diff": diff_report,
               "heapsnapshot": heapsnapshot_report}

    def run(self, arg, from_tty):
        doc = self.data(arg, from_tty)
        return self.REPORTS.get(doc.get("kind"), report)(doc)

    def run_json(self, arg, from_tty):
        return self.data(arg, from_tty)

    def data(self, arg, from_tty):
        flags, opts, L_expr, rest = split_args(arg, flags=("by-chunk", "retained", "list"),
                                               options=("top", "save", "diff", "format"))
        modes = [m for m in ("by-chunk", "retained") if m in flags] + \
            [m for m in ("save", "diff") if m in opts]
        if len(modes) > 1:
            raise UsageError("--%s and --%s do not go together" % tuple(modes[:2]))
        if "list" in flags and "diff" not in opts:
            raise UsageError("--list goes with --diff FILE")
        if "format" in opts:
            if opts["format"] not in self.FORMATS:
                raise UsageError("unknown format '%s' (ljgdb or heapsnapshot)" % opts["format"])
            if "save" not in opts:
                raise UsageError("--format goes with --save FILE")
        if "retained" in flags:
            return self.retained(opts, L_expr, rest, from_tty)
        if "save" in opts or "diff" in opts:
            return self.snapshot(opts, L_expr, rest, "list" in flags, from_tty)
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        top = int_option(opts, "top", 0, 0)
        vm = get_vm(L_expr)
        progress = _Progress() if from_tty and _is_terminal() else None
        walker = HeapWalker(vm, top=top, by_chunk="by-chunk" in flags, progress=progress,
                            cache_bytes=max(param("heap-cache"), 4) << 20)
        try:
            st = walker.run()
        except (LjError, KeyboardInterrupt):
            # Corrupt memory or Ctrl-C: show what was counted before the
            # walk stopped, then the one line that says why.
            if progress is not None:
                progress.clear()
                progress = None
            if walker.st.objects:
                current().write("\n".join(partial_report(walker.st)) + "\n")
            raise
        finally:
            if progress is not None:
                progress.clear()
        return data(vm, st, top, "by-chunk" in flags)

    def snapshot(self, opts, L_expr, rest, listing, from_tty):
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        if "save" in opts and "top" in opts:
            raise UsageError("--top goes with --diff, not --save")
        vm = get_vm(L_expr)
        if "diff" in opts:
            command = "lgcstat --diff"
        elif opts.get("format") == "heapsnapshot":
            command = "lgcstat --save --format heapsnapshot"
        else:
            command = "lgcstat --save"
        heap = graph_heap(vm, command)
        progress = _Progress("objects followed") if from_tty and _is_terminal() else None
        try:
            if "save" in opts and opts.get("format") == "heapsnapshot":
                return heapsnapshot_data(vm, heap, os.path.expanduser(opts["save"]), progress,
                                         param("max-string"))
            if "save" in opts:
                return save_data(vm, heap, os.path.expanduser(opts["save"]), progress,
                                 param("max-string"))
            return diff_data(vm, heap, os.path.expanduser(opts["diff"]),
                             int_option(opts, "top", 10, 1), listing, progress,
                             param("max-string"))
        finally:
            if progress is not None:
                progress.clear()

    def retained(self, opts, L_expr, rest, from_tty):
        vm = get_vm(L_expr)
        target = target_object(vm, " ".join(rest)) if rest else None
        heap = graph_heap(vm, "lgcstat --retained")
        progress = _Progress("objects followed") if from_tty and _is_terminal() else None
        try:
            doc = retained_data(vm, heap, int_option(opts, "top", 10, 1), target, progress,
                                param("max-string"))
        finally:
            if progress is not None:
                progress.clear()
        doc["kind"] = "retained"
        return doc


def _is_terminal():
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class _Progress(object):
    """A progress line on the terminal, rewritten in place."""

    def __init__(self, what="objects walked"):
        self.shown = False
        self.what = what

    def __call__(self, n):
        current().write("\rlgcstat: %d %s (Ctrl-C stops)..." % (n, self.what))
        self.shown = True

    def clear(self):
        if self.shown:
            current().write("\r%s\r" % (" " * 60))


def data(vm, st, top, by_chunk):
    """lgcstat's document (the text is made from it)."""
    lay = vm.lay
    _, gcname = vm.gc_state
    doc = {"G": hexa(vm.G), "fork": lay.fork, "branch": lay.branch, "layout": lay.mode_name(),
           "gc_state": gcname[3:].lower() if gcname.startswith("GCS") else gcname, "types": []}
    for g in TYPE_ORDER:
        ts = st.types[g]
        hs = st.header_sizes.get(g)
        doc["types"].append({
            "type": TYPE_TEXT[g], "count": ts.count, "bytes": ts.bytes,
            "min": ts.min if ts.count else None, "max": ts.max if ts.count else None,
            "header": {"struct": HEADER_STRUCT[g], "size": hs} if hs is not None else None,
            "dead": ts.dead, "dead_bytes": ts.dead_bytes})
    doc["objects"] = sum(t.count for t in st.types.values())
    doc["object_bytes"] = st.object_bytes
    doc["pending_finalizers"] = st.pending
    doc["other"] = [{"name": n, "bytes": sz, "note": note} for n, sz, note in st.other]
    doc["other_bytes"] = st.other_bytes
    doc["sum"] = st.accounted
    doc["gc_total"] = st.total
    if top:
        doc["top"] = [{"bytes": size, "type": TYPE_TEXT[gct], "address": hexa(addr),
                       "what": describe(vm, gct, addr)} for size, addr, gct in st.top]
    if by_chunk:
        doc["chunks"] = chunk_data(vm, st)
    return doc


def report(doc):
    out = ["GC heap of (global_State *)%s: %s %s, %s layout, GC state %s"
           % (doc["G"], doc["fork"], doc["branch"], doc["layout"], doc["gc_state"])]
    out.append("%-10s %10s %14s %8s %10s %10s  %s" % ("type", "count", "bytes", "min", "avg",
                                                      "max", "header (this layout)"))
    dead = []
    for t in doc["types"]:
        h = t["header"]
        header = "sizeof(%s) = %d" % (h["struct"], h["size"]) if h else "-"
        if t["count"]:
            out.append("%-10s %10d %14d %8d %10.1f %10d  %s" % (
                t["type"], t["count"], t["bytes"], t["min"], t["bytes"] / t["count"], t["max"],
                header))
        else:
            out.append("%-10s %10d %14d %8s %10s %10s  %s" % (t["type"], 0, 0, "-", "-", "-",
                                                              header))
        if t["dead"]:
            dead.append("%d %s (%d bytes)" % (t["dead"], t["type"], t["dead_bytes"]))
    out.append("%-10s %10d %14d" % ("objects", doc["objects"], doc["object_bytes"]))
    if dead:
        out.append("  of which dead but not yet swept: " + ", ".join(dead))
    if doc["pending_finalizers"]:
        out.append("  of which %d wait for their finalizer (g->gc.mmudata)"
                   % doc["pending_finalizers"])
    out.append("Memory in g->gc.total that is no GC object:")
    for o in doc["other"]:
        out.append("  %-18s %14d  %s" % (o["name"], o["bytes"], o["note"]))
    out.append("  %-18s %14d" % ("total", doc["other_bytes"]))
    diff = doc["gc_total"] - doc["sum"]
    if diff == 0:
        verdict = "exact"
    elif diff > 0:
        verdict = ("%d bytes not accounted for: memory the VM holds only for a moment (a parser, "
                   "profiler or JIT-recorder buffer in use now) or state this version adds"
                   % diff)
    else:
        verdict = "%d bytes more than gc.total: a corrupt or inconsistent heap" % -diff
    out.append("sum: %d bytes; g->gc.total: %d bytes (%s)" % (doc["sum"], doc["gc_total"],
                                                              verdict))
    if "top" in doc:
        out.append("")
        out.append("The %d largest objects:" % len(doc["top"]))
        for o in doc["top"]:
            out.append("  %12d  %-9s %-16s %s" % (o["bytes"], o["type"], o["address"], o["what"]))
    if "chunks" in doc:
        out.append("")
        out.append("Functions, prototypes and traces by chunk:")
        out.append("%14s %10s  %s" % ("bytes", "objects", "chunk"))
        for c in doc["chunks"]:
            out.append("%14d %10d  %s" % (c["bytes"], c["objects"], c["chunk"]))
    return out


def partial_report(st):
    """The per-type counts of a walk that stopped before its end."""
    out = ["Walk stopped after %d objects; counted so far (incomplete):" % st.objects,
           "%-10s %10s %14s" % ("type", "count", "bytes")]
    for g in TYPE_ORDER:
        ts = st.types[g]
        if ts.count:
            out.append("%-10s %10d %14d" % (TYPE_TEXT[g], ts.count, ts.bytes))
    return out


def describe(vm, gct, addr):
    """A short text of what the object at addr is."""
    try:
        if gct == C.GCT_TAB:
            t = Tab(vm, addr)
            return "table asize=%d hmask=0x%x" % (t.asize, t.hmask)
        if gct == C.GCT_STR:
            s = Str(vm, addr, 40)
            return "%s, %d bytes" % (quote(s.data, s.truncated, s.len), s.len)
        if gct == C.GCT_PROTO:
            return "prototype %s" % proto_site(vm, addr)
        if gct == C.GCT_FUNC:
            return func_text(vm, addr)
        if gct == C.GCT_THREAD:
            th = Thread(vm, addr)
            main = " (main thread)" if addr == vm.main_L else ""
            return "lua_State, stack of %d slots%s" % (th.stacksize, main)
        if gct == C.GCT_UDATA:
            u = Udata(vm, addr)
            return "%s, %d bytes" % (C.UDTYPE_NAMES.get(u.udtype, "udtype %d" % u.udtype), u.len)
        if gct == C.GCT_CDATA:
            cd = Cdata(vm, addr)
            return "ctypeid %d%s" % (cd.ctypeid, ", variable length" if cd.is_vla else "")
        if gct == C.GCT_TRACE:
            tr = TraceObj(vm, addr, jit_state(vm))
            chunk, line, _ = tr.start_site(vm)
            return "trace %d from %s:%s" % (tr.traceno, chunk_display(chunk),
                                            line if line is not None else "?")
        if gct == C.GCT_UPVAL:
            return "upvalue"
    except (FaultError, CorruptError) as e:
        return "<unreadable: %s>" % e
    return ""


def chunk_data(vm, st):
    """Bytes of functions, prototypes and traces grouped by chunk name, the
    largest first."""
    chunks = {}
    for pt, (size, count) in st.chunks.items():
        try:
            name = chunk_display(Proto(vm, pt).chunk(vm))
        except (FaultError, CorruptError):
            name = "<unreadable prototype 0x%x>" % pt
        c = chunks.setdefault(name, [0, 0])
        c[0] += size
        c[1] += count
    return [{"chunk": name, "bytes": size, "objects": count}
            for name, (size, count) in sorted(chunks.items(), key=lambda kv: (-kv[1][0], kv[0]))]
