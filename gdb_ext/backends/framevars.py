"""What gdb's blocks give a frame, read from DWARF without gdb (for the
core reader): the functions inlined at a pc (gdb shows each as a frame of
its own, with the same registers) and, in each, the C variables of type
`lua_State *` or `global_State *` that gdbtarget.frame_candidates reads.

DwarfBlocks(path) reads one ELF file's DWARF with pyelftools, one
compilation unit at a time, found by .debug_aranges when a pc asks for it.
chain(vaddr) gives the frames at a link-time address: innermost first,
each (function name, variables in the order gdb lists them: innermost
block first, a block's variables in DWARF order).  candidates() evaluates
the variables as gdb does.

The location expressions evaluated are the ones compilers write for such
variables: DW_OP_fbreg (frame base DW_OP_call_frame_cfa), DW_OP_reg*,
DW_OP_breg*, DW_OP_addr, constants, DW_OP_stack_value.  A variable whose
location needs more (DW_OP_entry_value: its value at the call, which gdb
may find through the caller's call-site records) is left out.
"""
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple
import bisect
import struct

from .coredump import X86_64, uleb128, sleb128
from ..layouts.elfdwarf import die_name
from ..errors import FaultError

_KINDS = {"lua_State": "L", "global_State": "G"}
_VARS = ("DW_TAG_formal_parameter", "DW_TAG_variable")


class _Block(object):
    __slots__ = ("inlined", "name", "ranges", "vars", "children", "frame_base")

    def __init__(self, inlined, name, ranges, frame_base=None):
        self.inlined = inlined
        self.name = name
        self.ranges = ranges
        self.vars = []              # (name, 'L' or 'G', location)
        self.children = []
        self.frame_base = frame_base

    def holds(self, vaddr):
        return any(lo <= vaddr < hi for lo, hi in self.ranges)


class DwarfBlocks(object):
    """The DWARF of one ELF file, read a compilation unit at a time."""

    def __init__(self, path: str) -> None:
        from elftools.elf.elffile import ELFFile
        self._f = open(path, "rb")
        self.elf = ELFFile(self._f)
        self.dwarf = self.elf.get_dwarf_info() if self.elf.has_dwarf_info() else None
        self._aranges = None
        self._cus = {}              # CU offset -> ([start], [(lo, hi, _Block)])
        self._cu_ranges = None      # without aranges: [(lo, hi, CU offset)]

    def chain(self, vaddr: int) -> List[Tuple[Optional[str], List[Tuple[Optional[str], str, List[Any]]],
                                              Optional[str]]]:
        """[(function name, [(variable, kind, location)], frame base)] of
        the frames at vaddr, innermost (the most deeply inlined) first; []
        when no function's DWARF covers vaddr."""
        if self.dwarf is None:
            return []
        fn = self._function(vaddr)
        if fn is None:
            return []
        frames = [(fn.name, [fn])]
        node = fn
        while True:
            inner = next((c for c in node.children if c.holds(vaddr)), None)
            if inner is None:
                break
            if inner.inlined:
                frames.append((inner.name, [inner]))
            else:
                frames[-1][1].append(inner)
            node = inner
        out = []
        for name, blocks in reversed(frames):
            variables = [v for b in reversed(blocks) for v in b.vars]
            out.append((name, variables, fn.frame_base))
        return out

    def _function(self, vaddr):
        off = self._cu_offset(vaddr)
        if off is None:
            return None
        starts, rows = self._unit(off)
        i = bisect.bisect_right(starts, vaddr) - 1
        while i >= 0:
            lo, hi, fn = rows[i]
            if lo <= vaddr < hi:
                return fn
            i -= 1
            if vaddr - lo > (1 << 24):
                break
        return None

    def _cu_offset(self, vaddr):
        if self._aranges is None:
            try:
                self._aranges = self.dwarf.get_aranges() or False
            except Exception:   # a broken .debug_aranges: scan the units instead
                self._aranges = False
        if self._aranges:
            try:
                return self._aranges.cu_offset_at_addr(vaddr)
            except Exception:   # (pyelftools raises when no range holds it)
                pass
        if self._cu_ranges is None:
            self._cu_ranges = []
            for cu in self.dwarf.iter_CUs():
                ctx = _Ctx(self.dwarf, cu)
                for lo, hi in ctx.die_ranges(cu.get_top_DIE()):
                    self._cu_ranges.append((lo, hi, cu.cu_offset))
        for lo, hi, off in self._cu_ranges:
            if lo <= vaddr < hi:
                return off
        return None

    def _unit(self, off):
        if off not in self._cus:
            cu = self.dwarf.get_CU_at(off)
            ctx = _Ctx(self.dwarf, cu)
            rows = []
            for die in cu.get_top_DIE().iter_children():
                if die.tag != "DW_TAG_subprogram":
                    continue
                fn = ctx.block(die, False)
                if fn is not None:
                    rows.extend((lo, hi, fn) for lo, hi in fn.ranges)
            rows.sort(key=lambda r: r[0])
            self._cus[off] = ([r[0] for r in rows], rows)
        return self._cus[off]


