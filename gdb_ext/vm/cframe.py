"""The VM's C frame (cframe): where the assembler VM keeps the lua_State it
runs, and the thread the interpreter runs when g->cur_L does not name it yet.
VM state (state.VM asks it which thread runs), below the stack walkers
(stack/frames, stack/vmstack) that use the same offsets."""
from typing import Optional, TYPE_CHECKING, Tuple
from ..errors import CorruptError, FaultError
from .objects import Thread

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .state import VM
    from ..target import MachineFrame

# C frame (cframe) member offsets, R lj_frame.h CFRAME_OFS_*; these follow the
# hand-written assembler of each VM and are in no debug info.  Same values in
# 2.0, 2.1, Debian's and OpenResty's trees (checked).  (arch, gc64) -> offsets
CFRAME_OFS = {
    ("x86_64", True): {"prev": 32, "pc": 24, "L": 16, "nres": 8},
    ("x86_64", False): {"prev": 32, "pc": 28, "L": 24, "nres": 16},
    ("aarch64", True): {"prev": 0, "pc": 8, "L": 16, "nres": 40},
}
CFRAME_RAWMASK = ~3                 # CFRAME_RESUME | CFRAME_UNWIND_FF

# The interpreter's fixed registers, whether BASE survives a C call
# (callee-saved), where the VM keeps BASE across a call of a C helper that
# does not store L->base (x64: RB, R vm_x64.dasc BC_LEN: mov RB, BASE //
# Save BASE; call extern lj_tab_len; mov BASE, RB), and the stack pointer
# (the VM's C frame while VM code runs), per architecture.
ARCH_REGS = {
    "x86_64": {"base": "rdx", "pc": "rbx", "dispatch": "r14", "ra": "rcx", "base_saved": False,
               "rb": "rbp", "sp": "rsp"},
    "aarch64": {"base": "x19", "pc": "x21", "gl": "x22", "base_saved": True, "sp": "sp"},
}


# vm_x86.dasc (the X64 builds) runs the resumer's code for a few
# instructions around its call of lj_vm_resume while g->cur_L names the
# coroutine (20/21 vm_x86.dasc ff_coroutine_resume: mov
# [DISPATCH+DISPATCH_GL(cur_L)], L:RA before the call; after it, mov L:RB,
# SAVE_L ... mov [DISPATCH+DISPATCH_GL(cur_L)], L:RB).
RESUMERS = ("lj_ff_coroutine_resume", "lj_ff_coroutine_wrap_aux")


def interpreter_thread(vm: 'VM', cur: int) -> Optional[int]:
    """The thread the interpreter runs when g->cur_L (cur) does not name
    it: in a coroutine function's code (RESUMERS) at the innermost machine
    frame, the VM's C frame (the stack pointer there) holds the thread
    whose code runs, SAVE_L.  Checked: a thread of this VM, running, whose
    L->cframe is that C frame.  None elsewhere."""
    regs = ARCH_REGS.get(getattr(vm.t, "arch", "x86_64"))
    if regs is None or vm.vmstate_name()[0] != "INTERP":
        return None
    mf = vm.machine_frames
    if not mf or not mf[0].name or not mf[0].name.startswith(RESUMERS) or mf[0].has_debug:
        return None
    sp, L = cframe_thread(vm, mf[0])
    if not L or L == cur:
        return None
    try:
        th = Thread(vm, L)
    except (FaultError, CorruptError):
        return None
    # Its L->cframe is this C frame: the one the VM set up when it entered
    # for it (R vm_x64.dasc vm_pcall, vm_resume: mov L:RB->cframe, rsp).
    if th.glref != vm.G or th.status != 0 or th.cframe & CFRAME_RAWMASK != sp:
        return None
    return L


def cframe_thread(vm: 'VM', m: 'MachineFrame') -> Tuple[Optional[int], Optional[int]]:
    """(stack pointer, SAVE_L) of VM frame m's C frame (the VM runs on its
    C frame, so the stack pointer there is the frame), or (None, None)
    when the registers or the layout are not known."""
    arch = getattr(vm.t, "arch", "x86_64")
    regs = ARCH_REGS.get(arch)
    cfo = CFRAME_OFS.get((arch, vm.lay.gc64))
    sp = m.reg(regs["sp"]) if regs and cfo else None
    if sp is None:
        return None, None
    return sp, vm.t.uint(sp + cfo["L"], vm.lay.ref_size, "the VM's C frame: L")
