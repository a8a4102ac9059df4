"""lframe, lup, ldown, llocals, lprint, llist: a selected Lua frame to look
at, as gdb's frame, up, down, info locals, print and list do for C frames
(the engine: gdb_ext.stack.luaframe).

The selection is one frame level per lua_State, numbered as lbt numbers
frames; gdb forgets it when the program runs again (commands.hosts.gdbhost).
The core reader and a live process start from --frame N (default 0)."""
from .base import LjCommand, UsageError, get_vm, int_option, param, split_args
from .format import hexa, table_data, table_header, table_lines, value_text
from .host import current
from .lbt import BtFormat
from ..gdb_ext.errors import LjError
from ..gdb_ext.stack.luaframe import pick, resolve, source_file, source_lines
from ..gdb_ext.vm.objects import Tab

# {(G, L): the selected level}
_selected = {}


def forget(*_):
    """Forget every selection (the program ran again)."""
    _selected.clear()


def _start():
    return getattr(current(), "start_frame", 0)


def _vm_and_format(L_expr):
    vm = get_vm(L_expr)
    return vm, BtFormat(vm)


def _picked(fmt, level=None):
    """The selected frame of the VM's thread (or frame `level`), selected."""
    vm = fmt.vm
    key = (vm.G, vm.L)
    if level is None:
        level = _selected.get(key, _start())
    p = pick(fmt.bt, vm.L, level)
    _selected[key] = p.level
    return p


def _count(rest, name):
    if not rest:
        return None
    if len(rest) > 1 or not rest[0].lstrip("-").isdigit():
        raise UsageError("%s takes a number of frames, not '%s'" % (name, " ".join(rest)))
    return int(rest[0])


class _FrameCommand(LjCommand):
    """A command that shows the selected frame, as lbt prints it."""

    def count_and_format(self, arg):
        """(the count N the command was given, or None; a BtFormat)."""
        _, _, L_expr, rest = split_args(arg)
        n = _count(rest, self.NAME)
        if n is not None and n < 0:
            raise UsageError("N counts frames: at least 0")
        return n, _vm_and_format(L_expr)[1]

    def frame_doc(self, fmt, p, full=False):
        d = fmt.frame_data(p.b, p.i, full)
        return {"L": hexa(p.L), "level": p.level, "first": p.first, "last": p.last, "frame": d}

    def run(self, arg, from_tty):
        doc = self.run_json(arg, from_tty)
        return BtFormat.frame_lines(doc["frame"])


class LFrame(_FrameCommand):
    """Select a Lua frame and print it, as gdb's frame does for C frames.

The frames are numbered as lbt numbers them (0 is the innermost).  Without
N, print the selected frame (at first frame 0; in the core reader, --frame
N before the core chooses it).  lup, ldown, llocals, lprint and llist work
on the selected frame; gdb forgets the selection when the program runs.

Usage: lframe [N] [L=<lua_State *>]
Example:
  (gdb) lframe 1
  #1   testprogs/lua/frames.lua:62: in upvalue 'inner'"""

    NAME = "lframe"
    SUMMARY = "select a Lua frame by its number in lbt and print it"
    USAGE = "lframe [N] [L=<lua_State *>]"

    def run_json(self, arg, from_tty):
        n, fmt = self.count_and_format(arg)
        return self.frame_doc(fmt, _picked(fmt, n))


class LUp(_FrameCommand):
    """Select the Lua frame N levels further out (default 1: the caller of
the selected frame) and print it, as gdb's up does for C frames.

Usage: lup [N] [L=<lua_State *>]
Example:
  (gdb) lup
  #2   testprogs/lua/frames.lua:68: in upvalue 'middle'"""

    NAME = "lup"
    SUMMARY = "select the Lua frame that called the selected one (N levels out)"
    USAGE = "lup [N] [L=<lua_State *>]"
    SIGN = 1

    def run_json(self, arg, from_tty):
        n, fmt = self.count_and_format(arg)
        p = _picked(fmt)
        want = p.level + self.SIGN * (1 if n is None else n)
        if want > p.last or want < p.first:
            raise LjError("no frame %s #%d: the frames are #%d to #%d, #%d is selected" % (
                "out from" if self.SIGN > 0 else "in from", p.level, p.first, p.last, p.level))
        return self.frame_doc(fmt, _picked(fmt, want))


