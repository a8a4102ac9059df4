"""lbt: the Lua backtrace of a thread (or of all of them)."""
from ..gdb_ext.errors import CorruptError, FaultError, NotLuaJITError
from ..gdb_ext.frames import (CFRAME_RAWMASK as C_CFRAME_RAWMASK, FrameWalker, frame_locals,
                               frame_upvalues, trace_snapshot_pc)
from ..gdb_ext.gdbtarget import machine_pcs
from ..gdb_ext.objects import Thread, Trace, Proto, decode_tv
from ..gdb_ext.runtime import builtin_names
from ..gdb_ext.walkers import all_threads, thread_status, threads_walk
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


class Backtracer(object):
    """Shared by lbt and lthreads: frames of a thread as text."""

    def __init__(self, vm):
        self.vm = vm
        self._names = None
        self.running = vm.running_L
        self.vmstate_name, self.trace_no = vm.vmstate_name()
        self._vmthread = False

    @property
    def vmthread(self):
        """g->vmthref (upstream 2.1 rolling only): the thread LuaJIT runs
        __gc finalizers (R lj_gc.c:511-522) and VM event handlers
        (R lj_vmevent.h:40) on; None elsewhere."""
        if self._vmthread is False:
            self._vmthread = None
            if self.vm.lay.G.has("vmthref"):
                try:
                    self._vmthread = self.vm.gref(self.vm.G + self.vm.lay.G.vmthref, "g->vmthref")
                except FaultError:
                    pass
        return self._vmthread

    def vmthread_caller(self, th):
        """The thread g->vmthref is working for: while it runs a finalizer
        or an event handler, the thread that entered the collector (or sent
        the event) is suspended in C below it on the C stack, so its
        cframe is the nearest one above g->vmthref's (the C stack grows
        down).  None if g->vmthref is not active."""
        mine = th.cframe & C_CFRAME_RAWMASK
        if not mine:
            return None
        best = None
        try:
            for L in all_threads(self.vm):
                if L == th.addr:
                    continue
                cf = Thread(self.vm, L).cframe & C_CFRAME_RAWMASK
                if cf > mine and (best is None or cf < best[0]):
                    best = (cf, L)
        except (FaultError, CorruptError, NotLuaJITError):
            return None
        return best[1] if best else None

    @property
    def names(self):
        if self._names is None:
            self._names = builtin_names(self.vm)
        return self._names

    def walker(self, L):
        th = Thread(self.vm, L)
        base = None
        top_pos = None
        if L == self.running and self.trace_no is not None:
            # In JIT-compiled code L->base is stale; the trace's BASE is in
            # g->jit_base, and the innermost pc in the snapshot at the
            # machine pc where the trace called out.
            jb = self.vm.jit_base
            if jb:
                base = jb
                top_pos = self._trace_pos(th, jb)
        return FrameWalker(self.vm, th, base, top_pos), th

    def _trace_pos(self, th, base):
        self.trace_pc_source = None
        try:
            lay = self.vm.lay
            T = self.trace_addr()
            pc = trace_snapshot_pc(self.vm, T, machine_pcs())
            self.trace_pc_source = "at its last snapshot"
            if pc is None:
                pc = self.vm.t.uint(T + lay.trace.startpc, lay.mref_size, "trace startpc")
                self.trace_pc_source = "at its start"
            w = FrameWalker(self.vm, th, base)
            fn = w.frame_gc(base - 8)
            from ..gdb_ext.objects import Func
            f = Func(self.vm, fn)
            if not f.is_lua:
                return None
            bc = f.pc
            return (pc - bc) // 4
        except (FaultError, CorruptError, NotLuaJITError):
            return None

    def trace_addr(self):
        lay = self.vm.lay
        J = self.vm.GG + lay.GG.J
        traces = self.vm.t.ptr(J + lay.J.trace, "J->trace")
        return self.vm.gref(traces + lay.ref_size * self.trace_no, "J->trace[n]")

    def frame_text(self, fr):
        if fr.kind == "lua":
            src = fr.proto.__dict__.get("_display")
            if src is None:
                src = fr.proto._display = chunk_display(fr.proto.chunk(self.vm))
            return "%s:%s" % (src, fr.line if fr.line is not None else "?")
        if fr.kind == "c":
            sym = self.vm.t.symbolize(fr.fn.cfunc)
            return "C:%s" % (sym or "0x%x" % fr.fn.cfunc)
        name = self.names.get(fr.fn.ffid)
        return "[builtin#%s]" % (name if name else fr.fn.ffid)

    def resumed_thread(self, walker, fr):
        """For a coroutine.resume / wrap frame: the thread it resumed."""
        name = self.names.get(fr.fn.ffid, "")
        try:
            if name == "coroutine.resume":
                v = walker.stack.tv(fr.base)
                return v.addr if v.kind == "thread" else None
            if name.endswith("wrap_aux"):
                up = self.vm.t.u64(fr.func + self.vm.lay.fnC.upvalue, "wrap upvalue")
                v = decode_tv(self.vm, up)
                return v.addr if v.kind == "thread" else None
        except (FaultError, CorruptError):
            return None
        return None

    def state_line(self):
        if self.trace_no is not None:
            return "TRACE %d (in JIT-compiled code%s)" % (self.trace_no, self.trace_site())
        return VMSTATE_TEXT.get(self.vmstate_name, self.vmstate_name)

    def trace_site(self):
        try:
            lay = self.vm.lay
            ref = self.trace_addr()
            T = Trace(self.vm, ref)
            pt = Proto(self.vm, T.startpt)
            from ..gdb_ext.frames import debug_line
            startpc = self.vm.t.uint(ref + lay.trace.startpc, lay.mref_size, "trace startpc")
            line = debug_line(self.vm, pt, (startpc - pt.bc) // 4)
            return " of trace %d, started at %s:%s" % (self.trace_no,
                                                       chunk_display(pt.chunk(self.vm)), line)
        except (FaultError, CorruptError, AttributeError):
            return ""

    def lines(self, L, full=False, max_frames=None, header=True):
        vm = self.vm
        out = []
        walker, th = self.walker(L)
        status = thread_status(vm, th, self.running)
        if header:
            if L == vm.main_L:
                who = "main thread"
            elif L == self.vmthread:
                who = "VM thread g->vmthref"
            else:
                who = "coroutine"
            head = "Lua backtrace of (lua_State *)0x%x (%s, %s)" % (L, who, status)
            if status == "running":
                head += "; VM state: " + self.state_line()
            out.append(head)
        frames, err = walker.walk()
        maxs = param("max-string")
        shown = frames if max_frames is None else frames[:max_frames]
        for i, fr in enumerate(shown):
            text = self.frame_text(fr)
            if fr.kind == "builtin":
                co = self.resumed_thread(walker, fr)
                if co:
                    text += " -> resumed (lua_State *)0x%x" % co
            if fr.nextframe is None and walker.top_pos is not None and fr.kind == "lua":
                # From the trace's last snapshot before the machine pc: the
                # line of the last guard, at or before the line executing.
                text += " (in trace %d, %s)" % (self.trace_no, self.trace_pc_source)
            out.append("#%-3d %s" % (fr.level, text))
            if full and fr.kind == "lua":
                top = frames[i - 1].slot if i > 0 else th.top
                for name, v in frame_locals(walker, fr, top):
                    out.append("      %s = %s" % (name, _val(vm, v, maxs)))
                for name, v in frame_upvalues(vm, fr):
                    out.append("      upvalue %s = %s" % (name, _val(vm, v, maxs)))
        if len(shown) < len(frames):
            out.append("... %d more frames" % (len(frames) - len(shown)))
        if not frames and err is None:
            out.append("(no Lua frames)")
        if L == self.vmthread and frames:
            caller = self.vmthread_caller(th)
            if caller:
                out.append("(g->vmthref runs __gc finalizers and VM event handlers; it was called "
                           "from (lua_State *)0x%x: lbt L=0x%x)" % (caller, caller))
        if err is not None:
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
  L=<expr>  the lua_State to use (default: the current one, see linfo)

Usage: lbt [full] [--all] [L=<lua_State *>]
Example:
  (gdb) lbt full
  Lua backtrace of (lua_State *)0x7ffff7cb3380 (main thread, running); VM state: C (in a C function called from Lua)
  #0   C:ljgdb_stop
  #1   app.lua:12
        req = table: (GCtab *)0x7ffff7cc58f0"""

    NAME = "lbt"
    USAGE = "lbt [full] [--all] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        flags, opts, L_expr, rest = split_args(arg, flags=("all", "full"))
        full = "full" in flags
        for r in rest:
            if r == "full":
                full = True
            else:
                raise UsageError("unexpected argument '%s'" % r)
        vm = get_vm(L_expr)
        bt = Backtracer(vm)
        if "all" not in flags:
            return bt.lines(vm.L, full)
        out = []
        threads, walk_err = threads_walk(vm)
        for L in threads:
            try:
                out.extend(bt.lines(L, full))
            except (FaultError, CorruptError) as e:
                out.append("Lua backtrace of (lua_State *)0x%x: unreadable: %s" % (L, e))
            out.append("")
        out.append("%d threads" % len(threads))
        if walk_err is not None:
            out.append("lbt: walk of g->gc.root stopped, threads after it are missing: %s"
                       % walk_err)
        return out
