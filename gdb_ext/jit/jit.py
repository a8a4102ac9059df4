"""The JIT compiler's state and its traces (the machine-code areas they live
in: gdb_ext/jit/mcode.py).

Mirrors (R = upstream 2.1 rolling, 20 = upstream 2.0, DB = Debian's 2.1
snapshot, OR = OpenResty's luajit2; file:line into each variant's tree):
  jit_State, GCtrace, MCLink, SnapShot      lj_jit.h (layouts from DWARF)
  area chain and bookkeeping                R lj_mcode.c:358-371 mcode_allocarea:
      MCLink {next, size} at the area start, code grows down from the end to
      J->mctop, the link/unwind info/exit stubs grow up from the start to J->mcbot
  jit.util.traceinfo fields                 R lib_jit.c:281-297: nins - REF_BIAS - 1,
                                            REF_BIAS - nk, link, nsnap, linktype
  link type names                           R lib_jit.c:274 jit_trlinkname (jit.dump's)
  side-trace linking                        R lj_trace.c:527-537: the parent's exit
      branch is patched to the side trace's mcode (lj_asm_patchexit) and the
      parent's snapshot gets count = SNAPCOUNT_DONE; GCtrace keeps no parent
  trace stitching                           R lj_trace.c:545-549: the previous trace's
      link is set to the stitched trace (linktype LJ_TRLINK_STITCH)
  exit number of a machine-code offset      R lj_trace.c:990-999 (rightmost search
      over SnapShot.mcofs; 2.0's SnapShot has no mcofs)

Placement of areas (the "allocation target"):
  20  lj_mcode.c:228-241, DB/OR lj_mcode.c:216-229: target =
      lj_vm_exit_handler & ~0xffff, range = (1 << (LJ_TARGET_JUMPRANGE-1)) - 2 MB;
      an area p of size sz is accepted iff (p + sz - target) < range or
      (target - p) < range, both unsigned.
  R   lj_mcode.c:264-292 (mcode_setrange, mcode_inrange), 295-335 (mcode_alloc):
      a window [J->mcmin, J->mcmax) of (1 << LJ_TARGET_JUMPRANGE) - 64 KB, first
      centred on lj_vm_exit_handler, moved (centred on a fresh mmap) only after
      an allocation failure; an area is accepted iff it lies inside the window.
  Either way the window is half the signed jump range, so every area can
  reach every other and the exit handler.
The engine never prints: everything below returns data.
"""
from typing import Callable, List, Optional, TYPE_CHECKING, Tuple, Union
import struct

from ..errors import CorruptError, FaultError, NotLuaJITError
from ..vm.protoinfo import cached_proto, debug_line
from ..vm.objects import Trace

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout
    from ..target import Field
    from ..vm.state import VM

# R lib_jit.c:274 jit_trlinkname, ORDER LJ_TRLINK (lj_jit.h TraceLink).
LINK_NAMES = {
    "LJ_TRLINK_NONE": "none", "LJ_TRLINK_ROOT": "root", "LJ_TRLINK_LOOP": "loop",
    "LJ_TRLINK_TAILREC": "tail-recursion", "LJ_TRLINK_UPREC": "up-recursion",
    "LJ_TRLINK_DOWNREC": "down-recursion", "LJ_TRLINK_INTERP": "interpreter",
    "LJ_TRLINK_RETURN": "return", "LJ_TRLINK_STITCH": "stitch",
}
_LINK_ORDER = ("LJ_TRLINK_NONE", "LJ_TRLINK_ROOT", "LJ_TRLINK_LOOP", "LJ_TRLINK_TAILREC",
               "LJ_TRLINK_UPREC", "LJ_TRLINK_DOWNREC", "LJ_TRLINK_INTERP", "LJ_TRLINK_RETURN",
               "LJ_TRLINK_STITCH")

SNAPCOUNT_DONE = 255        # R lj_jit.h:190, 20 lj_jit.h:174
REF_BIAS_DEFAULT = 0x8000   # R lj_ir.h:464 (an enumerator; read from DWARF when there)
MAX_TRACE_SLOTS = 65536     # TraceNo1 is uint16_t (lj_jit.h)
MAX_TRACE_CODE = 1 << 24


