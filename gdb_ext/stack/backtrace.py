"""Backtraces of Lua threads as data: the frames of each thread, where the
running one truly stands (gdb_ext.stack.vmstack), who resumed whom, and the
VM's finalizer thread.  lbt and lthreads only format what this returns."""
from typing import Any, Dict, List, Optional, TYPE_CHECKING, Tuple
from ..consts import VM_CODE_PREFIXES
from ..errors import CorruptError, FaultError, NotLuaJITError
from ..vm.cframe import CFRAME_RAWMASK, cframe_thread
from .frames import FrameWalker
from .funcname import called_as
from ..vm.protoinfo import debug_line
from ..vm.snapshots import trace_of_pc, trace_ref
from ..vm.objects import Proto, Thread, Trace, decode_tv
from ..vm.runtime import builtin_names, cfunc_names
from ..vm.tarantool import fibers
from .vmstack import Start, is_vm_code, locate
from ..vm.walkers import all_threads, thread_status

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..target import MachineFrame
    from ..vm.state import VM
    from .frames import Frame


class Backtrace(object):
    """One thread's frames.
    L, th (Thread), status ('running', 'suspended', ...), who ('main thread',
    'VM thread g->vmthref' or 'coroutine'), walker (FrameWalker: its stack
    and frame accessors, for locals), frames (innermost first), error (the
    CorruptError/FaultError that ended the walk, or None), start (the
    vmstack.Start of the running thread, else None), warning (what could
    not be known, or None), caller (for g->vmthref: the thread it works for),
    fiber (in Tarantool, the fiber that runs the thread), exdata (OpenResty's
    L->exdata, or None)."""

    def __init__(self, L: int, th: Thread, status: str, who: str) -> None:
        self.L = L
        self.th = th
        self.status = status
        self.who = who
        self.walker = None
        self.frames = []
        self.error = None
        self.start = None
        self.warning = None
        self.caller = None
        self.hidden_top = 0     # frames above the first shown that are not shown
        self.fiber = None       # Tarantool: the tarantool.Fiber that runs this thread
        self.exdata = None      # OpenResty's luajit2: L->exdata (nginx: the request)

    def frame_top(self, i: int) -> int:
        """The slot limit of frame i's values: the next inner frame's link
        slot, or L->top for the innermost one."""
        return self.frames[i - 1].slot if i > 0 else self.th.top


