"""The base of the GC object decoders (objects.py): a header read in one
piece, a member of it, strings, and a number as Lua writes it.  Apart so
that ffitypes (which objects' Cdata asks for a ctype's size) reads names
and numbers without importing objects back."""
from typing import Optional, TYPE_CHECKING
from .. import consts as C
from ..errors import CorruptError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Struct
    from .state import VM


def field(buf: bytes, s: 'Struct', name: str) -> int:
    f = s.field(name)
    return int.from_bytes(buf[f.offset:f.offset + f.size], "little")


class GCObj(object):
    gct_expected = None
    struct_name = None

    def __init__(self, vm: 'VM', addr: int) -> None:
        s = self._struct(vm)
        self.addr = addr
        self.buf = vm.t.read(addr, s.size, "%s at 0x%x" % (s.name, addr))
        self.gct = field(self.buf, s, "gct")
        self.marked = field(self.buf, s, "marked")
        if self.gct_expected is not None and self.gct != self.gct_expected:
            raise CorruptError("object at 0x%x has gct %d, expected %d (%s)"
                               % (addr, self.gct, self.gct_expected, s.name), addr)

    def _struct(self, vm):
        return vm.lay.s[self.struct_name]

    def _f(self, vm, name):
        return field(self.buf, self._struct(vm), name)


class Str(GCObj):
    gct_expected = C.GCT_STR
    struct_name = "GCstr"

    def __init__(self, vm: 'VM', addr: int, limit: Optional[int] = None) -> None:
        GCObj.__init__(self, vm, addr)
        self.len = self._f(vm, "len")
        self.data_addr = addr + vm.lay.str.size
        n = self.len if limit is None else min(self.len, limit)
        bound = getattr(vm, "size_bound", 1 << 31)
        if self.len > bound:
            raise CorruptError("string at 0x%x claims length %d, more than g->gc.total (%d)"
                               % (addr, self.len, bound), addr)
        self.data = vm.t.read(self.data_addr, n, "string data of 0x%x" % addr) if n else b""
        self.truncated = n < self.len


def str_text(vm: 'VM', addr: int, limit: Optional[int] = None) -> bytes:
    """The bytes of a GCstr (up to limit)."""
    return Str(vm, addr, limit).data


def number_text(x: float) -> str:
    """A number as Lua's tostring() writes it (LUAI_NUMFFORMAT %.14g)."""
    if x != x:
        # LuaJIT prints every NaN as nan, whatever its sign bit (checked on
        # 2.0, 2.1, Debian's and OpenResty's: tostring(0/0), tostring(-(0/0))).
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return "%.14g" % x
