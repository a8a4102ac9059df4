"""A prototype's bytecode, listed as LuaJIT's own jit/bc.lua lists it (the
listing of `luajit -bl`, and of jit.bc.dump in a running program).

Read from memory (R lj_obj.h GCproto): the instructions follow the
GCproto header (proto_bc), bc[0] is the function header and the listing
starts at 1; numeric constants are TValues at pt->k[0 ..], GC constants are
GCRefs below pt->k (proto_kgc(pt, -1 - i)).  An instruction is
op | A << 8 | (C << 16 | B << 24, or D << 16).

The names of the opcodes are the build's own (the BCOp enumerators of its
debug information, without "BC_"), so JIT-patched instructions (JFORL,
JLOOP ...) read as jit.util.funcbc reads them at that moment.  Operand
modes are lj_bc.h's BCDEF: (A, B, C/D), as BCMode numbers (R lj_bc.h:
none, dst, base, var, rbase, uv, lit, lits, pri, num, str, tab, func, jump,
cdata).

OpenResty's jit/bc.lua also lists a prototype's constants after its
header (Listing.constants); lbc does as the build's own does.

The one difference from jit/bc.lua's text: a byte above 127 in a string
constant or chunk name is written \\ddd (jit/bc.lua writes the byte).
"""
from typing import Dict, List, Optional, Set, TYPE_CHECKING, Tuple, Union
import struct

from .. import consts as C
from ..errors import CorruptError, NotLuaJITError
from ..vm.objects import Proto, decode_tv, number_text, str_text
from ..vm.protoinfo import debug_line, upvalue_names

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..vm.state import VM

# lj_bc.h BCDEF: op -> (mode A, mode B, mode C/D), the same in every
# version that has the op (2.0, 2.1, OpenResty's and Tarantool's forks).
BC_MODES = {
    "ISLT": (3, 0, 3), "ISGE": (3, 0, 3), "ISLE": (3, 0, 3), "ISGT": (3, 0, 3),
    "ISEQV": (3, 0, 3), "ISNEV": (3, 0, 3), "ISEQS": (3, 0, 10), "ISNES": (3, 0, 10),
    "ISEQN": (3, 0, 9), "ISNEN": (3, 0, 9), "ISEQP": (3, 0, 8), "ISNEP": (3, 0, 8),
    "ISTC": (1, 0, 3), "ISFC": (1, 0, 3), "IST": (0, 0, 3), "ISF": (0, 0, 3), "MOV": (1, 0, 3),
    "NOT": (1, 0, 3), "UNM": (1, 0, 3), "LEN": (1, 0, 3), "ADDVN": (1, 3, 9),
    "SUBVN": (1, 3, 9), "MULVN": (1, 3, 9), "DIVVN": (1, 3, 9), "MODVN": (1, 3, 9),
    "ADDNV": (1, 3, 9), "SUBNV": (1, 3, 9), "MULNV": (1, 3, 9), "DIVNV": (1, 3, 9),
    "MODNV": (1, 3, 9), "ADDVV": (1, 3, 3), "SUBVV": (1, 3, 3), "MULVV": (1, 3, 3),
    "DIVVV": (1, 3, 3), "MODVV": (1, 3, 3), "POW": (1, 3, 3), "CAT": (1, 4, 4),
    "KSTR": (1, 0, 10), "KCDATA": (1, 0, 14), "KSHORT": (1, 0, 7), "KNUM": (1, 0, 9),
    "KPRI": (1, 0, 8), "KNIL": (2, 0, 2), "UGET": (1, 0, 5), "USETV": (5, 0, 3),
    "USETS": (5, 0, 10), "USETN": (5, 0, 9), "USETP": (5, 0, 8), "UCLO": (4, 0, 13),
    "FNEW": (1, 0, 12), "TNEW": (1, 0, 6), "TDUP": (1, 0, 11), "GGET": (1, 0, 10),
    "GSET": (3, 0, 10), "TGETV": (1, 3, 3), "TGETS": (1, 3, 10), "TGETB": (1, 3, 6),
    "TSETV": (3, 3, 3), "TSETS": (3, 3, 10), "TSETB": (3, 3, 6), "TSETM": (2, 0, 9),
    "CALLM": (2, 6, 6), "CALL": (2, 6, 6), "CALLMT": (2, 0, 6), "CALLT": (2, 0, 6),
    "ITERC": (2, 6, 6), "ITERN": (2, 6, 6), "VARG": (2, 6, 6), "ISNEXT": (2, 0, 13),
    "RETM": (2, 0, 6), "RET": (4, 0, 6), "RET0": (4, 0, 6), "RET1": (4, 0, 6),
    "FORI": (2, 0, 13), "JFORI": (2, 0, 13), "FORL": (2, 0, 13), "IFORL": (2, 0, 13),
    "JFORL": (2, 0, 6), "ITERL": (2, 0, 13), "IITERL": (2, 0, 13), "JITERL": (2, 0, 6),
    "LOOP": (4, 0, 13), "ILOOP": (4, 0, 13), "JLOOP": (4, 0, 6), "JMP": (4, 0, 13),
    "FUNCF": (4, 0, 0), "IFUNCF": (4, 0, 0), "JFUNCF": (4, 0, 6), "FUNCV": (4, 0, 0),
    "IFUNCV": (4, 0, 0), "JFUNCV": (4, 0, 6), "FUNCC": (4, 0, 0), "FUNCCW": (4, 0, 0),
    "ISTYPE": (3, 0, 6), "ISNUM": (3, 0, 6), "TGETR": (1, 3, 3), "TSETR": (3, 3, 3),
}
BCM_UV, BCM_LITS, BCM_NUM, BCM_STR, BCM_FUNC, BCM_JUMP = 5, 7, 9, 10, 12, 13
# lj_obj.h PROTO_CHILD: the prototype has child prototypes.
PROTO_CHILD = 0x01


