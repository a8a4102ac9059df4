"""A trace's IR and snapshots, listed as LuaJIT's own jit/dump.lua lists
them with its `i` and `s` flags (`-jdump=is`, plain text): the section
"---- TRACE n IR" that jit.dump writes when the trace stops.

Everything is read from memory: the instructions of GCtrace.ir (R lj_ir.h
IRIns: op1, op2, ot = o << 8 | t, prev), constants below REF_BIAS, the
snapshots and their map (R lj_jit.h SnapShot, SnapEntry), the operand modes
of each opcode from the build's own table lj_ir_mode[] (R lj_ir.c).  Names
are the build's own: its IROp, IRFieldID, IRCallID and IRFPMathOp
enumerators, written as buildvm writes them into jit/vmdef.lua (R
host/buildvm.c emit_vmdef: irnames padded to 6, irfield lower case with the
first '_' as '.', irfpm lower case).

Mirrors, R = upstream 2.1 (the same code in Debian's and OpenResty's 2.1),
20 = upstream 2.0; file:line into each tree's src/:
  dump_ir, printsnap, formatk,     R jit/dump.lua:297-537 (20: jit/dump.lua:
  dumpcallfunc, dumpcallargs,      256-470): 2.0's formatk knows no pointer
  litname, irtype_text             types, denormals, frame slots or "----"
  jit.util.traceir/tracek/         R lib_jit.c:300-364
  tracesnap
  lj_ir_kvalue                     R lj_ir.c:378-403: what a constant is to Lua
  64-bit constants                 R lj_ir.h:587-596: in the next slot (2.1);
                                   20 lj_ir.h:532-541: through a 32-bit pointer
                                   (J->k64 chains)
  "%p", "%+.14g", "%+a"            R lj_strfmt.c lj_strfmt_wptr,
                                   lj_strfmt_num.c lj_strfmt_wfnum
  cdata's tostring                 R lib_ffi.c ffi_meta___tostring

The one difference from jit.dump's text: a byte above 127 in a string
constant is written \\ddd (as lbc does; jit.dump writes the byte).
"""
from typing import List, Optional, TYPE_CHECKING, Tuple
import struct

from .bytecode import ctl_text, ascii_text, location, ptr_text
from ..errors import CorruptError, NotLuaJITError
from .jit import trace_by_number
from ..vm.objects import Func, Proto, Str

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .jit import JitState, TraceObj
    from ..vm.state import VM

# R jit/dump.lua irtype_text, by IRType (lj_ir.h IRTDEF), the same in 2.0.
_IRT = (("NIL", "nil"), ("FALSE", "fal"), ("TRUE", "tru"), ("LIGHTUD", "lud"), ("STR", "str"),
        ("P32", "p32"), ("THREAD", "thr"), ("PROTO", "pro"), ("FUNC", "fun"), ("P64", "p64"),
        ("CDATA", "cdt"), ("TAB", "tab"), ("UDATA", "udt"), ("FLOAT", "flt"), ("NUM", "num"),
        ("I8", "i8 "), ("U8", "u8 "), ("I16", "i16"), ("U16", "u16"), ("INT", "int"),
        ("U32", "u32"), ("I64", "i64"), ("U64", "u64"), ("SOFTFP", "sfp"))
IRT_STR, IRT_FUNC, IRT_TAB, IRT_UDATA, IRT_CDATA = 4, 8, 11, 12, 10
IRT_PROTO, IRT_THREAD, IRT_I64 = 7, 6, 21

# lj_ir.h IRMode: operand modes in lj_ir_mode[op] & 3 (op1) and & 12 (op2).
IRM_REF, IRM_LIT, IRM_NONE = 0, 1, 3

# R lj_target.h:24 RID_SUNK, RID_SINK (RID_INIT - 2, - 1): ir->r of what
# allocation sinking removed.
RID_SUNK, RID_SINK = 253, 254

# lj_jit.h SnapEntry flags and jit/dump.lua's special cases.
SNAP_FRAME, SNAP_CONT, SNAP_SOFTFPNUM = 0x10000, 0x20000, 0x80000
SNAP_FR2_SLOT1 = 0x1057fff          # SNAP(1, SNAP_FRAME | SNAP_NORESTORE, REF_NIL)
BIAS_NUMBER = 2.0 ** 52 + 2.0 ** 51
DENORMAL_LIMIT = 2.0 ** -1026

