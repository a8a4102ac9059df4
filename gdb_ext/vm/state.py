"""Finding and checking the Lua VM: global_State, the main thread and the
lua_State a command should work on.

A VM bundles the target, the layout and the global_State address; every
decoder takes one.  Candidates for the state come from the backend (for gdb:
lua_State/global_State pointers visible in the stack frames, and the
dispatch register of a frame inside the VM); each is checked here before use:
L->glref must point to a G whose main thread points back to G.
"""
from typing import Any, Callable, Iterable, List, Optional, TYPE_CHECKING, Tuple
from .. import consts as C
from ..errors import CorruptError, FaultError, NotLuaJITError
from .check import Caches, check_global, check_thread
from .objects import Thread

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout
    from ..target import MachineFrame, Target


class VM(Caches):
    def __init__(self, target: 'Target', layout: 'Layout', G: int, L: Optional[int] = None,
                 L_source: Optional[str] = None, mframes: Optional[List['MachineFrame']] = None,
                 caches: Optional[Caches] = None) -> None:
        """mframes: the selected OS thread's machine frames when the caller
        has them already; caches: the caches of another VM object of the
        same stopped process to share (lprofile's samples)."""
        self._caches = caches if caches is not None else {}
        if mframes is not None:
            self._mframes = mframes
        self.t = target
        self.lay = layout
        self.G = G
        self.L = L                  # the lua_State commands work on
        self.L_source = L_source    # how L was chosen, for linfo
        self.frame_L = None         # a lua_State seen in the C frames, if any

    # --- global_State fields ---------------------------------------------
    def gref(self, addr: int, what: Optional[str] = None) -> int:
        """Read a GCRef or MRef (their size depends on GC64)."""
        return self.t.uint(addr, self.lay.ref_size, what)

    def mref(self, addr: int, what: Optional[str] = None) -> int:
        return self.t.uint(addr, self.lay.mref_size, what)

    @property
    def main_L(self) -> int:
        return self.gref(self.G + self.lay.G.mainthref, "g->mainthref")

    @property
    def cur_L(self) -> Optional[int]:
        """g->cur_L (2.1); None on 2.0, which has only jit_L."""
        if not self.lay.has_cur_L:
            return None
        return self.gref(self.G + self.lay.G.cur_L, "g->cur_L")

    @property
    def machine_frames(self) -> List['MachineFrame']:
        """The selected OS thread's machine frames (Target.machine_frames),
        read once per VM object; [] when they cannot be read."""
        mf = self.__dict__.get("_mframes")
        if mf is None:
            try:
                mf = self.t.machine_frames()
            except (FaultError, CorruptError):
                mf = []
            self._mframes = mf
        return mf

    @property
    def GG(self) -> int:
        return self.G - self.lay.GG.g

    @property
    def vmstate(self) -> int:
        return self.t.i32(self.G + self.lay.G.vmstate, "g->vmstate")

    def vmstate_name(self, v: Optional[int] = None) -> Tuple[str, Optional[int]]:
        """(state name, trace number or None).  In a trace the state is
        the trace's number, except on arm64, whose traces store 0 (R
        vm_arm64.dasc BC_JLOOP: "Traces on ARM64 don't store the trace #");
        0 is no trace number (they start at 1), so the trace is then the
        one whose machine code holds a pc of the selected thread's frames,
        and None when none does (TRACE_UNKNOWN says why)."""
        v = self.vmstate if v is None else v
        if v > 0:
            return "TRACE", v
        if v == 0:
            return "TRACE", self.trace_from_pc()
        name = self.lay.vmstate_names.get(~v)
        return (name[len("LJ_VMST_"):] if name else "unknown(%d)" % v), None

    def trace_from_pc(self) -> Optional[int]:
        """The number of the trace whose code holds a machine pc of the
        selected thread's frames, or None (cached)."""
        if "_trace_from_pc" not in self.__dict__:
            from .snapshots import trace_of_pc
            try:
                found = trace_of_pc(self, [m.pc for m in self.machine_frames])
            except (FaultError, CorruptError):
                found = None
            self._trace_from_pc = found[0] if found else None
        return self._trace_from_pc

    @property
    def gc_total(self) -> int:
        return self.t.uint(self.G + self.lay.G.gc_total, self.lay.gcstate_size, "g->gc.total")

    @property
    def size_bound(self) -> int:
        """No object is larger than g->gc.total, which counts every byte the
        collector owns: the bound for any size or length read from memory
        (cached for the command; 2^40 when gc.total cannot be read)."""
        b = self.__dict__.get("_size_bound")
        if b is None:
            w = self.t.watched
            try:
                # (A sampler's memo, copymemo, does not count gc.total among
                # what a decode read: it moves at every allocation, and only
                # a corrupt size comes near it.)
                b = self.gc_total if w is None else \
                    w.unnoted(self.G + self.lay.G.gc_total, self.lay.gcstate_size)
            except FaultError:
                b = 1 << 40
            self._size_bound = b
        return b

    @property
    def gc_threshold(self) -> int:
        return self.t.uint(self.G + self.lay.G.gc_threshold, self.lay.gcstate_size,
                           "g->gc.threshold")

    @property
    def gc_state(self) -> Tuple[int, str]:
        v = self.t.u8(self.G + self.lay.G.gc_state, "g->gc.state")
        return v, self.lay.gc_state_names.get(v, "state %d" % v)

    @property
    def registry(self) -> int:
        """The registry TValue's raw bits (g->registrytv)."""
        return self.t.u64(self.G + self.lay.G.registrytv, "g->registrytv")

    def thread(self, L: Optional[int] = None) -> Thread:
        return Thread(self, self.L if L is None else L)

    @property
    def running_L(self) -> Optional[int]:
        """The thread the VM is executing: g->cur_L (2.1).  2.0 has none:
        there g->jit_L in a trace, else the thread with the innermost C
        frame (every thread that runs or resumed another has a cframe on
        the one C stack, which grows down), else the lua_State seen in the
        C frames, else the main thread."""
        cur = None
        try:
            cur = self.cur_L
        except FaultError:
            cur = None
        if self.idle:
            return None
        if cur:
            lag = self.__dict__.get("_lagging")
            if lag is None:
                # g->cur_L lags behind a coroutine switch for a few
                # instructions (gdb_ext.vm.cframe.interpreter_thread).
                from .cframe import interpreter_thread
                try:
                    lag = interpreter_thread(self, cur) or 0
                except (FaultError, CorruptError):
                    lag = 0
                self._lagging = lag
            return lag or cur
        return self._running_20() or self.frame_L or self.main_L

    @property
    def idle(self) -> bool:
        """True when no Lua code runs at all: in the C state, g->cur_L (the
        thread that ran last) has no C frame (2.1), or no thread has one
        (2.0), so the VM was left for C (an idle server worker in its
        event loop, a host between calls)."""
        v = self.__dict__.get("_idle")
        if v is None:
            v = False
            try:
                if self.vmstate_name()[0] == "C":
                    if self.lay.has_cur_L:
                        cur = self.cur_L
                        v = bool(cur) and Thread(self, cur).cframe & ~3 == 0
                    else:
                        # 2.0: no thread has a C frame.
                        v = self._running_20() is None
            except (FaultError, CorruptError):
                v = False
            self._idle = v
        return v

    def _running_20(self):
        r = self.__dict__.get("_r20", False)
        if r is False:
            r = self._r20 = self._innermost_cframe_thread()
        return r

    def _innermost_cframe_thread(self):
        if self.lay.has_jit_L:
            try:
                jl = self.gref(self.G + self.lay.G.jit_L, "g->jit_L")
                if jl:
                    return jl
            except FaultError:
                pass
        copied = self.__dict__.get("copied_threads")
        if copied is not None:
            return self._copied_running(copied)
        from .walkers import threads_walk
        threads, _ = threads_walk(self)
        return self._innermost_of(threads)

    def _innermost_of(self, threads):
        """Of threads, the one with the innermost C frame (the lowest: the
        C stack grows down), or None when none has one."""
        best = None
        for L in threads:
            try:
                cf = Thread(self, L).cframe & ~3
            except (FaultError, CorruptError):
                continue
            if cf and (best is None or cf < best[0]):
                best = (cf, L)
        return best[1] if best is not None else None

    def _copied_running(self, copied):
        """2.0's running thread from a copy made without a stop (record's
        BPF sampler; copied: the lua_States it holds, set by the
        recorder): the other threads, read from the process as it is now,
        would tell another moment's innermost C frame.  The thread whose
        C frame the innermost interpreter or fast-function machine frame
        runs on (SAVE_L there, its L->cframe that frame), else, without
        such a frame, the copied thread with the innermost C frame.
        CorruptError when that thread is not in the copy."""
        from .cframe import CFRAME_RAWMASK, cframe_thread
        for m in self.machine_frames or ():
            if not m.name or not m.name.startswith(("lj_BC_", "lj_ff_", "lj_fff_")):
                continue
            sp, L = cframe_thread(self, m)
            if sp is None:
                break
            if L not in copied or Thread(self, L).cframe & CFRAME_RAWMASK != sp:
                raise CorruptError("the thread running on the C frame at 0x%x is not in the "
                                   "copy" % sp)
            return L
        return self._innermost_of(copied)

    @property
    def jit_base(self) -> int:
        """g->jit_base: the Lua BASE while JIT-compiled code runs (or C code
        called from it), else 0.  2.1 clears it when a trace exits (R
        vm_x64.dasc vm_exit_handler); 2.0 leaves it and clears g->jit_L
        instead (20 vm_x86.dasc vm_exit_handler), so there it counts only
        while jit_L is set."""
        if not self.lay.has_jit_base:
            return 0
        if not self.lay.has_cur_L and self.lay.has_jit_L:
            if not self.gref(self.G + self.lay.G.jit_L, "g->jit_L"):
                return 0
        return self.mref(self.G + self.lay.G.jit_base, "g->jit_base")


