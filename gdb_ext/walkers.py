"""Walks over GC object lists, bounded by what the state says."""
from . import consts as C
from .errors import CorruptError
from .objects import Thread

# No GC object is smaller than this (GCstr/GCcdata headers: 16/8 bytes).
_MIN_OBJECT = 8


def root_objects(vm):
    """(address, gct) of every object on g->gc.root, in list order.  The
    walk is bounded by gc.total / 8 objects; a longer list is a cycle."""
    lay = vm.lay
    bound = vm.gc_total // _MIN_OBJECT + 16
    o = vm.gref(vm.G + lay.G.gc_root, "g->gc.root")
    gct_off = lay.str.gct
    n = 0
    while o:
        n += 1
        if n > bound:
            raise CorruptError("g->gc.root list is longer than gc.total allows (%d objects): a cycle?"
                               % bound, o)
        hdr = vm.t.read(o, gct_off + 1, "GC object header at 0x%x" % o)
        yield o, hdr[gct_off]
        o = int.from_bytes(hdr[:lay.ref_size], "little")


def all_threads(vm):
    """Addresses of every lua_State on the root list (the main thread too)."""
    out = [a for a, gct in root_objects(vm) if gct == C.GCT_THREAD]
    main = vm.main_L
    if main not in out:
        out.append(main)
    return out


def thread_status(vm, th, running):
    """As coroutine.status says (R lib_base.c:567-581), with 'error' for a
    coroutine that died by an error."""
    if th.addr == running:
        return "running"
    if th.status == C.LUA_YIELD:
        return "suspended"
    if th.status != C.LUA_OK:
        return "error"
    if th.base > th.stack + 8 * (1 + vm.lay.fr2):
        return "normal"
    if th.top == th.base:
        return "dead"
    return "suspended"