def field_uint(buf: bytes, f: 'Field') -> int:
    return int.from_bytes(buf[f.offset:f.offset + f.size], "little")


class NoJitError(NotLuaJITError):
    """This build has no JIT compiler (LUAJIT_DISABLE_JIT)."""


class JitState(object):
    """The fields of J = &GG->J that lmcode and ltrace use, from one read."""

    def __init__(self, vm: 'VM') -> None:
        lay = vm.lay
        if not lay.jit or lay.J is None:
            raise NoJitError("this LuaJIT was built without the JIT compiler "
                             "(LUAJIT_DISABLE_JIT: GG_State has no jit_State)")
        t = vm.t
        Js = lay.J
        self.addr = vm.GG + lay.GG.J
        buf = t.read(self.addr, Js.size, "jit_State at 0x%x" % self.addr)

        def get(name):
            return field_uint(buf, Js.field(name))

        self.trace = get("trace")
        self.sizetrace = get("sizetrace")
        self.mcarea = get("mcarea")
        self.mctop = get("mctop")
        self.mcbot = get("mcbot")
        self.szmcarea = get("szmcarea")
        self.szallmcarea = get("szallmcarea")
        self.mcprot = get("mcprot") if Js.has("mcprot") else None
        # Upstream 2.1 rolling keeps its allocation window in J (R lj_jit.h).
        self.mcmin = get("mcmin") if Js.has("mcmin") else None
        self.mcmax = get("mcmax") if Js.has("mcmax") else None
        # Parameters by their DWARF enumerators (lj_jit.h JIT_P_*), in KB.
        pf = Js.field("param")
        psize = pf.size // pf.count if pf.count else 4
        self.params = {}
        for name in ("sizemcode", "maxmcode"):
            idx = t.constant("JIT_P_" + name)
            if idx is None or pf.count is None or not 0 <= idx < pf.count:
                self.params[name] = None
                continue
            o = pf.offset + idx * psize
            self.params[name] = struct.unpack("<i", buf[o:o + 4])[0]
        self.ref_bias = t.constant("REF_BIAS")
        if self.ref_bias is None:
            self.ref_bias = REF_BIAS_DEFAULT
        # Exit stub groups (lj_jit.h exitstubgroup[LJ_MAX_EXITSTUBGR]).
        self.exitstubgroup = []
        if Js.has("exitstubgroup"):
            f = Js.field("exitstubgroup")
            n = f.count or 0
            ps = vm.lay.ptr_size
            self.exitstubgroup = [int.from_bytes(buf[f.offset + i * ps:f.offset + (i + 1) * ps],
                                                 "little") for i in range(n)]
        members = t.enum_members("LJ_TRLINK_NONE")
        if members:
            self.link_names = {v: LINK_NAMES.get(k, k) for k, v in members.items()}
        else:
            self.link_names = {i: LINK_NAMES[n] for i, n in enumerate(_LINK_ORDER)}


def jit_state(vm: 'VM') -> JitState:
    return JitState(vm)


# --------------------------------------------------------------------------
# Traces

def mcode_stamp(lay: 'Layout', GG: int, read: Callable[[int, int], bytes]
                ) -> Optional[Tuple[int, int]]:
    """(J->mcarea, J->mctop) of the VM whose GG_State is at GG, read with
    read(addr, n) (a moment's copy, or the process as it is now); None in a
    build without the JIT compiler.  FaultError as read raises it."""
    if not lay.jit or lay.J is None:
        return None
    a, t = lay.J.field("mcarea"), lay.J.field("mctop")
    J = GG + lay.GG.J
    lo, hi = min(a.offset, t.offset), max(a.offset + a.size, t.offset + t.size)
    buf = read(J + lo, hi - lo)
    return (int.from_bytes(buf[a.offset - lo:a.offset - lo + a.size], "little"),
            int.from_bytes(buf[t.offset - lo:t.offset - lo + t.size], "little"))


