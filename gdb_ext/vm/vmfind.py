"""Finding LuaJIT VMs by searching the process's memory, for the moments
when no stack frame names one: an idle nginx worker in epoll_wait, an OS
thread outside Lua, a host whose own frames have no debug info.

Every VM is a GG_State (R lj_state.c lua_newstate / lj_state_newstate: one
allocation holding the main lua_State L, then global_State g, jit_State J,
the dispatch table...).  So the main thread's L->glref points exactly
offsetof(GG_State, g) - offsetof(GG_State, L) bytes past the thread itself,
and g->mainthref points back to it.  The search looks for the first half of
that knot: a word whose value is its own address plus a constant.  For a
block of memory the high bytes of that value are the same for 64 KB of
addresses, so bytes.find() does the scan and only its hits are checked in
Python.  Each hit must then pass the checks of a whole VM (check_state), so
a chance match cannot be taken for one.
"""
from typing import Any, Callable, Iterable, List, Optional, TYPE_CHECKING, Tuple
from .. import consts as C
from ..errors import CorruptError, FaultError, NotLuaJITError
from .objects import Thread
from .check import Bare, check_global, check_thread

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..layouts.layout import Layout
    from ..target import Target

CHUNK = 1 << 20
_WINDOW = 1 << 16           # addresses whose value shares its high bytes


class FoundState(object):
    """A VM found in memory: G, its main thread L, and the region (name,
    start) that holds it."""
    __slots__ = ("G", "L", "region")

    def __init__(self, G: int, L: int, region: Tuple[str, int]) -> None:
        self.G, self.L, self.region = G, L, region

    def __repr__(self) -> str:
        return "FoundState(G=0x%x, L=0x%x)" % (self.G, self.L)


def _hits(data, base, K, rs, align):
    """Addresses p in [base, base + len(data) - rs] (aligned) whose rs-byte
    little-endian word equals p + K."""
    out = []
    n = len(data)
    p = base + (-base % align)
    last = base + n - rs
    mask = (1 << (8 * rs)) - 1
    while p <= last:
        v = p + K
        if v < 0 or v > mask:
            p += align
            continue
        hi = v >> 16
        # p stays in this window while (p + K) >> 16 == hi.
        wend = min(last + 1, ((hi + 1) << 16) - K)
        pat = hi.to_bytes(rs - 2, "little")
        lo = p - base + 2
        hi_end = wend - base + rs
        j = data.find(pat, lo, hi_end)
        while j >= 0:
            q = base + j - 2
            if q % align == 0 and q + K == int.from_bytes(data[j - 2:j - 2 + rs], "little"):
                out.append(q)
            j = data.find(pat, j + 1, hi_end)
        p = wend + (-wend % align)
    return out


def check_state(t: 'Target', lay: 'Layout', G: int, L: int, tries: int = 1) -> Optional[str]:
    """None when G and L are a VM's global_State and main thread by every
    check that costs little: the knot both ways, L's type byte, a stack
    that L's fields describe, the string table's mask, a known VM state.
    Else a text saying which check failed.  tries: how many times the
    checks of fields the VM rewrites as it runs (the stack's, the VM
    state) are read again, the target's cache cleared, when they fail on
    a knot that holds: a process read as it runs can be caught between
    the stores of L->stack and of L->base and L->top moved to the new
    stack (lj_state_growstack; the BPF sampler finds its VMs so)."""
    try:
        main = t.uint(G + lay.G.mainthref, lay.ref_size, "g->mainthref")
        if main != L:
            return "g->mainthref is 0x%x, not 0x%x" % (main, L)
        if t.u8(L + lay.str.gct, "lua_State gct") != C.GCT_THREAD:
            return "0x%x has not the type byte of a thread" % L
        mask = t.u32(G + lay.o_strmask, "the string table's mask")
        if mask & (mask + 1):
            return "the string table's mask 0x%x is not 2^n-1" % mask
    except (FaultError, CorruptError, NotLuaJITError) as e:
        return str(e)
    why = None
    for i in range(max(1, tries)):
        if i:
            t.clear_cache()
        why = _check_moment(t, lay, G, L)
        if why is None:
            break
    return why


