"""The JIT's machine-code (mcode) areas, and where an address stands in
them: the area chain and its bookkeeping, which trace owns which code,
and the placement window every area must lie in (the model of each
LuaJIT branch is in gdb_ext/jit/jit.py's text).  The engine never prints:
everything below returns data."""
from typing import Dict, List, Optional, TYPE_CHECKING, Tuple, Union
from ..errors import CorruptError, NotLuaJITError
from .jit import field_uint

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .jit import JitState, TraceObj
    from ..vm.state import VM

# LJ_TARGET_JUMPRANGE (a macro, not in DWARF): R lj_arch.h:211 x86/x64 31 (+-2^31 =
# +-2 GB), lj_arch.h:299 arm64 27 (+-128 MB); 20 lj_arch.h:165 x64 31 (20 has no arm64).
JUMPRANGE = {"x86_64": 31, "aarch64": 27}
MAX_AREAS = 1 << 16
LOWEST = 0x10000            # no mapping below it (vm.mmap_min_addr; R lj_mcode.c:283)
MAX_AREA_SIZE = 1 << 32     # sizemcode is capped far below this (R lib_jit.c:487-495)


class Area(object):
    def __init__(self, start: int, size: int, next_area: int, current: bool) -> None:
        self.start = start
        self.size = size
        self.end = start + size
        self.next = next_area
        self.current = current
        self.traces = []            # TraceObj whose code lies in the area
        self.mctop = None           # current area only
        self.mcbot = None

    def contains(self, addr: int) -> bool:
        return self.start <= addr < self.end

    @property
    def used(self) -> Optional[int]:
        """Bytes in use of the current area (code + link/stubs), else None."""
        if self.mctop is None:
            return None
        return (self.end - self.mctop) + (self.mcbot - self.start)

    @property
    def code_bytes(self) -> int:
        """Bytes from the lowest code to the area's end: exact for the
        current area (J->mctop); for an older one from its lowest live
        trace (LuaJIT keeps no top for it), so a lower bound."""
        if self.mctop is not None:
            return self.end - self.mctop
        if not self.traces:
            return 0
        return self.end - min(t.mcode for t in self.traces)


def mcode_areas(vm: 'VM', js: 'JitState') -> List[Area]:
    """Every mcode area, newest (current) first, through the MCLink chain."""
    ml = vm.lay.s.get("MCLink")
    if ml is None:
        raise NotLuaJITError("debug info has no MCLink (lj_jit.h): cannot walk mcode areas")
    out = []
    seen = set()
    a = js.mcarea
    while a:
        if a in seen:
            raise CorruptError("mcode area chain loops back to 0x%x" % a, a)
        if len(out) >= MAX_AREAS:
            raise CorruptError("mcode area chain is longer than %d areas" % MAX_AREAS, a)
        seen.add(a)
        buf = vm.t.read(a, ml.size, "MCLink of mcode area 0x%x" % a)
        nxt = field_uint(buf, ml.field("next"))
        size = field_uint(buf, ml.field("size"))
        if not 0 < size <= MAX_AREA_SIZE:
            raise CorruptError("mcode area 0x%x claims a size of %d bytes" % (a, size), a)
        area = Area(a, size, nxt, a == js.mcarea)
        if area.current:
            area.mctop, area.mcbot = js.mctop, js.mcbot
            if not (a <= js.mcbot <= js.mctop <= area.end):
                raise CorruptError("current mcode area 0x%x-0x%x does not hold mcbot 0x%x <= mctop "
                                   "0x%x" % (a, area.end, js.mcbot, js.mctop), a)
        out.append(area)
        a = nxt
    return out


def assign_traces(areas: List[Area],
                  all_traces: List[Tuple[int, Union['TraceObj', Exception]]]) -> List['TraceObj']:
    """Put each live trace in the area that holds its code; return the
    traces that lie in no area."""
    orphans = []
    for n, T in all_traces:
        if isinstance(T, Exception):
            continue
        for a in areas:
            if a.contains(T.mcode):
                a.traces.append(T)
                break
        else:
            orphans.append(T)
    return orphans


