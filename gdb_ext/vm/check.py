"""Whether an address holds a lua_State or a global_State of a consistent
VM (used by state.make_vm for the candidates it is given, and by vmfind's
memory search); Bare is just enough of a VM to decode a thread header."""
from typing import Any, Dict, Optional, TYPE_CHECKING
from ..errors import CorruptError, FaultError, NotLuaJITError
from .objects import Thread

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout
    from ..target import Target


class Caches(object):
    """What a command works out once per VM object (one command) and keeps:
    cache(name) is the VM's own dict of that name (protos read, VM code
    facts, proto sites ...), made on first use."""

    def cache(self, name: str) -> Dict[Any, Any]:
        c = self._caches.get(name)
        if c is None:
            c = self._caches[name] = {}
        return c


def check_thread(target: 'Target', lay: 'Layout', L: int) -> int:
    """Return G if L is a lua_State of a consistent VM; else raise."""
    if not L:
        raise NotLuaJITError("lua_State pointer is NULL")
    try:
        th = Thread(Bare(target, lay), L)
    except CorruptError:
        raise NotLuaJITError("0x%x is not a lua_State: its GC type byte is not 'thread'" % L)
    except FaultError as e:
        raise NotLuaJITError("0x%x is not a lua_State: %s" % (L, e))
    G = th.glref
    check_global(target, lay, G, via="L->glref of 0x%x" % L)
    return G


def check_global(target: 'Target', lay: 'Layout', G: int, via: Optional[str] = None) -> int:
    where = " (reached through %s)" % via if via else ""
    if not G:
        raise NotLuaJITError("global_State pointer is NULL%s" % where)
    try:
        mainL = target.uint(G + lay.G.mainthref, lay.ref_size, "g->mainthref")
        th = Thread(Bare(target, lay), mainL)
    except (FaultError, CorruptError) as e:
        raise NotLuaJITError("0x%x is not a global_State%s: its main thread is unreadable (%s)"
                             % (G, where, e))
    if th.glref != G:
        raise NotLuaJITError("0x%x is not a global_State%s: its main thread 0x%x points to 0x%x"
                             % (G, where, mainL, th.glref))
    return G


class Bare(Caches):
    """Just enough of a VM for decoding a thread header."""

    def __init__(self, t: 'Target', lay: 'Layout', G: Optional[int] = None) -> None:
        self._caches = {}
        self.t = t
        self.lay = lay
        self.G = G
