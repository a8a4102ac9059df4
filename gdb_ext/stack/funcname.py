"""The name of a frame's function as LuaJIT gives it to debug.getinfo(level,
"n") (R lj_debug.c lj_debug_funcname, lj_debug_slotname): read from the
caller's bytecode at the instruction that called it, never from the
function itself.

- A call (CALL, CALLM, CALLT, CALLMT, ITERC, ITERN: the ops whose
  metamethod column in lj_bc.h's BCDEF is `call`): the name of the slot the
  called function was in.  A local variable active there ("local"),
  else the instruction that last wrote that slot, scanning back: GGET
  ("global"), TGETS ("field", or "method" when the instruction before it
  copies the table into the self slot, as `obj:m()` compiles), UGET
  ("upvalue"), MOV (the slot it copied, named again from there).  An
  instruction that writes a range of slots from below (a call's results,
  KNIL) ends the scan: no name.  ITERC calls the slot three below its A
  (the for loop's generator).
- Any other instruction with a metamethod (index, newindex, arithmetic,
  concat, comparisons, len, unm; gc for the instructions that allocate):
  ("metamethod", "__" + its name).
- No name: the bottom frame of a thread, a function whose caller is not a
  Lua function (a C function, pcall, the thread's own base frame), or a
  caller whose pc is not known.  A tail call leaves the caller's frame to
  the callee, so LuaJIT names it as the function it replaced; so does this.
"""
from typing import Dict, Optional, Tuple, TYPE_CHECKING
import struct

from ..errors import CorruptError, FaultError
from ..jit.bytecode import BC_MODES, opcodes
from ..vm.objects import str_text
from ..vm.protoinfo import local_names, upvalue_names

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .frames import Frame
    from ..vm.objects import Proto
    from ..vm.state import VM

# lj_bc.h BCDEF's metamethod column: op -> MMS name, for the ops that have
# one (the same in 2.0, 2.1 and the forks).
BC_MM = {
    "ISLT": "lt", "ISGE": "lt", "ISLE": "le", "ISGT": "le",
    "ISEQV": "eq", "ISNEV": "eq", "ISEQS": "eq", "ISNES": "eq", "ISEQN": "eq", "ISNEN": "eq",
    "ISEQP": "eq", "ISNEP": "eq", "UNM": "unm", "LEN": "len",
    "ADDVN": "add", "SUBVN": "sub", "MULVN": "mul", "DIVVN": "div", "MODVN": "mod",
    "ADDNV": "add", "SUBNV": "sub", "MULNV": "mul", "DIVNV": "div", "MODNV": "mod",
    "ADDVV": "add", "SUBVV": "sub", "MULVV": "mul", "DIVVV": "div", "MODVV": "mod",
    "POW": "pow", "CAT": "concat", "FNEW": "gc", "TNEW": "gc", "TDUP": "gc",
    "GGET": "index", "GSET": "newindex", "TGETV": "index", "TGETS": "index", "TGETB": "index",
    "TGETR": "index", "TSETV": "newindex", "TSETS": "newindex", "TSETB": "newindex",
    "TSETM": "newindex", "TSETR": "newindex",
    "CALLM": "call", "CALL": "call", "CALLMT": "call", "CALLT": "call", "ITERC": "call",
    "ITERN": "call",
}
BCM_DST, BCM_BASE = 1, 2
# A scan back over more instructions than this gives up (no name): a
# prototype has at most 2^26 instructions, a name is a few above its call.
MAX_SCAN = 1 << 16

Name = Optional[Tuple[str, str]]


def called_as(vm: 'VM', fr: 'Frame') -> Name:
    """(namewhat, name) of frame fr as debug.getinfo gives them, or None
    where LuaJIT gives none (or the caller's bytecode does not read): from
    the call site the frame walk found for it (Frame.site)."""
    if fr.site is None:
        return None
    try:
        return call_site_name(vm, fr.site[0], fr.site[1])
    except (FaultError, CorruptError):
        return None


def call_site_name(vm: 'VM', pt: 'Proto', pos: int) -> Name:
    """The name the instruction at bytecode position pos of pt gives the
    function it called (module docstring).  Kept in the prototype's memo:
    a profile asks for the same few call sites many times."""
    memo: Dict[int, Name] = pt.memo.setdefault("funcnames", {})
    if pos in memo:
        return memo[pos]
    got = None
    if 0 <= pos < pt.sizebc:
        ops = opcodes(vm)
        ins = _ins(vm, pt, pos)
        op = ops.get(ins & 0xFF)
        mm = BC_MM.get(op)
        if mm == "call":
            slot = (ins >> 8) & 0xFF
            if op == "ITERC":
                slot -= 3
            got = _slot_name(vm, pt, ops, pos, slot)
        elif mm is not None:
            got = ("metamethod", "__" + mm)
    memo[pos] = got
    return got


def _ins(vm, pt, pos):
    """Instruction pos of pt, from the prototype's bytecode read once (a
    scan back reads many; a live process's reads are system calls)."""
    words = pt.memo.get("bcwords")
    if words is None:
        n = max(0, min(pt.sizebc, 1 << 20))
        data = vm.t.read(pt.bc, 4 * n, "bytecode of prototype 0x%x" % pt.addr)
        words = pt.memo["bcwords"] = struct.unpack("<%dI" % n, data)
    if not 0 <= pos < len(words):
        raise CorruptError("bytecode %d of prototype 0x%x: it has %d" % (pos, pt.addr, len(words)),
                           pt.addr)
    return words[pos]


def _slot_name(vm, pt, ops, pos, slot):
    """R lj_debug.c lj_debug_slotname."""
    ip = pos
    steps = 0
    while True:
        for s, name in local_names(vm, pt, ip):
            if s == slot:
                return ("local", name)
        restart = False
        while ip - 1 > 0 and steps < MAX_SCAN:
            ip -= 1
            steps += 1
            ins = _ins(vm, pt, ip)
            op = ops.get(ins & 0xFF, "")
            ra = (ins >> 8) & 0xFF
            mode_a = BC_MODES.get(op, (0, 0, 0))[0]
            if mode_a == BCM_BASE:
                if slot >= ra and (op != "KNIL" or slot <= ins >> 16):
                    return None
            elif mode_a == BCM_DST and ra == slot:
                if op == "MOV":
                    slot = ins >> 16
                    restart = True
                    break
                if op == "GGET":
                    return ("global", _kstr(vm, pt, ins >> 16))
                if op == "TGETS":
                    name = _kstr(vm, pt, (ins >> 16) & 0xFF)
                    if ip > 0:
                        prev = _ins(vm, pt, ip - 1)
                        if ops.get(prev & 0xFF) == "MOV" and \
                                (prev >> 8) & 0xFF == ra + 1 + vm.lay.fr2 and \
                                prev >> 16 == ins >> 24:
                            return ("method", name)
                    return ("field", name)
                if op == "UGET":
                    names = upvalue_names(vm, pt)
                    d = ins >> 16
                    return ("upvalue", names[d] if d < len(names) else "")
                return None
        if not restart:
            return None


def _kstr(vm, pt, d):
    """The string constant proto_kgc(pt, ~d), as text."""
    rs = vm.lay.ref_size
    if d >= pt.sizekgc:
        raise CorruptError("constant %d of prototype 0x%x: it has %d" % (d, pt.addr, pt.sizekgc),
                           pt.addr)
    a = vm.t.uint(pt.k - (d + 1) * rs, rs, "GC constant %d" % d)
    return str_text(vm, a, 1 << 16).decode("utf-8", "replace")