def traces_kept(then: Optional[Tuple[int, int]], now: Optional[Tuple[int, int]]) -> bool:
    """Whether the traces of the moment whose mcode_stamp was `then` are
    still there, each with its machine code, at the moment of `now`.
    LuaJIT frees machine code only all at once, on a flush (R lj_trace.c
    lj_trace_flushall -> lj_mcode_free: J->mcarea NULL, every area
    unmapped), and new code goes below J->mctop of the current area (R
    lj_mcode.c lj_mcode_commit).  So the same current area with its top not
    moved up means no flush came between; a new area may have been a
    flush (an area mapped afresh can take an old one's address, but its
    top starts at the end again): not kept, so a trace looked up now is
    not taken for one of then."""
    if then is None:
        return True
    return now is not None and now[0] == then[0] and now[1] <= then[1]


class TraceObj(Trace):
    """A GCtrace with everything ltrace shows (objects.Trace plus more)."""

    def __init__(self, vm: 'VM', addr: int, js: JitState) -> None:
        Trace.__init__(self, vm, addr)
        for name in ("nk", "mcloop", "linktype", "nchild", "nextroot", "nextside", "snap",
                     "snapmap", "startpc", "startins"):
            setattr(self, name, self._f(vm, name))
        self.ir_count = self.nins - js.ref_bias - 1      # jit.util.traceinfo nins
        self.k_count = js.ref_bias - self.nk              # jit.util.traceinfo nk
        self.link_name = js.link_names.get(self.linktype, "linktype %d" % self.linktype)
        self.end = self.mcode + self.szmcode

    def contains(self, addr: int) -> bool:
        return self.mcode <= addr < self.end

    def code_range(self) -> Tuple[int, int]:
        """(start, end) of the trace's machine code, checked: a CorruptError
        when it is empty at NULL or runs past the end of the address space."""
        if not self.mcode or self.end > 1 << 64:
            raise CorruptError("trace %d: machine code at 0x%x, %d bytes, is not in the address "
                               "space" % (self.traceno, self.mcode, self.szmcode), self.addr)
        return self.mcode, self.end

    def start_site(self, vm: 'VM') -> Tuple[str, Optional[int], int]:
        """(chunk name, line, bytecode position) where the trace starts."""
        pt = cached_proto(vm, self.startpt)
        pos = (self.startpc - pt.bc) // 4
        return pt.chunk(vm), debug_line(vm, pt, pos), pos


def traces(vm: 'VM', js: JitState) -> List[Tuple[int, Union[TraceObj, Exception]]]:
    """[(number, TraceObj or the error that stopped decoding it)] of every
    live trace, J->trace[1 .. J->sizetrace), in number order."""
    lay = vm.lay
    if js.sizetrace > MAX_TRACE_SLOTS or (js.sizetrace and not js.trace):
        raise CorruptError("J->sizetrace is %d (at most %d trace slots exist)"
                           % (js.sizetrace, MAX_TRACE_SLOTS))
    if js.sizetrace < 2:
        return []
    rs = lay.ref_size
    data = vm.t.read(js.trace, rs * js.sizetrace, "J->trace[0..%d]" % js.sizetrace)
    out = []
    for n in range(1, js.sizetrace):
        ref = int.from_bytes(data[n * rs:(n + 1) * rs], "little")
        if not ref:
            continue
        try:
            T = TraceObj(vm, ref, js)
            if T.traceno != n:
                raise CorruptError("J->trace[%d] = 0x%x holds trace number %d"
                                   % (n, ref, T.traceno), ref)
            if T.szmcode > MAX_TRACE_CODE:
                raise CorruptError("trace %d claims %d bytes of machine code" % (n, T.szmcode), ref)
            out.append((n, T))
        except (FaultError, CorruptError) as e:
            out.append((n, e))
    return out


def trace_by_number(vm: 'VM', js: JitState, n: int) -> Optional[TraceObj]:
    """The TraceObj of trace n, or None when there is no such live trace."""
    if n <= 0 or n >= js.sizetrace or n >= MAX_TRACE_SLOTS:
        return None
    rs = vm.lay.ref_size
    ref = vm.t.uint(js.trace + rs * n, rs, "J->trace[%d]" % n)
    if not ref:
        return None
    return TraceObj(vm, ref, js)


