"""Walking the frames of a lua_State, as LuaJIT's own debug API does.

Mirrors (R = upstream 2.1 source):
  lj_debug_frame   R lj_debug.c:25   frame order, dummy and vararg pseudo-frames
  debug_framepc    R lj_debug.c:53   a frame's current pc from the frame above it
  lj_debug_line    R lj_debug.c:120  pc -> line through lineinfo
  debug_varname    R lj_debug.c:152  local names from varinfo
  debug_localname  R lj_debug.c:186  varargs
Frame links (R lj_frame.h): FR2 builds keep [func | PC/delta] in two slots
(base-2, base-1), others in one slot (base-1: func low word, link high word).

The walk reads the whole stack in one block and is bounded by the stack's
size: a link that points outside it or does not go down ends the walk with
a CorruptError naming the bad address.
"""
from typing import Any, Dict, List, Optional, TYPE_CHECKING, Tuple
import copy
import struct

from ..errors import CorruptError, FaultError
from ..vm.cframe import CFRAME_OFS, CFRAME_RAWMASK
from ..vm.objects import Func, decode_tv, GCT_KIND
from ..vm.protoinfo import cached_proto, debug_line, local_names, upvalue_names

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from ..vm.objects import Proto, Thread, Value
    from ..vm.state import VM

_Q = struct.Struct("<Q")
_NONE = object()

# R lj_frame.h frame types (low bits of the link).
FRAME_LUA, FRAME_C, FRAME_CONT, FRAME_VARG, FRAME_LUAP, FRAME_CP, FRAME_PCALL, FRAME_PCALLH = \
    range(8)
FRAME_TYPE = 3
FRAME_TYPEP = 7
LJ_CONT_FFI_CALLBACK = 1        # R lj_frame.h: enum { LJ_CONT_TAILCALL, LJ_CONT_FFI_CALLBACK }
NO_BCPOS = None

PROTO_VARARG = 0x02                 # R lj_obj.h PROTO_VARARG

MAX_STACK_BYTES = 64 << 20          # far above LUAI_MAXSTACK (65500 slots)


class Frame(object):
    """One frame as lua_getstack numbers them (level 0 is the innermost)."""

    def __init__(self, level: int, slot: int, func: int, link: int, link_type: int) -> None:
        self.level = level
        self.slot = slot            # address of the frame link slot (base - 1)
        self.func = func            # GCfunc address
        self.link = link            # raw PC/delta value
        self.link_type = link_type
        self.fn = None              # Func object
        self.kind = None            # 'lua', 'c', 'builtin'
        self.pos = None             # bytecode position (Lua frames) or None
        self.line = None            # current line (Lua frames) or None
        self.nextframe = None       # slot of the frame above (inner), or None
        self.proto = None
        self.entry = False          # the outermost frame of an entry into the VM (from C)
        self.from_stack = False     # made from stack slots alone (frames._Earlier)
        self.key = None             # Backtracer.frame_key's, once asked (walks share frames)
        # Where the caller called this frame from, for its name
        # (funcname.called_as): (caller's Proto, bytecode position), or
        # None when the caller is no Lua function or its pc is not known.
        self.site = None

    @property
    def base(self) -> int:
        return self.slot + 8


class Stack(object):
    """A lua_State's stack read in one block; slot access by address."""

    def __init__(self, vm: 'VM', th: 'Thread') -> None:
        self.vm = vm
        self.start = th.stack
        size = th.stacksize * 8
        if size <= 0 or size > MAX_STACK_BYTES or size > getattr(vm, "size_bound", size):
            raise CorruptError("lua_State 0x%x has an impossible stack size of %d slots"
                               % (th.addr, th.stacksize), th.addr)
        self.end = self.start + size
        what = "stack of lua_State 0x%x" % th.addr
        # While the target notes each read (a sampler's copymemo.Watch),
        # each slot used is noted, not the whole stack: a slot the walk
        # never reads (a loop's counter) changes nothing.
        self.used = None
        if vm.t.watched:
            self.data, self.used = vm.t.watched.bulk(self.start, size, what)
        else:
            self.data = vm.t.read(self.start, size, what)

    def contains(self, addr: int) -> bool:
        return self.start <= addr and addr + 8 <= self.end

    def u64(self, addr: int) -> int:
        if not self.contains(addr):
            raise CorruptError("stack slot 0x%x is outside the stack [0x%x, 0x%x)"
                               % (addr, self.start, self.end), addr)
        if self.used is not None:
            self.used.append(addr)
        return _Q.unpack_from(self.data, addr - self.start)[0]

    def tv(self, addr: int) -> 'Value':
        return decode_tv(self.vm, self.u64(addr))


