"""lmcode: the JIT's machine-code areas, or who owns one machine-code address."""
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.jit.jit import NoJitError, jit_state, trace_parent, traces
from ..gdb_ext.jit.mcode import LOWEST, Placement, assign_traces, locate, mcode_areas, room
from .base import LjCommand, eval_address, get_vm, split_args
from .format import chunk_display, hexa


def human(n, signed=False):
    """Bytes as '4 KB', '1.5 MB', '2 GB' (exact values stay integral)."""
    sign = ""
    if signed:
        sign = "-" if n < 0 else "+"
    n = abs(n)
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            v = n / size
            text = "%d" % v if n % size == 0 else ("%.2f" % v).rstrip("0").rstrip(".")
            return "%s%s %s" % (sign, text, unit)
    return "%s%d B" % (sign, n)


def trace_site(vm, T):
    """'chunk:line' where a trace starts."""
    try:
        chunk, line, _ = T.start_site(vm)
        return "%s:%s" % (chunk_display(chunk), line if line is not None else "?")
    except (FaultError, CorruptError) as e:
        return "<unreadable start: %s>" % e


def parent_text(vm, js, all_traces, T):
    """'-' for a root trace, 'P/E' (trace/exit) for a side trace, 'P/stitch'
    for a stitched one, as jit.dump writes them; '?' where unknown."""
    try:
        p, e = trace_parent(vm, js, all_traces, T)
    except (FaultError, CorruptError):
        return "?"
    if p == 0:
        return "-"
    if p is None:
        return "?"
    return "%d/%s" % (p, "?" if e is None else e)


def _cut_text(pl):
    """The window's part below the lowest mappable address, if any."""
    if not pl.cut:
        return ""
    return ("; its lower %s would lie below 0x%x (the exit handler is %s from address 0): cut"
            % (human(pl.cut), LOWEST, human(pl.exit_handler)))


def _perms(maps, area):
    if maps is None:
        return "unknown"
    for start, end, perms in maps:
        if start <= area.start < end:
            return perms
    return "unmapped"