class LDown(LUp):
    """Select the Lua frame N levels further in (default 1: the one the
selected frame called) and print it, as gdb's down does for C frames.

Usage: ldown [N] [L=<lua_State *>]
Example:
  (gdb) ldown
  #1   testprogs/lua/frames.lua:62: in upvalue 'inner'"""

    NAME = "ldown"
    SUMMARY = "select the Lua frame the selected one called (N levels in)"
    USAGE = "ldown [N] [L=<lua_State *>]"
    SIGN = -1


class LLocals(_FrameCommand):
    """Print the selected Lua frame's locals that are active at its line,
its varargs and its function's upvalues, as lbt full prints each frame.
Inside a trace, a local kept in a register says so: its stack slot is
stale.

Usage: llocals [L=<lua_State *>]
Example:
  (gdb) llocals
  #2   testprogs/lua/frames.lua:68: in upvalue 'middle'
        n = 7
        label = "mid"
        upvalue inner = function: (GCfuncL *)0x7ffff7cbf7d0 testprogs/lua/frames.lua:58"""

    NAME = "llocals"
    SUMMARY = "the selected Lua frame's locals, varargs and upvalues"
    USAGE = "llocals [L=<lua_State *>]"

    def run_json(self, arg, from_tty):
        _, _, L_expr, rest = split_args(arg)
        if rest:
            raise UsageError("unexpected argument '%s'" % rest[0])
        _, fmt = _vm_and_format(L_expr)
        return self.frame_doc(fmt, _picked(fmt), full=True)


class LPrint(LjCommand):
    """Print the value a name has in the selected Lua frame, as the frame's
code would read it there: an active local (the one declared last, when
several share the name), else an upvalue of its function, else a field
of the function's environment table (a global; read as it is: a
metatable's __index is not called).  A table is printed as ltab prints
it, to --depth levels.

Usage: lprint NAME [--depth N] [L=<lua_State *>]
Example:
  (gdb) lprint x
  x = 24 (local of #1 testprogs/lua/frames.lua:62)"""

    NAME = "lprint"
    SUMMARY = "a variable of the selected Lua frame by its name: local, upvalue or global"
    WORDS = ("--depth",)
    USAGE = "lprint NAME [--depth N] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.run_json(arg, from_tty)
        where = "%s of #%d %s" % (doc["kind"], doc["level"], doc["frame"])
        if doc["value"] is None:
            return ["%s = %s (%s; %s)" % (doc["name"], "nil" if doc.get("nil") else "<unknown>",
                                          where, doc["note"])]
        out = ["%s = %s (%s)" % (doc["name"], doc["value"], where)]
        if "table" in doc:
            out.append(doc["table"]["header"])
            out.extend(table_lines(doc["table"]))
        return out

    def run_json(self, arg, from_tty):
        _, opts, L_expr, rest = split_args(arg, options=("depth",))
        if len(rest) != 1:
            raise UsageError("give one name" if not rest else
                             "one name, not '%s' (fields: lprint the table, then ltab)"
                             % " ".join(rest))
        name = rest[0]
        if not (name.replace("_", "a").isalnum() and not name[0].isdigit()):
            raise UsageError("'%s' is not a Lua name" % name)
        depth = int_option(opts, "depth", 1, 1)
        vm, fmt = _vm_and_format(L_expr)
        p = _picked(fmt)
        r = resolve(fmt.bt, p, name)
        doc = {"name": name, "kind": r.kind, "level": p.level,
               "frame": fmt.key_text(fmt.bt.frame_key(p.fr)), "note": r.note,
               "value": None, "nil": r.nil}
        if r.value is not None:
            doc["value"] = value_text(vm, r.value, param("max-string"))
            if r.value.kind == "table":
                t = Tab(vm, r.value.addr)
                tab = {"header": table_header(vm, t)}
                tab.update(table_data(vm, r.value.addr, depth, param("max-entries"),
                                      param("max-string")))
                doc["table"] = tab
        return doc