def snapshots(vm: 'VM', T: TraceObj) -> List[Tuple[Optional[int], int, Optional[int]]]:
    """[(mcofs in bytes or None, count, pc)] of a trace's snapshots."""
    lay = vm.lay
    ss = lay.s.get("SnapShot")
    if ss is None or not T.nsnap:
        return []
    data = vm.t.read(T.snap, ss.size * T.nsnap, "snapshots of trace %d" % T.traceno)
    has_mcofs = lay.snap_mcofs
    unit = MCODE_UNIT.get(getattr(vm.t, "arch", "x86_64"), 1)
    out = []
    for i in range(T.nsnap):
        b = i * ss.size
        mapofs = int.from_bytes(data[b + ss.mapofs:b + ss.mapofs + 4], "little")
        nent = data[b + ss.nent]
        count = data[b + ss.count]
        mcofs = (int.from_bytes(data[b + ss.mcofs:b + ss.mcofs + 2], "little") * unit
                 if has_mcofs else None)
        entry = T.snapmap + 4 * (mapofs + nent)
        try:
            # R lj_jit.h:217 snap_pc: FR2 keeps pc << 8 in 64 bits.
            pc = vm.t.u64(entry, "snapshot pc") >> 8 if lay.fr2 else vm.t.u32(entry, "snapshot pc")
        except FaultError:
            pc = None
        out.append((mcofs, count, pc))
    return out


# x86/x64 exit stubs: groups of 32 stubs, 4 bytes apart (R lj_target_x86.h:164-165,
# 20 lj_target_x86.h:157-158; exitstub_addr in lj_target.h).  arm64 has
# no groups: each trace's stubs follow its code (below).
EXITSTUB_SPACING = {"x86_64": 4}
EXITSTUBS_PER_GROUP = {"x86_64": 32}
# Bytes per MCode unit, the unit of SnapShot.mcofs (R lj_target_*.h).
MCODE_UNIT = {"aarch64": 4}
A64_NOP = 0xd503201f


def _sext(v, bits):
    return v - (1 << bits) if v & (1 << (bits - 1)) else v


def _a64_branch(ins, addr):
    """The target of an arm64 branch lj_asm_patchexit rewrites (R
    lj_asm_arm64.h: b.cond, b, cbz/cbnz, tbz/tbnz), or None."""
    if ins & 0xff000010 == 0x54000000:                  # b.cond imm19
        return addr + 4 * _sext((ins >> 5) & 0x7ffff, 19)
    if ins & 0xfc000000 == 0x14000000:                  # b imm26
        return addr + 4 * _sext(ins & 0x3ffffff, 26)
    if ins & 0x7e000000 == 0x34000000:                  # cbz/cbnz imm19
        return addr + 4 * _sext((ins >> 5) & 0x7ffff, 19)
    if ins & 0x7e000000 == 0x36000000:                  # tbz/tbnz imm14
        return addr + 4 * _sext((ins >> 5) & 0x3fff, 14)
    return None


def _branches(arch, code, base):
    """[(offset, target)] of the relative branches in code (at address
    base) that exits use: x86-64 jcc rel32 (0f 80..8f) and jmp rel32 (e9),
    the two forms lj_asm_patchexit rewrites (R lj_asm_x86.h); arm64's
    b.cond, b, cbz/cbnz and tbz/tbnz (R lj_asm_arm64.h).  x86-64's bytes
    are not decoded instruction by instruction, so a few may be false
    matches; callers only trust targets that are exit stubs or trace
    starts.  None when this architecture's branches are not decoded."""
    if arch == "aarch64":
        out = []
        for i in range(0, len(code) - 3, 4):
            tgt = _a64_branch(struct.unpack_from("<I", code, i)[0], base + i)
            if tgt is not None:
                out.append((i, tgt))
        return out
    if arch != "x86_64":
        return None
    out = []
    n = len(code)
    i = code.find(b"\x0f")
    while 0 <= i < n - 5:
        if 0x80 <= code[i + 1] <= 0x8f:
            out.append((i, base + i + 6 + struct.unpack_from("<i", code, i + 2)[0]))
        i = code.find(b"\x0f", i + 1)
    i = code.find(b"\xe9")
    while 0 <= i < n - 4:
        out.append((i, base + i + 5 + struct.unpack_from("<i", code, i + 1)[0]))
        i = code.find(b"\xe9", i + 1)
    return sorted(out)


