"""The one-line views of LuaJIT's types that gdb's pretty-printers
(commands/hosts/printers.py) and lldb's type summaries (commands/hosts/lldbhost.py)
show: a Lua value as lval prints it, a referenced object, a global_State.
Nothing here knows a debugger: each takes a VM (base.display_vm) and
addresses."""
from typing import Any, Callable

from ..gdb_ext.errors import CorruptError, FaultError, LjError
from ..gdb_ext.vm.check import check_global
from ..gdb_ext.vm.objects import KIND_GCT, Value, decode_tv, gc_kind_at, looks_like_gc_object, read_object
from ..gdb_ext.vm.state import VM
from .base import param
from .format import value_text

# The object kinds of the types that name a GC object (None: read the kind
# from the object's header).
GC_TYPES = {"GCstr": "str", "GCtab": "table", "GCfunc": "func", "GCfuncL": "func",
            "GCfuncC": "func", "GCproto": "proto", "GCudata": "udata", "GCcdata": "cdata",
            "GCupval": "upval", "GCtrace": "trace", "lua_State": "thread", "GCobj": None}


def guarded(vm: Any, fn: Callable[[Any], str]) -> str:
    """fn(vm), or <unreadable: why> when the memory does not read as it
    should."""
    try:
        return fn(vm)
    except (FaultError, CorruptError, LjError) as e:
        return "<unreadable: %s>" % e


def tvalue_text(vm: Any, addr: int, bits: Any = None) -> str:
    """The TValue at addr as lval prints it (or the one whose 64 bits are
    bits: a debugger's copy that has no address)."""
    if bits is None:
        bits = vm.t.u64(addr, "TValue")
    return value_text(vm, decode_tv(vm, bits), param("max-string"))


def object_text(vm: Any, kind: Any, addr: int) -> str:
    """The GC object at addr, of kind (GC_TYPES' values; None: whatever its
    header says, when it reads like one), as lval prints it."""
    if not addr:
        return "NULL"
    if kind is None:
        # A bare reference: an object only if its header reads like one.
        actual = looks_like_gc_object(vm, addr)
        if actual is None:
            return "0x%x <not a GC object>" % addr
    else:
        actual = gc_kind_at(vm, addr)
    if kind is not None and actual != kind:
        return "0x%x <not a %s: its header says %s>" % (addr, kind, actual)
    read_object(vm, actual, addr)
    it = (~KIND_GCT[actual]) & 0xFFFFFFFF
    return value_text(vm, Value(actual, 0, it, addr=addr), param("max-string"))


def global_text(vm: Any, G: int) -> str:
    """A global_State: its heap size, GC state and main thread."""
    if not G:
        return "NULL"
    g = VM(vm.t, vm.lay, G)
    check_global(vm.t, vm.lay, G)
    return "(global_State *)0x%x: Lua heap %d bytes (g->gc.total), GC %s, main thread " \
        "(lua_State *)0x%x" % (G, g.gc_total, g.gc_state[1], g.main_L)
