"""Where the running Lua thread stands: its true innermost frame at any
instruction, or what cannot be known there and why.

L->base is exact only where the VM stored it: around calls of C functions
and of the C helpers that can throw or collect garbage.  Elsewhere the
interpreter keeps the live frame in registers (R vm_x64.dasc:21-32: BASE
rdx, PC rbx, DISPATCH r14; R vm_arm64.dasc:31-46: BASE x19, PC x21, GL x22),
and JIT-compiled code keeps the trace's BASE in g->jit_base with the
frames and values in its snapshots.  This module reads the machine frames
of the OS thread (Target.machine_frames: registers as the unwinder
recovers them) and the VM state, and returns a Start: the BASE to walk
from, the pc of the innermost frame where registers or a snapshot give it,
and a warning line when part of the stack cannot be known.

Every answer is checked before it is used: BASE must lie in the thread's
stack and hold a frame whose function contains PC, DISPATCH must belong
to this VM.  Where two readings of a moment are possible (a call or a
return of a function to itself is half done) the frames both readings
share are shown and the warning says so.
"""
from typing import Any, List, Optional, TYPE_CHECKING
import struct

from ..consts import GCT_TRACE, VM_CODE_PREFIXES
from ..errors import CorruptError, FaultError
from ..vm.cframe import ARCH_REGS, cframe_thread
from .frames import FrameWalker
from ..vm.protoinfo import cached_proto
from ..vm.snapshots import trace_snapshot
from ..vm.objects import Func, GCT_KIND, Thread

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..target import MachineFrame
    from ..vm.state import VM


# C helpers that the interpreter calls only after `mov L:RB->base, BASE`,
# found by reading every `call extern` of vm_x64.dasc and vm_x86.dasc in
# upstream 2.1 and 2.0, Debian's snapshot and OpenResty's fork (2.0 names
# lj_str_fromnum*, OpenResty adds lj_log_trace_*).  The others (lj_tab_len,
# lj_tab_get, lj_tab_getinth, lj_tab_next, lj_gc_barrieruv, libm's
# functions, lj_ffh_coroutine_wrap_err, lj_ccallback_enter) are called
# with L->base stale.  Fast-function fallbacks (lj_ffh_*) are called by
# fff_fallback after it stores L->base.
BASE_STORED_HELPERS = ("lj_meta_", "lj_buf_", "lj_dispatch_", "lj_log_trace_", "lj_tab_new",
                       "lj_tab_dup", "lj_tab_newkey", "lj_tab_reasize", "lj_tab_setinth",
                       "lj_str_new", "lj_str_fromnum", "lj_strfmt_num", "lj_gc_step",
                       "lj_trace_hot", "lj_trace_exit", "lj_func_closeuv", "lj_func_newL_gc",
                       "lj_state_growstack", "lj_ccallback_leave", "lj_ffh_")
BASE_STALE_HELPERS = ("lj_ffh_coroutine_wrap_err",)

# VM code that returns from a frame (PC is loaded from the frame's link
# before BASE moves down), and VM code that may be half-way into a call
# (BASE moves up to the callee before PC is loaded from it).
RETURNS = ("lj_BC_RET", "lj_vm_return", "lj_vm_leave", "lj_fff_res", "lj_vm_unwind_ff")
FASTFUNCS = ("lj_ff_", "lj_fff_")
CALLS = ("lj_BC_CALL", "lj_BC_ITERC", "lj_BC_ITERN", "lj_vm_call", "lj_vmeta_call", "lj_cont_",
         "lj_vm_resume", "lj_vm_pcall", "lj_vm_cpcall", "lj_ff_")

# BC_CALL's move of BASE to the callee (R vm_x64.dasc BC_CALL: lea BASE,
# [BASE+RA*8+16]; vm_x86.dasc in x64 mode: lea BASE, [BASE+RA*8+8]), as
# machine code: lea rdx, [rdx+rcx*8+16] / lea edx, [rdx+rcx*8+8].
CALL_LEA_GC64 = bytes.fromhex("488d54ca10")
CALL_LEA_X64 = bytes.fromhex("8d54ca08")
# arm64 (R vm_arm64.dasc): where BASE (x19) runs through slots that hold
# no frame, and which register keeps the frame meanwhile; per handler: the
# instruction that opens the window, the one that closes it (its pattern
# and mask), the register and what to add to it for a frame's BASE.
#   BC_CALL (ins_call): `mov RB, BASE` (x17), add BASE, BASE, RA; ldr
#     CARG3, [BASE], #16; ...; until `ldr PC, LFUNC:CARG3->pc` (ldr x21,
#     [xN, #imm]): x17 is the caller's BASE, PC the caller's.
#   BC_RET: `sub RB, BASE, #16` (x2, the returning frame's function slot);
#     the loop that copies the results advances BASE; until `mov BASE, RA`
#     (mov x19, x3): x2 + 16 is the returning frame's BASE, PC its link.
A64_WINDOWS = {
    "lj_BC_CALL": (0xaa1303f1, 0xf9400015, 0xffc0001f, "x17", 0, "RB, the caller's BASE"),
    "lj_BC_RET": (0xd1004262, 0xaa0303f3, 0xffffffff, "x2", 16,
                  "RB, the returning frame's function slot"),
}