def _check_moment(t: 'Target', lay: 'Layout', G: int, L: int) -> Optional[str]:
    """check_state's checks of the fields that change as the VM runs."""
    try:
        th = Thread(Bare(t, lay, G), L)
        if th.glref != G:
            return "L->glref is 0x%x" % th.glref
        # L->base and L->top each lie in the stack, in no order: the
        # interpreter stores L->base alone before the helpers that can
        # throw or collect, so a base above a stale top is a state the VM
        # stays in (docs/luajit-facts.md "The VM at any moment").
        end = th.stack + 8 * th.stacksize
        if not (th.stack and 0 < th.stacksize < (1 << 28) and
                th.stack <= th.base <= end and th.stack <= th.top <= end):
            return "the main thread's stack fields are not consistent"
        vs = t.i32(G + lay.G.vmstate, "g->vmstate")
        if vs < 0 and ~vs not in lay.vmstate_names:
            return "g->vmstate %d is no VM state" % vs
        total = t.uint(G + lay.G.gc_total, lay.gcstate_size, "g->gc.total")
        if total < lay.s["GG_State"].size:
            # R lj_state.c lua_newstate: g->gc.total = sizeof(GG_State)
            return "g->gc.total %d is smaller than the VM itself" % total
    except (FaultError, CorruptError, NotLuaJITError) as e:
        return str(e)
    return None


def search_states(t: 'Target', lay: 'Layout',
                  regions: Optional[List[Tuple[int, int, bool, str]]] = None,
                  progress: Optional[Callable[[int], Any]] = None,
                  tries: int = 1) -> List[FoundState]:
    """Every VM in the target's memory, as FoundState, in address order.
    regions: [(start, end, writable, name)] (default t.regions()); only the
    writable ones are read, in chunks of 1 MB.  An X64 (non-GC64) VM lives
    below 4 GB (its references are 32 bits).  progress(bytes_done) is
    called after each chunk.  tries: check_state's, more than 1 for a
    process read as it runs.  Raises NotLuaJITError when the target cannot
    list its memory."""
    if regions is None:
        regions = t.regions()
    if regions is None:
        raise NotLuaJITError("the memory map of this process is not known here, so it cannot "
                             "be searched for a Lua state")
    GG = lay.s["GG_State"]
    d = GG.field("g").offset - GG.field("L").offset
    glo = lay.L.glref
    rs = lay.L.field("glref").size
    K = d - glo
    align = 8
    found = []
    seen = set()
    done = 0
    for start, end, writable, name in regions:
        if not writable:
            continue
        if rs == 4:
            end = min(end, 1 << 32)
        a = start
        while a < end:
            n = min(CHUNK + 8, end - a)
            try:
                data = t.read(a, n, "memory search")
            except FaultError:
                a += CHUNK
                continue
            for p in _hits(data, a, K, rs, align):
                L = p - glo
                G = L + d
                if G in seen:
                    continue
                seen.add(G)
                if check_state(t, lay, G, L, tries) is None:
                    found.append(FoundState(G, L, (name, start)))
            done += min(CHUNK, end - a)
            if progress is not None:
                progress(done)
            a += CHUNK
    return found


class StateInfo(object):
    """One VM of the process for lstates: G, its main thread, and every way
    it was found ('frame #2 main: L', 'register r14 of frame #0',
    'memory search in [heap]')."""

    def __init__(self, G: int, L: int) -> None:
        self.G = G
        self.L = L
        self.ways = []


def list_states(t: 'Target', lay: 'Layout', candidates: Iterable[Tuple[str, int, str]],
                search: bool = True, tries: int = 1) -> Tuple[List[StateInfo], Optional[str]]:
    """(states, problem): every VM the candidates (kind, address, where:
    see state.make_vm) name, and, with search, every one in memory; in the
    order found.  problem says why the memory could not be searched, or is
    None.  tries: see check_state (more than 1 when the process runs)."""
    out = {}
    for kind, addr, where in candidates:
        try:
            G = check_thread(t, lay, addr) if kind == "L" else check_global(t, lay, addr)
            L = t.uint(G + lay.G.mainthref, lay.ref_size, "g->mainthref")
        except (NotLuaJITError, FaultError, CorruptError):
            continue
        out.setdefault(G, StateInfo(G, L)).ways.append(where)
    problem = None
    if search:
        try:
            for f in search_states(t, lay, tries=tries):
                name = f.region[0] or "memory at 0x%x" % f.region[1]
                out.setdefault(f.G, StateInfo(f.G, f.L)).ways.append("memory search (%s)" % name)
        except NotLuaJITError as e:
            problem = str(e)
    return list(out.values()), problem