# jit/dump.lua litname: the literal op2 of these ops, by name.
XLOAD_NAMES = ("", "R", "V", "RV", "U", "RU", "VU", "RVU")
TMPREF_NAMES = ("", "IN", "OUT", "INOUT", "", "", "OUT2", "INOUT2")
BUFHDR_NAMES = ("RESET", "APPEND", "WRITE")
TOSTR_NAMES = ("INT", "NUM", "CHAR")

MAX_IR = 1 << 16                    # IRRef1 is uint16_t


def _enum(vm, member, prefix):
    """{value: name without prefix} of the enumeration holding `member`."""
    members = vm.t.enum_members(member)
    if not members:
        raise NotLuaJITError("the debug information has no enumeration with %s (lj_ir.h): "
                             "cannot name the IR" % member)
    return {v: k[len(prefix):] for k, v in members.items()
            if k.startswith(prefix) and not k[len(prefix):].startswith("_")}


class IRNames(object):
    """The build's IR vocabulary, read once per VM (vm.cache)."""

    def __init__(self, vm: 'VM') -> None:
        t = vm.t
        self.ops = {v: "%-6s" % n for v, n in _enum(vm, "IR_SLOAD", "IR_").items()}
        self.fields = {}
        for v, n in _enum(vm, "IRFL_TAB_META", "IRFL_").items():
            self.fields[v] = n.lower().replace("_", ".", 1)
        self.calls = _enum(vm, "IRCALL_lj_str_cmp", "IRCALL_")
        self.fpm = {v: n.lower() for v, n in _enum(vm, "IRFPM_FLOOR", "IRFPM_").items()}
        # By name: the enumeration also has aliases (IRT_PGC, IRT_INTP ...).
        irt = vm.t.enum_members("IRT_NUM") or {}
        self.types = {}
        for i, (name, text) in enumerate(_IRT):
            if irt.get("IRT_" + name) != i:
                raise NotLuaJITError("IRT_%s is %s here, where jit/dump.lua's type table has %d"
                                     % (name, irt.get("IRT_" + name), i))
            self.types[i] = text
        nops = max(self.ops) + 1
        addr = t.symbol("lj_ir_mode")
        if addr is None:
            raise NotLuaJITError("the symbol lj_ir_mode (lj_ir.c) is missing: cannot tell the "
                                 "IR's operand modes")
        self.modes = t.read(addr, nops, "lj_ir_mode[%d]" % nops)
        self.v20 = vm.lay.branch == "2.0"


def ir_names(vm: 'VM') -> IRNames:
    cache = vm.cache("irnames")
    if "names" not in cache:
        cache["names"] = IRNames(vm)
    return cache["names"]


def hex_float(x: float) -> str:
    """LuaJIT's "%+a" of a non-zero finite x (R lj_strfmt_num.c): a denormal
    is normalised to 0x1.; the fewest hex digits that are exact."""
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    e = (bits >> 52) & 0x7ff
    m = bits & ((1 << 52) - 1)
    if e:
        e -= 1023
    else:
        shift = 53 - m.bit_length()
        e = -1022 - shift
        m = (m << shift) & ((1 << 52) - 1)
    digits = ("%013x" % m).rstrip("0")
    return "%s0x1%s%sp%+d" % ("-" if bits >> 63 else "+", "." if digits else "", digits, e)