# The VM's entries from C (R vm_x64.dasc vm_resume, vm_pcall, vm_call,
# vm_cpcall) and the landing pads of the error unwinder (vm_unwind_ff_eh,
# vm_unwind_c_eh: mov BASE, L:RB->base after lj_err_unwind set it), which
# set up BASE and DISPATCH from L->base, and its exits to C (vm_leave_cp,
# vm_leave_unw: restoreregs), which tear them down: in all of them the
# stack is as L->base says.
VM_EDGES = ("lj_vm_resume", "lj_vm_pcall", "lj_vm_call", "lj_vm_cpcall", "lj_vm_leave",
            "lj_vm_unwind")

# The error unwinder's landing pad for a pcall/xpcall that caught the
# error (R vm_x64.dasc vm_unwind_ff_eh): it writes false and the message
# over the pcall's frame while the VM state is still C (set_vmstate INTERP
# comes last).
LANDING_PADS = ("lj_vm_unwind_ff",)

# The VM's entry that runs a C function in a protected frame, from C.
CPCALL = "lj_vm_cpcall"

# Functions during which the stack is being moved.
STACK_MOVERS = ("lj_state_growstack", "lj_state_shrinkstack", "resize_stack")


# Where a trace hands its frame back to the interpreter (in_trace).
EXIT_INTERP = "lj_vm_exit_interp"


class Start(object):
    """Where the walk of the running thread starts.
    base:    BASE of the innermost frame to show (None: L->base)
    pc:      bytecode pc of that frame (the next instruction, as the VM
             saves it), or None when the frame chain gives it
    trace:   the frames.Snapshot when the pc comes from a trace's
             snapshot, else None
    how:     how the start was found, for linfo and lbt
    warning: what could not be known and why, or None
    show:    which frames of the walk are certain: 'all'; 'top' (only the
             innermost: its function and line are known, its depth not);
             'outer' (all but the innermost, whose line is not known);
             'none'"""

    def __init__(self, base: Optional[int] = None, pc: Optional[int] = None, how: str = "L->base",
                 warning: Optional[str] = None, trace: Any = None, show: str = "all") -> None:
        self.base = base
        self.pc = pc
        self.how = how
        self.warning = warning
        self.trace = trace
        self.show = show

    def __repr__(self) -> str:
        return "Start(base=%s, pc=%s, how=%r, warning=%r)" % (
            None if self.base is None else hex(self.base),
            None if self.pc is None else hex(self.pc), self.how, self.warning)


def is_vm_code(mf: 'MachineFrame') -> bool:
    return bool(mf.name) and not mf.has_debug and mf.name.startswith(VM_CODE_PREFIXES)


def locate(vm: 'VM', th: 'Thread', mframes: List['MachineFrame']) -> Start:
    """The Start of running thread th (a Thread) from the machine frames of
    the OS thread that runs it (innermost first, possibly empty)."""
    return _Locator(vm, th, mframes).run()


