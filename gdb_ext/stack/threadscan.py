"""Every thread's frames at server scale: 10^5 to 10^6 coroutines (one per
entity in a game server, one per request in a busy nginx worker).

The Backtracer (gdb_ext.stack.backtrace) builds Frame objects with everything
lbt full needs; at this scale that costs too much per thread.  The scanner
reads each lua_State with one struct unpack from the page cache
(gdb_ext.vm.pages), walks its frame links in the stack slots the same way,
and describes each frame by a small key that many threads share:

  ("L", proto, line, name)   a Lua function's frame at a line, with the
                       name its caller's call site gives it (funcname)
  ("F", ffid)          a fast function (builtin)
  ("C", cfunc)         a C function

Functions, line numbers and call instructions are decoded once per
address.  The common shapes take this path: a suspended coroutine (its
innermost frame the yield, or a C function that yielded) with Lua frames
linked below it.  Anything else goes to the Backtracer and keeps all its
rules: the running thread, g->vmthref, a thread that resumed another (its
resume frame names the resumed thread), a Lua frame whose pc is kept in a
C frame (below a C function that called Lua), vararg frames, FFI callback
continuations, and anything that does not read right.

Past the first WARM threads, threadc (C) decides the common case for a
chunk of threads at a time: the status, no frames, or a stack whose bytes
equal a shape walked before; the rest comes back to this scan.
"""
from typing import Any, Iterable, List, Optional, TYPE_CHECKING, Tuple, Union
import collections
import struct
from itertools import compress, repeat
from operator import not_

from .. import consts as C
from ..bulk import gc_paused
from ..errors import CorruptError, FaultError
from .funcname import call_site_name
from .frames import FRAME_CONT, FRAME_TYPE, FRAME_TYPEP, FRAME_VARG, LJ_CONT_FFI_CALLBACK
from ..vm.protoinfo import cached_proto, debug_line
from ..vm.pages import PageCache, struct_reader
from ..vm.walkers import threads_walk
from . import threadc
from .threadc import Shapes

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .backtrace import Backtracer

_FALLBACK = object()
_CONT = object()            # the frame below resumes at a continuation's pc
_Q = struct.Struct("<Q")
_QQ = struct.Struct("<QQ")
_I = struct.Struct("<I")
MAX_FRAMES = 4096
MAX_SHAPES = 1 << 16         # (depth, innermost frame) keys
SHAPES_PER_KEY = 8           # shapes that share one (different callers)
WARM = 256                   # threads scanned in Python before threadc takes the rest
C_CHUNK = 1 << 16            # threads a threadc scan takes at a time


class ThreadSummary(collections.namedtuple("ThreadSummary", "L status stacksize keys bt exdata")):
    """One thread: L, status ('suspended', 'dead', ...), stacksize (slots),
    keys (frame keys, innermost first), bt: the full Backtrace where the
    Backtracer handled it (then keys are made from its frames), else None,
    and exdata (OpenResty's L->exdata, or None).  A tuple: a million of
    them are made at once."""
    __slots__ = ()


_new = tuple.__new__


