"""One Lua frame picked out of a thread's backtrace, numbered as lbt
numbers frames (lua_getstack's levels), and what a user asks of it: a
name resolved as Lua resolves it at the frame's current line, and the
lines of its source (the commands lframe, lup, ldown, llocals, lprint,
llist).

Name resolution follows the compiler (R lj_parse.c var_lookup): an active
local first, the one declared last when several share the name; then an
upvalue of the function; else a field of the function's environment
table (a global), read raw: a metatable's __index is not called, and a
missing field under one is said to be unknown, not nil."""
import os
from typing import Any, List, Optional, Sequence, Tuple, TYPE_CHECKING

from ..errors import CorruptError, FaultError, LjError
from ..vm.objects import Tab
from ..vm.runtime import tab_get_str
from .frames import frame_locals, frame_upvalues

if TYPE_CHECKING:  # for the annotations only (no import cycle at run time)
    from .backtrace import Backtrace, Backtracer
    from .frames import Frame
    from ..vm.state import VM


class Picked(object):
    """Frame `level` of thread L: b (its Backtrace), i (the frame's index
    in b.frames), fr (the Frame), first and last (the levels there are)."""

    def __init__(self, L: int, b: 'Backtrace', i: int) -> None:
        self.L = L
        self.b = b
        self.i = i
        self.fr = b.frames[i]
        self.level = self.fr.level + b.hidden_top
        self.first = b.frames[0].level + b.hidden_top
        self.last = b.frames[-1].level + b.hidden_top


def pick(bt: 'Backtracer', L: int, level: int) -> Picked:
    """Frame `level` of thread L; LjError when the thread has no such frame."""
    b = bt.backtrace(L)
    if not b.frames:
        raise LjError("(lua_State *)0x%x has no Lua frames%s" % (
            L, ": %s" % b.error if b.error is not None else ""))
    for i, fr in enumerate(b.frames):
        if fr.level + b.hidden_top == level:
            return Picked(L, b, i)
    first, last = b.frames[0].level + b.hidden_top, b.frames[-1].level + b.hidden_top
    more = " (the walk stopped there: %s)" % b.error if b.error is not None else ""
    raise LjError("no frame #%d: (lua_State *)0x%x has frames #%d to #%d%s"
                  % (level, L, first, last, more))


class Resolved(object):
    """What a name denotes in a frame: kind ('local', 'upvalue', 'global'),
    value (a Value; None when it cannot be known), note (why not, or what
    to know about it), addr (where the value is, when known)."""

    def __init__(self, kind: str, value: Any, note: Optional[str] = None,
                 addr: Optional[int] = None) -> None:
        self.kind = kind
        self.value = value
        self.note = note
        self.addr = addr
        self.nil = False            # absent, and so nil in Lua (value None, note says why)


def resolve(bt: 'Backtracer', p: Picked, name: str) -> Resolved:
    """Name `name` in frame p, as the frame's code would read it (a name
    that is no local or upvalue is a global: absent from an environment
    table without a metatable, its Resolved has nil set)."""
    vm = bt.vm
    fr = p.fr
    if fr.kind != "lua":
        raise LjError("frame #%d is a %s function: it has no named variables" % (
            p.level, "builtin" if fr.kind == "builtin" else "C"))
    locs = frame_locals(p.b.walker, fr, p.b.frame_top(p.i), with_addr=True)
    for lname, v, addr in reversed(locs):
        if lname != name:
            continue
        if addr is not None and bt.in_trace_value(p.b, fr, addr):
            snap = p.b.start.trace
            return Resolved("local", None, "in trace %d: kept in a register or spill slot, the "
                            "stack slot is stale" % snap.traceno, addr)
        return Resolved("local", v, None, addr)
    for uname, v, addr in frame_upvalues(vm, fr, with_addr=True):
        if uname == name:
            return Resolved("upvalue", v, None, addr)
    return _global(vm, fr, name)


def _global(vm: 'VM', fr: 'Frame', name: str) -> Resolved:
    env = fr.fn.env
    try:
        v = tab_get_str(vm, env, name.encode("utf-8", "surrogateescape"))
        mt = Tab(vm, env).metatable
    except (FaultError, CorruptError) as e:
        return Resolved("global", None, "the environment table (GCtab *)0x%x cannot be read: %s"
                        % (env, e))
    if v is not None and v.kind != "nil":
        return Resolved("global", v)
    if mt:
        return Resolved("global", None, "not a field of the environment table (GCtab *)0x%x, "
                        "which has a metatable: its __index is not called" % env)
    got = Resolved("global", None, "not a field of the environment table (GCtab *)0x%x" % env)
    got.nil = True
    return got


def source_file(chunk: str, dirs: Sequence[str]) -> Tuple[Optional[str], str]:
    """(path of the file a chunk was loaded from, as found; or None, and
    why not: the caller says how to name directories to look in).
    chunk: the chunk's name as LuaJIT keeps it ('@app.lua' for a file).
    The name is tried as it is (relative to the working directory), then
    under each of dirs, as it is and by its last part."""
    if not chunk.startswith("@"):
        return None, "the chunk %s was loaded from a string, not a file" % (
            chunk if chunk.startswith("=") else '"%s"' % chunk[:60])
    name = chunk[1:]
    tried = [name]
    for d in dirs:
        tried.append(os.path.join(d, name))
        tried.append(os.path.join(d, os.path.basename(name)))
    for path in tried:
        if os.path.isfile(path):
            return path, ""
    return None, "no file %s%s" % (name, " (nor under %s)" % ", ".join(dirs) if dirs else "")


def source_lines(path: str, line: int, count: int) -> Tuple[List[Tuple[int, str]], Optional[str]]:
    """([(number, text)] of `count` lines of file path centred on line, and
    a warning when the file is shorter than the line (not the source the
    chunk was loaded from?), else None)."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace").splitlines()
    if line > len(text):
        return [], "%s has %d lines, fewer than line %d: it is not the file the chunk was " \
                   "loaded from" % (path, len(text), line)
    lo = max(1, line - count // 2)
    hi = min(len(text), lo + count - 1)
    lo = max(1, min(lo, hi - count + 1))
    return [(n, text[n - 1]) for n in range(lo, hi + 1)], None
