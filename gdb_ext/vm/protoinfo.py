"""A function prototype's debug information, read as LuaJIT's debug API
reads it (R lj_debug.c lj_debug_line, debug_varname; lineinfo, varinfo and
uvinfo live after the bytecode, up to sizept).  Protos are read once per
command (cached_proto)."""
from typing import List, Optional, TYPE_CHECKING, Tuple
from ..errors import CorruptError
from .objects import Proto

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .state import VM

# R lj_debug.h VARNAMEDEF: internal names of for-loop slots, codes 1..6.
VARNAMES = (None, "(for index)", "(for limit)", "(for step)", "(for generator)",
            "(for state)", "(for control)")
VARNAME__MAX = 7


def debug_line(vm: 'VM', pt: Proto, pos: int) -> Optional[int]:
    """R lj_debug.c lj_debug_line: the line of bytecode position pos."""
    if pos is None or pos > pt.sizebc or not pt.lineinfo:
        return None
    first = pt.firstline
    if pos == pt.sizebc:
        return first + pt.numline
    if pos == 0:
        return first
    # (A prototype's line table never changes while it lives: each line is
    # read once per Proto object.)
    lines = pt.memo.get("lines")
    if lines is None:
        lines = pt.memo["lines"] = {}
    line = lines.get(pos)
    if line is not None:
        return line
    i = pos - 1
    if pt.numline < 256:
        line = first + vm.t.u8(pt.lineinfo + i, "lineinfo")
    elif pt.numline < 65536:
        line = first + vm.t.u16(pt.lineinfo + 2 * i, "lineinfo")
    else:
        line = first + vm.t.u32(pt.lineinfo + 4 * i, "lineinfo")
    lines[pos] = line
    return line


def _uleb128(data, i):
    v = 0
    shift = 0
    while True:
        if i >= len(data):
            raise CorruptError("varinfo ends inside a number")
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7
        if shift > 35:
            raise CorruptError("varinfo number too long")


def proto_debug_block(vm: 'VM', pt: Proto, start: int) -> bytes:
    """Bytes from `start` to the end of the proto (debug info lives there)."""
    end = pt.addr + pt.sizept
    if not start or start < pt.addr or start >= end or pt.sizept > (64 << 20):
        return b""
    return vm.t.read(start, end - start, "debug info of proto 0x%x" % pt.addr)


def cached_proto(vm: 'VM', addr: int) -> Proto:
    """Proto objects are read once per VM object (one command)."""
    cache = vm.cache("protos")
    pt = cache.get(addr)
    if pt is None:
        pt = cache[addr] = Proto(vm, addr)
    return pt


def local_names(vm: 'VM', pt: Proto, pos: int) -> List[Tuple[int, str]]:
    """[(slot index from 0, name)] of the variables active at pos, in slot
    order (R lj_debug.c debug_varname, applied for every slot)."""
    if pos is None or not pt.varinfo:
        return []
    ranges = pt.memo.get("varranges")
    if ranges is None:
        ranges = pt.memo["varranges"] = _var_ranges(vm, pt)
    out = []
    slot = 0
    for name, startpc, endpc in ranges:
        if startpc > pos:
            break
        if pos < endpc:
            out.append((slot, name))
            slot += 1
    return out


def _var_ranges(vm, pt):
    """[(name, startpc, endpc)] from a proto's varinfo, in order."""
    data = proto_debug_block(vm, pt, pt.varinfo)
    out = []
    i = 0
    lastpc = 0
    while i < len(data):
        vn = data[i]
        if vn < VARNAME__MAX:
            if vn == 0:
                break
            name = VARNAMES[vn]
            i += 1
        else:
            j = data.find(b"\0", i)
            if j < 0:
                raise CorruptError("varinfo name is not terminated")
            name = data[i:j].decode("utf-8", "replace")
            i = j + 1
        d, i = _uleb128(data, i)
        startpc = lastpc + d
        lastpc = startpc
        length, i = _uleb128(data, i)
        out.append((name, startpc, startpc + length))
    return out


def upvalue_names(vm: 'VM', pt: Proto) -> List[str]:
    """Names of a proto's upvalues (uvinfo: NUL-terminated, sizeuv of them)."""
    if not pt.uvinfo or not pt.sizeuv:
        return []
    names = pt.memo.get("uvnames")
    if names is None:
        data = proto_debug_block(vm, pt, pt.uvinfo)
        names = pt.memo["uvnames"] = [n.decode("utf-8", "replace")
                                      for n in data.split(b"\0")[:pt.sizeuv]]
    return names