class ThreadScanner(object):
    def __init__(self, backtracer: 'Backtracer', cache_bytes: int = 256 << 20) -> None:
        self.bt = backtracer
        vm = self.vm = backtracer.vm
        lay = vm.lay
        self.mem = PageCache(vm.t, cache_bytes)
        self.fr2 = lay.fr2
        self.lsize = lay.L.size
        self.rd_L = struct_reader(lay.L, ("gct", "status", "base", "top", "stack", "stacksize"))
        self.exdata_off = lay.L.exdata if lay.openresty else None
        fc = lay.fnC
        self.fn_need = max(fc.field("f").offset + fc.field("f").size,
                           fc.field("pc").offset + fc.field("pc").size)
        self.rd_fn = struct_reader(fc, ("gct", "ffid", "nupvalues", "pc", "f"))
        self.pt_size = lay.pt.size
        self.funcs = {}         # GCfunc address -> function key, or _FALLBACK
        self.lines = {}         # bytecode pc -> (proto, line) or None
        self.call_a = {}        # return pc -> A operand of the call before it
        self.site_names = {}    # (proto, pc its caller resumes at) -> funcname's name
        self.named = {}         # (("L", proto, line), name) -> ("L", proto, line, name)
        self.main = vm.main_L
        self.running = backtracer.running
        self.vmthread = backtracer.vmthread
        self.bottom = 8 * (1 + lay.fr2)
        self.resumers = set()
        self.steps = {}         # (func, link, inner pc) -> _step's answer
        # (base - stack, innermost frame slot bytes) -> [(frame keys, [(from,
        # to, bytes)] of every stack slot the walk read, stack-relative)]
        self.shapes = {}
        self.cshapes = Shapes()  # the same shapes, in the order made, for threadc
        self.walked = []        # scan's summaries that the Backtracer made (.bt is set)
        names = backtracer.names
        for ffid, name in names.items():
            if name in ("coroutine.resume",) or name.endswith("wrap_aux"):
                self.resumers.add(ffid)

    # --- decoding, once per address --------------------------------------
    def _func(self, fn):
        """('F', ffid) / ('C', cfunc) / ('L', proto) for the function at fn,
        or _FALLBACK (not a function, a resume, a C closure)."""
        d = self.funcs.get(fn)
        if d is not None:
            return d
        try:
            base, buf = self.mem.window(fn, self.fn_need)
            gct, ffid, nup, pc, f = self.rd_fn(buf, fn - base)
        except (FaultError, CorruptError, struct.error):
            gct = None
        if gct != C.GCT_FUNC:
            d = _FALLBACK
        elif ffid == C.FF_LUA:
            d = ("L", pc - self.pt_size)
        elif ffid == C.FF_C:
            # A C closure may be a host's coroutine.wrap function: the
            # Backtracer names it and the coroutine it resumed.
            d = _FALLBACK if nup else ("C", f)
        else:
            d = _FALLBACK if ffid in self.resumers else ("F", ffid)
        self.funcs[fn] = d
        return d

    def _line(self, proto, pc):
        key = self.lines.get(pc, _FALLBACK)
        if key is not _FALLBACK:
            return key
        key = None
        try:
            pt = cached_proto(self.vm, proto)
            pos = (pc - pt.bc) // 4 - 1
            if 0 <= pos <= pt.sizebc:
                line = debug_line(self.vm, pt, pos)
                if line is not None:
                    key = ("L", proto, line)
        except (FaultError, CorruptError):
            key = None
        self.lines[pc] = key
        return key

    def _site_name(self, proto, pc):
        """The name of the frame called from the instruction before pc in
        proto (funcname.call_site_name; FaultError/CorruptError when the
        bytecode does not read: the thread goes to the Backtracer)."""
        k = (proto, pc)
        got = self.site_names.get(k, _FALLBACK)
        if got is _FALLBACK:
            pt = cached_proto(self.vm, proto)
            got = self.site_names[k] = call_site_name(self.vm, pt, (pc - pt.bc) // 4 - 1)
        return got

    def _named(self, keys, names):
        """The frame keys with each Lua key's name (its 4th item)."""
        out = []
        named = self.named
        for k, nm in zip(keys, names):
            if k[0] == "L":
                nk = named.get((k, nm))
                if nk is None:
                    nk = named[(k, nm)] = k + (nm,)
                k = nk
            out.append(k)
        return tuple(out)

    def _call_a(self, pc):
        a = self.call_a.get(pc)
        if a is None:
            try:
                base, buf = self.mem.window(pc - 4, 4)
                a = (_I.unpack_from(buf, pc - 4 - base)[0] >> 8) & 0xFF
            except (FaultError, CorruptError, struct.error):
                a = -1
            self.call_a[pc] = a
        return a

    # --- the threads ------------------------------------------------------
    def scan(self, threads: Iterable[int]) -> List[Union[ThreadSummary, Exception]]:
        """[ThreadSummary, or the FaultError/CorruptError that made a thread
        unreadable] for each thread, in order.  After the first WARM
        threads (scanned in Python: they make the shapes), C_CHUNK threads
        at a time go to threadc where it loads, and what it leaves (new
        shapes, errors' stacks, unreadable bytes) to the Python scan."""
        threads = threads if isinstance(threads, list) else list(threads)
        with gc_paused():
            return self._scan(threads)

    def _scan(self, threads):
        lib = threadc.load()[0] if len(threads) > WARM else None
        if lib is None:
            return self._scan_py(threads)
        out = self._scan_py(threads[:WARM])
        for i in range(WARM, len(threads), C_CHUNK):
            part = threads[i:i + C_CHUNK]
            try:
                state, sizes, shapes, exdata = threadc.scan(lib, self, part)
            except MemoryError:
                out.extend(self._scan_py(part))
                continue
            keys = self.cshapes.keys + [()]               # (shape -1: no frames)
            ex = repeat(None) if exdata is None else map({0: None}.get, exdata, exdata)
            got = list(map(tuple.__new__, repeat(ThreadSummary), zip(
                part, map(threadc.STATUS.__getitem__, state), sizes,
                map(keys.__getitem__, shapes), repeat(None), ex)))
            left = list(compress(range(len(part)), map(not_, state)))
            if left:
                for j, s in zip(left, self._scan_py([part[j] for j in left])):
                    got[j] = s
            out.extend(got)
        return out

    def _scan_py(self, threads: List[int]) -> List[Union[ThreadSummary, Exception]]:
        """scan in Python.  The fast path runs as a closure over locals: at
        10^6 threads, attribute lookups count."""
        mem, lsize, steps, fr2 = self.mem, self.lsize, self.steps, self.fr2
        rd_L, exdata_off, bottom = self.rd_L, self.exdata_off, self.bottom
        skip = {self.running, self.vmthread}
        main = self.main
        step_of = self._step
        site_name, named_keys = self._site_name, self._named
        page = [0, b"", 0]
        spage = [0, b"", 0]                 # the last stack's window (stacks sit together)
        last = [-1, None, 0, None, None, ()]   # (rel,) + the shape the last thread matched
        shapes, cshapes = self.shapes, self.cshapes
        first = 16 if fr2 else 8            # the innermost frame's slot(s)
        T_THREAD, YIELD, OK = C.GCT_THREAD, C.LUA_YIELD, C.LUA_OK
        QQ, Q = _QQ.unpack_from, _Q.unpack_from

        def fast(L):
            if L in skip:
                return None
            base_, buf, top_ = page
            if not (base_ <= L and L + lsize <= top_):
                base_, buf = mem.window(L, lsize)
                top_ = base_ + len(buf)
                page[:] = (base_, buf, top_)
            gct, status, base, top, stack, stacksize = rd_L(buf, L - base_)
            if gct != T_THREAD or not 0 < stacksize < (1 << 24):
                return None
            # OpenResty's L->exdata (0: none; no such member: exdata_off None)
            ex = (Q(buf, L - base_ + exdata_off)[0] or None) if exdata_off else None
            if status == YIELD:
                st = "suspended"
            elif status != OK:
                return None                  # an error's stack: its own rules
            elif base > stack + bottom:
                return None                  # 'normal': it resumed another
            elif L == main:
                st = "idle"
            elif top == base:
                st = "dead"
            else:
                st = "suspended"
            end = stack + 8 * stacksize
            if not stack <= base <= end:
                return None
            if base - 8 <= stack + 8 * fr2:     # no frame: fresh, dead or idle
                return _new(ThreadSummary,
                            (L, st, stacksize, (), None, ex))
            if base_ <= stack and end <= top_:
                sb, sbuf = base_, buf
            else:
                sb, sbuf, stop_ = spage
                if not (sb <= stack and end <= stop_):
                    sb, sbuf = mem.window(stack, 8 * stacksize)
                    spage[:] = (sb, sbuf, sb + len(sbuf))
            # A thread shaped like one walked before: the same depth, and
            # the same bytes in every slot that walk read (functions, links,
            # continuation pcs) give the same frames.
            o = stack - sb
            rel = base - stack
            # The shape the thread before matched first (threads made
            # together stand alike): its bytes cover the innermost frame's
            # slots, the key of the shapes' dict.
            lrel, skeys, at, same, want, cbs = last
            if rel == lrel and same.unpack_from(sbuf, o + at) == want:
                for a in cbs:
                    if Q(sbuf, o + a)[0] == LJ_CONT_FFI_CALLBACK:
                        break
                else:
                    return _new(ThreadSummary, (L, st, stacksize, skeys, None,
                                                ex))
            skey = (rel, sbuf[o + rel - first:o + rel])
            known = shapes.get(skey)
            if known is not None:
                for shape in known:
                    skeys, at, same, want, cbs = shape
                    if same.unpack_from(sbuf, o + at) != want:
                        continue
                    for a in cbs:
                        if Q(sbuf, o + a)[0] == LJ_CONT_FFI_CALLBACK:
                            break
                    else:
                        last[:] = (rel,) + shape
                        return _new(ThreadSummary, (L, st, stacksize, skeys, None,
                                                    ex))
            keys = []
            names = []                       # keys[i]'s name, from the frame below
            checks = []
            cacheable = True
            bot = stack + 8 * fr2
            f = base - 8
            inner_pc = None                  # the pc the inner frame's link gives
            n = 0
            while f > bot:
                n += 1
                if n > MAX_FRAMES:
                    return None
                if fr2:
                    func, link = QQ(sbuf, f - 8 - sb)
                    func &= 0x7FFFFFFFFFFF
                else:
                    w = Q(sbuf, f - sb)[0]
                    func, link = w & 0xFFFFFFFF, w >> 32
                checks.append((f - stack - 8 * fr2, f - stack + 8, None))
                if func == L:
                    cacheable = False
                sk = (func, link, inner_pc)
                st_ = steps.get(sk) if func != L else None
                if st_ is None:
                    st_ = step_of(func, link, inner_pc, L)
                    if st_ is None:
                        return None
                    if func != L:
                        steps[sk] = st_
                key, delta, next_pc = st_
                if names and names[-1] is _FALLBACK:
                    # The frame above was called from here.
                    names[-1] = site_name(key[1], inner_pc) \
                        if key is not None and key[0] == "L" else None
                inner_pc = next_pc
                if key is not None:
                    keys.append(key)
                    names.append(_FALLBACK if key[0] == "L" else None)
                if inner_pc is _CONT:
                    # A continuation (a yielded coroutine's yield frame is
                    # one): the Lua frame below resumes at the pc it keeps
                    # (R lj_frame.h frame_contpc), unless it is an FFI
                    # callback's (frame_iscont_fficb).
                    if f - 24 < stack:
                        return None
                    if fr2:
                        # The pc must be the same; the slot below it only
                        # must not say FFI callback (it may be a caller's
                        # local, different in every thread).
                        checks.append((f - stack - 16, f - stack - 8, None))
                        checks.append((f - stack - 24, None, None))
                        ffcb, inner_pc = QQ(sbuf, f - 24 - sb)
                    else:
                        checks.append((f - stack - 8, f - stack, None))
                        w = Q(sbuf, f - 8 - sb)[0]
                        inner_pc, ffcb = w >> 32, w & 0xFFFFFFFF
                    if ffcb == LJ_CONT_FFI_CALLBACK:
                        return None
                f -= delta
            if names and names[-1] is _FALLBACK:
                names[-1] = None             # the bottom frame
            keys = named_keys(keys, names)
            if cacheable and len(shapes) < MAX_SHAPES:
                known = shapes.setdefault(skey, [])
                if len(known) < SHAPES_PER_KEY:
                    at, same, merged = _same_bytes([(a, b) for a, b, _ in checks
                                                    if b is not None])
                    want = same.unpack_from(sbuf, o + at)
                    shape = (keys, at, same, want, [a for a, b, _ in checks if b is None])
                    known.append(shape)
                    last[:] = (rel,) + shape
                    cshapes.add(rel, merged, b"".join(want), shape[4], keys)
            return _new(ThreadSummary, (L, st, stacksize, keys, None, ex))

        out = []
        for L in threads:
            try:
                s = fast(L)
            except (FaultError, CorruptError, struct.error):
                s = None
            if s is None:
                try:
                    s = self._slow(L)
                    self.walked.append(s)
                except (FaultError, CorruptError) as e:
                    s = e
            out.append(s)
        return out

    def threads(self) -> Tuple[List[int], Optional[Exception]]:
        """(threads, error): walkers.threads_walk, read through the page
        cache the scan then reads the threads from."""
        return threads_walk(self.vm, self.mem)

    def _step(self, func, link, inner_pc, L):
        """(frame key or None, bytes down to the next frame link, the pc the
        frame below resumes at: its return pc, _CONT, or None) for the frame
        whose function and link are func and link, below a frame whose link
        gave inner_pc; None when the Backtracer must take the thread."""
        key = None
        if func != L:
            d = self._func(func)
            if d is _FALLBACK:
                return None
            if d[0] == "L":
                if inner_pc is None or inner_pc is _CONT:
                    return None              # its pc is in a C frame
                key = self._line(d[1], inner_pc)
                if key is None:
                    return None
            else:
                key = d
        if link & FRAME_TYPE == 0:           # Lua link: the return pc
            a = self._call_a(link)
            if a < 0:
                return None
            return key, 8 * (1 + self.fr2 + a), link
        if not self.fr2 and link & 0x80000000:
            link -= 1 << 32
        typep = link & FRAME_TYPEP
        delta = link & ~FRAME_TYPEP
        if typep == FRAME_VARG or delta <= 0:
            return None
        return key, delta, (_CONT if typep == FRAME_CONT else None)

    def _slow(self, L):
        b = self.bt.backtrace(L)
        return ThreadSummary(L, b.status, b.th.stacksize,
                             tuple(self.bt.frame_key(fr) for fr in b.frames), b, b.exdata)


def _same_bytes(regions: List[Tuple[int, int]]
                ) -> Tuple[int, struct.Struct, List[Tuple[int, int]]]:
    """(start, a Struct, the regions merged): one unpack from the stack's
    offset start gives the bytes of every region [a, b) of the stack a
    shape's walk read (merged where they touch), so a thread is checked
    against a known shape in one call rather than a slice a region."""
    merged = []
    for a, b in sorted(regions):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    if not merged:
        return 0, struct.Struct("<"), []
    start = pos = merged[0][0]
    fmt = "<"
    for a, b in merged:
        fmt += ("%dx" % (a - pos) if a > pos else "") + "%ds" % (b - a)
        pos = b
    return start, struct.Struct(fmt), [(a, b) for a, b in merged]


class Group(object):
    """Threads with the same status, frames and warning: count, the first
    few lua_States as examples, and internal: True for g->vmthref, which is
    no coroutine and is never grouped with one."""
    __slots__ = ("status", "keys", "warning", "internal", "count", "examples")

    def __init__(self, status: str, keys: Tuple[Any, ...], warning: Optional[str],
                 internal: bool) -> None:
        self.status, self.keys, self.warning, self.internal = status, keys, warning, internal
        self.count = 0
        self.examples = []


def group(summaries: Iterable[ThreadSummary], vmthread: Optional[int] = None,
          examples: int = 3) -> List[Group]:
    """Groups of ThreadSummary objects that read the same (as Go's goroutine
    dumps are read), the largest first, then by first appearance."""
    groups, order = {}, []
    _add_to_groups(groups, order, summaries, vmthread, examples)
    return sorted(order, key=lambda g: -g.count)


def scan_groups(scanner: 'ThreadScanner', threads: List[int], vmthread: Optional[int] = None,
                examples: int = 3, chunk: int = 1 << 16) -> Tuple[List[Group], int]:
    """(group(scanner.scan(threads)), the number of threads that did not
    read), scanned `chunk` threads at a time: the memory held is the
    groups', not a summary for each of 10^6 threads."""
    groups, order = {}, []
    bad = 0
    for i in range(0, len(threads), chunk):
        part = scanner.scan(threads[i:i + chunk])
        good = [s for s in part if s.__class__ is ThreadSummary]
        bad += len(part) - len(good)
        _add_to_groups(groups, order, good, vmthread, examples)
    return sorted(order, key=lambda g: -g.count), bad


def _add_to_groups(groups, order, summaries, vmthread, examples):
    for s in summaries:
        warning = s.bt.warning if s.bt is not None else None
        internal = s.L == vmthread
        k = (s.status, s.keys, warning, internal)
        g = groups.get(k)
        if g is None:
            g = groups[k] = Group(s.status, s.keys, warning, internal)
            order.append(g)
        g.count += 1
        if len(g.examples) < examples:
            g.examples.append(s.L)