class _Locator(object):
    def __init__(self, vm, th, mframes):
        self.vm = vm
        self.th = th
        self.mf = list(mframes)
        self.arch = getattr(vm.t, "arch", "x86_64")
        self.regs = ARCH_REGS.get(self.arch)
        self.walker = FrameWalker(vm, th)
        self.state, self.trace_no = vm.vmstate_name()
        self.regs_base = None       # BASE's register, once read

    # --- helpers --------------------------------------------------------
    def in_function(self, prefixes):
        for m in self.mf:
            if m.name and m.name.startswith(prefixes):
                return m.name
        return None

    def first_vm_frame(self):
        """The innermost frame of the interpreter: VM code, but not
        lj_vm_cpcall when C code runs in it (lj_trace_ins runs the trace
        recorder so, lj_gc and the parser other C code): that is C called
        from C, and the interpreter's frame is further out."""
        for m in self.mf:
            if is_vm_code(m) and not (m.level > 0 and m.name.startswith(CPCALL)):
                return m
        return None

    def lua_fn_at(self, base):
        """The Func in the function slot of the frame with BASE base, or
        None when that slot is outside the stack or holds no function."""
        w = self.walker
        if not w.stack.contains(base - 8) or base - 8 < w.stack.start + 8 * w.fr2:
            return None
        try:
            fn = w.frame_gc(base - 8)
            if not fn:
                return None
            if GCT_KIND.get(self.vm.t.u8(fn + self.vm.lay.str.gct, "frame function")) != "func":
                return None
            f = Func(self.vm, fn)
        except (FaultError, CorruptError):
            return None
        return f

    def pc_in(self, f, pc):
        """True if bytecode pc (next-instruction pc) lies in Lua function f."""
        if f is None or not f.is_lua or pc is None:
            return False
        pt = self.proto_of(f)
        if pt is None:
            return False
        # pc == bc: the function's header is being entered (its frame is
        # complete, its first instruction not yet decoded).
        return pt.bc <= pc <= pt.bc + 4 * pt.sizebc

    def cframe_is_ours(self, m):
        """The VM frame m's C frame (the stack pointer there: the VM runs
        on its C frame) holds, as SAVE_L, a thread of this VM."""
        try:
            L = cframe_thread(self.vm, m)[1]
            return bool(L) and (L == self.th.addr or Thread(self.vm, L).glref == self.vm.G)
        except (FaultError, CorruptError):
            return False

    def dispatch_ok(self, m):
        """The VM frame's DISPATCH (x64) or GL (arm64) register belongs to
        this VM (None when it cannot be read)."""
        lay = self.vm.lay
        if "dispatch" in self.regs:
            d = m.reg(self.regs["dispatch"])
            return None if d is None else d == self.vm.GG + lay.GG.dispatch
        g = m.reg(self.regs["gl"])
        return None if g is None else g == self.vm.G

    # --- the cases ----------------------------------------------------
    def run(self):
        jb = self.vm.jit_base
        if self.trace_no is not None or (jb and self.state in ("GC", "C")):
            s = self.in_trace(jb)
            if s is not None:
                return s
        if self.state == "EXIT":
            return self.leaving_to_interpreter() or self.in_exit()
        if self.regs is None or not self.mf:
            return self.stored("the machine registers of the VM are not available here"
                               if self.state == "INTERP" else None)
        if self.state == "INTERP" or (self.state == "C" and is_vm_code(self.mf[0]) and
                                      self.mf[0].name.startswith(LANDING_PADS)):
            return self.in_interpreter()
        return self.stored(None)

    def stored(self, why):
        """Start from L->base: exact in the C, GC, RECORD, OPT and ASM states,
        where the VM stored it before calling out."""
        s = Start(None, None, "L->base (stored by the VM before it called C)")
        if why:
            s.warning = ("the innermost frames are not known: %s, and L->base is stored only "
                         "around calls" % why)
            s.how = "L->base"
            s.show = "none"
        mover = self.in_function(STACK_MOVERS)
        if mover and not s.warning:
            b = self.th.base
            if not (self.th.stack <= b < self.th.stack + 8 * self.th.stacksize):
                s.warning = ("the stack is being moved (%s): L->base 0x%x is outside "
                             "L->stack" % (mover, b))
        return s

    def in_interpreter(self):
        vmf = self.first_vm_frame()
        if vmf is None:
            return self.stored("the selected OS thread is not inside the VM's code (%s)"
                               % (self.mf[0].name or "0x%x" % self.mf[0].pc))
        if self.dispatch_ok(vmf) is False:
            if vmf.level == 0 and vmf.name.startswith(VM_EDGES) and self.link_sound(self.th.base):
                # The entry has not set DISPATCH up yet, or the exit has
                # restored the C caller's register.
                return Start(None, None, "L->base (%s is between the VM and C)" % vmf.name)
            if not (vmf.level > 0 and self.cframe_is_ours(vmf)):
                return self.stored("the VM code on this OS thread runs another VM (its %s does "
                                   "not belong to this global_State)"
                                   % self.regs.get("dispatch", self.regs.get("gl")))
            # An outer VM frame whose register the unwinder did not recover
            # through the C code called below it; its C frame says it runs
            # this VM, and every reading below is checked on its own.
        pc = vmf.reg(self.regs["pc"])
        if vmf.level == 0 or self.regs["base_saved"]:
            base = vmf.reg(self.regs["base"])
            return self.from_registers(vmf, base, pc)
        # A C helper called by the interpreter: L->base holds BASE when the
        # helper is one the VM stores it for.
        callee = self.mf[vmf.level - 1].name or ""
        f = self.lua_fn_at(self.th.base)
        if callee.startswith(BASE_STORED_HELPERS) and not callee.startswith(BASE_STALE_HELPERS):
            if f is None or (not f.is_lua and not self.link_sound(self.th.base)):
                # A fast function's C fallback writes its results over its
                # own frame (lib_string.c string_byte: setintV(L->base-1-FR2
                # + i)): the frame it returns into is the one PC names.
                c = self.caller_of_return_pc(self.th.base, pc)
                if c is not None:
                    return Start(c, pc, "PC (%s) of %s: %s is returning its results"
                                 % (self.regs["pc"], vmf.name, callee))
            if f is not None and f.is_lua and not self.pc_in(f, pc):
                # Called from a fast function or metamethod set-up: the
                # frame at L->base has its own pc in the cframe.
                pc = None
            return Start(None, pc, "L->base (stored by %s before it called %s)"
                         % (vmf.name, callee))
        s = self.saved_base(vmf, pc, callee)
        if s is not None:
            return s
        if self.pc_in(f, pc):
            return Start(None, pc, "L->base and PC (%s)" % self.regs["pc"],
                         "frames below the innermost are not certain: the VM is in %s, called "
                         "from %s without storing L->base, so BASE (%s) is not known"
                         % (callee, vmf.name, self.regs["base"]), show="top")
        return Start(None, None, "L->base", "the innermost frames are not known: the VM is in %s, "
                     "called from %s without storing L->base, and BASE (%s) is lost in the call"
                     % (callee, vmf.name, self.regs["base"]), show="none")

    def after_c_call(self, vmf, pc, fresh=False):
        """BASE's register is not BASE: right after a C call returned,
        before BASE is fetched again from L->base, which the VM stored
        before the call (or the VM uses BASE's register for an argument
        after storing L->base).  fresh: the machine code shows L->base is
        this frame's BASE (base_dead).  The Start from L->base, or None."""
        where = vmf.name
        b = self.th.base
        bf = self.lua_fn_at(b)
        if self.pc_in(bf, pc) and (fresh or self.stored_at_entry(vmf) or
                                   not self.same_function_below(b)):
            return Start(None, pc, "L->base and PC (%s) in %s: BASE (%s) is not loaded yet "
                         "after a C call" % (self.regs["pc"], where, self.regs["base"]))
        if bf is not None and not bf.is_lua and self.link_sound(b) and (
                fresh or (self.link_is(b, pc) and where.startswith(FASTFUNCS))
                or where.startswith(("lj_fff_", "lj_BC_FUNCC"))):
            # A fast function after its C call (R vm_x64.dasc ff_tostring:
            # lj_strfmt_number, then mov BASE, L:RB->base; 20 vm_x86.dasc
            # fff_newstr: lj_str_new), or BC_FUNCC after the C function
            # returned: both stored L->base just before the call.
            return Start(None, None, "L->base in %s: BASE (%s) is not loaded yet after a C "
                         "call" % (where, self.regs["base"]))
        if not fresh and where.startswith(FASTFUNCS):
            # Its C fallback wrote the results over the frame at L->base
            # (R vm_x64.dasc fff_fallback: PC holds the link).
            c = self.caller_of_return_pc(b, pc)
            if c is not None:
                return Start(c, pc, "PC (%s) in %s: the fast function is returning its "
                             "results" % (self.regs["pc"], where))
        return None

    def code_fact(self, kind, name, size, find):
        """find(start, first `size` bytes of VM symbol `name`'s code) -> an
        address or None, computed once per VM object; None when the symbol
        or its code cannot be read."""
        cache = self.vm.cache("code_facts")
        key = (kind, name)
        if key not in cache:
            start = self.vm.t.symbol(name)
            try:
                code = self.vm.t.read(start, size, "code of " + name) if start else None
            except FaultError:
                code = None
            cache[key] = find(start, code) if code else None
        return cache[key]

    def stored_at_entry(self, vmf):
        """The VM code vmf runs in stores L->base first thing (R vm_x64.dasc
        BC_TNEW, BC_CAT: mov L:RB, SAVE_L; mov L:RB->base, BASE; within its
        first 40 bytes: vmeta_arith_vv computes the operands' addresses
        before) and vmf.pc is past that store, so L->base is the BASE of
        this run of it (code is entered at its symbol; a global label
        inside has its own)."""
        cfo = self.walker.cfo
        off = self.vm.lay.L.base
        if self.arch != "x86_64" or not cfo or off >= 128:
            return False
        rex = b"\x48" if self.walker.fr2 else b""

        def find(start, code):
            for r in range(8):
                # mov r, [rsp+SAVE_L]; mov [r+base], BASE
                i = code.find(rex + bytes([0x8b, 0x44 | (r << 3), 0x24, cfo["L"]]))
                j = code.find(rex + bytes([0x89, 0x50 | r, off]), i + 1) if i >= 0 else -1
                if j >= 0:
                    return start + j + len(rex) + 3
            return None
        end = self.code_fact("stores L->base", vmf.name, 40, find)
        return end is not None and vmf.pc >= end

    def base_dead(self, vmf):
        """Whether BASE's register holds garbage at VM instruction vmf.pc
        because a C call has just returned (x64: rdx is not callee-saved)
        and BASE is not loaded again yet.  Read from the machine code: the
        instruction at the pc loads BASE again (mov BASE, L:RB->base, or mov
        BASE, RB), or the one before it is a call of a C function.  Returns
        'reload' at mov BASE, L:RB->base; 'stored' after a call of a helper
        the VM stores L->base for; 'rb' when RB holds BASE; or None."""
        if self.arch != "x86_64":
            return None
        cache = self.vm.cache("base_dead")
        if vmf.pc in cache:
            return cache[vmf.pc]
        ans = None
        t = self.vm.t
        rex = b"\x48" if self.walker.fr2 else b""
        off = self.vm.lay.L.base
        try:
            code = t.read(vmf.pc, 4, "VM code")
            before = t.read(vmf.pc - 5, 5, "VM code")
        except FaultError:
            code = before = b""
        if off < 128 and code.startswith(rex + b"\x8b\x55" + bytes([off])):
            ans = "reload"                          # mov BASE, L:RB->base
        elif code.startswith((rex + b"\x89\xea", rex + b"\x8b\xd5")):
            ans = "rb"                              # mov BASE, RB
        elif before[:1] == b"\xe8":
            callee = t.symbolize((vmf.pc + int.from_bytes(before[1:], "little", signed=True))
                                 & 0xFFFFFFFFFFFFFFFF) or ""
            if callee and not callee.startswith(VM_CODE_PREFIXES) and "+" not in callee:
                ans = "stored" if callee.startswith(BASE_STORED_HELPERS) and \
                    not callee.startswith(BASE_STALE_HELPERS) else "rb"
        cache[vmf.pc] = ans
        return ans

    def from_dead_base(self, vmf, pc, dead):
        """The Start where BASE's register is garbage after a C call
        (base_dead), or None."""
        if dead == "rb":
            return self.saved_base(vmf, pc, "a C function")
        if dead == "reload" and vmf.reg(self.regs["rb"]) != self.th.addr:
            return None                 # L:RB is another thread: not this one's BASE
        return self.after_c_call(vmf, pc, fresh=True)

    def from_registers(self, vmf, base, pc):
        """The interpreter at an instruction of its own code: BASE and PC
        are in registers.  Checked: BASE holds a frame of this thread, and
        PC lies in the function of that frame."""
        where = vmf.name
        self.regs_base = base
        dead = self.base_dead(vmf)
        if dead is None and self.stored_at_entry(vmf):
            dead = "stored"     # BASE's register may be an argument by now
        if dead is not None:
            s = self.from_dead_base(vmf, pc, dead)
            if s is not None:
                return s
        if base is None or not self.walker.stack.contains(base - 8):
            s = self.after_c_call(vmf, pc)
            if s is not None:
                return s
            return self.unknown("BASE (%s = %s) is not in this thread's stack"
                                % (self.regs["base"], "?" if base is None else "0x%x" % base),
                                where)
        how = "registers %s (BASE) and %s (PC) in %s" % (self.regs["base"], self.regs["pc"], where)
        s = self.a64_call_start(vmf, pc)
        if s is not None:
            return s
        # PC equal to the frame's own return link: a return has loaded it
        # (the frame below runs now) or a call has stored it (the frame
        # above has not started).
        caller = self.caller_of_return_pc(base, pc) if self.link_is(base, pc) else None
        if caller is not None and where.startswith(RETURNS):
            return Start(caller, pc, how + ", returning to the frame below")
        f = self.lua_fn_at(base)
        if where.startswith(RETURNS + FASTFUNCS) and not self.pc_in(f, pc) and not (
                f is not None and not f.is_lua and self.link_sound(base)):
            # The results may already cover the returning frame's function
            # and link slots; PC holds the link (R vm_x64.dasc BC_RET: mov PC,
            # [BASE-8] comes first; fast functions load it before they
            # write results, and fff_res* are entered with it loaded).
            c = self.caller_of_return_pc(base, pc)
            if c is not None:
                return Start(c, pc, how + ", returning to the frame below")
        if f is None:
            s = self.after_c_call(vmf, pc) if where.startswith(("lj_BC_FUNCC",) + FASTFUNCS) \
                else None
            if s is not None:
                return s
            return self.unknown("BASE (%s = 0x%x) holds no function" % (self.regs["base"], base),
                                where)
        if not f.is_lua:
            # A fast function or C function frame (its code or a call of
            # it), if its link is stored: then the frame below is sound.
            if self.link_sound(base):
                return Start(base, None, how)
            ra = self.ra_caller(vmf, base, pc, where)
            if ra is not None:
                return ra
            return self.unknown("the frame at BASE (%s) is not linked yet: a call is half done"
                                % self.regs["base"], where)
        moved = self.call_moved_base(vmf)
        if moved is not None and self.pc_in(f, pc):
            # BC_CALL/BC_CALLM: whether BASE is the caller's or the callee's
            # is known from where the handler is.
            if not moved:
                return Start(base, pc, how)
            pt = self.proto_of(f)
            if pt is not None and pc in (pt.bc, pt.bc + 4):
                return Start(base, pc, how + ", entering the function")
            c = caller if caller is not None else self.ra_caller(vmf, base, pc, where)
            if c is not None:
                return Start(c.base if isinstance(c, Start) else c, pc,
                             how + ", calling the frame above")
        if self.pc_in(f, pc):
            if caller is not None and where.startswith(CALLS):
                # A function that calls itself at the same place: BASE may
                # already be the callee's while PC is still the caller's.
                return Start(caller, pc, how, "a frame above this one may be missing: the VM is "
                             "in %s, in a call of a function to itself at the same place, and "
                             "which of the two frames runs is not known here" % where)
            return Start(base, pc, how)
        if caller is not None:
            return Start(caller, pc, how + ", calling the frame above")
        ra = self.ra_caller(vmf, base, pc, where)
        if ra is not None:
            return ra
        return self.unknown("BASE (%s) and PC (%s) do not form a frame yet: a call or a return "
                            "is half done" % (self.regs["base"], self.regs["pc"]), where)

    def saved_base(self, vmf, pc, callee):
        """BASE as the VM saved it in RB (callee-saved) around a call of a C
        helper that does not store L->base (R vm_x64.dasc BC_LEN: mov RB,
        BASE // Save BASE; call extern lj_tab_len; mov BASE, RB; the same
        around lj_tab_get*, lj_tab_next, lj_gc_barrieruv and libm's
        functions in every VM source read), while that call runs or right
        after it returns.  Checked: RB holds a frame whose function holds PC,
        or the frame of the fast function running.  The Start, or None."""
        reg = self.regs.get("rb")
        b = vmf.reg(reg) if reg else None
        if b is None or b & 7 or not self.walker.stack.contains(b - 8):
            return None
        f = self.lua_fn_at(b)
        how = "register %s of %s (BASE, saved across its call of %s)" % (reg, vmf.name, callee)
        if self.pc_in(f, pc):
            return Start(b, pc, how)
        if f is not None and not f.is_lua and vmf.name.startswith("lj_ff_") and \
                self.ff_is(f, vmf.name) and self.link_sound(b):
            return Start(b, None, how)
        return None

    def ra_caller(self, vmf, base, pc, where):
        """In BC_CALL/BC_CALLM after BASE moved to the callee (R vm_x64.dasc
        BC_CALL: lea BASE, [BASE+RA*8+16]) and before the link is stored,
        the caller's BASE is RA+1+FR2 slots below (RA still in its
        register).  Checked: the caller's function holds PC."""
        if not where.startswith("lj_BC_CALL") or "ra" not in self.regs:
            return None
        ra = vmf.reg(self.regs["ra"])
        if ra is None or ra >= 256:
            return None
        c = base - 8 * (ra + 1 + self.walker.fr2)
        if self.pc_in(self.lua_fn_at(c), pc):
            return Start(c, pc, "registers in %s, calling the frame above" % where)
        return None

    def a64_window(self, name):
        """(address of the instruction that opens, of the one that closes)
        the A64_WINDOWS window of arm64 handler `name`, or None."""
        spec = A64_WINDOWS.get(name) if self.arch == "aarch64" else None
        if spec is None:
            return None
        first, last, last_mask = spec[:3]

        def find(start, code):
            words = struct.unpack("<%dI" % (len(code) // 4), code[:len(code) // 4 * 4])
            if first not in words:
                return None
            i = words.index(first)
            j = next((k for k in range(i + 1, len(words)) if words[k] & last_mask == last), None)
            return None if j is None else (start + 4 * i, start + 4 * j)
        return self.code_fact("arm64 window", name, 160, find)

    def a64_call_start(self, vmf, pc):
        """arm64's BC_CALL and BC_RET move BASE through slots that hold no
        frame for a few instructions, while another register keeps what
        BASE was (A64_WINDOWS).  Inside such a window, the Start of the
        frame that runs: the caller (checked: its function holds PC, which
        is the caller's there), else None.  The window is found in the
        handler's machine code."""
        win = self.a64_window(vmf.name)
        if win is None or not win[0] < vmf.pc <= win[1]:
            return None
        _, _, _, reg, off, what = A64_WINDOWS[vmf.name]
        b = vmf.reg(reg)
        if b is None:
            return None
        b += off
        if b & 7 or not self.walker.stack.contains(b - 8):
            return None
        how = "register %s (%s) and %s (PC) in %s" % (reg, what, self.regs["pc"], vmf.name)
        if reg == "x17":
            if self.pc_in(self.lua_fn_at(b), pc):
                return Start(b, pc, how + ", calling the frame above")
            return None
        c = self.caller_of_return_pc(b, pc)
        return Start(c, pc, how + ", returning to the frame below") if c is not None else None

    def caller_of_return_pc(self, base, pc):
        """BASE of the Lua frame that return pc `pc` returns into, from the
        frame at base (R lj_frame.h frame_prevl: the A operand of the call
        instruction before pc), or None unless that frame's function holds pc."""
        if pc is None or pc & 3:
            return None
        try:
            ins = self.vm.t.u32(pc - 4, "bytecode before the return pc")
        except FaultError:
            return None
        c = base - 8 * (1 + self.walker.fr2 + ((ins >> 8) & 0xFF))
        return c if self.pc_in(self.lua_fn_at(c), pc) else None

    def call_moved_base(self, vmf):
        """In BC_CALL or BC_CALLM: True once the handler has moved BASE up
        to the callee (its `lea BASE, [BASE+RA*8+8*(1+FR2)]`, found in its
        machine code), False before; None elsewhere or when not found."""
        if vmf.name not in ("lj_BC_CALL", "lj_BC_CALLM"):
            return None
        if self.arch == "aarch64":
            # (BC_CALLM's own code has not moved it; BC_CALL moves it in
            # its window, a64_call_start, and after)
            win = self.a64_window("lj_BC_CALL")
            return None if win is None else vmf.name == "lj_BC_CALL" and vmf.pc > win[0]
        if self.arch != "x86_64":
            return None
        pat = CALL_LEA_GC64 if self.walker.fr2 else CALL_LEA_X64

        def find(start, code):
            i = code.find(pat)
            return start + i if i >= 0 else None
        lea = self.code_fact("lea BASE", vmf.name, 96, find)
        if lea is None:
            return None
        return vmf.pc > lea

    def proto_of(self, f):
        """The (cached) Proto of Lua function f, or None if unreadable."""
        try:
            return cached_proto(self.vm, f.proto)
        except (FaultError, CorruptError):
            return None

    def ff_is(self, f, where):
        """Fast function f is the one whose code lj_ff_<name> is (its id's
        DWARF enumerator is FF_<name>)."""
        return self.vm.lay.ff_names.get(f.ffid) == "FF_" + where[len("lj_ff_"):]

    def link_is(self, base, pc):
        """The frame at base is linked to Lua return pc `pc`."""
        w = self.walker
        try:
            return w.is_lua(base - 8) and w.frame_pc(base - 8) == pc
        except (FaultError, CorruptError):
            return False

    def link_sound(self, base):
        """The frame at base links to a frame below that is consistent: a
        Lua link to a Lua function that holds the return pc, or a frame
        delta that stays in the stack."""
        w = self.walker
        f = base - 8
        try:
            if w.is_lua(f):
                c = w.prevl(f) + 8
                return self.pc_in(self.lua_fn_at(c), w.frame_pc(f))
            nf = w.prevd(f)
            return w.stack.start <= nf < f
        except (FaultError, CorruptError):
            return False

    def same_function_below(self, base):
        """The frame below the one at base runs the same function (a
        recursive call, where a stale BASE cannot be told from the true one)."""
        w = self.walker
        try:
            if not w.is_lua(base - 8):
                return False
            c = w.prevl(base - 8) + 8
            a, b = self.lua_fn_at(base), self.lua_fn_at(c)
            return a is not None and b is not None and a.is_lua and b.is_lua and a.proto == b.proto
        except (FaultError, CorruptError):
            return True

    def unknown(self, why, where):
        if where.startswith(VM_EDGES) and self.link_sound(self.th.base):
            # The VM entered from C (lua_call, lua_pcall, coroutine.resume)
            # or is leaving to it: until BASE is set up (or after it is
            # given up), the stack is as L->base says (a resumed
            # coroutine's points at its coroutine.yield).
            return Start(None, None, "L->base (%s is between the VM and C)" % where)
        if where.startswith(FASTFUNCS):
            # A fast function writing its results over its frame, with PC
            # not loaded yet: its return pc is also in the C frame's saved
            # pc (fast functions store it: R vm_x64.dasc mov SAVE_PC, PC),
            # as in ff_coroutine_resume after lj_vm_resume returned.
            try:
                cfpc = self.walker._cf_read(self.th.cframe & ~3, "pc") if self.th.cframe else None
            except (FaultError, CorruptError):
                cfpc = None
            for b in (self.regs_base, self.th.base):
                c = self.caller_of_return_pc(b, cfpc) if b is not None else None
                if c is not None:
                    return Start(c, cfpc, "the C frame's saved PC in %s: the fast function is "
                                 "returning its results" % where)
        if where.startswith("lj_ff_"):
            # A fast function that stored L->base and uses BASE's register
            # for other things around a C call (R vm_x64.dasc
            # ff_coroutine_resume around lj_vm_resume): its own frame at
            # L->base, told by its fast-function id.
            f = self.lua_fn_at(self.th.base)
            if f is not None and not f.is_lua and self.ff_is(f, where) and \
                    self.link_sound(self.th.base):
                return Start(None, None, "L->base (stored by %s)" % where)
        return Start(None, None, "none", "the innermost frames are not known: the VM is in %s, "
                     "where %s" % (where, why), show="none")

    def in_trace(self, jb):
        """JIT-compiled code (or C called from it): the trace's BASE is
        g->jit_base, the innermost pc is in the snapshot in effect at the
        machine pc where the trace is (or called out)."""
        if not jb:
            return None
        mpcs = [m.pc for m in self.mf]
        snap = trace_snapshot(self.vm, self.trace_no, mpcs)
        if snap is None:
            s = self.leaving_to_interpreter()
            if s is not None:
                return s
            return Start(jb, None, "g->jit_base", "the line of the innermost frame is not known: "
                         "no machine frame of this OS thread is in the trace's code",
                         show="outer")
        s = Start(jb + 8 * snap.base_delta, snap.pc, "g->jit_base and trace %d's %s"
                  % (snap.traceno, "start (2.0 snapshots have no machine-code offsets)"
                     if snap.snapno is None else "snapshot #%d" % snap.snapno), trace=snap)
        if snap.base_delta:
            s.warning = ("the innermost frames run inside trace %d, inlined into the frame at "
                         "g->jit_base: their frames are not restored here" % snap.traceno)
            s.base = jb
            s.pc = None
            s.show = "outer"
            return s
        return s

    def leaving_to_interpreter(self):
        """lj_vm_exit_interp before it stores the interpreter's state: a
        trace that ends in the interpreter jumps there with g->vmstate
        still naming the trace, and the exit handler jumps into it after
        lj_trace_exit restored the frames, in state EXIT; either way with
        BASE and PC in their registers (R vm_x64.dasc vm_exit_interp:
        "BASE, PC and DISPATCH set").  PC is the instruction the
        interpreter dispatches next, so the frame's saved-pc form is PC+4,
        as for a snapshot's pc.  Checked as the interpreter's registers
        are: BASE holds a function of this thread whose code holds PC, and
        its frame links soundly.  None when that does not hold."""
        m = self.mf[0] if self.mf else None
        if self.regs is None or m is None or m.level != 0 or m.name != EXIT_INTERP:
            return None
        base, pc = m.reg(self.regs["base"]), m.reg(self.regs["pc"])
        if base is None or pc is None or not self.walker.stack.contains(base - 8):
            return None
        f = self.lua_fn_at(base)
        if f is not None and not f.is_lua and pc == f.pc and self.link_sound(base):
            # A stitched trace ends calling a C or fast function: its frame
            # is set up at BASE, PC is the function's own header (fn->c.pc:
            # g->bc_cfunc_ext, g->bc_cfunc_int or the fast function's entry
            # in GG->bcff), which the interpreter dispatches next.
            self.regs_base = base
            return Start(base, None, "register %s (BASE) in %s: the trace calls a C function"
                         % (self.regs["base"], EXIT_INTERP))
        if not self.pc_in(f, pc + 4):
            # A trace that returns into a trace started at a return sets
            # PC to that trace's startins (R lj_asm.c asm_tail_link); its
            # instruction is the one at T->startpc, as lj_debug.c
            # debug_framepc undoes it.
            pc = self.startins_pc(pc)
            if pc is None or not self.pc_in(f, pc + 4):
                return None
        if not self.link_sound(base):
            return None
        self.regs_base = base
        return Start(base, pc + 4, "registers %s (BASE) and %s (PC) in %s: the trace returns "
                     "to the interpreter" % (self.regs["base"], self.regs["pc"], EXIT_INTERP))

    def startins_pc(self, pc):
        """T->startpc when pc is the startins of a trace T, else None."""
        lay = self.vm.lay
        if lay.trace is None:
            return None
        T = pc - lay.trace.startins
        try:
            if self.vm.t.u8(T + lay.str.gct, "trace's type") != GCT_TRACE:
                return None
            return self.vm.t.uint(T + lay.trace.startpc, lay.mref_size, "trace startpc")
        except (FaultError, CorruptError):
            return None

    def in_exit(self):
        """Leaving a trace: lj_snap_restore is rewriting the stack from
        snapshot J->exitno of trace J->parent; the frames below the trace's
        are not touched."""
        return Start(None, None, "L->base", "the VM is leaving JIT-compiled code (VM state EXIT): "
                     "the innermost frames are being restored from a snapshot", show="none")
