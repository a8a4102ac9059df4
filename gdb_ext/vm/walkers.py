"""Walks over GC object lists, bounded by what the state says."""
from itertools import compress
from typing import Any, Iterator, List, Optional, TYPE_CHECKING, Tuple
from .. import consts as C
from ..errors import CorruptError, FaultError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .objects import Thread
    from .state import VM

# No GC object is smaller than this (GCstr/GCcdata headers: 16/8 bytes).
_MIN_OBJECT = 8


def root_objects(vm: 'VM', mem: Any = None) -> Iterator[Tuple[int, int]]:
    """(address, gct) of every object on g->gc.root, in list order.  The
    walk is bounded by gc.total / 8 objects; a longer list is a cycle.  A
    cycle is also found directly (Brent's method: the list must not come
    back to the object seen at step 2^k), so a corrupt gc.total does not
    make the walk endless.  mem: a pages.PageCache to read the headers
    through (large walks), else the target."""
    for addrs, gcts in root_chunks(vm, mem):
        yield from zip(addrs, gcts)


# Objects a chunk of root_chunks holds: a walk of 10^6 objects pays for a
# generator's step a chunk, not an object.
_CHUNK = 4096


def root_chunks(vm: 'VM', mem: Any = None) -> Iterator[Tuple[List[int], bytearray]]:
    """root_objects' walk, in chunks: (addresses, their gcts) of up to
    _CHUNK objects at a time; the objects before a broken link come in a
    last chunk before the error."""
    lay = vm.lay
    bound = vm.gc_total // _MIN_OBJECT + 16
    o = vm.gref(vm.G + lay.G.gc_root, "g->gc.root")
    gct_off = lay.str.gct
    rs = lay.ref_size
    need = max(gct_off + 1, rs)
    n = 0
    mark, next_mark = 0, 1
    pb, pbuf, pe = 0, b"", 0
    addrs, gcts = [], bytearray()
    from_bytes = int.from_bytes
    try:
        while o:
            n += 1
            if n > bound:
                raise CorruptError("g->gc.root list is longer than gc.total allows "
                                   "(%d objects): a cycle?" % bound, o)
            if o == mark:
                raise CorruptError("g->gc.root list comes back to the object at 0x%x after %d "
                                   "objects: a cycle" % (o, n), o)
            if n == next_mark:
                mark, next_mark = o, 2 * n
            if mem is None:
                pb, pbuf = o, vm.t.read(o, need, "GC object header at 0x%x" % o)
            elif not (pb <= o and o + need <= pe):
                pb, pbuf = mem.window(o, need)
                pe = pb + len(pbuf)
            i = o - pb
            addrs.append(o)
            gcts.append(pbuf[i + gct_off])
            if len(addrs) >= _CHUNK:
                yield addrs, gcts
                addrs, gcts = [], bytearray()
            o = from_bytes(pbuf[i:i + rs], "little")
    except (CorruptError, FaultError):
        if addrs:
            yield addrs, gcts
        raise
    if addrs:
        yield addrs, gcts


def threads_walk(vm: 'VM', mem: Any = None) -> Tuple[List[int], Optional[Exception]]:
    """(threads, error): as all_threads, but a broken root list gives the
    threads found before the break and the error that ended the walk
    (mem: see root_objects)."""
    out = []
    err = None
    T = C.GCT_THREAD
    try:
        for addrs, gcts in root_chunks(vm, mem):
            if gcts.count(T) == len(gcts):
                out.extend(addrs)
            else:
                out.extend(compress(addrs, [g == T for g in gcts]))
    except (CorruptError, FaultError) as e:
        err = e
    try:
        main = vm.main_L
        if main not in out:
            out.append(main)
    except FaultError as e:
        err = err or e
    return out, err


def all_threads(vm: 'VM') -> List[int]:
    """Addresses of every lua_State on the root list (the main thread too)."""
    out = [a for a, gct in root_objects(vm) if gct == C.GCT_THREAD]
    main = vm.main_L
    if main not in out:
        out.append(main)
    return out


def thread_status(vm: 'VM', th: 'Thread', running: Optional[int]) -> str:
    """As coroutine.status says (R lib_base.c:567-581), with 'error' for a
    coroutine that died by an error and 'idle' for a main thread that runs
    no Lua code."""
    if th.addr == running:
        return "running"
    if th.status == C.LUA_YIELD:
        return "suspended"
    if th.status != C.LUA_OK:
        return "error"
    if th.base > th.stack + 8 * (1 + vm.lay.fr2):
        return "normal"
    if th.addr == vm.main_L:
        # The main thread never dies: with no Lua frame it waits for the
        # host to call into Lua again.
        return "idle"
    if th.top == th.base:
        return "dead"
    return "suspended"
