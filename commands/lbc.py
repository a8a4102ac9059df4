"""lbc: a prototype's bytecode as `luajit -bl` lists it (gdb_ext.jit.bytecode)."""
import re

from ..gdb_ext import consts as C
from ..gdb_ext.jit.bytecode import dump
from ..gdb_ext.errors import CorruptError, FaultError
from ..gdb_ext.vm.objects import Func, Proto
from ..gdb_ext.vm.walkers import root_objects
from .base import LjCommand, UsageError, get_vm, split_args
from .format import chunk_display, hexa
from .lgcref import target_object


def _site(text):
    """(chunk, line) of a 'chunk:line' argument, or None."""
    chunk, _, line = text.rpartition(":")
    if chunk and line.isdigit():
        return chunk, int(line)
    return None


def find_protos(vm, chunk, line):
    """The prototypes defined at chunk:line (the chunk as lbt shows it, or
    the end of its path), in the order of the GC root list."""
    out = []
    for o, gct in root_objects(vm):
        if gct != C.GCT_PROTO:
            continue
        try:
            pt = Proto(vm, o)
            if pt.firstline != line:
                continue
            name = chunk_display(pt.chunk(vm))
        except (FaultError, CorruptError):
            continue
        if name == chunk or name.endswith("/" + chunk):
            out.append(o)
    return out


def _chunk(text):
    """Whether an argument is a chunk's name alone (app.lua, lib/app.lua):
    its main function, as chunk:0."""
    return re.match(r"^[\w./@=+-]+\.lua$", text) is not None and not text.startswith("0x")


def proto_of(vm, expr):
    """The prototype an argument names: a Lua function or a prototype (a
    pointer, a TValue holding it, an address), chunk:line, or a chunk's
    name alone (its main function)."""
    site = _site(expr)
    bare = site is None and _chunk(expr)
    if bare:
        site = (expr, 0)
    if site is not None and not expr.startswith(("0x", "(")):
        found = find_protos(vm, *site)
        if not found and bare:
            raise UsageError("no chunk named %s is loaded (give its name as lbt shows it, or the "
                             "end of its path)" % expr)
        if not found:
            raise UsageError("no prototype is defined at %s (give a function or prototype, or "
                             "chunk:line as lbt shows it with the line of its 'function')"
                             % expr)
        if len(found) > 1:
            raise UsageError("%d prototypes are defined at %s: %s; name one by address"
                             % (len(found), expr, ", ".join(hexa(a) for a in found)))
        return found[0]
    addr, gct = target_object(vm, expr)
    if gct == C.GCT_PROTO:
        return addr
    if gct == C.GCT_FUNC:
        fn = Func(vm, addr)
        if not fn.is_lua:
            raise UsageError("0x%x is a C function or fast function: it has no bytecode" % addr)
        return fn.proto
    raise UsageError("0x%x is a %s, not a Lua function or prototype" % (addr, C.GCT_TEXT[gct]))


class LBc(LjCommand):
    """The bytecode of a Lua function's prototype, as LuaJIT's own listing
(jit/bc.lua: `luajit -bl`, jit.bc.dump) writes it: position, jump targets
(=>), opcode, operands, and the constants, upvalue names and child
functions they name.  Instructions the JIT has patched (JFORL, JLOOP ...)
are shown as they are in memory, as jit.bc.dump in the process shows them.
  --all   the function's child prototypes too, depth first, before it (a
          chunk's main function gives the listing of `luajit -bl` for the
          whole file)

  A chunk's name alone (app.lua) is its main function, app.lua:0.

Usage: lbc <function | prototype | chunk:line | chunk> [--all] [L=<lua_State *>]
Example:
  (gdb) lbc leak.lua:48
  -- BYTECODE -- leak.lua:48-48
  0001    UGET     0   0      ; big
  0002    RET1     0   2"""

    NAME = "lbc"
    SUMMARY = "a function's bytecode, as luajit -bl lists it"
    WORDS = ("--all",)
    USAGE = "lbc <function | prototype | chunk:line | chunk> [--all] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.data(arg)
        return doc["lines"]

    def run_json(self, arg, from_tty):
        return self.data(arg)

    def data(self, arg):
        flags, opts, state, rest = split_args(arg, flags=("all",))
        if not rest:
            raise UsageError("missing function")
        vm = get_vm(state)
        pt = proto_of(vm, " ".join(rest))
        lines = dump(vm, pt, "all" in flags)
        if lines and lines[-1] == "":
            lines = lines[:-1]
        return {"proto": hexa(pt), "all": "all" in flags, "lines": lines}