class _Ctx(object):
    def __init__(self, dwarf, cu):
        from elftools.dwarf.locationlists import LocationParser
        self.dwarf, self.cu = dwarf, cu
        top = cu.get_top_DIE()
        self.base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes \
            else 0
        self.locparser = LocationParser(dwarf.location_lists())
        self.ranges = dwarf.range_lists()
        self.version = cu["version"]
        self._kind = {}

    def block(self, die, inlined):
        """The _Block of a function, lexical block or inlined call, with the
        blocks inside it; None when it has no code."""
        rng = self.die_ranges(die)
        if not rng:
            return None
        fb = die.attributes.get("DW_AT_frame_base")
        b = _Block(inlined, die_name(die) or _origin_name(die), rng,
                   bytes(fb.value).hex() if fb is not None and isinstance(fb.value, list)
                   else None)
        for child in die.iter_children():
            tag = child.tag
            if tag in _VARS:
                kind = self.kind(child)
                if kind is not None:
                    loc = self.location(child)
                    if loc is not None:
                        b.vars.append((die_name(child) or _origin_name(child), kind, loc))
            elif tag in ("DW_TAG_lexical_block", "DW_TAG_inlined_subroutine"):
                sub = self.block(child, tag == "DW_TAG_inlined_subroutine")
                if sub is not None:
                    b.children.append(sub)
        return b

    def kind(self, die):
        """'L' or 'G' when die's type is a pointer to lua_State or
        global_State, else None."""
        t = _type(die)
        if t is None:
            return None
        if t.offset in self._kind:
            return self._kind[t.offset]
        k = None
        t = _strip(t)
        if t is not None and t.tag == "DW_TAG_pointer_type":
            tt = _strip(_type(t))
            if tt is not None and tt.tag == "DW_TAG_structure_type":
                k = _KINDS.get(die_name(tt))
        self._kind[_type(die).offset] = k
        return k

    def location(self, die):
        attr = die.attributes.get("DW_AT_location")
        if attr is None:
            return None
        try:
            loc = self.locparser.parse_from_attribute(attr, self.version, die)
        except Exception:       # a form pyelftools does not read: leave the variable out
            return None
        if hasattr(loc, "loc_expr"):
            return ["expr", bytes(loc.loc_expr).hex()]
        if not isinstance(loc, list):
            return None
        entries, base = [], self.base
        for e in loc:
            if hasattr(e, "base_address"):
                base = e.base_address
                continue
            if not hasattr(e, "loc_expr"):
                continue
            lo, hi = e.begin_offset, e.end_offset
            if not getattr(e, "is_absolute", False):
                lo, hi = lo + base, hi + base
            entries.append([lo, hi, bytes(e.loc_expr).hex()])
        return ["list", entries]

    def die_ranges(self, die):
        a = die.attributes
        if "DW_AT_low_pc" in a and "DW_AT_high_pc" in a:
            lo = a["DW_AT_low_pc"].value
            hi = a["DW_AT_high_pc"]
            hi = hi.value if hi.form == "DW_FORM_addr" else lo + hi.value
            return [[lo, hi]]
        attr = a.get("DW_AT_ranges")
        if attr is None or self.ranges is None or attr.form == "DW_FORM_rnglistx":
            return []           # (rnglistx: split DWARF only)
        try:
            rl = self.ranges.get_range_list_at_offset(attr.value, cu=self.cu)
        except Exception:       # a range list pyelftools does not read: no ranges
            return []
        out, base = [], self.base
        for e in rl or ():
            if hasattr(e, "base_address"):
                base = e.base_address
            elif hasattr(e, "begin_offset"):
                lo, hi = e.begin_offset, e.end_offset
                if not getattr(e, "is_absolute", False):
                    lo, hi = lo + base, hi + base
                out.append([lo, hi])
        return out


def _type(die):
    if "DW_AT_type" in die.attributes:
        return die.get_DIE_from_attribute("DW_AT_type")
    if "DW_AT_abstract_origin" in die.attributes:
        return _type(die.get_DIE_from_attribute("DW_AT_abstract_origin"))
    return None


def _strip(die):
    while die is not None and die.tag in ("DW_TAG_typedef", "DW_TAG_const_type",
                                          "DW_TAG_volatile_type", "DW_TAG_restrict_type"):
        die = _type(die)
    return die


def _origin_name(die):
    for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
        if key in die.attributes:
            return die_name(die.get_DIE_from_attribute(key))
    return None


# --------------------------------------------------------------------------
# Reading them in a thread's frames

