"""Tarantool: which fiber runs each Lua thread, and in what state its
scheduler holds it.

Tarantool runs Lua in its main cord (the tx thread).  Each fiber has its
own C stack; a fiber that runs Lua keeps its lua_State in
fiber->storage.lua.stack.  The cord lists every fiber it has not recycled
in cord->alive (an rlist through fiber->link), names the one running in
cord->fiber, and keeps its scheduler fiber inside itself (cord->sched).
Tarantool's binary carries the DWARF of struct fiber and struct cord, and
the main cord is the static `main_cord` of fiber.c; with none of that this
is not Tarantool (or not one whose layout we know), and nothing is said.
"""
from typing import Dict, TYPE_CHECKING
from ..errors import CorruptError, FaultError

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .state import VM

MAX_FIBERS = 1 << 22
NAME_MAX = 64


class Fiber(object):
    """fid, name, state ('running', 'ready', 'suspended', 'dead'), and
    cancelled (fiber:cancel() asked for it)."""
    __slots__ = ("addr", "fid", "name", "state", "cancelled", "L")

    def __init__(self, addr: int, fid: int, name: str, state: str, cancelled: bool, L: int) -> None:
        self.addr, self.fid, self.name, self.state, self.cancelled, self.L = \
            addr, fid, name, state, cancelled, L

    def describe(self) -> str:
        return 'fiber %d "%s", %s%s' % (self.fid, self.name, self.state,
                                        ", cancelled" if self.cancelled else "")


def fibers(vm: 'VM') -> Dict[int, Fiber]:
    """{lua_State address: Fiber} for the fibers of Tarantool's main cord
    that run Lua, or {} when this process is not Tarantool.  Raises
    FaultError/CorruptError when the fiber list cannot be read."""
    cache = vm.cache("fibers")
    if "by_L" in cache:
        return cache["by_L"]
    out = cache["by_L"] = {}
    t = vm.t
    cord_t = t.type_info("cord")
    fiber_t = t.type_info("fiber")
    mc = t.symbol("main_cord")
    if cord_t is None or fiber_t is None or mc is None:
        return out
    if not (fiber_t.has("storage.lua.stack") and fiber_t.has("fid") and fiber_t.has("link")):
        return out
    ps = t.ptr_size
    link = fiber_t.offset("link")
    ready = t.constant("FIBER_IS_READY")
    dead = t.constant("FIBER_IS_DEAD")
    cancelled = t.constant("FIBER_IS_CANCELLED")
    running = t.ptr(mc + cord_t.offset("fiber"), "cord->fiber")
    head = mc + cord_t.offset("alive")
    node = t.ptr(head + ps, "cord->alive.next")
    n = 0
    while node != head:
        n += 1
        if n > MAX_FIBERS or not node:
            raise CorruptError("the fiber list of main_cord does not come back to its head "
                               "after %d fibers" % n, node)
        f = node - link
        L = t.ptr(f + fiber_t.offset("storage.lua.stack"), "fiber->storage.lua.stack")
        if L:
            flags = t.u32(f + fiber_t.offset("flags"), "fiber->flags")
            if f == running:
                state = "running"
            elif dead is not None and flags & dead:
                state = "dead"
            elif ready is not None and flags & ready:
                state = "ready"
            else:
                state = "suspended"
            out[L] = Fiber(f, t.u32(f + fiber_t.offset("fid"), "fiber->fid"),
                           _name(t, f, fiber_t), state,
                           bool(cancelled is not None and flags & cancelled), L)
        node = t.ptr(node + ps, "fiber->link.next")
    return out


def _name(t, f, fiber_t):
    """fiber->name (a C string, in the fiber or on the heap)."""
    try:
        if fiber_t.has("name") and fiber_t.field("name").size == t.ptr_size:
            p = t.ptr(f + fiber_t.offset("name"), "fiber->name")
        else:
            p = f + fiber_t.offset("name")
        return t.cstring(p, NAME_MAX).decode("utf-8", "replace") if p else "?"
    except (FaultError, CorruptError):
        return "?"