def opcodes(vm: 'VM') -> Dict[int, str]:
    """{opcode number: name} of this build (its BCOp enumerators)."""
    ops = vm.cache("bcops")
    if not ops:
        # (the Layout's, read once: asking the target again cost lldb 3 ms
        # at every command)
        names = vm.lay.bc_names
        if not names:
            raise NotLuaJITError("the debug information has no BCOp enumeration (lj_bc.h): "
                                 "cannot name bytecodes")
        ops.update({v: k[3:] for v, k in names.items() if k.startswith("BC_") and
                    k != "BC__MAX"})
    return ops


def ctl_text(data: bytes) -> bytes:
    """Control characters as jit/bc.lua's ctlsub writes them."""
    out = []
    for c in data:
        if c == 10:
            out.append(b"\\n")
        elif c == 13:
            out.append(b"\\r")
        elif c == 9:
            out.append(b"\\t")
        elif c < 32 or c == 127:
            out.append(b"\\%03d" % c)
        else:
            out.append(bytes((c,)))
    return b"".join(out)


# Bytes above 127 (text read as latin-1): jit/bc.lua writes them as they
# are; lbc as \ddd, so that its lines are ASCII whatever gdb's charset.
_HIGH = {c: "\\%03d" % c for c in range(128, 256)}


def ascii_text(s: str) -> str:
    return s.translate(_HIGH)


def ptr_text(x: int) -> str:
    """A pointer as LuaJIT's "%p" writes it (R lj_strfmt.c lj_strfmt_wptr,
    64-bit: 8 hex digits, and 2 more per byte of the high word)."""
    if not x:
        return "NULL"
    n = 8
    if x >> 32:
        n += 2 + 2 * (((x >> 32).bit_length() - 1) >> 3)
    return "0x%0*x" % (n, x & ((1 << (4 * n)) - 1))