def read_variables(variables: Iterable[Sequence[Any]], vaddr: int,
                   reg: Callable[[str], Optional[int]], cfa: Optional[int],
                   frame_base: Optional[str], bias: int, read: Callable[[int, int], bytes],
                   ptr_size: int = 8,
                   regnames: Sequence[str] = X86_64.dwarf_regs) -> List[Tuple[Optional[str], str, int]]:
    """[(name, kind, value)] of the variables (chain()'s) whose value can
    be read at link-time address vaddr: reg(name) a register of the frame,
    cfa its canonical frame address (None when unknown), bias the file's
    load bias, read(addr, n) memory, regnames the names of the DWARF
    register numbers (coredump.Arch.dwarf_regs).  A NULL value is left out."""
    out = []

    def regno(n):                   # a DWARF register's value, or _Unknown
        v = reg(regnames[n]) if n < len(regnames) else None
        if v is None:
            raise _Unknown()
        return v
    for name, kind, loc in variables:
        expr = _expr_at(loc, vaddr)
        if expr is None:
            continue
        try:
            v = _evaluate(bytes.fromhex(expr), regno, cfa, frame_base, bias, read, ptr_size)
        except (FaultError, _Unknown, IndexError, struct.error):
            continue
        if v:
            out.append((name, kind, v))
    return out


def register_reader(frames: Sequence[Tuple[int, Dict[str, int]]],
                    i: int) -> Callable[[str], Optional[int]]:
    """Register reader of frame i of frames [(pc, regs dict)], innermost
    first: its own value, else (a register the unwind information says
    nothing of) the inner frame's, as gdb reads the registers the CFI
    leaves unspecified (x86-64 and arm64 alike)."""
    def read(name):
        for j in range(i, -1, -1):
            regs = frames[j][1]
            if name in regs:
                return regs[name]
        return None
    return read


def _expr_at(loc, vaddr):
    if loc[0] == "expr":
        return loc[1]
    for lo, hi, expr in loc[1]:
        if lo <= vaddr < hi:
            return expr
    return None


class _Unknown(Exception):
    """A location this reader does not evaluate (or a value gdb would call
    optimized out)."""


def _evaluate(expr, regno, cfa, frame_base, bias, read, ptr_size, nested=False):
    """The value of a variable (a location expression: its address, then
    read; or a register, regno(DWARF number); or DW_OP_stack_value), or
    _Unknown."""
    stack = []
    in_reg = None
    p = 0
    mask = (1 << 64) - 1
    while p < len(expr):
        op = expr[p]
        p += 1
        if 0x50 <= op <= 0x6F:                  # DW_OP_reg0..31
            in_reg = regno(op - 0x50)
        elif 0x70 <= op <= 0x8F:                # DW_OP_breg0..31 N
            off, p = sleb128(expr, p)
            stack.append((regno(op - 0x70) + off) & mask)
        elif op == 0x91:                        # DW_OP_fbreg N
            off, p = sleb128(expr, p)
            if frame_base is None or nested:
                raise _Unknown()
            stack.append((_evaluate(bytes.fromhex(frame_base), regno, cfa, None, bias, read,
                                    ptr_size, True) + off) & mask)
        elif op == 0x9C:                        # DW_OP_call_frame_cfa
            if cfa is None:
                raise _Unknown()
            stack.append(cfa)
        elif op == 0x03:                        # DW_OP_addr
            stack.append((struct.unpack_from("<Q", expr, p)[0] + bias) & mask)
            p += 8
        elif 0x30 <= op <= 0x4F:                # DW_OP_lit0..31
            stack.append(op - 0x30)
        elif op == 0x10:                        # DW_OP_constu
            v, p = uleb128(expr, p)
            stack.append(v)
        elif op == 0x11:                        # DW_OP_consts
            v, p = sleb128(expr, p)
            stack.append(v & mask)
        elif op == 0x23:                        # DW_OP_plus_uconst
            v, p = uleb128(expr, p)
            stack.append((stack.pop() + v) & mask)
        elif op == 0x22:                        # DW_OP_plus
            b, a = stack.pop(), stack.pop()
            stack.append((a + b) & mask)
        elif op == 0x06:                        # DW_OP_deref
            stack.append(int.from_bytes(read(stack.pop(), ptr_size), "little"))
        elif op == 0x9F:                        # DW_OP_stack_value
            if not stack:
                raise _Unknown()
            return stack[-1]
        else:                                   # entry values, pieces, ...: not read here
            raise _Unknown()
    if nested:
        if in_reg is not None:
            return in_reg
        if not stack:
            raise _Unknown()
        return stack[-1]
    if in_reg is not None:
        return in_reg
    if not stack:
        raise _Unknown()
    return int.from_bytes(read(stack[-1], ptr_size), "little")