# Registers that hold a VM pointer while the VM's own code runs (and in its
# frames, being callee-saved): x64 DISPATCH is r14 (= GG +
# offsetof(GG_State, dispatch)), arm64 GL is x22 (= G itself); R
# vm_x64.dasc / vm_arm64.dasc register definitions.
STATE_REGISTERS = {"x86_64": (("r14", "dispatch"),), "aarch64": (("x22", "g"),)}


# The collector's functions that are handed a thread other than the
# running one: the traversal of a thread and the stack shrink it calls (R
# lj_gc.c gc_traverse_thread, lj_state.c lj_state_shrinkstack), and the
# freeing of a dead thread by the sweep (lj_state.c lj_state_free).  A
# lua_State * in their frames, or in a frame they called, is that thread.
HANDED_THREADS = ("gc_traverse_thread", "lj_state_shrinkstack", "lj_state_free")


class Where(str):
    """Where a candidate state pointer was found, as text; one from a stack
    frame also carries the frame's number and function name."""
    level = None            # type: Optional[int]
    fname = None            # type: Optional[str]


def frame_where(num: int, fname: Optional[str], what: str) -> Where:
    """The Where of a candidate read from `what` (a variable, a register) in
    frame number num, of function fname (None: no name)."""
    w = Where("frame #%d %s: %s" % (num, fname or "??", what))
    w.level, w.fname = num, fname
    return w