class LMcode(LjCommand):
    """Show the JIT's machine-code (mcode) areas, or which trace owns an address.

Without an address: every mcode area, newest first (the current one,
J->mcarea, marked *), chained through the MCLink {next, size} at each area's
start: start, end, size, bytes in use (exact for the current area: code from
J->mctop to the end plus link/stubs from the start to J->mcbot; for older
areas a lower bound from their lowest trace), the memory protection (live
process only), the distance from the allocation target, whether LuaJIT's
allocator would accept the area there, and the traces whose code lies in it.
Then the target (derived from lj_vm_exit_handler as this LuaJIT version
does), the jump range of the architecture, the totals against the limits
jit.opt.start sets (sizemcode, maxmcode, in KB) and a verdict line.

With an address (any gdb expression, e.g. $pc): the trace and area that own
it, and where the trace starts.

Usage: lmcode [<address>] [L=<lua_State *>]
Example:
  (gdb) lmcode $pc
  0x7fffe7fefe4a is in trace 3 at +0x2a of its machine code 0x7fffe7fefe20-0x7fffe7fefe87 (103 bytes)"""

    NAME = "lmcode"
    SUMMARY = "the JIT's machine-code areas, or which trace owns an address"
    USAGE = "lmcode [<address>] [L=<lua_State *>]"

    def _state(self, arg):
        """(vm, js, areas, all_traces, orphans, addr), or a note (why there
        is nothing to show) as a string."""
        flags, opts, L_expr, rest = split_args(arg)
        addr = eval_address(" ".join(rest), "address") if rest else None
        vm = get_vm(L_expr)
        try:
            js = jit_state(vm)
        except NoJitError as e:
            return "no JIT: %s" % e
        all_traces = traces(vm, js)
        areas = mcode_areas(vm, js)
        if not areas:
            return ("no mcode area: the JIT has not compiled any trace yet, or all were "
                    "flushed (J->mcarea is NULL)")
        orphans = assign_traces(areas, all_traces)
        return vm, js, areas, all_traces, orphans, addr

    def run(self, arg, from_tty):
        st = self._state(arg)
        if isinstance(st, str):
            return ["lmcode: " + st]
        vm, js, areas, all_traces, orphans, addr = st
        if addr is not None:
            return self.locate(vm, js, areas, all_traces, addr)
        return self.areas(vm, js, areas, orphans)

    def run_json(self, arg, from_tty):
        """lmcode's document: "areas" (each with its traces), "orphans",
        "placement", "limits", "verdict" as the text gives them; with an
        address, "address" and where it is ("trace", "area")."""
        st = self._state(arg)
        if isinstance(st, str):
            return {"note": st}
        vm, js, areas, all_traces, orphans, addr = st
        if addr is not None:
            area, T, what = locate(vm, js, areas, all_traces, addr)
            doc = {"address": hexa(addr), "trace": None, "area": None, "in": what,
                   "text": self.locate(vm, js, areas, all_traces, addr)}
            if T is not None:
                doc["trace"] = {"number": T.traceno, "offset": addr - T.mcode,
                                "mcode": hexa(T.mcode), "end": hexa(T.end), "size": T.szmcode,
                                "root": T.root or None,
                                "parent": parent_text(vm, js, all_traces, T),
                                "link": T.link_name, "start": trace_site(vm, T)}
            if area is not None:
                doc["area"] = self._area_doc(areas, area)
            return doc
        pl = Placement(vm, js)
        maps = vm.t.mappings()
        left = room(vm, js, areas, pl)
        lines = self.areas(vm, js, areas, orphans, pl, maps, left)
        items = []
        for a in areas:
            d = self._area_doc(areas, a)
            ok = pl.accepts(a)
            d.update(prot=_perms(maps, a), from_target=pl.distance(a) if pl.known else None,
                     in_window=ok, traces=sorted(t.traceno for t in a.traces))
            items.append(d)
        return {"jit_State": hexa(js.addr), "areas": items, "room": {
                    "area_size": left["size"], "areas_under_maxmcode": left["by_limit"],
                    "window_unmapped_bytes": left["free"], "window_holes": left["by_window"]},
                "orphans": [{"number": t.traceno, "mcode": hexa(t.mcode)} for t in orphans],
                "placement": self.placement_lines(pl),
                "limits": next(x for x in lines if x.startswith("limits:"))[len("limits:  "):],
                "verdict": next(x for x in lines if x.startswith("verdict:"))[len("verdict: "):]}

    @staticmethod
    def _area_doc(areas, a):
        return {"number": areas.index(a) + 1, "current": bool(a.current), "start": hexa(a.start),
                "end": hexa(a.end), "size": a.size,
                "used": a.used, "code_bytes_at_least": a.code_bytes if a.used is None else None}

    def locate(self, vm, js, areas, all_traces, addr):
        area, T, what = locate(vm, js, areas, all_traces, addr)
        out = []
        if T is not None:
            out.append("0x%x is in trace %d at +0x%x of its machine code 0x%x-0x%x (%d bytes)"
                       % (addr, T.traceno, addr - T.mcode, T.mcode, T.end, T.szmcode))
            kind = "root trace" if not T.root else "side trace of root %d" % T.root
            out.append("  trace %d: %s, parent %s, link %s, started at %s"
                       % (T.traceno, kind, parent_text(vm, js, all_traces, T), T.link_name,
                          trace_site(vm, T)))
        elif area is not None:
            out.append("0x%x is in no trace: it is in %s" % (addr, what))
        else:
            out.append("0x%x is not in any mcode area of this VM (%d area%s)"
                       % (addr, len(areas), "" if len(areas) == 1 else "s"))
            return out
        if area is not None:
            idx = areas.index(area) + 1
            out.append("  mcode area %d%s 0x%x-0x%x (%d bytes%s)"
                       % (idx, "*" if area.current else "", area.start, area.end, area.size,
                          ", current" if area.current else ""))
        return out

    def areas(self, vm, js, areas, orphans, pl=None, maps=None, left=None):
        """The text; pl, maps and left (Placement, mappings, room) when
        the caller has them already."""
        if pl is None:
            pl = Placement(vm, js)
            maps = vm.t.mappings()
            left = room(vm, js, areas, pl)
        out = ["mcode areas of (jit_State *)0x%x, newest first (* = current area, J->mcarea):"
               % js.addr,
               "   #  %-18s %-18s %8s %9s  %-7s %12s  %s"
               % ("start", "end", "size", "in use", "prot", "from target", "in window")]
        accepted = []
        for i, a in enumerate(areas, 1):
            used = "%d" % a.used if a.used is not None else ">=%d" % a.code_bytes
            ok = pl.accepts(a)
            accepted.append(ok)
            dist = human(pl.distance(a), signed=True) if pl.known else "?"
            out.append("%4d%s 0x%-16x 0x%-16x %8d %9s  %-7s %12s  %s"
                       % (i, "*" if a.current else " ", a.start, a.end, a.size, used,
                          _perms(maps, a), dist,
                          "?" if ok is None else ("yes" if ok else "NO")))
            nums = sorted(t.traceno for t in a.traces)
            out.append("      traces (%d): %s" % (len(nums), " ".join(map(str, nums)) or "-"))
        if orphans:
            out.append("traces in no listed area: %s"
                       % " ".join("%d (0x%x)" % (t.traceno, t.mcode) for t in orphans))
        out.extend(self.placement_lines(pl))
        total = sum(a.size for a in areas)
        size_kb, max_kb = js.params.get("sizemcode"), js.params.get("maxmcode")
        lim = "J->szallmcarea %d bytes in %d area%s (sum of their sizes %d)" % (
            js.szallmcarea, len(areas), "" if len(areas) == 1 else "s", total)
        if size_kb is not None and max_kb is not None:
            lim += "; sizemcode %d KB, maxmcode %d KB (J->param)" % (size_kb, max_kb)
        out.append("limits:  " + lim)
        verdict = "%d area%s, %s of %s max" % (
            len(areas), "" if len(areas) == 1 else "s", human(js.szallmcarea),
            human(max_kb << 10) if max_kb is not None else "?")
        if not pl.known:
            verdict += ", reachability unknown (%s)" % (
                "no symbol lj_vm_exit_handler" if pl.exit_handler is None else
                "jump range of %s unknown" % pl.arch)
        elif None in accepted:
            verdict += ", reachability unknown (a new range is chosen after the next flush)"
        elif all(accepted):
            verdict += ", all within %s" % self.window_text(pl)
        else:
            bad = [str(i) for i, ok in enumerate(accepted, 1) if not ok]
            verdict += ", area%s %s OUTSIDE %s: code there may not reach the exit " \
                       "handler or other areas" % ("" if len(bad) == 1 else "s", ", ".join(bad),
                                                   self.window_text(pl))
        if left["by_limit"] == 0:
            verdict += "; no room for another area under maxmcode: the next trace that needs " \
                       "one aborts with \"failed to allocate mcode memory\" (MCODEAL) and " \
                       "flushes all traces"
        elif left["by_limit"] is not None:
            verdict += "; room for %d more area%s of %s under maxmcode" % (
                left["by_limit"], "" if left["by_limit"] == 1 else "s", human(left["size"]))
        if left["by_window"] is not None:
            verdict += "; the window has %s unmapped, %s" % (
                human(left["free"]),
                "no hole an area fits in: the next area fails (\"failed to allocate mcode "
                "memory\")" if left["by_window"] == 0 else
                "holes for at most %d area%s" % (left["by_window"],
                                                 "" if left["by_window"] == 1 else "s"))
        elif pl.known and pl.hi is not None:
            verdict += "; free space in the window unknown (no memory map of the process here)"
        out.append("verdict: " + verdict)
        return out

    @staticmethod
    def window_text(pl):
        if pl.model == "target":
            return "+-%s of target" % human(pl.range)
        return "the allocation window 0x%x-0x%x around the target" % (pl.lo, pl.hi)

    @staticmethod
    def placement_lines(pl):
        if not pl.known:
            return ["target:  unknown (%s)" % ("no symbol lj_vm_exit_handler"
                                               if pl.exit_handler is None else
                                               "jump range of %s unknown" % pl.arch)]
        jump = "jump range of %s +-%s (LJ_TARGET_JUMPRANGE %d)" % (
            pl.arch, human(pl.jump), pl.jumprange_bits)
        if pl.model == "target":
            return ["target:  0x%x = lj_vm_exit_handler 0x%x & ~0xffff (2.0 / 2.1 snapshot "
                    "placement)" % (pl.target, pl.exit_handler),
                    "window:  areas are accepted within target +-%s (0x%x-0x%x), half the %s%s"
                    % (human(pl.range), pl.lo, pl.hi, jump, _cut_text(pl))]
        lines = ["target:  lj_vm_exit_handler 0x%x (upstream 2.1 centres its window on it)"
                 % pl.target]
        if pl.pending_new_range:
            lines.append("window:  J->mcmax is 0: LuaJIT failed to place an area and picks a new "
                         "window after the next flush; %s" % jump)
        else:
            width = pl.hi - pl.lo
            lines.append("window:  [J->mcmin, J->mcmax) = 0x%x-0x%x (%s), half the %s%s%s"
                         % (pl.lo, pl.hi, "2^%d - 64 KB" % pl.jumprange_bits
                            if width == (1 << pl.jumprange_bits) - 0x10000 else human(width), jump,
                            "; moved away from the exit handler after a failed allocation"
                            if pl.moved else "", _cut_text(pl)))
        return lines
