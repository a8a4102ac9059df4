"""Where a JIT trace stands at a machine pc: the trace whose code holds it
and the snapshot in effect there (R lj_trace.c trace_exit_find,
lj_trace_unwind; lj_snap.c lj_snap_restore)."""
from typing import Any, Dict, Optional, Sequence, TYPE_CHECKING, Tuple
from .objects import Trace

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .state import VM

SNAP_FRAME = 0x010000          # R lj_jit.h SNAP_FRAME / SNAP_CONT / SNAP_NORESTORE
SNAP_CONT = 0x020000
SNAP_NORESTORE = 0x040000


class Snapshot(object):
    """The snapshot of a trace in effect at a machine pc (R lj_trace.c
    lj_trace_unwind: the last one whose mcofs is at or before it).
    pc: its bytecode pc (of the innermost frame); base_delta: slots from
    the trace's BASE to the innermost frame's (functions inlined into the
    trace, R lj_snap.c lj_snap_restore); slots: {slot: norestore} of the
    stack slots it restores (slot 0 is the trace's base frame - 1 - FR2);
    exact: False on 2.0, which keeps no machine-code offsets: then it is
    the trace's start."""

    def __init__(self, traceno: int, T: int, snapno: Optional[int], pc: int, base_delta: int,
                 slots: Dict[int, Any], exact: bool = True) -> None:
        self.traceno = traceno
        self.T = T
        self.snapno = snapno
        self.pc = pc
        self.base_delta = base_delta
        self.slots = slots
        self.exact = exact


def trace_of_pc(vm: 'VM', mpcs: Sequence[int]) -> Optional[Tuple[int, int]]:
    """(trace number, GCtrace address) of the first live trace whose machine
    code holds one of mpcs (R lj_trace.c trace_exit_find), or None."""
    lay = vm.lay
    if lay.trace is None or lay.J is None:
        return None
    J = vm.GG + lay.GG.J
    n = vm.t.u32(J + lay.J.sizetrace, "J->sizetrace")
    if not 0 < n <= 65536:
        return None
    tab = vm.t.ptr(J + lay.J.trace, "J->trace")
    data = vm.t.read(tab, n * lay.ref_size, "J->trace")
    # (Two fields of each trace, read as they are; a sampler asks this of
    # every sample.  The trace found is then read whole, and checked.)
    fm, fs = lay.trace.field("mcode"), lay.trace.field("szmcode")
    t, rs = vm.t, lay.ref_size
    for i in range(1, n):
        T = int.from_bytes(data[i * rs:(i + 1) * rs], "little")
        if not T:
            continue
        mcode = t.uint(T + fm.offset, fm.size, "trace mcode")
        end = mcode + t.uint(T + fs.offset, fs.size, "trace szmcode")
        if any(mcode <= p < end for p in mpcs):
            tr = Trace(vm, T)
            return (i, T) if tr.mcode == mcode else None
    return None


def trace_ref(vm: 'VM', traceno: int) -> int:
    lay = vm.lay
    J = vm.GG + lay.GG.J
    traces = vm.t.ptr(J + lay.J.trace, "J->trace")
    return vm.gref(traces + lay.ref_size * traceno, "J->trace[n]")


def trace_snapshot(vm: 'VM', traceno: Optional[int], mpcs: Sequence[int]) -> Optional[Snapshot]:
    """The Snapshot of trace traceno (None: find it from mpcs) in effect at
    the first of the machine pcs mpcs inside its code, or None when no pc
    lies in a trace."""
    lay = vm.lay
    ss = lay.s.get("SnapShot")
    if lay.trace is None or ss is None:
        return None
    traceno_given = traceno is not None
    if traceno is None:
        found = trace_of_pc(vm, mpcs)
        if found is None:
            return None
        traceno, T_addr = found
    else:
        T_addr = trace_ref(vm, traceno)
    if not T_addr:
        return None
    T = Trace(vm, T_addr)
    if not lay.snap_mcofs:
        # 2.0 keeps no machine-code offsets in snapshots: the trace's start.
        pc = vm.t.uint(T_addr + lay.trace.startpc, lay.mref_size, "trace startpc")
        return Snapshot(traceno, T_addr, None, pc + 4, 0, {}, exact=False)
    inside = [p for p in mpcs if T.mcode <= p < T.mcode + T.szmcode]
    if not inside and traceno_given:
        # A side trace entered from its parent's exit branch runs with the
        # parent's number in g->vmstate: find the trace by the pc.
        return trace_snapshot(vm, None, mpcs)
    if not inside or not T.nsnap:
        return None
    off = inside[0] - T.mcode
    unit = 4 if getattr(vm.t, "arch", "x86_64") == "aarch64" else 1   # MCode units
    snap = vm.t.ptr(T_addr + lay.trace.snap, "T->snap")
    data = vm.t.read(snap, ss.size * T.nsnap, "snapshots of trace %d" % T.traceno)
    best = None
    for i in range(T.nsnap):
        b = i * ss.size
        mcofs = int.from_bytes(data[b + ss.mcofs:b + ss.mcofs + 2], "little") * unit
        if mcofs <= off:
            best = i
    if best is None:
        return None
    b = best * ss.size
    mapofs = int.from_bytes(data[b + ss.mapofs:b + ss.mapofs + 4], "little")
    nent = data[b + ss.nent]
    snapmap = vm.t.ptr(T_addr + lay.trace.snapmap, "T->snapmap")
    raw = vm.t.read(snapmap + 4 * mapofs, 4 * (nent + 2), "snapshot map")
    slots = {}
    delta = 0
    for k in range(nent):
        sn = int.from_bytes(raw[4 * k:4 * k + 4], "little")
        slot = sn >> 24
        slots[slot] = bool(sn & SNAP_NORESTORE)
        if not lay.fr2 and sn & (SNAP_FRAME | SNAP_CONT) and slot:
            delta = slot            # R lj_snap_restore: L->base = o+1
    if lay.fr2:
        word = int.from_bytes(raw[4 * nent:4 * nent + 8], "little")
        pc = word >> 8
        delta = word & 0xFF     # R lj_snap.c: pcbase = pc << 8 | (baseslot - 2)
    else:
        pc = int.from_bytes(raw[4 * nent:4 * nent + 4], "little")
    # A snapshot's pc is the instruction the exit resumes at; the VM's
    # saved pcs point one past the executing one.
    return Snapshot(traceno, T_addr, best, pc + 4, delta, slots)
