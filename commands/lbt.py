"""lbt: the Lua backtrace of a thread (or of all of them)."""
import gdb

from ..gdb_ext.backtrace import Backtracer
from ..gdb_ext.errors import CorruptError, FaultError, LjError
from ..gdb_ext.frames import cached_proto, frame_locals, frame_upvalues
from ..gdb_ext.threadscan import ThreadScanner, group
from .base import LjCommand, UsageError, get_vm, param, split_args
from .format import chunk_display, value_text

VMSTATE_TEXT = {
    "INTERP": "INTERP (running the bytecode interpreter)",
    "C": "C (in a C function called from Lua)",
    "GC": "GC (in the garbage collector)",
    "EXIT": "EXIT (leaving JIT-compiled code)",
    "RECORD": "RECORD (recording a trace)",
    "OPT": "OPT (optimizing a trace)",
    "ASM": "ASM (assembling a trace)",
}


class BtFormat(object):
    """Text of backtraces (gdb_ext.backtrace gives the data); shared by lbt
    and lthreads."""

    def __init__(self, vm):
        self.vm = vm
        self.bt = Backtracer(vm)

    def frame_text(self, fr):
        return self.key_text(self.bt.frame_key(fr))

    def key_text(self, key):
        """Text of a frame key (Backtracer.frame_key, gdb_ext.threadscan)."""
        cache = self.__dict__.setdefault("_key_text", {})
        text = cache.get(key)
        if text is None:
            if key[0] == "L":
                pt = cached_proto(self.vm, key[1])
                src = pt.__dict__.get("_display")
                if src is None:
                    src = pt._display = chunk_display(pt.chunk(self.vm))
                text = "%s:%s" % (src, key[2] if key[2] is not None else "?")
            elif key[0] == "F":
                name = self.bt.names.get(key[1])
                text = "[builtin#%s]" % (name if name else key[1])
            else:
                sym = self.vm.t.symbolize(key[1])
                name = key[2] if len(key) > 2 else self.bt.cnames.get(key[1])
                text = "C:%s" % sym if sym else \
                    "C:0x%x%s" % (key[1], " (%s)" % name if name else "")
            cache[key] = text
        return text

    @staticmethod
    def header(L, who, status, fiber):
        """The first line of a thread's backtrace (without the VM state)."""
        return "Lua backtrace of (lua_State *)0x%x (%s, %s%s)" % (
            L, who, status, "; " + fiber.describe() if fiber else "")

    def summary_where(self, s):
        """where (see `where`) of a threadscan.ThreadSummary."""
        if s.bt is not None:
            return self.where(s.bt)
        where = next((self.key_text(k) for k in s.keys if k[0] == "L"), None)
        if where is None:
            where = self.key_text(s.keys[0]) if s.keys else "-"
        return where

    def summary_lines(self, s, header=True):
        """lbt's lines for a ThreadSummary (the full ones where the
        Backtracer made it)."""
        if s.bt is not None:
            return self.lines(s.L, header=header)
        out = []
        if header:
            out.append(self.header(s.L, self.bt.who(s.L), s.status, self.bt.fibers.get(s.L)))
        out.extend("#%-3d %s" % (i, self.key_text(k)) for i, k in enumerate(s.keys))
        if not s.keys:
            out.append("(no Lua frames)")
        return out

    # --- folded stacks (FlameGraph, inferno, speedscope read them) --------
    @staticmethod
    def _fold(texts):
        """One folded stack, outermost frame first; ';' separates frames."""
        return ";".join(t.replace(";", ",") for t in reversed(texts))

    def folded_one(self, L):
        b = self.bt.backtrace(L)
        out = []
        if b.frames:
            out.append("%s 1" % self._fold([self.frame_text(f) for f in b.frames]))
        else:
            out.append("# (lua_State *)0x%x has no Lua frames" % L)
        for w in (b.warning, b.error):
            if w:
                out.append("# lbt: %s" % w)
        return out

    def folded_all(self, summaries, nthreads, walk_err):
        counts = {}
        empty = 0
        warned = []
        for s in summaries:
            if not s.keys:
                empty += 1
                continue
            stack = self._fold([self.key_text(k) for k in s.keys])
            counts[stack] = counts.get(stack, 0) + 1
            if s.bt is not None and s.bt.warning:
                warned.append("# lbt: (lua_State *)0x%x: %s" % (s.L, s.bt.warning))
        out = ["%s %d" % (stack, n) for stack, n in
               sorted(counts.items(), key=lambda e: (-e[1], e[0]))]
        if empty:
            out.append("# %d thread%s with no Lua frames" % (empty, "" if empty == 1 else "s"))
        out.extend(warned)
        if walk_err is not None or len(summaries) < nthreads:
            out.append("# lbt: %d of %d threads could not be read%s" % (
                nthreads - len(summaries), nthreads,
                "; walk of g->gc.root stopped: %s" % walk_err if walk_err else ""))
        return out

    def group_lines(self, g):
        """lbt --all --group's lines for a threadscan.Group."""
        ex = ", ".join("0x%x" % L for L in g.examples)
        more = g.count - len(g.examples)
        out = ["%d thread%s (%s%s): (lua_State *)%s%s" % (
            g.count, "" if g.count == 1 else "s",
            "VM thread g->vmthref, " if g.internal else "", g.status, ex,
            " and %d more" % more if more else "")]
        out.extend("#%-3d %s" % (i, self.key_text(k)) for i, k in enumerate(g.keys))
        if not g.keys:
            out.append("(no Lua frames)")
        if g.warning:
            out.append("lbt: %s" % g.warning)
        return out

    def where(self, b):
        """The innermost Lua frame of Backtrace b as chunk:line (or its
        innermost frame), '-' when it has none, '?' when unknown."""
        where = next((self.frame_text(f) for f in b.frames if f.kind == "lua"), None)
        if where is None:
            where = self.frame_text(b.frames[0]) if b.frames else "-"
        if b.warning and (b.hidden_top or not b.frames):
            where = "? (%s)" % where if b.frames else "? (not known at this moment)"
        return where

    def state_line(self):
        bt = self.bt
        if bt.trace_no is not None:
            site = bt.trace_start()
            at = ""
            if site is not None:
                at = " of trace %d, started at %s:%s" % (bt.trace_no,
                                                         chunk_display(site[0].chunk(self.vm)),
                                                         site[1])
            return "TRACE %d (in JIT-compiled code%s)" % (bt.trace_no, at)
        return VMSTATE_TEXT.get(bt.vmstate_name, bt.vmstate_name)

    def lines(self, L, full=False, max_frames=None, header=True):
        vm = self.vm
        out = []
        b = self.bt.backtrace(L)
        if header:
            head = self.header(L, b.who, b.status, b.fiber)
            if b.status == "running":
                head += "; VM state: " + self.state_line()
            out.append(head)
        frames = b.frames
        maxs = param("max-string")
        shown = frames if max_frames is None else frames[:max_frames]
        snap = b.start.trace if b.start is not None else None
        for i, fr in enumerate(shown):
            text = self.frame_text(fr)
            if fr.kind in ("builtin", "c"):
                co = self.bt.resumed_thread(b.walker, fr)
                if co:
                    text += " -> resumed (lua_State *)0x%x" % co
            if i == 0 and not b.hidden_top and snap is not None and fr.kind == "lua":
                # From the trace's snapshot in effect at the machine pc:
                # the line of its last guard, at or before the line executing.
                text += " (in trace %d, %s)" % (snap.traceno, "at its last snapshot"
                                                if snap.exact else "at its start")
            out.append("#%-3d %s" % (fr.level + b.hidden_top, text))
            if full and fr.kind == "lua":
                for name, v, addr in frame_locals(b.walker, fr, b.frame_top(i), with_addr=True):
                    if addr is not None and self.bt.in_trace_value(b, fr, addr):
                        out.append("      %s = <in trace %d: kept in a register or spill slot, "
                                   "the stack slot is stale>" % (name, snap.traceno))
                        continue
                    out.append("      %s = %s" % (name, _val(vm, v, maxs)))
                for name, v in frame_upvalues(vm, fr):
                    out.append("      upvalue %s = %s" % (name, _val(vm, v, maxs)))
        if len(shown) < len(frames):
            out.append("... %d more frames" % (len(frames) - len(shown)))
        if not frames and b.error is None and b.warning is None:
            out.append("(no Lua frames)")
        if b.caller:
            out.append("(g->vmthref runs __gc finalizers and VM event handlers; it was called "
                       "from (lua_State *)0x%x: lbt L=0x%x)" % (b.caller, b.caller))
        if b.warning is not None:
            out.append("lbt: %s" % b.warning)
        if b.error is not None:
            err = b.error
            addr = getattr(err, "address", None)
            out.append("lbt: walk stopped: %s%s" % (err, "" if addr is None or "0x%x" % addr in str(err)
                                                     else " (at 0x%x)" % addr))
        return out