class LList(LjCommand):
    """List the source lines around the selected Lua frame's current line
(N lines, default 10), as gdb's list does; the current line is marked
with '>'.  The chunk's file is looked for as its name says, relative to the
working directory, then under each directory of 'set ljgdb source-path
DIR[:DIR...]'.  A chunk loaded from a string has no file to list.

Usage: llist [N] [L=<lua_State *>]
Example:
  (gdb) llist 3
  testprogs/lua/frames.lua:62 (testprogs/lua/frames.lua)
  61       local t = shared
  62   >   record_stack(); ljgdb_stop()
  63       return x, t"""

    NAME = "llist"
    SUMMARY = "the source lines around the selected Lua frame's line"
    USAGE = "llist [N] [L=<lua_State *>]"

    def run(self, arg, from_tty):
        doc = self.run_json(arg, from_tty)
        out = ["%s (%s)" % (doc["frame"], doc["file"])]
        for ln in doc["lines"]:
            out.append("%-5d%s %s" % (ln["line"], ">" if ln["line"] == doc["line"] else " ",
                                      ln["text"]))
        return out

    def run_json(self, arg, from_tty):
        _, _, L_expr, rest = split_args(arg)
        n = _count(rest, "llist")
        n = 10 if n is None else n
        if n < 1:
            raise UsageError("N is a number of lines: at least 1")
        vm, fmt = _vm_and_format(L_expr)
        p = _picked(fmt)
        fr = p.fr
        text = fmt.key_text(fmt.bt.frame_key(fr))
        if fr.kind != "lua":
            raise LjError("frame #%d (%s) is not a Lua function: no source to list"
                          % (p.level, text))
        if fr.line is None:
            raise LjError("frame #%d (%s): its current line is not known" % (p.level, text))
        dirs = [d for d in (param("source-path") or "").split(":") if d]
        path, why = source_file(fr.proto.chunk(vm), dirs)
        if path is None:
            if not dirs and why.startswith("no file "):
                why += " (name where to look: %s)" % current().setting_hint(
                    "source-path", "DIR[:DIR...]")
            raise LjError("frame #%d (%s): %s" % (p.level, text, why))
        lines, warning = source_lines(path, fr.line, n)
        if warning is not None:
            raise LjError("frame #%d (%s): %s" % (p.level, text, warning))
        return {"level": p.level, "frame": text, "file": path, "line": fr.line,
                "lines": [{"line": k, "text": t} for k, t in lines]}


def local_text(name):
    """$lua_local(name): the value `name` has in the selected Lua frame, as
    lprint resolves it, in lval's text; LjError when it cannot be known."""
    vm, fmt = _vm_and_format(None)
    p = _picked(fmt)
    r = resolve(fmt.bt, p, name)
    if r.value is None:
        if r.nil:
            return "nil"
        raise LjError("%s in #%d: %s" % (name, p.level, r.note))
    return value_text(vm, r.value, param("max-string"))


def frame_line(level=None):
    """$lua_frame_line([N]): the current line of the selected Lua frame (or
    of frame N, which stays unselected); LjError for a frame without one."""
    _, fmt = _vm_and_format(None)
    vm = fmt.vm
    p = pick(fmt.bt, vm.L, _selected.get((vm.G, vm.L), _start()) if level is None else level)
    if p.fr.kind != "lua" or p.fr.line is None:
        raise LjError("frame #%d (%s) has no current line" % (
            p.level, fmt.key_text(fmt.bt.frame_key(p.fr))))
    return p.fr.line