class Placement(object):
    """Where LuaJIT puts mcode areas and which of them it would accept."""

    def __init__(self, vm: 'VM', js: 'JitState') -> None:
        self.arch = getattr(vm.t, "arch", "x86_64")
        self.jumprange_bits = JUMPRANGE.get(self.arch)
        self.exit_handler = vm.t.symbol("lj_vm_exit_handler")
        self.model = "window" if js.mcmin is not None else "target"
        self.target = None
        self.lo = self.hi = None
        self.range = None
        self.moved = False
        self.pending_new_range = False
        jr = self.jumprange_bits
        self.cut = 0                  # bytes of the window below address 0x10000
        if jr is None or self.exit_handler is None:
            return
        self.jump = 1 << jr           # +- this many bytes
        if self.model == "target":
            # 20 lj_mcode.c:228-230, DB/OR lj_mcode.c:216-218.
            self.target = self.exit_handler & ~0xffff
            self.range = (1 << (jr - 1)) - (1 << 21)
            self.lo = self.target - self.range
            self.hi = self.target + self.range
            if self.lo < LOWEST:
                # Near address 0 (a binary linked at 0x400000, no PIE) the
                # lower half is cut: the unsigned test accepts it, no
                # mapping can be there.
                self.cut, self.lo = LOWEST - self.lo, LOWEST
        else:
            # R lj_mcode.c:266 MCODE_RANGE64, 269-285 mcode_setrange.
            self.target = self.exit_handler
            r64 = (1 << jr) - 0x10000
            self.range = r64 >> 1
            if js.mcmin:
                self.lo, self.hi = js.mcmin, js.mcmax
                if not js.mcmax:
                    # R lj_mcode.c:331: a new range is chosen after the flush.
                    self.pending_new_range = True
                    self.hi = None
            else:
                lo = (self.target - (r64 >> 1) + 0xffff) & ~0xffff
                self.lo, self.hi = lo, lo + r64
                if self.lo < LOWEST:            # R lj_mcode.c:283-284
                    self.lo = LOWEST
            if self.hi is not None and not (self.lo <= self.target < self.hi):
                self.moved = True
            if self.hi is not None and not self.moved and self.hi - self.lo < r64:
                self.cut = r64 - (self.hi - self.lo)

    @property
    def known(self) -> bool:
        return self.target is not None

    def accepts(self, area: Area) -> Optional[bool]:
        """Would LuaJIT's allocator accept this area (None if unknown)?"""
        if not self.known:
            return None
        M = (1 << 64) - 1
        if self.model == "target":
            # 20 lj_mcode.c:239-240, DB/OR lj_mcode.c:227-228 (unsigned).
            return ((area.end - self.target) & M) < self.range or \
                ((self.target - area.start) & M) < self.range
        if self.hi is None:
            return None
        # R lj_mcode.c:288-292 mcode_inrange.
        return area.start >= self.lo and area.end >= self.lo and area.end <= self.hi

    def distance(self, area: Area) -> Optional[int]:
        """Signed distance of the area's farthest byte from the target."""
        if not self.known:
            return None
        if area.end <= self.target:
            return area.start - self.target
        if area.start >= self.target:
            return area.end - self.target
        return 0

    def reachable(self, area: Area) -> Optional[bool]:
        """Is every byte of the area within the jump range of the target?"""
        if not self.known:
            return None
        return abs(self.distance(area)) < self.jump


def room(vm: 'VM', js: 'JitState', areas: List[Area], pl: Placement) -> Dict[str, Optional[int]]:
    """What is left for new areas: {"size": bytes of the next area (the
    current area's size), "by_limit": how many more fit under maxmcode
    before lj_mcode_limiterr raises "failed to allocate mcode memory"
    (R lj_mcode.c lj_mcode_limiterr: J->szallmcarea + sizemcode >
    maxmcode), "free": unmapped bytes inside the window and "by_window":
    how many area-sized 64 KB-aligned holes it has (the most LuaJIT's
    probes can find), both None when the process's mappings are not
    known or the window is not}."""
    size = areas[0].size if areas else None
    max_kb = js.params.get("maxmcode")
    out = {"size": size, "by_limit": None, "free": None, "by_window": None}
    if size and max_kb is not None:
        out["by_limit"] = max(0, ((max_kb << 10) - js.szallmcarea) // size)
    space = vm.t.address_space()
    if space is None or not pl.known or pl.hi is None or not size:
        return out
    lo, hi = pl.lo, pl.hi
    busy = sorted((max(s, lo), min(e, hi)) for s, e in space if e > lo and s < hi)
    free, slots, at = 0, 0, lo
    for s, e in busy + [(hi, hi)]:
        if s > at:
            free += s - at
            start = (at + 0xffff) & ~0xffff
            if s > start:
                slots += (s - start) // size
        at = max(at, e)
    out["free"], out["by_window"] = free, slots
    return out


def locate(vm: 'VM', js: 'JitState', areas: List[Area],
           all_traces: List[Tuple[int, Union['TraceObj', Exception]]],
           addr: int) -> Tuple[Optional[Area], Optional['TraceObj'], Optional[str]]:
    """(area or None, trace or None, what) for a machine-code address;
    what says where in the area it is when no trace holds it."""
    area = next((a for a in areas if a.contains(addr)), None)
    T = None
    for n, t in all_traces:
        if not isinstance(t, Exception) and t.contains(addr):
            T = t
            break
    what = None
    if T is None and area is not None:
        if area.current and addr < area.mcbot:
            what = "the area's link header, unwind info or exit stubs (below J->mcbot)"
        elif area.current and addr < area.mctop:
            what = "free space (between J->mcbot and J->mctop)"
        elif addr < area.start + vm.lay.s["MCLink"].size:
            what = "the area's MCLink header"
        else:
            what = "no live trace's code (exit stubs, or code of a flushed or aborted trace)"
    return area, T, what