def _val(vm, v, maxs):
    if isinstance(v, Exception):
        return "<unreadable: %s>" % v
    return value_text(vm, v, maxs)


class LBt(LjCommand):
    """Print the Lua backtrace of a Lua thread, innermost frame first.

Each frame is one line, numbered as lua_getstack numbers levels:
  <source>:<line>        a Lua function, at the line it is executing
  [builtin#<lib.name>]   a fast function (builtin#<ffid> if it has no name)
  C:<symbol>             a C function
The first line names the thread, its status and, for the running thread, the
VM state (interpreter, C, GC, TRACE n...).  A frame of coroutine.resume or of
a coroutine.wrap function shows the coroutine it resumed.  Upstream 2.1 runs
__gc finalizers on its own thread, g->vmthref: its backtrace ends with the
thread it runs them for.

  full      also list each Lua frame's live locals, varargs and upvalues
  --all     every coroutine's backtrace
  --group   with --all: threads whose status and frames are the same as one
            entry with their count, the largest first
  --folded  the stack as one line of folded frames, outermost first, then a
            count ("a.lua:9;a.lua:3;C:read 1"): what FlameGraph, inferno and
            speedscope read; with --all, every thread's, equal stacks counted
            together.  Lines that start with # say what is missing.
  L=<expr>  the lua_State to use (default: the current one, see linfo)

Usage: lbt [full] [--all [--group]] [--folded] [L=<lua_State *>]
Example:
  (gdb) lbt full
  Lua backtrace of (lua_State *)0x7ffff7cb3380 (main thread, running); VM state: C (in a C function called from Lua)
  #0   C:ljgdb_stop
  #1   app.lua:12
        req = table: (GCtab *)0x7ffff7cc58f0"""

    NAME = "lbt"
    SUMMARY = "the Lua backtrace of a thread, or of every thread (--all, --group)"
    WORDS = ('full', '--all', '--group', '--folded')
    USAGE = "lbt [full] [--all [--group]] [--folded] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        flags, opts, L_expr, rest = split_args(arg, flags=("all", "full", "group", "folded"))
        full = "full" in flags
        for r in rest:
            if r == "full":
                full = True
            else:
                raise UsageError("unexpected argument '%s'" % r)
        vm = get_vm(L_expr)
        bt = BtFormat(vm)
        if "group" in flags and "all" not in flags:
            raise UsageError("--group folds the threads of --all: use lbt --all --group")
        if "group" in flags and full:
            raise UsageError("--group folds frames, not locals: use it without full")
        if "folded" in flags and (full or "group" in flags):
            raise UsageError("--folded prints frames only, one line a stack: not with full or "
                             "--group")
        if "folded" in flags and "all" not in flags:
            return bt.folded_one(vm.L)
        if "all" not in flags:
            return bt.lines(vm.L, full)
        out = []
        scanner = ThreadScanner(bt.bt)
        threads, walk_err = scanner.threads()
        if "folded" in flags:
            summaries = [s for s in scanner.scan(threads) if not isinstance(s, Exception)]
            return bt.folded_all(summaries, len(threads), walk_err)
        if full:
            for L in threads:
                try:
                    out.extend(bt.lines(L, full))
                except (FaultError, CorruptError) as e:
                    out.append("Lua backtrace of (lua_State *)0x%x: unreadable: %s" % (L, e))
                out.append("")
        else:
            summaries = []
            for L, s in zip(threads, scanner.scan(threads)):
                if isinstance(s, Exception):
                    out.append("Lua backtrace of (lua_State *)0x%x: unreadable: %s" % (L, s))
                    out.append("")
                else:
                    summaries.append(s)
            if "group" in flags:
                for g in group(summaries, bt.bt.vmthread):
                    out.extend(bt.group_lines(g))
                    out.append("")
            else:
                for s in summaries:
                    out.extend(bt.summary_lines(s))
                    out.append("")
        out.append("%d thread%s" % (len(threads), "" if len(threads) == 1 else "s"))
        if walk_err is not None:
            out.append("lbt: walk of g->gc.root stopped, threads after it are missing: %s"
                       % walk_err)
        return out


class LuaWhere(gdb.Function):
    """$lua_where(): where the selected Lua thread stands, as chunk:line of
its innermost Lua frame (what lthreads shows as 'where'): "-" when it has no
Lua frame, "?" when that cannot be known at this moment.  For breakpoint
conditions and scripts:
  break lj_tab_new if $_streq($lua_where(), "app.lua:42")"""

    def __init__(self):
        super().__init__("lua_where")

    def invoke(self):
        try:
            vm = get_vm()
            fmt = BtFormat(vm)
            where = fmt.where(fmt.bt.backtrace(vm.L))
        except (LjError, UsageError, FaultError, CorruptError) as e:
            raise gdb.GdbError("$lua_where: %s" % e)
        return where.split(" ", 1)[0] if where.startswith("?") else where