def g14(x: float, v20: bool) -> str:
    """"%+.14g" as the build's string.format writes it: the C library's for
    finite numbers; its own text for the others (R lj_strfmt_num.c: nan,
    +inf, -inf; 20 lib_string.c string.format with lj_str_bufnum: nan,
    inf, -inf)."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return ("inf" if v20 else "+inf") if x > 0 else "-inf"
    return "%+.14g" % x


class TraceIR(object):
    """One trace's IR, constants and snapshots, read at once."""

    def __init__(self, vm: 'VM', js: 'JitState', T: 'TraceObj') -> None:
        self.vm, self.T = vm, T
        self.names = ir_names(vm)
        lay = vm.lay
        self.bias = js.ref_bias
        self.nk, self.nins = T.nk, T.nins
        if not (0 < self.nk <= self.bias < self.nins <= MAX_IR):
            raise CorruptError("trace %d has IR refs %d..%d around REF_BIAS %d"
                               % (T.traceno, self.nk, self.nins, self.bias), T.addr)
        self.ir_addr = T._f(vm, "ir")
        # (A 64-bit constant's second slot, in 2.1, is below REF_BIAS too.)
        self.ir = vm.t.read(self.ir_addr + 8 * self.nk, 8 * (self.nins - self.nk),
                            "IR of trace %d" % T.traceno)
        self.old_k64 = lay.J.has("k64") and lay.J.field("k64").size == lay.mref_size
        ss = lay.s["SnapShot"]
        self.snaps = []
        if T.nsnap:
            data = vm.t.read(T.snap, ss.size * T.nsnap, "snapshots of trace %d" % T.traceno)
            smap = vm.t.read(T.snapmap, 4 * T.nsnapmap, "snapshot map of trace %d" % T.traceno)
            for i in range(T.nsnap):
                b = i * ss.size
                mapofs = int.from_bytes(data[b + ss.mapofs:b + ss.mapofs + 4], "little")
                ref = int.from_bytes(data[b + ss.ref:b + ss.ref + 2], "little")
                nslots, nent = data[b + ss.nslots], data[b + ss.nent]
                if mapofs + nent > T.nsnapmap:
                    raise CorruptError("snapshot %d of trace %d maps entries %d..%d of %d"
                                       % (i, T.traceno, mapofs, mapofs + nent, T.nsnapmap),
                                       T.addr)
                ents = struct.unpack_from("<%dI" % nent, smap, 4 * mapofs)
                self.snaps.append((ref - self.bias, nslots, ents))

    # --- jit.util.traceir / tracek ------------------------------------------
    def raw(self, ref: int) -> Tuple[int, int, int, int]:
        """(o, ot, op1, op2) of the instruction at absolute ref."""
        if not self.nk <= ref < self.nins:
            raise CorruptError("trace %d: IR ref %d is outside %d..%d"
                               % (self.T.traceno, ref, self.nk, self.nins - 1), self.T.addr)
        op1, op2, ot = struct.unpack_from("<HHH", self.ir, 8 * (ref - self.nk))
        return ot >> 8, ot, op1, op2

    def traceir(self, ins: int) -> Tuple[int, int, int, int]:
        """jit.util.traceir(tr, ins): (mode, ot, op1, op2), refs unbiased."""
        o, ot, op1, op2 = self.raw(ins + self.bias)
        if o >= len(self.names.modes):
            raise CorruptError("trace %d: IR %04d has opcode %d, which this build does not have"
                               % (self.T.traceno, ins, o), self.T.addr)
        m = self.names.modes[o]
        if m & 3 == IRM_REF:
            op1 -= self.bias
        if (m >> 2) & 3 == IRM_REF:
            op2 -= self.bias
        return m, ot, op1, op2

    def _slot(self, ref):
        """The 8 bytes of IR slot ref (a constant's second slot included)."""
        if not self.nk <= ref < self.nins:
            raise CorruptError("trace %d: a constant's value would be at IR ref %d, outside "
                               "%d..%d" % (self.T.traceno, ref, self.nk, self.nins - 1),
                               self.T.addr)
        return self.ir[8 * (ref - self.nk):8 * (ref + 1 - self.nk)]

    def _word(self, ref, off, size):
        return int.from_bytes(self._slot(ref)[off:off + size], "little")

    def _k64(self, ref):
        """The 8 bytes of a KNUM or KINT64 at ref."""
        if self.old_k64:
            p = self._word(ref, 0, 4)
            return self.vm.t.read(p, 8, "64-bit IR constant at 0x%x" % p)
        return self._slot(ref + 1)

    def _kref(self, ref):
        """A KGC's object or a KPTR's pointer (2.1 GC64: in the next slot)."""
        lay = self.vm.lay
        if lay.gc64 and not self.names.v20:
            return self._word(ref + 1, 0, 8)
        return self._word(ref, 0, 4)

    def formatk(self, ins: int, sn: Optional[int] = None) -> str:
        """jit/dump.lua formatk of the constant at unbiased ins (< 0)."""
        v20 = self.names.v20
        ref = ins + self.bias
        o, ot, op1, op2 = self.raw(ref)
        slot = None
        op = self.names.ops.get(o, "")
        if op == "KSLOT ":
            slot = op2
            ref = op1
            o, ot, op1, op2 = self.raw(ref)
            op = self.names.ops.get(o, "")
        t = ot & 31
        num = None
        if op in ("KINT  ",):
            num = float(struct.unpack("<i", struct.pack("<I", self._word(ref, 0, 4)))[0])
        elif op in ("KPTR  ", "KKPTR ", "KNULL ") and v20:
            # 2.0's lj_ir_kvalue makes these light userdata: "[%p]".
            p = 0 if op == "KNULL " else self._kref(ref)
            return "%-4s" % ("[%s]" % ptr_text(p) if p else "NULL") + (
                " @%d" % slot if slot is not None else "")
        elif op in ("KPTR  ", "KKPTR "):
            num = float(self._kref(ref))
        elif op == "KNULL ":
            num = 0.0
        elif op == "KNUM  ":
            num = struct.unpack("<d", self._k64(ref))[0]
        if num is not None:
            if not v20 and t < 12:
                s = "NULL" if num == 0 else "[0x%08x]" % int(num)
            elif not v20 and (sn or 0) & (SNAP_FRAME | SNAP_CONT):
                s = "contpc" if sn & SNAP_CONT else "ftsz"
            elif num == BIAS_NUMBER:
                s = "bias"
            elif not v20 and 0 < num < DENORMAL_LIMIT:
                s = hex_float(num)
            else:
                s = g14(num, v20)
        elif op == "KINT64":
            v = struct.unpack("<q", self._k64(ref))[0]
            s = "%d" % v if t == IRT_I64 else "%dLL" % v
            if t == IRT_I64 and v >= 0:
                s = "+" + s
        elif op == "KPRI  ":
            if not v20 and sn == SNAP_FR2_SLOT1:
                return "----"
            s = ("nil", "false", "true")[t] if t < 3 else "?"
        elif op == "KGC   ":
            s = self._gc_text(t, self._kref(ref))
        else:
            raise CorruptError("trace %d: IR ref %d is %s, not a constant"
                               % (self.T.traceno, ref, op.strip() or "op %d" % o), self.T.addr)
        s = "%-4s" % s
        if slot is not None:
            s = "%s @%d" % (s, slot)
        return s

    def _gc_text(self, t, addr):
        vm = self.vm
        if t == IRT_STR:
            st = Str(vm, addr, 21)
            escaped = ctl_text(st.data)
            # '%.20s' of the escaped bytes when the string is longer than 20.
            if st.len > 20:
                return '"%s"~' % ascii_text(escaped[:20].decode("latin-1"))
            return '"%s"' % ascii_text(escaped.decode("latin-1"))
        if t == IRT_FUNC:
            return func_text(vm, addr)
        if t == IRT_TAB:
            return "{%s}" % ptr_text(addr)
        if t == IRT_UDATA:
            return "userdata:%s" % ptr_text(addr + vm.lay.ud.size)
        if t == IRT_CDATA:
            return cdata_tostring(vm, addr)
        if t == IRT_PROTO:
            return "proto: %s" % ptr_text(addr)
        if t == IRT_THREAD:
            return "thread: %s" % ptr_text(addr)
        return "%s: %s" % (self.names.types.get(t, "?").strip(), ptr_text(addr))

    # --- jit/dump.lua dump_ir -------------------------------------------------
    def snap_text(self, snap: Tuple[int, int, Tuple[int, ...]]) -> str:
        """printsnap: the slots of one snapshot, then ']'."""
        ref, nslots, ents = snap
        out = []
        n = 0
        for s in range(nslots):
            sn = ents[n] if n < len(ents) else 0xff000000
            if sn >> 24 == s:
                n += 1
                r = (sn & 0xffff) - 0x8000
                if r < 0:
                    out.append(self.formatk(r, sn))
                elif sn & SNAP_SOFTFPNUM:
                    out.append("%04d/%04d" % (r, r + 1))
                else:
                    out.append("%04d" % r)
                out.append("|" if sn & SNAP_FRAME else " ")
            else:
                out.append("---- ")
        out.append("]")
        return "".join(out)

    def _callfunc(self, ins):
        ctype = None
        if ins > 0:
            m, ot, op1, op2 = self.traceir(ins)
            if ot & 31 == 0:            # nil type: CARG(func, ctype)
                ins = op1
                ctype = self.formatk(op2)
        if ins < 0:
            return "[0x%x](" % self._kaddr(ins), ctype
        return "%04d (" % ins, ctype

    def _kaddr(self, ins):
        """tonumber(jit.util.tracek(tr, ins)) of a call's function constant."""
        ref = ins + self.bias
        o, ot, op1, op2 = self.raw(ref)
        op = self.names.ops.get(o, "")
        if op in ("KINT64", "KNUM  "):
            fmt = "<q" if op == "KINT64" else "<d"
            return int(struct.unpack(fmt, self._k64(ref))[0]) & 0xFFFFFFFFFFFFFFFF
        if op == "KINT  ":
            return self._word(ref, 0, 4)
        return self._kref(ref)

    def _callargs(self, ins):
        if ins < 0:
            return self.formatk(ins)
        m, ot, op1, op2 = self.traceir(ins)
        if self.names.ops.get(ot >> 8) == "CARG  ":
            s = self._callargs(op1)
            return s + " " + (self.formatk(op2) if op2 < 0 else "%04d" % op2)
        return "%04d" % ins

    def _literal(self, op, op2):
        """jit/dump.lua's litname[op][op2], or None."""
        n = self.names
        if op == "SLOAD ":
            flags = "PFTCRI" if n.v20 else "PFTCRIK"
            return "".join(c for i, c in enumerate(flags) if op2 & (1 << i))
        if op == "CONV  ":
            s = n.types.get((op2 >> 5) & 31, "?") + "." + n.types.get(op2 & 31, "?")
            c = op2 >> 12
            if n.v20:
                if op2 & 0x400:
                    s += " trunc"
                elif op2 & 0x800:
                    s += " sext"
                return s + {2: " index", 3: " check"}.get(c, "")
            if op2 & 0x800:
                s += " sext"
            return s + {1: " none", 2: " index", 3: " check"}.get(c, "")
        table = {"XLOAD ": XLOAD_NAMES, "TMPREF": TMPREF_NAMES, "BUFHDR": BUFHDR_NAMES,
                 "TOSTR ": TOSTR_NAMES}.get(op) if not n.v20 else \
            {"XLOAD ": XLOAD_NAMES}.get(op)
        if table is not None:
            return table[op2] if op2 < len(table) else None
        if op in ("FLOAD ", "FREF  "):
            return n.fields.get(op2)
        if op == "FPMATH":
            return n.fpm.get(op2)
        return None

    def ins_text(self, ins: int) -> Optional[str]:
        """The line of instruction ins, or None where jit.dump writes none."""
        m, ot, op1, op2 = self.traceir(ins)
        op = self.names.ops[ot >> 8]
        if op == "LOOP  ":
            return "%04d ------ LOOP ------------" % ins
        if op in ("NOP   ", "CARG  ", "RENAME"):
            return None
        # A sunk allocation or store (ir->r is RID_SINK or RID_SUNK) is '}'.
        rid = self.ir[8 * (ins + self.bias - self.nk) + 6]
        mark = "}" if rid in (RID_SINK, RID_SUNK) else " " if ot & 128 == 0 else ">"
        out = ["%04d %s%s %s %s " % (ins, mark, " " if ot & 64 == 0 else "+",
                                     self.names.types.get(ot & 31, "???"), op)]
        m1, m2 = m & 3, (m >> 2) & 3
        if op.startswith("CALL"):
            ctype = None
            if m2 == IRM_LIT:
                out.append("%-10s  (" % self.names.calls.get(op2, "?"))
            else:
                text, ctype = self._callfunc(op2)
                out.append(text)
            if op1 != -1:
                out.append(self._callargs(op1))
            out.append(")")
            if ctype:
                out.append(" ctype " + ctype)
        elif op == "CNEW  " and op2 == -1:
            out.append(self.formatk(op1))
        elif m1 != IRM_NONE:
            if op1 < 0:
                out.append(self.formatk(op1))
            else:
                out.append(("%04d" if m1 == IRM_REF else "#%-3d") % op1)
            if m2 != IRM_NONE:
                if m2 == IRM_LIT:
                    lit = self._literal(op, op2)
                    if lit is not None:
                        out.append("  " + lit)
                    elif op in ("UREFO ", "UREFC "):
                        out.append("  #%-3d" % (op2 >> 8))
                    else:
                        out.append("  #%-3d" % op2)
                elif op2 < 0:
                    out.append("  " + self.formatk(op2))
                else:
                    out.append("  %04d" % op2)
        return "".join(out)

    def lines(self, with_snapshots: bool = True) -> List[str]:
        """jit/dump.lua dump_ir(tr, dumpsnap, false): the header and one
        line per instruction, with the snapshots in between."""
        out = ["---- TRACE %d IR" % self.T.traceno]
        snapno = 0
        snaps = self.snaps if with_snapshots else []
        snapref = snaps[0][0] if snaps else 65536
        for ins in range(1, self.nins - self.bias):
            if ins >= snapref:
                out.append("....        SNAP   #%-3d [ %s"
                           % (snapno, self.snap_text(snaps[snapno])))
                snapno += 1
                snapref = snaps[snapno][0] if snapno < len(snaps) else 65536
            line = self.ins_text(ins)
            if line is not None:
                out.append(line)
        if snapno < len(snaps):
            out.append("....        SNAP   #%-3d [ %s" % (snapno, self.snap_text(snaps[snapno])))
        return out


