"""The names of a sampled profile's frames (gdb_ext.stack.samples' frame
keys), shared by lprofile (gdb) and record/top (--pid): each key read once,
at the sample that first has it, while the process still holds it (a
program that exits during a profile takes its memory with it).

A frame's facts are (text, file, line, function, start): text as lbt
names the frame ("app.lua:12", "[builtin#pairs]", "C:lua_pcall", a machine
frame's symbol, a system call's name, "[VM 0x...]"), and a Lua frame whose
caller gave it a name (lbt's "in upvalue 'busy'") as py-spy names a frame,
"busy (app.lua:12)"; the chunk and line of a Lua frame; the function it
belongs to (pprof's function name: "busy", or "function app.lua:10" for a
function without a name); and the line that function is defined on.  The
top table names a function "busy (app.lua:10)" or "function app.lua:10"."""
from typing import Any, Dict, Optional, Sequence, Tuple

from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.stack.samples import function_key
from ..gdb_ext.vm.protoinfo import cached_proto
from .format import chunk_display
from .lbt import BtFormat

Facts = Tuple[str, Optional[str], Optional[int], str, Optional[int]]


class FrameNames(object):
    """vms: {G: VM} of the VMs sampled (the frames of VM G are named
    through vms[G]); syscalls: system call number -> name."""

    def __init__(self, vms: Dict[int, Any], syscalls: Dict[int, str]) -> None:
        self.vms = vms
        self.fmt = {G: BtFormat(vm) for G, vm in vms.items()}
        self.syscalls = syscalls
        self.facts = {}
        self.functions = {}

    def learn(self, keys: Sequence[Tuple[Any, ...]], G: Optional[int] = None) -> None:
        """Name the frames of one stack of VM G (default: the only one)."""
        G = next(iter(self.vms)) if G is None else G
        for k in set(keys):         # (a deep recursion repeats a few keys)
            if k not in self.facts:
                self.facts[k] = self._facts(k, G)
            fk = function_key(k)
            if fk not in self.functions:
                self.functions[fk] = self._function(fk, G)

    def frame(self, k: Tuple[Any, ...]) -> str:
        """A frame's text (named now when no sample named it)."""
        return (self.facts.get(k) or self._facts(k, next(iter(self.vms))))[0]

    def frame_facts(self, k: Tuple[Any, ...]) -> Facts:
        return self.facts.get(k) or ("??", None, None, "??", None)

    def function(self, fk: Tuple[Any, ...]) -> str:
        return self.functions[fk] if fk in self.functions else \
            self._function(fk, next(iter(self.vms)))

    def _facts(self, k: Tuple[Any, ...], G: int) -> Facts:
        if k[0] == "M":
            return (k[1] or "??", None, None, k[1] or "??", None)
        if k[0] == "S":
            name = self.syscalls.get(k[1], "syscall %d" % k[1])
            return (name, None, None, name, None)
        if k[0] == "VM":
            name = "[VM 0x%x]" % k[1]
            return (name, None, None, name, None)
        if k[0] == "?":
            name = "[%s]" % k[1]
            return (name, None, None, name, None)
        try:
            text = self.fmt[G].key_text(k)
        except (FaultError, CorruptError):
            text = "?? (unreadable)"
        if k[0] == "L":
            vm = self.vms[G]
            try:
                start = cached_proto(vm, k[1]).firstline
            except (FaultError, CorruptError):
                start = None
            named = k[3]
            if named and named[1]:
                return ("%s (%s)" % (named[1], text), text.rsplit(":", 1)[0], k[2], named[1], start)
            return (text, text.rsplit(":", 1)[0], k[2], self._function(function_key(k), G), start)
        return (text, None, None, text, None)

    def _function(self, fk: Tuple[Any, ...], G: int) -> str:
        if fk[0] == "LF":
            vm = self.vms[G]
            try:
                pt = cached_proto(vm, fk[1])
                place = "%s:%d" % (chunk_display(pt.chunk(vm)), pt.firstline)
            except (FaultError, CorruptError):
                return "function at 0x%x (unreadable)" % fk[1]
            return "%s (%s)" % (fk[2][1], place) if fk[2] and fk[2][1] else "function " + place
        if fk[0] == "M":
            return fk[1] or "?? (0x%x)" % fk[2]
        return self._facts(fk, G)[0]


def frames_of(stacks: Dict[Tuple[Any, ...], int], names: FrameNames) -> list:
    """[(tuple of profout.Frame, outermost first, count)] of SampledStacks'
    stacks (keys outermost first), named; stacks that read the same are
    summed, most counted first."""
    from .profout import Frame
    out = {}
    for stack, n in stacks.items():
        frames = tuple(Frame(*names.frame_facts(k)) for k in stack)
        out[frames] = out.get(frames, 0) + n
    return sorted(out.items(), key=lambda e: -e[1])