def location(vm: 'VM', pt: Proto, pc: int = 0) -> str:
    """jit.util.funcinfo's `loc` (R lj_debug.c lj_debug_pushloc): the
    chunk's base name for an '@' chunk, the name for '=', "%p" past 40
    bytes, else the source in double quotes; then ':' and the line."""
    name = str_text(vm, pt.chunkname, 1 << 16)
    line = debug_line(vm, pt, pc)
    line = -1 if line is None else line
    if pt.firstline in (-1, 0xFFFFFFFF):
        return "builtin:%s" % name.decode("latin-1")
    if name.startswith(b"@"):
        s = name[1:]
        cut = max(s.rfind(b"/"), s.rfind(b"\\"))
        if cut > 0:
            s = s[cut + 1:]
        return "%s:%d" % (s.decode("latin-1"), line)
    if len(name) > 40:
        return "%s:%d" % (ptr_text(pt.addr), line)
    if name.startswith(b"="):
        return "%s:%d" % (name[1:].decode("latin-1"), line)
    return '"%s":%d' % (name.decode("latin-1"), line)


class Listing(object):
    """The bytecode of one prototype, instruction by instruction."""

    def __init__(self, vm: 'VM', addr: int) -> None:
        self.vm = vm
        self.pt = pt = Proto(vm, addr)
        if pt.sizebc > (1 << 26):
            raise CorruptError("prototype 0x%x: sizebc %d is not a bytecode count"
                               % (addr, pt.sizebc), addr)
        self.ins = struct.unpack("<%dI" % pt.sizebc,
                                 vm.t.read(pt.bc, 4 * pt.sizebc, "bytecode of 0x%x" % addr))
        self.ops = opcodes(vm)

    def kgc(self, idx: int) -> Tuple[int, int]:
        """The GC constant proto_kgc(pt, idx), idx < 0: (address, gct)."""
        vm, pt = self.vm, self.pt
        rs = vm.lay.ref_size
        if not -pt.sizekgc <= idx < 0:
            raise CorruptError("constant %d of prototype 0x%x: it has %d"
                               % (idx, pt.addr, pt.sizekgc), pt.addr)
        a = vm.t.uint(pt.k + idx * rs, rs, "GC constant %d" % idx)
        return a, vm.t.u8(a + vm.lay.str.gct, "constant's type")

    def knum(self, idx: int) -> Union[int, float]:
        """Numeric constant idx: a double, or in dual-number builds an
        integer TValue where the parser kept the constant as one."""
        raw = self.vm.t.u64(self.pt.k + 8 * idx, "number constant %d" % idx)
        v = decode_tv(self.vm, raw)
        if v.kind not in ("number", "int"):
            raise CorruptError("number constant %d of prototype 0x%x is a %s"
                               % (idx, self.pt.addr, v.kind), self.pt.addr)
        return v.num

    def uvname(self, i: int) -> str:
        names = upvalue_names(self.vm, self.pt)
        return names[i] if i < len(names) else ""

    def children(self) -> List[int]:
        """The child prototypes, in constant order (-1, -2, ...), as
        jit/bc.lua visits them for --all."""
        if not self.pt.flags & PROTO_CHILD:
            return []
        out = []
        for i in range(1, self.pt.sizekgc + 1):
            a, gct = self.kgc(-i)
            if gct == C.GCT_PROTO:
                out.append(a)
        return out

    def targets(self) -> Set[int]:
        out = set()
        for pc in range(1, len(self.ins)):
            ins = self.ins[pc]
            mode = BC_MODES.get(self.ops.get(ins & 0xFF, ""), (0, 0, 0))
            if mode[2] == BCM_JUMP:
                out.add(pc + (ins >> 16) - 0x7FFF)
        return out

    def line(self, pc: int, prefix: Optional[str] = None) -> str:
        """jit/bc.lua bcline: one instruction's line (without its newline),
        bytes above 127 as \\ddd."""
        return ascii_text(self._line(pc, prefix))

    def _line(self, pc, prefix):
        ins = self.ins[pc]
        name = self.ops.get(ins & 0xFF)
        if name is None:
            raise CorruptError("prototype 0x%x: bytecode %d has opcode %d, not one of this "
                               "build" % (self.pt.addr, pc, ins & 0xFF), self.pt.addr)
        ma, mb, mc = BC_MODES[name]
        a = (ins >> 8) & 0xFF
        op = "%-6s" % name[:6]
        s = "%04d %s %-6s %3s " % (pc, prefix or "  ", op, "" if ma == 0 else a)
        d = ins >> 16
        if mc == BCM_JUMP:
            return "%s=> %04d" % (s, pc + d - 0x7FFF)
        if mb:
            d &= 0xFF
        elif mc == 0:
            return s
        kc = None
        if mc == BCM_STR:
            a_, _ = self.kgc(-d - 1)
            raw = str_text(self.vm, a_, 1 << 20)
            esc = ctl_text(raw).decode("latin-1")
            kc = ('"%.40s"~' if len(raw) > 40 else '"%s"') % esc
        elif mc == BCM_NUM:
            v = self.knum(d)
            if op == "TSETM ":
                v = v - 2.0 ** 52
            kc = number_text(v)
        elif mc == BCM_FUNC:
            a_, _ = self.kgc(-d - 1)
            kc = location(self.vm, Proto(self.vm, a_))
        elif mc == BCM_UV:
            kc = self.uvname(d)
        if ma == BCM_UV:
            ka = self.uvname(a)
            kc = ka if kc is None else "%s ; %s" % (ka, kc)
        if mb:
            b = ins >> 24
            if kc is not None:
                return "%s%3d %3d  ; %s" % (s, b, d, kc)
            return "%s%3d %3d" % (s, b, d)
        if kc is not None:
            return "%s%3d      ; %s" % (s, d, kc)
        if mc == BCM_LITS and d > 32767:
            d -= 65536
        return "%s%3d" % (s, d)

    def constants(self) -> List[str]:
        """OpenResty's jit/bc.lua lists the constants after the header:
        "KGC n" for the GC ones (strings as bcline writes them, child
        prototypes by location, "table" for templates; cdata are left
        out), then "KN n" for the numbers from 1 on (its loop starts at 1,
        so KN 0 is never listed)."""
        out = []
        for n in range(1, self.pt.sizekgc + 1):
            a, gct = self.kgc(-n)
            if gct == C.GCT_STR:
                raw = str_text(self.vm, a, 1 << 20)
                kc = ('"%.40s"~' if len(raw) > 40 else '"%s"') % ctl_text(raw).decode("latin-1")
            elif gct == C.GCT_PROTO:
                kc = location(self.vm, Proto(self.vm, a))
            elif gct == C.GCT_TAB:
                kc = "table"
            else:
                continue
            out.append(ascii_text("KGC    %d    %s" % (n - 1, kc)))
        for n in range(1, self.pt.sizekn):
            out.append("KN    %d    %s" % (n, number_text(self.knum(n))))
        return out

    def dump(self) -> List[str]:
        """jit/bc.lua bcdump of this prototype alone: lines, the blank
        line after the last included."""
        pt = self.pt
        out = [ascii_text("-- BYTECODE -- %s-%d" % (location(self.vm, pt),
                                                    pt.firstline + pt.numline))]
        if self.vm.lay.openresty:
            out += self.constants()
        targets = self.targets()
        for pc in range(1, len(self.ins)):
            out.append(self.line(pc, "=>" if pc in targets else None))
        out.append("")
        return out


def dump(vm: 'VM', addr: int, all_protos: bool = False) -> List[str]:
    """The lines jit.bc.dump(proto, out, all) writes: with all_protos, the
    child prototypes first, depth first, as `luajit -bl` lists a chunk."""
    lst = Listing(vm, addr)
    out = []
    if all_protos:
        for child in lst.children():
            out += dump(vm, child, True)
    return out + lst.dump()