def a64_stubs(vm: 'VM', T: TraceObj) -> int:
    """arm64: the address of trace T's exit stub 0.  The stubs follow the
    trace's code after NOP padding: `str lr, [sp]`, then `bl
    ->vm_exit_handler` (or, out of its range, `ldr lr, [gl, #...]; blr
    lr`), `movz w0, #traceno`, then one `bl` per exit (R lj_target_arm64.h
    exitstub_trace_addr_, lj_asm_arm64.h asm_exitstub_setup)."""
    p = T.mcode + T.szmcode
    words = struct.unpack("<16I", vm.t.read(p, 64, "exit stubs of trace %d" % T.traceno))
    i = 0
    while i < 14 and words[i] == A64_NOP:
        i += 1
    if words[i + 1] >> 28 == 0xf:          # the ldr form
        i += 1
    return p + 4 * (i + 3)


def a64_stub_links(vm: 'VM', T: TraceObj, base: int, target: int) -> List[int]:
    """arm64: the exits of trace T (its stub 0 at base, a64_stubs) whose
    stub branches to target.  A patched exit's stub becomes `b target` (R
    lj_asm_arm64.h lj_asm_patchexit: "Always patch long-range branch in
    exit stub itself"), an unpatched one stays `bl`."""
    n = T.nsnap + 1                      # a side trace has one exit more
    data = vm.t.read(base, 4 * n, "exit stubs of trace %d" % T.traceno)
    out = []
    for e in range(n):
        ins = struct.unpack_from("<I", data, 4 * e)[0]
        if ins & 0xfc000000 == 0x14000000 and _a64_branch(ins, base + 4 * e) == target:
            out.append(e)
    return out


def _stub_exit(js, arch, addr, stubs=None):
    """The exit number whose exit stub is at addr, or None.  stubs: on
    arm64, the address of the trace's stub 0 (a64_stubs)."""
    if arch == "aarch64":
        if stubs is None or addr < stubs or (addr - stubs) % 4:
            return None
        e = (addr - stubs) // 4
        return e if e <= 0xffff else None
    sp, per = EXITSTUB_SPACING.get(arch), EXITSTUBS_PER_GROUP.get(arch)
    if sp is None:
        return None
    for g, base in enumerate(js.exitstubgroup):
        if base and base <= addr < base + sp * per and (addr - base) % sp == 0:
            return g * per + (addr - base) // sp
    return None


def _exit_of_offset(snaps, ofs):
    """R lj_trace.c:990-999: the snapshot whose code holds offset ofs."""
    exitno = None
    for i, (mcofs, _, _) in enumerate(snaps):
        if mcofs is None:
            return None
        if mcofs <= ofs:
            exitno = i
    return exitno


