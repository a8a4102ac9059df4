"""Lua frames in gdb's own backtrace: a frame filter that puts, after each
machine frame of LuaJIT's VM, the Lua frames that entry into the VM runs
(gdb_ext.stack.backtrace.vm_entry finds them), named as lbt names them.

  bt               the C frames with the Lua frames between them
  bt full          also each Lua frame's locals and upvalues
  bt -no-filters   gdb's plain view (or: disable frame-filter global ljgdb-lua)

A Lua frame has no machine frame of its own, so it carries no frame
number: gdb prints it indented under the VM's frame that runs it."""
import gdb
from gdb.FrameDecorator import FrameDecorator

from ...gdb_ext.stack.backtrace import Backtracer, vm_entry
from ...gdb_ext.errors import CorruptError, FaultError, LjError
from ...gdb_ext.stack.frames import frame_locals, frame_upvalues
from ...gdb_ext.backends.gdbtarget import machine_frame
from ...gdb_ext.vm.state import VM
from ..base import display_vm, param
from ..format import chunk_display, value_text
from ..lbt import BtFormat

FILTER_NAME = "ljgdb-lua"


class LuaFrame(object):
    """A decorator for one Lua (or builtin) frame: no machine frame of its
    own, so inferior_frame is the VM's frame that runs it (gdb then prints
    no frame number for it)."""

    def __init__(self, ctx, vm_frame, entry, index, text):
        self.ctx = ctx
        self.vm_frame = vm_frame
        self.entry = entry
        self.index = index
        self.fr = entry.frames[index] if index is not None else None
        self.text = text

    def elided(self):
        return None

    def function(self):
        return self.text

    def address(self):
        return None

    def filename(self):
        fr = self.fr
        if fr is None or fr.kind != "lua":
            return None
        return self.ctx.chunk(fr)

    def line(self):
        fr = self.fr
        return fr.line if fr is not None and fr.kind == "lua" else None

    def frame_args(self):
        return None

    def frame_locals(self):
        fr = self.fr
        if fr is None or fr.kind != "lua":
            return None
        return [_Local(n, v) for n, v in self.ctx.locals(self.entry, self.index)]

    def inferior_frame(self):
        return self.vm_frame


class _Local(object):
    """A Lua local as gdb's frame printing wants it."""

    def __init__(self, name, value):
        self.name = name
        self.val = value

    def symbol(self):
        return self.name

    def value(self):
        return self.val


class _Context(object):
    """One backtrace's view of the VM (made on the first VM frame)."""

    def __init__(self):
        self.bt = None
        self.failed = False
        self._fmt = None
        self._places = {}       # id(backtrace) -> (it, {id(frame): its index})

    def backtracer(self):
        if self.bt is None and not self.failed:
            vm = display_vm((gdb.error,))
            try:
                self.bt = Backtracer(vm) if isinstance(vm, VM) else None
            except (LjError, FaultError, CorruptError, gdb.error):
                self.bt = None
            self.failed = self.bt is None
        return self.bt

    def chunk(self, fr):
        return chunk_display(fr.proto.chunk(self.bt.vm))

    def text(self, fr):
        fmt = self._fmt
        if fmt is None:
            fmt = self._fmt = BtFormat(self.bt.vm, self.bt)
        if fr.kind == "lua":
            # The name its caller gave it (lbt's), as gdb names a C function.
            named = self.bt.frame_key(fr)[3]
            return "[Lua] %s" % named[1] if named else "[Lua]"
        return fmt.frame_text(fr)

    def locals(self, entry, i):
        """[(name, gdb value)] of the entry's frame i: its locals, varargs
        and upvalues, each the TValue in memory (the ljgdb pretty-printer
        prints it as lbt full does), or text where that is not the value."""
        b = entry.backtrace
        fr = entry.frames[i]
        # (a dict: list.index for each of 5000 frames was a tenth of bt full)
        kept = self._places.get(id(b))
        if kept is None or kept[0] is not b:
            kept = self._places[id(b)] = (b, {id(f): k for k, f in enumerate(b.frames)})
        j = kept[1][id(fr)]
        vm = self.bt.vm
        try:
            tv = gdb.lookup_type("TValue").pointer()
        except gdb.error:
            tv = None
        maxs = param("max-string")

        def val(v, addr):
            if isinstance(v, Exception):
                return gdb.Value("<unreadable: %s>" % v)
            if tv is None or addr is None:
                return gdb.Value(value_text(vm, v, maxs))
            return gdb.Value(addr).cast(tv).dereference()

        out = []
        for name, v, addr in frame_locals(b.walker, fr, b.frame_top(j), with_addr=True):
            if self.bt.in_trace_value(b, fr, addr):
                out.append((name, gdb.Value("<in trace %d: kept in a register or spill slot, "
                                            "the stack slot is stale>" % b.start.trace.traceno)))
                continue
            out.append((name, val(v, addr)))
        for name, v, addr in frame_upvalues(vm, fr, with_addr=True):
            out.append(("upvalue " + name, val(v, addr)))
        return out


class LuaFrameFilter(object):
    """gdb frame filter 'ljgdb-lua' (see the module's docstring)."""

    def __init__(self):
        self.name = FILTER_NAME
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        return _interleave(frames)


class VMFrame(FrameDecorator):
    """A machine frame of the VM, with the Lua frames it runs as its
    elided frames (gdb prints them indented under it); named from the
    layout profile when the binary has no symbols for the VM's code."""

    def __init__(self, base, lua_frames, name=None):
        super().__init__(base)
        self.lua_frames = lua_frames
        self.name = name

    def elided(self):
        return iter(self.lua_frames) if self.lua_frames else None

    def function(self):
        return self.name if self.name else super().function()


def _interleave(frames):
    ctx = _Context()
    seen = set()
    for level, dec in enumerate(frames):
        lua = m = gf = None
        try:
            gf = dec.inferior_frame()
            m = machine_frame(gf, level)
            # The VM's code (lj_vm_*, lj_BC_*, lj_ff_*), or code without a
            # symbol (a trace's).
            if m is not None and not m.has_debug and (not m.name or m.name.startswith("lj_")):
                lua = _lua_frames(ctx, gf, m, seen)
        except (gdb.error, RuntimeError, FaultError, CorruptError, LjError):
            lua = None
        # A frame gdb cannot name: the VM's label from the layout profile
        # (a stripped LuaJIT), else '??' as gdb's plain bt writes it.
        name = None
        if m is not None and not _gdb_name(gf):
            name = m.name or "??"
        yield VMFrame(dec, lua, name) if lua or name else dec


def _gdb_name(gf):
    try:
        return gf.name()
    except (gdb.error, RuntimeError):
        return None


def _lua_frames(ctx, gf, m, seen):
    """The decorators of the Lua frames machine frame m (gdb frame gf)
    runs, or None (also for a second frame of an entry already shown: the
    unwinder's misreading after a leaf helper of the VM)."""
    bt = ctx.backtracer()
    if bt is None:
        return None
    entry = vm_entry(bt, m)
    if entry is None or (entry.L, entry.cframe) in seen:
        return None
    seen.add((entry.L, entry.cframe))
    out = [LuaFrame(ctx, gf, entry, i, ctx.text(fr)) for i, fr in enumerate(entry.frames)]
    if entry.warning:
        out.append(LuaFrame(ctx, gf, entry, None, "[Lua: %s]" % entry.warning))
    return out