class Backtracer(object):
    """Backtraces of the threads of one VM, at one moment."""

    def __init__(self, vm: 'VM') -> None:
        self.vm = vm
        self._names = None
        self.running = vm.running_L
        self.vmstate_name, self.trace_no = vm.vmstate_name()
        self._vmthread = False
        self._fibers = None
        self._cnames = None
        self._wrap_file = False     # the file of a C coroutine.wrap (cfunc_name)
        self._entries = {}          # L -> its frames by C frame (entry)
        self._main_L = None
        self._threads = {}          # L -> its Thread, read once (a Backtracer is one moment's)

    def thread(self, L: int) -> Thread:
        """Thread L, read once per Backtracer."""
        th = self._threads.get(L)
        if th is None:
            th = self._threads[L] = Thread(self.vm, L)
        return th

    @property
    def mframes(self) -> List['MachineFrame']:
        return self.vm.machine_frames

    @property
    def names(self) -> Dict[int, str]:
        """ffid -> builtin name (from the process, then from DWARF)."""
        if self._names is None:
            self._names = builtin_names(self.vm)
        return self._names

    @property
    def vmthread(self) -> Optional[int]:
        """g->vmthref (upstream 2.1 rolling only): the thread LuaJIT runs
        __gc finalizers (R lj_gc.c:511-522) and VM event handlers
        (R lj_vmevent.h:40) on; None elsewhere."""
        if self._vmthread is False:
            self._vmthread = None
            if self.vm.lay.has_vmthref:
                try:
                    self._vmthread = self.vm.gref(self.vm.G + self.vm.lay.G.vmthref, "g->vmthref")
                except FaultError:
                    pass
        return self._vmthread

    def vmthread_caller(self, th: Thread) -> Optional[int]:
        """The thread g->vmthref is working for: while it runs a finalizer
        or an event handler, the thread that entered the collector (or sent
        the event) is suspended in C below it on the C stack, so its
        cframe is the nearest one above g->vmthref's (the C stack grows
        down).  None if g->vmthref is not active."""
        mine = th.cframe & CFRAME_RAWMASK
        if not mine:
            return None
        best = None
        try:
            for L in all_threads(self.vm):
                if L == th.addr:
                    continue
                cf = Thread(self.vm, L).cframe & CFRAME_RAWMASK
                if cf > mine and (best is None or cf < best[0]):
                    best = (cf, L)
        except (FaultError, CorruptError, NotLuaJITError):
            return None
        return best[1] if best else None

    @property
    def fibers(self) -> Dict[int, Any]:
        """Tarantool's fibers by the lua_State they run ({} elsewhere, or
        when the fiber list cannot be read)."""
        if self._fibers is None:
            try:
                self._fibers = fibers(self.vm)
            except (FaultError, CorruptError):
                self._fibers = {}
        return self._fibers

    def who(self, L: int) -> str:
        if self._main_L is None:
            self._main_L = self.vm.main_L      # (read once: lbt --all asks for every thread)
        if L == self._main_L:
            return "main thread"
        if L == self.vmthread:
            return "VM thread g->vmthref"
        return "coroutine"

    def backtrace(self, L: int, max_frames: int = 1 << 20) -> Backtrace:
        """The Backtrace of thread L."""
        vm = self.vm
        th = self.thread(L)
        bt = Backtrace(L, th, thread_status(vm, th, self.running), self.who(L))
        bt.fiber = self.fibers.get(L)
        if vm.lay.openresty:
            try:
                bt.exdata = vm.t.ptr(L + vm.lay.L.exdata, "L->exdata") or None
            except FaultError:
                bt.exdata = None
        start = None
        if L == self.running:
            try:
                start = locate(vm, th, self.mframes)
            except (FaultError, CorruptError) as e:
                start = Start(None, None, "L->base", "where the running thread stands cannot be "
                              "read (%s): frames from L->base, which may be stale" % e)
            bt.start = start
            bt.warning = start.warning
        if start is not None and start.show == "none":
            bt.walker = FrameWalker(vm, th)
            return bt
        base = start.base if start is not None else None
        pc = start.pc if start is not None else None
        bt.walker = FrameWalker(vm, th, base, pc)
        skip = 1 if start is not None and start.show == "outer" else 0
        frames, bt.error = bt.walker.walk(max_frames + skip)
        if start is not None and start.show == "top":
            frames = frames[:1]
            bt.error = None
        if skip and frames:
            frames = frames[1:]
            bt.hidden_top = 1
        bt.frames = frames
        if L == self.vmthread and frames:
            bt.caller = self.vmthread_caller(th)
        return bt

    @property
    def cnames(self) -> Dict[int, str]:
        """C function address -> the name Lua code knows it by (runtime.cfunc_names)."""
        if self._cnames is None:
            self._cnames = cfunc_names(self.vm)
        return self._cnames

    def exdata_text(self, exdata: int) -> str:
        """L->exdata as text: nginx's lua module keeps the request a
        coroutine serves there (ngx_http_lua_set_req)."""
        if any(n.startswith("ngx.") for n in self.cnames.values()):
            return "request (ngx_http_request_t *)0x%x" % exdata
        return "exdata 0x%x" % exdata

    def cfunc_name(self, fn: Any) -> Optional[str]:
        """The registered name of C function fn, or for a C closure over a
        thread that a host's own coroutine.wrap made (nginx's lua module
        replaces the coroutine library: its wrap returns a C closure over
        the coroutine, from the same library), 'coroutine.wrap function';
        else None."""
        name = self.cnames.get(fn.cfunc)
        if name is not None or not fn.nupvalues:
            return name
        if self._wrap_file is False:
            # (nginx's lua module keeps its own as coroutine.__wrap, behind
            # a Lua coroutine.wrap that calls it in a request.)
            wraps = [a for a, n in self.cnames.items()
                     if n in ("coroutine.wrap", "coroutine.__wrap")]
            self._wrap_file = self.vm.t.objfile_of(wraps[0]) if wraps else None
        if self._wrap_file is not None and self._wrap_closure_thread(fn) is not None and \
                self.vm.t.objfile_of(fn.cfunc) == self._wrap_file:
            return "coroutine.wrap function"
        return None

    def _wrap_closure_thread(self, fn):
        try:
            up = self.vm.t.u64(fn.addr + self.vm.lay.fnC.upvalue, "C closure upvalue")
            v = decode_tv(self.vm, up)
        except (FaultError, CorruptError):
            return None
        return v.addr if v.kind == "thread" else None

    def frame_key(self, fr: 'Frame') -> Tuple[Any, ...]:
        """Frame fr as a small key that frames of many threads share (the
        form gdb_ext.stack.threadscan gives them): ('L', proto, line, name)
        with name the (namewhat, name) debug.getinfo gives the frame from its
        caller's call site, or None (funcname), ('F', ffid), or ('C', cfunc)
        with the name cfunc_name gives, if any.  Kept in the frame (the
        walks of a profile share their outer frames)."""
        if fr.key is not None:
            return fr.key
        if fr.kind == "lua":
            key = ("L", fr.proto.addr, fr.line, called_as(self.vm, fr))
        elif fr.kind == "builtin":
            key = ("F", fr.fn.ffid)
        else:
            name = self.cfunc_name(fr.fn)
            key = ("C", fr.fn.cfunc, name) if name else ("C", fr.fn.cfunc)
        fr.key = key
        return key

    def resumed_thread(self, walker: FrameWalker, fr: 'Frame') -> Optional[int]:
        """For a coroutine.resume / wrap frame: the thread it resumed."""
        if fr.kind == "c":
            if self.cfunc_name(fr.fn) == "coroutine.wrap function":
                return self._wrap_closure_thread(fr.fn)
            return None
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

    def trace_start(self, traceno: Optional[int] = None) -> Optional[Tuple[Proto, Optional[int]]]:
        """(chunk proto, line) where trace traceno (default: the running
        one) starts, or None."""
        traceno = self.trace_no if traceno is None else traceno
        if traceno is None:
            return None
        try:
            lay = self.vm.lay
            ref = trace_ref(self.vm, traceno)
            T = Trace(self.vm, ref)
            pt = Proto(self.vm, T.startpt)
            startpc = self.vm.t.uint(ref + lay.trace.startpc, lay.mref_size, "trace startpc")
            return pt, debug_line(self.vm, pt, (startpc - pt.bc) // 4)
        except (FaultError, CorruptError, AttributeError):
            return None

    def entry(self, L: int, sp: int) -> Optional['VMEntry']:
        """The VMEntry of thread L's C frame sp, or None (backtrace.vm_entry);
        L's frames are split by entry once per Backtracer."""
        got = self._entries.get(L)
        if got is None:
            try:
                b = self.backtrace(L)
                chain, parts = _split_by_entry(self.vm, b)
                got = (b, chain, parts, None)
            except (FaultError, CorruptError) as e:
                got = (None, (), {}, str(e))
            self._entries[L] = got
        b, chain, parts, err = got
        if sp not in parts:
            return None
        frames = [f for f in parts[sp] if f.kind != "c"]
        warning = None
        if chain and sp == chain[0]:
            warning = err or (b.warning if b is not None else None)
        if b is not None and b.error is not None and sp == max(
                (cf for cf in chain if parts[cf]), default=None):
            warning = "walk stopped: %s" % b.error
        return VMEntry(L, frames, warning, b, sp)

    def in_trace_value(self, bt: Backtrace, fr: 'Frame', slot_addr: int) -> bool:
        """For `lbt full`: True when the value of the stack slot at
        slot_addr lives in the trace's registers or spill slots (the
        snapshot restores it on exit), so the stack holds a stale one."""
        start = bt.start
        if start is None or start.trace is None or not start.trace.exact:
            return False
        jb = self.vm.jit_base
        if not jb:
            return False
        s = (slot_addr - (jb - 8 * (1 + self.vm.lay.fr2))) // 8
        norestore = start.trace.slots.get(s)
        return norestore is False


class VMEntry(object):
    """The Lua frames one entry into the VM runs (lua_pcall, lua_call,
    coroutine.resume ... each enters the VM with a C frame of its own).
    L: the thread; frames: its Lua and builtin frames that this entry
    runs, innermost first (C functions are left out: they are machine
    frames of their own); warning: what could not be known about them, or
    None; backtrace: L's whole Backtrace (for the frames' locals)."""

    def __init__(self, L: int, frames: List['Frame'], warning: Optional[str] = None,
                 backtrace: Optional[Backtrace] = None, cframe: Optional[int] = None) -> None:
        self.leaf = False           # found from a leaf helper of the VM (vm_entry)
        self.cframe = cframe        # the C frame of this entry
        self.L = L
        self.frames = frames
        self.warning = warning
        self.backtrace = backtrace


def _cframe_chain(vm, walker, th):
    """Thread th's C frames, innermost first: L->cframe, then each one's
    saved previous (R lj_frame.h cframe_prev); the C stack grows down, so
    each is above the one before."""
    out = []
    cf = th.cframe & CFRAME_RAWMASK
    while cf and len(out) < 100000:
        if out and cf <= out[-1]:
            break
        out.append(cf)
        cf = walker._cf_read(cf, "prev") & CFRAME_RAWMASK
    return out


def _split_by_entry(vm, b):
    """{C frame address: [frames]} for Backtrace b: the frames of each VM
    entry, as LuaJIT's own unwinder pairs frames with C frames (R
    lj_err.c err_unwind): a frame called from C (FRAME_C, FRAME_CP) is the
    last of its entry, and a C frame with a negative nres (lj_vm_cpcall:
    the stack top when it was entered) holds no frame above that top."""
    walker = b.walker
    chain = _cframe_chain(vm, walker, b.th)
    out = {cf: [] for cf in chain}
    frames = b.frames
    nf = len(frames)
    # (By slices of the frames, not frame by frame: a profile asks this of
    # every sample of a deep stack.  Frames go down the stack: their slots
    # decrease.)
    entries = [k for k, fr in enumerate(frames) if fr.entry]
    stack = walker.stack.start
    i = 0
    e = 0               # entries[e]: the first entry frame at or after i
    for cf in chain:
        if i >= nf:
            break
        end = nf
        nres = walker._cf_read(cf, "nres")
        if nres < 0:
            # The frames at or above the stack's top when it was entered.
            low = stack - nres
            lo, hi = i, nf
            while lo < hi:
                mid = (lo + hi) // 2
                if frames[mid].slot < low:
                    hi = mid
                else:
                    lo = mid + 1
            end = lo
        while e < len(entries) and entries[e] < i:
            e += 1
        if e < len(entries) and entries[e] < end:
            end = entries[e] + 1
        out[cf] = frames[i:end]
        i = end
    return chain, out


def vm_entry(bt: Backtracer, m: 'MachineFrame') -> Optional[VMEntry]:
    """The VMEntry of machine frame m (a target.MachineFrame) when it is a
    frame of this VM's code whose C frame (the stack pointer there) is a C
    frame of one of this VM's threads; else None.  bt: a Backtracer."""
    vm = bt.vm
    if not is_vm_code(m):
        return _trace_entry(bt, m)
    sp = None
    try:
        sp, L = cframe_thread(vm, m)
        if L and bt.thread(L).glref == vm.G:
            entry = bt.entry(L, sp)
            if entry is not None:
                return entry
    except (FaultError, CorruptError):
        pass
    if m.level != 0 or sp is None:
        return None
    # A leaf helper of the VM (lj_vm_mod, lj_vm_floor ...: called by the
    # interpreter, no frame of its own): the stack pointer is one return
    # address below the C frame.  The unwind info LuaJIT emits describes
    # the VM's C frame only, so an unwinder takes wrong frames after it;
    # `leaf` tells the caller.
    try:
        ret = vm.t.u64(sp, "return address")
        L = cframe_thread(vm, _Shifted(m, 8))[1]
        if not L or bt.thread(L).glref != vm.G or \
                not (vm.t.symbolize(ret) or "").startswith(VM_CODE_PREFIXES):
            return None
    except (FaultError, CorruptError):
        return None
    entry = bt.entry(L, sp + 8)
    if entry is not None:
        entry.leaf = True
    return entry


class _Shifted(object):
    """Machine frame m with its stack pointer moved by delta."""

    def __init__(self, m, delta):
        self.m = m
        self.delta = delta

    def reg(self, name):
        v = self.m.reg(name)
        if v is not None and name in ("rsp", "sp"):
            v += self.delta
        return v


def _trace_entry(bt, m):
    """Machine code of a trace at m: the running thread's innermost VM
    entry runs it.  No unwind info describes a trace's machine code, so an
    unwinder's frames beyond it are not to be trusted: the warning says so."""
    if m.name or (bt.trace_no is None and not bt.vm.jit_base):
        return None
    try:
        found = trace_of_pc(bt.vm, [m.pc])
        L = bt.running
        th = bt.thread(L) if L else None
    except (FaultError, CorruptError):
        return None
    if found is None or th is None:
        return None
    sp = th.cframe & CFRAME_RAWMASK
    entry = bt.entry(L, sp)
    if entry is None:
        return None
    note = ("in the machine code of trace %d, which has no unwind info: the machine frames "
            "after this one are not to be trusted (lbt shows the whole Lua stack)" % found[0])
    entry.warning = "%s; %s" % (note, entry.warning) if entry.warning else note
    return entry