def trace_parent(vm: 'VM', js: JitState, all_traces: List[Tuple[int, Union[TraceObj, Exception]]],
                 T: TraceObj) -> Tuple[Optional[int], Union[int, str, None]]:
    """(parent number, exit number | 'stitch' | None) for a side or
    stitched trace, (0, None) for a root trace, (None, None) if not found.

    A side trace's parent is not stored (R lj_trace.c:527-537); it is found
    the way LuaJIT linked it: among the traces of the same root, a snapshot
    marked SNAPCOUNT_DONE whose pc is the side trace's start pc.  Where that
    leaves a choice, the parent is the trace whose exit branch was patched
    to the side trace's first instruction, and the exit is the snapshot
    holding that branch: by SnapShot.mcofs where it exists (2.1), else
    between the exits of the nearest unpatched exit branches around it
    (their targets are exit stubs, whose numbers are known; 2.0).  On
    arm64 the patched exit's own stub says it exactly (a64_stub_links)."""
    live = {n: t for n, t in all_traces if not isinstance(t, Exception)}
    if not T.root:
        for n, P in live.items():
            if n != T.traceno and P.link == T.traceno and P.link_name == "stitch":
                return n, "stitch"
        return 0, None
    family = [P for n, P in live.items()
              if n != T.traceno and (n == T.root or P.root == T.root)]
    cands = []
    snaps_of = {}
    for P in family:
        try:
            snaps = snaps_of[P.traceno] = snapshots(vm, P)
        except (FaultError, CorruptError):
            continue
        for i, (_, count, pc) in enumerate(snaps):
            if count == SNAPCOUNT_DONE and pc == T.startpc:
                cands.append((P.traceno, i))
    if len(cands) == 1:
        return cands[0]
    arch = getattr(vm.t, "arch", "x86_64")
    allowed = {}            # parent -> set of possible exits (None: any)
    for P in family:
        try:
            code = vm.t.read(P.mcode, P.szmcode, "machine code of trace %d" % P.traceno)
        except FaultError:
            continue
        br = _branches(arch, code, P.mcode)
        if br is None:
            allowed = None
            break
        a64 = None
        if arch == "aarch64":
            try:
                a64 = a64_stubs(vm, P)
                linked = a64_stub_links(vm, P, a64, T.mcode)
            except FaultError:
                linked = []
            if linked:
                allowed[P.traceno] = set(linked)
                continue
        offs = [o for o, tgt in br if tgt == T.mcode]
        if not offs:
            continue
        stubs = [(o, _stub_exit(js, arch, tgt, a64)) for o, tgt in br]
        stubs = [(o, e) for o, e in stubs if e is not None]
        ok = None
        for o in offs:
            e = _exit_of_offset(snaps_of.get(P.traceno, []), o)
            if e is not None:
                here = {e}
            else:
                before = [x for b, x in stubs if b < o]
                after = [x for b, x in stubs if b > o]
                lo = before[-1] if before else 0
                hi = after[0] if after else P.nsnap - 1
                here = set(range(lo, hi + 1))
            ok = here if ok is None else ok & here
        allowed[P.traceno] = ok
    if allowed:
        both = [c for c in cands if c[0] in allowed and c[1] in allowed[c[0]]]
        if len(both) == 1:
            return both[0]
        if len(allowed) == 1 and len(both) > 1:
            pn = next(iter(allowed))
            e = _order_exits(vm, js, arch, live[pn], family, snaps_of.get(pn, []), T)
            if e is not None:
                return pn, e
        if not both:
            exact = [(p, next(iter(es))) for p, es in allowed.items() if es and len(es) == 1]
            if len(exact) == 1:
                return exact[0]
        if len(allowed) == 1:
            return next(iter(allowed)), None
    parents = {c[0] for c in cands}
    if len(parents) == 1:
        return parents.pop(), None
    return None, None


def _order_exits(vm, js, arch, P, family, snaps, T):
    """T's exit in parent P when several exits of P have T's start pc (2.0
    has no SnapShot.mcofs): exits appear in P's code in snapshot order, so
    the side traces patched into P, in code order, have increasing exits,
    each between the exits of the unpatched stub branches around it."""
    try:
        code = vm.t.read(P.mcode, P.szmcode, "machine code of trace %d" % P.traceno)
    except FaultError:
        return None
    br = _branches(arch, code, P.mcode) or []
    # Only side traces can hang off an exit (a link to the root is a branch too).
    kids = {X.mcode: X for X in family if X.traceno != P.traceno and X.root}
    kids[T.mcode] = T
    try:
        a64 = a64_stubs(vm, P) if arch == "aarch64" else None
    except FaultError:
        a64 = None
    stubs = [(o, _stub_exit(js, arch, tgt, a64)) for o, tgt in br]
    stubs = [(o, e) for o, e in stubs if e is not None]
    first, last = {}, {}
    for o, tgt in br:
        if tgt in kids:
            first.setdefault(tgt, o)
            last[tgt] = o
    order = sorted(first, key=first.get)
    sets = []
    for tgt in order:
        X = kids[tgt]
        before = [e for o, e in stubs if o < first[tgt]]
        after = [e for o, e in stubs if o > last[tgt]]
        lo = before[-1] if before else 0
        hi = after[0] if after else len(snaps) - 1
        sets.append({i for i, (_, count, pc) in enumerate(snaps)
                     if lo <= i <= hi and count == SNAPCOUNT_DONE and pc == X.startpc})
    for _ in range(len(sets) + 1):          # propagate: exits increase in code order
        for k in range(1, len(sets)):
            if sets[k - 1]:
                sets[k] = {e for e in sets[k] if e > min(sets[k - 1])}
        for k in range(len(sets) - 2, -1, -1):
            if sets[k + 1]:
                sets[k] = {e for e in sets[k] if e < max(sets[k + 1])}
    mine = sets[order.index(T.mcode)] if T.mcode in order else set()
    return next(iter(mine)) if len(mine) == 1 else None