def func_text(vm: 'VM', addr: int) -> str:
    """jit/dump.lua fmtfunc(f): a Lua function's location (funcinfo's loc),
    a fast function's name (vmdef.ffnames), else C:address."""
    fn = Func(vm, addr)
    if fn.is_lua:
        return location(vm, Proto(vm, fn.proto), 0)
    if fn.ffid >= 2:
        from ..vm.runtime import builtin_names
        cache = vm.cache("irnames")
        if "ff" not in cache:
            cache["ff"] = builtin_names(vm)
        return cache["ff"].get(fn.ffid, "builtin#%d" % fn.ffid)
    return "C:%x" % fn.cfunc


def cdata_tostring(vm: 'VM', addr: int) -> str:
    """tostring() of a cdata (R lib_ffi.c ffi_meta___tostring), without a
    __tostring metamethod: "cdata<TYPE>: ADDRESS", 64-bit integers as
    123LL / 123ULL, enums with their number, ctype<TYPE> for a ctype."""
    from ..vm.ffitypes import CTF_UNSIGNED, CTMASK_CID, ctypes_of
    from ..vm.objects import Cdata
    cd = Cdata(vm, addr)
    ct = ctypes_of(vm)
    t = vm.t
    cid, p = cd.ctypeid, cd.payload
    if cid == ct.ctid_ctypeid:
        return "ctype<%s>" % ct.repr(t.u32(p, "ctype id"))
    kind, info, size, sib, name, rcid = ct.raw(cid)
    if kind == "PTR" and info & CTF_UNSIGNED:          # a reference (CTF_REF)
        p = t.uint(p, ct.ptr_size, "reference")
        kind, info, size, sib, name, rcid = ct.raw(info & CTMASK_CID)
    if kind == "NUM" and size == 8 and not info & 0x0C000000:     # not bool, not FP
        v = t.uint(p, 8, "64-bit integer")
        if info & CTF_UNSIGNED:
            return "%dULL" % v
        return "%dLL" % (v - (1 << 64) if v >> 63 else v)
    if kind == "FUNC":
        p = t.uint(p, ct.ptr_size, "function pointer")
    elif kind == "ENUM":
        return "cdata<%s>: %d" % (ct.repr(cid), t.u32(p, "enum value"))
    elif kind == "PTR":
        p = t.uint(p, size, "pointer")
    return "cdata<%s>: %s" % (ct.repr(cid), ptr_text(p))


def trace_ir(vm: 'VM', js: 'JitState', n: int) -> Optional[TraceIR]:
    """The TraceIR of live trace n, or None when there is no such trace."""
    T = trace_by_number(vm, js, n)
    if T is None:
        return None
    return TraceIR(vm, js, T)