class FrameWalker(object):
    def __init__(self, vm: 'VM', th: 'Thread', base: Optional[int] = None,
                 top_pc: Optional[int] = None) -> None:
        """base: the BASE to start from (default L->base).  top_pc: the
        saved-pc (one past the executing instruction) of the innermost
        frame when it is known from elsewhere (the interpreter's PC
        register, a trace snapshot); see gdb_ext.stack.vmstack."""
        self.top_pc = top_pc
        self.vm = vm
        self.lay = vm.lay
        self.th = th
        self.stack = Stack(vm, th)
        self.fr2 = self.lay.fr2
        self.base = th.base if base is None else base
        arch = getattr(vm.t, "arch", "x86_64")
        self.cfo = CFRAME_OFS.get((arch, self.lay.gc64))
        self._funcs = {}            # GCfunc address -> Func (_describe)
        self._ins = {}              # return pc -> the bytecode word before it (prevl)
        self._gcs = {}              # a function slot's 64 bits -> its GC object (frame_gc)
        self._pc_from_stack = False     # framepc's last answer came from stack slots alone
        self._common = None             # bytes shared with an earlier walk's stack (_Earlier)

    # --- frame link accessors (R lj_frame.h) --------------------------------
    def ftsz(self, f: int) -> int:
        raw = self.stack.u64(f)
        if self.fr2:
            return raw - (1 << 64) if raw >> 63 else raw      # (as int64_t)
        hi = raw >> 32
        return hi - (1 << 32) if hi & 0x80000000 else hi

    def frame_gc(self, f: int) -> Optional[int]:
        if self.fr2:
            # (Decoded once per value and walk: a recursion has one function in many frames.)
            raw = self.stack.u64(f - 8)
            gc = self._gcs.get(raw, _NONE)
            if gc is _NONE:
                v = decode_tv(self.vm, raw)
                gc = self._gcs[raw] = v.addr if v.is_gc else None
            return gc
        return self.stack.u64(f) & 0xFFFFFFFF

    def frame_pc(self, f: int) -> int:
        raw = self.stack.u64(f)
        return raw if self.fr2 else raw >> 32

    def frame_type(self, f: int) -> int:
        return self.ftsz(f) & FRAME_TYPE

    def frame_typep(self, f: int) -> int:
        return self.ftsz(f) & FRAME_TYPEP

    def is_lua(self, f: int) -> bool:
        return self.frame_type(f) == FRAME_LUA

    def is_c(self, f: int) -> bool:
        return self.frame_type(f) == FRAME_C

    def is_cont(self, f: int) -> bool:
        return self.frame_typep(f) == FRAME_CONT

    def is_varg(self, f: int) -> bool:
        return self.frame_typep(f) == FRAME_VARG

    def frame_contpc(self, f: int) -> int:
        return self.frame_pc(f - 16 if self.fr2 else f - 8)

    def frame_iscont_fficb(self, f: int) -> bool:
        if self.fr2:
            v = self.stack.u64(f - 24)
        else:
            v = self.stack.u64(f - 8) & 0xFFFFFFFF
        return v == LJ_CONT_FFI_CALLBACK

    def prevl(self, f: int) -> int:
        pc = self.frame_pc(f)
        # (The walk's own memory: a deep recursion returns to one pc many times.)
        ins = self._ins.get(pc)
        if ins is None:
            ins = self._ins[pc] = self.vm.t.u32(pc - 4, "bytecode before return pc 0x%x" % pc)
        return f - 8 * (1 + self.fr2 + ((ins >> 8) & 0xFF))

    def prevd(self, f: int) -> int:
        return f - (self.ftsz(f) & ~FRAME_TYPEP)

    def prev(self, f: int) -> int:
        return self.prevl(f) if self.is_lua(f) else self.prevd(f)

    # --- cframes ------------------------------------------------------------
    def _cf_read(self, cf, what):
        o = self.cfo
        if o is None:
            raise CorruptError("C frame layout for this architecture is not known")
        if what == "prev":
            return self.vm.t.ptr(cf + o["prev"], "cframe prev")
        if what == "pc":
            return self.vm.t.uint(cf + o["pc"], self.lay.mref_size, "cframe pc")
        if what == "L":
            return self.vm.t.uint(cf + o["L"], self.lay.ref_size, "cframe L")
        if what == "nres":
            return self.vm.t.i32(cf + o["nres"], "cframe nres")
        raise KeyError(what)

    # --- walk ------------------------------------------------------------------
    def walk(self, max_frames: int = 1 << 20) -> Tuple[List[Frame], Optional[Exception]]:
        """All frames, innermost first.  Returns (frames, error) where error
        is None or the CorruptError/FaultError that ended the walk early.

        The outer frames of an earlier walk of the same stack (the VM
        caches' "walks", kept across the samples of a profile) are taken
        over when nothing they were made from changed (_Earlier)."""
        earlier = _Earlier.of(self)
        frames = []
        bot = self.stack.start + 8 * self.fr2
        f = self.base - 8
        nextframe = None
        level = 0
        skip = False
        steps = 0
        callee = None       # the last frame shown, whose caller comes next
        limit = (self.stack.end - self.stack.start) // 8 + 1
        L = self.th.addr
        try:
            while f > bot:
                steps += 1
                if steps > limit or len(frames) >= max_frames:
                    break
                if not self.stack.contains(f):
                    raise CorruptError("frame link at 0x%x is outside the stack [0x%x, 0x%x)"
                                       % (f, self.stack.start, self.stack.end), f)
                if earlier is not None and not skip and frames:
                    rest = earlier.rest(self, f, nextframe, level)
                    if rest is not None:
                        if self.stack.used is not None:
                            # (taken over because these slots are the same)
                            self.stack.used.extend(range(self.stack.start, nextframe + 8, 8))
                        if callee is not None:
                            callee.site = _site(rest[0])
                        frames.extend(rest)
                        _Earlier.keep(self, frames)
                        return frames[:max_frames], None
                func = self.frame_gc(f)
                ftsz = self.ftsz(f)
                shown = func != L and not skip
                if shown:
                    fr = Frame(level, f, func, ftsz, ftsz & FRAME_TYPEP)
                    fr.nextframe = nextframe
                    self._describe(fr)
                    if callee is not None:
                        callee.site = _site(fr)
                    frames.append(fr)
                    callee = fr
                    level += 1
                elif not skip:
                    callee = None       # the thread's base frame: called from C
                if frames and (shown or skip) and (
                        (ftsz & FRAME_TYPE) == FRAME_C or
                        ((ftsz & FRAME_TYPEP) == FRAME_CONT and self.frame_iscont_fficb(f))):
                    # Called from C, or by an FFI callback's continuation (R
                    # lj_err.c err_unwind: unwind_c).  A vararg function's own
                    # link is in the pseudo-frame below it.
                    frames[-1].entry = True
                skip = False
                nextframe = f
                # (is_lua, is_varg, prevd of the link ftsz read above.)
                if (ftsz & FRAME_TYPE) == FRAME_LUA:
                    nf = self.prevl(f)
                else:
                    if (ftsz & FRAME_TYPEP) == FRAME_VARG:
                        skip = True     # the frame below is its vararg pseudo-frame
                    nf = f - (ftsz & ~FRAME_TYPEP)
                if nf >= f:
                    raise CorruptError("frame link at 0x%x does not go down the stack (0x%x)"
                                       % (f, ftsz & 0xFFFFFFFFFFFFFFFF), f)
                f = nf
        except (CorruptError, FaultError) as e:
            self._site_past_end(callee)
            return frames, e
        if f <= bot:
            _Earlier.keep(self, frames)
        else:
            self._site_past_end(callee)
        return frames, None

    def _site_past_end(self, fr: Optional[Frame]) -> None:
        """fr.site for the last frame of a walk that stopped before its
        caller: read from the caller's frame slot, as lj_debug_funcname
        does (None when that does not read)."""
        if fr is None:
            return
        try:
            f = fr.slot
            if self.is_varg(f):
                f = self.prevd(f)
            pf = self.prev(f)
            if pf <= self.stack.start + 8 * self.fr2:
                return
            func = self.frame_gc(pf)
            if not func or GCT_KIND.get(self.vm.t.u8(func + self.lay.str.gct,
                                                     "frame function")) != "func":
                return
            fn = Func(self.vm, func)
            if fn.is_lua:
                pt = cached_proto(self.vm, fn.proto)
                pos = self.framepc(fn, pt, f)
                fr.site = (pt, pos) if pos is not None else None
        except (CorruptError, FaultError):
            fr.site = None

    def _describe(self, fr):
        if not fr.func:
            raise CorruptError("frame at 0x%x has no function" % fr.slot, fr.slot)
        # One decoding per function and walk (a deep recursion repeats a few
        # functions many times).
        funcs = self._funcs
        fn = funcs.get(fr.func)
        if fn is None:
            kind = GCT_KIND.get(self.vm.t.u8(fr.func + self.lay.str.gct, "frame function"))
            if kind != "func":
                raise CorruptError("frame at 0x%x: slot holds a %s, not a function"
                                   % (fr.slot, kind or "non-object"), fr.func)
            fn = funcs[fr.func] = Func(self.vm, fr.func)
        fr.fn = fn
        fr.kind = fn.kind
        fr.from_stack = True
        if fn.is_lua:
            fr.proto = cached_proto(self.vm, fn.proto)
            self._pc_from_stack = False
            fr.pos = self.framepc(fn, fr.proto, fr.nextframe)
            fr.from_stack = self._pc_from_stack
            fr.line = debug_line(self.vm, fr.proto, fr.pos)

    def framepc(self, fn: Any, pt: 'Proto', nextframe: Optional[Frame]) -> int:
        """R lj_debug.c debug_framepc: bytecode position or None."""
        if nextframe is None and self.top_pc is not None:
            # At bc itself the function's header is being entered: pos 0.
            pos = max((self.top_pc - pt.bc) // 4 - 1, 0) if self.top_pc >= pt.bc else -1
            return pos if 0 <= pos <= pt.sizebc else NO_BCPOS
        if nextframe is None:
            cf = self.th.cframe & CFRAME_RAWMASK
            # C frames of lj_vm_cpcall (nres < 0: the recorder, the parser,
            # finalizers) hold no pc; a Lua frame older than one is saved in
            # the C frame below it, as in the loop for inner frames below.
            f = self.base - 8
            guard = 0
            while cf and self._cf_read(cf, "nres") < 0 and guard < 1024:
                if f >= self.stack.start + -self._cf_read(cf, "nres"):
                    break
                cf = self._cf_read(cf, "prev") & CFRAME_RAWMASK
                guard += 1
            if not cf:
                return NO_BCPOS
            ins = self._cf_read(cf, "pc")
            if ins == self._cf_read(cf, "L") or not ins:
                return NO_BCPOS
        elif self.is_lua(nextframe):
            ins = self.frame_pc(nextframe)
            self._pc_from_stack = True
        elif self.is_cont(nextframe):
            ins = self.frame_contpc(nextframe)
            self._pc_from_stack = True
        else:
            cf = self.th.cframe & CFRAME_RAWMASK
            f = self.base - 8
            # Bounded by the stack: one step per frame slot and C frame.
            guard = 0
            limit = 2 * (self.stack.end - self.stack.start) // 8 + 64
            while True:
                guard += 1
                if guard > limit:
                    raise CorruptError("cframe chain from 0x%x does not end: a cycle?"
                                       % (self.th.cframe & CFRAME_RAWMASK), cf)
                if not cf:
                    return NO_BCPOS
                while self._cf_read(cf, "nres") < 0:
                    if f >= self.stack.start + -self._cf_read(cf, "nres"):
                        break
                    cf = self._cf_read(cf, "prev") & CFRAME_RAWMASK
                    if not cf:
                        return NO_BCPOS
                    guard += 1
                    if guard > limit:
                        raise CorruptError("cframe chain does not end at 0x%x: a cycle?" % cf,
                                           cf)
                if f < nextframe:
                    break
                if self.is_lua(f):
                    nf = self.prevl(f)
                else:
                    if self.is_c(f) or (self.is_cont(f) and self.frame_iscont_fficb(f)):
                        cf = self._cf_read(cf, "prev") & CFRAME_RAWMASK
                    nf = self.prevd(f)
                if nf >= f:
                    raise CorruptError("frame link at 0x%x does not go down the stack" % f, f)
                f = nf
            ins = self._cf_read(cf, "pc")
            if not ins:
                return NO_BCPOS
        pos = (ins - pt.bc) // 4 - 1
        if pos < 0 or pos > pt.sizebc:
            # R: undo lj_trace_exit for JLOOP; otherwise punt.  (A trace's
            # memory, not the stack's, gives it.)
            self._pc_from_stack = False
            return self._jloop_pos(pt, ins)
        return pos

    def _jloop_pos(self, pt, ins):
        lay = self.lay
        if lay.trace is None:
            return NO_BCPOS
        try:
            prev = self.vm.t.u32(ins - 4, "bytecode")
        except FaultError:
            return NO_BCPOS
        if not _bc_isret(self.vm, prev & 0xFF):
            return NO_BCPOS
        T = ins - 4 - lay.trace.startins
        startpc = self.vm.t.uint(T + lay.trace.startpc, lay.mref_size, "trace startpc")
        return (startpc - pt.bc) // 4


class _Earlier(object):
    """The last whole walk of one lua_State's stack (same stack address),
    kept in the VM caches (of the WALKS stacks walked last): its stack's
    bytes, its frames, and the slots of the frames that, with all older
    ones, were made from the stack's slots alone (fr.from_stack: no C
    frame's saved pc, no trace).

    rest(): when the walk at slot f (the frame made before it at
    nextframe) meets such a slot with the same nextframe, and the stack's
    bytes below nextframe's link are the ones the earlier walk read, the
    frames from there on are the earlier walk's: a walk from f reads only
    slots below nextframe + 8 (links and function slots; the pc of f's
    frame is nextframe's link), and bytecode, line tables and prototypes,
    which do not change while a function lives.  The functions are read
    again (one cannot be freed while its frame lives, but its memory could
    have been reused by the time the same slot holds the same address
    again).  Frames are shared between walks when their levels agree,
    copied and renumbered otherwise; nothing changes a Frame once made."""

    WALKS = 64

    def __init__(self, data: bytes, frames: List[Frame], at: Dict[int, int]) -> None:
        self.data = data
        self.frames = frames
        self.at = at

    @staticmethod
    def _key(walker: FrameWalker) -> Tuple[int, int]:
        return (walker.th.addr, walker.stack.start)

    @classmethod
    def of(cls, walker: FrameWalker) -> Optional['_Earlier']:
        cache = getattr(walker.vm, "cache", None)
        if cache is None:
            return None
        return cache("walks").get(cls._key(walker))

    @classmethod
    def keep(cls, walker: FrameWalker, frames: List[Frame]) -> None:
        cache = getattr(walker.vm, "cache", None)
        if cache is None or not frames:
            return
        # The frames from the outermost up to the first not made from stack
        # slots alone, by slot (lists, not a loop: a profile keeps a walk
        # of every sample).
        n = len(frames)
        flags = [fr.from_stack for fr in frames]
        k = n - flags[::-1].index(False) if False in flags else 0
        at = dict(zip([fr.slot for fr in frames[k:]], range(k, n)))
        walks = cache("walks")
        key = cls._key(walker)
        walks.pop(key, None)
        while len(walks) >= cls.WALKS:
            walks.pop(next(iter(walks)))
        walks[key] = cls(walker.stack.data, frames, at)

    def _common(self, walker: FrameWalker) -> int:
        """How many leading bytes the walker's stack shares with the
        earlier walk's (worked out once per walk)."""
        got = walker._common
        if got is None:
            a, b = self.data, walker.stack.data
            lo, hi = 0, min(len(a), len(b))
            if a[:hi] == b[:hi]:
                lo = hi
            while lo < hi:          # (the first lo bytes match)
                mid = (lo + hi + 1) // 2
                if a[lo:mid] == b[lo:mid]:
                    lo = mid
                else:
                    hi = mid - 1
            got = walker._common = lo
        return got

    def rest(self, walker: FrameWalker, f: int, nextframe: int,
             level: int) -> Optional[List[Frame]]:
        i = self.at.get(f)
        if i is None:
            return None
        old = self.frames[i]
        if old.nextframe != nextframe or \
                self._common(walker) < nextframe + 8 - walker.stack.start:
            return None
        checked = set()
        for fr in self.frames[i:]:
            if fr.fn in checked:
                continue
            fn = walker._funcs.get(fr.func)
            if fn is None:
                try:
                    fn = walker._funcs[fr.func] = Func(walker.vm, fr.func)
                except (CorruptError, FaultError):
                    return None
            if (fn.ffid, fn.pc, fn.cfunc) != (fr.fn.ffid, fr.fn.pc, fr.fn.cfunc):
                return None
            checked.add(fr.fn)
        if old.level == level:
            return self.frames[i:]
        out = []
        for fr in self.frames[i:]:
            new = copy.copy(fr)
            new.level = fr.level - old.level + level
            out.append(new)
        return out


def _site(caller: Frame) -> Optional[Tuple['Proto', int]]:
    """The call site a frame was called from when caller is the frame
    below it: the caller's position there (framepc from the frame above
    it), when the caller is a Lua function."""
    if caller.kind == "lua" and caller.pos is not None:
        return (caller.proto, caller.pos)
    return None


def _bc_isret(vm, op):
    names = vm.lay.bc_names
    n = names.get(op)
    return n in ("BC_RETM", "BC_RET", "BC_RET0", "BC_RET1")


def frame_locals(walker: FrameWalker, fr: Frame, frames_top: int,
                 with_addr: bool = False) -> List[Tuple[Any, ...]]:
    """[(name, Value)] of a Lua frame: named locals, then varargs (with
    with_addr, [(name, Value, slot address)]).  frames_top: address limit
    of this frame's slots (the next frame's link slot, or L->top for the
    innermost frame)."""
    vm = walker.vm
    pt = fr.proto
    out = []
    limit = frames_top

    def add(name, addr):
        try:
            v = walker.stack.tv(addr)
        except CorruptError as e:
            v = e
        out.append((name, v, addr) if with_addr else (name, v))

    for idx, name in local_names(vm, pt, fr.pos):
        addr = fr.base + 8 * idx
        if addr >= limit + 8 * walker.fr2 and fr.nextframe is not None:
            break
        add(name, addr)
    if fr.pos is not None and pt.flags & PROTO_VARARG:
        # R debug_localname for negative slots: varargs live below the frame.
        f = fr.slot
        nextframe = fr.nextframe if fr.nextframe is not None else frames_top + 8 * walker.fr2
        if walker.is_varg(f):
            nextframe = f
            f = walker.prevd(f)
        k = 1
        while k < 1000:
            s = pt.numparams + k
            if not (f + 8 * (s + walker.fr2) < nextframe):
                break
            add("(*vararg %d)" % k, f + 8 * s)
            k += 1
    return out


def frame_upvalues(vm: 'VM', fr: Frame, with_addr: bool = False) -> List[Tuple[Any, ...]]:
    """[(name, Value)] of a Lua frame's function upvalues (with with_addr,
    [(name, Value, address of the value)], the address None when the
    upvalue cannot be read)."""
    return func_upvalues(vm, fr.fn, fr.proto, with_addr)


def func_upvalues(vm: 'VM', fn: Any, proto: Any = None,
                  with_addr: bool = False) -> List[Tuple[Any, ...]]:
    """frame_upvalues of function fn (a Func; proto: its Proto, for a Lua
    function, when the caller has it): a Lua function's upvalues by the
    names its prototype keeps; a C closure's or a builtin's, kept in the
    closure itself (R lj_obj.h GCfuncC upvalue[]), as debug.getupvalue
    gives them, without names ("" here: the caller numbers them)."""
    out = []
    if not fn.is_lua:           # (a C function's, or a builtin's: coroutine.wrap's)
        for i in range(fn.nupvalues):
            addr = fn.addr + vm.lay.fnC.upvalue + 8 * i
            try:
                v = decode_tv(vm, vm.t.u64(addr, "C closure upvalue"))
            except (CorruptError, FaultError) as e:
                v = e
            out.append(("", v, addr) if with_addr else ("", v))
        return out
    if proto is None:
        proto = cached_proto(vm, fn.proto)
    names = upvalue_names(vm, proto)
    from ..vm.objects import Upval
    for i, ref in enumerate(fn.upvalue_refs(vm)):
        name = names[i] if i < len(names) else "?%d" % i
        addr = None
        try:
            addr = Upval(vm, ref).v
            v = decode_tv(vm, vm.t.u64(addr, "upvalue value"))
        except (CorruptError, FaultError) as e:
            v = e
        out.append((name, v, addr) if with_addr else (name, v))
    return out