def running_candidates(candidates: Iterable[Tuple[str, int, str]]) -> List[Tuple[str, int, str]]:
    """The candidates without the lua_State pointers of frames at or inside
    the outermost frame of HANDED_THREADS: the collector's frames name the
    thread it traverses or frees there, not the one that runs."""
    cands = list(candidates)
    edge = [getattr(w, "level", None) for _, _, w in cands
            if getattr(w, "fname", None) in HANDED_THREADS]
    edge = [n for n in edge if n is not None]
    if not edge:
        return cands
    top = max(edge)
    return [c for c in cands
            if not (c[0] == "L" and getattr(c[2], "level", None) is not None and c[2].level <= top)]


def register_candidates(lay: 'Layout', regs: Any, read: Callable[[str], Optional[int]], num: int,
                        fname: Optional[str]) -> List[Tuple[str, int, str]]:
    """Candidates ('G', address, where) from the registers of a VM frame:
    regs is STATE_REGISTERS' entry, read(name) a register's value or None,
    num and fname the frame's number and name (for `where`)."""
    out = []
    for reg, base in regs:
        v = read(reg)
        if v is None:
            continue
        G = v - lay.GG.dispatch + lay.GG.g if base == "dispatch" else v
        if G < 0x10000:
            continue            # not a pointer (at starti the register is 0)
        out.append(("G", G, frame_where(num, fname, "register " + reg)))
    return out


def make_vm(target: 'Target', lay: 'Layout', explicit_L: Optional[int] = None,
            candidates: Iterable[Tuple[str, int, str]] = (), explicit_G: Optional[int] = None,
            search: bool = True) -> 'VM':
    """Choose the state.  explicit_L (from L=<expr>) wins, then explicit_G
    (G=<expr>); otherwise the first valid candidate (kind 'L' or 'G',
    address, where) in order; with a G only, the current thread is
    g->cur_L, else the main thread.  With no valid candidate, the process's
    memory is searched (gdb_ext.vm.vmfind) when search is true: one VM found
    is used, several are an error that names them."""
    if explicit_L is not None:
        G = check_thread(target, lay, explicit_L)
        if explicit_G is not None and explicit_G != G:
            raise NotLuaJITError("L=0x%x belongs to the global_State 0x%x, not to G=0x%x"
                                 % (explicit_L, G, explicit_G))
        return VM(target, lay, G, explicit_L, "L= argument")
    if explicit_G is not None:
        candidates = [("G", explicit_G, "G= argument")]
    problems = []
    for kind, addr, where in running_candidates(candidates):
        try:
            if kind == "L":
                G = check_thread(target, lay, addr)
                vm = VM(target, lay, G, addr, where)
                vm.frame_L = addr
                return vm
            G = check_global(target, lay, addr)
        except (NotLuaJITError, FaultError) as e:
            problems.append("%s: %s" % (where, e))
            continue
        vm = VM(target, lay, G)
        cur = None
        try:
            cur = vm.cur_L
            if cur:
                check_thread(target, lay, cur)
        except (NotLuaJITError, FaultError):
            cur = None
        if vm.idle:
            vm.L, vm.L_source = vm.main_L, ("main thread (the VM is idle: no Lua code runs, no "
                                            "thread has a C frame; from %s)" % where)
        elif cur:
            vm.L, vm.L_source = cur, "g->cur_L (from %s)" % where
            run = vm.running_L
            if run != cur:
                vm.L, vm.L_source = run, ("the interpreter's C frame (g->cur_L is set back "
                                          "after a coroutine switch; from %s)" % where)
        elif not vm.lay.has_cur_L:
            # 2.0: the running thread as running_L finds it.
            try:
                run = vm.running_L
                check_thread(target, lay, run)
            except (NotLuaJITError, FaultError, CorruptError):
                run = vm.main_L
            vm.L, vm.L_source = run, ("running thread (the innermost C frame; from %s)" % where
                                      if run != vm.main_L else "main thread (from %s)" % where)
        else:
            vm.L, vm.L_source = vm.main_L, "main thread (from %s)" % where
        return vm
    if explicit_G is not None:
        raise NotLuaJITError(problems[0].split(": ", 1)[1] if problems else
                             "G=0x%x is not a global_State" % explicit_G)
    searched = None
    if search:
        from .vmfind import search_states
        try:
            found = search_states(target, lay)
        except NotLuaJITError as e:
            found, searched = [], str(e)
        if len(found) == 1:
            f = found[0]
            return make_vm(target, lay, candidates=[
                ("G", f.G, "memory search: no stack frame names a Lua state; global_State "
                           "found in %s" % (f.region[0] or "memory at 0x%x" % f.region[1]))],
                search=False)
        if found:
            raise NotLuaJITError(
                "no stack frame names a Lua state, and the process holds %d LuaJIT states "
                "(global_State %s): choose one with G=<address> (lstates lists them)"
                % (len(found), ", ".join("0x%x" % f.G for f in found)))
    msg = "no Lua state found: no lua_State or global_State pointer in the stack frames"
    if search:
        msg += (" and %s" % searched if searched else
                " and no global_State in the process's writable memory")
    msg += "; select a frame that has one or pass L=<lua_State *> or G=<global_State *>"
    if problems:
        msg += " (rejected %d: %s)" % (len(problems), problems[0])
    raise NotLuaJITError(msg)


# What the VM state says when g->vmstate is 0 (arm64 in a trace) and no
# machine pc lies in a trace's code.
TRACE_UNKNOWN = ("running JIT-compiled code; which trace is not known: g->vmstate is 0 "
                 "(arm64 traces do not store their number) and no pc of this thread's "
                 "machine frames lies in a trace")

THREAD_STATUS = C.THREAD_STATUS
